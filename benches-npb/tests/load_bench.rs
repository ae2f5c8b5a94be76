//! `mttl-bench load` end to end: the real scenarios at reduced size on the
//! TCP backend (and on MPI in builds with the `mpi` feature), plus the full
//! sizes as ignored tests (`cargo test --release -p benches-npb --test
//! load_bench -- --ignored`).
//!
//! Every test recomputes what the ranks must have observed from the seed
//! and the sizes, with its own copy of the data's definition (below), and
//! compares it with what the ranks report: a lost, duplicated or corrupted
//! message changes a count or a checksum and fails the test, whatever the
//! program itself concluded. A lost reply makes the job stall: the job's
//! watchdog (`--timeout`) stops it, and this file's own deadline backs it
//! up. The `faults_*` tests inject each fault on purpose and check that it
//! is caught.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The seed every test passes (any value would do).
const SEED: u64 = 12345;

// The data's definition, written again here so that the tests do not rely
// on the program's own copy.

fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn value(seed: u64, i: u64) -> u64 {
    mix64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Per target rank `(calls, wrapping sum of values)`, and the wrapping sum
/// of the replies, for `total` ainvokes on `size` ranks: rank `r` makes
/// `total / size` calls (one more if `r < total % size`); call `k` has
/// index `r << 40 | k`, carries `value(seed, index)` and goes to rank
/// `(r + 1 + k % (size - 1)) % size`; the reply is `v.rotate_left(17) ^
/// index`.
fn expected_ainvoke(size: u64, total: u64, seed: u64) -> (Vec<(u64, u64)>, u64) {
    let mut served = vec![(0u64, 0u64); size as usize];
    let mut replies = 0u64;
    for r in 0..size {
        let calls = total / size + u64::from(r < total % size);
        for k in 0..calls {
            let index = r << 40 | k;
            let v = value(seed, index);
            let target = ((r + 1 + k % (size - 1)) % size) as usize;
            served[target].0 += 1;
            served[target].1 = served[target].1.wrapping_add(v);
            replies = replies.wrapping_add(v.rotate_left(17) ^ index);
        }
    }
    (served, replies)
}

/// The checksums of `n` local threads (thread `i` woken with `value(seed,
/// i)` returns `mix64(token ^ i)`) and of `n` remote threads (thread `i`
/// returns `mix64(i)` plus one of the tokens `value(!seed, j)`).
fn expected_threads(n: u64, seed: u64) -> (u64, u64) {
    (0..n).fold((0u64, 0u64), |(local, remote), i| {
        (
            local.wrapping_add(mix64(value(seed, i) ^ i)),
            remote.wrapping_add(mix64(i)).wrapping_add(value(!seed, i)),
        )
    })
}

/// The checksum of `bytes` of data: word `i` is `value(seed, i)`, weighed
/// by `2i + 1`.
fn expected_transfer(bytes: u64, seed: u64) -> u64 {
    (0..bytes / 8).fold(0u64, |sum, i| {
        sum.wrapping_add(value(seed, i).wrapping_mul(2 * i + 1))
    })
}

/// What a run of `mttl-bench load` left.
struct Run {
    success: bool,
    doc: Option<Value>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The results of `scenario`, failing the test if the run failed.
    fn results(&self, scenario: &str) -> &Value {
        assert!(
            self.success,
            "mttl-bench load failed:\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        let doc = self.doc.as_ref().expect("a JSON document");
        let entry = doc["scenarios"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["scenario"] == scenario))
            .unwrap_or_else(|| panic!("no {scenario} scenario in:\n{}", self.stdout));
        &entry["results"]
    }
}

/// Runs `mttl-bench load --json --seed SEED ARGS`, stopping it (SIGTERM,
/// which its launcher forwards to the ranks) if it is not done within
/// `deadline`.
fn run_load(args: &str, deadline: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mttl-bench"))
        .arg("load")
        .args(["--json", "--seed", &SEED.to_string()])
        .args(args.split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mttl-bench starts");
    let mut stdout_pipe = child.stdout.take().expect("stdout");
    let mut stderr_pipe = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout_pipe.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr_pipe.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mttl-bench") {
            break status;
        }
        if started.elapsed() > deadline {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // our own child's, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "mttl-bench load {args} did not finish within {deadline:?}: a message was lost \
                 or the job hung; stderr:\n{}",
                err_reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Run {
        success: status.success(),
        doc: serde_json::from_str(&stdout).ok(),
        stdout,
        stderr,
    }
}

/// Every rank reported a positive peak and current resident set, and the
/// peak is at least the current.
fn assert_memory_reported(results: &Value, np: usize) {
    let memory = results["memory"].as_array().expect("a memory list");
    assert_eq!(memory.len(), np, "one memory entry per rank: {memory:?}");
    for m in memory {
        let (peak, rss) = (m["peak_kib"].as_u64(), m["rss_kib"].as_u64());
        assert!(
            matches!((peak, rss), (Some(p), Some(r)) if p >= r && r > 0),
            "bad memory figures {m}"
        );
    }
}

fn check_ainvoke(results: &Value, np: u64, total: u64) {
    let (served, replies) = expected_ainvoke(np, total, SEED);
    let got = results["served"].as_array().expect("a served list");
    assert_eq!(got.len() as u64, np);
    for (rank, (g, want)) in got.iter().zip(&served).enumerate() {
        assert_eq!(
            (g["calls"].as_u64(), g["sum"].as_u64()),
            (Some(want.0), Some(want.1)),
            "rank {rank} did not serve every call made to it exactly once"
        );
    }
    assert_eq!(
        results["reply_checksum"].as_u64(),
        Some(replies),
        "the replies are not all right"
    );
    assert!(results["rate_per_s"].as_f64().is_some_and(|r| r > 0.0));
    let rounds = results["rss_by_round_kib"]
        .as_array()
        .expect("RSS by round");
    assert_eq!(rounds.len() as u64, np);
    assert_memory_reported(results, np as usize);
}

fn check_threads(results: &Value, n: u64, rounds: usize) {
    let (local, remote) = expected_threads(n, SEED);
    let runs = results["runs"].as_array().expect("a runs list");
    assert_eq!(runs.len(), rounds);
    for run in runs {
        for (half, want) in [("local", local), ("remote", remote)] {
            assert_eq!(
                run[half]["checksum"].as_u64(),
                Some(want),
                "the {half} threads' results are wrong or missing"
            );
            assert!(
                run[half]["live_threads"].as_u64().is_some_and(|l| l >= n),
                "fewer than {n} {half} threads were live at once: {}",
                run[half]
            );
            assert!(run[half]["rss_live_kib"].as_u64().is_some_and(|k| k > 0));
        }
    }
}

fn check_transfer(results: &Value, bytes: u64) {
    let want = expected_transfer(bytes, SEED);
    for phase in ["write", "read", "invoke"] {
        assert_eq!(
            results[phase]["checksum"].as_u64(),
            Some(want),
            "the data of the {phase} phase did not arrive intact"
        );
        assert!(results[phase]["bytes_per_s"]
            .as_f64()
            .is_some_and(|b| b > 0.0));
    }
}

#[test]
fn ainvoke_100k_calls_on_4_ranks_are_each_served_once_and_answered() {
    let run = run_load(
        "--scenarios ainvoke --np 4 --ainvokes 100000 --rounds 2 --timeout 120",
        Duration::from_secs(180),
    );
    check_ainvoke(run.results("ainvoke"), 4, 100_000);
}

#[test]
fn threads_20k_live_on_one_rank_all_return_their_results() {
    let run = run_load(
        "--scenarios threads --np 2 --threads 20000 --rounds 1 --timeout 120",
        Duration::from_secs(180),
    );
    let results = run.results("threads");
    check_threads(results, 20_000, 1);
    assert_memory_reported(results, 2);
}

#[test]
fn transfer_64_mib_arrives_intact_written_read_and_invoked() {
    let run = run_load(
        "--scenarios transfer --np 2 --bytes 64M --chunk 16M --timeout 120",
        Duration::from_secs(180),
    );
    let results = run.results("transfer");
    check_transfer(results, 64 << 20);
    assert_memory_reported(results, 2);
    // The receiver held the data: its peak is at least the 64 MiB.
    let peak = results["memory"][1]["peak_kib"].as_u64().unwrap_or(0);
    assert!(peak >= 64 << 10, "receiver peak {peak} KiB");
}

#[test]
fn soak_runs_rounds_of_everything_and_tracks_memory() {
    let run = run_load(
        "--scenarios soak --np 3 --duration 2 --ainvokes 3000 --threads 300 --bytes 1M --chunk 256K --timeout 120",
        Duration::from_secs(180),
    );
    let results = run.results("soak");
    let rounds = results["rounds"].as_array().expect("a rounds list");
    assert!(!rounds.is_empty());
    for round in rounds {
        let rss = round["rss_kib"].as_array().expect("RSS per rank");
        assert_eq!(rss.len(), 3);
    }
    assert_eq!(
        results["totals"]["ainvokes"].as_u64(),
        Some(3000 * rounds.len() as u64)
    );
    assert!(results["failures"].as_array().is_some_and(Vec::is_empty));
}

/// Runs `scenario` with `fault` injected; it must fail.
fn run_with_fault(args: &str) -> Run {
    let run = run_load(args, Duration::from_secs(120));
    assert!(
        !run.success,
        "mttl-bench load {args} passed despite the fault:\n{}",
        run.stdout
    );
    run
}

#[test]
fn faults_a_lost_call_is_caught_by_the_callee_sums() {
    let run = run_with_fault("--scenarios ainvoke --np 3 --ainvokes 3000 --fault lose-call");
    // The program's report says so, and so does this file's own sum.
    let doc = run
        .doc
        .as_ref()
        .expect("a JSON document despite the failure");
    let results = &doc["scenarios"][0]["results"];
    let (served, _) = expected_ainvoke(3, 3000, SEED);
    let got: Vec<u64> = results["served"]
        .as_array()
        .expect("served")
        .iter()
        .map(|s| s["sum"].as_u64().unwrap_or(0))
        .collect();
    assert_ne!(got, served.iter().map(|s| s.1).collect::<Vec<_>>());
    assert_eq!(doc["passed"], false);
}

#[test]
fn faults_a_flipped_bit_is_caught_by_the_receiver_checksums() {
    let run =
        run_with_fault("--scenarios transfer --bytes 1M --chunk 256K --np 2 --fault flip-bit");
    let doc = run
        .doc
        .as_ref()
        .expect("a JSON document despite the failure");
    let results = &doc["scenarios"][0]["results"];
    let want = expected_transfer(1 << 20, SEED);
    for phase in ["write", "read", "invoke"] {
        assert_ne!(results[phase]["checksum"].as_u64(), Some(want), "{phase}");
    }
}

#[test]
fn faults_a_reply_never_sent_stops_the_job_naming_the_stall() {
    let run =
        run_with_fault("--scenarios ainvoke --np 3 --ainvokes 3000 --timeout 5 --fault drop-reply");
    assert!(
        run.stderr.contains("did not finish within 5 s"),
        "no watchdog message:\n{}",
        run.stderr
    );
}

#[cfg(feature = "mpi")]
#[test]
fn mpi_ainvokes_and_a_transfer_arrive_intact() {
    let run = run_load(
        "--backend mpi --scenarios ainvoke,transfer --np 3 --ainvokes 20000 --rounds 2 --bytes 16M --chunk 4M --timeout 120",
        Duration::from_secs(240),
    );
    check_ainvoke(run.results("ainvoke"), 3, 20_000);
    check_transfer(run.results("transfer"), 16 << 20);
}

#[test]
#[ignore = "full size: 1 M ainvokes; run with --release -- --ignored"]
fn full_size_1m_ainvokes_on_4_ranks() {
    let run = run_load(
        "--scenarios ainvoke --np 4 --ainvokes 1000000",
        Duration::from_secs(900),
    );
    check_ainvoke(run.results("ainvoke"), 4, 1_000_000);
}

#[test]
#[ignore = "full size: 20 k threads, 4 rounds; run with --release -- --ignored"]
fn full_size_20k_threads_four_rounds() {
    let run = run_load(
        "--scenarios threads --np 2 --threads 20000",
        Duration::from_secs(900),
    );
    check_threads(run.results("threads"), 20_000, 4);
}

#[test]
#[ignore = "full size: a 1 GiB transfer; run with --release -- --ignored"]
fn full_size_1_gib_transfer() {
    let run = run_load(
        "--scenarios transfer --np 2 --bytes 1G",
        Duration::from_secs(900),
    );
    let results = run.results("transfer");
    check_transfer(results, 1 << 30);
    assert_memory_reported(results, 2);
}

#[test]
#[ignore = "a 10-minute soak; run with --release -- --ignored"]
fn soak_ten_minutes() {
    let run = run_load(
        "--scenarios soak --np 4 --duration 600",
        Duration::from_secs(1500),
    );
    let results = run.results("soak");
    assert!(results["failures"].as_array().is_some_and(Vec::is_empty));
    assert!(results["seconds"].as_f64().is_some_and(|s| s >= 600.0));
}
