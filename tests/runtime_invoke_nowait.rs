//! `invoke_nowait` across a job, on every backend: calls complete at the
//! caller's next fence or barrier (even calls that block or yield), calls
//! to the caller's own node included; a panicking call is reported at that
//! fence, naming the rank, the function and the message, and the job goes
//! on.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::cell::Cell;

use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    calls_complete_at_the_next_fence,
    calls_complete_at_the_next_barrier,
    a_panicking_call_is_reported_at_the_fence,
);

thread_local! {
    /// What the calls to this rank added (ranks of a local job are OS threads).
    static SHARD: Cell<u64> = const { Cell::new(0) };
}

/// Adds `n` to this rank's shard, after yielding `yields` times: the fence
/// must wait for calls that have not returned yet.
#[mttl::remote]
fn add_to_shard(n: u64, yields: u32) {
    for _ in 0..yields {
        mttl::yield_now();
    }
    SHARD.with(|s| s.set(s.get() + n));
}

#[mttl::remote]
fn shard() -> u64 {
    SHARD.with(Cell::get)
}

#[mttl::remote]
fn refuse(why: String) {
    panic!("refused: {why}");
}

/// Each rank's shard after one round of calls to every node.
fn expected(round: u64) -> u64 {
    round * (1 + 2 + 3 + 4 + 5)
}

fn calls_complete_at_the_next_fence(t: Scenario) {
    t.run(3, || {
        for round in 1..=3 {
            for node in 0..mttl::size() {
                for n in 1..=5 {
                    mttl::invoke_nowait(node, add_to_shard, (n, n as u32 * 3));
                }
            }
            mttl::fence();
            for node in 0..mttl::size() {
                assert_eq!(
                    mttl::invoke(node, shard, ()),
                    expected(round),
                    "rank {node}"
                );
            }
        }
        println!("every call completed at its fence");
    })
    .assert_success()
    .stdout_line(&["every call completed at its fence"]);
}

#[mttl::remote]
fn feed_the_next_node() {
    let next = (mttl::rank() + 1) % mttl::size();
    for n in 1..=5 {
        mttl::invoke_nowait(next, add_to_shard, (n, 2));
    }
    mttl::barrier();
    assert_eq!(shard(), expected(1), "rank {}", mttl::rank());
}

fn calls_complete_at_the_next_barrier(t: Scenario) {
    t.run(4, || {
        mttl::spmd(feed_the_next_node, ());
        println!("every call completed at the barrier");
    })
    .assert_success()
    .stdout_line(&["every call completed at the barrier"]);
}

fn a_panicking_call_is_reported_at_the_fence(t: Scenario) {
    t.run(3, || {
        for node in [2, 0] {
            mttl::invoke_nowait(node, add_to_shard, (1, 0));
            mttl::invoke_nowait(node, refuse, (format!("on {node}"),));
            let err = mttl::try_fence().expect_err("refuse panics");
            assert_eq!(err.rank, node, "{err}");
            assert_eq!(err.op, "invoke_nowait", "{err}");
            let text = err.to_string();
            for part in [
                format!("invoke_nowait on rank {node} failed"),
                "runtime_invoke_nowait::refuse".to_owned(),
                format!("refused: on {node}"),
                file!().to_owned(),
            ] {
                assert!(text.contains(&part), "{part:?} not in {text}");
            }
            // Reported once; the other call completed, and the job goes on.
            mttl::try_fence().expect("nothing failed since");
            assert_eq!(mttl::invoke(node, shard, ()), 1);
        }
        println!("every failed call was reported at its fence");
    })
    .assert_success()
    .stdout_line(&["every failed call was reported at its fence"]);
}
