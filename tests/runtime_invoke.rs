//! `invoke`, `ainvoke`, `try_invoke` and `spmd` across a job, on every
//! backend: calls to every node including the caller's own, thousands of
//! calls in flight, arguments and results past the eager limit (the
//! control + data split), the per-rank statistics they leave, and `flush`.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    invoke_reaches_every_node_including_self,
    ainvoke_ten_thousand_in_flight,
    spmd_returns_results_by_rank,
    large_arguments_and_results_cross_intact,
    stats_line_per_rank_counts_the_calls,
    a_dropped_call_does_not_take_a_later_calls_reply,
    a_burst_of_mixed_sizes_keeps_its_order,
    a_burst_keeps_its_order_without_aggregation,
    flush_sends_a_burst_before_a_computation,
);

/// Where a call ran, and what it was given.
#[mttl::remote]
fn whereabouts(asker: usize, token: u64) -> (usize, usize, usize, u64) {
    (mttl::rank(), mttl::size(), asker, token.wrapping_mul(3))
}

#[mttl::remote]
fn affine(i: u64) -> u64 {
    i * 7 + mttl::rank() as u64
}

/// A checksum of `data` that notices reordered or dropped bytes.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

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
fn measure(data: Vec<u8>) -> (u64, u64) {
    (data.len() as u64, checksum(&data))
}

/// Returns `data` reversed, so the reply is as large as the request and
/// provably produced by the callee.
#[mttl::remote]
fn reversed(mut data: Vec<u8>) -> Vec<u8> {
    data.reverse();
    data
}

fn invoke_reaches_every_node_including_self(t: Scenario) {
    t.run(4, || {
        let n = mttl::size();
        assert_eq!(n, 4);
        for round in 0..3u64 {
            for node in 0..n {
                let token = round * 100 + node as u64;
                let got = mttl::invoke(node, whereabouts, (mttl::rank(), token));
                assert_eq!(got, (node, n, 0, token * 3), "invoke on node {node}");
                let tried = mttl::try_invoke(node, whereabouts, (mttl::rank(), token));
                assert_eq!(tried, Ok((node, n, 0, token * 3)), "try_invoke on {node}");
                let pending = mttl::ainvoke(node, whereabouts, (mttl::rank(), token));
                assert_eq!(pending.wait(), (node, n, 0, token * 3), "ainvoke on {node}");
            }
        }
        println!("every node answered");
    })
    .assert_success();
}

fn ainvoke_ten_thousand_in_flight(t: Scenario) {
    t.run(4, || {
        const CALLS: u64 = 10_000;
        let n = mttl::size() as u64;
        // Every call is started before the first is waited for; one in
        // sixteen goes to this node itself, the rest round-robin elsewhere.
        let calls: Vec<(u64, usize, mttl::Pending<u64>)> = (0..CALLS)
            .map(|i| {
                let node = if i % 16 == 0 {
                    0
                } else {
                    (1 + i % (n - 1)) as usize
                };
                (i, node, mttl::ainvoke(node, affine, (i,)))
            })
            .collect();
        // Wait in reverse order: the last replies are waited for first.
        let mut sum = 0u64;
        for (i, node, pending) in calls.into_iter().rev() {
            let got = pending.wait();
            assert_eq!(got, i * 7 + node as u64, "call {i} on node {node}");
            sum += got;
        }
        println!("{CALLS} calls in flight, sum {sum}");
    })
    .assert_success();
}

fn spmd_returns_results_by_rank(t: Scenario) {
    t.run(3, || {
        let results = mttl::spmd(whereabouts, (0usize, 5u64));
        let expected: Vec<_> = (0..3).map(|r| (r, 3, 0, 15)).collect();
        assert_eq!(results, expected);
    })
    .assert_success();
}

