//! Step 4 of the [orchestration](super): what each scenario's results file
//! must say, checked here against checksums this process computes itself
//! (`pattern`), the memory bounds, and the table or JSON document that
//! shows both.
//!
//! Memory bounds, with `tol` = `--rss-tolerance-mib`:
//!
//! - `ainvoke`: each rank's resident set after the last round is at most
//!   `tol` above its value after the first;
//! - `threads`: the resident set of rank 1 with all threads blocked, and
//!   after they ended, is at most `tol` above the first round's;
//! - `transfer`: the receiver's peak is at most its resident set before
//!   plus the data plus 4 chunks plus `tol`; the sender's at most its
//!   resident set before plus 4 chunks plus `tol`;
//! - `soak`: after the warm-up rounds no rank's resident set rises more
//!   than `tol` above its warm-up maximum.

use serde_json::{json, Value};

use super::memory::mib;
use super::{pattern, worker, LoadArgs, Plan, Scenario};
use crate::bench::sweep::report::push_how_measured;
use crate::bench::sweep::BUSY_WARNING;

/// One check and whether it held.
#[derive(Debug, Clone)]
struct Check {
    what: String,
    ok: bool,
    detail: String,
}

/// One scenario's results and the checks made on them.
#[derive(Debug, Clone)]
pub(super) struct ScenarioReport {
    pub(super) scenario: Scenario,
    results: Value,
    checks: Vec<Check>,
    /// CPUs other processes kept busy while the job ran.
    busy: Option<f64>,
}

impl ScenarioReport {
    pub(super) fn new(
        scenario: Scenario,
        plan: &Plan,
        results: Value,
        busy: Option<f64>,
    ) -> ScenarioReport {
        let mut checks = Vec::new();
        let failures = results["failures"].as_array().cloned().unwrap_or_default();
        checks.push(Check {
            what: "the ranks' own checks".into(),
            ok: failures.is_empty(),
            detail: if failures.is_empty() {
                "none failed".to_owned()
            } else {
                failures
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            },
        });
        match scenario {
            Scenario::Ainvoke => check_ainvoke(&results, plan, &mut checks),
            Scenario::Threads => check_threads(&results, plan, &mut checks),
            Scenario::Transfer => check_transfer(&results, plan, &mut checks),
            Scenario::Soak => check_soak(&results, plan, &mut checks),
        }
        ScenarioReport {
            scenario,
            results,
            checks,
            busy,
        }
    }

    /// Whether every check held.
    pub(super) fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario.name(),
            "passed": self.passed(),
            "checks": self.checks.iter()
                .map(|c| json!({"check": c.what, "ok": c.ok, "detail": c.detail}))
                .collect::<Vec<_>>(),
            "busy_cpus_during": self.busy,
            "results": self.results,
        })
    }
}

fn u64_at(v: &Value) -> u64 {
    v.as_u64().unwrap_or_default()
}

