//! The shared numerical core of NPB CG and IS, free of any communication
//! library.
//!
//! Both benchmark variants (plain MPI and mttl's paper style) are built from
//! this core: [`cg`] and [`is`] hold the algorithms, laid out as NPB 3.4-MPI
//! lays them out, and each names the communication it needs as a small
//! trait ([`cg::CgComm`], [`is::IsComm`]) that a driver implements.
//! [`randlc`] is NPB's random number generator and [`class`] the official
//! class tables. [`sim`] is the in-process reference driver the tests and
//! `examples/npb_serial.rs` use. [`drivers`] holds the two programs of each
//! kernel (plain MPI and the paper's style on mttl) that the `npb` binary
//! runs.

pub mod cg;
pub mod class;
pub mod drivers;
pub mod is;
mod prefetch;
pub mod randlc;
pub mod sim;

pub use class::{CgParams, Class, ClassError, IsParams};
