//! `mttl-bench comm` end to end on the TCP backend: the orchestrator
//! launches its two-rank workers twice, gathers their results and prints a
//! JSON document with a positive round trip and bandwidth for every size.
//! A smoke test of the machinery; it asserts no speed.

mod support;

use std::process::Command;

use serde_json::Value;
use support::output_within_limit;

/// Runs `mttl-bench comm --json` with `args`; returns the JSON document
/// and the tables (stderr). Fails the test if the run fails.
fn comm_json(args: &[&str]) -> (Value, String) {
    let output = output_within_limit(
        Command::new(env!("CARGO_BIN_EXE_mttl-bench"))
            .arg("comm")
            .args(args)
            .arg("--json"),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "mttl-bench comm failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    (doc, stderr.into_owned())
}

#[test]
fn tcp_sweep_reports_positive_figures_for_every_size() {
    let (doc, _) = comm_json(&["--sizes", "8,64K", "--reps", "2", "--backends", "tcp"]);

    assert_eq!(doc["benchmark"], "comm");
    assert_eq!(doc["reps"], 2);
    let configs = doc["configs"].as_array().expect("a configs list");
    assert_eq!(configs.len(), 1, "only tcp was asked for: {configs:?}");
    assert_eq!(configs[0]["name"], "tcp");
    assert_eq!(configs[0]["backend"], "tcp");
    // Two sweeps; a run disturbed by other processes is repeated.
    let runs = configs[0]["runs"].as_u64().unwrap_or(0);
    let undisturbed = configs[0]["undisturbed_runs"].as_u64().unwrap_or(u64::MAX);
    assert!((2..=6).contains(&runs), "{runs} runs for 2 sweeps");
    assert!(
        undisturbed <= runs,
        "{undisturbed} undisturbed of {runs} runs"
    );
    let jobs = doc["jobs"].as_array().map_or(0, Vec::len) as u64;
    assert_eq!(jobs, runs, "every run is logged");

    let rows = doc["results"]["tcp"].as_array().expect("tcp results");
    let sizes: Vec<u64> = rows.iter().filter_map(|r| r["size"].as_u64()).collect();
    assert_eq!(sizes, [8, 64 << 10], "one row per size asked for, in order");
    for row in rows {
        for field in ["rtt_us", "rtt_min_us", "bw_bytes_per_s", "bw_mib_per_s"] {
            let figure = row[field].as_f64().unwrap_or(f64::NAN);
            assert!(
                figure.is_finite() && figure > 0.0,
                "size {}: {field} is {figure}, not a positive figure",
                row["size"]
            );
        }
        assert!(row["rtt_min_us"].as_f64() <= row["rtt_us"].as_f64());
    }

    let targets = doc["targets"].as_array().expect("a targets list");
    let tcp_latency = targets
        .iter()
        .find(|t| {
            t["target"]
                .as_str()
                .is_some_and(|n| n.contains("at most 10 µs"))
        })
        .expect("the TCP 8 B round-trip target is judged");
    assert!(
        tcp_latency["status"] == "met" || tcp_latency["status"] == "MISSED",
        "8 B was measured, so the target is judged: {tcp_latency}"
    );
}

#[test]
#[cfg_attr(
    feature = "mpi",
    ignore = "built with MPI, raw-mpi is a valid configuration: nothing to refuse \
              (run it from a build without the mpi feature)"
)]
fn mpi_configurations_need_the_mpi_feature() {
    let output = output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
        "comm",
        "--sizes",
        "8",
        "--reps",
        "1",
        "--backends",
        "raw-mpi",
    ]));
    assert!(
        !output.status.success(),
        "raw-mpi without the mpi feature must fail"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--features mpi"),
        "the error says how to rebuild: {stderr}"
    );
}

/// `mpi-vs-raw`: one MPI job runs mttl's MPI backend and raw rsmpi in
/// turns; the document has both stacks' ratio per size, and the 4 KiB
/// target is judged on it when the separate jobs were not run.
#[cfg(feature = "mpi")]
#[test]
fn mpi_vs_raw_in_one_job_reports_a_ratio_per_size() {
    let (doc, stderr) = comm_json(&[
        "--sizes",
        "8,16K",
        "--reps",
        "1",
        "--backends",
        "mpi-vs-raw",
    ]);
    let stdout = doc.to_string();
    let configs = doc["configs"].as_array().expect("a configs list");
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(configs[0]["name"], "mpi-vs-raw");
    assert_eq!(configs[0]["backend"], "mpi", "the backend ran under mpirun");

    let rows = doc["paired"]["mpi-vs-raw"]
        .as_array()
        .unwrap_or_else(|| panic!("no one-job ratios:\n{stdout}"));
    let sizes: Vec<u64> = rows.iter().filter_map(|r| r["size"].as_u64()).collect();
    assert_eq!(sizes, [8, 16 << 10], "{stdout}");
    for row in rows {
        for field in ["rtt_ratio", "bw_ratio"] {
            let ratio = row[field].as_f64().unwrap_or(f64::NAN);
            assert!(
                ratio.is_finite() && ratio > 0.0,
                "size {}: {field} is {ratio}",
                row["size"]
            );
        }
        assert_eq!(row["jobs"], 1);
    }
    let judged = doc["targets"]
        .as_array()
        .expect("a targets list")
        .iter()
        .find(|t| {
            t["target"]
                .as_str()
                .is_some_and(|n| n.contains("within 5%"))
        })
        .cloned()
        .expect("the 4 KiB target is listed");
    assert!(
        ["met", "MISSED", "unresolved"].contains(&judged["status"].as_str().unwrap_or("")),
        "16K was measured in one job, so the target is judged: {judged}"
    );
    assert!(
        stderr.contains("1 job"),
        "the tables have the column:\n{stderr}"
    );
}
