//! The trace file format, shared by the recorder (which writes it) and the
//! `mttl-trace` tools (which read it): constants, the file header, block
//! headers, the record encoding and the block checksum. It depends on
//! nothing else in mttl-core, so the tools use exactly the code that wrote
//! the bytes. `docs/trace-format.md` describes the same layout for readers
//! written elsewhere.
//!
//! A file is a [`FileHeader`] followed by blocks. Each block is a
//! [`BlockHeader`] and a payload of records; its checksum covers both, so
//! a rank killed mid-write leaves a file whose complete blocks all read
//! back and whose torn last block is recognised as such. The last block of
//! a finished trace is an [`BLOCK_END`] block with the totals.

/// The first eight bytes of every trace file.
pub const MAGIC: [u8; 8] = *b"MTTLTRC\0";
/// The format version this code writes and reads.
pub const VERSION: u16 = 3;
/// The length of the file header in bytes.
pub const FILE_HEADER_LEN: usize = 64;
/// The first four bytes of every block.
pub const BLOCK_MAGIC: [u8; 4] = *b"MTBK";
/// The length of a block header in bytes.
pub const BLOCK_HEADER_LEN: usize = 28;
/// The longest name a name record holds; longer names are cut (at a
/// character boundary) so that every record fits any block.
pub const MAX_NAME_LEN: usize = 200;
/// The longest encoded event record: a kind byte and five varints of at
/// most ten bytes each.
pub const MAX_EVENT_LEN: usize = 1 + 5 * 10;

/// Block kind: a block of records.
pub const BLOCK_EVENTS: u8 = 0;
/// Block kind: the last block of a finished trace (see [`EndTotals`]).
pub const BLOCK_END: u8 = 1;

/// The header's status: the rank is still writing (or was killed).
pub const STATUS_RUNNING: u8 = 0;
/// The header's status: the rank finished and wrote its end block.
pub const STATUS_FINISHED: u8 = 1;
/// The header's status: a write failed; tracing stopped there.
pub const STATUS_WRITE_FAILED: u8 = 2;

/// What a record is: the first byte of each record in a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// A name table entry: `id`, then the name's length and bytes.
    Name = 1,
    /// Comm primitive `send` (blocking). `a` tag, `b` bytes.
    Send = 10,
    /// Comm primitive `nsend` (non-blocking). `a` tag, `b` bytes.
    Nsend = 11,
    /// `send` of a header then its body (the large-message split, blocking).
    /// `a` tag of the header, `b` bytes of both.
    SendHeadedBulk = 12,
    /// The same, non-blocking, the body borrowed. `a` tag, `b` bytes.
    NsendHeaded = 13,
    /// `recv_any` that returned a message. `peer` the source, `a` tag,
    /// `b` bytes. Polls that found nothing are not recorded.
    RecvAny = 14,
    /// `recv_from` (a large body, the start-up check). `a` tag, `b` bytes.
    RecvFrom = 15,
    /// `recv_from_into` (a large write placed in its region).
    RecvInto = 16,
    /// `send_done` / `send_finished` (MPI_Test). `b` 1 when it was done.
    Test = 17,
    /// An invoke or ainvoke sent (`a` name, `b` 0; 1 for `invoke_nowait`).
    InvokeIssued = 20,
    /// A remote function run for `peer` (`a` name): begin to its reply.
    InvokeServed = 21,
    /// The caller took the reply of a call to `peer` (`a` name).
    InvokeAnswered = 22,
    /// A remote read of `b` bytes from `peer`: begin to the data.
    Read = 30,
    /// A remote write of `b` bytes to `peer`, until acknowledged.
    Write = 31,
    /// An `nwrite` of `b` bytes to `peer`, while it is handed over.
    Nwrite = 32,
    /// A fence, begin to end.
    Fence = 33,
    /// A thread waited on a `SyncCell` (`a` the reason's name).
    SyncWait = 40,
    /// A thread waited by polling (`a` what for: `mttl::trace::waiting`),
    /// begin to end. Its time is waiting, not computation: the
    /// time-independent export leaves it out of its `calc`s.
    Wait = 41,
    /// A collective entered: `a` its name, `b` its sequence number, `peer`
    /// its root (none for rootless ones).
    CollEnter = 50,
    /// The collective of [`Kind::CollEnter`] returned.
    CollExit = 51,
    /// A user region began (`a` its name).
    RegionBegin = 60,
    /// A user region ended (`a` its name).
    RegionEnd = 61,
    /// This rank wrote its buffer (`b` bytes, `a` the [`FlushCause`]).
    Flush = 70,
    /// A suspension after a collective (`equalized` or `static`): from the
    /// collective's end (`begin`, the protocol's t) to the end of the wait;
    /// `a` the suspension time Z asked of every rank, `b` w (ns).
    Suspension = 71,
    /// Follows each [`Kind::Suspension`]: `a` m, the mean one-way message
    /// time, `b` d, the largest clock-offset error (ns; 0 under `static`).
    SuspensionClock = 72,
    /// Rank 0 only, when it measured the clocks: `peer`'s clock minus rank
    /// 0's, `a` as [`zigzag`], `b` the error bound (ns), at this instant.
    ClockOffset = 73,
    /// `MTTL_TRACE_LEVEL=threads`: a thread was spawned. `a` its name, `b`
    /// the new thread's id ([`thread_id`]).
    ThreadSpawn = 80,
    /// `MTTL_TRACE_LEVEL=threads`: the scheduler switched to thread `b`
    /// (an instant); the rank's following records belong to it until the
    /// next `ThreadRun`. `b` [`LOOP_THREAD`] is the runtime's own loop
    /// (message handling, outside every thread).
    ThreadRun = 81,
    /// `MTTL_TRACE_LEVEL=threads`: thread `b` blocked; `a` the reason's
    /// name (what it waits for).
    ThreadBlock = 82,
    /// `MTTL_TRACE_LEVEL=threads`: thread `b` finished.
    ThreadExit = 83,
}

