//! Faults injected into running jobs, on every backend: a rank killed with
//! SIGKILL stops the job at once, naming it, and leaves no process behind;
//! a deadlock is found by the watchdog, which names what every thread waits
//! for (identical waits in one line); a long computation or a busy wait is
//! not mistaken for a deadlock.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mttl::SyncCell;
use runtime_support::{on_every_backend, Backend, JobOutput, Mpirun, Scenario};

on_every_backend!(
    a_deadlock_is_stopped_by_the_watchdog,
    a_long_computation_is_not_a_deadlock;
    not_local:
    a_killed_rank_stops_the_job =>
        "a SIGKILL ends a process: a local job's ranks are threads of one",
);

/// How long after a rank's death every process of the job must be gone.
const DETECTION_LIMIT: Duration = Duration::from_secs(2);

/// The same under `mpirun`, which stops the job itself: Open MPI's daemon
/// notices the death within about a second, and now and then (one run in
/// five or so here) takes one more second to end a survivor: it sends
/// SIGTERM, then SIGKILL after `odls_base_sigkill_timeout` (1 s).
const MPIRUN_DETECTION_LIMIT: Duration = Duration::from_secs(3);

/// The watchdog's limit in these tests, in seconds.
const WATCHDOG_SECS: u64 = 2;

/// This process's id, to check later that it is gone.
#[mttl::remote]
fn process_id() -> u32 {
    std::process::id()
}

/// Milliseconds since the epoch: a clock every process of the job shares.
fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_millis()
}

/// Kills this process with SIGKILL, after saying when.
#[mttl::remote]
fn die() {
    println!("rank {} dies at {} ms", mttl::rank(), epoch_ms());
    let _ = Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    unreachable!("SIGKILL does not return");
}

/// Reads a cell nobody writes.
#[mttl::remote]
fn read_forever() {
    let never: SyncCell<u8> = SyncCell::new();
    never.read();
}
/// The line of the read in [`read_forever`].
const READ_LINE: u32 = line!() - 3;

/// Starts [`IDLE_READERS`] threads here that wait for ever in the same
/// place, and returns.
#[mttl::remote]
fn start_idle_readers() {
    let never: SyncCell<u8> = SyncCell::new();
    for _ in 0..IDLE_READERS {
        let never = never.clone();
        mttl::thread::spawn("idle reader", move || never.read());
    }
}
/// The line of the read in [`start_idle_readers`].
const IDLE_READ_LINE: u32 = line!() - 4;

/// Threads [`start_idle_readers`] starts.
const IDLE_READERS: usize = 40;

/// Enters a barrier (on the node it is called on).
#[mttl::remote]
fn join_barrier() {
    mttl::barrier();
}

