//! The cluster study as one command, kept small: `npb-sweep --net
//! 100base-t --hosts 1,2` for CG class S, the `mttl` variant on both
//! backends and the `mpi` variant (which needs the MPI backend), one run
//! each:
//!
//! 1. build `mttlrun`, `npb`, `npb-sweep` and `mttl-bench` (with MPI) in
//!    this test's profile, beside `mttl-netlab`, where `npb-sweep` finds
//!    them;
//! 2. run the sweep (it brings the lab up, checks it, runs every point
//!    across the hosts and brings the lab down);
//! 3. its CSV has the `net` column and a verified row for each point, its
//!    breakdown CSV every rank of the 2-host points (so `MTTL_STATS`
//!    reached ranks on the other host on both backends), and the check's
//!    output and the split figure are written;
//!    and `mttl-bench rwrite` measured remote writes between the hosts;
//! 4. the lab is down afterwards (no namespace, no state).
//!
//! And a sweep interrupted while a point runs across the lab, by `SIGINT`
//! to its process group (Ctrl-C) or to it alone, exits with 128 + SIGINT
//! with the lab down and the point ended.
//!
//! Needs root, iproute2 and Open MPI; ignored, with the reason in its
//! attribute; `scripts/test-all` runs it as root.
#![cfg(target_os = "linux")]

// This test brings up no lab itself and checks none: it uses part of it.
#[allow(dead_code)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use support::{lab_namespaces, netlab, output_within, take_lab, text};

/// How long the sweep may take: 6 runs of CG S (1-3 s each in a release
/// build, ~10 s unoptimised), the lab's `up` and `check` (~10 s), and the
/// quiet-machine waits (at most 5 s before each run here).
const SWEEP_LIMIT: Duration = Duration::from_secs(600);

/// Step 1: the directory holding this test's profile's binaries.
fn built_programs() -> PathBuf {
    let netlab = PathBuf::from(env!("CARGO_BIN_EXE_mttl-netlab"));
    let dir = netlab
        .parent()
        .expect("mttl-netlab lies in target/<profile>")
        .to_path_buf();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args(["build", "--quiet", "-p", "mttl-comm", "-p", "benches-npb"])
        .args(["--all-features", "--bin", "mttlrun", "--bin", "npb"])
        .args(["--bin", "npb-sweep", "--bin", "mttl-bench"])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .arg("--target-dir")
        .arg(
            dir.parent()
                .expect("the profile is in the target directory"),
        );
    if dir.ends_with("release") {
        cargo.arg("--release");
    }
    let status = cargo.status().expect("cargo runs");
    assert!(
        status.success(),
        "building mttlrun, npb and npb-sweep: {status}"
    );
    dir
}

/// The rows of a CSV file under its header, split at commas.
fn csv(path: &Path, header: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(header), "{}", path.display());
    lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
