//! The commands on traces larger than memory: the files are read block by
//! block ([`RankReader`]), never whole.
//!
//! [`TraceFiles::open`] reads every file once (the scan): it checks them,
//! and keeps per rank its header, names, blocks, ending and the few events
//! the clock correction needs (rank 0's clock offsets, every rank's
//! suspensions and trace writes: [`Clocks`] of them equals that of the whole
//! trace). Each command then reads the files again:
//! - `info` needs nothing more (the scan counted the events);
//! - `stats` and `reconstruct` read one rank after the other, adding each
//!   event to running totals;
//! - `check` reads all ranks at once, always advancing the rank whose next
//!   event comes first on rank 0's clock, and keeps only the messages sent
//!   and not yet received (or received and not yet sent: a receive may come
//!   first when the clocks disagree), a window of the messages in flight;
//! - `timeline` sorts every event by its time on rank 0's clock: runs of
//!   [`TIMELINE_RUN`] events are sorted in memory and spilled to temporary
//!   files, then merged.
//!
//! Memory: one block's payload and events per rank open at once, the names,
//! the clock events, plus the window (`check`) or one run (`timeline`).
//! [`TraceFiles::peak_retained`] counts the events held at the worst moment.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use mttl_core::trace::format::{Event, Kind};

use crate::analysis::{Check, RankRecon, Reconstruction, Span};
use crate::clock::Clocks;
use crate::pairing::{is_receive, wire_tags};
use crate::read::{open_dir, FileReader, RankReader, RankTrace, ReadError, Trace};
use crate::report::{info_text, RankStats, RankSummary};

/// Events a `timeline` run sorts in memory before spilling it.
pub const TIMELINE_RUN: usize = 1 << 18;

/// A run's trace files, scanned once, read again by each command.
#[derive(Debug)]
pub struct TraceFiles {
    /// Per rank its header, names, blocks and ending; its `events` are only
    /// those the clocks need (see the module doc).
    skeleton: Trace,
    summaries: Vec<RankSummary>,
    peak: usize,
}

/// Whether the scan keeps `e` of `rank`: what [`Clocks`] reads.
fn clock_event(rank: usize, e: &Event) -> bool {
    match e.kind {
        Kind::ClockOffset => rank == 0,
        Kind::Suspension | Kind::Flush => true,
        _ => false,
    }
}

/// One rank's events, a block at a time.
struct Cursor {
    reader: FileReader,
    block: Vec<Event>,
    next: usize,
}

impl Cursor {
    fn next(&mut self) -> Result<Option<Event>, ReadError> {
        if self.next == self.block.len() {
            self.next = 0;
            if !self.reader.next_block(&mut self.block)? {
                return Ok(None);
            }
        }
        self.next += 1;
        Ok(Some(self.block[self.next - 1]))
    }

    fn held(&self) -> usize {
        self.block.len()
    }
}

impl TraceFiles {
    /// Opens and scans the files of `dir` (see the module doc).
    pub fn open(dir: &Path) -> Result<TraceFiles, ReadError> {
        let mut ranks = Vec::new();
        let mut summaries = Vec::new();
        let mut peak = 0;
        let mut block = Vec::new();
        for (rank, mut reader) in open_dir(dir)?.into_iter().enumerate() {
            let mut kept = Vec::new();
            let mut s = RankSummary::default();
            while reader.next_block(&mut block)? {
                peak = peak.max(block.len() + kept.len());
                for e in &block {
                    s.add(e);
                    if clock_event(rank, e) {
                        kept.push(*e);
                    }
                }
            }
            ranks.push(RankTrace {
                path: reader.path().to_owned(),
                header: *reader.header(),
                events: kept,
                names: reader.names().clone(),
                blocks: reader.blocks(),
                ending: reader.ending().cloned().expect("the file has ended"),
            });
            summaries.push(s);
        }
        let kept: usize = ranks.iter().map(|r| r.events.len()).sum();
        Ok(TraceFiles {
            skeleton: Trace {
                dir: dir.to_owned(),
                ranks,
            },
            summaries,
            peak: peak.max(kept),
        })
    }

    /// The ranks' headers, names, blocks and endings (their `events` hold
    /// only the clock records, suspensions and trace writes).
    pub fn skeleton(&self) -> &Trace {
        &self.skeleton
    }

    /// The most events held in memory at once so far, by the scan and
    /// every command run (block buffers, kept clock events, the window of
    /// unpaired messages, a timeline run).
    pub fn peak_retained(&self) -> usize {
        self.peak
    }

