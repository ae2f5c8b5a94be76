//! Serialisation of arguments, results and cell values: bincode 2's native
//! `Encode`/`Decode` (faster than its serde path), kept behind
//! this one module so the format can be swapped.
//!
//! Decoding is bounded by the body: every length field is checked *before*
//! anything is allocated for it (bincode claims `len × size_of::<T>()` for
//! a container of `len` elements, and the claims of one value add up)
//! against a limit that grows with the body: [`CLAIM_PER_BYTE`] times its
//! length, rounded up to a power of four, at least [`MIN_CLAIM`] and at
//! most [`DECODE_LIMIT`]. So a malformed body of a few bytes can make the
//! decoder reserve a few MiB at most (a hash map reserves up to about
//! twice its claim, for its buckets), never the gigabytes its length
//! fields may ask for. A valid value is never refused unless it holds more
//! than a MiB of elements each encoded in under 1/64 of their size in
//! memory (a long `Vec<Option<[u8; 4096]>>` of `None`s). A claim within the
//! limit but beyond the body's bytes fails when they run out. Every failure
//! is an error naming the type, never a panic: fuzzed by
//! `fuzz/fuzz_targets/arg_decoder.rs`, checked in CI by
//! `tests/arg_decoder.rs` at the workspace root.

use bincode::config::{self, Configuration, Limit, LittleEndian, Varint};
use bincode::error::DecodeError;

pub use bincode::{Decode, Encode};

/// The most the length fields of one value may claim, in bytes.
pub(crate) const DECODE_LIMIT: usize = 1 << 30;

/// How many bytes the length fields of a body may claim per byte of it.
const CLAIM_PER_BYTE: usize = 64;

/// What the length fields of any body may claim, however short.
const MIN_CLAIM: usize = 1 << 20;

type Config = Configuration<LittleEndian, Varint, Limit<DECODE_LIMIT>>;

const CONFIG: Config = config::standard().with_limit::<DECODE_LIMIT>();

/// Appends the encoding of `value` to `out`.
pub fn encode_into<T: Encode>(value: &T, out: &mut Vec<u8>) -> Result<(), String> {
    bincode::encode_into_std_write(value, out, CONFIG)
        .map(|_| ())
        .map_err(|e| format!("cannot encode a {}: {e}", std::any::type_name::<T>()))
}

/// Decodes `bytes` with a claim limit of `LIMIT`.
fn decode_limited<T: Decode<()>, const LIMIT: usize>(
    bytes: &[u8],
) -> Result<(T, usize), DecodeError> {
    bincode::decode_from_slice(bytes, config::standard().with_limit::<LIMIT>())
}

/// Decodes a `T` that must fill `bytes` exactly.
pub fn decode<T: Decode<()>>(bytes: &[u8]) -> Result<T, String> {
    // The limit's tiers are powers of four from MIN_CLAIM to DECODE_LIMIT.
    let claim = bytes.len().saturating_mul(CLAIM_PER_BYTE);
    let decoded = if claim <= MIN_CLAIM {
        decode_limited::<T, MIN_CLAIM>(bytes)
    } else if claim <= MIN_CLAIM << 2 {
        decode_limited::<T, { MIN_CLAIM << 2 }>(bytes)
    } else if claim <= MIN_CLAIM << 4 {
        decode_limited::<T, { MIN_CLAIM << 4 }>(bytes)
    } else if claim <= MIN_CLAIM << 6 {
        decode_limited::<T, { MIN_CLAIM << 6 }>(bytes)
    } else if claim <= MIN_CLAIM << 8 {
        decode_limited::<T, { MIN_CLAIM << 8 }>(bytes)
    } else {
        decode_limited::<T, DECODE_LIMIT>(bytes)
    };
    let (value, used) = decoded.map_err(|e| {
        let name = std::any::type_name::<T>();
        match e {
            DecodeError::LimitExceeded => format!(
                "cannot decode a {name}: LimitExceeded (its length fields claim more memory \
                 than a {}-byte body can describe)",
                bytes.len()
            ),
            e => format!("cannot decode a {name}: {e}"),
        }
    })?;
    if used != bytes.len() {
        return Err(format!(
            "cannot decode a {}: {} trailing bytes",
            std::any::type_name::<T>(),
            bytes.len() - used
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let mut v = Vec::new();
        encode_into(&(1i32, String::from("two"), vec![3u64]), &mut v).unwrap();
        let back: (i32, String, Vec<u64>) = decode(&v).unwrap();
        assert_eq!(back, (1, "two".into(), vec![3]));
        assert!(decode::<(i32, String, Vec<u64>)>(&v[..v.len() - 1]).is_err());
        assert!(decode::<i32>(&v).unwrap_err().contains("trailing"));
        // A huge length prefix fails without allocating it.
        let evil = [0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(decode::<Vec<u8>>(&evil).is_err());
    }

    #[test]
    fn the_limit_grows_with_the_body() {
        assert_eq!(MIN_CLAIM << 10, DECODE_LIMIT, "the last tier is the limit");
        // A million empty strings: 24 MB claimed by a 1 MB body.
        let strings = vec![String::new(); 1 << 20];
        let mut v = Vec::new();
        encode_into(&strings, &mut v).unwrap();
        assert_eq!(decode::<Vec<String>>(&v).unwrap().len(), 1 << 20);
        // 64 MiB of bytes.
        let bytes = vec![7u8; 64 << 20];
        v.clear();
        encode_into(&bytes, &mut v).unwrap();
        assert!(decode::<Vec<u8>>(&v).unwrap() == bytes);
        // 2 MiB claimed by 9 bytes: refused, saying why.
        let e = decode::<Vec<u8>>(&[0xfc, 0, 0, 0x20, 0, 1, 2, 3, 4]).unwrap_err();
        assert!(
            e.contains("LimitExceeded") && e.contains("9-byte body"),
            "{e}"
        );
    }
}