/// A thread's id in the thread records: its slot index in the low 32
/// bits, the slot's generation in the high 32 (unique among the rank's
/// live threads; a finished thread's id is not reused while its slot's
/// generation has not wrapped).
pub fn thread_id(index: u32, generation: u32) -> u64 {
    u64::from(index) | (u64::from(generation) << 32)
}

/// The id [`Kind::ThreadRun`] gives the runtime's loop (no thread).
pub const LOOP_THREAD: u64 = u64::MAX;

impl Kind {
    /// The kind of a record's first byte.
    pub fn from_u8(b: u8) -> Option<Kind> {
        use Kind::*;
        Some(match b {
            1 => Name,
            10 => Send,
            11 => Nsend,
            12 => SendHeadedBulk,
            13 => NsendHeaded,
            14 => RecvAny,
            15 => RecvFrom,
            16 => RecvInto,
            17 => Test,
            20 => InvokeIssued,
            21 => InvokeServed,
            22 => InvokeAnswered,
            30 => Read,
            31 => Write,
            32 => Nwrite,
            33 => Fence,
            40 => SyncWait,
            41 => Wait,
            50 => CollEnter,
            51 => CollExit,
            60 => RegionBegin,
            61 => RegionEnd,
            70 => Flush,
            71 => Suspension,
            72 => SuspensionClock,
            73 => ClockOffset,
            80 => ThreadSpawn,
            81 => ThreadRun,
            82 => ThreadBlock,
            83 => ThreadExit,
            _ => return None,
        })
    }

