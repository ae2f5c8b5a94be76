//! Frames: how messages travel on an authenticated TCP connection.
//!
//! Every frame is a 16-byte little-endian header followed by `len` payload
//! bytes:
//!
//! | bytes | field | value                                             |
//! |-------|-------|---------------------------------------------------|
//! | 0..2  | magic | `0x4d54` ("MT")                                   |
//! | 2     | kind  | [`FrameKind`]: 0 data, 1 goodbye                  |
//! | 3     | flags | bit 0: *bulk* (see below); the others are reserved, |
//! |       |       | and a frame with any of them set is rejected      |
//! | 4..8  | tag   | the message tag                                   |
//! | 8..16 | len   | payload length, at most the receiver's maximum    |
//!
//! The header is validated before anything is allocated for the payload, so
//! a bad or hostile length field costs nothing: it is an error.
//!
//! [`FrameReader`] turns the byte stream of one connection back into frames.
//! Small frames are parsed out of one reusable read buffer (one `read` call
//! brings many); a payload larger than that buffer gets its own vector and
//! the rest of it is read straight into place, with no extra copy. From a
//! socket ([`FrameReader::read_from_socket`]) the kernel writes that rest
//! into the vector's uninitialised capacity, so a large payload is neither
//! zeroed first nor its pages touched twice; from any other reader
//! ([`FrameReader::read_from`]) the vector is zeroed piece by piece, just
//! ahead of each read. Both run the same state machine.
//!
//! A reader told to [pause](FrameReader::pause_large) stops at the header
//! of such a large payload instead if the frame is *bulk* (flag bit 0: the
//! sender expects it to be received into memory of the receiver's
//! choosing), leaving it in the socket: its owner may
//! then read it straight into memory of its choosing
//! ([`FrameReader::read_paused_from_socket`]), or [resume](FrameReader::resume)
//! as above. That is how a large remote write lands in its region without
//! a copy.

use std::io::{self, Read};
use std::os::fd::AsRawFd;

use crate::comm::Tag;

/// The size of a frame header in bytes.
pub(crate) const HEADER_LEN: usize = 16;

const MAGIC: u16 = 0x4d54;

/// The size of the reusable read buffer of each connection.
const READ_BUF_LEN: usize = 64 * 1024;

/// How much of a large payload a plain reader's path zeroes ahead of a read.
const ZERO_AHEAD: usize = 64 * 1024;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// A user message.
    Data = 0,
    /// The sender has called `finish` and will send nothing more.
    Goodbye = 1,
}

/// A decoded, validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: FrameKind,
    pub(crate) tag: Tag,
    pub(crate) len: usize,
    /// Sent by `send_bulk` and its kin: the receiver will likely want the
    /// payload in memory of its own (`recv_from_into`), so a pausing
    /// reader stops at it.
    pub(crate) bulk: bool,
}

/// The flag bit of a bulk frame.
const FLAG_BULK: u8 = 1;

impl Header {
    /// The header of a data frame.
    pub(crate) fn data(tag: Tag, len: usize, bulk: bool) -> Header {
        Header {
            kind: FrameKind::Data,
            tag,
            len,
            bulk,
        }
    }

    /// The header of a goodbye frame, which carries nothing.
    pub(crate) fn goodbye() -> Header {
        Header {
            kind: FrameKind::Goodbye,
            tag: 0,
            len: 0,
            bulk: false,
        }
    }

    /// Encodes the header.
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = self.kind as u8;
        b[3] = if self.bulk { FLAG_BULK } else { 0 };
        b[4..8].copy_from_slice(&self.tag.to_le_bytes());
        b[8..16].copy_from_slice(&(self.len as u64).to_le_bytes());
        b
    }

    /// Decodes and validates a header; `max_len` bounds the payload length.
    pub(crate) fn decode(b: &[u8; HEADER_LEN], max_len: usize) -> Result<Header, String> {
        // Nothing larger can be allocated (a larger `Vec` is a panic), nor
        // added to `HEADER_LEN` without overflow, whatever the maximum.
        let max_len = max_len.min(isize::MAX as usize);
        let magic = u16::from_le_bytes([b[0], b[1]]);
        if magic != MAGIC {
            return Err(format!("bad magic 0x{magic:04x} (expected 0x{MAGIC:04x})"));
        }
        let kind = match b[2] {
            0 => FrameKind::Data,
            1 => FrameKind::Goodbye,
            k => return Err(format!("unknown frame kind {k}")),
        };
        if b[3] & !FLAG_BULK != 0 {
            return Err(format!("reserved flags set (0x{:02x})", b[3]));
        }
        let bulk = b[3] & FLAG_BULK != 0;
        let tag = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let len64 = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
        let len = usize::try_from(len64)
            .ok()
            .filter(|&l| l <= max_len)
            .ok_or_else(|| format!("payload length {len64} exceeds the maximum of {max_len}"))?;
        if kind == FrameKind::Goodbye && (len != 0 || bulk) {
            return Err(format!(
                "goodbye frame with a {len}-byte payload or the bulk flag"
            ));
        }
        Ok(Header {
            kind,
            tag,
            len,
            bulk,
        })
    }
}

/// A complete frame read from a connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) header: Header,
    pub(crate) payload: Vec<u8>,
}

/// Why reading stopped.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection (end of stream).
    Closed {
        /// Whether the stream ended in the middle of a frame.
        mid_frame: bool,
    },
    /// The peer sent bytes that are not a valid frame.
    Malformed(String),
    /// The transport failed.
    Io(io::Error),
}

/// A payload too large for the read buffer, being read straight into place.
///
/// `payload` has the capacity of the whole payload from the start; its
/// length is how much of it is initialised (`filled` bytes received, then
/// possibly zeroes a plain reader is about to read over).
#[derive(Debug)]
struct LargePayload {
    header: Header,
    payload: Vec<u8>,
    filled: usize,
}

/// Where a [`FrameReader`] gets its bytes: any reader, or a socket that can
/// read into uninitialised memory.
trait Source {
    /// As [`Read::read`].
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;

