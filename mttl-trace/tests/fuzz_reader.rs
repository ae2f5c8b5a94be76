//! The reader fuzzed: a real trace (two ranks of `mttl-bench trace
//! --worker heavy` under `equalized` with a 4 KiB buffer and
//! `MTTL_TRACE_LEVEL=threads`, so that it holds many blocks, suspensions,
//! clock records and thread records) has bytes flipped, overwritten and
//! cut, thousands of times from a fixed seed. Every result must be a clean
//! error naming the file (and, for corruption, the byte offset), or a read
//! that stops before the first damaged byte (a cut reads as a rank killed
//! there); never a panic, never damage read as data.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use mttl_trace::{Ending, ReadError};

mod support;
use support::Rng;

/// The fixture's files.
fn fixture() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/heavy-threads");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "mttltrace"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "the fixture has two ranks");
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).expect("a fixture file");
            (p, bytes)
        })
        .collect()
}

/// One damage done to a copy of a file: the bytes, and the first offset
/// that differs from the original (or where it was cut).
fn damage(rng: &mut Rng, original: &[u8]) -> (Vec<u8>, usize) {
    let mut bytes = original.to_vec();
    let len = bytes.len();
    match rng.below(4) {
        // One bit.
        0 => {
            let at = rng.below(len);
            bytes[at] ^= 1 << rng.below(8);
            (bytes, at)
        }
        // A few random bytes.
        1 => {
            let mut first = len;
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(len);
                let v = rng.next() as u8;
                if bytes[at] != v {
                    bytes[at] = v;
                    first = first.min(at);
                }
            }
            (bytes, first)
        }
        // Cut anywhere.
        2 => {
            let at = rng.below(len);
            bytes.truncate(at);
            (bytes, at)
        }
        // A bit flipped, then cut after it.
        _ => {
            let at = rng.below(len);
            bytes[at] ^= 1 << rng.below(8);
            let cut = at + rng.below(len - at);
            bytes.truncate(cut.max(at + 1));
            (bytes, at)
        }
    }
}

#[test]
fn damaged_traces_give_clean_errors_with_file_and_offset() {
    let files = fixture();
    // The fixture itself reads whole.
    for (path, bytes) in &files {
        let t = mttl_trace::parse(path, bytes).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(t.ending, Ending::Complete(_)), "{:?}", t.ending);
        assert!(t.blocks > 5, "{} blocks", t.blocks);
    }
    let mut rng = Rng(0x6d74_746c_2074_7263);
    let (mut errors, mut cut_reads) = (0, 0);
    for round in 0..4000 {
        let (path, original) = &files[round % files.len()];
        let (bytes, first) = damage(&mut rng, original);
        if bytes == *original {
            continue;
        }
        let result = catch_unwind(AssertUnwindSafe(|| mttl_trace::parse(path, &bytes)))
            .unwrap_or_else(|_| {
                panic!("round {round}: the reader panicked on damage at byte {first}")
            });
        match result {
            Err(e) => {
                errors += 1;
                let text = e.to_string();
                assert!(
                    text.contains(&path.display().to_string()),
                    "round {round}: the error does not name the file: {text}"
                );
                match e {
                    ReadError::Corrupt { offset, .. } => {
                        assert!(
                            offset <= bytes.len() as u64,
                            "round {round}: offset {offset} past the end ({}): {text}",
                            bytes.len()
                        );
                        assert!(text.contains("byte"), "round {round}: {text}");
                    }
                    ReadError::Version { .. } => assert!(first < 10, "round {round}: {text}"),
                    other => panic!("round {round}: unexpected error kind: {other}"),
                }
            }
            Ok(t) => {
                // Only a read that stops before the damage is right.
                let end = match t.ending {
                    Ending::Truncated { offset } | Ending::WriteFailed { offset } => offset,
                    Ending::Complete(_) => {
                        panic!("round {round}: damage at byte {first} read as a complete trace")
                    }
                };
                assert!(
                    end <= first as u64,
                    "round {round}: read to byte {end}, past the damage at byte {first}"
                );
                cut_reads += 1;
            }
        }
    }
    // Both outcomes were exercised.
    assert!(
        errors > 1000 && cut_reads > 100,
        "{errors} errors, {cut_reads} cut reads"
    );
}
