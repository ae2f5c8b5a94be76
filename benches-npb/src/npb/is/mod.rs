//! NPB IS, communication-free: the numerical core both IS drivers share.
//!
//! IS ranks (bucket-sorts) a sequence of uniformly-summed random integer keys
//! spread over the processes. The structure is NPB 3.4-MPI's: each process
//! generates its slice of one global key sequence, histograms it into
//! buckets, and the buckets are redistributed so each process ranks a
//! contiguous key range ([`ranking`]). The three collectives per iteration
//! and the boundary exchange of the final check come from a driver through
//! the [`IsComm`] trait ([`comm`]).

pub mod comm;
pub mod ranking;

pub use comm::IsComm;
pub use ranking::{
    check_procs, key_buffer_len, max_procs, run_benchmark, FullVerification, IsError, IsPhases,
    IsRank, IsRun, PartialFailure,
};
