//! The smoke test of the cluster study: two lab hosts on 100Base-T, the
//! check's bandwidth met, and NPB CG class S on 2 ranks, one per host,
//! verified on both backends:
//!
//! 1. build `mttlrun` and `npb` (with MPI) in this test's profile, if they
//!    are not built already;
//! 2. `up --hosts 2 --profile 100base-t --wire user`, then `check` until
//!    the bandwidth is met (3 checks at most, as in `lab_cycle`);
//! 3. from inside `mttl-h0` (`mttl-netlab exec`, which names `mttl-netlab
//!    rsh` as the remote shell of `mttlrun` and Open MPI's `mpirun`):
//!    `mttlrun -n 2 --hosts mttl-h0,mttl-h1 -- npb cg --class S`, on TCP,
//!    then with `--backend mpi`; each must verify, say its backend, and
//!    have crossed the wire (its frame counter grew);
//! 4. `down`, also when a step failed (the taken lab's `Drop`).
//!
//! Needs root, iproute2 and Open MPI; ignored, with the reason in its
//! attribute; `scripts/test-all` runs it as root.
#![cfg(target_os = "linux")]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::{
    bandwidth_met, check_until_bandwidth_met, netlab, output_within, take_lab, text, TWO_HOSTS,
};

/// How long one CG class S job may take across the lab (it takes 1-3 s in
/// a release build, ~10 s unoptimised, on a loaded 2-core machine).
const JOB_LIMIT: Duration = Duration::from_secs(120);

/// Step 1: the directory holding this test's profile's binaries, with
/// `mttlrun` and `npb` built there.
fn built_programs() -> PathBuf {
    let netlab = PathBuf::from(env!("CARGO_BIN_EXE_mttl-netlab"));
    let dir = netlab
        .parent()
        .expect("mttl-netlab lies in target/<profile>")
        .to_path_buf();
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args([
            "build",
            "--quiet",
            "-p",
            "mttl-comm",
            "-p",
            "benches-npb",
            "--all-features",
            "--bin",
            "mttlrun",
            "--bin",
            "npb",
        ])
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
    assert!(status.success(), "building mttlrun and npb: {status}");
    dir
}

/// Frames the wire has carried so far (its counters, written every second).
fn wire_frames() -> u64 {
    std::thread::sleep(Duration::from_millis(1100));
    let stats = std::fs::read_to_string("/run/mttl-netlab/wire.stats").unwrap_or_default();
    stats
        .split_whitespace()
        .find_map(|f| f.strip_prefix("frames=")?.parse().ok())
        .unwrap_or(0)
}

/// Step 3 for one backend.
fn cg_s_across_hosts(dir: &std::path::Path, backend: &str) {
    let before = wire_frames();
    let out = output_within(
        Command::new(env!("CARGO_BIN_EXE_mttl-netlab"))
            .args(["exec", "mttl-h0", "--"])
            .arg(dir.join("mttlrun"))
            .args(["-n", "2", "--backend", backend])
            .args(["--hosts", "mttl-h0,mttl-h1", "--"])
            .arg(dir.join("npb"))
            .args(["cg", "--class", "S"]),
        JOB_LIMIT,
    );
    let after = wire_frames();
    let printed = text(&out);
    assert!(out.status.success(), "CG S on {backend}: {printed}");
    let field = |name: &str| {
        printed
            .lines()
            .find(|l| l.trim_start().starts_with(name))
            .and_then(|l| l.split('=').nth(1))
            .map(|v| v.trim().to_string())
    };
    assert_eq!(
        field("Verification").as_deref(),
        Some("SUCCESSFUL"),
        "{printed}"
    );
    assert_eq!(field("Comm backend").as_deref(), Some(backend), "{printed}");
    assert_eq!(field("Total processes").as_deref(), Some("2"), "{printed}");
    // CG S on 2 ranks exchanges ~5 MB: thousands of frames.
    assert!(
        after > before + 1000,
        "CG S on {backend} did not cross the wire ({before} -> {after} frames): {printed}"
    );
}

#[test]
#[ignore = "needs root, network namespaces and Open MPI: cargo test -p mttl-netlab --all-features --test npb_across_hosts -- --ignored"]
fn cg_class_s_verifies_across_two_lab_hosts_on_both_backends() {
    let dir = built_programs();
    let _lab = take_lab();
    let up = netlab(&TWO_HOSTS);
    assert!(up.status.success(), "{}", text(&up));
    let checks = check_until_bandwidth_met();
    let last = checks.last().expect("one check at least");
    assert!(bandwidth_met(last), "{}", checks.join("\n---\n"));
    cg_s_across_hosts(&dir, "tcp");
    cg_s_across_hosts(&dir, "mpi");
}
