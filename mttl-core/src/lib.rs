//! mttl's runtime.

pub mod thread;