/// Blocks the whole rank (an OS sleep, no yield) for `ms` milliseconds.
#[mttl::remote]
fn compute(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

/// Keeps a thread running (yielding) for `ms` milliseconds.
#[mttl::remote]
fn busy_wait(ms: u64) -> u64 {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(ms) {
        mttl::yield_now();
    }
    ms
}

/// The pids the job printed as `pid R P`.
fn job_pids(out: &JobOutput) -> Vec<u32> {
    let pids: Vec<u32> = out
        .stdout
        .lines()
        .filter_map(|l| l.split("pid ").nth(1))
        .filter_map(|rest| rest.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "every rank's pid\n{}", out.stdout);
    pids
}

fn a_killed_rank_stops_the_job(t: Scenario) {
    let out = t.run(3, || {
        for r in 0..mttl::size() {
            println!("pid {r} {}", mttl::invoke(r, process_id, ()));
        }
        // Rank 1 waits on a cell and in a barrier (the reader first, so
        // that it is blocked before the barrier can fail); rank 0 on an
        // invoke reply and in the barrier; rank 2 dies.
        let read = mttl::ainvoke(1, read_forever, ());
        let barrier = mttl::ainvoke(1, join_barrier, ());
        mttl::thread::spawn("waiter", || mttl::invoke(2, die, ()));
        mttl::barrier();
        println!("the barrier passed without rank 2");
        drop((barrier, read));
    });
    out.assert_failure();
    assert!(!out.stdout.contains("barrier passed"), "{}", out.stdout);
    // When rank 2 died, by its own clock line.
    let died: u128 = out
        .stdout
        .lines()
        .find_map(|l| l.split("rank 2 dies at ").nth(1))
        .and_then(|rest| rest.trim_end_matches(" ms").parse().ok())
        .unwrap_or_else(|| panic!("rank 2 said when it died\n{}", out.stdout));
    let ended = out
        .ended
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    let took = Duration::from_millis((ended.saturating_sub(died)) as u64);
    println!("the job ended {took:?} after rank 2 died");
    let limit = match t.backend {
        Backend::Tcp => DETECTION_LIMIT,
        Backend::Mpi => MPIRUN_DETECTION_LIMIT,
        Backend::Local => unreachable!("not run on local"),
    };
    assert!(
        took <= limit,
        "the job took {took:?} to end after rank 2 died\n{}",
        out.stderr
    );
    // No process of the job is left.
    for pid in job_pids(&out) {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z")),
            "process {pid} of the job is still there"
        );
    }
    match t.backend {
        Backend::Tcp => {
            out.stderr_line(&["mttlrun: rank 2 was killed by signal 9"]);
            // Every survivor names the dead rank and what it gave up on.
            out.stderr_line(&["mttl: rank 0:", "rank 2 is gone"]);
            out.stderr_line(&["mttl: rank 1:", "rank 2 is gone"]);
            out.stderr_line(&[
                "mttl: rank 0: thread 'waiter' gave up waiting for reply to invoke (rank 2) at",
                file!(),
            ]);
            out.stderr_line(&[
                "mttl: rank 0: thread 'main' gave up waiting for barrier (number 0) at",
                file!(),
            ]);
            // Rank 1 either waited in the barrier or learnt of the loss
            // sending its barrier step to rank 2 (a link made late races
            // with the kill); either way it names the barrier.
            let rank1 = |l: &&str| l.contains("mttl: rank 1:");
            assert!(
                out.stderr.lines().filter(rank1).any(|l| {
                    l.contains("gave up waiting for barrier (number 0)")
                        || l.contains("barrier #0: sending to rank 2:")
                }),
                "rank 1 names the barrier it gave up on\n{}",
                out.stderr
            );
            out.stderr_line(&[
                "mttl: rank 1:",
                "gave up waiting for SyncCell read at",
                &format!("{}:{READ_LINE}:", file!()),
            ]);
        }
        // mpirun stops the job itself and names a process that failed.
        Backend::Mpi => match runtime_support::mpirun_kind() {
            Mpirun::OpenMpi => {
                out.stderr_line(&["rank 2"]);
            }
            Mpirun::Hydra => {
                // The PID of rank 2, or of a rank Hydra killed after it.
                let banner = out.stdout_line(&["PID ", " RUNNING AT"]);
                let pid: Option<u32> = banner
                    .split("PID ")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next()?.parse().ok());
                assert!(
                    pid.is_some_and(|pid| job_pids(&out).contains(&pid)),
                    "Hydra's banner names no process of the job: {banner}\n{}",
                    out.stdout
                );
            }
        },
        Backend::Local => unreachable!("not run on local"),
    }
}

fn a_deadlock_is_stopped_by_the_watchdog(t: Scenario) {
    let t = t.env("MTTL_WATCHDOG", &WATCHDOG_SECS.to_string());
    let out = t.run(3, || {
        // Rank 2 waits in a barrier nobody else joins, a thread of rank 1
        // on a cell nobody writes, and main on that thread's reply; 40
        // threads of rank 2 wait in one place, reported in one line.
        mttl::invoke(2, start_idle_readers, ());
        let lonely = mttl::ainvoke(2, join_barrier, ());
        mttl::invoke(1, read_forever, ());
        drop(lonely);
        println!("main went on");
    });
    out.assert_ranks_code(t.backend, 3);
    assert!(!out.stdout.contains("main went on"), "{}", out.stdout);
    let limit = Duration::from_secs(WATCHDOG_SECS);
    assert!(
        out.elapsed >= limit && out.elapsed <= limit * 3 + Duration::from_secs(3),
        "the watchdog of {limit:?} stopped the job after {:?}\n{}",
        out.elapsed,
        out.stderr
    );
    out.stderr_line(&[
        "mttl: rank 0: deadlock: no thread on any rank could run",
        "MTTL_WATCHDOG=2",
    ]);
    out.stderr_line(&[
        "mttl: rank 0: thread 'main' waits for reply to invoke (rank 1) at",
        file!(),
    ]);
    out.stderr_line(&[
        "mttl: rank 1:",
        "waits for SyncCell read at",
        &format!("{}:{READ_LINE}:", file!()),
    ]);
    out.stderr_line(&["mttl: rank 2:", "waits for barrier (number 0) at"]);
    out.stderr_line(&[
        &format!("mttl: rank 2: {IDLE_READERS} threads ('idle reader') wait for SyncCell read at"),
        &format!("{}:{IDLE_READ_LINE}:", file!()),
    ]);
    assert!(
        !out.stderr.contains("thread 'idle reader'"),
        "{}",
        out.stderr
    );
    out.stderr_line(&["mttl: rank 1: stopped by the deadlock watchdog of rank 0"]);
}

fn a_long_computation_is_not_a_deadlock(t: Scenario) {
    let t = t.env("MTTL_WATCHDOG", "1");
    t.run(3, || {
        // Rank 1 cannot answer the watchdog for 2.5 s, rank 2 runs all along,
        // rank 0 waits for both.
        let busy = mttl::ainvoke(2, busy_wait, (2500,));
        assert_eq!(mttl::invoke(1, compute, (2500,)), 2500);
        assert_eq!(busy.wait(), 2500);
        println!("both finished");
    })
    .assert_success();
}
