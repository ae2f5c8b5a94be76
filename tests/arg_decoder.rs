//! The argument decoder against malformed input: a bounded, deterministic
//! property test that runs in CI (the deep runs are the `arg_decoder` fuzz
//! target in `fuzz/`).
//!
//! Random bytes and mutated valid encodings are decoded as several argument
//! types, through the functions `#[mttl::remote]` expands to. Whatever the
//! input, decoding must not panic; a failure must be an error naming the
//! type; a success must be a value that encodes and decodes back to itself;
//! and a length field claiming more than the body can describe (64 bytes
//! per byte of body, at least 1 MiB, at most 1 GiB) must be refused before
//! anything is allocated for it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::time::Duration;

use mttl_core::__private::{decode, encode_into};
use mttl_core::{Decode, Encode};

/// What the length fields of a short body may claim (`codec::MIN_CLAIM`).
const MIN_CLAIM: usize = 1 << 20;

/// The most a claim within that limit may make the decoder allocate: a hash
/// map reserves about 2.3 times its claim (buckets rounded up to a power of
/// two, plus a control byte each); everything else reserves its claim.
const ALLOCATION_BOUND: usize = 3 * MIN_CLAIM;

mod decoder_support;

use decoder_support::{largest_allocation, Rng};

// ---------------------------------------------------------------------------
// Deterministic random input.

/// What this file draws from the shared generator.
trait Draw {
    fn bytes(&mut self, n: usize) -> Vec<u8>;
}

impl Draw for Rng {
    /// Random bytes, biased towards what bincode's varints and tags use.
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| match self.below(4) {
                0 => self.below(4) as u8,
                1 => 251 + self.below(5) as u8,
                _ => self.next() as u8,
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------
// The argument types, as user code declares them.

#[derive(Debug, Clone, PartialEq, Encode, Decode)]
#[bincode(crate = "mttl_core::bincode")]
struct Particle {
    id: u32,
    pos: [f64; 3],
    name: String,
    tags: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Encode, Decode)]
#[bincode(crate = "mttl_core::bincode")]
enum Command {
    Stop,
    Move { dx: i64, dy: i64 },
    Load(Vec<Particle>),
    Label(Option<String>),
}

fn encode<T: Encode>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(v, &mut out).expect("encoding a valid value");
    out
}

/// Decodes `bytes` as a `T` and checks what must hold for any input.
fn check<T: Encode + Decode<()> + Debug + PartialEq>(bytes: &[u8]) -> bool {
    match decode::<T>(bytes) {
        Ok(v) => {
            // A decoded value is a value: it encodes and decodes back to
            // itself (equal, or encoded alike: NaN is not equal to itself,
            // and a hash map's order differs from map to map).
            let again = encode(&v);
            let back: T = decode(&again)
                .unwrap_or_else(|e| panic!("{v:?} was decoded but its encoding is not: {e}"));
            assert!(
                back == v || encode(&back) == again,
                "{v:?} does not round-trip"
            );
            true
        }
        Err(e) => {
            let name = std::any::type_name::<T>();
            assert!(
                e.starts_with(&format!("cannot decode a {name}")),
                "an error that does not name the type: {e:?}"
            );
            false
        }
    }
}

/// Valid encodings of `samples`, then random mutations of them, decoded as
/// a `T`.
fn mutations<T: Encode + Decode<()> + Debug + PartialEq>(
    rng: &mut Rng,
    samples: &[T],
    rounds: usize,
) {
    for s in samples {
        let valid = encode(s);
        assert!(check::<T>(&valid), "{s:?} does not decode");
        for _ in 0..rounds {
            let mut m = valid.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(m.len() + 1);
                match rng.below(4) {
                    0 if at < m.len() => m[at] ^= 1 << rng.below(8),
                    1 if at < m.len() => m[at] = rng.bytes(1)[0],
                    2 => m.truncate(at),
                    _ => {
                        let n = 1 + rng.below(9);
                        let junk = rng.bytes(n);
                        m.splice(at..at, junk);
                    }
                }
            }
            check::<T>(&m);
        }
    }
}

/// Runs `$body` with `$T` bound to each argument type.
macro_rules! for_each_type {
    ($T:ident => $body:block) => {{
        {
            type $T = u32;
            $body
        }
        {
            type $T = (i32, String, Vec<u64>);
            $body
        }
        {
            type $T = Vec<u8>;
            $body
        }
        {
            type $T = Option<Vec<String>>;
            $body
        }
        {
            type $T = (f64, bool, char, u128, i8);
            $body
        }
        {
            type $T = HashMap<u32, String>;
            $body
        }
        {
            type $T = BTreeMap<String, Vec<i16>>;
            $body
        }
        {
            type $T = (Duration, [u8; 8], Box<[u16]>);
            $body
        }
        {
            type $T = Vec<Vec<u8>>;
            $body
        }
        {
            type $T = Particle;
            $body
        }
        {
            type $T = Command;
            $body
        }
    }};
}

#[test]
fn random_bytes_decode_to_a_value_or_an_error_naming_the_type() {
    let mut rng = Rng::new(11);
    let mut decoded = 0;
    for _ in 0..2000 {
        let n = rng.below(48);
        let bytes = rng.bytes(n);
        for_each_type!(T => {
            let (ok, largest) = largest_allocation(|| check::<T>(&bytes));
            decoded += usize::from(ok);
            assert!(
                largest <= ALLOCATION_BOUND,
                "{n} bytes made the decoder allocate {largest} bytes"
            );
        });
    }
    // Some inputs are values: the success path is checked too.
    assert!(decoded > 30, "only {decoded} inputs decoded");
}

