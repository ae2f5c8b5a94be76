//! `mttl-bench trace --quick` end to end on the TCP backend: every workload
//! (NPB CG and IS class S through `npb`, the ping-pong, the matrix product
//! and the trace-heavy program) runs once per column of Table 1, and the
//! JSON document has the table's shape: every column timed, a
//! reconstructed time for every traced column (from `mttl-trace
//! reconstruct --json`), a trace for every traced run, no clock-condition
//! violation in the equalized traces, and a verdict for every target. It
//! asserts no speed.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::output_within_limit;

/// The directory of `npb` and `mttl-trace`: this package's binaries, with
/// `mttl-trace` (another package's) built there if it is missing.
fn tools() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_mttl-bench"))
        .parent()
        .expect("the binary's directory")
        .to_owned();
    if !dir.join("mttl-trace").is_file() {
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "-p", "mttl-trace", "--bin", "mttl-trace"]);
        if dir.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo runs");
        assert!(status.success(), "building mttl-trace failed");
    }
    dir
}

/// The one JSON document a successful run of `what` printed.
fn json_of(output: &std::process::Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"))
}

#[test]
fn quick_table_has_every_column_and_reconstructed_times() {
    let tools = tools();
    let output = output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
        "trace",
        "--quick",
        "--json",
        "--no-estimate",
        "--backends",
        "tcp",
        "--pingpong-iters",
        "5000",
        "--matmul",
        "64,2",
        "--heavy",
        "50,8",
        "--tools",
        tools.to_str().expect("a UTF-8 path"),
    ]));
    let doc = json_of(&output, "mttl-bench trace");
    assert_eq!(doc["benchmark"], "trace");
    let rows = doc["rows"].as_array().expect("rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["workload"].as_str()).collect();
    assert_eq!(names, ["CG S", "IS S", "pingpong", "matmul", "heavy"]);
    for row in rows {
        let name = &row["workload"];
        assert_eq!(row["backend"], "tcp");
        assert_eq!(row["ranks"], 2);
        let columns = row["columns"].as_object().expect("columns");
        let mut keys: Vec<&str> = columns.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["T", "T'", "T0", "T1", "T2", "T3", "Ta", "Tl", "Ts"],
            "{name}"
        );
        for (key, column) in columns {
            let runs = column["runs"].as_array().expect("runs");
            assert_eq!(runs.len(), 1, "{name} {key}: one repetition");
            let run = &runs[0];
            let seconds = run["seconds"].as_f64().expect("seconds");
            assert!(seconds > 0.0, "{name} {key}: {run}");
            if key == "T0" {
                assert!(
                    run["reconstructed_seconds"].is_null(),
                    "{name}: T0 is untraced"
                );
                assert_eq!(run["trace_bytes"], 0, "{name}: T0 is untraced");
                continue;
            }
            assert!(
                run["trace_bytes"].as_u64().unwrap_or(0) > 64,
                "{name} {key}: {run}"
            );
            assert!(
                run["peak_rss_bytes"].as_u64().unwrap_or(0) > 0,
                "{name} {key}"
            );
            let r = run["reconstructed_seconds"]
                .as_f64()
                .unwrap_or_else(|| panic!("{name} {key}: no reconstructed time: {run}"));
            // Reconstruction only removes time, and not all of it. R is
            // the trace's region on rank 0's clock, `seconds` the
            // program's own timer, read a little inside the region: on a
            // run of a few ms (matmul, --quick) R may exceed it by a
            // fraction of a millisecond (0.11 ms seen in CI).
            assert!(r > 0.0 && r <= seconds * 1.01 + 1e-3, "{name} {key}: {run}");
            if key.starts_with("T1") || key == "T" {
                assert_eq!(run["violations"], 0, "{name} {key}: {run}");
            }
        }
        for key in ["T1", "T2", "T3", "Ts", "Tl", "Ta", "T'"] {
            assert!(
                columns[key]["error"].as_f64().is_some(),
                "{name} {key}: no error"
            );
        }
        assert!(row["overhead"].as_f64().is_some(), "{name}");
    }
    assert!(
        rows[3]["compute_slowdown"].as_f64().is_some(),
        "matmul's compute"
    );
    // Every block product is timed on one side of the flush split: the
    // others always (a broadcast without a write precedes most), those
    // after a write when T1 wrote during the loop.
    let t1 = &rows[3]["columns"]["T1"]["runs"][0];
    assert!(t1["block_other_seconds"].as_f64().is_some(), "{t1}");
    let t = &rows[3]["columns"]["T"]["runs"][0];
    assert!(
        t["block_after_flush_seconds"].is_null(),
        "a memory run never writes during the loop: {t}"
    );
    let targets = doc["targets"].as_array().expect("targets");
    assert!(targets.len() >= 3 * rows.len(), "{targets:?}");
    assert!(targets.iter().all(|t| t["met"].is_boolean()));
}

