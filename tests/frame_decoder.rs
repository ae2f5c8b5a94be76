//! The TCP frame decoder against malformed input: a bounded, deterministic
//! property test that runs in CI (the deep runs are the `frame_decoder`
//! fuzz target in `fuzz/`).
//!
//! Random byte streams, valid streams and mutated valid streams are fed to
//! the decoder the way a socket hands them over (in pieces of random sizes).
//! Whatever the input, the decoder must not panic; it must deliver exactly
//! the frames the bytes hold, whatever the pieces; every bad frame must end
//! the stream with `ErrorKind::MalformedFrame` naming what was wrong; and a
//! length field larger than the maximum message must be refused before
//! anything is allocated for it.

use mttl_comm::backend::tcp::fuzzing::{
    decode_header, decode_stream, encode_header, Decoded, DecodedFrame, HEADER_LEN,
};
use mttl_comm::ErrorKind;

/// The default `MTTL_MAX_MESSAGE`.
const DEFAULT_MAX: usize = 1 << 30;

/// The rank the streams come from, as errors name it.
const PEER: usize = 3;

mod decoder_support;

use decoder_support::{largest_allocation, Rng};

// ---------------------------------------------------------------------------
// Deterministic random input.

/// What this file draws from the shared generator.
trait Draw {
    fn bytes(&mut self, n: usize) -> Vec<u8>;
    fn chunking(&mut self) -> Vec<usize>;
}

impl Draw for Rng {
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// How a socket might cut a stream: a few piece sizes, small ones often
    /// (headers split across reads), and reads that would block.
    fn chunking(&mut self) -> Vec<usize> {
        match self.below(4) {
            0 => Vec::new(),
            1 => vec![1 + self.below(20)],
            _ => (0..1 + self.below(6))
                .map(|_| match self.below(4) {
                    0 => 0,
                    1 => 1 + self.below(HEADER_LEN + 2),
                    2 => 1 + self.below(4096),
                    _ => 1 + self.below(100_000),
                })
                .collect(),
        }
    }
}

/// A random valid frame; large payloads now and then (they take the
/// decoder's other path).
fn random_frame(rng: &mut Rng, max_len: usize) -> DecodedFrame {
    if rng.below(16) == 0 {
        return DecodedFrame {
            goodbye: true,
            tag: rng.next() as u32,
            payload: Vec::new(),
        };
    }
    let len = match rng.below(10) {
        0 => 0,
        1 => 65_536 - HEADER_LEN + rng.below(3) - 1,
        2 => 65_536 + rng.below(100_000),
        _ => rng.below(200),
    }
    .min(max_len);
    DecodedFrame {
        goodbye: false,
        tag: rng.next() as u32,
        payload: rng.bytes(len),
    }
}

fn encode(frames: &[DecodedFrame]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        out.extend_from_slice(&encode_header(f.goodbye, f.tag, f.payload.len()));
        out.extend_from_slice(&f.payload);
    }
    out
}

/// Checks what the decoder must guarantee for any input, and that cutting
/// the stream differently changes nothing.
fn check_any_input(stream: &[u8], chunks: &[usize], max_len: usize, closed: bool) -> Decoded {
    let d = decode_stream(PEER, stream, chunks, max_len, closed);
    // The frames are the start of the stream, byte for byte.
    let mut at = 0;
    for f in &d.frames {
        assert!(f.payload.len() <= max_len, "a payload above the maximum");
        assert!(
            !f.goodbye || f.payload.is_empty(),
            "a goodbye with a payload"
        );
        let header = encode_header(f.goodbye, f.tag, f.payload.len());
        let end = at + HEADER_LEN + f.payload.len();
        assert!(
            end <= stream.len()
                && stream[at..at + HEADER_LEN] == header
                && stream[at + HEADER_LEN..end] == f.payload[..],
            "the decoded frames are not the start of the stream"
        );
        at = end;
    }
    match &d.end {
        Ok(()) => assert!(!closed, "a closed stream ended without an error"),
        Err(ErrorKind::MalformedFrame { peer, detail }) => {
            assert_eq!(*peer, PEER);
            assert!(!detail.is_empty());
        }
        Err(ErrorKind::PeerLost { peer, .. }) => {
            assert!(closed, "a stream that did not close was reported lost");
            assert_eq!(*peer, PEER);
        }
        Err(other) => panic!("unexpected error kind: {other:?}"),
    }
    // The same bytes in one piece decode to the same thing.
    let whole = decode_stream(PEER, stream, &[], max_len, closed);
    assert_eq!(whole.frames, d.frames, "the frames depend on the chunking");
    assert_eq!(
        format!("{:?}", whole.end),
        format!("{:?}", d.end),
        "the outcome depends on the chunking"
    );
    d
}

