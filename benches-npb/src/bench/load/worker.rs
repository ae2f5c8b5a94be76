//! Step 3 of the [orchestration](super): the mttl program every rank of a
//! load job runs. Rank 0's main drives the scenario and writes the results
//! file; the other ranks serve. Every figure the orchestrator checks is
//! observed where the traffic ends (sums kept by the callee, checksums
//! computed by the receiver), never copied from what the sender meant.
//!
//! - `ainvoke`: [`load_fire`] runs on every rank (`spmd`): rank `r` makes
//!   its calls to every other rank in turn, at most `window` in flight, in
//!   `rounds` rounds ended by a barrier; each callee adds the argument to
//!   its sum ([`load_accumulate`]), each caller checks every reply.
//! - `threads`, on rank 1: first `n` threads spawned there, each blocked
//!   reading its own `SyncCell` until all `n` are, then woken in reverse
//!   order ([`load_threads_local`]); then `n` threads made by `n` ainvokes
//!   from rank 0, blocked on one gate cell until rank 0 has seen all of
//!   them parked, then released by `n` writes to the gate.
//! - `transfer`, rank 0 to rank 1: the data written into a global array on
//!   rank 1 in chunks, checksummed there; read back chunk by chunk and
//!   checksummed at rank 0; sent again as the `Vec<u8>` arguments of
//!   invokes, checksummed by the callee.
//! - `soak`: rounds of the three, smaller, until the duration is up, with
//!   every rank's resident set after each round.
//!
//! A watchdog OS thread in every rank ends the process (status 3) with the
//! rank's progress counters if the scenario is not over in time, so a lost
//! message shows as a named stall, not a silent hang.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mttl::{GlobalArray, GlobalPtr, SyncCell};
use serde_json::{json, Value};

use super::memory::{mib, Memory};
use super::pattern;
use super::{Plan, Scenario};
use crate::bench::error::BenchError;
use crate::bench::results_file;

/// The rank that runs the `threads` scenario and receives the transfer.
const PEER: usize = 1;

/// Calls this rank started ([`load_fire`]).
static SENT: AtomicU64 = AtomicU64::new(0);
/// Replies this rank received.
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// Calls this rank served ([`load_accumulate`]).
static SERVED_CALLS: AtomicU64 = AtomicU64::new(0);
/// This rank, once known.
static RANK: AtomicUsize = AtomicUsize::new(usize::MAX);
/// What this rank is doing, for the watchdog.
static STEP: Mutex<&str> = Mutex::new("start-up");

fn step(what: &'static str) {
    if let Ok(mut s) = STEP.lock() {
        *s = what;
    }
}

thread_local! {
    /// Calls served by [`load_accumulate`] and the sum of their values.
    static SERVED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// Threads parked at the gate by [`load_park`].
    static PARKED: Cell<u64> = const { Cell::new(0) };
    /// The cell parked threads read.
    static GATE: SyncCell<u64> = SyncCell::new();
    /// The transfer's destination array, on [`PEER`].
    static SINK: RefCell<Option<GlobalArray<u64>>> = const { RefCell::new(None) };
}

/// Runs one rank of a job of `scenario`; rank 0 writes the results to
/// `out`.
pub(super) fn run(scenario: Scenario, plan: &Plan, out: &Path) -> Result<(), BenchError> {
    start_watchdog(scenario, plan.timeout);
    let plan = plan.clone();
    let out = out.to_owned();
    let code = mttl::start(move || -> Result<(), String> {
        if mttl::size() < 2 {
            return Err(format!(
                "the {} scenario needs at least 2 ranks, the job has {}",
                scenario.name(),
                mttl::size()
            ));
        }
        let mut doc = match scenario {
            Scenario::Ainvoke => ainvoke(plan.ainvokes, plan.window, plan.rounds, plan.seed),
            Scenario::Threads => threads(plan.threads, plan.rounds, plan.seed),
            Scenario::Transfer => transfer(plan.bytes, plan.chunk, plan.seed),
            Scenario::Soak => soak(&plan),
        };
        doc["scenario"] = json!(scenario.name());
        doc["backend"] = json!(mttl::backend_name());
        doc["np"] = json!(mttl::size());
        doc["memory"] = memory_json(&gather_memory());
        step("writing the results");
        results_file::write(&doc, &out).map_err(|e| e.to_string())?;
        let failures = failures_of(&doc);
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    });
    if code == 0 {
        Ok(())
    } else {
        Err(BenchError::Setup {
            config: scenario.name(),
            detail: format!("the mttl program exited with status {code}"),
        })
    }
}

