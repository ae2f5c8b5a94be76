//! Fuzzes the argument decoder: any body, decoded as any of several
//! argument types, is either a value that round-trips or an error naming
//! the type.
//!
//! The input: byte 0 picks the type; the rest is the encoded arguments.

#![no_main]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mttl_core::__private::{decode, encode_into};
use mttl_core::{Decode, Encode};

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
    encode_into(v, &mut out).expect("encoding a decoded value");
    out
}

fn check<T: Encode + Decode<()> + Debug + PartialEq>(bytes: &[u8]) {
    match decode::<T>(bytes) {
        Ok(v) => {
            let again = encode(&v);
            let back: T = decode(&again).expect("a decoded value's encoding decodes");
            // Equal, or encoded alike (NaN; a hash map's order).
            assert!(
                back == v || encode(&back) == again,
                "{v:?} does not round-trip"
            );
        }
        Err(e) => {
            let name = std::any::type_name::<T>();
            assert!(e.starts_with(&format!("cannot decode a {name}")), "{e}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [which, body @ ..] = data else {
        return;
    };
    match which % 11 {
        0 => check::<u32>(body),
        1 => check::<(i32, String, Vec<u64>)>(body),
        2 => check::<Vec<u8>>(body),
        3 => check::<Option<Vec<String>>>(body),
        4 => check::<(f64, bool, char, u128, i8)>(body),
        5 => check::<HashMap<u32, String>>(body),
        6 => check::<BTreeMap<String, Vec<i16>>>(body),
        7 => check::<(Duration, [u8; 8], Box<[u16]>)>(body),
        8 => check::<Vec<Vec<u8>>>(body),
        9 => check::<Particle>(body),
        _ => check::<Command>(body),
    }
});
