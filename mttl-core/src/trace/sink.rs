//! Where a rank's trace goes: its file in the trace directory. Behind a
//! trait so that the recorder's handling of a failed write (a full disk)
//! is tested with a sink that fails on demand.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A trace's destination: bytes appended in order, and the header
/// rewritten in place (to record how the trace ended).
pub(crate) trait Sink {
    /// Appends `bytes`.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Writes `header` over the file's first bytes.
    fn rewrite_header(&mut self, header: &[u8]) -> io::Result<()>;
    /// Where the bytes go, for messages.
    fn describe(&self) -> String;
}

/// The name of `rank`'s file in the trace directory.
pub fn file_name(rank: u32) -> String {
    format!("rank-{rank:05}.mttltrace")
}

/// A trace file.
#[derive(Debug)]
pub(crate) struct FileSink {
    file: File,
    path: PathBuf,
}

impl FileSink {
    /// Creates (or truncates) `rank`'s file in `dir`, creating `dir` if
    /// needed.
    pub(crate) fn create(dir: &Path, rank: u32) -> Result<FileSink, String> {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "cannot create the trace directory {} (MTTL_TRACE): {e}",
                dir.display()
            )
        })?;
        let path = dir.join(file_name(rank));
        let file = File::create(&path).map_err(|e| {
            format!(
                "cannot create the trace file {} (MTTL_TRACE): {e}",
                path.display()
            )
        })?;
        Ok(FileSink { file, path })
    }
}

impl Sink for FileSink {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }

    fn rewrite_header(&mut self, header: &[u8]) -> io::Result<()> {
        self.file.write_all_at(header, 0)
    }

    fn describe(&self) -> String {
        self.path.display().to_string()
    }
}