    fn clock_events(&self) -> usize {
        self.skeleton.ranks.iter().map(|r| r.events.len()).sum()
    }

    fn note(&mut self, held: usize) {
        self.peak = self.peak.max(held + self.clock_events());
    }

    fn cursors(&self) -> Result<Vec<Cursor>, ReadError> {
        self.skeleton
            .ranks
            .iter()
            .map(|r| {
                Ok(Cursor {
                    reader: RankReader::open(&r.path)?,
                    block: Vec::new(),
                    next: 0,
                })
            })
            .collect()
    }

    /// `info` (the same text as [`crate::info`]).
    pub fn info(&self) -> String {
        info_text(&self.skeleton, &self.summaries)
    }

    /// `stats` (the same text as [`crate::stats`]).
    pub fn stats(&mut self) -> Result<String, ReadError> {
        let mut out = String::new();
        for (rank, mut c) in self.cursors()?.into_iter().enumerate() {
            let r = &self.skeleton.ranks[rank];
            let mut s = RankStats::default();
            while let Some(e) = c.next()? {
                s.add(r, &e);
            }
            s.write(r, &mut out);
            let held = c.held();
            self.note(held);
        }
        Ok(out)
    }

    /// `reconstruct`: [`crate::reconstruct`]'s figures, the ranks' kept
    /// events counted, not kept.
    pub fn reconstruct(&mut self) -> Result<Reconstruction, ReadError> {
        let clocks = Clocks::removing_lone_writes(&self.skeleton);
        let (mut regions, mut all) = (Vec::new(), Span::default());
        let mut ranks = Vec::new();
        for (rank, mut c) in self.cursors()?.into_iter().enumerate() {
            let mut rec = RankRecon::new(false);
            while let Some(e) = c.next()? {
                rec.add(&clocks, rank, &e);
            }
            let r = &self.skeleton.ranks[rank];
            ranks.push(rec.finish(&clocks, rank, r, &mut regions, &mut all));
            let held = c.held();
            self.note(held);
        }
        Ok(Reconstruction {
            run_time: all.len(),
            ranks,
            regions,
        })
    }

    /// Every rank's events merged by their end on rank 0's clock, each
    /// given to `f` with its rank; `f` returns the events it holds beside
    /// the merge's blocks, for the peak.
    fn merged(
        &mut self,
        clocks: &Clocks,
        mut f: impl FnMut(usize, &Event) -> usize,
    ) -> Result<(), ReadError> {
        let mut cursors = self.cursors()?;
        // Each rank's next event, and the ranks by its time.
        let mut next: Vec<Option<Event>> = Vec::with_capacity(cursors.len());
        let mut heads: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
        for (rank, c) in cursors.iter_mut().enumerate() {
            let e = c.next()?;
            if let Some(e) = e {
                heads.push(Reverse((clocks.on_rank0(rank, e.end), rank)));
            }
            next.push(e);
        }
        while let Some(Reverse((_, rank))) = heads.pop() {
            let e = next[rank].take().expect("a ranked rank has an event");
            let held = f(rank, &e);
            let blocks: usize = cursors.iter().map(Cursor::held).sum();
            self.note(held + blocks);
            next[rank] = cursors[rank].next()?;
            if let Some(e) = next[rank] {
                heads.push(Reverse((clocks.on_rank0(rank, e.end), rank)));
            }
        }
        Ok(())
    }

    /// `check` (the same counts as [`crate::check`]).
    pub fn check(&mut self) -> Result<Check, ReadError> {
        let clocks = Clocks::of(&self.skeleton);
        // Per (source, destination, tag): messages sent and not yet
        // received (rank, send's begin), or received and not yet sent
        // (rank, receive's end). One of the two is empty at any time.
        let mut sent = Waiting::new();
        let mut received = Waiting::new();
        let mut waiting = 0usize;
        let mut c = Check::default();
        self.merged(&clocks, |rank, e| {
            if let Some(dest) = e.peer {
                for &(_, of) in wire_tags(e) {
                    let key = (rank as u32, dest, of.tag(e.a));
                    match take(&mut received, key) {
                        Some(recv) => {
                            waiting -= 1;
                            c.pairs += 1;
                            c.judge(&clocks, (rank, e.begin), recv);
                        }
                        None => {
                            waiting += 1;
                            sent.entry(key).or_default().push_back((rank, e.begin));
                        }
                    }
                }
            }
            if is_receive(e) {
                let src = e.peer.expect("a receive has a source");
                let key = (src, rank as u32, e.a);
                match take(&mut sent, key) {
                    Some(send) => {
                        waiting -= 1;
                        c.pairs += 1;
                        c.judge(&clocks, send, (rank, e.end));
                    }
                    None => {
                        waiting += 1;
                        received.entry(key).or_default().push_back((rank, e.end));
                    }
                }
            }
            waiting
        })?;
        c.unmatched_sends = sent.values().map(|q| q.len() as u64).sum();
        c.unmatched_receives = received.values().map(|q| q.len() as u64).sum();
        Ok(c)
    }

