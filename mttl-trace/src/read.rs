//! Reading trace files: the header, then block after block, each checked
//! against its checksum before its records are decoded.
//!
//! How a file ends decides what it means:
//! - an end block (the rank finished): complete;
//! - the file ends inside a block, or before the next block's header is
//!   whole: the rank stopped writing there (killed, or its disk filled);
//!   every complete block before it is read, and the ending says where;
//! - anything else that does not decode (a bad magic, a checksum that does
//!   not match a whole block, a record that does not parse, bytes after
//!   the end block) is corruption: an error with the file and the offset.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mttl_core::trace::format::{
    self, BlockHeader, EndTotals, Event, FileHeader, HeaderError, Record, BLOCK_END, BLOCK_EVENTS,
    BLOCK_HEADER_LEN, FILE_HEADER_LEN, STATUS_WRITE_FAILED,
};

/// Why a trace cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The directory holds no trace file.
    #[error("{0} holds no trace files (rank-NNNNN.mttltrace)")]
    Empty(PathBuf),
    /// Bytes that do not decode.
    #[error("{path}: corrupted at byte {offset}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where in the file.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A file of a format version this reader does not read.
    #[error(
        "{path} is trace format version {found}; this mttl-trace reads version {ours}{beside}"
    )]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u16,
        /// The version this reader reads.
        ours: u16,
        /// The other files' version, if any was read.
        beside: String,
    },
    /// Two files of different runs.
    #[error("{a} and {b} are traces of different runs (job {job_a:#018x} and {job_b:#018x}); put one run's files in a directory")]
    DifferentJobs {
        /// One file.
        a: PathBuf,
        /// Its job.
        job_a: u64,
        /// The other file.
        b: PathBuf,
        /// Its job.
        job_b: u64,
    },
    /// Files that do not make one job's ranks.
    #[error("{dir}: {what}")]
    Ranks {
        /// The directory.
        dir: PathBuf,
        /// What is missing or doubled.
        what: String,
    },
}

/// How a rank's trace ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The rank finished and wrote its totals.
    Complete(EndTotals),
    /// The file stops at byte `offset`, inside or before a block: the rank
    /// was killed (or stopped) while writing.
    Truncated {
        /// The end of the last complete block.
        offset: u64,
    },
    /// A write failed (a full disk); the rank said so and stopped tracing
    /// after byte `offset`.
    WriteFailed {
        /// The end of the last complete block.
        offset: u64,
    },
}

/// One rank's trace.
#[derive(Debug, Clone)]
pub struct RankTrace {
    /// The file.
    pub path: PathBuf,
    /// Its header.
    pub header: FileHeader,
    /// The events, in the order recorded.
    pub events: Vec<Event>,
    /// The name table (function, collective, region and reason names).
    pub names: HashMap<u64, String>,
    /// Complete blocks read (the end block included).
    pub blocks: usize,
    /// How it ends.
    pub ending: Ending,
}

impl RankTrace {
    /// The name with id `id`, or a placeholder naming it.
    pub fn name(&self, id: u64) -> String {
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("<name {id}>"))
    }
}

/// A run's traces, one per rank, in rank order.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The directory.
    pub dir: PathBuf,
    /// The ranks' traces.
    pub ranks: Vec<RankTrace>,
}

fn corrupt(path: &Path, offset: usize, what: impl Into<String>) -> ReadError {
    ReadError::Corrupt {
        path: path.to_owned(),
        offset: offset as u64,
        what: what.into(),
    }
}

/// Reads one rank's file.
pub fn read_file(path: &Path) -> Result<RankTrace, ReadError> {
    let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(path, &bytes)
}

