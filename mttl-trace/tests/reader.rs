//! The reader: a run's files read together, files of two runs or two
//! format versions refused naming both, a missing rank named; and damaged
//! files: a valid trace built with the format's own encoders, then cut at
//! every length and corrupted at random. The
//! reader must never panic; a cut file reads up to its last complete block
//! and says where it ends; a corrupted one either reads (the damage missed
//! anything checked, e.g. bytes after a cut) or names the file and an
//! offset inside it.

use std::path::Path;

use mttl_core::trace::format::*;
use mttl_trace::{parse, Ending, ReadError};
use support::build_for;

mod support;
use support::Rng;

/// A file of `blocks` blocks of `per_block` events each and an end block;
/// returns it and the offsets where its blocks end.
fn build(blocks: usize, per_block: usize) -> (Vec<u8>, Vec<usize>) {
    build_for(42, 0, 1, VERSION, blocks, per_block)
}

const PATH: &str = "rank-00000.mttltrace";

#[test]
fn an_intact_file_reads_back_complete() {
    let (file, _) = build(4, 50);
    let t = parse(Path::new(PATH), &file).unwrap();
    assert_eq!(t.events.len(), 200);
    assert_eq!(t.blocks, 5);
    assert!(matches!(t.ending, Ending::Complete(tot) if tot.events == 200));
    assert!(t.events.windows(2).all(|w| w[0].end <= w[1].end));
}

#[test]
fn a_cut_file_reads_up_to_its_last_complete_block() {
    let (file, ends) = build(4, 50);
    for len in FILE_HEADER_LEN..file.len() {
        let t =
            parse(Path::new(PATH), &file[..len]).unwrap_or_else(|e| panic!("cut at {len}: {e}"));
        let whole = ends.iter().filter(|&&e| e <= len).count();
        assert_eq!(t.blocks, whole, "cut at {len}");
        assert_eq!(t.events.len(), whole * 50, "cut at {len}");
        let last = ends.iter().rev().find(|&&e| e <= len).copied();
        let expected = last.unwrap_or(FILE_HEADER_LEN) as u64;
        assert_eq!(
            t.ending,
            Ending::Truncated { offset: expected },
            "cut at {len}"
        );
    }
}

#[test]
fn random_corruption_never_panics_and_names_an_offset_in_the_file() {
    let (file, _) = build(4, 50);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut errors = 0;
    for round in 0..5_000 {
        let mut bad = file.clone();
        match round % 4 {
            0 => {
                let i = rng.below(bad.len());
                bad[i] ^= 1 << rng.below(8);
            }
            1 => {
                for _ in 0..1 + rng.below(8) {
                    let i = rng.below(bad.len());
                    bad[i] = rng.next() as u8;
                }
            }
            2 => {
                let i = rng.below(bad.len());
                let n = rng.below(64).min(bad.len() - i);
                for b in &mut bad[i..i + n] {
                    *b = rng.next() as u8;
                }
                bad.truncate(i + n + rng.below(bad.len() - i - n + 1));
            }
            _ => {
                let i = rng.below(bad.len());
                bad.insert(i, rng.next() as u8);
            }
        }
        match parse(Path::new(PATH), &bad) {
            Ok(_) => {}
            Err(ReadError::Corrupt { path, offset, .. }) => {
                errors += 1;
                assert_eq!(path, Path::new(PATH));
                assert!(offset <= bad.len() as u64, "offset {offset} past the file");
            }
            Err(ReadError::Version { .. }) => errors += 1,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(errors > 4_000, "only {errors} of 5000 corruptions detected");
}

#[test]
fn a_single_flipped_bit_in_a_block_is_always_detected() {
    let (file, ends) = build(2, 30);
    for i in FILE_HEADER_LEN..ends[0] {
        for bit in [0, 3, 7] {
            let mut bad = file.clone();
            bad[i] ^= 1 << bit;
            match parse(Path::new(PATH), &bad) {
                Err(ReadError::Corrupt { offset, .. }) => {
                    assert!(offset as usize <= i.max(FILE_HEADER_LEN) + BLOCK_HEADER_LEN)
                }
                // A flipped length can make the block run past the end of
                // the file: read as a cut file, with nothing of it.
                Ok(t) => assert_eq!(t.blocks, 0, "byte {i} bit {bit}"),
                Err(e) => panic!("byte {i} bit {bit}: {e}"),
            }
        }
    }
}

/// A directory of the given files (rank, job, version), fresh for `name`.
fn dir_of(name: &str, files: &[(u32, u64, u16)]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mttl-trace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for &(rank, job, version) in files {
        let (bytes, _) = build_for(job, rank, 2, version, 1, 5);
        std::fs::write(dir.join(mttl_core::trace::file_name(rank)), bytes).unwrap();
    }
    dir
}

#[test]
fn one_run_reads_and_files_of_two_runs_or_versions_are_refused_naming_both() {
    let good = dir_of("good", &[(0, 7, VERSION), (1, 7, VERSION)]);
    let t = mttl_trace::read_dir(&good).unwrap();
    assert_eq!(t.ranks.len(), 2);
    assert!(mttl_trace::info(&t).contains("rank 1: 5 events, 2 blocks"));

    let jobs = dir_of("jobs", &[(0, 7, VERSION), (1, 8, VERSION)]);
    let e = mttl_trace::read_dir(&jobs).unwrap_err().to_string();
    assert!(
        e.contains("rank-00000.mttltrace")
            && e.contains("rank-00001.mttltrace")
            && e.contains("different runs"),
        "{e}"
    );

    let versions = dir_of("versions", &[(0, 7, VERSION), (1, 7, VERSION + 1)]);
    let e = mttl_trace::read_dir(&versions).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "rank-00001.mttltrace is trace format version {}",
            VERSION + 1
        )) && e.contains(&format!("reads version {VERSION} (as "))
            && e.contains("rank-00000.mttltrace"),
        "{e}"
    );

    let missing = dir_of("missing", &[(1, 7, VERSION)]);
    let e = mttl_trace::read_dir(&missing).unwrap_err().to_string();
    assert!(e.contains("missing: 0"), "{e}");
    for d in [good, jobs, versions, missing] {
        let _ = std::fs::remove_dir_all(d);
    }
}
