//! The recorder: one per traced rank, owning its bounded buffer of blocks.
//!
//! The buffer is one allocation of the configured size, made at start and
//! never grown: sealed blocks first, then the open block (its header's
//! room, then its records). Recording an event:
//!
//! 1. If the open block cannot take the longest record, it is sealed
//!    (header filled in, checksum computed) and a new one opened after it.
//! 2. If the buffer cannot take the longest record, the policy decides:
//!    `local` writes every sealed block to the file and starts over at the
//!    buffer's beginning, then records the write itself (a `Flush` event);
//!    `memory` drops the event and counts it; a synchronized policy
//!    (`equalized`, `static`) should have written at a collective before
//!    this, so it writes like `local` but records the write as a
//!    `Fallback` and counts it, to be reported at exit.
//! 3. The record is encoded (its end time as a delta from the previous
//!    record's) and appended.
//!
//! A failed write says so once on stderr, stops tracing (the recorder
//! records nothing more and frees its buffer), and marks the file's header
//! `write failed`; the program goes on untraced.

use rustc_hash::FxHashMap;

use super::format::{
    self, BlockHeader, EndTotals, Event, FileHeader, FlushCause, Kind, BLOCK_END, BLOCK_EVENTS,
    BLOCK_HEADER_LEN, MAX_EVENT_LEN, STATUS_FINISHED, STATUS_RUNNING, STATUS_WRITE_FAILED,
};
use super::policy::Policy;
use super::sink::Sink;

/// The largest block payload: a killed rank loses at most its unwritten
/// buffer, but a corrupted block loses at most this much.
const MAX_BLOCK: usize = 1 << 20;

/// One rank's recorder.
pub(crate) struct Recorder {
    buf: Vec<u8>,
    cap: usize,
    block_limit: usize,
    /// Where the open block's header goes.
    open: usize,
    open_count: u32,
    open_base: u64,
    prev_end: u64,
    /// Names by the address and length of their `&'static str`.
    names: FxHashMap<(usize, usize), u64>,
    next_name: u64,
    sink: Box<dyn Sink>,
    header: FileHeader,
    pub(crate) policy: Policy,
    /// Bytes in use past which a synchronized policy writes at the next
    /// collective.
    pub(crate) threshold: usize,
    /// Whether the clock offsets are measured at every suspension.
    pub(crate) resync_each: bool,
    /// Writes made alone under a synchronized policy.
    fallbacks: u64,
    totals: EndTotals,
    failed: bool,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("sink", &self.sink.describe())
            .field("cap", &self.cap)
            .field("used", &self.buf.len())
            .field("totals", &self.totals)
            .finish()
    }
}

impl Recorder {
    /// A recorder writing to `sink` (header written at once, so that even
    /// a rank killed before its first flush leaves a file naming it).
    pub(crate) fn new(
        mut sink: Box<dyn Sink>,
        header: FileHeader,
        cap: usize,
        policy: Policy,
    ) -> Result<Recorder, String> {
        sink.append(&header.encode())
            .map_err(|e| format!("cannot write the trace file {}: {e}", sink.describe()))?;
        let block_limit = (cap / 4).clamp(1024, MAX_BLOCK);
        let mut r = Recorder {
            buf: Vec::with_capacity(cap),
            cap,
            block_limit,
            open: 0,
            open_count: 0,
            open_base: header.mono_start,
            prev_end: header.mono_start,
            names: FxHashMap::default(),
            next_name: 0,
            sink,
            header,
            policy,
            threshold: cap / 4 * 3,
            resync_each: true,
            fallbacks: 0,
            totals: EndTotals::default(),
            failed: false,
        };
        r.open_block();
        Ok(r)
    }

    fn open_block(&mut self) {
        self.open = self.buf.len();
        self.buf.extend_from_slice(&[0u8; BLOCK_HEADER_LEN]);
        self.open_count = 0;
        self.open_base = self.prev_end;
    }

