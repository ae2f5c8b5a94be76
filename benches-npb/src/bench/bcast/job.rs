//! The real jobs: one mttl program of n ranks on the TCP backend per
//! pattern, running every algorithm's series in turn (order rotated each
//! repetition), so that their ratios are taken side by side.
//!
//! # One job, step by step
//!
//! 1. Rank 0 measures every rank's clock offset to its own: of 16 calls
//!    of a remote function returning the callee's clock, the fastest gives
//!    offset = callee's reading − the round trip's midpoint, its error at
//!    most half that round trip (the method of the trace's suspensions).
//! 2. For each repetition and algorithm, every rank runs a series
//!    (`spmd`): per call, a barrier, its work (a sleep, so that 16 ranks
//!    on a few cores do not distort it), the broadcast of `bytes` from
//!    rank 0, timed on entry and exit with the monotonic clock. The
//!    adaptive series starts from a fresh `AdaptiveBroadcast`; the ideal
//!    one uses the pattern's ideal table (per stage, for `changing`).
//! 3. Rank 0 corrects every rank's times by its offset and writes them,
//!    with the adaptive learning's progress, to the results file.

use std::path::Path;
use std::time::Duration;

use mttl::{AdaptiveBroadcast, ArrivalOrderBroadcast};
use serde_json::{json, Value};

use super::pattern::{ideal_table, Algo, Pattern};
use crate::bench::error::BenchError;

/// The model's cost of one message in the ideal table's search (the real
/// jobs): about what one broadcast step costs on this machine's TCP.
pub(super) const JOB_SEND_COST: f64 = 100e-6;

/// Ping-pongs per rank for its clock offset.
const PINGS: usize = 16;

/// What a worker job runs.
#[derive(Debug, Clone, Copy)]
pub(super) struct JobPlan {
    pub(super) pattern: Pattern,
    pub(super) calls: usize,
    pub(super) reps: usize,
    pub(super) work: f64,
    pub(super) bytes: usize,
    pub(super) seed: u64,
}

/// This process's monotonic clock, ns.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec, and CLOCK_MONOTONIC
    // exists on every platform mttl runs on.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[mttl::remote]
fn bcast_clock() -> u64 {
    now_ns()
}

/// Step 1: every rank's (offset, error bound), ns, on rank 0.
fn clock_offsets() -> Vec<(i64, u64)> {
    let mut out = vec![(0, 0)];
    for r in 1..mttl::size() {
        let mut best: Option<(u64, i64)> = None;
        for _ in 0..PINGS {
            let t0 = now_ns();
            let remote = mttl::invoke(r, bcast_clock, ());
            let t1 = now_ns();
            let rtt = t1 - t0;
            let offset = remote as i64 - (t0 + rtt / 2) as i64;
            if best.is_none_or(|(b, _)| rtt < b) {
                best = Some((rtt, offset));
            }
        }
        let (rtt, offset) = best.unwrap_or((0, 0));
        out.push((offset, rtt.div_ceil(2)));
    }
    out
}

/// The learning progress as the worker reports it: broadcasts, phases,
/// changes, last changing broadcast and phase, relearns.
type Progress = (u64, u64, u64, u64, u64, u64);

fn progress_of(site: &AdaptiveBroadcast) -> Option<Progress> {
    site.progress(0).map(|p| {
        (
            p.broadcasts,
            p.phases,
            p.changes,
            p.last_change_broadcast,
            p.last_change_phase,
            p.relearns,
        )
    })
}

