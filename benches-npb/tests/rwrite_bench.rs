//! `mttl-bench rwrite` end to end on the TCP backend: the orchestrator
//! launches the two-rank mttl program (nwrite + barrier windows), gathers
//! its results, prints a JSON document with a positive throughput for every
//! size, and writes the CSV file and the figure (SVG and PNG) where `--csv`
//! says; with MPI, `mpi-owned` is compared with raw MPI. Smoke tests of the
//! machinery; they assert no speed.

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use support::output_within_limit;

/// A fresh directory for this test's files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    /// `name` tells apart the tests of this process, which run at once.
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("rwrite-bench-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the scratch directory can be made");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `mttl-bench rwrite` quickly (one sweep, no settling, 5 ms samples,
/// `--json`) on `sizes` and `backends`, writing its files into `dir`;
/// returns its JSON document and what it printed.
fn rwrite_json(sizes: &str, backends: &str, dir: &std::path::Path) -> (Value, String) {
    let output = output_within_limit(
        Command::new(env!("CARGO_BIN_EXE_mttl-bench"))
            .args([
                "rwrite",
                "--sizes",
                sizes,
                "--reps",
                "1",
                "--backends",
                backends,
            ])
            .args(["--json", "--settle", "0", "--sample-ms", "5", "--csv"])
            .arg(dir),
    );
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "mttl-bench rwrite failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    (doc, stdout)
}

#[test]
fn tcp_sweep_reports_positive_throughput_and_writes_its_files() {
    let scratch = Scratch::new("tcp");
    let (doc, stdout) = rwrite_json("8,4K", "tcp", &scratch.0);

    assert_eq!(doc["benchmark"], "rwrite");
    assert_eq!(doc["configs"], serde_json::json!(["mttl-tcp"]));
    let sizes = doc["sizes"].as_array().expect("a sizes list");
    let measured: Vec<u64> = sizes.iter().filter_map(|s| s["size"].as_u64()).collect();
    assert_eq!(measured, [8, 4096]);
    for s in sizes {
        let figure = &s["mttl-tcp"];
        for field in ["mb_per_s", "issue_us", "sync_us"] {
            let value = figure[field].as_f64().unwrap_or(f64::NAN);
            assert!(
                value.is_finite() && value > 0.0,
                "size {}: {field} = {value} is not a positive figure:\n{stdout}",
                s["size"]
            );
        }
        assert!(
            figure["window"].as_u64() > Some(0),
            "size {}: no window",
            s["size"]
        );
    }
    // No reference was measured, so no target could be checked.
    let targets = doc["targets"].as_array().expect("a targets list");
    assert!(
        !targets.is_empty() && targets.iter().all(|t| t["status"] == "not measured"),
        "{stdout}"
    );

    let csv_path = scratch.0.join("rwrite.csv");
    assert_eq!(doc["files"]["csv"].as_str(), csv_path.to_str());
    let csv = std::fs::read_to_string(&csv_path).expect("the CSV file was written");
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .is_some_and(|h| h.starts_with("config,size_bytes,mb_per_s")));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "one row per size:\n{csv}");
    assert!(rows.iter().all(|r| r.starts_with("mttl-tcp,")), "{csv}");

    let svg = std::fs::read_to_string(scratch.0.join("rwrite.svg")).expect("the SVG was written");
    assert!(svg.starts_with("<svg") && svg.contains("mttl-tcp"), "{svg}");
    let png = std::fs::read(scratch.0.join("rwrite.png")).expect("the PNG was written");
    assert_eq!(
        &png[..8],
        b"\x89PNG\r\n\x1a\n",
        "the PNG has a PNG signature"
    );
}

/// The owned-write configuration next to its raw MPI reference: both are
/// measured, the ratio and the targets concern that pair.
#[cfg(feature = "mpi")]
#[test]
fn mpi_owned_is_compared_with_raw_mpi() {
    let scratch = Scratch::new("owned");
    let (doc, stdout) = rwrite_json("64K", "mpi-owned,raw-mpi", &scratch.0);
    assert_eq!(
        doc["configs"],
        serde_json::json!(["mttl-owned", "raw-mpi"]),
        "{stdout}"
    );
    let size = &doc["sizes"][0];
    let ratio = size["ratios"]["mttl-owned/raw-mpi"].as_f64();
    assert!(
        ratio.is_some_and(|r| r.is_finite() && r > 0.0),
        "no ratio:\n{stdout}"
    );
    let targets = doc["targets"].as_array().expect("a targets list");
    assert!(
        !targets.is_empty()
            && targets.iter().all(|t| t["target"]
                .as_str()
                .is_some_and(|n| n.starts_with("mttl-owned vs raw-mpi"))),
        "{stdout}"
    );
}
