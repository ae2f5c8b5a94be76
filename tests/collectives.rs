//! Collectives across a job, on every backend and at 1, 2, 3 and 4 ranks
//! (powers of two and not): barrier, broadcast, reduce, allreduce, gather,
//! allgather and alltoall give exact results in rank order; thousands run
//! back to back without mixing up their sequence numbers; a barrier
//! completes the remote writes issued before it (many `nwrite`s in
//! flight); misuse stops the job with
//! a message naming both sides.
//!
//! Each test is a job of its own (see `runtime_support`): node 0's main runs
//! the scenario's task on every node with `mttl::spmd`, so every node calls
//! the collectives from a thread, and checks what the tasks return.

mod runtime_support;

use std::cell::Cell;

use runtime_support::{on_every_backend, stop_job_on_panic, Scenario};

on_every_backend!(
    barrier_separates_phases,
    allreduce_sums_mins_and_maxes,
    reduction_order_is_rank_order,
    broadcast_from_every_root,
    gather_and_allgather_in_rank_order,
    alltoall_exchanges,
    thousand_back_to_back,
    kinds_interleaved_with_skew,
    barrier_completes_remote_writes,
    blocked_collective_names_itself,
    mismatched_collectives_are_reported,
    mismatched_roots_are_reported,
    concurrent_collectives_on_one_node_are_reported,
);

/// The job sizes every scenario runs at.
const SIZES: [usize; 4] = [1, 2, 3, 4];

/// Runs `main` (node 0's) as a job of each of [`SIZES`] ranks.
fn on_each_size(t: Scenario, main: fn()) {
    if t.in_job() {
        stop_job_on_panic();
    }
    for np in SIZES {
        t.run(np, main).assert_success();
    }
}

fn me() -> usize {
    mttl::rank()
}

fn n() -> usize {
    mttl::size()
}

/// Slows this node down by a varying amount, so that nodes reach a
/// collective at different times (and some run ahead into the next ones).
fn stagger(i: usize) {
    match (i + me()) % 5 {
        0 => std::thread::sleep(std::time::Duration::from_micros(300)),
        1 => {
            for _ in 0..3 {
                mttl::yield_now();
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- barrier

thread_local! {
    /// The phase this node has reached (one job per process: no reset).
    static PHASE: Cell<u64> = const { Cell::new(0) };
}

#[mttl::remote]
fn phase() -> u64 {
    PHASE.get()
}

#[mttl::remote]
fn phases_task() {
    for p in 1..=50u64 {
        stagger(p as usize);
        PHASE.set(p);
        mttl::barrier();
        // Every node has entered barrier p, and none can have passed
        // barrier p + 1, which this node has not entered yet.
        for node in 0..n() {
            let theirs = mttl::invoke(node, phase, ());
            assert!(
                theirs == p || theirs == p + 1,
                "after barrier {p}, rank {node} is in phase {theirs}"
            );
        }
    }
}

fn barrier_separates_phases(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(phases_task, ());
    });
}

// ---------------------------------------------------------------- allreduce

#[mttl::remote]
fn numbers_task() {
    let (r, n) = (me() as i64, n() as i64);
    let tri = n * (n + 1) / 2;
    assert_eq!(mttl::allreduce_sum(r + 1), tri);
    assert_eq!(mttl::allreduce_min(10 - r), 10 - (n - 1));
    assert_eq!(mttl::allreduce_max(3 * r), 3 * (n - 1));
    assert_eq!(mttl::allreduce_max(me() as u8), (n - 1) as u8);
    // Halves add exactly in any order.
    assert_eq!(mttl::allreduce_sum(0.5 * (r + 1) as f64), 0.5 * tri as f64);
    assert_eq!(mttl::allreduce_min(-1.5 * r as f32), -1.5 * (n - 1) as f32);

    let mut v = [r, -r, r * r, 7];
    mttl::allreduce_sum_slice(&mut v);
    let squares = (0..n).map(|i| i * i).sum::<i64>();
    assert_eq!(v, [tri - n, n - tri, squares, 7 * n]);
    let mut lo = [r as f64, -(r as f64), 2.0];
    mttl::allreduce_min_slice(&mut lo);
    assert_eq!(lo, [0.0, -((n - 1) as f64), 2.0]);
    let mut hi = [r as u32, 100 - r as u32];
    mttl::allreduce_max_slice(&mut hi);
    assert_eq!(hi, [(n - 1) as u32, 100]);

    // IS's bucket histogram: 1024 i32s.
    let mut buckets: Vec<i32> = (0..1024).map(|i| i * (r as i32 + 1)).collect();
    mttl::allreduce_sum_slice(&mut buckets);
    assert!(buckets
        .iter()
        .enumerate()
        .all(|(i, &b)| b == i as i32 * tri as i32));

    // Past the eager limit: 800 KB per message.
    let mut big: Vec<f64> = (0..100_000).map(|i| (i % 7) as f64 + r as f64).collect();
    mttl::allreduce_sum_slice(&mut big);
    assert!(big
        .iter()
        .enumerate()
        .all(|(i, &x)| x == n as f64 * (i % 7) as f64 + (tri - n) as f64));

    // Any encodable value with any associative operation.
    let pair = mttl::allreduce((r, r), |a, b| (a.0.min(b.0), a.1.max(b.1)));
    assert_eq!(pair, (0, n - 1));
    let zipped = mttl::allreduce(vec![r as u64; 3], |a, b| {
        a.iter().zip(&b).map(|(x, y)| x + y).collect()
    });
    assert_eq!(zipped, vec![(tri - n) as u64; 3]);

    for root in 0..mttl::size() {
        let got = mttl::reduce(root, r + 1, |a, b| a + b);
        assert_eq!(got, (me() == root).then_some(tri), "reduce to {root}");
    }
}

fn allreduce_sums_mins_and_maxes(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(numbers_task, ());
    });
}