fn malformed_detail(d: &Decoded) -> &str {
    match &d.end {
        Err(ErrorKind::MalformedFrame { detail, .. }) => detail,
        other => panic!("expected a malformed-frame error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------

#[test]
fn valid_streams_decode_exactly_in_any_chunking() {
    let mut rng = Rng::new(1);
    for _ in 0..150 {
        let frames: Vec<DecodedFrame> = (0..rng.below(12))
            .map(|_| random_frame(&mut rng, DEFAULT_MAX))
            .collect();
        let stream = encode(&frames);
        let chunks = rng.chunking();
        let d = check_any_input(&stream, &chunks, DEFAULT_MAX, false);
        assert_eq!(d.frames, frames, "chunks {chunks:?}");
        assert!(d.end.is_ok());
        assert!(!d.mid_frame);
        // A peer that closes after its last frame is not an error when
        // nothing is cut, the backend decides (goodbye or not); mid-frame
        // it always is.
        if !stream.is_empty() {
            let cut = rng.below(stream.len());
            let d = check_any_input(&stream[..cut], &chunks, DEFAULT_MAX, true);
            if d.mid_frame {
                assert!(matches!(d.end, Err(ErrorKind::PeerLost { .. })));
            }
        }
    }
}

#[test]
fn random_bytes_are_frames_or_a_malformed_frame_error() {
    let mut rng = Rng::new(2);
    let mut malformed = 0;
    for i in 0..3000 {
        let len = rng.below(400);
        let mut stream = rng.bytes(len);
        // Half the time, start with a valid magic so the checks after it
        // are reached too.
        if i % 2 == 0 && stream.len() >= 2 {
            stream[0..2].copy_from_slice(&encode_header(false, 0, 0)[0..2]);
            if stream.len() > 3 && rng.below(2) == 0 {
                stream[2] = rng.below(3) as u8;
                stream[3] = 0;
            }
        }
        let max_len = [0, 16, 1000, 1 << 20, DEFAULT_MAX, usize::MAX][rng.below(6)];
        let chunks = rng.chunking();
        let closed = rng.below(2) == 0;
        let (d, largest) =
            largest_allocation(|| check_any_input(&stream, &chunks, max_len, closed));
        // The read buffer, the frames and the checks; a length field's
        // claim only within the maximum.
        assert!(
            largest <= max_len.max(1 << 20),
            "decoding {len} random bytes allocated {largest} bytes at once"
        );
        if matches!(d.end, Err(ErrorKind::MalformedFrame { .. })) {
            malformed += 1;
        }
    }
    // The input is not so kind that the error path goes untested.
    assert!(malformed > 1000, "only {malformed} malformed streams");
}

#[test]
fn mutated_valid_streams_are_frames_or_a_malformed_frame_error() {
    let mut rng = Rng::new(3);
    for _ in 0..1500 {
        let frames: Vec<DecodedFrame> = (0..1 + rng.below(6))
            .map(|_| random_frame(&mut rng, 1 << 20))
            .collect();
        let mut stream = encode(&frames);
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(stream.len());
            match rng.below(5) {
                0 => stream[at] ^= 1 << rng.below(8),
                1 => stream[at] = rng.next() as u8,
                2 => stream.truncate(at),
                3 => {
                    let n = 1 + rng.below(40);
                    let junk = rng.bytes(n);
                    stream.splice(at..at, junk);
                }
                _ => {
                    // A length field set to something arbitrary.
                    let field = at - at % HEADER_LEN;
                    if field + HEADER_LEN <= stream.len() {
                        let len = match rng.below(3) {
                            0 => rng.next(),
                            1 => (1 << 20) + rng.below(1 << 20) as u64,
                            _ => rng.below(300) as u64,
                        };
                        stream[field + 8..field + 16].copy_from_slice(&len.to_le_bytes());
                    }
                }
            }
            if stream.is_empty() {
                break;
            }
        }
        let chunks = rng.chunking();
        let closed = rng.below(2) == 0;
        let (_, largest) =
            largest_allocation(|| check_any_input(&stream, &chunks, 1 << 20, closed));
        // At most one payload of the maximum (1 MiB) and its copy in the
        // list of frames: never more than the maximum at once.
        assert!(largest <= 1 << 20, "allocated {largest} bytes at once");
    }
}

#[test]
fn every_header_field_is_checked() {
    let good = encode_header(false, 9, 5);
    assert_eq!(decode_header(&good, 100), Ok((false, 9, 5)));
    type Spoil = fn(&mut [u8; HEADER_LEN]);
    let cases: [(&str, Spoil); 5] = [
        ("magic", |h| h[1] ^= 0x80),
        ("kind", |h| h[2] = 2),
        ("flags", |h| h[3] = 0x10),
        ("exceeds", |h| {
            h[8..16].copy_from_slice(&101u64.to_le_bytes())
        }),
        ("goodbye", |h| h[2] = 1),
    ];
    for (word, spoil) in cases {
        let mut h = good;
        spoil(&mut h);
        let why = decode_header(&h, 100).expect_err(word);
        assert!(why.contains(word), "{why:?} does not mention {word}");
        // In a stream, the same is a malformed-frame error, after the
        // frames before it.
        let mut stream = encode(&[DecodedFrame {
            goodbye: false,
            tag: 1,
            payload: vec![7; 3],
        }]);
        stream.extend_from_slice(&h);
        stream.extend_from_slice(&[0; 5]);
        let d = check_any_input(&stream, &[1], 100, false);
        assert_eq!(d.frames.len(), 1);
        assert!(malformed_detail(&d).contains(word));
    }
}

#[test]
fn a_length_field_above_the_maximum_is_refused_before_allocating() {
    // 4 GiB, above the default maximum of 1 GiB; the maximum plus one; and
    // the largest length a header can carry, even with no maximum at all.
    for (len, max_len) in [
        (4u64 << 30, DEFAULT_MAX),
        (DEFAULT_MAX as u64 + 1, DEFAULT_MAX),
        (u64::MAX, DEFAULT_MAX),
        (1 << 20, (1 << 20) - 1),
    ] {
        let mut stream = encode_header(false, 1, 0).to_vec();
        stream[8..16].copy_from_slice(&len.to_le_bytes());
        // Some bytes of the claimed body follow, as a hostile peer would send.
        stream.extend_from_slice(&[0xab; 100]);
        for chunks in [vec![], vec![1], vec![7, 0, 3]] {
            let (d, largest) =
                largest_allocation(|| decode_stream(PEER, &stream, &chunks, max_len, false));
            let why = malformed_detail(&d);
            assert!(
                why.contains(&format!(
                    "payload length {len} exceeds the maximum of {max_len}"
                )),
                "{why}"
            );
            assert!(d.frames.is_empty());
            // The 64 KiB read buffer is all the decoder allocated.
            assert!(
                largest <= 64 * 1024,
                "a {len}-byte length field made the decoder allocate {largest} bytes"
            );
        }
    }
}

#[test]
fn a_length_field_within_the_maximum_waits_for_its_bytes() {
    // Not an error: the rest of the payload may still come.
    let mut stream = encode_header(false, 1, 200_000).to_vec();
    stream.extend_from_slice(&[1; 1000]);
    let d = decode_stream(PEER, &stream, &[100], 1 << 20, false);
    assert!(d.end.is_ok() && d.frames.is_empty() && d.mid_frame);
    // But a peer that stops there has lost a message.
    let d = decode_stream(PEER, &stream, &[100], 1 << 20, true);
    assert!(matches!(d.end, Err(ErrorKind::PeerLost { peer: PEER, .. })));
}

/// Regression: with no maximum (`MTTL_MAX_MESSAGE` above `isize::MAX`), a
/// length field above `isize::MAX` made the decoder panic ("capacity
/// overflow", or an overflow adding the header length), and one it could
/// not allocate aborted the process. Both are errors now.
#[test]
fn a_huge_length_field_with_no_maximum_is_an_error_not_a_crash() {
    for (len, word) in [
        (u64::MAX, "exceeds"),
        (u64::MAX - 8, "exceeds"),
        (isize::MAX as u64 + 1, "exceeds"),
        (1 << 62, "cannot allocate"),
    ] {
        let mut stream = encode_header(false, 1, 0).to_vec();
        stream[8..16].copy_from_slice(&len.to_le_bytes());
        stream.extend_from_slice(&[0xab; 100]);
        let d = decode_stream(PEER, &stream, &[], usize::MAX, false);
        let why = malformed_detail(&d);
        assert!(why.contains(word), "length {len}: {why}");
    }
}