#[ignore = "needs root, network namespaces and Open MPI: cargo test -p mttl-netlab --all-features --test npb_sweep_net -- --ignored"]
fn npb_sweep_runs_cg_across_lab_hosts_and_brings_the_lab_down() {
    let dir = built_programs();
    let out_dir = std::env::temp_dir().join(format!("npb-sweep-net-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let lab = take_lab();
    let sweep = output_within(
        Command::new(dir.join("npb-sweep"))
            .args(["--net", "100base-t", "--hosts", "1,2"])
            .args(["--kernels", "cg", "--classes", "S"])
            .args(["--variants", "mttl,mpi", "--backends", "tcp,mpi"])
            .args(["--reps", "1", "--settle", "5", "--retries", "0"])
            .arg("--out")
            .arg(&out_dir),
        SWEEP_LIMIT,
    );
    let printed = text(&sweep);
    // Step 4 before anything else can fail: the sweep's own `down`.
    assert!(
        lab_namespaces().is_empty() && !Path::new("/run/mttl-netlab").exists(),
        "the lab is still up after the sweep ({:?}): {printed}",
        lab_namespaces()
    );
    drop(lab);
    assert!(sweep.status.success(), "{printed}");
    assert!(printed.contains("The sweep took"), "{printed}");
    assert!(printed.contains("share this machine's"), "{printed}");

    let configs = csv(
        &out_dir.join("npb-sweep.csv"),
        "kernel,class,nprocs,variant,backend,net,runs,failures,best_seconds,mops,foreign_cpus",
    );
    let mut points: Vec<String> = configs
        .iter()
        .map(|c| format!("{} {} {}", c[2], c[3], c[4]))
        .collect();
    points.sort();
    assert_eq!(
        points,
        [
            "1 mpi mpi",
            "1 mttl mpi",
            "1 mttl tcp",
            "2 mpi mpi",
            "2 mttl mpi",
            "2 mttl tcp"
        ],
        "{printed}"
    );
    for c in &configs {
        assert_eq!(c[..2], ["CG", "S"], "{c:?}");
        assert_eq!(c[5], "100base-t", "{c:?}");
        assert_eq!(
            (c[6].as_str(), c[7].as_str()),
            ("1", "0"),
            "verified: {c:?}"
        );
        assert!(c[8].parse::<f64>().is_ok_and(|t| t > 0.0), "{c:?}");
    }

    let ranks = csv(
        &out_dir.join("npb-sweep-breakdown.csv"),
        "kernel,class,nprocs,variant,backend,net,rank,send,nsend,recv,probe,test,msgs,avg_kb,total_mb",
    );
    for (variant, backend) in [("mttl", "tcp"), ("mttl", "mpi"), ("mpi", "mpi")] {
        let listed: Vec<&str> = ranks
            .iter()
            .filter(|r| r[2..6] == ["2", variant, backend, "100base-t"])
            .map(|r| r[6].as_str())
            .collect();
        assert_eq!(listed, ["0", "1"], "{variant} on {backend}: {printed}");
    }
    let check = std::fs::read_to_string(out_dir.join("netlab-check-100base-t.txt"))
        .expect("the check's output is kept");
    assert!(check.contains("bandwidth:"), "{check}");
    for figure in ["cg-S.svg", "cg-S-breakdown.svg", "cg-S-split.svg"] {
        let svg = std::fs::read_to_string(out_dir.join(figure))
            .unwrap_or_else(|e| panic!("{figure}: {e}"));
        assert!(svg.contains("100base-t"), "{figure} names the network");
    }
    let rwrite = csv(
        &out_dir.join("rwrite-100base-t.csv"),
        "config,size_bytes,mb_per_s,reference,ratio,issue_us,sync_us_per_window,window,windows_per_sample",
    );
    assert!(
        rwrite.iter().any(
            |r| r[..2] == ["mttl-tcp", "1048576"] && r[2].parse::<f64>().is_ok_and(|v| v > 0.0)
        ),
        "{rwrite:?}"
    );
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
#[ignore = "needs root, network namespaces and Open MPI: cargo test -p mttl-netlab --all-features --test npb_sweep_net -- --ignored"]
fn an_interrupted_sweep_brings_its_lab_down() {
    let dir = built_programs();
    let lab = take_lab();
    // Ctrl-C in a terminal: the sweep's whole process group, points included.
    interrupt_a_running_point(&dir, true);
    // `kill -INT` to the sweep alone: it must end the running point itself.
    interrupt_a_running_point(&dir, false);
    drop(lab);
}

/// Starts a sweep, sends it `SIGINT` once a point runs across the lab (to
/// its process group when `group`, else to it alone) and checks that it
/// exits with 128 + SIGINT, the lab down and no point left running.
fn interrupt_a_running_point(dir: &Path, group: bool) {
    use std::os::unix::process::CommandExt;
    let out_dir =
        std::env::temp_dir().join(format!("npb-sweep-int-{}-{group}", std::process::id()));
    let npb = dir.join("npb");
    let mut command = Command::new(dir.join("npb-sweep"));
    command
        .args(["--net", "100base-t", "--hosts", "2", "--kernels", "cg"])
        .args([
            "--classes",
            "A",
            "--reps",
            "1",
            "--settle",
            "0",
            "--no-rwrite",
        ])
        .arg("--out")
        .arg(&out_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    if group {
        // Its own group, as a shell's job would be.
        command.process_group(0);
    }
    let mut sweep = command.spawn().expect("npb-sweep starts");
    let start = Instant::now();
    while running(&npb).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "no point started within 3 minutes"
        );
        assert!(
            sweep.try_wait().expect("waiting").is_none(),
            "npb-sweep ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    let target = if group {
        -(sweep.id() as libc::pid_t)
    } else {
        sweep.id() as libc::pid_t
    };
    // SAFETY: signalling the child this test started (or its own group).
    unsafe { libc::kill(target, libc::SIGINT) };
    let out = sweep.wait_with_output().expect("npb-sweep ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let how = if group { "its group" } else { "it alone" };
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGINT),
        "SIGINT to {how}: {stderr}"
    );
    assert!(
        stderr.contains("the lab is down"),
        "SIGINT to {how}: {stderr}"
    );
    assert!(
        lab_namespaces().is_empty() && !Path::new("/run/mttl-netlab").exists(),
        "SIGINT to {how}: the lab is still up ({:?}): {stderr}\n{}",
        lab_namespaces(),
        text(&netlab(&["status"]))
    );
    let start = Instant::now();
    while !running(&npb).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "SIGINT to {how}: points still running: {:?}",
            running(&npb)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The processes running `program`.
fn running(program: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == program)
        })
        .collect()
}
