//! A panic nothing catches ends the job at once, on every backend: a task
//! that `spmd` runs panics on one rank while the others wait for it in a
//! collective, and the job stops within a few seconds (not when the
//! deadlock watchdog fires), every rank's last line naming the panicking
//! rank, thread and message; `RUST_BACKTRACE` gets one backtrace per job,
//! and none for a remote panic returned to a `try_invoke` caller.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::time::Duration;

use runtime_support::{on_every_backend, JobOutput, Scenario};

on_every_backend!(
    a_panicking_spmd_task_stops_the_job_at_once,
    a_panicking_spmd_task_prints_one_backtrace,
    a_panic_returned_to_try_invoke_prints_no_backtrace,
);

/// Ranks in these jobs.
const NP: usize = 3;

/// The rank whose task panics.
const DOOMED: usize = 2;

/// How long a job stopped by a panic may take, start-up included: far
/// below the watchdog's 30 s.
const STOPS_WITHIN: Duration = Duration::from_secs(8);

/// Rank [`DOOMED`] panics; the others wait for it in a barrier.
#[mttl::remote]
fn task() {
    if mttl::rank() == DOOMED {
        panic!("task gives up");
    }
    mttl::barrier();
}

#[mttl::remote]
fn explode() {
    panic!("explode gives up");
}

/// The job of [`task`] everywhere, with `RUST_BACKTRACE` set to `backtrace`.
fn run_doomed_spmd(t: Scenario, backtrace: &str) -> JobOutput {
    t.env("MTTL_WATCHDOG", "30")
        .env("RUST_BACKTRACE", backtrace)
        .run(NP, || {
            mttl::spmd(task, ());
            println!("spmd returned after a panic");
        })
}

/// The lines rank `r` wrote itself (`mttl: rank R: ...` or
/// `mttl: rank R, thread ...`).
fn lines_of(out: &JobOutput, r: usize) -> Vec<&str> {
    let (colon, comma) = (format!("mttl: rank {r}:"), format!("mttl: rank {r},"));
    out.stderr
        .lines()
        .filter(|l| l.contains(&colon) || l.contains(&comma))
        .collect()
}

fn a_panicking_spmd_task_stops_the_job_at_once(t: Scenario) {
    let out = run_doomed_spmd(t, "0");
    out.assert_failure();
    assert!(
        out.elapsed < STOPS_WITHIN,
        "the job took {:?} to stop\n{}",
        out.elapsed,
        out.stderr
    );
    assert!(!out.stdout.contains("spmd returned"), "{}", out.stdout);
    let cause = format!("rank {DOOMED}, thread 'runtime_fail_fast::task' panicked at");
    out.stderr_line(&[&format!("mttl: {cause}"), file!(), "task gives up"]);
    for r in 0..NP {
        let lines = lines_of(&out, r);
        let last = lines
            .last()
            .unwrap_or_else(|| panic!("rank {r} said nothing\n{}", out.stderr));
        assert!(
            last.contains(&cause) && last.contains("task gives up"),
            "rank {r}'s last line does not name the panic: {last}\n{}",
            out.stderr
        );
    }
    assert!(!out.stderr.contains("watchdog"), "{}", out.stderr);
}

fn a_panicking_spmd_task_prints_one_backtrace(t: Scenario) {
    let out = run_doomed_spmd(t, "1");
    out.assert_failure();
    let backtraces = out.stderr.matches("stack backtrace").count();
    assert_eq!(backtraces, 1, "{}", out.stderr);
    out.stderr_line(&[&format!("mttl: rank {DOOMED}, thread"), "stack backtrace"]);
}

fn a_panic_returned_to_try_invoke_prints_no_backtrace(t: Scenario) {
    let out = t.env("RUST_BACKTRACE", "1").run(NP, || {
        for node in 0..mttl::size() {
            let err = mttl::try_invoke(node, explode, ()).expect_err("explode panics");
            assert!(err.message.contains("explode gives up"), "{err}");
        }
    });
    out.assert_success();
    assert!(!out.stderr.contains("stack backtrace"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}