    /// The name the tools print.
    pub fn name(self) -> &'static str {
        use Kind::*;
        match self {
            Name => "name",
            Send => "send",
            Nsend => "nsend",
            SendHeadedBulk => "send_headed_bulk",
            NsendHeaded => "nsend_headed",
            RecvAny => "recv_any",
            RecvFrom => "recv_from",
            RecvInto => "recv_from_into",
            Test => "test",
            InvokeIssued => "invoke_issued",
            InvokeServed => "invoke_served",
            InvokeAnswered => "invoke_answered",
            Read => "read",
            Write => "write",
            Nwrite => "nwrite",
            Fence => "fence",
            SyncWait => "sync_wait",
            Wait => "wait",
            CollEnter => "coll_enter",
            CollExit => "coll_exit",
            RegionBegin => "region_begin",
            RegionEnd => "region_end",
            Flush => "flush",
            Suspension => "suspension",
            SuspensionClock => "suspension_clock",
            ClockOffset => "clock_offset",
            ThreadSpawn => "thread_spawn",
            ThreadRun => "thread_run",
            ThreadBlock => "thread_block",
            ThreadExit => "thread_exit",
        }
    }

    /// Whether this is a thread record (`MTTL_TRACE_LEVEL=threads`).
    pub fn is_thread(self) -> bool {
        (80..=83).contains(&(self as u8))
    }

    /// Whether this is a call of a comm primitive.
    pub fn is_comm(self) -> bool {
        (10..=17).contains(&(self as u8))
    }
}

/// Why a rank wrote its buffer ([`Kind::Flush`]'s `a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FlushCause {
    /// The buffer was full and the policy writes on its own (`local`).
    Local = 1,
    /// Every rank, together, in a suspension after a collective
    /// (`equalized`, `static`).
    Suspension = 2,
    /// The buffer filled with no collective in sight under a synchronized
    /// policy: this rank wrote on its own, as `local` would.
    Fallback = 3,
}

/// The tag of a large message's body (`mttl-core`'s wire `DATA`): a
/// [`Kind::SendHeadedBulk`] or [`Kind::NsendHeaded`] is two messages, its
/// header (tag `a | TAG_LARGE`) and then its body (this tag).
pub const TAG_DATA: u64 = 15;
/// The bit a large message's header adds to its tag (wire `LARGE`).
pub const TAG_LARGE: u64 = 0x4000;

/// One event as recorded: what, with whom, two arguments, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: Kind,
    /// The other rank, if any.
    pub peer: Option<u32>,
    /// First argument (see [`Kind`]): a tag, a name id.
    pub a: u64,
    /// Second argument: bytes, a sequence number.
    pub b: u64,
    /// When it began, ns of the monotonic clock (equal to `end` for
    /// instants).
    pub begin: u64,
    /// When it ended (when it was recorded).
    pub end: u64,
}

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub fn put_varint(out: &mut [u8], pos: &mut usize, mut v: u64) {
    while v >= 0x80 {
        out[*pos] = (v as u8) | 0x80;
        *pos += 1;
        v >>= 7;
    }
    out[*pos] = v as u8;
    *pos += 1;
}

/// Reads an unsigned LEB128 varint at `*pos`, or `None` when the bytes end
/// first or it is longer than ten bytes.
pub fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Zigzag: a signed delta as an unsigned varint value.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes an event record into `out` (at least [`MAX_EVENT_LEN`] bytes)
/// and returns its length. `prev_end` is the end time of the block's
/// previous record (its base time for the first): each record stores its
/// end as a signed delta from it, and its duration.
#[inline]
pub fn encode_event(out: &mut [u8], e: &Event, prev_end: u64) -> usize {
    let mut pos = 0;
    out[0] = e.kind as u8;
    pos += 1;
    put_varint(out, &mut pos, e.peer.map_or(0, |p| u64::from(p) + 1));
    put_varint(out, &mut pos, e.a);
    put_varint(out, &mut pos, e.b);
    put_varint(out, &mut pos, zigzag(e.end.wrapping_sub(prev_end) as i64));
    put_varint(out, &mut pos, e.end.saturating_sub(e.begin));
    pos
}

/// Encodes a name record (`id`, `name` cut to [`MAX_NAME_LEN`]) and returns
/// the bytes.
pub fn encode_name(id: u64, name: &str) -> Vec<u8> {
    let mut cut = name.len().min(MAX_NAME_LEN);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = vec![0u8; 1 + 10 + 10 + cut];
    out[0] = Kind::Name as u8;
    let mut pos = 1;
    put_varint(&mut out, &mut pos, id);
    put_varint(&mut out, &mut pos, cut as u64);
    out[pos..pos + cut].copy_from_slice(&name.as_bytes()[..cut]);
    out.truncate(pos + cut);
    out
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A name table entry.
    Name {
        /// The id events use.
        id: u64,
        /// The name.
        name: String,
    },
    /// An event.
    Event(Event),
}