// ---------------------------------------------------------------- order

/// The documented brackets: the binomial tree over `lo..lo + len`, the
/// right half dropped where it lies beyond `n`.
fn bracketed(lo: usize, len: usize, n: usize) -> String {
    if len == 1 {
        return lo.to_string();
    }
    let half = len / 2;
    if lo + half >= n {
        return bracketed(lo, half, n);
    }
    format!(
        "({}+{})",
        bracketed(lo, half, n),
        bracketed(lo + half, half, n)
    )
}

/// A float per rank whose sum depends on the order of the additions.
fn awkward(rank: usize) -> f64 {
    [1e16, 1.0, -1e16, 0.1, 3.3, -2.2, 1e-3, 7.0][rank % 8] * (1.0 + rank as f64 * 1e-9)
}

/// `awkward`'s sum in the documented order and brackets.
fn awkward_sum(lo: usize, len: usize, n: usize) -> f64 {
    if len == 1 {
        return awkward(lo);
    }
    let half = len / 2;
    if lo + half >= n {
        return awkward_sum(lo, half, n);
    }
    awkward_sum(lo, half, n) + awkward_sum(lo + half, half, n)
}

#[mttl::remote]
fn order_task() {
    let (r, n) = (me(), n());
    let concat = mttl::allreduce(format!("{r},"), |a, b| a + &b);
    let expect: String = (0..n).map(|i| format!("{i},")).collect();
    assert_eq!(concat, expect, "concatenation is in rank order");

    let all = n.next_power_of_two();
    let tree = bracketed(0, all, n);
    let brackets = mttl::allreduce(r.to_string(), |a, b| format!("({a}+{b})"));
    assert_eq!(brackets, tree, "allreduce's brackets");
    for root in 0..n {
        let got = mttl::reduce(root, r.to_string(), |a, b| format!("({a}+{b})"));
        assert_eq!(
            got,
            (r == root).then(|| tree.clone()),
            "reduce's brackets at {root}"
        );
    }

    // Floating point: the documented order, and the same bits everywhere.
    let expect = awkward_sum(0, all, n).to_bits();
    let sum = mttl::allreduce_sum(awkward(r)).to_bits();
    assert_eq!(sum, expect, "allreduce_sum's bits");
    let generic = mttl::allreduce(awkward(r), |a, b| a + b).to_bits();
    assert_eq!(generic, expect, "allreduce's bits");
    if let Some(reduced) = mttl::reduce(0, awkward(r), |a, b| a + b) {
        assert_eq!(reduced.to_bits(), expect, "reduce's bits");
    }
    let everyone = mttl::allgather(sum);
    assert!(everyone.iter().all(|&b| b == expect), "{everyone:?}");
}