/// Ends this process if the scenario is not over after `timeout` seconds,
/// saying where this rank stood.
fn start_watchdog(scenario: Scenario, timeout: f64) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs_f64(timeout));
        let rank = match RANK.load(Ordering::Relaxed) {
            usize::MAX => "?".to_owned(),
            r => r.to_string(),
        };
        let at = STEP.lock().map(|s| *s).unwrap_or("?");
        eprintln!(
            "mttl-bench load: rank {rank}: the {} scenario did not finish within {timeout} s; \
             this rank was {at}, had started {} calls, received {} replies and served {} calls \
             (a message was lost or the job is stuck)",
            scenario.name(),
            SENT.load(Ordering::Relaxed),
            ANSWERED.load(Ordering::Relaxed),
            SERVED_CALLS.load(Ordering::Relaxed),
        );
        std::process::exit(3);
    });
}

/// The failures a scenario's document lists (a soak's include its rounds').
fn failures_of(doc: &Value) -> Vec<String> {
    doc["failures"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every rank's memory now, by rank.
fn gather_memory() -> Vec<Memory> {
    step("gathering memory figures");
    mttl::spmd(load_memory, ())
        .into_iter()
        .map(|(peak_kib, rss_kib)| Memory { peak_kib, rss_kib })
        .collect()
}

fn memory_json(memory: &[Memory]) -> Value {
    memory
        .iter()
        .enumerate()
        .map(|(rank, m)| json!({"rank": rank, "peak_kib": m.peak_kib, "rss_kib": m.rss_kib}))
        .collect()
}

#[mttl::remote]
fn load_memory() -> (u64, u64) {
    let m = Memory::now();
    (m.peak_kib, m.rss_kib)
}

/// Clears this rank's counters before a scenario.
#[mttl::remote]
fn load_reset() {
    RANK.store(mttl::rank(), Ordering::Relaxed);
    SERVED.with(|s| s.set((0, 0)));
    PARKED.with(|p| p.set(0));
}

// ---------------------------------------------------------------- ainvoke

/// The callee of the `ainvoke` scenario.
#[mttl::remote]
fn load_accumulate(index: u64, v: u64) -> u64 {
    SERVED.with(|s| {
        let (calls, sum) = s.get();
        s.set((calls + 1, sum.wrapping_add(v)));
    });
    SERVED_CALLS.fetch_add(1, Ordering::Relaxed);
    pattern::ainvoke_reply(index, v)
}

/// Calls served here and the sum of their values.
#[mttl::remote]
fn load_served() -> (u64, u64) {
    SERVED.with(Cell::get)
}

/// What one rank's calls came to.
type FireReport = (u64, u64, u64, Vec<u64>, String);

/// One rank's calls: `(calls started, bad replies, wrapping sum of the
/// replies, resident set in KiB after each round, the first error)`.
#[mttl::remote]
fn load_fire(total: u64, window: u64, rounds: u64, seed: u64) -> FireReport {
    step("making ainvoke calls");
    let (rank, size) = (mttl::rank(), mttl::size());
    let calls = pattern::ainvoke_calls(rank, size, total);
    let window = window.max(1) as usize;
    let mut in_flight: VecDeque<(mttl::Pending<u64>, u64)> = VecDeque::with_capacity(window);
    let (mut started, mut bad, mut reply_sum) = (0u64, 0u64, 0u64);
    let mut first_error = String::new();
    let mut settle = |call: (mttl::Pending<u64>, u64)| {
        let (pending, want) = call;
        ANSWERED.fetch_add(1, Ordering::Relaxed);
        match pending.try_wait() {
            Ok(got) => {
                reply_sum = reply_sum.wrapping_add(got);
                if got != want {
                    bad += 1;
                    if first_error.is_empty() {
                        first_error = format!("rank {rank}: a reply was {got:#x}, not {want:#x}");
                    }
                }
            }
            Err(e) => {
                bad += 1;
                if first_error.is_empty() {
                    first_error = format!("rank {rank}: a call failed: {e}");
                }
            }
        }
    };
    let mut rss = Vec::new();
    for round in 0..rounds {
        let (from, to) = (calls * round / rounds, calls * (round + 1) / rounds);
        for k in from..to {
            if in_flight.len() >= window {
                if let Some(call) = in_flight.pop_front() {
                    settle(call);
                }
            }
            let index = pattern::ainvoke_index(rank, k);
            let v = pattern::value(seed, index);
            let target = pattern::ainvoke_target(rank, size, k);
            in_flight.push_back((
                mttl::ainvoke(target, load_accumulate, (index, v)),
                pattern::ainvoke_reply(index, v),
            ));
            started += 1;
            SENT.fetch_add(1, Ordering::Relaxed);
        }
        while let Some(call) = in_flight.pop_front() {
            settle(call);
        }
        // Every rank's calls of this round are answered, so served.
        step("in the barrier after an ainvoke round");
        mttl::barrier();
        rss.push(Memory::now().rss_kib);
        step("making ainvoke calls");
    }
    (started, bad, reply_sum, rss, first_error)
}

/// The `ainvoke` scenario, from rank 0.
fn ainvoke(total: u64, window: u64, rounds: u64, seed: u64) -> Value {
    let size = mttl::size();
    mttl::spmd(load_reset, ());
    let base = gather_memory();
    let started = Instant::now();
    let reports = mttl::spmd(load_fire, (total, window, rounds, seed));
    let seconds = started.elapsed().as_secs_f64();
    step("collecting the callees' sums");
    let served = mttl::spmd(load_served, ());

    let mut failures = Vec::new();
    let (expected_served, expected_replies) = pattern::ainvoke_expected(size, total, seed);
    let mut reply_sum = 0u64;
    for (rank, (started, bad, sum, _, first_error)) in reports.iter().enumerate() {
        reply_sum = reply_sum.wrapping_add(*sum);
        let want = pattern::ainvoke_calls(rank, size, total);
        if *started != want {
            failures.push(format!("rank {rank} started {started} calls, not {want}"));
        }
        if *bad > 0 {
            failures.push(format!("rank {rank}: {bad} bad replies; {first_error}"));
        }
    }
    if reply_sum != expected_replies {
        failures.push(format!(
            "the replies sum to {reply_sum:#x}, not {expected_replies:#x}"
        ));
    }
    for (rank, (&got, &want)) in served.iter().zip(&expected_served).enumerate() {
        if got != want {
            failures.push(format!(
                "rank {rank} served {} calls summing to {:#x}, not {} summing to {:#x}",
                got.0, got.1, want.0, want.1
            ));
        }
    }
    let rss_by_round: Vec<&Vec<u64>> = reports.iter().map(|r| &r.3).collect();
    json!({
        "calls": total,
        "window": window,
        "rounds": rounds,
        "seed": seed,
        "seconds": seconds,
        "rate_per_s": total as f64 / seconds,
        "served": served.iter().enumerate()
            .map(|(rank, s)| json!({"rank": rank, "calls": s.0, "sum": s.1}))
            .collect::<Vec<_>>(),
        "reply_checksum": reply_sum,
        "bad_replies": reports.iter().map(|r| r.1).sum::<u64>(),
        "rss_before_kib": base.iter().map(|m| m.rss_kib).collect::<Vec<_>>(),
        "rss_by_round_kib": rss_by_round,
        "failures": failures,
    })
}

// ---------------------------------------------------------------- threads

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

/// The `threads` scenario, from rank 0.
fn threads(n: u64, rounds: u64, seed: u64) -> Value {
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

// ---------------------------------------------------------------- transfer

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
        s.borrow()
            .as_ref()
            .map_or(0, |a| pattern::word_checksum(0, &a.borrow()))
    })
}