/// Why a block's payload does not decode, and at which byte of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// Offset of the bad record in the payload.
    pub offset: usize,
    /// What is wrong.
    pub what: &'static str,
}

/// Decodes the record at `*pos` of `payload`, advancing `*pos`; `prev_end`
/// is updated as in [`encode_event`].
pub fn decode_record(
    payload: &[u8],
    pos: &mut usize,
    prev_end: &mut u64,
) -> Result<Record, RecordError> {
    let offset = *pos;
    let err = |what| RecordError { offset, what };
    let kind_byte = *payload.get(*pos).ok_or(err("record past the payload"))?;
    *pos += 1;
    let kind = Kind::from_u8(kind_byte).ok_or(err("unknown record kind"))?;
    let mut next = || get_varint(payload, pos).ok_or(err("truncated or overlong varint"));
    if kind == Kind::Name {
        let id = next()?;
        let len = next()? as usize;
        if len > MAX_NAME_LEN {
            return Err(err("name longer than the format allows"));
        }
        let bytes = payload
            .get(*pos..*pos + len)
            .ok_or(err("name past the payload"))?;
        let name = std::str::from_utf8(bytes)
            .map_err(|_| err("name is not UTF-8"))?
            .to_owned();
        *pos += len;
        return Ok(Record::Name { id, name });
    }
    let peer = next()?;
    let a = next()?;
    let b = next()?;
    let delta = unzigzag(next()?);
    let dur = next()?;
    let end = prev_end.wrapping_add(delta as u64);
    let begin = end
        .checked_sub(dur)
        .ok_or(err("duration longer than the time since the clock's zero"))?;
    *prev_end = end;
    let peer = match peer {
        0 => None,
        p => Some(u32::try_from(p - 1).map_err(|_| err("peer rank beyond u32"))?),
    };
    Ok(Record::Event(Event {
        kind,
        peer,
        a,
        b,
        begin,
        end,
    }))
}

/// The block checksum: a 64-bit multiply-rotate hash over little-endian
/// 8-byte words (the last word zero-padded), then the length, folded to 32
/// bits. Word-wise, it costs about a tenth of a byte-wise CRC, which matters
/// since every recorded byte passes through it; it detects torn and
/// corrupted blocks, not deliberate forgery.
pub fn checksum(parts: &[&[u8]]) -> u32 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    let mut total = 0u64;
    for part in parts {
        total += part.len() as u64;
        let mut chunks = part.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h ^ w).wrapping_mul(K).rotate_left(29);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            h = (h ^ u64::from_le_bytes(last))
                .wrapping_mul(K)
                .rotate_left(29);
        }
    }
    h = (h ^ total).wrapping_mul(K);
    h ^= h >> 32;
    h as u32
}

/// The file header: who wrote the file and how to read its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// The format version.
    pub version: u16,
    /// One of the `STATUS_*` values.
    pub status: u8,
    /// The flush policy's code (1 memory, 2 local).
    pub policy: u8,
    /// The job's id, the same in every rank's file of one run.
    pub job_id: u64,
    /// The rank that wrote the file.
    pub rank: u32,
    /// The job's number of ranks.
    pub size: u32,
    /// CLOCK_MONOTONIC at the start of tracing, ns (event times are on
    /// this clock).
    pub mono_start: u64,
    /// CLOCK_REALTIME at the same moment, ns since the Unix epoch.
    pub real_start: u64,
    /// The bytes of the per-rank buffer.
    pub buffer: u64,
}

/// Why a file header cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The file is shorter than a header.
    Short,
    /// Not a trace file.
    Magic,
    /// A format version this code does not read.
    Version(u16),
    /// The header's checksum does not match.
    Checksum,
}

