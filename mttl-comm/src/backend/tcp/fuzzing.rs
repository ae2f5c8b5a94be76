//! The frame decoder, reachable from outside the crate for the fuzz targets
//! (`fuzz/`, `cargo fuzz run frame_decoder`) and the property tests
//! (`tests/frame_decoder.rs` at the workspace root). Not part of the API: hidden from
//! the docs, and it may change with the frame format.
//!
//! [`decode_stream`] feeds a byte stream to a [`FrameReader`] exactly as the
//! backend does (a non-blocking socket read by [`FrameReader::read_from`],
//! in the pieces the kernel happens to return) and turns its outcome into
//! what the backend would report: the frames delivered, then either nothing
//! (the stream would block) or the [`ErrorKind`] a receive would fail with.

use std::io::{self, Read};

use super::frame::{FrameKind, FrameReader, Header, ReadError};
use crate::comm::{Rank, Tag};
use crate::error::ErrorKind;

/// The length of a frame header.
pub const HEADER_LEN: usize = super::frame::HEADER_LEN;

/// A decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedFrame {
    /// A goodbye frame (the sender is finishing) rather than data.
    pub goodbye: bool,
    /// The message tag.
    pub tag: Tag,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Everything a byte stream decoded to.
#[derive(Debug)]
pub struct Decoded {
    /// The frames, in order.
    pub frames: Vec<DecodedFrame>,
    /// How the stream ended: `Ok` if it would block (more may come), or the
    /// error a receive from this peer would report.
    pub end: Result<(), ErrorKind>,
    /// Whether the reader holds the start of an unfinished frame.
    pub mid_frame: bool,
}

/// Encodes a frame header.
pub fn encode_header(goodbye: bool, tag: Tag, len: usize) -> [u8; HEADER_LEN] {
    let kind = if goodbye {
        FrameKind::Goodbye
    } else {
        FrameKind::Data
    };
    Header {
        kind,
        tag,
        len,
        bulk: false,
    }
    .encode()
}

/// Decodes and validates a frame header against a maximum payload length:
/// `(goodbye, tag, len)`, or why it is not a header.
pub fn decode_header(
    bytes: &[u8; HEADER_LEN],
    max_len: usize,
) -> Result<(bool, Tag, usize), String> {
    Header::decode(bytes, max_len).map(|h| (h.kind == FrameKind::Goodbye, h.tag, h.len))
}

/// Feeds `stream`, as sent by rank `peer`, to a frame reader accepting
/// payloads of at most `max_len` bytes. The socket returns the bytes in
/// reads of at most `chunks[0]`, `chunks[1]`, ... bytes (cycling; a 0 is a
/// read that would block; an empty list means one piece). When the bytes
/// are used up the socket would block, or, if `closed`, reports the end of
/// the stream, as a peer's close does.
pub fn decode_stream(
    peer: Rank,
    stream: &[u8],
    chunks: &[usize],
    max_len: usize,
    closed: bool,
) -> Decoded {
    // Reads that all would block would never deliver anything.
    let chunks = if chunks.iter().all(|&c| c == 0) {
        &[]
    } else {
        chunks
    };
    let mut src = Pieces {
        data: stream,
        pos: 0,
        chunks,
        next: 0,
        closed,
    };
    let mut reader = FrameReader::new(max_len);
    let mut frames = Vec::new();
    let mut sink = |f: super::frame::Frame| {
        frames.push(DecodedFrame {
            goodbye: f.header.kind == FrameKind::Goodbye,
            tag: f.header.tag,
            payload: f.payload,
        })
    };
    let mut result = Ok(());
    // Each call consumes at least one read of the source, so this ends.
    while result.is_ok() && src.pos < stream.len() {
        result = reader.read_from(&mut src, false, &mut sink);
    }
    if result.is_ok() && closed {
        // As the backend does when the poll reports the peer's side closed.
        result = reader.read_from(&mut src, true, &mut sink);
    }
    let end = result.map_err(|e| match e {
        ReadError::Malformed(detail) => ErrorKind::MalformedFrame { peer, detail },
        ReadError::Closed { mid_frame } => ErrorKind::PeerLost {
            peer,
            detail: if mid_frame {
                "its connection closed in the middle of a message".into()
            } else {
                "its connection closed".into()
            },
        },
        ReadError::Io(e) => ErrorKind::Io(e),
    });
    let mid_frame = reader.mid_frame();
    Decoded {
        frames,
        end,
        mid_frame,
    }
}

/// A socket that returns its bytes in pieces of given sizes.
struct Pieces<'a> {
    data: &'a [u8],
    pos: usize,
    chunks: &'a [usize],
    next: usize,
    closed: bool,
}

impl Read for Pieces<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.data.len() {
            return if self.closed {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let limit = if self.chunks.is_empty() {
            usize::MAX
        } else {
            let c = self.chunks[self.next % self.chunks.len()];
            self.next += 1;
            if c == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            c
        };
        let n = out.len().min(limit).min(self.data.len() - self.pos);
        out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
