//! The `npb-sweep` binary end to end, on the smallest sweep that has a
//! breakdown: IS class S at 1 and 2 ranks, one run each, mttl on TCP (and,
//! with the cargo feature `mpi`, mttl and mpi on MPI), not waiting for a
//! quiet machine. It must exit 0 and write both CSV files, with one row per
//! configuration and one per rank of each, the time and breakdown figures
//! as SVG and PNG, and the breakdown table in its summary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the sweep may take before the test fails.
const TIMEOUT: Duration = Duration::from_secs(300);

/// The PNG file signature.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A directory removed when the test ends, passed or not.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The (variant, backend) pairs this build can run.
fn variants() -> Vec<(&'static str, &'static str)> {
    let mut v = vec![("mttl", "tcp")];
    if cfg!(feature = "mpi") {
        v.extend([("mttl", "mpi"), ("mpi", "mpi")]);
    }
    v
}

/// Runs `npb-sweep` writing into `out`; returns its stdout.
fn sweep(out: &Path) -> String {
    let backends = if cfg!(feature = "mpi") {
        "tcp,mpi"
    } else {
        "tcp"
    };
    let stdout_path = out.with_extension("stdout");
    let stderr_path = out.with_extension("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_npb-sweep"))
        .args(["--kernels", "is", "--classes", "S", "--ranks", "1,2"])
        .args(["--variants", "mttl,mpi", "--backends", backends])
        .args(["--reps", "1", "--settle", "0", "--retries", "0"])
        .arg("--npb")
        .arg(env!("CARGO_BIN_EXE_npb"))
        .arg("--out")
        .arg(out)
        .env_remove("MTTL_NP")
        .env_remove("MTTL_RANK")
        .env_remove("MTTL_STATS")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("npb-sweep starts");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for npb-sweep") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("npb-sweep took longer than {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_file(stdout_path);
    let _ = std::fs::remove_file(stderr_path);
    assert!(
        status.success(),
        "npb-sweep: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// The rows of a CSV file under its header, split at commas.
fn csv(path: &Path, header: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "{}", path.display());
    lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

#[test]
fn sweep_writes_csv_breakdown_and_figures() {
    let dir =
        ScratchDir(std::env::temp_dir().join(format!("npb-sweep-test-{}", std::process::id())));
    let out = dir.0.join("out");
    std::fs::create_dir_all(&dir.0).expect("scratch directory");
    let stdout = sweep(&out);

    let configs = csv(
        &out.join("npb-sweep.csv"),
        "kernel,class,nprocs,variant,backend,net,runs,failures,best_seconds,mops,foreign_cpus",
    );
    assert_eq!(configs.len(), 2 * variants().len(), "{configs:?}");
    assert!(
        configs
            .iter()
            .all(|c| c[5] == "local" && c[6] == "1" && c[7] == "0"),
        "{configs:?}"
    );

    let ranks = csv(
        &out.join("npb-sweep-breakdown.csv"),
        "kernel,class,nprocs,variant,backend,net,rank,send,nsend,recv,probe,test,msgs,avg_kb,total_mb",
    );
    for (variant, backend) in variants() {
        for nprocs in [1usize, 2] {
            let rows: Vec<&Vec<String>> = ranks
                .iter()
                .filter(|r| r[..6] == ["IS", "S", &nprocs.to_string(), variant, backend, "local"])
                .collect();
            let listed: Vec<&str> = rows.iter().map(|r| r[6].as_str()).collect();
            let expected: Vec<String> = (0..nprocs).map(|r| r.to_string()).collect();
            assert_eq!(listed, expected, "{variant} on {backend}, {nprocs} ranks");
            for r in rows {
                let n = |i: usize| r[i].parse::<f64>().unwrap_or_else(|_| panic!("{r:?}"));
                assert_eq!(n(12), n(7) + n(8), "msgs = send + nsend: {r:?}");
                if nprocs == 2 {
                    assert!(n(7) + n(8) > 0.0 && n(9) > 0.0, "IS exchanges keys: {r:?}");
                    assert!(n(14) > 0.0, "{r:?}");
                }
            }
        }
    }
    assert_eq!(ranks.len(), 3 * variants().len());

    for stem in ["is-S", "is-S-breakdown"] {
        let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).expect("the SVG");
        assert!(svg.contains("NPB IS class S"), "{stem}.svg has no title");
        let png = std::fs::read(out.join(format!("{stem}.png"))).expect("the PNG");
        assert!(png.starts_with(PNG_SIGNATURE), "{stem}.png is not a PNG");
        assert!(png.len() > 10_000, "{stem}.png has {} bytes", png.len());
    }
    let breakdown = std::fs::read_to_string(out.join("is-S-breakdown.svg")).expect("the SVG");
    assert!(breakdown.contains("mttl on tcp, 2 processes"));
    assert!(
        !breakdown.contains("1 processes"),
        "one-rank runs have no panel"
    );

    assert!(stdout.contains("Communication per process"), "{stdout}");
    assert!(!stdout.contains("No stats for"), "{stdout}");
    assert!(stdout.contains("is-S-breakdown.png"), "{stdout}");
}