impl FileHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; FILE_HEADER_LEN] {
        let mut h = [0u8; FILE_HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..10].copy_from_slice(&self.version.to_le_bytes());
        h[10] = self.status;
        h[11] = self.policy;
        h[12..20].copy_from_slice(&self.job_id.to_le_bytes());
        h[20..24].copy_from_slice(&self.rank.to_le_bytes());
        h[24..28].copy_from_slice(&self.size.to_le_bytes());
        h[28..36].copy_from_slice(&self.mono_start.to_le_bytes());
        h[36..44].copy_from_slice(&self.real_start.to_le_bytes());
        h[44..52].copy_from_slice(&self.buffer.to_le_bytes());
        let sum = checksum(&[&h[..60]]);
        h[60..64].copy_from_slice(&sum.to_le_bytes());
        h
    }

    /// Reads a header; the version is checked before the checksum, so a
    /// file of another version is named as such.
    pub fn decode(bytes: &[u8]) -> Result<FileHeader, HeaderError> {
        let h = bytes.get(..FILE_HEADER_LEN).ok_or(HeaderError::Short)?;
        if h[0..8] != MAGIC {
            return Err(HeaderError::Magic);
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION {
            return Err(HeaderError::Version(version));
        }
        if checksum(&[&h[..60]]).to_le_bytes() != h[60..64] {
            return Err(HeaderError::Checksum);
        }
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let u64_at = |i: usize| u64::from(u32_at(i)) | (u64::from(u32_at(i + 4)) << 32);
        Ok(FileHeader {
            version,
            status: h[10],
            policy: h[11],
            job_id: u64_at(12),
            rank: u32_at(20),
            size: u32_at(24),
            mono_start: u64_at(28),
            real_start: u64_at(36),
            buffer: u64_at(44),
        })
    }
}

/// A block's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// [`BLOCK_EVENTS`] or [`BLOCK_END`].
    pub kind: u8,
    /// The payload's bytes.
    pub len: u32,
    /// The records in the payload.
    pub count: u32,
    /// The time the first record's end is a delta from.
    pub base: u64,
    /// [`checksum`] of the header's first 24 bytes and the payload.
    pub checksum: u32,
}

impl BlockHeader {
    /// The first 24 bytes (all but the checksum).
    pub fn encode_unsummed(&self) -> [u8; 24] {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&BLOCK_MAGIC);
        h[4] = self.kind;
        h[8..12].copy_from_slice(&self.len.to_le_bytes());
        h[12..16].copy_from_slice(&self.count.to_le_bytes());
        h[16..24].copy_from_slice(&self.base.to_le_bytes());
        h
    }

    /// Reads a block header (magic checked; the checksum is the caller's,
    /// once the payload is read).
    pub fn decode(h: &[u8; BLOCK_HEADER_LEN]) -> Option<BlockHeader> {
        if h[0..4] != BLOCK_MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        Some(BlockHeader {
            kind: h[4],
            len: u32_at(8),
            count: u32_at(12),
            base: u64::from(u32_at(16)) | (u64::from(u32_at(20)) << 32),
            checksum: u32_at(24),
        })
    }
}

/// The payload of the end block: the rank's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndTotals {
    /// Events recorded (written).
    pub events: u64,
    /// Events lost because the buffer was full and the policy does not write.
    pub dropped: u64,
    /// Times the buffer was written before the end.
    pub flushes: u64,
}

impl EndTotals {
    /// The payload's bytes.
    pub fn encode(&self) -> [u8; 24] {
        let mut p = [0u8; 24];
        p[0..8].copy_from_slice(&self.events.to_le_bytes());
        p[8..16].copy_from_slice(&self.dropped.to_le_bytes());
        p[16..24].copy_from_slice(&self.flushes.to_le_bytes());
        p
    }

