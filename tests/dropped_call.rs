//! A call whose `Pending` is dropped unwaited, on every backend: it still
//! runs; its reply, when it arrives, is discarded silently; a failure
//! (a panic in the remote function) is still reported by the caller's rank,
//! as no one else would see it.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    a_dropped_calls_reply_is_discarded_silently,
    a_dropped_calls_panic_is_still_reported,
);

thread_local! {
    /// How many times [`count_call`] ran on this node.
    static CALLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts a call on this node and returns a value to discard.
#[mttl::remote]
fn count_call() -> u64 {
    CALLS.with(|c| c.set(c.get() + 1));
    42
}

/// How many times [`count_call`] ran on this node.
#[mttl::remote]
fn calls() -> u64 {
    CALLS.with(std::cell::Cell::get)
}

#[mttl::remote]
fn fails() -> u64 {
    panic!("the dropped call's panic")
}

fn a_dropped_calls_reply_is_discarded_silently(t: Scenario) {
    let out = t.run(2, || {
        for _ in 0..5 {
            drop(mttl::ainvoke(1, count_call, ()));
        }
        // Rank 1 runs the calls in order, so this call's reply comes after
        // the dropped ones' replies, which rank 0 has handled by the time
        // it returns.
        assert_eq!(mttl::invoke(1, calls, ()), 5, "the dropped calls ran");
        println!("dropped calls ran: 5");
    });
    out.assert_success().stdout_line(&["dropped calls ran: 5"]);
    assert!(
        !out.stderr.contains("was lost"),
        "a dropped call's reply was reported:\n{}",
        out.stderr
    );
}

fn a_dropped_calls_panic_is_still_reported(t: Scenario) {
    let out = t.run(2, || {
        drop(mttl::ainvoke(1, fails, ()));
        // As above: the failed reply has been handled once this returns.
        assert_eq!(mttl::invoke(1, calls, ()), 0);
    });
    out.assert_success()
        .stderr_line(&["dropped unwaited, and failed", "the dropped call's panic"]);
}
