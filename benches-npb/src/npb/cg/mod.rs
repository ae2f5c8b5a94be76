//! NPB CG, communication-free: the numerical core both CG drivers share.
//!
//! CG estimates the smallest eigenvalue of a large sparse symmetric
//! positive-definite matrix by inverse power iteration, each step solving a
//! linear system with 25 unpreconditioned conjugate-gradient iterations.
//! The structure is NPB 3.4-MPI's: processes form a 2-D grid and each owns a
//! block of the matrix ([`grid`]), builds it exactly as the reference does
//! ([`matrix`]), stores it for a fast mat-vec with NPB's summation order
//! ([`block`]), and runs local kernels ([`kernels`]) between communication
//! steps that a driver supplies through the [`CgComm`] trait ([`comm`]).
//! [`solver`] strings them together.
//!
//! A driver (plain MPI, mttl remote writes, or the in-process
//! [`crate::npb::sim`]) implements [`CgComm`] and calls [`run_benchmark`],
//! or builds a [`CgRank`] and calls its steps itself.

pub mod block;
pub mod comm;
pub mod grid;
pub mod kernels;
pub mod matrix;
pub mod solver;

pub use block::SparseBlock;
pub use comm::{row_reduce, transpose, CgComm, Exchange, MAX_ROW_SUM};
pub use grid::{CgGrid, GridError, ReduceStep};
pub use matrix::CsrBlock;
pub use solver::{run_benchmark, CgIteration, CgRank, CgRun};
