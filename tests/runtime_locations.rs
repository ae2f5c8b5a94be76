//! Errors and waits name the user's line, not the library's, on every
//! backend: a thread waiting in `spmd` as a deadlock report places it, and
//! a fence reporting a failed `invoke_nowait`. (Invoking a function that is
//! not `#[mttl::remote]` does not compile: see the `compile_fail` example
//! of `mttl_core::Remote`.)
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::time::Duration;

use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    a_thread_waiting_in_spmd_is_placed_at_the_call,
    a_failed_fence_names_the_fence,
);

#[mttl::remote]
fn slow_but_on_rank_0() {
    if mttl::rank() != 0 {
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[mttl::remote]
fn refuse() {
    panic!("refused");
}

fn a_thread_waiting_in_spmd_is_placed_at_the_call(t: Scenario) {
    t.run(2, || {
        let line = line!() + 1;
        let caller = mttl::thread::spawn("spmd caller", || mttl::spmd(slow_but_on_rank_0, ()));
        let waiting = loop {
            mttl::yield_now();
            let blocked = mttl::thread::blocked_threads();
            if let Some(b) = blocked.into_iter().find(|b| b.name == "spmd caller") {
                break b.reason;
            }
        };
        let at = waiting.location();
        assert_eq!((at.file(), at.line()), (file!(), line), "{waiting}");
        assert_eq!(caller.join().expect("spmd returns").len(), 2);
        println!("the wait was placed at the spmd call");
    })
    .assert_success()
    .stdout_line(&["the wait was placed at the spmd call"]);
}

fn a_failed_fence_names_the_fence(t: Scenario) {
    let line = line!() + 3;
    let out = t.run(2, move || {
        mttl::invoke_nowait(1, refuse, ());
        mttl::fence();
    });
    out.assert_failure();
    out.stderr_line(&[
        "mttl: rank 0, thread 'main' panicked at",
        &format!("{}:{line}:", file!()),
        "invoke_nowait on rank 1 failed",
        "runtime_locations::refuse panicked",
        "refused",
    ]);
}
