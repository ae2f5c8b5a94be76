//! [`LaunchError`]: why a job could not be started or watched.
//!
//! A rank that fails is not a launch error: it is reported in the
//! [`JobOutcome`](super::JobOutcome). These are the failures of the launcher
//! itself, each worded as a sentence the user can act on.

use std::io;
use std::path::PathBuf;

/// Why a job could not be started or watched to its end.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The job asked for no ranks.
    #[error("a job needs at least one rank (-n must be 1 or more)")]
    NoRanks,
    /// The program does not exist.
    #[error("cannot run `{}`: {}", program.display(), if *searched_path { "no such program in PATH" } else { "no such file" })]
    ProgramNotFound {
        /// The program as given.
        program: PathBuf,
        /// Whether it was looked up in `PATH` (a bare name) or taken as a path.
        searched_path: bool,
    },
    /// The program exists but cannot be executed.
    #[error("cannot run `{}`: it is not an executable file", program.display())]
    NotExecutable {
        /// The program as given.
        program: PathBuf,
    },
    /// A process of the job could not be started.
    #[error("could not start {who} (`{}`): {source}", program.display())]
    Spawn {
        /// Which process: `rank 3`, `rank 3 on node7`, `mpirun`.
        who: String,
        /// The command that failed to start.
        program: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A comma-separated host list is malformed.
    #[error("host list entry `{entry}` is invalid: {reason}")]
    HostList {
        /// The offending entry.
        entry: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A hostfile could not be read.
    #[error("could not read hostfile {}: {source}", path.display())]
    HostfileRead {
        /// The hostfile.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// A hostfile is malformed.
    #[error("hostfile {}{}: {reason}", path.display(), if *line > 0 { format!(", line {line}") } else { String::new() })]
    Hostfile {
        /// The hostfile.
        path: PathBuf,
        /// The 1-based line, or 0 for the file as a whole.
        line: usize,
        /// Why it is invalid.
        reason: String,
    },
    /// An environment variable read by the launcher has a bad value.
    #[error("{var}={value:?} is invalid: expected {expected}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it should look like.
        expected: &'static str,
    },
    /// A resource the launcher needs from the system was refused.
    #[error("could not {what}: {source}")]
    System {
        /// What the launcher was doing, e.g. `find a free port for the rendezvous`.
        what: &'static str,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The job needs more open files than this host's limits allow.
    #[error("a TCP job of {np} ranks needs up to {need} open files {whom}, but {limit}: {fix}")]
    OpenFiles {
        /// Ranks in the job.
        np: usize,
        /// Whose need: `per rank`, `for mttlrun itself`, `on this host in all`.
        whom: &'static str,
        /// How many descriptors that is.
        need: u64,
        /// The limit in the way, named as the user sets it.
        limit: String,
        /// How to raise it.
        fix: String,
    },
    /// `mpirun --version` could not be run.
    #[error("could not run `{command} --version` to identify the MPI library: {source} (set MTTL_MPIRUN to the mpirun to use)")]
    MpirunVersion {
        /// The mpirun command.
        command: String,
        /// The operating system's reason.
        source: io::Error,
    },
    /// `mpirun --version` named neither Open MPI nor MPICH.
    #[error("`{command} --version` printed {first_line:?}, which is neither Open MPI nor MPICH (set MTTL_MPIRUN to the mpirun to use)")]
    UnknownMpi {
        /// The mpirun command.
        command: String,
        /// The first line it printed.
        first_line: String,
    },
}

impl LaunchError {
    /// The exit status a launcher should end with for this error: 127 for a
    /// missing program and 126 for one that cannot be executed (as shells
    /// do), 2 for bad arguments or environment, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::ProgramNotFound { .. } => 127,
            LaunchError::NotExecutable { .. } => 126,
            LaunchError::NoRanks
            | LaunchError::HostList { .. }
            | LaunchError::Hostfile { .. }
            | LaunchError::HostfileRead { .. }
            | LaunchError::BadEnv { .. } => 2,
            _ => 1,
        }
    }
}