/// Reads one rank's trace from its bytes (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<RankTrace, ReadError> {
    let header = FileHeader::decode(bytes).map_err(|e| match e {
        HeaderError::Short => corrupt(path, bytes.len(), "shorter than a trace file's header"),
        HeaderError::Magic => corrupt(path, 0, "not an mttl trace file (bad magic)"),
        HeaderError::Checksum => corrupt(path, 0, "the header's checksum does not match"),
        HeaderError::Version(found) => ReadError::Version {
            path: path.to_owned(),
            found,
            ours: format::VERSION,
            beside: String::new(),
        },
    })?;
    let mut trace = RankTrace {
        path: path.to_owned(),
        header,
        events: Vec::new(),
        names: HashMap::new(),
        blocks: 0,
        ending: Ending::Truncated {
            offset: FILE_HEADER_LEN as u64,
        },
    };
    let mut pos = FILE_HEADER_LEN;
    loop {
        let stopped = if header.status == STATUS_WRITE_FAILED {
            Ending::WriteFailed { offset: pos as u64 }
        } else {
            Ending::Truncated { offset: pos as u64 }
        };
        let Some(hb) = bytes.get(pos..pos + BLOCK_HEADER_LEN) else {
            // Nothing more, or a header torn by the end of the file.
            trace.ending = stopped;
            return Ok(trace);
        };
        let hb: &[u8; BLOCK_HEADER_LEN] = hb.try_into().expect("a block header's length");
        let bh = BlockHeader::decode(hb).ok_or_else(|| corrupt(path, pos, "bad block magic"))?;
        let start = pos + BLOCK_HEADER_LEN;
        let Some(payload) = start
            .checked_add(bh.len as usize)
            .and_then(|end| bytes.get(start..end))
        else {
            trace.ending = stopped;
            return Ok(trace);
        };
        if format::checksum(&[&hb[..24], payload]) != bh.checksum {
            return Err(corrupt(path, pos, "the block's checksum does not match"));
        }
        match bh.kind {
            BLOCK_EVENTS => read_records(&mut trace, path, start, payload, &bh)?,
            BLOCK_END => {
                let totals = EndTotals::decode(payload)
                    .ok_or_else(|| corrupt(path, start, "an end block of the wrong length"))?;
                trace.blocks += 1;
                let after = start + payload.len();
                if after != bytes.len() {
                    return Err(corrupt(path, after, "bytes after the end block"));
                }
                trace.ending = Ending::Complete(totals);
                return Ok(trace);
            }
            k => return Err(corrupt(path, pos, format!("unknown block kind {k}"))),
        }
        trace.blocks += 1;
        pos = start + payload.len();
    }
}

fn read_records(
    trace: &mut RankTrace,
    path: &Path,
    start: usize,
    payload: &[u8],
    bh: &BlockHeader,
) -> Result<(), ReadError> {
    let (mut p, mut prev) = (0, bh.base);
    for _ in 0..bh.count {
        match format::decode_record(payload, &mut p, &mut prev) {
            Ok(Record::Name { id, name }) => {
                trace.names.insert(id, name);
            }
            Ok(Record::Event(e)) => trace.events.push(e),
            Err(e) => return Err(corrupt(path, start + e.offset, e.what)),
        }
    }
    if p != payload.len() {
        return Err(corrupt(
            path,
            start + p,
            "the block holds more bytes than its records",
        ));
    }
    Ok(())
}

/// Reads every rank's file in `dir` and checks they are one run's.
pub fn read_dir(dir: &Path) -> Result<Trace, ReadError> {
    let io = |source| ReadError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|x| x == "mttltrace") {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(ReadError::Empty(dir.to_owned()));
    }
    let mut ranks: Vec<RankTrace> = Vec::new();
    for path in &paths {
        let t = match read_file(path) {
            Err(ReadError::Version {
                path,
                found,
                ours,
                beside: _,
            }) => {
                let beside = ranks
                    .first()
                    .map(|r| format!(" (as {} is)", r.path.display()))
                    .unwrap_or_default();
                return Err(ReadError::Version {
                    path,
                    found,
                    ours,
                    beside,
                });
            }
            other => other?,
        };
        if let Some(first) = ranks.first() {
            if first.header.job_id != t.header.job_id {
                return Err(ReadError::DifferentJobs {
                    a: first.path.clone(),
                    job_a: first.header.job_id,
                    b: t.path.clone(),
                    job_b: t.header.job_id,
                });
            }
        }
        ranks.push(t);
    }
    ranks.sort_by_key(|r| r.header.rank);
    let size = ranks[0].header.size as usize;
    let present: Vec<u32> = ranks.iter().map(|r| r.header.rank).collect();
    if present != (0..size as u32).collect::<Vec<_>>() {
        let missing: Vec<String> = (0..size as u32)
            .filter(|r| !present.contains(r))
            .map(|r| r.to_string())
            .collect();
        return Err(ReadError::Ranks {
            dir: dir.to_owned(),
            what: format!(
                "a job of {size} ranks, but the files are of ranks {present:?} (missing: {})",
                if missing.is_empty() {
                    "none; some rank appears twice".to_owned()
                } else {
                    missing.join(", ")
                }
            ),
        });
    }
    Ok(Trace {
        dir: dir.to_owned(),
        ranks,
    })
}
