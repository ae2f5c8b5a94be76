//! Why a driver cannot run.

use super::limits::{RankLimit, TooManyRanks};
use super::report::Kernel;
use crate::npb::cg::GridError;
use crate::npb::is::IsError;
use crate::npb::{Class, ClassError};

/// Why a benchmark driver cannot run on this job.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The class has no tables for the kernel.
    #[error(transparent)]
    Class(#[from] ClassError),
    /// CG cannot lay out its process grid on this job.
    #[error(transparent)]
    Grid(#[from] GridError),
    /// IS cannot run on this job.
    #[error(transparent)]
    Is(#[from] IsError),
    /// The kernel does not run on this many ranks.
    #[error(transparent)]
    Ranks(#[from] TooManyRanks),
    /// The job is not the size `-n` asked for.
    #[error("-n asked for {asked} processes but the job has {actual}")]
    SizeMismatch {
        /// What `-n` said.
        asked: usize,
        /// The job's size.
        actual: usize,
    },
    /// MPI could not be initialised (it was already, in this process).
    #[error("MPI could not be initialised: it already was in this process")]
    MpiInit,
}

/// Checks the job's size against the kernel's limit ([`RankLimit`]) and
/// against `-n`, if given.
pub(crate) fn check_size(
    kernel: Kernel,
    class: Class,
    asked: Option<usize>,
    actual: usize,
) -> Result<(), DriverError> {
    RankLimit::of(kernel, class).check(actual)?;
    match asked {
        Some(asked) if asked != actual => Err(DriverError::SizeMismatch { asked, actual }),
        _ => Ok(()),
    }
}
