//! Message kinds and header layouts of the runtime's protocol.
//!
//! The kind travels in the comm layer's tag, the sender in its envelope and
//! the size in its length, so a runtime header holds only what is left. Each
//! kind has a fixed header length; the body follows it.
//!
//! | kind          | header                                     | bytes | body                          |
//! |---------------|--------------------------------------------|-------|-------------------------------|
//! | `INVOKE`      | function id u64, reply cell u32, flags u8  | 13    | encoded args                  |
//! | `CELL_WRITE`  | cell u32, status u8                        | 5     | encoded value                 |
//! | `WRITE`       | region u32, addr u64                       | 12    | bytes                         |
//! | `WRITE_ACK`   | region u32, addr u64, reply cell u32       | 16    | bytes                         |
//! | `READ`        | region u32, addr u64, len u32, cell u32    | 20    | -                             |
//! | `FENCE`       | reply cell u32                             | 4     | -                             |
//! | `ATOMIC`      | region u32, addr u64, cell u32, op u8      | 17    | operands                      |
//! | `METHOD`      | region u32, addr u64, id u64, cell u32     | 24    | encoded args                  |
//! | `COLL`        | sequence u64, collective u8, step u8       | 10    | payload                       |
//! | `COLL_REPORT` | site u64, root u32, slack i64 (signed)     | 20    | none, or a 16-byte echo       |
//! | `HELLO`       | registry digest u64                        | 8     | function names                |
//! | `HELLO_ACK`   | status u8                                  | 1     | message                       |
//! | `EXIT`        | exit code i32                              | 4     | -                             |
//! | `EXIT_ACK`    | -                                          | 0     | -                             |
//! | `ABORT`       | exit code i32                              | 4     | message                       |
//! | `WATCH`       | round u64                                  | 8     | -                             |
//! | `WATCH_STATE` | round u64, idle ms u64, sent u64, recv u64 | 32    | -                             |
//! | `WATCH_FIRE`  | exit code i32, idle ms u64                 | 12    | -                             |
//! | `BATCH`       | -                                          | 0     | small messages (see `outbox`) |
//!
//! A remote write's header is 12 bytes and a read's 20, within the paper's
//! 16 and 24 (which also carried node and size, carried here by the comm
//! layer's envelope). A global-memory `addr` is the byte offset in the
//! region with the element size in its top 16 bits (see `global`).
//!
//! # Large bodies (paper §3.3)
//!
//! A body above the eager limit (`MTTL_EAGER_LIMIT`, default 64 KiB) is not
//! copied behind its header. Instead:
//!
//! 1. the sender sends the header alone with tag `kind | LARGE` (`asend`),
//! 2. then the body as its own message with tag `DATA`, straight from the
//!    caller's buffer (`asend`) or from an owned one (`nsend`);
//! 3. the receiver, seeing `LARGE`, receives the very next message from the
//!    same sender (`brecnode`), which per-pair ordering makes the body.

use mttl_comm::Tag;

pub(crate) const INVOKE: Tag = 1;
pub(crate) const CELL_WRITE: Tag = 2;
pub(crate) const WRITE: Tag = 3;
pub(crate) const WRITE_ACK: Tag = 4;
pub(crate) const READ: Tag = 5;
pub(crate) const FENCE: Tag = 6;
pub(crate) const ATOMIC: Tag = 7;
pub(crate) const METHOD: Tag = 8;
pub(crate) const COLL: Tag = 9;
pub(crate) const HELLO: Tag = 10;
pub(crate) const HELLO_ACK: Tag = 11;
pub(crate) const EXIT: Tag = 12;
pub(crate) const EXIT_ACK: Tag = 13;
pub(crate) const ABORT: Tag = 14;
/// The body of a large message.
pub(crate) const DATA: Tag = 15;
/// The watchdog's messages (see `watchdog`).
pub(crate) const WATCH: Tag = 16;
pub(crate) const WATCH_STATE: Tag = 17;
pub(crate) const WATCH_FIRE: Tag = 18;
/// Small messages sent as one (see `outbox`).
pub(crate) const BATCH: Tag = 19;
/// A rank's wait evaluation for an adaptive broadcast's root (see
/// `coll::adaptive`).
pub(crate) const COLL_REPORT: Tag = 20;
/// Flag: the body follows as a separate `DATA` message.
pub(crate) const LARGE: Tag = 0x4000;

/// Status byte of a `CELL_WRITE`.
pub(crate) const STATUS_OK: u8 = 0;
/// The remote function panicked; the body is the message.
pub(crate) const STATUS_PANIC: u8 = 1;
/// The request failed before running (unknown function, bad pointer...).
pub(crate) const STATUS_ERROR: u8 = 2;

/// The fixed header length of each kind.
pub(crate) fn header_len(kind: Tag) -> Option<usize> {
    Some(match kind {
        INVOKE => 13,
        CELL_WRITE => 5,
        WRITE => 12,
        WRITE_ACK => 16,
        READ => 20,
        FENCE => 4,
        ATOMIC => 17,
        METHOD => 24,
        COLL => 10,
        HELLO => 8,
        HELLO_ACK => 1,
        EXIT => 4,
        EXIT_ACK => 0,
        ABORT => 4,
        WATCH => 8,
        WATCH_STATE => 32,
        WATCH_FIRE => 12,
        BATCH => 0,
        COLL_REPORT => 20,
        _ => return None,
    })
}

/// A cursor over a header's fields (little-endian).
#[derive(Debug)]
pub(crate) struct Fields<'a>(pub(crate) &'a [u8]);

impl Fields<'_> {
    pub(crate) fn u8(&mut self) -> u8 {
        let v = self.0[0];
        self.0 = &self.0[1..];
        v
    }

    pub(crate) fn u32(&mut self) -> u32 {
        let (a, rest) = self.0.split_at(4);
        self.0 = rest;
        u32::from_le_bytes([a[0], a[1], a[2], a[3]])
    }

    pub(crate) fn u64(&mut self) -> u64 {
        let (a, rest) = self.0.split_at(8);
        self.0 = rest;
        let mut b = [0u8; 8];
        b.copy_from_slice(a);
        u64::from_le_bytes(b)
    }

    pub(crate) fn i32(&mut self) -> i32 {
        self.u32() as i32
    }
}

/// Builds a header.
#[derive(Debug, Default)]
pub(crate) struct HeaderBuf {
    pub(crate) bytes: Vec<u8>,
}

impl HeaderBuf {
    pub(crate) fn with_capacity(n: usize) -> Self {
        HeaderBuf {
            bytes: Vec::with_capacity(n),
        }
    }

    pub(crate) fn u8(mut self, v: u8) -> Self {
        self.bytes.push(v);
        self
    }

    pub(crate) fn u32(mut self, v: u32) -> Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn u64(mut self, v: u64) -> Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn i32(self, v: i32) -> Self {
        self.u32(v as u32)
    }
}
