//! The plumbing of measure (c) of the prediction issue (prediction against
//! measurement; the figures are in `docs/benchmarks.md`): a recorded run of
//! NPB IS class S on 2 ranks (TCP) is exported as a time-independent trace
//! and simulated with LogGOPS parameters fitted (`mttl_sim::fit`, what
//! `mttl-sim --params-from` does) to a `mttl-bench comm --json` document,
//! beside the run's measured (reconstructed) time. The test checks the path,
//! not the accuracy: the run is measured, the fit reads the document, the
//! simulation ends without a deadlock, never before any rank's own
//! computation, and a slower network, fitted from a slower document, gives
//! a later finish.
//!
//! `npb` is `benches-npb`'s binary, which `cargo test --workspace` builds
//! (run `cargo build -p benches-npb` first when running this test alone).

// This file runs a binary, not scenarios of its own.
#[allow(unused_macros, unused_imports)]
mod runtime_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mttl::comm::env as launch_env;
use mttl_trace::{TiOp, TiTrace};

const DEADLINE: Duration = Duration::from_secs(300);

fn tmp(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mttl-pvm-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A `mttl-bench comm --json` document with one configuration, `tcp`:
/// round trips of `rtt_us` at 8 bytes and twice that at 64 KiB, and a
/// streaming bandwidth of `bw` bytes/s.
fn comm_json(rtt_us: f64, bw: f64) -> String {
    format!(
        r#"{{"benchmark": "comm", "results": {{"tcp": [
            {{"size": 8, "rtt_us": {rtt_us}, "bw_bytes_per_s": {}}},
            {{"size": 65536, "rtt_us": {}, "bw_bytes_per_s": {bw}}}
        ]}}}}"#,
        bw / 100.0,
        2.0 * rtt_us
    )
}

/// The finish time (ns) of `sched` under the parameters fitted to `doc`.
fn predicted(sched: &mttl_sim::Schedule, doc: &str, what: &str) -> u64 {
    let file = tmp(what).with_extension("json");
    std::fs::write(&file, doc).unwrap();
    let fit = mttl_sim::fit::from_file(&file, Some("tcp"), mttl_sim::Params::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&file);
    let report = mttl_sim::simulate(sched, &fit.params);
    assert!(report.deadlock.is_none(), "{what}: {:?}", report.deadlock);
    report.max.0
}

#[test]
fn a_recorded_run_is_simulated_with_parameters_fitted_to_a_comm_benchmark() {
    let bin = runtime_support::built_binary(
        "",
        "npb",
        "build benches-npb (`cargo build -p benches-npb`, same profile) first",
    );
    let trace = tmp("is-2");
    let mut cmd = Command::new(&bin);
    cmd.args(["is", "--class", "S", "-n", "2", "--backend", "tcp"]);
    for var in [
        launch_env::RANK,
        launch_env::SIZE,
        launch_env::ROOT,
        launch_env::SECRET,
        launch_env::TAG_OUTPUT,
        launch_env::BACKEND,
    ] {
        cmd.env_remove(var);
    }
    cmd.env("MTTL_TRACE", &trace)
        .env("MTTL_AGGREGATE", "0")
        .env("MTTL_TRACE_FLUSH", "local")
        .env("RUST_BACKTRACE", "0");
    runtime_support::run_captured("npb is S (2 ranks)", cmd, DEADLINE).assert_success();
    let t = mttl_trace::read_dir(&trace).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&trace);
    let measured = mttl_trace::reconstruct(&t).run_time;
    assert!(measured > 0, "the run has a measured time");

    let ti = TiTrace::from_trace(&t);
    let computation: Vec<u64> = ti
        .ranks
        .iter()
        .map(|ops| {
            ops.iter()
                .map(|op| match op {
                    TiOp::Calc(ns) => *ns,
                    _ => 0,
                })
                .sum()
        })
        .collect();
    let dir = tmp("is-2-ti");
    ti.write_dir(&dir).unwrap();
    let sched = mttl_sim::input::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);

    let fast = predicted(&sched, &comm_json(20.0, 1e9), "fast");
    let slow = predicted(&sched, &comm_json(2000.0, 1e7), "slow");
    let longest = computation.iter().copied().max().unwrap_or(0);
    assert!(
        fast >= longest,
        "predicted {fast} ns, before a rank's own computation of {longest} ns"
    );
    assert!(
        slow > fast,
        "a network 100 times slower predicts {slow} ns, not more than {fast} ns"
    );
}
