//! `#[mttl::main]` and `#[mttl::remote]`.