#[test]
fn mutated_valid_arguments_decode_to_a_value_or_an_error_naming_the_type() {
    let mut rng = Rng::new(12);
    let p = Particle {
        id: 7,
        pos: [1.5, -0.0, f64::MAX],
        name: "héllo".into(),
        tags: vec![1, 300, 65_535],
    };
    mutations(&mut rng, &[0u32, 250, 251, 65_536, u32::MAX], 200);
    mutations(
        &mut rng,
        &[(-1i32, "two".to_string(), vec![3u64, 1 << 40, u64::MAX])],
        800,
    );
    mutations(&mut rng, &[vec![], vec![1u8; 300]], 400);
    mutations(
        &mut rng,
        &[
            None,
            Some(vec!["a".to_string(), String::new(), "z".repeat(260)]),
        ],
        400,
    );
    mutations(&mut rng, &[(f64::NAN, true, 'é', u128::MAX, -128i8)], 800);
    mutations(
        &mut rng,
        &[HashMap::from([
            (1u32, "x".to_string()),
            (u32::MAX, "y".repeat(9)),
        ])],
        800,
    );
    mutations(
        &mut rng,
        &[BTreeMap::from([("k".to_string(), vec![-1i16, 2])])],
        400,
    );
    mutations(
        &mut rng,
        &[(
            Duration::new(u64::MAX, 999_999_999),
            *b"12345678",
            vec![1u16, 2].into_boxed_slice(),
        )],
        800,
    );
    mutations(&mut rng, &[vec![vec![1u8, 2], vec![], vec![3]]], 400);
    mutations(&mut rng, std::slice::from_ref(&p), 800);
    mutations(
        &mut rng,
        &[
            Command::Stop,
            Command::Move {
                dx: -5,
                dy: i64::MIN,
            },
            Command::Load(vec![p.clone(), p]),
            Command::Label(Some("go".into())),
        ],
        400,
    );
}

#[test]
fn a_length_above_the_limit_is_refused_before_allocating() {
    // Varint lengths: 253 then a u64, little-endian.
    let claim = |len: u64, then: &[u8]| {
        let mut v = vec![253];
        v.extend_from_slice(&len.to_le_bytes());
        v.extend_from_slice(then);
        v
    };
    let four_gib = 4u64 << 30;
    type DecodeIt = fn(&[u8]) -> Result<(), String>;
    let cases: [(&str, Vec<u8>, DecodeIt); 6] = [
        ("Vec<u8> of 4 GiB", claim(four_gib, b"abc"), |b| {
            decode::<Vec<u8>>(b).map(drop)
        }),
        ("String of 4 GiB", claim(four_gib, b"abc"), |b| {
            decode::<String>(b).map(drop)
        }),
        ("Vec<u64> of 2^28 (2 GiB)", claim(1 << 28, &[1, 2]), |b| {
            decode::<Vec<u64>>(b).map(drop)
        }),
        ("Vec<u8> of u64::MAX", claim(u64::MAX, &[]), |b| {
            decode::<Vec<u8>>(b).map(drop)
        }),
        ("HashMap of 2^40 entries", claim(1 << 40, &[0, 0]), |b| {
            decode::<HashMap<u32, u32>>(b).map(drop)
        }),
        (
            "Vec<Vec<u8>> of 2^27 vectors (3 GiB of headers)",
            claim(1 << 27, &[0, 0]),
            |b| decode::<Vec<Vec<u8>>>(b).map(drop),
        ),
    ];
    for (what, bytes, decode_it) in cases {
        let (r, largest) = largest_allocation(|| decode_it(&bytes));
        let e = r.expect_err(what);
        assert!(e.contains(": LimitExceeded"), "{what}: {e}");
        assert!(
            largest < 1 << 20,
            "{what}: {largest} bytes allocated before the claim was refused"
        );
    }
}

#[test]
fn a_length_the_body_cannot_hold_is_refused_before_allocating() {
    // 100 MiB claimed, three bytes there: within the 1 GiB limit of any
    // value, but not of a 12-byte body.
    let mut bytes = vec![253];
    bytes.extend_from_slice(&(100u64 << 20).to_le_bytes());
    bytes.extend_from_slice(b"abc");
    let (r, largest) = largest_allocation(|| decode::<Vec<u8>>(&bytes));
    let e = r.expect_err("a truncated vector");
    assert!(
        e.starts_with("cannot decode a alloc::vec::Vec<u8>: LimitExceeded"),
        "{e}"
    );
    assert!(largest < 1 << 10, "{largest} bytes allocated");
    // 512 KiB claimed, within what any body may claim: reserved, then an
    // error when the bytes run out.
    let mut bytes = vec![253];
    bytes.extend_from_slice(&(512u64 << 10).to_le_bytes());
    bytes.extend_from_slice(b"abc");
    let (r, largest) = largest_allocation(|| decode::<Vec<u8>>(&bytes));
    assert!(r.expect_err("a truncated vector").contains("UnexpectedEnd"));
    assert!(largest <= MIN_CLAIM, "{largest} bytes allocated");
}

/// Regression (found by the `arg_decoder` fuzz target): a 9-byte body
/// claiming a hash map of 32.9 million entries, within the 1 GiB limit
/// every body used to have, made the decoder ask for 2.2 GB.
#[test]
fn a_hash_map_claimed_by_a_few_bytes_allocates_a_few_mib_at_most() {
    let body = [252, 14, 0, 246, 1, 0, 0, 214, 69];
    let (r, largest) = largest_allocation(|| decode::<HashMap<u32, String>>(&body));
    assert!(r.expect_err("9 bytes").contains("LimitExceeded"));
    assert!(largest <= ALLOCATION_BOUND, "{largest} bytes allocated");
}
