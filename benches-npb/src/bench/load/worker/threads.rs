//! The `threads` scenario, on rank 1: first `n` threads spawned there,
//! each blocked reading its own `SyncCell` until all `n` are, then woken in
//! reverse order; then `n` threads made by `n` ainvokes from rank 0,
//! blocked on one gate cell until rank 0 has seen all of them parked, then
//! released by `n` writes to the gate.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mttl::SyncCell;
use serde_json::{json, Value};

use super::{gather_memory, load_reset, step, ANSWERED, PEER, SENT};
use crate::bench::load::memory::Memory;
use crate::bench::load::pattern;

thread_local! {
    /// Threads parked at the gate by [`load_park`].
    static PARKED: Cell<u64> = const { Cell::new(0) };
    /// The cell parked threads read.
    static GATE: SyncCell<u64> = SyncCell::new();
}

/// Clears this rank's count of parked threads.
pub(super) fn reset() {
    PARKED.with(|p| p.set(0));
}

/// What one local-threads run on [`PEER`] came to.
type LocalReport = (u64, u64, u64, f64, f64, u64, u64);

/// `n` threads on this rank, all blocked at once, then woken: `(live
/// threads when all were blocked, wrapping sum of their results, results
/// received, seconds to spawn and block them all, seconds to wake them and
/// collect the results, resident set with all blocked, resident set
/// after)`, sizes in KiB.
#[mttl::remote]
fn load_threads_local(n: u64, seed: u64) -> LocalReport {
    step("blocking local threads");
    let blocked = Rc::new(Cell::new(0u64));
    let results: SyncCell<u64> = SyncCell::new();
    let cells: Vec<SyncCell<u64>> = (0..n).map(|_| SyncCell::new()).collect();
    let started = Instant::now();
    for (i, cell) in (0..n).zip(&cells) {
        let (cell, results, blocked) = (cell.clone(), results.clone(), blocked.clone());
        mttl::thread::spawn("load-waiter", move || {
            // Nothing switches between the count and the read, and no cell
            // is written before all are counted: counted means blocked.
            blocked.set(blocked.get() + 1);
            let token = cell.read();
            results.write(pattern::thread_result(i, token));
        });
    }
    while blocked.get() < n {
        mttl::yield_now();
    }
    let spawn_s = started.elapsed().as_secs_f64();
    let live = mttl::thread::live_threads() as u64;
    let rss_live = Memory::now().rss_kib;
    step("waking local threads");
    let started = Instant::now();
    for (i, cell) in cells.iter().enumerate().rev() {
        cell.write(pattern::value(seed, i as u64));
    }
    let (mut sum, mut count) = (0u64, 0u64);
    for _ in 0..n {
        sum = sum.wrapping_add(results.read());
        count += 1;
    }
    let wake_s = started.elapsed().as_secs_f64();
    drop(cells);
    // Let the last writers finish and give back their stacks.
    mttl::yield_now();
    (
        live,
        sum,
        count,
        spawn_s,
        wake_s,
        rss_live,
        Memory::now().rss_kib,
    )
}

/// A thread made by an ainvoke from rank 0: parks at the gate until a
/// token comes, returns `mix64(i)` plus the token.
#[mttl::remote]
fn load_park(i: u64) -> u64 {
    PARKED.with(|p| p.set(p.get() + 1));
    let gate = GATE.with(SyncCell::clone);
    pattern::mix64(i).wrapping_add(gate.read())
}

/// `(threads parked, live threads, resident set in KiB)` on this rank.
#[mttl::remote]
fn load_parked() -> (u64, u64, u64) {
    (
        PARKED.with(Cell::get),
        mttl::thread::live_threads() as u64,
        Memory::now().rss_kib,
    )
}

/// Writes the `n` gate tokens.
#[mttl::remote]
fn load_release(n: u64, seed: u64) {
    let gate = GATE.with(SyncCell::clone);
    for j in 0..n {
        gate.write(pattern::gate_token(seed, j));
    }
}

