//! Micro-benchmark of mttl threads on one OS thread: switch, spawn and
//! block/wake costs. Run with
//! `cargo run --release -p mttl-core --example thread_bench`.
//!
//! Each figure is the best of several runs (the least disturbed one).

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mttl_core::thread::{self, BlockReason, ThreadId};

const RUNS: usize = 7;

/// Best (lowest) nanoseconds per operation over `RUNS` runs of `run`, which
/// returns its elapsed time for `ops` operations.
fn best_ns(ops: u64, mut run: impl FnMut() -> Duration) -> f64 {
    (0..RUNS)
        .map(|_| run().as_nanos() as f64 / ops as f64)
        .fold(f64::INFINITY, f64::min)
}

/// Two threads ping-pong with `yield_now`: every yield is one switch out
/// and one switch in, through the ready queue.
fn yield_switch(yields_per_thread: u64) -> Duration {
    for _ in 0..2 {
        thread::spawn("bench:yield", move || {
            for _ in 0..yields_per_thread {
                thread::yield_now();
            }
        });
    }
    let start = Instant::now();
    while thread::run_ready(usize::MAX) > 0 {}
    start.elapsed()
}

/// Two threads ping-pong with block/wake.
fn block_wake_switch(rounds: u64) -> Duration {
    let peer: Rc<Cell<Option<ThreadId>>> = Rc::new(Cell::new(None));
    let first = {
        let peer = peer.clone();
        thread::spawn("bench:ping", move || {
            for _ in 0..rounds {
                thread::block(BlockReason::new("pong"));
                if let Some(other) = peer.get() {
                    thread::wake(other);
                }
            }
        })
    };
    let second = thread::spawn("bench:pong", move || {
        for _ in 0..rounds {
            thread::wake(first);
            thread::block(BlockReason::new("ping"));
        }
    });
    peer.set(Some(second));
    let start = Instant::now();
    while thread::run_ready(usize::MAX) > 0 {}
    let elapsed = start.elapsed();
    thread::unwind_all();
    elapsed
}

/// Spawn an empty thread and run it to completion, one at a time (pooled
/// stack after the first).
fn spawn_one_at_a_time(threads: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..threads {
        thread::spawn("bench:empty", || {
            black_box(());
        });
        thread::run_ready(1);
    }
    start.elapsed()
}

/// Spawn `batch` empty threads, then run them all.
fn spawn_batched(threads: u64, batch: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..threads / batch {
        for _ in 0..batch {
            thread::spawn("bench:empty", || {
                black_box(());
            });
        }
        thread::run_ready(usize::MAX);
    }
    start.elapsed()
}

fn main() {
    // Warm the stack pool and the scheduler's tables.
    spawn_batched(256, 256);

    const YIELDS: u64 = 2_000_000;
    let switch = best_ns(2 * YIELDS, || yield_switch(YIELDS));
    println!("switch (yield_now ping-pong, 2 threads): {switch:6.2} ns/switch");

    const ROUNDS: u64 = 1_000_000;
    let block_wake = best_ns(2 * ROUNDS, || block_wake_switch(ROUNDS));
    println!("switch (block/wake ping-pong, 2 threads): {block_wake:6.2} ns/switch");

    const SPAWNS: u64 = 1_000_000;
    let spawn = best_ns(SPAWNS, || spawn_one_at_a_time(SPAWNS));
    println!("spawn + run empty thread (one at a time): {spawn:6.2} ns/thread");

    let batched = best_ns(SPAWNS, || spawn_batched(SPAWNS, 100));
    println!("spawn + run empty thread (batches of 100): {batched:6.2} ns/thread");

    let stats = thread::stack_stats();
    println!(
        "stacks: {} mapped, {} reused, {} pooled ({} bytes each)",
        stats.fresh,
        stats.reused,
        stats.pooled,
        thread::stack_size()
    );
}
