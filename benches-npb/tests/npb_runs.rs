//! The `npb` binary end to end: each kernel, variant and backend at 1, 2 and
//! 4 ranks, launched the way a user launches it (`npb KERNEL -n N ...`, which
//! starts the job itself: TCP through mttl's launcher, MPI through
//! `mpirun`), must print NPB's report with `Verification = SUCCESSFUL` and
//! exit 0.
//!
//! What runs (chosen for a two-core CI machine, about a minute unoptimised):
//!
//! | class | kernel | ranks   | variant / backend                                    |
//! |-------|--------|---------|------------------------------------------------------|
//! | S     | CG, IS | 1, 2, 4 | mttl on TCP; mttl on MPI and mpi on MPI (feature `mpi`) |
//! | W     | IS     | 2       | the same three                                       |
//! | W     | CG     | 2       | the same three, optimised builds only (unoptimised CG W takes ~5 s per rank) |
//!
//! Plus the command's contract: the JSON output, `MTTL_STATS=1` lines from
//! every rank of both variants, and clear refusals (the `mpi` variant on
//! TCP, a process count NPB does not allow). Jobs run one at a time.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one job may take before the test fails.
const JOB_TIMEOUT: Duration = Duration::from_secs(180);

/// Held while a job runs: jobs of this file do not compete for the CPUs.
static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `npb ARGS` with extra environment `env`, to its end or the timeout.
fn npb(args: &[&str], env: &[(&str, &str)]) -> Output {
    let _turn = ONE_JOB_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_npb"))
        .args(args)
        .envs(env.iter().copied())
        .env_remove("MTTL_NP")
        .env_remove("MTTL_RANK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("npb starts");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + JOB_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for npb") {
            break status;
        }
        if Instant::now() > deadline {
            // SIGTERM lets the launcher stop its ranks.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let status = child.wait().expect("waiting for npb");
            panic!("npb {args:?} took longer than {JOB_TIMEOUT:?} ({status})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

/// Runs one benchmark and checks it verified and reported as NPB does.
fn verified(kernel: &str, class: &str, np: usize, variant: &str, backend: &str) {
    let np_arg = np.to_string();
    let args = [
        kernel,
        "--class",
        class,
        "-n",
        &np_arg,
        "--variant",
        variant,
        "--backend",
        backend,
    ];
    let out = npb(&args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!(
        "npb {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
        args.join(" ")
    );
    assert!(
        out.status.success(),
        "exit status {}: {context}",
        out.status
    );
    for line in [
        " Verification    =               SUCCESSFUL".to_owned(),
        format!(" Class           =                        {class}"),
        format!(" Total processes = {np:>24}"),
        format!(" Variant         = {variant:>24}"),
        format!(" Comm backend    = {backend:>24}"),
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?}: {context}"
        );
    }
    assert!(stdout.contains(" Time in seconds ="), "{context}");
    assert!(stdout.contains(" Mop/s total     ="), "{context}");
    assert_eq!(
        stdout.matches("Benchmark Completed.").count(),
        1,
        "one report, from rank 0: {context}"
    );
}

/// `verified` tests, named `KERNEL_CLASS_VARIANT_on_BACKEND_RANKS`.
macro_rules! runs {
    ($($(#[$attr:meta])* $name:ident: $kernel:literal $class:literal $np:literal $variant:literal $backend:literal;)*) => {
        $(
            #[test]
            $(#[$attr])*
            fn $name() {
                verified($kernel, $class, $np, $variant, $backend);
            }
        )*
    };
}

runs! {
    cg_s_mttl_on_tcp_1: "cg" "S" 1 "mttl" "tcp";
    cg_s_mttl_on_tcp_2: "cg" "S" 2 "mttl" "tcp";
    cg_s_mttl_on_tcp_4: "cg" "S" 4 "mttl" "tcp";
    is_s_mttl_on_tcp_1: "is" "S" 1 "mttl" "tcp";
    is_s_mttl_on_tcp_2: "is" "S" 2 "mttl" "tcp";
    is_s_mttl_on_tcp_4: "is" "S" 4 "mttl" "tcp";
    is_w_mttl_on_tcp_2: "is" "W" 2 "mttl" "tcp";
    #[cfg_attr(debug_assertions, ignore = "unoptimised CG W is slow; run with --release")]
    cg_w_mttl_on_tcp_2: "cg" "W" 2 "mttl" "tcp";
}

#[cfg(feature = "mpi")]
mod mpi {
    use super::verified;

    runs! {
        cg_s_mttl_on_mpi_1: "cg" "S" 1 "mttl" "mpi";
        cg_s_mttl_on_mpi_2: "cg" "S" 2 "mttl" "mpi";
        cg_s_mttl_on_mpi_4: "cg" "S" 4 "mttl" "mpi";
        cg_s_mpi_on_mpi_1: "cg" "S" 1 "mpi" "mpi";
        cg_s_mpi_on_mpi_2: "cg" "S" 2 "mpi" "mpi";
        cg_s_mpi_on_mpi_4: "cg" "S" 4 "mpi" "mpi";
        is_s_mttl_on_mpi_1: "is" "S" 1 "mttl" "mpi";
        is_s_mttl_on_mpi_2: "is" "S" 2 "mttl" "mpi";
        is_s_mttl_on_mpi_4: "is" "S" 4 "mttl" "mpi";
        is_s_mpi_on_mpi_1: "is" "S" 1 "mpi" "mpi";
        is_s_mpi_on_mpi_2: "is" "S" 2 "mpi" "mpi";
        is_s_mpi_on_mpi_4: "is" "S" 4 "mpi" "mpi";
        is_w_mttl_on_mpi_2: "is" "W" 2 "mttl" "mpi";
        is_w_mpi_on_mpi_2: "is" "W" 2 "mpi" "mpi";
        #[cfg_attr(debug_assertions, ignore = "unoptimised CG W is slow; run with --release")]
        cg_w_mttl_on_mpi_2: "cg" "W" 2 "mttl" "mpi";
        #[cfg_attr(debug_assertions, ignore = "unoptimised CG W is slow; run with --release")]
        cg_w_mpi_on_mpi_2: "cg" "W" 2 "mpi" "mpi";
    }

    /// The total bytes a rank's stats line reports (`total 2.28 MB`).
    fn total_bytes(line: &str) -> f64 {
        let total = line
            .split(" total ")
            .nth(1)
            .unwrap_or_else(|| panic!("no total in {line}"));
        let mut words = total.split_whitespace();
        let value: f64 = words.next().and_then(|v| v.parse().ok()).unwrap();
        let unit = match words.next() {
            Some("B") => 1.0,
            Some("KB") => 1e3,
            Some("MB") => 1e6,
            Some("GB") => 1e9,
            other => panic!("unit {other:?} in {line}"),
        };
        value * unit
    }

    /// Both CG variants move the same vectors, so their counts agree: a
    /// process's exchange with itself (the transpose on 2 processes) is no
    /// message in either.
    #[test]
    fn cg_variants_count_the_same_bytes() {
        let bytes = |variant: &str| -> Vec<f64> {
            let out = super::npb(
                &["cg", "-n", "2", "--variant", variant, "--backend", "mpi"],
                &[("MTTL_STATS", "1")],
            );
            assert!(out.status.success());
            let stderr = String::from_utf8_lossy(&out.stderr);
            (0..2)
                .map(|rank| {
                    let prefix = format!("mttl stats rank {rank}: send ");
                    let line = stderr.lines().find(|l| l.starts_with(&prefix));
                    total_bytes(line.unwrap_or_else(|| panic!("no stats of rank {rank}")))
                })
                .collect()
        };
        let (mttl, mpi) = (bytes("mttl"), bytes("mpi"));
        for rank in 0..2 {
            let ratio = mttl[rank] / mpi[rank];
            assert!(
                (0.95..1.10).contains(&ratio),
                "rank {rank}: mttl sent {} bytes, mpi {}",
                mttl[rank],
                mpi[rank]
            );
        }
    }

    #[test]
    fn mpi_variant_prints_stats_for_every_rank() {
        let out = super::npb(
            &["is", "-n", "2", "--variant", "mpi"],
            &[("MTTL_STATS", "1")],
        );
        assert!(out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        for rank in 0..2 {
            let line = stderr
                .lines()
                .find(|l| l.starts_with(&format!("mttl stats rank {rank}: send ")))
                .unwrap_or_else(|| panic!("no stats line of rank {rank}: {stderr}"));
            assert!(
                line.contains(" nsend ") && line.contains(" | msgs "),
                "{line}"
            );
        }
    }
}

#[test]
fn json_is_one_object_with_the_verdict() {
    let out = npb(&["is", "-n", "2", "--json"], &[]);
    assert!(out.status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    assert_eq!(v["kernel"], "IS");
    assert_eq!(v["class"], "S");
    assert_eq!(v["nprocs"], 2);
    assert_eq!(v["variant"], "mttl");
    assert_eq!(v["backend"], "tcp");
    assert_eq!(v["verified"], true);
    assert_eq!(v["tests_passed"], 52);
    assert!(v["seconds"].as_f64().is_some_and(|s| s > 0.0));
}

#[test]
fn mttl_variant_prints_the_runtime_stats_for_every_rank() {
    let out = npb(&["cg", "-n", "2"], &[("MTTL_STATS", "1")]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for rank in 0..2 {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("mttl stats rank {rank}: send "))),
            "no stats line of rank {rank}: {stderr}"
        );
    }
}

#[test]
fn refuses_what_cannot_run() {
    let out = npb(&["cg", "--variant", "mpi", "--backend", "tcp"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the mpi variant runs on the MPI backend only"),
        "{stderr}"
    );

    let out = npb(&["cg", "-n", "3"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("npb cg --class S runs on a power of two of ranks from 1 to 1024"),
        "{stderr}"
    );

    // Every kernel's limit, named with its reason, before anything starts.
    let out = npb(&["is", "--class", "S", "-n", "256"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "npb is --class S runs on a power of two of ranks from 1 to 128 \
             (NPB's MAX_PROCS for IS class S), not 256"
        ),
        "{stderr}"
    );
    let out = npb(&["cg", "-n", "2048"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("from 1 to 1024"), "{stderr}");
    assert!(stderr.contains("not 2048"), "{stderr}");

    let out = npb(&["is", "--class", "D"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("IS class D is not supported"), "{stderr}");
}

#[test]
fn line_diff_reports_both_kernels() {
    let out = npb(&["--line-diff"], &[]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("CG ")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("IS ")), "{stdout}");
}

/// `--idle-secs`: the kernel runs twice with a pause between, both verify,
/// and the JSON adds the start-up time, the pause and each rank's peak
/// memory.
#[test]
fn an_idle_pause_reports_start_up_and_memory() {
    let out = npb(&["is", "-n", "2", "--idle-secs", "1", "--json"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["idle_seconds"], 1, "{v}");
    let startup = v["startup_seconds"].as_f64().expect("start-up timed");
    assert!(startup > 0.0 && startup < 60.0, "{v}");
    let (max, mean) = (
        v["rank_peak_kib_max"].as_u64().expect("peak memory"),
        v["rank_peak_kib_mean"].as_u64().expect("mean memory"),
    );
    assert!(max >= mean && mean > 100, "{v}");
}
