//! mttl: MPC++ MTTL-style SPMD programming in Rust.
pub use mttl_comm as comm;