fn large_arguments_and_results_cross_intact(t: Scenario) {
    const EAGER_LIMIT: usize = 64 << 10;
    let t = t.env("MTTL_EAGER_LIMIT", &EAGER_LIMIT.to_string());
    t.run(2, || {
        // Below, around and above the 64 KiB eager limit, then 4 MiB.
        let sizes = [
            0,
            100,
            60_000,
            EAGER_LIMIT - 1,
            EAGER_LIMIT,
            EAGER_LIMIT + 1,
            1 << 20,
            4 << 20,
        ];
        for (i, &len) in sizes.iter().enumerate() {
            let data = pattern(i as u64, len);
            let expected = (len as u64, checksum(&data));
            let before = mttl::stats();
            assert_eq!(
                mttl::invoke(1, measure, (data.clone(),)),
                expected,
                "a {len}-byte argument"
            );
            // The split sends the body of an owned argument by nsend; a body
            // within the limit (the encoded length adds a few bytes) rides
            // in the control message.
            let split = mttl::stats().nsend - before.nsend;
            if len > EAGER_LIMIT {
                assert_eq!(split, 1, "a {len}-byte argument goes as header + body");
            } else if len <= 60_000 {
                assert_eq!(split, 0, "a {len}-byte argument goes in one message");
            }
            let back = mttl::invoke(1, reversed, (data.clone(),));
            assert_eq!(back.len(), len, "a {len}-byte result");
            assert!(
                back.iter().rev().eq(data.iter()),
                "the {len}-byte result differs from the argument reversed"
            );
        }
        // Several large calls in flight at once, interleaved with small ones:
        // each large header must meet its own body.
        let calls: Vec<_> = (0..6u64)
            .map(|i| {
                let len = if i % 2 == 0 {
                    (1 << 20) + i as usize
                } else {
                    10
                };
                let data = pattern(100 + i, len);
                let expected = (len as u64, checksum(&data));
                (expected, mttl::ainvoke(1, measure, (data,)))
            })
            .collect();
        for (expected, pending) in calls {
            assert_eq!(pending.wait(), expected);
        }
        println!("large arguments crossed intact");
    })
    .assert_success();
}

fn stats_line_per_rank_counts_the_calls(t: Scenario) {
    const CALLS_PER_NODE: u64 = 50;
    let out = t.env("MTTL_STATS", "1").run(3, || {
        for node in 1..mttl::size() {
            for i in 0..CALLS_PER_NODE {
                assert_eq!(mttl::invoke(node, affine, (i,)), i * 7 + node as u64);
            }
        }
        let own = mttl::stats();
        assert!(own.send >= 2 * CALLS_PER_NODE, "rank 0 so far: {own}");
    });
    out.assert_success();
    for rank in 0..3 {
        let prefix = format!("mttl stats rank {rank}: ");
        let line = out
            .stderr
            .lines()
            .find_map(|l| l.split_once(&prefix).map(|(_, rest)| rest))
            .unwrap_or_else(|| panic!("no stats line for rank {rank}:\n{}", out.stderr));
        let count = |name: &str| -> u64 {
            let mut words = line.split_whitespace();
            words
                .position(|w| w == name)
                .and_then(|_| words.next())
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("rank {rank}: no count for {name:?} in {line:?}"))
        };
        let (send, recv, msgs) = (count("send"), count("recv"), count("msgs"));
        // Rank 0 sent 50 calls to each of 2 ranks (plus the exit messages);
        // each other rank received its 50 and answered each.
        let (least_sent, least_received) = if rank == 0 {
            (2 * CALLS_PER_NODE, 2 * CALLS_PER_NODE)
        } else {
            (CALLS_PER_NODE, CALLS_PER_NODE)
        };
        assert!(send >= least_sent, "rank {rank} send {send}: {line}");
        assert!(recv >= least_received, "rank {rank} recv {recv}: {line}");
        // Nothing else is going on: not wildly more than that either.
        assert!(send <= least_sent + 10, "rank {rank} send {send}: {line}");
        assert!(
            recv <= least_received + 10,
            "rank {rank} recv {recv}: {line}"
        );
        assert!(msgs >= send, "rank {rank}: {line}");
        assert!(
            line.contains(" KB") && line.contains(" MB"),
            "rank {rank}: {line}"
        );
    }
}

/// Blocks this node (its only OS thread) for `ms`, then returns `value`.
#[mttl::remote]
fn late(ms: u64, value: u64) -> u64 {
    std::thread::sleep(std::time::Duration::from_millis(ms));
    value
}

fn a_dropped_call_does_not_take_a_later_calls_reply(t: Scenario) {
    t.run(2, || {
        for round in 0..3 {
            // Started and dropped unwaited: its reply comes later.
            drop(mttl::ainvoke(1, late, (30, 111)));
            // The next call's reply cell must not receive that reply.
            assert_eq!(
                mttl::invoke(1, affine, (round,)),
                round * 7 + 1,
                "round {round}: a later call got the reply of a dropped one"
            );
        }
    })
    .assert_success();
}