/// Drops the destination array.
#[mttl::remote]
fn load_sink_close() {
    SINK.with(|s| drop(s.borrow_mut().take()));
}

/// The checksum of data words arriving as an argument, computed here.
#[mttl::remote]
fn load_absorb(start: u64, data: Vec<u8>) -> u64 {
    pattern::byte_checksum(start, &data)
}

/// One phase of the transfer.
fn phase_json(bytes: u64, seconds: f64, checksum: u64) -> Value {
    json!({"seconds": seconds, "bytes_per_s": bytes as f64 / seconds, "checksum": checksum})
}

/// The `transfer` scenario, from rank 0, to [`PEER`].
fn transfer(bytes: u64, chunk: u64, seed: u64) -> Value {
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

// ---------------------------------------------------------------- soak

/// The `soak` scenario, from rank 0: rounds of the other three until
/// `plan.duration` is up.
fn soak(plan: &Plan) -> Value {
    let began = Instant::now();
    let mut rounds = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut rss_by_round: Vec<Vec<u64>> = Vec::new();
    let mut next_report = 60.0;
    let mut totals = (0u64, 0u64, 0u64);
    while began.elapsed().as_secs_f64() < plan.duration && failures.is_empty() {
        let round = rounds.len() as u64;
        let seed = plan.seed.wrapping_add(round);
        let t = Instant::now();
        let parts = [
            ainvoke(plan.ainvokes, plan.window, 1, seed),
            threads(plan.threads, 1, seed),
            transfer(plan.bytes, plan.chunk, seed),
        ];
        for part in &parts {
            failures.extend(
                failures_of(part)
                    .into_iter()
                    .map(|f| format!("round {round}: {f}")),
            );
        }
        totals.0 += plan.ainvokes;
        totals.1 += 2 * plan.threads;
        totals.2 += 3 * plan.bytes;
        let rss: Vec<u64> = gather_memory().iter().map(|m| m.rss_kib).collect();
        rounds.push(json!({
            "round": round,
            "seconds": t.elapsed().as_secs_f64(),
            "ainvoke_rate_per_s": parts[0]["rate_per_s"],
            "rss_kib": rss,
        }));
        rss_by_round.push(rss);
        let elapsed = began.elapsed().as_secs_f64();
        if elapsed >= next_report {
            let figures: Vec<String> = rss_by_round
                .last()
                .into_iter()
                .flatten()
                .map(|&k| format!("{:.0}", mib(k)))
                .collect();
            eprintln!(
                "mttl-bench load soak: {:.0} min: {} rounds, all checks passed; RSS MiB by rank: {}",
                elapsed / 60.0,
                rounds.len(),
                figures.join(" ")
            );
            next_report += 60.0;
        }
    }
    let growth = rss_growth(&rss_by_round);
    let tolerance_kib = plan.rss_tolerance_mib * 1024;
    for (rank, &g) in growth.iter().enumerate() {
        if g > tolerance_kib as i64 {
            failures.push(format!(
                "rank {rank}'s resident set grew by {:.1} MiB after the first rounds \
                 (tolerance {} MiB)",
                mib(g as u64),
                plan.rss_tolerance_mib
            ));
        }
    }
    json!({
        "duration": plan.duration,
        "seconds": began.elapsed().as_secs_f64(),
        "round_sizes": {"ainvokes": plan.ainvokes, "threads": plan.threads, "bytes": plan.bytes},
        "totals": {"ainvokes": totals.0, "thread_lifetimes": totals.1, "bytes_moved": totals.2},
        "rss_tolerance_mib": plan.rss_tolerance_mib,
        "rss_growth_kib": growth,
        "rounds": rounds,
        "failures": failures,
    })
}

/// Per rank: how far the resident set after the later rounds rose above
/// its highest value during the warm-up (the first tenth of the rounds,
/// at least 2), in KiB; 0 with fewer than 3 rounds.
pub(super) fn rss_growth(rss_by_round: &[Vec<u64>]) -> Vec<i64> {
    let ranks = rss_by_round.first().map_or(0, Vec::len);
    let warm = (rss_by_round.len() / 10).max(2);
    if rss_by_round.len() <= warm {
        return vec![0; ranks];
    }
    (0..ranks)
        .map(|r| {
            let base = rss_by_round[..warm].iter().map(|v| v[r]).max().unwrap_or(0);
            let later = rss_by_round[warm..].iter().map(|v| v[r]).max().unwrap_or(0);
            later as i64 - base as i64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_measured_against_the_warm_up() {
        let flat = vec![vec![100, 50], vec![120, 50], vec![110, 52], vec![118, 51]];
        assert_eq!(rss_growth(&flat), vec![-2, 2]);
        let leaking: Vec<Vec<u64>> = (0..20).map(|i| vec![100 + 10 * i]).collect();
        assert_eq!(rss_growth(&leaking), vec![190 - 110]);
        assert_eq!(rss_growth(&flat[..2]), vec![0, 0]);
    }
}