    fn open_len(&self) -> usize {
        self.buf.len() - self.open - BLOCK_HEADER_LEN
    }

    /// Step 1's sealing: fills in the open block's header and, if
    /// `reopen`, opens the next; the caller has checked that its header
    /// fits the buffer. An empty open block stays open, or without
    /// `reopen` is removed. Afterwards everything before `open` is sealed.
    fn seal(&mut self, reopen: bool) {
        if self.open_count == 0 {
            if !reopen {
                self.buf.truncate(self.open);
            }
            return;
        }
        let len = self.open_len();
        let h = BlockHeader {
            kind: BLOCK_EVENTS,
            len: len as u32,
            count: self.open_count,
            base: self.open_base,
            checksum: 0,
        }
        .encode_unsummed();
        let payload = &self.buf[self.open + BLOCK_HEADER_LEN..];
        let sum = format::checksum(&[&h, payload]);
        self.buf[self.open..self.open + 24].copy_from_slice(&h);
        self.buf[self.open + 24..self.open + BLOCK_HEADER_LEN].copy_from_slice(&sum.to_le_bytes());
        if reopen {
            self.open_block();
        } else {
            self.open = self.buf.len();
        }
    }

    /// Makes room for `len` more bytes in the open block (steps 1 and 2);
    /// `false` when the event must be dropped. Returns the begin and end
    /// of a local write it made, to be recorded after the event.
    fn room(&mut self, len: usize) -> Result<Option<(u64, u64, u64, FlushCause)>, ()> {
        let seal_first = self.open_len() + len > self.block_limit;
        let need = len + if seal_first { BLOCK_HEADER_LEN } else { 0 };
        if self.buf.len() + need <= self.cap {
            if seal_first {
                self.seal(true);
            }
            return Ok(None);
        }
        match self.policy {
            Policy::Memory => {
                self.totals.dropped += 1;
                Err(())
            }
            Policy::Local | Policy::Equalized | Policy::Static { .. } => {
                let cause = if self.policy == Policy::Local {
                    FlushCause::Local
                } else {
                    self.fallbacks += 1;
                    FlushCause::Fallback
                };
                self.write_all()
                    .map(|(begin, end, bytes)| Some((begin, end, bytes, cause)))
            }
        }
    }

    /// Seals the open block and writes every sealed one, leaving the
    /// buffer empty with a block open: (begin, end, bytes) of the write.
    fn write_all(&mut self) -> Result<(u64, u64, u64), ()> {
        let begin = super::now();
        self.seal(false);
        let bytes = self.open as u64;
        if !self.write_sealed() {
            return Err(());
        }
        // The buffer is empty: the next block's header fits.
        self.open_block();
        self.totals.flushes += 1;
        Ok((begin, super::now(), bytes))
    }

    /// Writes the buffer now (in a suspension every rank makes together)
    /// and records the write; `false` when it failed.
    pub(crate) fn write_now(&mut self, cause: FlushCause) -> bool {
        if self.failed {
            return false;
        }
        let Ok((begin, end, bytes)) = self.write_all() else {
            return false;
        };
        self.note_flush(Some((begin, end, bytes, cause)));
        true
    }

    /// Whether the buffer's fill is past the threshold.
    pub(crate) fn past_threshold(&self) -> bool {
        !self.failed && self.buf.len() > self.threshold
    }

    /// Writes made alone under a synchronized policy (reported at exit).
    pub(crate) fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    /// Writes the sealed blocks (everything before `open`) and removes
    /// them from the buffer; `false` (tracing stopped) when the write
    /// failed.
    fn write_sealed(&mut self) -> bool {
        if let Err(e) = self.sink.append(&self.buf[..self.open]) {
            self.fail(&e);
            return false;
        }
        self.buf.drain(..self.open);
        self.open = 0;
        true
    }

    /// Records `e`.
    #[inline]
    pub(crate) fn push(&mut self, e: &Event) {
        if self.failed {
            return;
        }
        let Ok(flushed) = self.room(MAX_EVENT_LEN) else {
            return;
        };
        self.append(e);
        self.note_flush(flushed);
    }

