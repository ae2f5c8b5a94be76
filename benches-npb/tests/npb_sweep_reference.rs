//! `npb-sweep --reference DIR` end to end, with a fake NPB 3.4: `DIR` holds
//! a shell script `is.S.x` printing an NPB-style report (its timers only
//! when `NPB_TIMER_FLAG` is set, as NPB does), and `MTTL_MPIRUN` names a
//! fake `mpirun` that runs the program once. The sweep runs mttl on TCP, IS
//! class S, one rank, so no MPI is needed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A directory removed when the test ends, passed or not.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl ScratchDir {
    fn new(name: &str) -> ScratchDir {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        ScratchDir(dir)
    }
}

/// Writes an executable shell script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).expect("script written");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .expect("script made executable");
}

/// A fake `mpirun`: `--version` names no known MPI; `-np N PROGRAM` runs
/// the program once.
fn fake_mpirun(dir: &Path) -> PathBuf {
    let path = dir.join("fake-mpirun");
    script(
        &path,
        "if [ \"$1\" = --version ]; then echo fake-mpirun 1.0; exit 0; fi\n\
         [ \"$1\" = -np ] || { echo \"fake-mpirun: expected -np, got $1\" >&2; exit 9; }\n\
         shift 2\nexec \"$@\"\n",
    );
    path
}

/// A fake `is.S.x` reporting `verification` and 0.0123 s (its total timer)
/// or 0.02 s (its printed time).
fn fake_is(bin: &Path, verification: &str) {
    script(
        &bin.join("is.S.x"),
        &format!(
            "cat <<EOF\n\n NAS Parallel Benchmarks 3.4 -- IS Benchmark\n\n\
             \x20IS Benchmark Completed\n\
             \x20Class           =                        S\n\
             \x20Time in seconds =                     0.02\n\
             \x20Total processes =                        1\n\
             \x20Mop/s total     =                    53.28\n\
             \x20Verification    =               {verification}\n\
             EOF\n\
             if [ -n \"$NPB_TIMER_FLAG\" ]; then cat <<EOF\n\
             \x20nprocs =      1          minimum     maximum     average\n\
             \x20timer  1 (total   ):      0.0123      0.0123      0.0123\n\
             \x20timer  2 (rcomp   ):      0.0100      0.0100      0.0100\n\
             \x20timer  3 (rcomm   ):      0.0023      0.0023      0.0023\n\
             EOF\nfi\n"
        ),
    );
}

/// Runs `npb-sweep` on IS class S, 1 rank, mttl on TCP, with `--reference
/// bin` and the given classes.
fn sweep(dir: &Path, classes: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npb-sweep"))
        .args(["--kernels", "is", "--classes", classes, "--ranks", "1"])
        .args(["--variants", "mttl", "--backends", "tcp"])
        .args(["--reps", "2", "--settle", "0", "--retries", "0"])
        .arg("--npb")
        .arg(env!("CARGO_BIN_EXE_npb"))
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--reference")
        .arg(dir.join("bin"))
        .env("MTTL_MPIRUN", fake_mpirun(dir))
        .env_remove("MTTL_NP")
        .env_remove("MTTL_RANK")
        .env_remove("NPB_TIMER_FLAG")
        .stdin(Stdio::null())
        .output()
        .expect("npb-sweep runs")
}

#[test]
fn reference_runs_alternate_with_ours_and_give_ratios() {
    let dir = ScratchDir::new("npb-sweep-reference");
    std::fs::create_dir_all(dir.0.join("bin")).unwrap();
    fake_is(&dir.0.join("bin"), "SUCCESSFUL");
    let out = sweep(&dir.0, "S");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);

    // Two sweeps, each running ours and the reference, in turns.
    let order: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("sweep "))
        .map(|l| if l.contains("NPB 3.4") { "ref" } else { "ours" })
        .collect();
    assert_eq!(order, ["ours", "ref", "ref", "ours"], "{stderr}");

    let csv = std::fs::read_to_string(dir.0.join("out/npb-sweep-reference.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("kernel,class,nprocs,variant,backend,best_seconds,reference_seconds,ratio,paired_ratio,pairs")
    );
    let row: Vec<&str> = lines.next().expect("one row").split(',').collect();
    assert_eq!(row[..5], ["IS", "S", "1", "mttl", "tcp"], "{csv}");
    // The total timer's four decimals, not the printed 0.02.
    assert_eq!(row[6], "0.0123", "{csv}");
    let ours: f64 = row[5].parse().unwrap();
    let ratio: f64 = row[7].parse().unwrap();
    // `ours` is printed to 4 decimals and the ratio to 3: each rounding
    // moves the quotient by at most half a unit of its last place.
    let rounding = 0.5e-4 / 0.0123 + 0.5e-3;
    assert!((ratio - ours / 0.0123).abs() <= rounding + 1e-9, "{csv}");
    assert_eq!(row[9], "2", "{csv}");
    assert_eq!(lines.next(), None, "{csv}");

    assert!(stdout.contains("Against the NPB 3.4 reference"), "{stdout}");
    assert!(
        stdout.contains("IS S -n 1 NPB 3.4: total 0.0123/0.0123, rcomp 0.0100/0.0100"),
        "{stdout}"
    );
}

#[test]
fn a_failed_reference_run_fails_the_sweep_with_the_reason() {
    let dir = ScratchDir::new("npb-sweep-reference-failed");
    std::fs::create_dir_all(dir.0.join("bin")).unwrap();
    fake_is(&dir.0.join("bin"), "UNSUCCESSFUL");
    let out = sweep(&dir.0, "S");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("is.S.x: its output: the program reports Verification = UNSUCCESSFUL"),
        "{stderr}"
    );
}

#[test]
fn a_missing_reference_program_names_the_make_command() {
    let dir = ScratchDir::new("npb-sweep-reference-missing");
    std::fs::create_dir_all(dir.0.join("bin")).unwrap();
    fake_is(&dir.0.join("bin"), "SUCCESSFUL");
    let out = sweep(&dir.0, "S,W");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no is.W.x there"), "{stderr}");
    assert!(stderr.contains("`make is CLASS=W`"), "{stderr}");
    assert!(!dir.0.join("out").exists(), "nothing ran");
}