thread_local! {
    /// What [`log_arrival`] saw on this node, in order.
    static ARRIVALS: std::cell::RefCell<Vec<(u64, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Records call `i` and its payload's checksum on this node, before any
/// blocking, so the log is in arrival order.
#[mttl::remote]
fn log_arrival(i: u64, data: Vec<u8>) {
    ARRIVALS.with(|a| a.borrow_mut().push((i, checksum(&data))));
}

/// Takes this node's log.
#[mttl::remote]
fn take_arrivals() -> Vec<(u64, u64)> {
    ARRIVALS.with(|a| std::mem::take(&mut *a.borrow_mut()))
}

/// The payload length of call `i` of a burst: mostly a few bytes (batched),
/// now and then above a batch item's limit (sent at once) or above the
/// eager limit (header and body apart).
fn burst_len(i: u64) -> usize {
    match i % 97 {
        0 => 100_000,
        1 | 50 => 5_000,
        _ => (i % 40) as usize,
    }
}

/// Calls per target in [`burst_in_order`].
const CALLS: u64 = 3_000;

/// Fires a burst of calls from rank 0 at ranks 1 and 2 and checks each
/// target saw them in the order sent, with the right payloads. Returns how
/// many messages rank 0 sent for the burst.
fn burst_in_order() -> u64 {
    let before = mttl::stats().messages();
    let mut pending = Vec::new();
    for i in 0..CALLS {
        for node in [1, 2] {
            let data = pattern(i ^ node as u64, burst_len(i));
            pending.push(mttl::ainvoke(node, log_arrival, (i, data)));
        }
    }
    let sent = mttl::stats().messages() - before;
    for p in pending {
        p.wait();
    }
    for node in [1, 2] {
        let got = mttl::invoke(node, take_arrivals, ());
        let want: Vec<(u64, u64)> = (0..CALLS)
            .map(|i| (i, checksum(&pattern(i ^ node as u64, burst_len(i)))))
            .collect();
        assert_eq!(got.len(), want.len(), "calls seen on rank {node}");
        if let Some(k) = (0..got.len()).find(|&k| got[k] != want[k]) {
            panic!(
                "rank {node}: arrival {k} is {:?}, sent {:?}",
                got[k], want[k]
            );
        }
    }
    println!("both bursts arrived in order");
    sent
}

fn a_burst_of_mixed_sizes_keeps_its_order(t: Scenario) {
    t.run(3, || {
        let sent = burst_in_order();
        // Small calls leave in batches: far fewer messages than calls.
        assert!(sent < CALLS / 2, "{sent} messages for {} calls", 2 * CALLS);
    })
    .assert_success();
}

fn a_burst_keeps_its_order_without_aggregation(t: Scenario) {
    t.env("MTTL_AGGREGATE", "0")
        .run(3, || {
            let sent = burst_in_order();
            assert!(sent >= 2 * CALLS, "{sent} messages for {} calls", 2 * CALLS);
        })
        .assert_success();
}

/// Microseconds since the Unix epoch: a clock every rank of a job on one
/// machine shares.
fn now_us() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_micros() as u64)
}

/// When the call ran, by [`now_us`].
#[mttl::remote]
fn ran_at(_call: u32) -> u64 {
    now_us()
}

/// Two calls to one rank, then `flush`, then 400 ms of computing without
/// blocking or yielding: the second call, batched behind the first, runs
/// at once all the same, not when the computation ends.
fn flush_sends_a_burst_before_a_computation(t: Scenario) {
    t.run(2, || {
        let first = mttl::ainvoke(1, ran_at, (0,));
        let second = mttl::ainvoke(1, ran_at, (1,));
        mttl::flush();
        let start = now_us();
        let computing = std::time::Instant::now();
        while computing.elapsed() < std::time::Duration::from_millis(400) {
            std::hint::spin_loop();
        }
        let ran = [first.wait(), second.wait()];
        for (call, at) in ran.into_iter().enumerate() {
            let into = at.saturating_sub(start) / 1000;
            assert!(
                into < 200,
                "call {call} ran {into} ms into the computation, not before it"
            );
        }
    })
    .assert_success();
}