fn reduction_order_is_rank_order(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(order_task, ());
    });
}

// ---------------------------------------------------------------- broadcast

/// Deterministic bytes: a different pattern for every `(seed, len)`.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[mttl::remote]
fn broadcast_task() {
    let r = me();
    for root in 0..n() {
        let words = |root: usize| vec![format!("from {root}"), "x".repeat(root)];
        let mine = if r == root { words(root) } else { Vec::new() };
        assert_eq!(mttl::broadcast(root, mine), words(root));

        let mut v = [r as f64; 5];
        if r == root {
            v = [1.5, -2.0, root as f64, f64::MAX, 0.0];
        }
        mttl::broadcast_slice(root, &mut v);
        assert_eq!(v, [1.5, -2.0, root as f64, f64::MAX, 0.0]);
    }
    // 1 MiB, past the eager limit: forwarded whole down the tree.
    let root = n() - 1;
    let big = mttl::broadcast(
        root,
        if r == root {
            pattern(9, 1 << 20)
        } else {
            Vec::new()
        },
    );
    assert!(big == pattern(9, 1 << 20), "the 1 MiB broadcast differs");
    let mut raw = vec![0u64; 200_000];
    if r == 0 {
        raw.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = i as u64 * 3);
    }
    mttl::broadcast_slice(0, &mut raw);
    assert!(raw.iter().enumerate().all(|(i, &x)| x == i as u64 * 3));
}

fn broadcast_from_every_root(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(broadcast_task, ());
    });
}

// ---------------------------------------------------------------- gather

#[mttl::remote]
fn gather_task() {
    let (r, n) = (me(), n());
    for root in 0..n {
        let got = mttl::gather(root, (r, format!("rank {r}"), vec![r as u8; r]));
        let expect: Vec<_> = (0..n)
            .map(|i| (i, format!("rank {i}"), vec![i as u8; i]))
            .collect();
        assert_eq!(got, (r == root).then_some(expect), "gather at {root}");
    }
    let tens = mttl::allgather(r * 10);
    assert_eq!(tens, (0..n).map(|i| i * 10).collect::<Vec<_>>());
    // 100 KB a node: the frames cross the eager limit.
    let big = mttl::allgather(pattern(r as u64, 100_000));
    assert!(big.len() == n && (0..n).all(|i| big[i] == pattern(i as u64, 100_000)));
    let big = mttl::gather(n - 1, pattern(r as u64 + 7, 70_000));
    if r == n - 1 {
        let big = big.expect("the root gets the values");
        assert!((0..n).all(|i| big[i] == pattern(i as u64 + 7, 70_000)));
    } else {
        assert!(big.is_none());
    }
}

fn gather_and_allgather_in_rank_order(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(gather_task, ());
    });
}

// ---------------------------------------------------------------- alltoall

#[mttl::remote]
fn alltoall_task() {
    let (r, n) = (me(), n());
    let got = mttl::alltoall((0..n).map(|d| format!("{r}->{d}")).collect());
    assert_eq!(got, (0..n).map(|s| format!("{s}->{r}")).collect::<Vec<_>>());

    // Blocks of 3: element k of the block for d is r*100 + d*10 + k.
    let send: Vec<i32> = (0..n * 3)
        .map(|i| (r * 100 + (i / 3) * 10 + i % 3) as i32)
        .collect();
    let mut recv = vec![-1; n * 3];
    mttl::alltoall_slice(&send, &mut recv);
    let expect: Vec<i32> = (0..n * 3)
        .map(|i| ((i / 3) * 100 + r * 10 + i % 3) as i32)
        .collect();
    assert_eq!(recv, expect);

    // Varying pieces, some empty, one past the eager limit.
    let count = |from: usize, to: usize| {
        if from == 1 && to == 0 {
            30_000
        } else {
            (from + 2 * to) % 3
        }
    };
    let value = |from: usize, to: usize, k: usize| (from * 1_000_000 + to * 100_000 + k) as u32;
    let counts: Vec<usize> = (0..n).map(|d| count(r, d)).collect();
    let send: Vec<u32> = (0..n)
        .flat_map(|d| (0..count(r, d)).map(move |k| value(r, d, k)))
        .collect();
    let mut recv = vec![7; 3];
    let got = mttl::alltoallv(&send, &counts, &mut recv);
    assert_eq!(got, (0..n).map(|s| count(s, r)).collect::<Vec<_>>());
    let expect: Vec<u32> = (0..n)
        .flat_map(|s| (0..count(s, r)).map(move |k| value(s, r, k)))
        .collect();
    assert!(recv == expect, "alltoallv delivered the wrong keys");
}