#[test]
fn heavy_size_reaches_its_size_in_bounded_memory_with_no_violation() {
    let tools = tools();
    let output = output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
        "trace",
        "--heavy-size",
        "3M",
        "--buffer",
        "128K",
        "--heavy",
        "1,8",
        "--backends",
        "tcp",
        "--json",
        "--size-timeline",
        "--tools",
        tools.to_str().expect("a UTF-8 path"),
    ]));
    let doc = json_of(&output, "mttl-bench trace --heavy-size");
    assert_eq!(doc["mode"], "heavy-size");
    let trace = doc["trace_bytes"].as_u64().expect("trace_bytes");
    assert!(trace >= 3 << 20, "{doc}");
    assert!(
        trace >= 10 * doc["buffer_bytes"].as_u64().expect("buffer"),
        "{doc}"
    );
    assert_eq!(doc["check"]["violations_after"], 0, "{doc}");
    assert_eq!(doc["check"]["unmatched_sends"], 0, "{doc}");
    let tools: Vec<&str> = doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["command"].as_str())
        .collect();
    assert_eq!(tools, ["info", "stats", "check", "reconstruct", "timeline"]);
    for t in doc["targets"].as_array().expect("targets") {
        assert_eq!(t["met"], true, "{t}");
    }
}

#[test]
fn results_file_resumes_and_refuses_other_settings() {
    let tools = tools();
    let file =
        std::env::temp_dir().join(format!("mttl-trace-bench-results-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let run = |reps: &str| {
        output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
            "trace",
            "--quick",
            "--json",
            "--workloads",
            "heavy",
            "--heavy",
            "20,4",
            "--backends",
            "tcp",
            "--event-regions",
            "0",
            "--reps",
            reps,
            "--results",
            file.to_str().expect("a UTF-8 path"),
            "--tools",
            tools.to_str().expect("a UTF-8 path"),
        ]))
    };
    let first = run("1");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(stderr.contains("estimated duration"), "{stderr}");
    let lines = std::fs::read_to_string(&file).expect("the results file");
    assert_eq!(lines.lines().count(), 2, "{lines}");
    // Again: nothing re-run, the same table from the file.
    let second = run("1");
    let stderr2 = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{stderr2}");
    assert!(stderr2.contains("already in the results file"), "{stderr2}");
    assert!(
        !stderr2.contains("done (load"),
        "re-ran a workload: {stderr2}"
    );
    let rows = |o: &std::process::Output| -> Value {
        let doc: Value = serde_json::from_slice(&o.stdout).expect("a JSON document");
        doc["rows"].clone()
    };
    assert_eq!(rows(&first), rows(&second));
    // Other settings: refused, naming the file and line.
    let other = run("2");
    let stderr3 = String::from_utf8_lossy(&other.stderr);
    assert!(!other.status.success());
    assert!(
        stderr3.contains(&format!("{}:1:", file.display())) && stderr3.contains("other settings"),
        "{stderr3}"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn without_buffer_each_workload_gets_one_that_makes_it_flush() {
    let tools = tools();
    let output = output_within_limit(Command::new(env!("CARGO_BIN_EXE_mttl-bench")).args([
        "trace",
        "--json",
        "--no-estimate",
        "--workloads",
        "cg",
        "--class",
        "S",
        "--ranks",
        "2",
        "--backends",
        "tcp",
        "--reps",
        "1",
        "--memory-buffer",
        "64M",
        "--event-regions",
        "0",
        "--tools",
        tools.to_str().expect("a UTF-8 path"),
    ]));
    let doc = json_of(&output, "mttl-bench trace without --buffer");
    assert_eq!(doc["buffer"], "auto");
    let row = &doc["rows"][0];
    let runs = |c: &str| row["columns"][c]["runs"].as_array().expect("runs").clone();
    // A tenth of the largest rank's in-memory trace, in whole KiB.
    let largest = runs("T")[0]["largest_file_bytes"]
        .as_u64()
        .expect("largest_file_bytes");
    let buffer = row["buffer_bytes"].as_u64().expect("buffer_bytes");
    assert_eq!(buffer, (largest / 10).div_ceil(1024).max(4) * 1024, "{row}");
    // So every equalized run wrote its trace several times.
    for c in ["T1", "T2", "T3"] {
        let s = runs(c)[0]["suspensions"].as_u64().expect("suspensions");
        assert!(s >= 3, "{c}: {s} suspensions with a {buffer}-byte buffer");
    }
}