    /// Reads at most `max` bytes into the spare capacity of `v` and adds
    /// what it read to `v`'s length; `None` if this source cannot (the
    /// caller then zeroes memory to read into with [`read`](Self::read)).
    fn read_spare(&mut self, v: &mut Vec<u8>, max: usize) -> Option<io::Result<usize>>;

    /// Called after each read of a payload of [`QUICK_ACK_MIN`] bytes or
    /// more: a socket acknowledges them at once ([`ack_now`]).
    fn read_large(&mut self) {}
}

/// Any reader: reads into initialised memory only.
struct Plain<'a, R>(&'a mut R);

impl<R: Read> Source for Plain<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn read_spare(&mut self, _v: &mut Vec<u8>, _max: usize) -> Option<io::Result<usize>> {
        None
    }
}

/// A socket: `recv` writes straight into uninitialised memory.
struct Socket<'a, S>(&'a mut S);

impl<S: Read + AsRawFd> Source for Socket<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }

    fn read_spare(&mut self, v: &mut Vec<u8>, max: usize) -> Option<io::Result<usize>> {
        let room = max.min(v.capacity() - v.len());
        let spare = &mut v.spare_capacity_mut()[..room];
        // SAFETY: `spare` is valid for writes of `spare.len()` bytes for the
        // duration of the call (it is borrowed from `v`), and `recv` only
        // writes to that memory, never reads it; the descriptor is the
        // socket's own, open while `self.0` is borrowed.
        let n = unsafe {
            libc::recv(
                self.0.as_raw_fd(),
                spare.as_mut_ptr().cast::<libc::c_void>(),
                spare.len(),
                0,
            )
        };
        // A negative count is an error; anything else fits a usize.
        let Ok(n) = usize::try_from(n) else {
            return Some(Err(io::Error::last_os_error()));
        };
        let len = v.len() + n;
        // SAFETY: `recv` initialised the first `n` bytes of the spare
        // capacity (`n <= spare.len()`), so the first `len` bytes of `v` are
        // initialised and `len <= v.capacity()`.
        unsafe { v.set_len(len) };
        Some(Ok(n))
    }

    fn read_large(&mut self) {
        ack_now(&*self.0);
    }
}

/// The smallest payload whose reads are acknowledged at once
/// ([`ack_now`]): as large as the send buffer a link asks for by default
/// (`MTTL_TCP_SNDBUF`), so a payload that cannot be written in one go.
/// Below it the acknowledgements cost more than they save (a stream of
/// medium messages is slower acknowledged at once).
const QUICK_ACK_MIN: usize = 256 << 10;

/// Has the kernel acknowledge what `socket` has received at once, rather
/// than after its delayed-acknowledgement timer (`TCP_QUICKACK`; Linux
/// drops back to delayed acknowledgements by itself, so this is asked again
/// after each read of a large payload).
///
/// A large payload's sender can only have so much unacknowledged data in
/// flight (its send buffer); acknowledgements held back by the receiver
/// starve it: large round trips then take up to twice as long, and vary
/// widely from run to run, even for a plain socket ping-pong. (Open MPI's
/// TCP transport gets the same effect by answering a large message's first
/// fragment with a message of its own, on which an acknowledgement rides.)
/// A failure changes nothing but the speed, so it is ignored.
///
/// Linux only: other systems have no such option (and nothing is done).
fn ack_now(socket: &impl AsRawFd) {
    #[cfg(target_os = "linux")]
    let _ = super::socket::set_socket_option(socket, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1);
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
}

/// Reassembles frames from one connection's byte stream.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    large: Option<LargePayload>,
    max_len: usize,
    /// Whether to stop at the header of a payload too large for `buf`.
    pause_large: bool,
    /// The header this reader stopped at; its payload's first bytes may be
    /// in `buf[start..end]`, the rest is unread.
    paused: Option<Header>,
    /// How many bytes [`read_from_socket`](FrameReader::read_from_socket)
    /// has read so far.
    bytes_read: u64,
}

impl FrameReader {
    /// A reader accepting payloads of at most `max_len` bytes.
    pub(crate) fn new(max_len: usize) -> Self {
        FrameReader {
            buf: vec![0u8; READ_BUF_LEN].into_boxed_slice(),
            start: 0,
            end: 0,
            large: None,
            max_len,
            pause_large: false,
            paused: None,
            bytes_read: 0,
        }
    }

    /// How many bytes [`read_from_socket`](FrameReader::read_from_socket)
    /// has read so far: a caller learns from it whether a read got any.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// From now on, stop at the header of every bulk payload too large for
    /// the read buffer (see the module doc).
    pub(crate) fn pause_large(&mut self) {
        self.pause_large = true;
    }

    /// The header of the payload this reader stopped at, if any.
    pub(crate) fn paused(&self) -> Option<Header> {
        self.paused
    }

    /// Whether a frame has been started but not finished.
    pub(crate) fn mid_frame(&self) -> bool {
        self.large.is_some() || self.paused.is_some() || self.end > self.start
    }

    /// Goes on past the payload this reader stopped at, if any: the next
    /// read takes it into a vector of its own, as without pausing.
    pub(crate) fn resume(&mut self) -> Result<(), ReadError> {
        self.unpause(&[])
    }

    /// Reads the payload this reader stopped at into `out[..len]`, where
    /// `filled` bytes of it already are: first what the read buffer holds,
    /// then from the socket `src` until it would block (acknowledging a large
    /// payload's reads at once, [`ack_now`]). Returns whether the payload is
    /// complete, after which the reader goes on with the next frame.
    ///
    /// # Panics
    ///
    /// Panics if the reader has not stopped at a payload, or `out` is
    /// shorter than it.
    pub(crate) fn read_paused_from_socket<S: Read + AsRawFd>(
        &mut self,
        src: &mut S,
        out: &mut [u8],
        filled: &mut usize,
    ) -> Result<bool, ReadError> {
        self.read_paused_from(&mut Socket(src), out, filled)
    }

