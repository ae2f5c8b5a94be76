//! `mttl-bench runtime` end to end on the TCP backend: the orchestrator
//! measures the scheduler, launches its two-rank workers (an mttl program
//! and a comm-layer ping-pong), gathers their results and prints a JSON
//! document with a positive figure for every metric. A smoke test of the
//! machinery; it asserts no speed.

mod support;

use std::process::Command;

use serde_json::Value;
use support::output_within_limit;

#[test]
fn tcp_sweep_reports_positive_figures_for_every_metric() {
    let output = output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
        "runtime",
        "--backends",
        "sched,tcp,comm-tcp",
        "--reps",
        "1",
        "--sample-ms",
        "5",
        "--settle",
        "0",
        "--json",
    ]));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "mttl-bench runtime failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));

    assert_eq!(doc["benchmark"], "runtime");
    let names: Vec<&str> = doc["configs"]
        .as_array()
        .expect("a configs list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["sched", "tcp", "comm-tcp"]);

    let expected: &[(&str, &[&str])] = &[
        ("sched", &["switch", "spawn"]),
        (
            "tcp",
            &[
                "switch",
                "spawn",
                "invoke_local",
                "invoke_remote",
                "ainvoke",
                "invoke_nowait",
                "barrier",
            ],
        ),
        ("comm-tcp", &["round_trip"]),
    ];
    for (config, metrics) in expected {
        let results = doc["results"][config]
            .as_object()
            .unwrap_or_else(|| panic!("no results for {config}:\n{stdout}"));
        let mut keys: Vec<&str> = results.keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut wanted = metrics.to_vec();
        wanted.sort_unstable();
        assert_eq!(keys, wanted, "{config}'s metrics");
        for (metric, figure) in results {
            let value = figure["value"].as_f64().unwrap_or(f64::NAN);
            assert!(
                value.is_finite() && value > 0.0,
                "{config} {metric}: {value} is not a positive figure"
            );
            assert!(figure["unit"].is_string(), "{config} {metric}: no unit");
        }
    }

    let targets = doc["targets"].as_array().expect("a targets list");
    let status = |name: &str| {
        targets
            .iter()
            .find(|t| t["target"].as_str().is_some_and(|t| t.contains(name)))
            .and_then(|t| t["status"].as_str())
            .unwrap_or_else(|| panic!("no target {name:?} in {targets:?}"))
    };
    assert!(["met", "MISSED"].contains(&status("invoke round trip at most 10 µs")));
    assert_eq!(status("raw MPI"), "not measured");
    let load = doc["jobs"].as_array().expect("a jobs list");
    assert_eq!(load.len(), 3, "one entry per run: {load:?}");
}
