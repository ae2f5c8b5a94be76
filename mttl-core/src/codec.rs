//! Serialisation of arguments, results and cell values: bincode 2's native
//! `Encode`/`Decode` (about twice as fast as its serde path), kept behind
//! this one module so the format can be swapped.
//!
//! Decoding is bounded: every length field is checked against
//! [`DECODE_LIMIT`] *before* anything is allocated for it (bincode claims
//! `len × size_of::<T>()` for a container of `len` elements, and the claims
//! of one value add up), so a malformed body can never make the decoder
//! reserve more than the limit, whatever its length fields say (a hash map
//! reserves up to about twice its claim, for its buckets). A claim within
//! the limit but beyond the body's bytes fails when they run out. Every
//! failure is an error naming the type, never a panic: fuzzed by
//! `fuzz/fuzz_targets/arg_decoder.rs`, checked in CI by
//! `mttl-core/tests/arg_decoder.rs`.

use bincode::config::{self, Configuration, Limit, LittleEndian, Varint};

pub use bincode::{Decode, Encode};

/// The most the length fields of one value may claim, in bytes.
pub(crate) const DECODE_LIMIT: usize = 1 << 30;

type Config = Configuration<LittleEndian, Varint, Limit<DECODE_LIMIT>>;

const CONFIG: Config = config::standard().with_limit::<DECODE_LIMIT>();

/// Appends the encoding of `value` to `out`.
pub fn encode_into<T: Encode>(value: &T, out: &mut Vec<u8>) -> Result<(), String> {
    bincode::encode_into_std_write(value, out, CONFIG)
        .map(|_| ())
        .map_err(|e| format!("cannot encode a {}: {e}", std::any::type_name::<T>()))
}

/// Decodes a `T` that must fill `bytes` exactly.
pub fn decode<T: Decode<()>>(bytes: &[u8]) -> Result<T, String> {
    let (value, used) = bincode::decode_from_slice::<T, _>(bytes, CONFIG)
        .map_err(|e| format!("cannot decode a {}: {e}", std::any::type_name::<T>()))?;
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
}