    /// [`read_paused_from_socket`](Self::read_paused_from_socket) from any
    /// source.
    fn read_paused_from(
        &mut self,
        src: &mut impl Source,
        out: &mut [u8],
        filled: &mut usize,
    ) -> Result<bool, ReadError> {
        let header = self.paused.expect("the reader stopped at a payload");
        let out = &mut out[..header.len];
        if self.start < self.end {
            let n = (self.end - self.start).min(header.len - *filled);
            out[*filled..*filled + n].copy_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            *filled += n;
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
        }
        while *filled < header.len {
            match src.read(&mut out[*filled..]) {
                Ok(0) => return Err(ReadError::Closed { mid_frame: true }),
                Ok(n) => {
                    if header.len >= QUICK_ACK_MIN {
                        src.read_large();
                    }
                    *filled += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
        self.paused = None;
        Ok(true)
    }

    /// Gives up reading the paused payload in place after `placed`, its
    /// first bytes, were: they and the rest go into a vector of its own,
    /// as if the reader had not paused.
    pub(crate) fn unpause(&mut self, placed: &[u8]) -> Result<(), ReadError> {
        let Some(header) = self.paused.take() else {
            return Ok(());
        };
        self.start_large(header, placed)
    }

    /// Starts reading the payload of `header` into a vector of its own,
    /// whose first bytes are `placed` and then what the read buffer holds
    /// (all of it is this payload's).
    fn start_large(&mut self, header: Header, placed: &[u8]) -> Result<(), ReadError> {
        // Fallible: a length within a huge MTTL_MAX_MESSAGE may still be
        // more than this machine has. Not zeroed: the rest is read into the
        // spare capacity (see `read_source`).
        let mut payload = Vec::new();
        payload.try_reserve_exact(header.len).map_err(|_| {
            ReadError::Malformed(format!(
                "cannot allocate {} bytes for a payload (MTTL_MAX_MESSAGE is above what this machine can hold)",
                header.len
            ))
        })?;
        payload.extend_from_slice(placed);
        payload.extend_from_slice(&self.buf[self.start..self.end]);
        self.start = 0;
        self.end = 0;
        let filled = payload.len();
        self.large = Some(LargePayload {
            header,
            payload,
            filled,
        });
        Ok(())
    }

    /// Reads what `src` has now and hands every complete frame to `sink`,
    /// in order. Returns `Ok(())` when `src` would block, or after a short
    /// read (fewer bytes than asked: the socket is drained, and new data
    /// will raise a new edge) unless `to_the_end` asks to read until it
    /// would block: needed when the poll reported the peer's side closed,
    /// since an end of stream that is already queued raises no new edge.
    /// Any other end is an error.
    pub(crate) fn read_from<R: Read>(
        &mut self,
        src: &mut R,
        to_the_end: bool,
        sink: impl FnMut(Frame),
    ) -> Result<(), ReadError> {
        self.read_source(&mut Plain(src), to_the_end, sink)
    }

    /// As [`read_from`](Self::read_from), from a socket: the rest of a large
    /// payload is received straight into its vector's uninitialised
    /// capacity, without zeroing it first.
    pub(crate) fn read_from_socket<S: Read + AsRawFd>(
        &mut self,
        src: &mut S,
        to_the_end: bool,
        sink: impl FnMut(Frame),
    ) -> Result<(), ReadError> {
        self.read_source(&mut Socket(src), to_the_end, sink)
    }

    fn read_source(
        &mut self,
        src: &mut impl Source,
        to_the_end: bool,
        mut sink: impl FnMut(Frame),
    ) -> Result<(), ReadError> {
        loop {
            // Stopped at a payload: its owner reads it (or resumes).
            if self.paused.is_some() {
                return Ok(());
            }
            // A large payload in progress is read straight into its vector.
            if let Some(large) = &mut self.large {
                let got = if large.filled == large.payload.len() {
                    let left = large.header.len - large.filled;
                    match src.read_spare(&mut large.payload, left) {
                        Some(got) => got,
                        None => {
                            // Zero a piece ahead to read over.
                            let more = left.min(ZERO_AHEAD);
                            large.payload.resize(large.filled + more, 0);
                            src.read(&mut large.payload[large.filled..])
                        }
                    }
                } else {
                    src.read(&mut large.payload[large.filled..])
                };
                match got {
                    Ok(0) => return Err(ReadError::Closed { mid_frame: true }),
                    Ok(n) => {
                        if large.header.len >= QUICK_ACK_MIN {
                            src.read_large();
                        }
                        self.bytes_read += n as u64;
                        large.filled += n;
                        if large.filled == large.header.len {
                            if let Some(done) = self.large.take() {
                                sink(Frame {
                                    header: done.header,
                                    payload: done.payload,
                                });
                            }
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(ReadError::Io(e)),
                }
            }
            self.parse_buffered(&mut sink)?;
            if self.large.is_some() || self.paused.is_some() {
                continue;
            }
            // Make room, then read more into the buffer.
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let room = self.buf.len() - self.end;
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    return Err(ReadError::Closed {
                        mid_frame: self.mid_frame(),
                    })
                }
                Ok(n) => {
                    self.bytes_read += n as u64;
                    self.end += n;
                    if n < room && !to_the_end {
                        // A short read: the socket is drained for now. Parse
                        // what came; edge-triggered readiness reports new data.
                        self.parse_buffered(&mut sink)?;
                        if self.large.is_none() {
                            return Ok(());
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// Hands every complete frame in the buffer to `sink`; starts a large
    /// payload when one does not fit.
    fn parse_buffered(&mut self, sink: &mut impl FnMut(Frame)) -> Result<(), ReadError> {
        while self.end - self.start >= HEADER_LEN {
            let mut hb = [0u8; HEADER_LEN];
            hb.copy_from_slice(&self.buf[self.start..self.start + HEADER_LEN]);
            let header = Header::decode(&hb, self.max_len).map_err(ReadError::Malformed)?;
            let body_start = self.start + HEADER_LEN;
            let have = self.end - body_start;
            if have >= header.len {
                let payload = self.buf[body_start..body_start + header.len].to_vec();
                self.start = body_start + header.len;
                sink(Frame { header, payload });
            } else if HEADER_LEN + header.len <= self.buf.len() {
                // Fits the buffer once more bytes arrive.
                break;
            } else {
                self.start = body_start;
                if self.pause_large && header.bulk {
                    self.paused = Some(header);
                    return Ok(());
                }
                return self.start_large(header, &[]);
            }
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// How long a test of the reader may take: each reads a few MiB from
    /// memory at most, so running out means a loop that never ends.
    const DEADLINE: Duration = Duration::from_secs(30);

    /// Runs a test's body within [`DEADLINE`] (see `test_deadline`).
    fn deadline<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
        super::super::test_deadline::within(what, DEADLINE, body)
    }

    /// A reader that hands out its bytes in chunks of a given size, then
    /// would block (or ends, if `eof`).
    struct Chunked {
        data: Vec<u8>,
        pos: usize,
        chunk: usize,
        eof: bool,
    }

    impl Read for Chunked {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.data.len() {
                return if self.eof {
                    Ok(0)
                } else {
                    Err(io::ErrorKind::WouldBlock.into())
                };
            }
            let n = out.len().min(self.chunk).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    fn frame_bytes(tag: Tag, payload: &[u8]) -> Vec<u8> {
        flagged_frame_bytes(tag, payload, false)
    }

    fn flagged_frame_bytes(tag: Tag, payload: &[u8], bulk: bool) -> Vec<u8> {
        let mut v = Header {
            kind: FrameKind::Data,
            tag,
            len: payload.len(),
            bulk,
        }
        .encode()
        .to_vec();
        v.extend_from_slice(payload);
        v
    }

    fn read_all(data: Vec<u8>, chunk: usize) -> Vec<Frame> {
        let mut src = Chunked {
            data,
            pos: 0,
            chunk,
            eof: false,
        };
        let mut reader = FrameReader::new(1 << 30);
        let mut frames = Vec::new();
        // Every read takes at least one byte: this many are enough.
        for _ in 0..=src.data.len() {
            if src.pos == src.data.len() {
                break;
            }
            reader
                .read_from(&mut src, false, |f| frames.push(f))
                .unwrap();
        }
        assert_eq!(src.pos, src.data.len(), "the reader stopped reading");
        assert!(!reader.mid_frame());
        frames
    }

    #[test]
    fn header_round_trips() {
        for bulk in [false, true] {
            let h = Header {
                kind: FrameKind::Data,
                tag: 77,
                len: 123_456,
                bulk,
            };
            assert_eq!(Header::decode(&h.encode(), 1 << 20), Ok(h));
        }
    }

    #[test]
    fn bad_headers_are_rejected() {
        let good = Header {
            kind: FrameKind::Data,
            tag: 1,
            len: 10,
            bulk: false,
        }
        .encode();
        let mut b = good;
        b[0] ^= 1;
        assert!(Header::decode(&b, 100).unwrap_err().contains("magic"));
        let mut b = good;
        b[2] = 9;
        assert!(Header::decode(&b, 100).unwrap_err().contains("kind"));
        let mut b = good;
        b[3] = 2;
        assert!(Header::decode(&b, 100).unwrap_err().contains("flags"));
        let mut b = good;
        b[3] = 1;
        assert!(Header::decode(&b, 100).unwrap().bulk);
        assert!(Header::decode(&good, 5).unwrap_err().contains("exceeds"));
        let mut b = good;
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        // Even with no maximum: no vector can be that long.
        assert!(Header::decode(&b, usize::MAX)
            .unwrap_err()
            .contains("exceeds"));
    }

    #[test]
    fn many_small_and_large_frames_in_any_chunking() {
        deadline("many_small_and_large_frames_in_any_chunking", || {
            let payloads: Vec<Vec<u8>> = [0usize, 1, 7, 100, 70_000, 3, 200_000, 0]
                .iter()
                .enumerate()
                .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
                .collect();
            let mut bytes = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                bytes.extend(frame_bytes(i as Tag, p));
            }
            for chunk in [1, 5, 16, 17, 1000, 65_536, 1 << 20] {
                let frames = read_all(bytes.clone(), chunk);
                assert_eq!(frames.len(), payloads.len(), "chunk {chunk}");
                for (i, (f, p)) in frames.iter().zip(&payloads).enumerate() {
                    assert_eq!(f.header.tag, i as Tag);
                    assert_eq!(&f.payload, p, "frame {i} with chunk {chunk}");
                }
            }
        });
    }

    /// A reader of `data` that has only the first `available` bytes so
    /// far, handed out `chunk` at a time.
    struct Arriving {
        data: Vec<u8>,
        pos: usize,
        available: usize,
        chunk: usize,
    }

    impl Read for Arriving {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let end = self.available.min(self.data.len());
            if self.pos == end {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = out.len().min(self.chunk).min(end - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    /// A pausing reader stops at every bulk payload too large for its
    /// buffer (not at a plain one); whether the owner then reads it in
    /// place (across several arrivals), resumes, or gives up part way,
    /// every frame comes out whole and in order.
    #[test]
    fn a_pausing_reader_loses_nothing_however_its_payloads_are_taken() {
        deadline(
            "a_pausing_reader_loses_nothing_however_its_payloads_are_taken",
            || {
                let payloads: Vec<Vec<u8>> = [5usize, 70_000, 1, 200_000, 65_521, 9, 300_000, 0]
                    .iter()
                    .enumerate()
                    .map(|(i, &n)| (0..n).map(|j| (i * 17 + j * 3) as u8).collect())
                    .collect();
                let mut bytes = Vec::new();
                for (i, p) in payloads.iter().enumerate() {
                    // All bulk but the large one of 65,521 bytes.
                    bytes.extend(flagged_frame_bytes(i as Tag, p, p.len() != 65_521));
                }
                for (step, chunk) in [(1000, 333), (40_000, 65_536), (1 << 20, 1 << 20)] {
                    let mut src = Arriving {
                        data: bytes.clone(),
                        pos: 0,
                        available: 0,
                        chunk,
                    };
                    let mut reader = FrameReader::new(1 << 30);
                    reader.pause_large();
                    let mut frames = Vec::new();
                    let mut pauses = 0;
                    // Every round makes `step` more bytes available: this many
                    // rounds (and as many in place) bring them all, with room.
                    let rounds = 2 * (src.data.len() / step + 10);
                    for round in 0.. {
                        if src.pos == src.data.len() && !reader.mid_frame() {
                            break;
                        }
                        assert!(round < rounds, "step {step}: no end after {rounds} rounds");
                        src.available += step;
                        reader
                            .read_from(&mut src, false, |f| frames.push(f))
                            .unwrap();
                        let Some(header) = reader.paused() else {
                            continue;
                        };
                        pauses += 1;
                        let mut out = vec![0u8; header.len + 10];
                        let mut filled = 0;
                        match pauses % 3 {
                            0 => {
                                for tries in 0.. {
                                    assert!(
                                        tries < rounds,
                                        "step {step}: the payload is never complete"
                                    );
                                    if reader
                                        .read_paused_from(
                                            &mut Plain(&mut src),
                                            &mut out,
                                            &mut filled,
                                        )
                                        .unwrap()
                                    {
                                        out.truncate(header.len);
                                        frames.push(Frame {
                                            header,
                                            payload: out,
                                        });
                                        break;
                                    }
                                    src.available += step;
                                }
                            }
                            1 => reader.resume().unwrap(),
                            _ => {
                                let done = reader.read_paused_from(
                                    &mut Plain(&mut src),
                                    &mut out,
                                    &mut filled,
                                );
                                assert!(!done.unwrap() || step == 1 << 20);
                                if reader.paused().is_some() {
                                    reader.unpause(&out[..filled]).unwrap();
                                } else {
                                    out.truncate(header.len);
                                    frames.push(Frame {
                                        header,
                                        payload: out,
                                    });
                                }
                            }
                        }
                    }
                    assert_eq!(pauses, 3, "step {step}: one pause per large bulk payload");
                    assert_eq!(frames.len(), payloads.len(), "step {step}");
                    for (i, (f, p)) in frames.iter().zip(&payloads).enumerate() {
                        assert_eq!(f.header.tag, i as Tag, "step {step}: out of order");
                        assert!(&f.payload == p, "step {step}: frame {i} is wrong");
                    }
                }
            },
        );
    }

    #[test]
    fn a_socket_fills_large_payloads_in_place() {
        deadline("a_socket_fills_large_payloads_in_place", || {
            use std::io::Write;
            use std::os::unix::net::UnixStream;

            let sizes = [0usize, 1, 70_000, 3, 200_000, 65_520, 65_521, 1 << 20, 5];
            let payloads: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| (0..n).map(|j| (i * 17 + j * 7) as u8).collect())
                .collect();
            let mut bytes = Vec::new();
            for (i, p) in payloads.iter().enumerate() {
                bytes.extend(frame_bytes(i as Tag, p));
            }
            let (mut tx, mut rx) = UnixStream::pair().unwrap();
            rx.set_nonblocking(true).unwrap();
            // Written in uneven pieces, so reads end mid-header and mid-payload.
            let writer = std::thread::spawn(move || {
                for piece in bytes.chunks(40_009) {
                    tx.write_all(piece).unwrap();
                }
            });
            let mut reader = FrameReader::new(1 << 30);
            let mut frames = Vec::new();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while frames.len() < payloads.len() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "only {} of {} frames arrived within 30 s",
                    frames.len(),
                    payloads.len()
                );
                reader
                    .read_from_socket(&mut rx, false, |f| frames.push(f))
                    .unwrap();
            }
            writer.join().unwrap();
            assert!(!reader.mid_frame());
            for (i, (f, p)) in frames.iter().zip(&payloads).enumerate() {
                assert_eq!(f.header.tag, i as Tag);
                assert_eq!(&f.payload, p, "frame {i}");
            }
        });
    }

    /// Only reads of payloads of QUICK_ACK_MIN bytes or more ask the
    /// socket to acknowledge at once.
    #[test]
    fn large_payloads_are_acknowledged_at_once() {
        deadline("large_payloads_are_acknowledged_at_once", || {
            struct Counting<'a> {
                inner: &'a mut Chunked,
                acks: usize,
            }
            impl Source for Counting<'_> {
                fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                    self.inner.read(buf)
                }
                fn read_spare(
                    &mut self,
                    _v: &mut Vec<u8>,
                    _max: usize,
                ) -> Option<io::Result<usize>> {
                    None
                }
                fn read_large(&mut self) {
                    self.acks += 1;
                }
            }
            let acks = |len: usize| {
                let mut src = Chunked {
                    data: frame_bytes(1, &vec![7; len]),
                    pos: 0,
                    chunk: 64 << 10,
                    eof: false,
                };
                let mut counting = Counting {
                    inner: &mut src,
                    acks: 0,
                };
                let mut reader = FrameReader::new(1 << 30);
                let mut frames = Vec::new();
                for _ in 0..=len {
                    if !frames.is_empty() {
                        break;
                    }
                    reader
                        .read_source(&mut counting, false, |f| frames.push(f))
                        .unwrap();
                }
                assert_eq!(frames.len(), 1, "the frame never came out");
                assert_eq!(frames[0].payload.len(), len);
                counting.acks
            };
            // The same for a payload read in place.
            let acks_in_place = |len: usize| {
                let mut src = Chunked {
                    data: flagged_frame_bytes(1, &vec![7; len], true),
                    pos: 0,
                    chunk: 64 << 10,
                    eof: false,
                };
                let mut counting = Counting {
                    inner: &mut src,
                    acks: 0,
                };
                let mut reader = FrameReader::new(1 << 30);
                reader.pause_large();
                reader.read_source(&mut counting, false, |_| {}).unwrap();
                assert!(reader.paused().is_some(), "a paused payload");
                let mut out = vec![0u8; len];
                let mut filled = 0;
                let done = reader.read_paused_from(&mut counting, &mut out, &mut filled);
                assert!(matches!(done, Ok(true)), "{done:?}");
                counting.acks
            };
            assert_eq!(acks_in_place(QUICK_ACK_MIN - 1), 0);
            assert!(acks_in_place(QUICK_ACK_MIN) >= 3);
            assert_eq!(acks(QUICK_ACK_MIN - 1), 0);
            // The payload's reads after its header's: 64 KiB each.
            assert!(acks(QUICK_ACK_MIN) >= 3, "{}", acks(QUICK_ACK_MIN));
            assert!(acks(1 << 20) >= 15);
            // On a real TCP socket it is only a hint: it succeeds or is ignored.
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            ack_now(&client);
        });
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        deadline("garbage_is_an_error_not_a_panic", || {
            let mut src = Chunked {
                data: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                pos: 0,
                chunk: 64,
                eof: false,
            };
            let mut reader = FrameReader::new(1 << 20);
            match reader.read_from(&mut src, false, |_| panic!("no frame expected")) {
                Err(ReadError::Malformed(m)) => assert!(m.contains("magic")),
                other => panic!("expected a malformed-frame error, got {other:?}"),
            }
        });
    }

    #[test]
    fn huge_length_field_allocates_nothing() {
        deadline("huge_length_field_allocates_nothing", || {
            let mut bytes = Header {
                kind: FrameKind::Data,
                tag: 0,
                len: 0,
                bulk: false,
            }
            .encode();
            bytes[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
            let mut src = Chunked {
                data: bytes.to_vec(),
                pos: 0,
                chunk: 64,
                eof: false,
            };
            let mut reader = FrameReader::new(1 << 20);
            assert!(matches!(
                reader.read_from(&mut src, false, |_| {}),
                Err(ReadError::Malformed(_))
            ));
        });
    }

    #[test]
    fn eof_mid_frame_is_reported() {
        deadline("eof_mid_frame_is_reported", || {
            let mut data = frame_bytes(1, &[1, 2, 3, 4]);
            data.truncate(18);
            let mut src = Chunked {
                data,
                pos: 0,
                chunk: 64,
                eof: true,
            };
            let mut reader = FrameReader::new(1 << 20);
            // A short read alone stops early; told the peer closed, it reads on.
            assert!(reader.read_from(&mut src, false, |_| {}).is_ok());
            assert!(matches!(
                reader.read_from(&mut src, true, |_| {}),
                Err(ReadError::Closed { mid_frame: true })
            ));
        });
    }

    /// A reader that hands out `data` in `chunk`s, then fails once with
    /// `error` (a reset connection, say), then ends: a reader that ignored
    /// the error and read on would meet the end and say so, never wait.
    struct Failing {
        data: Vec<u8>,
        pos: usize,
        chunk: usize,
        error: Option<io::ErrorKind>,
    }

    impl Failing {
        fn new(data: Vec<u8>, chunk: usize, error: io::ErrorKind) -> Failing {
            Failing {
                data,
                pos: 0,
                chunk,
                error: Some(error),
            }
        }
    }

    impl Read for Failing {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.pos == self.data.len() {
                return match self.error.take() {
                    Some(kind) => Err(kind.into()),
                    None => Ok(0),
                };
            }
            let n = out.len().min(self.chunk).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    /// A [`Failing`] reader seen as a socket: it reads into spare capacity
    /// as `recv` does, so the large-payload path of a socket is taken.
    struct FailingSocket(Failing);

    impl Source for FailingSocket {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read(buf)
        }

        fn read_spare(&mut self, v: &mut Vec<u8>, max: usize) -> Option<io::Result<usize>> {
            let room = max.min(v.capacity() - v.len());
            let mut piece = vec![0u8; room];
            Some(
                self.0
                    .read(&mut piece)
                    .inspect(|&n| v.extend_from_slice(&piece[..n])),
            )
        }
    }

    /// Reads everything `src` has with at most `reads` calls, each read
    /// to the end; the frames, and how reading stopped.
    fn read_until_error(
        reader: &mut FrameReader,
        src: &mut impl Source,
        reads: usize,
    ) -> (Vec<Frame>, Result<(), ReadError>) {
        let mut frames = Vec::new();
        for _ in 0..reads {
            if let Err(e) = reader.read_source(src, true, |f| frames.push(f)) {
                return (frames, Err(e));
            }
        }
        (frames, Ok(()))
    }

    fn assert_reset(result: Result<(), ReadError>, what: &str) {
        match result {
            Err(ReadError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{what}"),
            other => panic!("{what}: expected the reset, got {other:?}"),
        }
    }

    /// A transport error on every read path is reported as that error, not
    /// taken for "nothing yet" (which would leave the reader waiting for
    /// bytes that will never come) nor for an end of stream.
    #[test]
    fn a_reset_on_every_read_path_is_an_io_error() {
        deadline("a_reset_on_every_read_path_is_an_io_error", || {
            let small = frame_bytes(1, &[9; 1000]);
            let large = frame_bytes(2, &vec![8; 300_000]);
            let cases: [(&str, Vec<u8>); 4] = [
                ("mid-header", small[..10].to_vec()),
                ("mid-payload of a small frame", small[..500].to_vec()),
                ("mid-payload of a large frame", large[..150_000].to_vec()),
                ("between frames", [small.clone(), large.clone()].concat()),
            ];
            for (what, data) in cases {
                let expect_frames = usize::from(what == "between frames") * 2;
                // Read as a plain reader (zeroing ahead of each read) ...
                let mut reader = FrameReader::new(1 << 20);
                let mut src = Failing::new(data.clone(), 40_000, io::ErrorKind::ConnectionReset);
                let (frames, result) = read_until_error(&mut reader, &mut Plain(&mut src), 100);
                assert_eq!(frames.len(), expect_frames, "plain, {what}");
                assert_reset(result, &format!("plain, {what}"));
                assert_eq!(reader.mid_frame(), expect_frames == 0, "plain, {what}");
                // ... and as a socket (receiving into spare capacity).
                let mut reader = FrameReader::new(1 << 20);
                let mut src =
                    FailingSocket(Failing::new(data, 40_000, io::ErrorKind::ConnectionReset));
                let (frames, result) = read_until_error(&mut reader, &mut src, 100);
                assert_eq!(frames.len(), expect_frames, "socket, {what}");
                assert_reset(result, &format!("socket, {what}"));
            }
        });
    }

    /// A reset in the middle of a payload read in place is an error too.
    #[test]
    fn a_reset_mid_in_place_read_is_an_io_error() {
        deadline("a_reset_mid_in_place_read_is_an_io_error", || {
            let len = 200_000;
            let bytes = flagged_frame_bytes(3, &vec![5; len], true);
            for chunk in [1000, 64 << 10] {
                let mut src = Failing::new(
                    bytes[..120_000].to_vec(),
                    chunk,
                    io::ErrorKind::ConnectionReset,
                );
                let mut reader = FrameReader::new(1 << 20);
                reader.pause_large();
                reader
                    .read_from(&mut src, false, |_| panic!("no whole frame"))
                    .expect("the header arrives");
                assert_eq!(reader.paused().map(|h| h.len), Some(len));
                let mut out = vec![0u8; len];
                let mut filled = 0;
                let mut result = Ok(false);
                for _ in 0..1000 {
                    result = reader.read_paused_from(&mut Plain(&mut src), &mut out, &mut filled);
                    if !matches!(result, Ok(false)) {
                        break;
                    }
                }
                match result {
                    Err(ReadError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset),
                    other => panic!("chunk {chunk}: expected the reset, got {other:?}"),
                }
                assert_eq!(
                    filled,
                    120_000 - HEADER_LEN,
                    "chunk {chunk}: what arrived was placed"
                );
                assert!(out[..filled].iter().all(|&b| b == 5));
            }
        });
    }

    /// An interrupted read is retried on every path, and the frames come
    /// out whole.
    #[test]
    fn an_interrupted_read_is_retried() {
        deadline("an_interrupted_read_is_retried", || {
            struct Interrupting {
                inner: Chunked,
                every: usize,
                reads: usize,
            }
            impl Read for Interrupting {
                fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                    self.reads += 1;
                    if self.reads % self.every == 0 {
                        return Err(io::ErrorKind::Interrupted.into());
                    }
                    self.inner.read(out)
                }
            }
            let payloads = [vec![1u8; 10], vec![2u8; 300_000], vec![3u8; 20]];
            let bytes: Vec<u8> = payloads
                .iter()
                .enumerate()
                .flat_map(|(i, p)| flagged_frame_bytes(i as Tag, p, true))
                .collect();
            for every in [2, 3] {
                let mut src = Interrupting {
                    inner: Chunked {
                        data: bytes.clone(),
                        pos: 0,
                        chunk: 30_000,
                        eof: true,
                    },
                    every,
                    reads: 0,
                };
                let mut reader = FrameReader::new(1 << 20);
                let mut frames = Vec::new();
                let result = reader.read_from(&mut src, true, |f| frames.push(f));
                assert!(
                    matches!(result, Err(ReadError::Closed { mid_frame: false })),
                    "every {every}: {result:?}"
                );
                let got: Vec<Vec<u8>> = frames.into_iter().map(|f| f.payload).collect();
                assert_eq!(got, payloads, "every {every}");
                // In place too.
                src.inner.pos = 0;
                let mut reader = FrameReader::new(1 << 20);
                reader.pause_large();
                let mut frames = Vec::new();
                reader
                    .read_from(&mut src, true, |f| frames.push(f))
                    .unwrap();
                let header = reader.paused().expect("stopped at the large payload");
                let mut out = vec![0u8; header.len];
                let mut filled = 0;
                let done = reader.read_paused_from(&mut Plain(&mut src), &mut out, &mut filled);
                assert!(matches!(done, Ok(true)), "every {every}: {done:?}");
                assert_eq!(out, payloads[1]);
            }
        });
    }

    /// `bytes_read` counts every byte taken from the source, buffered or
    /// read straight into a large payload: it is how a caller learns that a
    /// read got anything.
    #[test]
    fn bytes_read_counts_every_byte_read() {
        deadline("bytes_read_counts_every_byte_read", || {
            let mut reader = FrameReader::new(1 << 30);
            assert_eq!(reader.bytes_read(), 0);
            let mut total = 0;
            for (tag, len) in [(1, 5usize), (2, 70_000), (3, 0), (4, 1 << 20)] {
                let bytes = frame_bytes(tag, &vec![tag as u8; len]);
                total += bytes.len() as u64;
                let mut src = Chunked {
                    data: bytes,
                    pos: 0,
                    chunk: 10_000,
                    eof: false,
                };
                let mut frames = Vec::new();
                for _ in 0..1000 {
                    if !frames.is_empty() {
                        break;
                    }
                    reader
                        .read_from(&mut src, false, |f| frames.push(f))
                        .unwrap();
                }
                assert_eq!(frames.len(), 1, "frame {tag}");
                assert_eq!(reader.bytes_read(), total, "after frame {tag}");
            }
            // A read that would block adds nothing.
            let mut empty = Chunked {
                data: Vec::new(),
                pos: 0,
                chunk: 1,
                eof: false,
            };
            reader.read_from(&mut empty, true, |_| {}).unwrap();
            assert_eq!(reader.bytes_read(), total);
        });
    }

    /// A goodbye is a frame of its own, with neither payload nor flag.
    #[test]
    fn goodbye_frames_carry_nothing() {
        let goodbye = Header {
            kind: FrameKind::Goodbye,
            tag: 0,
            len: 0,
            bulk: false,
        };
        assert_eq!(Header::decode(&goodbye.encode(), 0), Ok(goodbye));
        for bad in [
            Header { len: 1, ..goodbye },
            Header {
                bulk: true,
                ..goodbye
            },
        ] {
            assert_eq!(
                Header::decode(&bad.encode(), 100),
                Err(format!(
                    "goodbye frame with a {}-byte payload or the bulk flag",
                    bad.len
                ))
            );
        }
        assert_eq!(Header::data(5, 7, true).encode()[3], FLAG_BULK);
        assert_eq!(
            Header::decode(&Header::data(5, 7, false).encode(), 7),
            Ok(Header {
                kind: FrameKind::Data,
                tag: 5,
                len: 7,
                bulk: false
            })
        );
    }

    /// A frame as large as the read buffer (64 KiB with its header) waits
    /// there for the rest of its bytes and is parsed out of it, even when
    /// bulk; one byte more goes to a vector of its own, where a pausing
    /// reader stops.
    #[test]
    fn frames_up_to_the_read_buffer_are_parsed_from_it() {
        deadline("frames_up_to_the_read_buffer_are_parsed_from_it", || {
            let fits = READ_BUF_LEN - HEADER_LEN;
            for (len, pauses) in [(4097, false), (fits, false), (fits + 1, true)] {
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                // In pieces: the frame is incomplete in the buffer at first.
                let mut src = Chunked {
                    data: flagged_frame_bytes(1, &payload, true),
                    pos: 0,
                    chunk: 1000,
                    eof: false,
                };
                let mut reader = FrameReader::new(1 << 20);
                reader.pause_large();
                let mut frames = Vec::new();
                for _ in 0..=src.data.len() {
                    if !frames.is_empty() || reader.paused().is_some() {
                        break;
                    }
                    reader
                        .read_from(&mut src, false, |f| frames.push(f))
                        .unwrap();
                }
                assert_eq!(reader.paused().is_some(), pauses, "{len} bytes");
                assert_eq!(frames.len(), usize::from(!pauses), "{len} bytes");
                if let Some(f) = frames.first() {
                    assert_eq!(f.payload, payload);
                }
            }
        });
    }

    /// A read that fills the buffer is not a short read: the reader reads
    /// on until the source would block, since an edge-triggered poll
    /// reports only new data.
    #[test]
    fn a_full_read_reads_on_until_the_source_would_block() {
        deadline("a_full_read_reads_on_until_the_source_would_block", || {
            let payload = vec![3u8; 1000 - HEADER_LEN];
            let count = 3 * READ_BUF_LEN / 1000;
            let mut src = Chunked {
                data: (0..count)
                    .flat_map(|i| frame_bytes(i as Tag, &payload))
                    .collect(),
                pos: 0,
                chunk: READ_BUF_LEN,
                eof: false,
            };
            let mut reader = FrameReader::new(1 << 20);
            let mut frames = Vec::new();
            reader
                .read_from(&mut src, false, |f| frames.push(f))
                .unwrap();
            assert_eq!(frames.len(), count, "one call reads everything there is");
        });
    }

    /// A socket's `read_spare` writes at most `max` bytes, and never past
    /// the vector's capacity, after what the vector holds.
    #[test]
    fn a_socket_reads_into_spare_capacity_within_bounds() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;

        deadline("a_socket_reads_into_spare_capacity_within_bounds", || {
            let (mut tx, mut rx) = UnixStream::pair().unwrap();
            let data: Vec<u8> = (0..100u8).collect();
            tx.write_all(&data).unwrap();
            let mut v = Vec::with_capacity(10);
            v.extend_from_slice(&data[..3]);
            let room = v.capacity() - v.len();
            let n = Socket(&mut rx).read_spare(&mut v, 1000).unwrap().unwrap();
            assert_eq!(n, room, "as much as the capacity holds");
            assert_eq!(v, [&data[..3], &data[..n]].concat());
            let mut v = Vec::with_capacity(100);
            let n = Socket(&mut rx).read_spare(&mut v, 5).unwrap().unwrap();
            assert_eq!(n, 5, "no more than asked");
            assert_eq!(v, data[room..room + 5]);
        });
    }

    /// From a socket, a paused payload is read in place as it arrives,
    /// and the reader goes on with the next frame.
    #[test]
    fn a_socket_fills_a_paused_payload_in_place() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;

        deadline("a_socket_fills_a_paused_payload_in_place", || {
            let payload: Vec<u8> = (0..300_000).map(|i| (i * 7) as u8).collect();
            let mut bytes = flagged_frame_bytes(4, &payload, true);
            bytes.extend(frame_bytes(5, b"next"));
            let (mut tx, mut rx) = UnixStream::pair().unwrap();
            rx.set_nonblocking(true).unwrap();
            let writer = std::thread::spawn(move || {
                for piece in bytes.chunks(50_001) {
                    tx.write_all(piece).unwrap();
                }
            });
            let mut reader = FrameReader::new(1 << 20);
            reader.pause_large();
            let mut frames = Vec::new();
            let start = std::time::Instant::now();
            while reader.paused().is_none() {
                assert!(start.elapsed() < DEADLINE, "the header never arrived");
                reader
                    .read_from_socket(&mut rx, false, |f| frames.push(f))
                    .unwrap();
            }
            let mut out = vec![0u8; payload.len()];
            let mut filled = 0;
            while !reader
                .read_paused_from_socket(&mut rx, &mut out, &mut filled)
                .unwrap()
            {
                assert!(start.elapsed() < DEADLINE, "{filled} bytes placed");
            }
            assert!(out == payload, "the payload placed is wrong");
            assert_eq!(reader.paused(), None);
            while frames.is_empty() {
                assert!(start.elapsed() < DEADLINE, "the next frame never came");
                reader
                    .read_from_socket(&mut rx, false, |f| frames.push(f))
                    .unwrap();
            }
            writer.join().unwrap();
            assert_eq!(frames[0].payload, b"next");
        });
    }
}
