//! Step 3 of the [orchestration](super): the mttl program every rank of a
//! load job runs. Rank 0's main drives the scenario and writes the results
//! file; the other ranks serve. Every figure the orchestrator checks is
//! observed where the traffic ends (sums kept by the callee, checksums
//! computed by the receiver), never copied from what the sender meant.
//!
//! One file per scenario:
//!
//! - `ainvoke`: `load_fire` runs on every rank (`spmd`): rank `r` makes
//!   its calls to every other rank in turn, at most `window` in flight, in
//!   `rounds` rounds ended by a barrier; each callee adds the argument to
//!   its sum (`load_accumulate`), each caller checks every reply.
//! - `threads`, on rank 1: first `n` threads spawned there, each blocked
//!   reading its own `SyncCell` until all `n` are, then woken in reverse
//!   order (`load_threads_local`); then `n` threads made by `n` ainvokes
//!   from rank 0, blocked on one gate cell until rank 0 has seen all of
//!   them parked, then released by `n` writes to the gate.
//! - `transfer`, rank 0 to rank 1: the data written into a global array on
//!   rank 1 in chunks, checksummed there; read back chunk by chunk and
//!   checksummed at rank 0; sent again as the `Vec<u8>` arguments of
//!   invokes, checksummed by the callee.
//! - `soak` (here): rounds of the three, smaller, until the duration is
//!   up, with every rank's resident set after each round.
//!
//! A watchdog OS thread in every rank ends the process (status 3) with the
//! rank's progress counters if the scenario is not over in time, so a lost
//! message shows as a named stall, not a silent hang.

mod ainvoke;
mod threads;
mod transfer;

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::memory::{mib, Memory};
use super::{Fault, Plan, Scenario};
use crate::bench::error::BenchError;
use crate::bench::sweep::jobs;

/// The rank that runs the `threads` scenario and receives the transfer.
const PEER: usize = 1;

/// Calls this rank started (`ainvoke::load_fire`, `threads`).
static SENT: AtomicU64 = AtomicU64::new(0);
/// Replies this rank received.
static ANSWERED: AtomicU64 = AtomicU64::new(0);
/// Calls this rank served (`ainvoke::load_accumulate`).
static SERVED_CALLS: AtomicU64 = AtomicU64::new(0);
/// This rank, once known.
static RANK: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The fault to inject, if any (see [`Fault`]).
static FAULT: Mutex<Option<Fault>> = Mutex::new(None);
/// What this rank is doing, for the watchdog.
static STEP: Mutex<&str> = Mutex::new("start-up");

fn injected(fault: Fault) -> bool {
    FAULT.lock().is_ok_and(|f| *f == Some(fault))
}

fn step(what: &'static str) {
    if let Ok(mut s) = STEP.lock() {
        *s = what;
    }
}

/// Runs one rank of a job of `scenario`; rank 0 writes the results to
/// `out`.
pub(super) fn run(scenario: Scenario, plan: &Plan, out: &Path) -> Result<(), BenchError> {
    start_watchdog(scenario, plan.timeout);
    if let Ok(mut f) = FAULT.lock() {
        *f = plan.fault;
    }
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
            Scenario::Ainvoke => ainvoke::run(plan.ainvokes, plan.window, plan.rounds, plan.seed),
            Scenario::Threads => threads::run(plan.threads, plan.rounds, plan.seed),
            Scenario::Transfer => transfer::run(plan.bytes, plan.chunk, plan.seed),
            Scenario::Soak => soak(&plan),
        };
        doc["scenario"] = json!(scenario.name());
        doc["backend"] = json!(mttl::backend_name());
        doc["np"] = json!(mttl::size());
        doc["memory"] = memory_json(&gather_memory());
        step("writing the results");
        jobs::write_json(&doc, &out).map_err(|e| e.to_string())?;
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
    ainvoke::reset();
    threads::reset();
}

/// One round of the soak, as rank 0 keeps it until the end.
///
/// Kept as plain figures and turned into JSON only at the end: a
/// `serde_json` object per round costs about 1 KiB, a growth of rank 0's
/// resident set the soak itself would blame on the runtime.
struct SoakRound {
    seconds: f64,
    ainvoke_rate_per_s: Option<f64>,
    rss_kib: Vec<u64>,
}

/// The `soak` scenario, from rank 0: rounds of the other three until
/// `plan.duration` is up.
fn soak(plan: &Plan) -> Value {
    let began = Instant::now();
    let mut rounds: Vec<SoakRound> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut next_report = 60.0;
    let mut totals = (0u64, 0u64, 0u64);
    while began.elapsed().as_secs_f64() < plan.duration && failures.is_empty() {
        let round = rounds.len() as u64;
        let seed = plan.seed.wrapping_add(round);
        let t = Instant::now();
        let parts = [
            ainvoke::run(plan.ainvokes, plan.window, 1, seed),
            threads::run(plan.threads, 1, seed),
            transfer::run(plan.bytes, plan.chunk, seed),
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
        rounds.push(SoakRound {
            seconds: t.elapsed().as_secs_f64(),
            ainvoke_rate_per_s: parts[0]["rate_per_s"].as_f64(),
            rss_kib: rss,
        });
        let elapsed = began.elapsed().as_secs_f64();
        if elapsed >= next_report {
            let figures: Vec<String> = rounds
                .last()
                .into_iter()
                .flat_map(|r| &r.rss_kib)
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
    let rss_by_round: Vec<Vec<u64>> = rounds.iter().map(|r| r.rss_kib.clone()).collect();
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
    let rounds: Vec<Value> = rounds
        .iter()
        .enumerate()
        .map(|(round, r)| {
            json!({
                "round": round,
                "seconds": r.seconds,
                "ainvoke_rate_per_s": r.ainvoke_rate_per_s,
                "rss_kib": r.rss_kib,
            })
        })
        .collect();
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
        assert_eq!(rss_growth(&leaking), vec![290 - 110]);
        assert_eq!(rss_growth(&flat[..2]), vec![0, 0]);
    }
}
