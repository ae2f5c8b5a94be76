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

/// The largest block payload a recorder writes (`docs/trace-format.md`):
/// a longer one is corruption, never read into memory.
pub const MAX_PAYLOAD: usize = 1 << 20;

/// One rank's file read block by block: the memory it holds is one block's
/// payload and events, and the rank's name table, whatever the file's size.
#[derive(Debug)]
pub struct RankReader<R> {
    path: PathBuf,
    src: R,
    /// The file's length in bytes.
    len: u64,
    /// The offset of the next block.
    pos: u64,
    header: FileHeader,
    names: HashMap<u64, String>,
    blocks: usize,
    ending: Option<Ending>,
    payload: Vec<u8>,
}

impl RankReader<std::io::BufReader<std::fs::File>> {
    /// Opens `path` and reads its header.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let io = |source| ReadError::Io {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        RankReader::new(path, std::io::BufReader::with_capacity(1 << 18, file), len)
    }
}

impl<R: std::io::Read> RankReader<R> {
    /// Reads the header of the `len` bytes `src` gives (`path` names it in
    /// errors).
    pub fn new(path: &Path, mut src: R, len: u64) -> Result<Self, ReadError> {
        let mut head = vec![0u8; (len as usize).min(FILE_HEADER_LEN)];
        src.read_exact(&mut head).map_err(|source| ReadError::Io {
            path: path.to_owned(),
            source,
        })?;
        let header = FileHeader::decode(&head).map_err(|e| match e {
            HeaderError::Short => corrupt(path, head.len(), "shorter than a trace file's header"),
            HeaderError::Magic => corrupt(path, 0, "not an mttl trace file (bad magic)"),
            HeaderError::Checksum => corrupt(path, 0, "the header's checksum does not match"),
            HeaderError::Version(found) => ReadError::Version {
                path: path.to_owned(),
                found,
                ours: format::VERSION,
                beside: String::new(),
            },
        })?;
        Ok(RankReader {
            path: path.to_owned(),
            src,
            len,
            pos: FILE_HEADER_LEN as u64,
            header,
            names: HashMap::new(),
            blocks: 0,
            ending: None,
            payload: Vec::new(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The names read so far (a name is recorded before its first use).
    pub fn names(&self) -> &HashMap<u64, String> {
        &self.names
    }

    /// Complete blocks read so far (the end block included).
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// How the file ends, once [`RankReader::next_block`] said so.
    pub fn ending(&self) -> Option<&Ending> {
        self.ending.as_ref()
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<(), ReadError> {
        self.src.read_exact(buf).map_err(|source| ReadError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Replaces `out` with the events of the next block; `false` (and
    /// `out` empty) once the file has ended ([`RankReader::ending`] says
    /// how).
    pub fn next_block(&mut self, out: &mut Vec<Event>) -> Result<bool, ReadError> {
        out.clear();
        loop {
            if self.ending.is_some() {
                return Ok(false);
            }
            let pos = self.pos;
            let stopped = if self.header.status == STATUS_WRITE_FAILED {
                Ending::WriteFailed { offset: pos }
            } else {
                Ending::Truncated { offset: pos }
            };
            if self.len - pos < BLOCK_HEADER_LEN as u64 {
                // Nothing more, or a header torn by the end of the file.
                self.ending = Some(stopped);
                return Ok(false);
            }
            let mut hb = [0u8; BLOCK_HEADER_LEN];
            self.read(&mut hb)?;
            let at = pos as usize;
            let bh = BlockHeader::decode(&hb)
                .ok_or_else(|| corrupt(&self.path, at, "bad block magic"))?;
            let start = pos + BLOCK_HEADER_LEN as u64;
            if self.len - start < u64::from(bh.len) {
                self.ending = Some(stopped);
                return Ok(false);
            }
            if bh.len as usize > MAX_PAYLOAD {
                return Err(corrupt(
                    &self.path,
                    at,
                    format!(
                        "a block of {} bytes (blocks hold at most {MAX_PAYLOAD})",
                        bh.len
                    ),
                ));
            }
            let mut payload = std::mem::take(&mut self.payload);
            payload.resize(bh.len as usize, 0);
            let read = self.read(&mut payload);
            self.payload = payload;
            read?;
            let payload = &self.payload[..];
            if format::checksum(&[&hb[..24], payload]) != bh.checksum {
                return Err(corrupt(
                    &self.path,
                    at,
                    "the block's checksum does not match",
                ));
            }
            let after = start + u64::from(bh.len);
            match bh.kind {
                BLOCK_EVENTS => read_records(
                    &mut self.names,
                    out,
                    &self.path,
                    start as usize,
                    payload,
                    &bh,
                )?,
                BLOCK_END => {
                    let totals = EndTotals::decode(payload).ok_or_else(|| {
                        corrupt(
                            &self.path,
                            start as usize,
                            "an end block of the wrong length",
                        )
                    })?;
                    self.blocks += 1;
                    if after != self.len {
                        return Err(corrupt(
                            &self.path,
                            after as usize,
                            "bytes after the end block",
                        ));
                    }
                    self.ending = Some(Ending::Complete(totals));
                    return Ok(false);
                }
                k => return Err(corrupt(&self.path, at, format!("unknown block kind {k}"))),
            }
            self.blocks += 1;
            self.pos = after;
            if !out.is_empty() {
                return Ok(true);
            }
        }
    }

    /// Reads the rest of the file into a [`RankTrace`].
    pub fn read_all(mut self) -> Result<RankTrace, ReadError> {
        let mut events = Vec::new();
        let mut block = Vec::new();
        while self.next_block(&mut block)? {
            events.append(&mut block);
        }
        Ok(RankTrace {
            ending: self.ending.clone().expect("the file has ended"),
            path: self.path,
            header: self.header,
            events,
            names: self.names,
            blocks: self.blocks,
        })
    }
}

/// Reads one rank's file.
pub fn read_file(path: &Path) -> Result<RankTrace, ReadError> {
    RankReader::open(path)?.read_all()
}

/// Reads one rank's trace from its bytes (`path` names it in errors).
pub fn parse(path: &Path, bytes: &[u8]) -> Result<RankTrace, ReadError> {
    RankReader::new(path, bytes, bytes.len() as u64)?.read_all()
}

fn read_records(
    names: &mut HashMap<u64, String>,
    out: &mut Vec<Event>,
    path: &Path,
    start: usize,
    payload: &[u8],
    bh: &BlockHeader,
) -> Result<(), ReadError> {
    let (mut p, mut prev) = (0, bh.base);
    for _ in 0..bh.count {
        match format::decode_record(payload, &mut p, &mut prev) {
            Ok(Record::Name { id, name }) => {
                names.insert(id, name);
            }
            Ok(Record::Event(e)) => out.push(e),
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
    let ranks = open_dir(dir)?
        .into_iter()
        .map(RankReader::read_all)
        .collect::<Result<_, _>>()?;
    Ok(Trace {
        dir: dir.to_owned(),
        ranks,
    })
}

/// A file of `dir` opened, its header read.
pub type FileReader = RankReader<std::io::BufReader<std::fs::File>>;

/// Opens every rank's file in `dir`, checks from their headers that they
/// are one run's (same job and format version, every rank once) and gives
/// their readers in rank order, nothing read past the headers.
pub fn open_dir(dir: &Path) -> Result<Vec<FileReader>, ReadError> {
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
    let mut ranks: Vec<FileReader> = Vec::new();
    for path in &paths {
        let t = match RankReader::open(path) {
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
    Ok(ranks)
}
