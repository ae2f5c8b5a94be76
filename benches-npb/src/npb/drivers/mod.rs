//! The programs: NPB CG and IS written twice over the shared numerical core,
//! as the paper compares them.
//!
//! | file          | variant | structure and communication                                                  |
//! |---------------|---------|------------------------------------------------------------------------------|
//! | `cg_mpi.rs`   | `mpi`   | every process runs init and kernel; `MPI_Irecv`/`MPI_Send`/`MPI_Wait`        |
//! | `cg_mttl.rs`  | `mttl`  | node 0 invokes init and kernel tasks everywhere; remote writes into landing buffers |
//! | `is_mpi.rs`   | `mpi`   | every process runs init and kernel; `MPI_Allreduce`, `MPI_Alltoall(v)`       |
//! | `is_mttl.rs`  | `mttl`  | node 0 invokes the tasks; mttl collectives, keys by remote writes + barrier  |
//!
//! The `mpi` variant is the baseline ("C+MPI"): a straight port of NPB
//! 3.4-MPI's structure onto rsmpi (cargo feature `mpi`), run under `mpirun`.
//! The `mttl` variant is the paper's style (§4.1 of the paper): node 0's main
//! cuts the program into an initialisation task and a kernel task and
//! invokes each on every node with [`mttl::spmd`]; vectors and keys move by
//! remote writes through global pointers; reductions are mttl collectives.
//! It runs on either of mttl's backends.
//!
//! The two files of a kernel are laid out alike (communication type, its
//! trait implementation, `*_init`, `*_kernel`, `run`), so that the lines
//! that differ are the port's changes: [`line_diff`] counts them
//! (`npb --line-diff`). Both build the same [`Outcome`], which the `npb`
//! binary prints as NPB's report or as JSON ([`report`]).

#[cfg(feature = "mpi")]
pub mod cg_mpi;
pub mod cg_mttl;
mod error;
pub mod footprint;
#[cfg(feature = "mpi")]
pub mod is_mpi;
pub mod is_mttl;
pub mod limits;
pub mod line_diff;
#[cfg(feature = "mpi")]
mod mpi_counts;
pub mod report;

pub use error::DriverError;

/// The name of the trace region around each mttl kernel's timed loop
/// (`npb --trace DIR`): `mttl-trace reconstruct` gives its length with the
/// trace's suspensions removed, which `mttl-bench trace` compares with the
/// loop's time untraced.
pub const TIMED_REGION: &str = "npb timed loop";

pub use limits::{RankLimit, TooManyRanks};
pub use report::{Check, Kernel, Outcome, Variant};