/// The remote half of the `threads` scenario, from rank 0.
fn remote_threads(n: u64, seed: u64, failures: &mut Vec<String>) -> Value {
    step("parking remote threads");
    mttl::invoke(PEER, load_reset, ());
    let started = Instant::now();
    let calls: Vec<mttl::Pending<u64>> = (0..n)
        .map(|i| {
            SENT.fetch_add(1, Ordering::Relaxed);
            mttl::ainvoke(PEER, load_park, (i,))
        })
        .collect();
    let (live, rss_live) = loop {
        let (parked, live, rss) = mttl::invoke(PEER, load_parked, ());
        if parked >= n {
            break (live, rss);
        }
    };
    let park_s = started.elapsed().as_secs_f64();
    step("releasing remote threads");
    let started = Instant::now();
    mttl::invoke(PEER, load_release, (n, seed));
    let mut tokens = Vec::with_capacity(n as usize);
    let mut sum = 0u64;
    for (i, call) in (0..n).zip(calls) {
        ANSWERED.fetch_add(1, Ordering::Relaxed);
        match call.try_wait() {
            Ok(r) => {
                sum = sum.wrapping_add(r);
                tokens.push(r.wrapping_sub(pattern::mix64(i)));
            }
            Err(e) => failures.push(format!("remote thread {i} failed: {e}")),
        }
    }
    let release_s = started.elapsed().as_secs_f64();
    let mut expected: Vec<u64> = (0..n).map(|j| pattern::gate_token(seed, j)).collect();
    expected.sort_unstable();
    tokens.sort_unstable();
    let tokens_ok = tokens == expected;
    if !tokens_ok {
        failures.push(format!(
            "the {n} remote threads did not each get exactly one of the {n} tokens"
        ));
    }
    json!({
        "live_threads": live,
        "checksum": sum,
        "tokens_ok": tokens_ok,
        "park_seconds": park_s,
        "release_seconds": release_s,
        "rss_live_kib": rss_live,
    })
}

/// The scenario, from rank 0.
pub(super) fn run(n: u64, rounds: u64, seed: u64) -> Value {
    mttl::spmd(load_reset, ());
    let base = gather_memory();
    let (want_local, want_remote) = pattern::threads_expected(n, seed);
    let mut failures = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..rounds {
        let (live, sum, count, spawn_s, wake_s, rss_live, rss_after) =
            mttl::invoke(PEER, load_threads_local, (n, seed));
        if live < n {
            failures.push(format!("only {live} threads were live at once, not {n}"));
        }
        if count != n || sum != want_local {
            failures.push(format!(
                "{count} local threads returned a checksum of {sum:#x}, not {n} of {want_local:#x}"
            ));
        }
        let local = json!({
            "live_threads": live,
            "checksum": sum,
            "results": count,
            "spawn_seconds": spawn_s,
            "wake_seconds": wake_s,
            "rss_live_kib": rss_live,
            "rss_after_kib": rss_after,
        });
        let remote = remote_threads(n, seed, &mut failures);
        let remote_sum = remote["checksum"].as_u64().unwrap_or_default();
        if remote_sum != want_remote {
            failures.push(format!(
                "the remote threads returned a checksum of {remote_sum:#x}, not {want_remote:#x}"
            ));
        }
        if remote["live_threads"].as_u64().unwrap_or_default() < n {
            failures.push(format!(
                "only {} remote threads were live at once, not {n}",
                remote["live_threads"]
            ));
        }
        runs.push(json!({"local": local, "remote": remote}));
    }
    json!({
        "threads": n,
        "rank": PEER,
        "rounds": rounds,
        "seed": seed,
        "stack_size": mttl::thread::stack_size(),
        "rss_before_kib": base[PEER].rss_kib,
        "runs": runs,
        "failures": failures,
    })
}