    /// `timeline` (the same text as [`crate::timeline`]) written to `out`;
    /// the sorted runs are spilled into a temporary directory under
    /// `tmp`.
    pub fn timeline(&mut self, tmp: &Path, out: &mut dyn Write) -> Result<(), TimelineError> {
        self.timeline_in_runs(tmp, out, TIMELINE_RUN)
    }

    /// [`TraceFiles::timeline`] sorting runs of `run` events (at least 1).
    pub fn timeline_in_runs(
        &mut self,
        tmp: &Path,
        out: &mut dyn Write,
        run: usize,
    ) -> Result<(), TimelineError> {
        let run = run.max(1);
        let clocks = Clocks::of(&self.skeleton);
        let spill = Spill::new(tmp)?;
        let mut runs: Vec<PathBuf> = Vec::new();
        let mut rows: Vec<Row> = Vec::with_capacity(run.min(1 << 16));
        for (rank, mut c) in self.cursors()?.into_iter().enumerate() {
            while let Some(e) = c.next()? {
                rows.push(Row {
                    begin: clocks.on_rank0(rank, e.begin),
                    end: clocks.on_rank0(rank, e.end),
                    rank: rank as u32,
                    e,
                });
                if rows.len() == run {
                    self.note(rows.len() + c.held());
                    rows.sort_by_key(Row::key);
                    runs.push(spill.write(runs.len(), &rows)?);
                    rows.clear();
                }
            }
            let held = rows.len() + c.held();
            self.note(held);
        }
        rows.sort_by_key(Row::key);
        let mut text = TimelineText {
            t: &self.skeleton,
            zero: None,
            out,
        };
        text.head()?;
        if runs.is_empty() {
            for row in &rows {
                text.row(row)?;
            }
            return Ok(());
        }
        // Merge the spilled runs and the last one, still in memory.
        let mut readers = runs
            .iter()
            .map(|p| spill.open(p))
            .collect::<Result<Vec<_>, _>>()?;
        let mut last = rows.into_iter();
        // Each run's next row, and the runs by its key; on equal keys
        // (one rank's) the earlier run, whose events were recorded first.
        let mem = readers.len();
        let mut next: Vec<Option<Row>> = Vec::with_capacity(mem + 1);
        let mut heads: BinaryHeap<Reverse<(RowKey, usize)>> = BinaryHeap::new();
        for i in 0..=mem {
            let row = if i == mem {
                last.next()
            } else {
                Row::read(&mut readers[i]).map_err(|e| spill.error(&runs[i], e))?
            };
            if let Some(row) = row {
                heads.push(Reverse((row.key(), i)));
            }
            next.push(row);
        }
        while let Some(Reverse((_, i))) = heads.pop() {
            let row = next[i].take().expect("a ranked run has a row");
            text.row(&row)?;
            next[i] = if i == mem {
                last.next()
            } else {
                Row::read(&mut readers[i]).map_err(|e| spill.error(&runs[i], e))?
            };
            if let Some(row) = &next[i] {
                heads.push(Reverse((row.key(), i)));
            }
        }
        Ok(())
    }
}

/// A message's (source, destination, tag).
type Channel = (u32, u32, u64);

/// Per channel, the sends (or receives) waiting for their pair: (rank,
/// time).
type Waiting = HashMap<Channel, VecDeque<(usize, u64)>>;

/// A timeline row's sort key: (begin, end, rank).
type RowKey = (u64, u64, u32);

/// Takes the oldest entry of `key`'s queue, dropping the queue once empty.
fn take(map: &mut Waiting, key: Channel) -> Option<(usize, u64)> {
    let q = map.get_mut(&key)?;
    let v = q.pop_front();
    if q.is_empty() {
        map.remove(&key);
    }
    v
}