/// Step 2 on one rank: (entry, exit) per call, and on rank 0 the adaptive
/// progress at the end and at the half.
#[mttl::remote]
#[allow(clippy::type_complexity)]
fn bcast_series(
    pattern: u8,
    algo: u8,
    calls: u64,
    work: f64,
    bytes: u64,
    seed: u64,
) -> (Vec<(u64, u64)>, Option<Progress>, Option<Progress>) {
    let (r, n) = (mttl::rank(), mttl::size());
    let pattern = Pattern::from_index(pattern).expect("the orchestrator sends a valid pattern");
    let algo = Algo::from_index(algo).expect("the orchestrator sends a valid algorithm");
    let total = calls as usize;
    let ideal = |stage: Pattern| {
        let arrival: Vec<f64> = stage.works(n, seed).iter().map(|w| w * work).collect();
        let table = ideal_table(&arrival, JOB_SEND_COST, 64);
        AdaptiveBroadcast::with_table(0, &table).expect("the ideal table is a permutation")
    };
    let sites: Vec<AdaptiveBroadcast> = match algo {
        Algo::Adaptive => vec![AdaptiveBroadcast::new()],
        Algo::Ideal => {
            let first = ideal(pattern.stage(0, total));
            let last = ideal(pattern.stage(total - 1, total));
            vec![first, last]
        }
        _ => Vec::new(),
    };
    let mut data = vec![0u8; bytes as usize];
    let mut times = Vec::with_capacity(total);
    let mut half = None;
    for i in 0..total {
        mttl::barrier();
        let w = pattern.work(r, i, total, n, seed) * work;
        if w > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(w));
        }
        // At least 8 bytes (the argument's range): the call number.
        if r == 0 {
            data[..8].copy_from_slice(&(i as u64).to_le_bytes());
        }
        let t0 = now_ns();
        match algo {
            Algo::Binomial => mttl::broadcast_slice(0, &mut data),
            Algo::Adaptive => sites[0].broadcast_slice(0, &mut data),
            Algo::Ideal => {
                let site = if pattern.stage(i, total) == pattern.stage(0, total) {
                    &sites[0]
                } else {
                    &sites[1]
                };
                site.broadcast_slice(0, &mut data);
            }
            Algo::Arrival => ArrivalOrderBroadcast.broadcast_slice(0, &mut data),
        }
        let t1 = now_ns();
        assert_eq!(data[..8], (i as u64).to_le_bytes(), "call {i}: wrong data");
        times.push((t0, t1));
        if i + 1 == total / 2 && algo == Algo::Adaptive {
            half = progress_of(&sites[0]);
        }
    }
    let end = if algo == Algo::Adaptive {
        progress_of(&sites[0])
    } else {
        None
    };
    (times, end, half)
}

/// Runs the worker job's rank (steps 1-3); rank 0 writes `out`.
pub(super) fn run(plan: JobPlan, out: &Path) -> Result<(), BenchError> {
    let out = out.to_owned();
    let code = mttl::start(move || -> Result<(), String> {
        let n = mttl::size();
        let offsets = clock_offsets();
        let mut series = Vec::new();
        for rep in 0..plan.reps {
            for k in 0..Algo::ALL.len() {
                let algo = Algo::ALL[(k + rep) % Algo::ALL.len()];
                let got = mttl::spmd(
                    bcast_series,
                    (
                        plan.pattern.index(),
                        algo.index(),
                        plan.pattern.series_calls(plan.calls) as u64,
                        plan.work,
                        plan.bytes as u64,
                        plan.seed,
                    ),
                );
                series.push(series_json(rep, algo, &got, &offsets));
            }
        }
        let doc = json!({
            "pattern": plan.pattern.name(),
            "np": n,
            "backend": mttl::backend_name(),
            "clock_error_ns": offsets.iter().map(|o| o.1).max().unwrap_or(0),
            "series": series,
        });
        std::fs::write(&out, doc.to_string())
            .map_err(|e| format!("could not write the results file {}: {e}", out.display()))
    });
    if code == 0 {
        Ok(())
    } else {
        Err(BenchError::Setup {
            config: "bcast",
            detail: format!("the mttl program exited with status {code}"),
        })
    }
}

/// One series as rank 0 writes it: per call, every rank's corrected
/// (entry, exit) in seconds from the series' first entry.
#[allow(clippy::type_complexity)]
fn series_json(
    rep: usize,
    algo: Algo,
    got: &[(Vec<(u64, u64)>, Option<Progress>, Option<Progress>)],
    offsets: &[(i64, u64)],
) -> Value {
    let corrected = |r: usize, t: u64| t as i64 - offsets[r].0;
    let origin = got
        .iter()
        .enumerate()
        .filter_map(|(r, g)| g.0.first().map(|t| corrected(r, t.0)))
        .min()
        .unwrap_or(0);
    let calls = got.first().map_or(0, |g| g.0.len());
    let per_call: Vec<Value> = (0..calls)
        .map(|i| {
            let spans: Vec<[f64; 2]> = got
                .iter()
                .enumerate()
                .map(|(r, g)| {
                    let (a, b) = g.0[i];
                    [
                        (corrected(r, a) - origin) as f64 * 1e-9,
                        (corrected(r, b) - origin) as f64 * 1e-9,
                    ]
                })
                .collect();
            json!(spans)
        })
        .collect();
    let progress = |p: &Option<Progress>| {
        p.map(|(b, ph, c, lb, lp, re)| {
            json!({"broadcasts": b, "phases": ph, "changes": c, "last_change_broadcast": lb,
                   "last_change_phase": lp, "relearns": re})
        })
    };
    json!({
        "rep": rep,
        "algo": algo.name(),
        "calls": per_call,
        "progress": progress(&got[0].1),
        "progress_half": progress(&got[0].2),
    })
}