fn alltoall_exchanges(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(alltoall_task, ());
    });
}

// ---------------------------------------------------------------- sequences

#[mttl::remote]
fn back_to_back_task() -> u64 {
    let (r, n) = (me() as u64, n() as u64);
    for _ in 0..1000 {
        mttl::barrier();
    }
    for i in 0..1000u64 {
        assert_eq!(mttl::allreduce_sum(i * (r + 1)), i * n * (n + 1) / 2);
    }
    // A broadcast root sends and returns at once: it runs ahead, and the
    // other nodes find several later broadcasts waiting in their mailbox.
    for i in 0..1000u64 {
        let root = (i % n) as usize;
        let got = mttl::broadcast(root, i * 1000 + r);
        assert_eq!(got, i * 1000 + root as u64);
    }
    for i in 0..1000u64 {
        let root = (i % n) as usize;
        let got = mttl::reduce(root, i + r, |a, b| a + b);
        assert_eq!(got, (r as usize == root).then_some(n * i + n * (n - 1) / 2));
    }
    4000
}

fn thousand_back_to_back(t: Scenario) {
    on_each_size(t, || {
        let done = mttl::spmd(back_to_back_task, ());
        assert_eq!(done, vec![4000; mttl::size()]);
    });
}

#[mttl::remote]
fn interleaved_task() {
    let (r, n) = (me(), n());
    for i in 0..100 {
        stagger(i);
        mttl::barrier();
        stagger(i + 1);
        assert_eq!(mttl::broadcast(i % n, (i, r)), (i, i % n));
        stagger(i + 2);
        let root = (i + 1) % n;
        let sum = mttl::reduce(root, (i * r) as u64, |a, b| a + b);
        assert_eq!(sum, (r == root).then_some((i * n * (n - 1) / 2) as u64));
        assert_eq!(mttl::allreduce_max(i + r), i + n - 1);
        let root = (i + 2) % n;
        let got = mttl::gather(root, i + r);
        assert_eq!(got, (r == root).then(|| (0..n).map(|s| i + s).collect()));
        stagger(i + 3);
        assert_eq!(
            mttl::allgather(r ^ i),
            (0..n).map(|s| s ^ i).collect::<Vec<_>>()
        );
        let got = mttl::alltoall((0..n).map(|d| (i, r, d)).collect());
        assert_eq!(got, (0..n).map(|s| (i, s, r)).collect::<Vec<_>>());
        let mut v = [i as i32, r as i32];
        mttl::allreduce_sum_slice(&mut v);
        assert_eq!(v, [(i * n) as i32, (n * (n - 1) / 2) as i32]);
    }
}

fn kinds_interleaved_with_skew(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(interleaved_task, ());
    });
}

// ---------------------------------------------------------------- completion

/// Small `nwrite`s per destination per round, one element each.
const SLOTS: usize = 256;
/// Elements of the one large `nwrite` per destination per round (1 MiB).
const BIG: usize = 1 << 17;
const ROUNDS: u64 = 30;

/// What `src` writes in `round` at element `i` of its block.
fn stamp(round: u64, src: usize, i: usize) -> u64 {
    round << 40 | (src as u64) << 32 | i as u64
}