fn f64_at(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn u64_list(v: &Value) -> Vec<u64> {
    v.as_array()
        .map(|a| a.iter().map(u64_at).collect())
        .unwrap_or_default()
}

fn equal_check(what: &str, got: u64, want: u64) -> Check {
    Check {
        what: what.to_owned(),
        ok: got == want,
        detail: format!("{got:#x}, expected {want:#x}"),
    }
}

/// `later` at most `tol_kib` above `first`.
fn growth_check(what: String, first: u64, later: u64, tol_kib: u64) -> Check {
    Check {
        what,
        ok: later <= first + tol_kib,
        detail: format!(
            "{:.1} MiB -> {:.1} MiB (tolerance +{:.0} MiB)",
            mib(first),
            mib(later),
            mib(tol_kib)
        ),
    }
}

fn check_ainvoke(r: &Value, plan: &Plan, checks: &mut Vec<Check>) {
    let served = r["served"].as_array().cloned().unwrap_or_default();
    let (want_served, want_replies) =
        pattern::ainvoke_expected(served.len(), plan.ainvokes, plan.seed);
    for (rank, (got, want)) in served.iter().zip(&want_served).enumerate() {
        let (calls, sum) = (u64_at(&got["calls"]), u64_at(&got["sum"]));
        checks.push(Check {
            what: format!("rank {rank} served every call made to it, once"),
            ok: (calls, sum) == *want,
            detail: format!(
                "{calls} calls summing to {sum:#x}, expected {} summing to {:#x}",
                want.0, want.1
            ),
        });
    }
    checks.push(equal_check(
        "every reply came back right (reply checksum)",
        u64_at(&r["reply_checksum"]),
        want_replies,
    ));
    let tol = plan.rss_tolerance_mib * 1024;
    for (rank, rounds) in r["rss_by_round_kib"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let rounds = u64_list(rounds);
        if let (Some(&first), Some(&last)) = (rounds.first(), rounds.last()) {
            checks.push(growth_check(
                format!("rank {rank}'s memory did not grow from the first round to the last"),
                first,
                last,
                tol,
            ));
        }
    }
}

fn check_threads(r: &Value, plan: &Plan, checks: &mut Vec<Check>) {
    let (want_local, want_remote) = pattern::threads_expected(plan.threads, plan.seed);
    let runs = r["runs"].as_array().cloned().unwrap_or_default();
    for (i, run) in runs.iter().enumerate() {
        for (half, want) in [("local", want_local), ("remote", want_remote)] {
            let live = u64_at(&run[half]["live_threads"]);
            checks.push(Check {
                what: format!(
                    "round {}: {} {half} threads were live at once",
                    i + 1,
                    plan.threads
                ),
                ok: live >= plan.threads,
                detail: format!("{live} live threads on rank 1"),
            });
            checks.push(equal_check(
                &format!("round {}: every {half} thread returned its result", i + 1),
                u64_at(&run[half]["checksum"]),
                want,
            ));
        }
    }
    let tol = plan.rss_tolerance_mib * 1024;
    if let (Some(first), Some(last)) = (runs.first(), runs.last()) {
        for (what, path) in [
            ("with all local threads blocked", ("local", "rss_live_kib")),
            ("after the local threads ended", ("local", "rss_after_kib")),
            ("with all remote threads parked", ("remote", "rss_live_kib")),
        ] {
            checks.push(growth_check(
                format!("rank 1's memory {what} did not grow from the first round to the last"),
                u64_at(&first[path.0][path.1]),
                u64_at(&last[path.0][path.1]),
                tol,
            ));
        }
    }
}

fn check_transfer(r: &Value, plan: &Plan, checks: &mut Vec<Check>) {
    let want = pattern::transfer_expected(plan.bytes, plan.seed);
    for (phase, what) in [
        ("write", "the receiver's checksum of the data written"),
        ("read", "the checksum of the data read back"),
        ("invoke", "the callee's checksum of the invoke arguments"),
    ] {
        checks.push(equal_check(what, u64_at(&r[phase]["checksum"]), want));
    }
    let before = u64_list(&r["rss_before_kib"]);
    let memory = r["memory"].as_array().cloned().unwrap_or_default();
    let (chunk_kib, data_kib, tol) = (
        plan.chunk.min(plan.bytes) / 1024,
        plan.bytes / 1024,
        plan.rss_tolerance_mib * 1024,
    );
    for (rank, what, held) in [(0, "sender", 0), (1, "receiver", data_kib)] {
        let base = before.get(rank).copied().unwrap_or_default();
        let peak = u64_at(&memory.get(rank).cloned().unwrap_or_default()["peak_kib"]);
        let bound = base + held + 4 * chunk_kib + tol;
        checks.push(Check {
            what: format!("the {what}'s (rank {rank}) peak memory stayed within its bound"),
            ok: peak <= bound,
            detail: format!(
                "peak {:.1} MiB, bound {:.1} MiB (before {:.1} + data held {:.1} + 4 chunks \
                 + tolerance)",
                mib(peak),
                mib(bound),
                mib(base),
                mib(held)
            ),
        });
    }
}

fn check_soak(r: &Value, plan: &Plan, checks: &mut Vec<Check>) {
    let rounds = r["rounds"].as_array().cloned().unwrap_or_default();
    checks.push(Check {
        what: "the soak ran at least one round".into(),
        ok: !rounds.is_empty(),
        detail: format!("{} rounds", rounds.len()),
    });
    let by_round: Vec<Vec<u64>> = rounds.iter().map(|x| u64_list(&x["rss_kib"])).collect();
    let tol = (plan.rss_tolerance_mib * 1024) as i64;
    for (rank, g) in worker::rss_growth(&by_round).into_iter().enumerate() {
        checks.push(Check {
            what: format!("rank {rank}'s memory did not grow after the warm-up rounds"),
            ok: g <= tol,
            detail: format!(
                "{:+.1} MiB over the warm-up maximum (tolerance +{} MiB)",
                g as f64 / 1024.0,
                plan.rss_tolerance_mib
            ),
        });
    }
}

/// The one-line summary and detail lines of a scenario's figures.
fn figures(rep: &ScenarioReport) -> (String, Vec<String>) {
    let r = &rep.results;
    match rep.scenario {
        Scenario::Ainvoke => {
            let last_round: Vec<String> = r["rss_by_round_kib"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|rounds| format!("{:.1}", mib(u64_list(rounds).last().copied().unwrap_or(0))))
                .collect();
            (
                format!(
                    "{} calls in {:.2} s: {:.0} calls/s",
                    r["calls"],
                    f64_at(&r["seconds"]),
                    f64_at(&r["rate_per_s"])
                ),
                vec![
                    format!(
                        "{} rounds, at most {} calls in flight per rank, every rank calling every \
                         other",
                        r["rounds"], r["window"]
                    ),
                    format!(
                        "RSS MiB by rank after the last round: {}",
                        last_round.join(" ")
                    ),
                ],
            )
        }
        Scenario::Threads => {
            let runs = r["runs"].as_array().cloned().unwrap_or_default();
            let last = runs.last().cloned().unwrap_or_default();
            let (l, m) = (&last["local"], &last["remote"]);
            (
                format!(
                    "{} threads live at once on rank 1, {} KiB stacks",
                    r["threads"],
                    u64_at(&r["stack_size"]) / 1024
                ),
                vec![
                    format!(
                        "spawned there: {} live; spawn and block {:.3} s, wake and collect {:.3} \
                         s; RSS {:.1} MiB blocked, {:.1} MiB after (before: {:.1})",
                        l["live_threads"],
                        f64_at(&l["spawn_seconds"]),
                        f64_at(&l["wake_seconds"]),
                        mib(u64_at(&l["rss_live_kib"])),
                        mib(u64_at(&l["rss_after_kib"])),
                        mib(u64_at(&r["rss_before_kib"]))
                    ),
                    format!(
                        "made by ainvokes from rank 0: {} live; park {:.3} s, release and collect \
                         {:.3} s; RSS {:.1} MiB parked",
                        m["live_threads"],
                        f64_at(&m["park_seconds"]),
                        f64_at(&m["release_seconds"]),
                        mib(u64_at(&m["rss_live_kib"]))
                    ),
                    format!("figures of round {} of {}", runs.len(), r["rounds"]),
                ],
            )
        }
        Scenario::Transfer => {
            let gbs = |phase: &str| f64_at(&r[phase]["bytes_per_s"]) / 1e9;
            (
                format!(
                    "{:.0} MiB rank 0 -> 1: write {:.2} GB/s, read {:.2} GB/s, invoke {:.2} GB/s",
                    mib(u64_at(&r["bytes"]) / 1024),
                    gbs("write"),
                    gbs("read"),
                    gbs("invoke")
                ),
                vec![format!(
                    "in chunks of {:.0} MiB; write_slice into a global array, read_slice back, \
                     invoke with a Vec<u8> argument; time of the transfers only",
                    mib(u64_at(&r["chunk"]) / 1024)
                )],
            )
        }
        Scenario::Soak => {
            let rounds = r["rounds"].as_array().cloned().unwrap_or_default();
            let mut lines = vec![format!(
                "each round: {} ainvokes, {} threads twice, {} MiB three ways",
                r["round_sizes"]["ainvokes"],
                r["round_sizes"]["threads"],
                mib(u64_at(&r["round_sizes"]["bytes"]) / 1024)
            )];
            let mut minute = 1.0;
            let mut elapsed = 0.0;
            for round in &rounds {
                elapsed += f64_at(&round["seconds"]);
                if elapsed >= minute * 60.0 {
                    let rss: Vec<String> = u64_list(&round["rss_kib"])
                        .into_iter()
                        .map(|k| format!("{:.1}", mib(k)))
                        .collect();
                    lines.push(format!(
                        "after {:.0} min (round {}): RSS MiB by rank {}",
                        elapsed / 60.0,
                        u64_at(&round["round"]) + 1,
                        rss.join(" ")
                    ));
                    minute = (elapsed / 60.0).floor() + 1.0;
                }
            }
            (
                format!(
                    "{} rounds in {:.0} s: {} ainvokes, {} thread lifetimes, {:.1} GiB moved",
                    rounds.len(),
                    f64_at(&r["seconds"]),
                    r["totals"]["ainvokes"],
                    r["totals"]["thread_lifetimes"],
                    u64_at(&r["totals"]["bytes_moved"]) as f64 / f64::from(1u32 << 30)
                ),
                lines,
            )
        }
    }
}

/// How the load test ran, one sentence per line.
fn method(args: &LoadArgs) -> Vec<String> {
    vec![
        format!(
            "Each scenario is a fresh job of {} ranks on the {} backend; peak is VmHWM, RSS is \
             VmRSS from /proc/self/status of each rank.",
            args.np, args.backend
        ),
        "The data is a function of the seed, so this process computes every expected count \
         and checksum itself and compares it with what the receivers observed."
            .into(),
        format!(
            "MTTL_STACK_SIZE={}, MTTL_EAGER_LIMIT={}.",
            std::env::var("MTTL_STACK_SIZE").unwrap_or_else(|_| "256K (default)".into()),
            std::env::var("MTTL_EAGER_LIMIT").unwrap_or_else(|_| "65536 (default)".into())
        ),
    ]
}

/// The JSON document of `--json`.
pub(super) fn to_json(args: &LoadArgs, reports: &[ScenarioReport]) -> Value {
    json!({
        "benchmark": "load",
        "np": args.np,
        "backend": args.backend.to_string(),
        "passed": reports.iter().all(ScenarioReport::passed),
        "scenarios": reports.iter().map(ScenarioReport::to_json).collect::<Vec<_>>(),
        "method": method(args),
    })
}

/// The table of the default output.
pub(super) fn text(args: &LoadArgs, reports: &[ScenarioReport]) -> String {
    let mut out = format!(
        "mttl load test: {} ranks on the {} backend\n",
        args.np, args.backend
    );
    for rep in reports {
        let (summary, lines) = figures(rep);
        out.push_str(&format!(
            "\n{:<9} {summary}  [{}]\n",
            rep.scenario.name(),
            if rep.passed() { "ok" } else { "FAILED" }
        ));
        for line in lines {
            out.push_str(&format!("          {line}\n"));
        }
        let peaks: Vec<String> = rep.results["memory"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| format!("{:.1}", mib(u64_at(&m["peak_kib"]))))
            .collect();
        out.push_str(&format!(
            "          peak RSS MiB by rank: {}\n",
            peaks.join(" ")
        ));
        if let Some(b) = rep.busy.filter(|&b| b >= BUSY_WARNING) {
            out.push_str(&format!(
                "          (other processes kept {b:.1} CPUs busy meanwhile)\n"
            ));
        }
        for c in &rep.checks {
            out.push_str(&format!(
                "          {} {}: {}\n",
                if c.ok { "ok    " } else { "FAILED" },
                c.what,
                c.detail
            ));
        }
    }
    push_how_measured(&mut out, &method(args), &[]);
    out
}