    /// Reads the payload.
    pub fn decode(p: &[u8]) -> Option<EndTotals> {
        if p.len() != 24 {
            return None;
        }
        let u64_at = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&p[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(EndTotals {
            events: u64_at(0),
            dropped: u64_at(8),
            flushes: u64_at(16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overlong() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut buf = [0u8; 10];
            let mut pos = 0;
            put_varint(&mut buf, &mut pos, v);
            let mut rd = 0;
            assert_eq!(get_varint(&buf[..pos], &mut rd), Some(v));
            assert_eq!(rd, pos);
        }
        let mut rd = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut rd), None);
        let mut rd = 0;
        assert_eq!(get_varint(&[0x80], &mut rd), None);
    }

    #[test]
    fn events_round_trip_with_deltas_either_way() {
        let events = [
            Event {
                kind: Kind::Send,
                peer: Some(3),
                a: 7,
                b: 4096,
                begin: 1_000,
                end: 1_500,
            },
            Event {
                kind: Kind::CollEnter,
                peer: None,
                a: 2,
                b: 9,
                begin: 1_400,
                end: 1_400,
            },
        ];
        let mut buf = Vec::new();
        let mut prev = 1_000;
        for e in &events {
            let mut rec = [0u8; MAX_EVENT_LEN];
            let n = encode_event(&mut rec, e, prev);
            buf.extend_from_slice(&rec[..n]);
            prev = e.end;
        }
        buf.extend_from_slice(&encode_name(5, "barrier"));
        let (mut pos, mut prev) = (0, 1_000);
        for e in &events {
            assert_eq!(
                decode_record(&buf, &mut pos, &mut prev),
                Ok(Record::Event(*e))
            );
        }
        assert_eq!(
            decode_record(&buf, &mut pos, &mut prev),
            Ok(Record::Name {
                id: 5,
                name: "barrier".into()
            })
        );
        assert_eq!(pos, buf.len());
    }

    #[test]
    fn headers_round_trip_and_checksums_catch_a_flipped_bit() {
        let h = FileHeader {
            version: VERSION,
            status: STATUS_FINISHED,
            policy: 2,
            job_id: 0xdead_beef,
            rank: 3,
            size: 4,
            mono_start: 12,
            real_start: 34,
            buffer: 1 << 20,
        };
        let mut bytes = h.encode();
        assert_eq!(FileHeader::decode(&bytes), Ok(h));
        bytes[21] ^= 4;
        assert_eq!(FileHeader::decode(&bytes), Err(HeaderError::Checksum));
        bytes[8] = 9;
        assert_eq!(FileHeader::decode(&bytes), Err(HeaderError::Version(9)));
        let payload = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        let a = checksum(&[&payload]);
        let mut flipped = payload;
        flipped[8] ^= 1;
        assert_ne!(a, checksum(&[&flipped]));
        assert_ne!(a, checksum(&[&payload[..8]]));
    }

    #[test]
    fn thread_kinds_have_their_published_numbers() {
        // Other tools (the exports) code against these numbers.
        let kinds = [
            (80, Kind::ThreadSpawn, "thread_spawn"),
            (81, Kind::ThreadRun, "thread_run"),
            (82, Kind::ThreadBlock, "thread_block"),
            (83, Kind::ThreadExit, "thread_exit"),
        ];
        for (byte, kind, name) in kinds {
            assert_eq!(kind as u8, byte);
            assert_eq!(Kind::from_u8(byte), Some(kind));
            assert_eq!(kind.name(), name);
            assert!(kind.is_thread() && !kind.is_comm());
        }
        assert!(!Kind::Flush.is_thread() && Kind::from_u8(84).is_none());
        let id = thread_id(7, 3);
        assert_eq!(id, 7 | (3 << 32));
        assert_ne!(id, LOOP_THREAD);
        let mut out = [0u8; MAX_EVENT_LEN];
        let e = Event {
            kind: Kind::ThreadBlock,
            peer: None,
            a: 5,
            b: LOOP_THREAD - 1,
            begin: 1_000,
            end: 1_000,
        };
        let n = encode_event(&mut out, &e, 900);
        assert!(n <= MAX_EVENT_LEN);
    }

    #[test]
    fn names_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_NAME_LEN);
        let rec = encode_name(1, &long);
        let (mut pos, mut prev) = (0, 0);
        let Ok(Record::Name { name, .. }) = decode_record(&rec, &mut pos, &mut prev) else {
            panic!("not a name");
        };
        assert!(name.len() <= MAX_NAME_LEN && long.starts_with(&name));
    }
}