/// Why `timeline` failed.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    /// The trace could not be read.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A temporary file could not be written or read back.
    #[error("timeline: temporary file {path}: {source}")]
    Spill {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The output could not be written (a reader that stopped early).
    #[error("timeline: cannot write the output: {0}")]
    Output(std::io::Error),
}

/// One timeline row: an event on rank 0's clock.
#[derive(Debug, Clone, Copy)]
struct Row {
    begin: u64,
    end: u64,
    rank: u32,
    e: Event,
}

/// A row's bytes in a spilled run.
const ROW_LEN: usize = 8 * 2 + 4 + 1 + 1 + 4 + 8 * 4;

impl Row {
    fn key(&self) -> RowKey {
        (self.begin, self.end, self.rank)
    }

    fn encode(&self) -> [u8; ROW_LEN] {
        let mut b = [0u8; ROW_LEN];
        b[0..8].copy_from_slice(&self.begin.to_le_bytes());
        b[8..16].copy_from_slice(&self.end.to_le_bytes());
        b[16..20].copy_from_slice(&self.rank.to_le_bytes());
        b[20] = self.e.kind as u8;
        b[21] = u8::from(self.e.peer.is_some());
        b[22..26].copy_from_slice(&self.e.peer.unwrap_or(0).to_le_bytes());
        for (i, v) in [self.e.a, self.e.b, self.e.begin, self.e.end]
            .into_iter()
            .enumerate()
        {
            b[26 + 8 * i..34 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// The next row of a run this process wrote, `None` at its end.
    fn read(r: &mut impl Read) -> std::io::Result<Option<Row>> {
        let mut b = [0u8; ROW_LEN];
        match r.read_exact(&mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let kind = Kind::from_u8(b[20]).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("kind {} in a run this program wrote", b[20]),
            )
        })?;
        let peer = u32::from_le_bytes(b[22..26].try_into().expect("4 bytes"));
        Ok(Some(Row {
            begin: u64_at(0),
            end: u64_at(8),
            rank: u32::from_le_bytes(b[16..20].try_into().expect("4 bytes")),
            e: Event {
                kind,
                peer: (b[21] == 1).then_some(peer),
                a: u64_at(26),
                b: u64_at(34),
                begin: u64_at(42),
                end: u64_at(50),
            },
        }))
    }
}

/// The temporary directory of a timeline's runs, removed when dropped.
struct Spill {
    dir: PathBuf,
}

impl Spill {
    fn new(tmp: &Path) -> Result<Spill, TimelineError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = tmp.join(format!(
            "mttl-trace-timeline-{}-{nanos}",
            std::process::id()
        ));
        Ok(Spill { dir })
    }

    fn error(&self, path: &Path, source: std::io::Error) -> TimelineError {
        TimelineError::Spill {
            path: path.to_owned(),
            source,
        }
    }

    fn write(&self, i: usize, rows: &[Row]) -> Result<PathBuf, TimelineError> {
        if i == 0 {
            std::fs::create_dir(&self.dir).map_err(|e| self.error(&self.dir, e))?;
        }
        let path = self.dir.join(format!("run-{i:06}"));
        let file = std::fs::File::create(&path).map_err(|e| self.error(&path, e))?;
        let mut w = BufWriter::with_capacity(1 << 16, file);
        for row in rows {
            w.write_all(&row.encode())
                .map_err(|e| self.error(&path, e))?;
        }
        w.flush().map_err(|e| self.error(&path, e))?;
        Ok(path)
    }

    fn open(&self, path: &Path) -> Result<BufReader<std::fs::File>, TimelineError> {
        let file = std::fs::File::open(path).map_err(|e| self.error(path, e))?;
        Ok(BufReader::with_capacity(1 << 16, file))
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The timeline's text, row by row.
struct TimelineText<'a> {
    t: &'a Trace,
    zero: Option<u64>,
    out: &'a mut dyn Write,
}

impl TimelineText<'_> {
    fn head(&mut self) -> Result<(), TimelineError> {
        self.out
            .write_all(crate::analysis::TIMELINE_HEAD.as_bytes())
            .map_err(TimelineError::Output)
    }

    fn row(&mut self, row: &Row) -> Result<(), TimelineError> {
        let zero = *self.zero.get_or_insert(row.begin);
        let line = crate::analysis::timeline_row(
            &self.t.ranks[row.rank as usize],
            row.rank as usize,
            row.begin - zero,
            row.end - zero,
            &row.e,
        );
        self.out
            .write_all(line.as_bytes())
            .map_err(TimelineError::Output)
    }
}