    /// Records a flush, if one was done.
    #[inline]
    fn note_flush(&mut self, flushed: Option<(u64, u64, u64, FlushCause)>) {
        if let Some((begin, end, bytes, cause)) = flushed {
            self.append(&Event {
                kind: Kind::Flush,
                peer: None,
                a: cause as u64,
                b: bytes,
                begin,
                end,
            });
        }
    }

    #[inline]
    fn append(&mut self, e: &Event) {
        let mut rec = [0u8; MAX_EVENT_LEN];
        let n = format::encode_event(&mut rec, e, self.prev_end);
        self.buf.extend_from_slice(&rec[..n]);
        self.prev_end = e.end;
        self.open_count += 1;
        self.totals.events += 1;
    }

    /// The id of `name`, recording a name record on its first use; `None`
    /// when that record had to be dropped.
    #[inline]
    pub(crate) fn name(&mut self, name: &'static str) -> Option<u64> {
        if self.failed {
            return None;
        }
        let key = (name.as_ptr() as usize, name.len());
        if let Some(&id) = self.names.get(&key) {
            return Some(id);
        }
        let id = self.next_name;
        let rec = format::encode_name(id, name);
        let flushed = self.room(rec.len()).ok()?;
        self.buf.extend_from_slice(&rec);
        self.open_count += 1;
        self.next_name += 1;
        self.names.insert(key, id);
        self.note_flush(flushed);
        Some(id)
    }

    /// A write failed: says so once, stops recording, frees the buffer and
    /// marks the header.
    fn fail(&mut self, e: &std::io::Error) {
        super::say(&format!(
            "mttl: rank {}: writing the trace to {} failed ({e}); tracing stops here and the \
             trace is incomplete; the program goes on",
            self.header.rank,
            self.sink.describe()
        ));
        self.failed = true;
        self.buf = Vec::new();
        self.open = 0;
        self.header.status = STATUS_WRITE_FAILED;
        let _ = self.sink.rewrite_header(&self.header.encode());
        super::stop_recording();
    }

    /// The buffer's bytes in use.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.buf.len()
    }

    /// The buffer's allocation.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The rank recorded.
    pub(crate) fn rank(&self) -> u32 {
        self.header.rank
    }

    /// Whether a write failed.
    pub(crate) fn failed(&self) -> bool {
        self.failed
    }

    /// The end: writes what is left, the end block and the finished header.
    /// Returns the totals.
    pub(crate) fn finish(&mut self) -> EndTotals {
        if self.failed {
            return self.totals;
        }
        self.seal(false);
        if !self.write_sealed() {
            return self.totals;
        }
        let payload = self.totals.encode();
        let h = BlockHeader {
            kind: BLOCK_END,
            len: payload.len() as u32,
            count: 0,
            base: self.prev_end,
            checksum: 0,
        }
        .encode_unsummed();
        let sum = format::checksum(&[&h, &payload]);
        let mut block = Vec::with_capacity(BLOCK_HEADER_LEN + payload.len());
        block.extend_from_slice(&h);
        block.extend_from_slice(&sum.to_le_bytes());
        block.extend_from_slice(&payload);
        if let Err(e) = self.sink.append(&block) {
            self.fail(&e);
            return self.totals;
        }
        self.header.status = STATUS_FINISHED;
        if let Err(e) = self.sink.rewrite_header(&self.header.encode()) {
            self.fail(&e);
        }
        self.totals
    }
}

/// The header of a fresh trace.
pub(crate) fn header(
    job_id: u64,
    rank: u32,
    size: u32,
    buffer: usize,
    policy: Policy,
) -> FileHeader {
    FileHeader {
        version: format::VERSION,
        status: STATUS_RUNNING,
        policy: policy.code(),
        job_id,
        rank,
        size,
        mono_start: super::now(),
        real_start: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        buffer: buffer as u64,
    }
}
