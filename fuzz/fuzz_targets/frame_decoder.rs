//! Fuzzes the TCP frame decoder: any byte stream, cut into any pieces, with
//! any of a few payload maxima, is either frames or a clear error.
//!
//! The input: byte 0 picks the maximum (bits 0-1) and whether the peer
//! closes after the bytes (bit 2); bytes 1 and 2 are the sizes of the reads
//! the socket returns (0: a read that would block); the rest is the stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mttl_comm::backend::tcp::fuzzing::{decode_stream, encode_header, HEADER_LEN};
use mttl_comm::ErrorKind;

const PEER: usize = 1;

fuzz_target!(|data: &[u8]| {
    let [control, c1, c2, stream @ ..] = data else {
        return;
    };
    let max_len = [0, 100, 65_520, 1 << 20][usize::from(control & 3)];
    let closed = control & 4 != 0;
    let chunks = [usize::from(*c1), usize::from(*c2) * 61];
    let d = decode_stream(PEER, stream, &chunks, max_len, closed);

    // The frames are the start of the stream, byte for byte, each within
    // the maximum.
    let mut at = 0;
    for f in &d.frames {
        assert!(f.payload.len() <= max_len);
        assert!(!f.goodbye || f.payload.is_empty());
        let end = at + HEADER_LEN + f.payload.len();
        assert!(end <= stream.len());
        assert_eq!(
            stream[at..at + HEADER_LEN],
            encode_header(f.goodbye, f.tag, f.payload.len())
        );
        assert_eq!(stream[at + HEADER_LEN..end], f.payload[..]);
        at = end;
    }
    // Every end is one a receive would report clearly.
    match &d.end {
        Ok(()) => assert!(!closed),
        Err(ErrorKind::MalformedFrame { peer, detail }) => {
            assert_eq!(*peer, PEER);
            assert!(!detail.is_empty());
        }
        Err(ErrorKind::PeerLost { peer, .. }) => assert!(closed && *peer == PEER),
        Err(other) => panic!("unexpected error: {other:?}"),
    }
    // The pieces do not matter.
    let whole = decode_stream(PEER, stream, &[], max_len, closed);
    assert_eq!(whole.frames, d.frames);
    assert_eq!(format!("{:?}", whole.end), format!("{:?}", d.end));
});
