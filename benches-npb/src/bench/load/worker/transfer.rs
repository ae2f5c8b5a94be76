//! The `transfer` scenario, rank 0 to rank 1: the data written into a
//! global array on rank 1 in chunks and checksummed there; read back chunk
//! by chunk and checksummed at rank 0; sent again as the `Vec<u8>`
//! arguments of invokes and checksummed by the callee.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use mttl::{GlobalArray, GlobalPtr};
use serde_json::{json, Value};

use super::{gather_memory, injected, load_reset, step, PEER};
use crate::bench::load::{pattern, Fault};

thread_local! {
    /// The transfer's destination array, on [`PEER`].
    static SINK: RefCell<Option<GlobalArray<u64>>> = const { RefCell::new(None) };
}

/// Registers the transfer's destination: `words` zeroed words.
#[mttl::remote]
fn load_sink_open(words: u64) -> GlobalPtr<u64> {
    let array = GlobalArray::<u64>::new(words as usize);
    let ptr = array.global_ptr();
    SINK.with(|s| *s.borrow_mut() = Some(array));
    ptr
}

/// The checksum of the destination array, computed here.
#[mttl::remote]
fn load_sink_checksum() -> u64 {
    SINK.with(|s| {
        s.borrow().as_ref().map_or(0, |a| {
            if injected(Fault::FlipBit) && !a.is_empty() {
                a.set(0, a.get(0) ^ 1);
            }
            pattern::word_checksum(0, &a.borrow())
        })
    })
}

/// Drops the destination array.
#[mttl::remote]
fn load_sink_close() {
    SINK.with(|s| drop(s.borrow_mut().take()));
}

/// The checksum of data words arriving as an argument, computed here.
#[mttl::remote]
fn load_absorb(start: u64, mut data: Vec<u8>) -> u64 {
    if let Some(b) = data.first_mut().filter(|_| start == 0) {
        if injected(Fault::FlipBit) {
            *b ^= 1;
        }
    }
    pattern::byte_checksum(start, &data)
}

/// One phase of the transfer.
fn phase_json(bytes: u64, seconds: f64, checksum: u64) -> Value {
    json!({"seconds": seconds, "bytes_per_s": bytes as f64 / seconds, "checksum": checksum})
}

/// The scenario, from rank 0, to [`PEER`].
pub(super) fn run(bytes: u64, chunk: u64, seed: u64) -> Value {
    mttl::spmd(load_reset, ());
    let base = gather_memory();
    let words = bytes / 8;
    let chunk_words = (chunk / 8).clamp(1, words.max(1));
    let mut buf = vec![0u64; chunk_words as usize];
    let chunks = || (0..words).step_by(chunk_words as usize);
    let len_at = |start: u64| (words - start).min(chunk_words) as usize;
    let mut failures = Vec::new();

    step("writing the transfer");
    let dest = mttl::invoke(PEER, load_sink_open, (words,));
    let (mut expected, mut took) = (0u64, Duration::ZERO);
    for start in chunks() {
        let piece = &mut buf[..len_at(start)];
        pattern::fill(seed, start, piece);
        expected = expected.wrapping_add(pattern::word_checksum(start, piece));
        let t = Instant::now();
        dest.add(start as usize).write_slice(piece);
        took += t.elapsed();
    }
    step("checksumming at the receiver");
    let written = mttl::invoke(PEER, load_sink_checksum, ());
    let write = phase_json(bytes, took.as_secs_f64(), written);
    let rss_written = gather_memory();

    step("reading the transfer back");
    let (mut read_sum, mut took) = (0u64, Duration::ZERO);
    for start in chunks() {
        let piece = &mut buf[..len_at(start)];
        piece.fill(0);
        let t = Instant::now();
        dest.add(start as usize).read_slice(piece);
        took += t.elapsed();
        read_sum = read_sum.wrapping_add(pattern::word_checksum(start, piece));
    }
    let read = phase_json(bytes, took.as_secs_f64(), read_sum);
    mttl::invoke(PEER, load_sink_close, ());

    step("sending the transfer as invoke arguments");
    let (mut absorbed, mut took) = (0u64, Duration::ZERO);
    for start in chunks() {
        let piece = &mut buf[..len_at(start)];
        pattern::fill(seed, start, piece);
        let data: Vec<u8> = mttl::bytemuck::cast_slice(piece).to_vec();
        let t = Instant::now();
        let got = mttl::invoke(PEER, load_absorb, (start, data));
        took += t.elapsed();
        absorbed = absorbed.wrapping_add(got);
    }
    let invoke = phase_json(bytes, took.as_secs_f64(), absorbed);

    for (what, got) in [
        ("written", written),
        ("read back", read_sum),
        ("sent as invoke arguments", absorbed),
    ] {
        if got != expected {
            failures.push(format!(
                "the data {what} has checksum {got:#x}, not {expected:#x}"
            ));
        }
    }
    json!({
        "bytes": bytes,
        "chunk": chunk_words * 8,
        "seed": seed,
        "expected_checksum": expected,
        "write": write,
        "read": read,
        "invoke": invoke,
        "rss_before_kib": base.iter().map(|m| m.rss_kib).collect::<Vec<_>>(),
        "rss_written_kib": rss_written.iter().map(|m| m.rss_kib).collect::<Vec<_>>(),
        "failures": failures,
    })
}
