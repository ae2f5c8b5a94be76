//! The `ainvoke` scenario: every rank calls every other rank in turn, at
//! most `window` calls in flight, in rounds ended by a barrier; each callee
//! adds the argument to its sum, each caller checks every reply.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

use mttl::SyncCell;
use serde_json::{json, Value};

use super::{gather_memory, injected, load_reset, step, ANSWERED, SENT, SERVED_CALLS};
use crate::bench::load::memory::Memory;
use crate::bench::load::{pattern, Fault};

thread_local! {
    /// Calls served by [`load_accumulate`] and the sum of their values.
    static SERVED: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Clears this rank's sum.
pub(super) fn reset() {
    SERVED.with(|s| s.set((0, 0)));
}

/// The callee of the `ainvoke` scenario.
#[mttl::remote]
fn load_accumulate(index: u64, v: u64) -> u64 {
    let victim = index == pattern::ainvoke_index(1, 0);
    if victim && injected(Fault::DropReply) {
        // Never answered: the caller waits until the watchdog stops it.
        SyncCell::<u64>::new().read();
    }
    let v = if victim && injected(Fault::LoseCall) {
        0
    } else {
        v
    };
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

/// The scenario, from rank 0.
pub(super) fn run(total: u64, window: u64, rounds: u64, seed: u64) -> Value {
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
