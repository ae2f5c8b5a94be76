//! mttl's communication layer.
//!
//! It moves tagged byte buffers between the ranks of a job and knows nothing
//! of threads, invoke or global memory. The map:
//!
//! - [`Comm`]: the eight primitives every backend implements (the contract is
//!   written there, once).
//! - [`CommTuning`]: the optional extension for speed; every method has a
//!   provided version in terms of the eight, so an empty impl is correct.
//! - [`backend`]: the implementations: `tcp` (always built, the default),
//!   `mpi` (cargo feature `mpi`, on rsmpi) and `local` (every rank a thread
//!   of one process), and [`AnyComm`], the backend chosen at start-up from
//!   the launch environment.
//! - [`env`](mod@env): the launch environment, the contract between a launcher
//!   (`mttlrun`, `mpirun`, `srun`, or none) and the backends.
//! - [`launch`]: the launcher library behind `mttlrun` and self-launch.

mod comm;
mod error;
mod tuning;

pub mod backend;
pub mod env;
pub mod launch;

pub use backend::AnyComm;
pub use comm::{Comm, Envelope, Message, Rank, Received, SendHandle, Tag};
pub use error::{CommError, ErrorKind, Op};
pub use tuning::CommTuning;
