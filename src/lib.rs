//! mttl: MPC++ MTTL-style SPMD programming in Rust.
//!
//! Every process of a job runs the same program. Node 0 runs the function
//! marked [`macro@main`]; its lightweight threads call functions on other
//! nodes ([`invoke`], [`ainvoke`]), meet in FIFO cells ([`SyncCell`]) and
//! reach other nodes' memory through global pointers. Underneath, the
//! eight-primitive [`comm::Comm`] trait runs over TCP (the default) or MPI.
//!
//! ```ignore
//! #[mttl::remote]
//! fn add(a: i32, b: i32) -> i32 {
//!     a + b
//! }
//!
//! #[mttl::main]
//! fn main() {
//!     for node in 0..mttl::size() {
//!         assert_eq!(mttl::invoke(node, add, (1, 2)), 3);
//!     }
//! }
//! ```

pub use mttl_comm as comm;
pub use mttl_core::*;
pub use mttl_macros::{main, remote};