/// Many remote writes in flight, then a barrier: afterwards every node
/// finds every other node's writes of this round in its memory.
///
/// Each round, every node sends every other node one 1 MiB `nwrite` and
/// then 256 single-element ones behind it on the same link, and enters the
/// barrier without waiting. A barrier that returned before every node
/// entered it, or one that did not first `fence` its writes, fails here:
/// from 4 nodes on, the dissemination barrier reaches a node from some
/// sender only through third nodes, past the sender's writes still on
/// their way (at 2 and 3 nodes every node hears from every other directly,
/// behind its writes, so only the fence-less barrier at 4 shows it).
#[mttl::remote]
fn remote_writes_task() {
    let (me, n) = (me(), n());
    let small = mttl::GlobalArray::<u64>::new(n * SLOTS);
    let big = mttl::GlobalArray::<u64>::new(n * BIG);
    let smalls = mttl::allgather(small.global_ptr());
    let bigs = mttl::allgather(big.global_ptr());
    let mut chunk = vec![0u64; BIG];
    for round in 1..=ROUNDS {
        stagger(round as usize);
        for k in 1..n {
            let dest = (me + k) % n;
            for (i, x) in chunk.iter_mut().enumerate() {
                *x = stamp(round, me, i);
            }
            bigs[dest].add(me * BIG).nwrite_slice(&chunk);
            for i in 0..SLOTS {
                smalls[dest].add(me * SLOTS + i).nwrite(stamp(round, me, i));
            }
        }
        mttl::barrier();
        {
            let small = small.borrow();
            let big = big.borrow();
            for src in (0..n).filter(|&s| s != me) {
                for i in 0..SLOTS {
                    let got = small[src * SLOTS + i];
                    assert_eq!(
                        got,
                        stamp(round, src, i),
                        "round {round}: after the barrier, rank {me} lacks rank {src}'s small \
                         write {i} (holds {got:#x})"
                    );
                }
                let block = &big[src * BIG..(src + 1) * BIG];
                if let Some(i) = (0..BIG).find(|&i| block[i] != stamp(round, src, i)) {
                    panic!(
                        "round {round}: after the barrier, rank {me} lacks rank {src}'s large \
                         write from element {i} (holds {:#x})",
                        block[i]
                    );
                }
            }
        }
        // Nobody writes the next round before everyone has checked this one.
        mttl::barrier();
    }
}

fn barrier_completes_remote_writes(t: Scenario) {
    on_each_size(t, || {
        mttl::spmd(remote_writes_task, ());
    });
}

// ---------------------------------------------------------------- misuse

#[mttl::remote]
fn mismatched_task() {
    if me() == 0 {
        mttl::barrier();
    } else {
        mttl::allreduce_sum(1u32);
    }
}

fn mismatched_collectives_are_reported(t: Scenario) {
    for np in [2, 3] {
        let out = t.run(np, || {
            mttl::spmd(mismatched_task, ());
        });
        out.assert_failure();
        out.stderr_line(&["collective #0 is", "barrier", "allreduce", "same order"]);
    }
}

#[mttl::remote]
fn lone_barrier() {
    mttl::barrier();
}

#[mttl::remote]
fn broadcast_from_self() -> u64 {
    mttl::broadcast(me(), me() as u64)
}

fn mismatched_roots_are_reported(t: Scenario) {
    let out = t.run(2, || {
        // Both think they are the root: each returns at once, then gets the
        // other's value for a broadcast it has finished.
        mttl::spmd(broadcast_from_self, ());
    });
    out.assert_failure();
    out.stderr_line(&[
        "broadcast #0, which this node has already finished",
        "same roots",
    ]);
}

fn blocked_collective_names_itself(t: Scenario) {
    if t.in_job() {
        stop_job_on_panic();
    }
    t.run(2, || {
        let first = mttl::ainvoke(0, lone_barrier, ());
        let blocked = loop {
            mttl::yield_now();
            let threads = mttl::thread::blocked_threads();
            if let Some(b) = threads.into_iter().find(|b| b.reason.what() == "barrier") {
                break b;
            }
        };
        // What the deadlock watchdog prints: the collective, its
        // number, and the user's call site.
        assert_eq!(blocked.reason.detail(), Some(("number", 0)));
        let text = blocked.to_string();
        assert!(
            text.contains("barrier (number 0) at tests/collectives.rs:"),
            "{text}"
        );
        mttl::invoke(1, lone_barrier, ());
        first.wait();
    })
    .assert_success();
}

fn concurrent_collectives_on_one_node_are_reported(t: Scenario) {
    let out = t.run(2, || {
        // Two threads of node 0 in a collective at once; node 1 never joins.
        let first = mttl::ainvoke(0, lone_barrier, ());
        let second = mttl::ainvoke(0, lone_barrier, ());
        first.wait();
        second.wait();
    });
    out.assert_failure();
    out.stderr_line(&[
        "barrier was called while barrier #0 is still running",
        "one thread per node at a time",
    ]);
}
