//! Errors a user can act on: bad input (with file and line) and runs that
//! cannot complete (deadlocks, with the blocked operations).

use std::fmt;
use std::path::{Path, PathBuf};

/// Malformed or inconsistent input; `line` is 1-based, 0 when the problem
/// concerns the whole file (a missing rank, say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InputError {
    /// The file read.
    pub file: PathBuf,
    /// Where in it.
    pub line: u32,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl InputError {
    pub(crate) fn new(file: &Path, line: u32, message: String) -> Self {
        InputError {
            file: file.to_path_buf(),
            line,
            message,
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)
        }
    }
}

/// Why a simulation could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The input could not be read or parsed.
    #[error("{0}")]
    Input(#[from] InputError),
    /// The file could not be opened.
    #[error("cannot read {file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}
