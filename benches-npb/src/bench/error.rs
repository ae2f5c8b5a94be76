//! The errors of `mttl-bench` (every subcommand and its worker ranks), each a
//! sentence naming what was being done.

use std::io;
use std::path::PathBuf;

use mttl_comm::launch::LaunchError;
use mttl_comm::CommError;

/// Why a `mttl-bench` subcommand (or one of its worker ranks) failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The command line asked for something impossible.
    #[error("{0}")]
    Usage(String),
    /// A worker job could not be started.
    #[error("could not launch the {config} workers: {source}")]
    Launch {
        /// The configuration being launched.
        config: &'static str,
        /// What the launcher reported.
        source: LaunchError,
    },
    /// A worker job ran but did not succeed.
    #[error("the {config} workers failed (exit status {code}); the lines above say why{hint}")]
    WorkerFailed {
        /// The configuration that failed.
        config: &'static str,
        /// The job's exit status.
        code: i32,
        /// A suggestion, or empty.
        hint: &'static str,
    },
    /// A worker rank found itself in the wrong kind of job.
    #[error("worker for {config}: {detail}")]
    Setup {
        /// The configuration the worker was asked to run.
        config: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// A communication primitive failed in a worker.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A worker received something the benchmark did not send.
    #[error("rank {rank}: {detail}")]
    Protocol {
        /// The rank that noticed.
        rank: usize,
        /// What it got and what it expected.
        detail: String,
    },
    /// A job ran, but what it checks did not hold (lost or corrupted data,
    /// memory over its bound).
    #[error("{0}")]
    Check(String),
    /// A file could not be read or written.
    #[error("could not {what} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "write the results file".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A figure could not be drawn or written.
    #[error(transparent)]
    Plot(#[from] crate::bench::sweep::plot::PlotError),
    /// A worker's results file could not be understood.
    #[error("the {config} results in {} are not valid: {detail}", path.display())]
    BadResults {
        /// The configuration whose worker wrote the file.
        config: &'static str,
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}
