//! The adaptive broadcast (`MTTL_BCAST=adaptive`, and `AdaptiveBroadcast`)
//! and the arrival-order baseline (`MTTL_BCAST=arrival`, and
//! `ArrivalOrderBroadcast`) across a job, on every backend: many
//! broadcasts of varying values from several roots and call sites give
//! every rank the root's value; a skewed arrival pattern changes the
//! learned table, identically on every rank and always a permutation
//! keeping the root's place, and the root counts its phases; a fixed table
//! stays as given; ranks calling one broadcast from different places are
//! reported, not left hanging.
//!
//! Nothing here asserts a timing: the machine running the tests is shared,
//! so only what the tables are, never how fast they got there.

mod runtime_support;

use std::time::Duration;

use runtime_support::{on_every_backend, stop_job_on_panic, Scenario};

on_every_backend!(
    adaptive_broadcasts_deliver_every_value,
    skewed_arrivals_change_the_table,
    different_call_sites_are_reported,
    arrival_order_broadcasts_deliver_every_value,
    fixed_tables_stay_as_given,
);

fn adaptive(t: Scenario) -> Scenario {
    t.env("MTTL_BCAST", "adaptive")
}

fn me() -> usize {
    mttl::rank()
}

/// Checks that `table` is a permutation of the job's ranks with `root` at
/// virtual 0.
fn assert_valid(table: &[usize], root: usize) {
    let mut seen = vec![false; table.len()];
    for &v in table {
        assert!(v < table.len() && !seen[v], "not a permutation: {table:?}");
        seen[v] = true;
    }
    assert_eq!(table[root], 0, "the root {root} lost its place: {table:?}");
}

#[mttl::remote]
fn many_broadcasts_task() -> Vec<(String, usize, Vec<usize>)> {
    let (r, n) = (me(), mttl::size());
    let kept = mttl::AdaptiveBroadcast::new();
    for i in 0..300usize {
        let root = (i / 7) % n;
        // Ranks arrive at different times, some far ahead of the others.
        if (i + r) % 5 == 0 {
            std::thread::sleep(Duration::from_micros(300 * (r as u64 + 1)));
        }
        let value = if r == root {
            format!("{i} from {root}")
        } else {
            String::new()
        };
        assert_eq!(mttl::broadcast(root, value), format!("{i} from {root}"));
        let mut slice = [0u64; 5];
        if r == root {
            slice = [i as u64, 1, 2, 3, root as u64];
        }
        mttl::broadcast_slice(root, &mut slice);
        assert_eq!(slice, [i as u64, 1, 2, 3, root as u64]);
        let other = n - 1 - root;
        let got = kept.broadcast(other, if r == other { i * 3 } else { 0 });
        assert_eq!(got, i * 3);
    }
    // 1 MiB, past the eager limit, with its trailer.
    let big: Vec<u8> = if r == 0 {
        (0..1 << 20).map(|k| (k % 251) as u8).collect()
    } else {
        Vec::new()
    };
    let big = mttl::broadcast(0, big);
    assert!(big.len() == 1 << 20 && big.iter().enumerate().all(|(k, &b)| b == (k % 251) as u8));
    mttl::adaptive_tables()
}

fn adaptive_broadcasts_deliver_every_value(t: Scenario) {
    if t.in_job() {
        stop_job_on_panic();
    }
    let t = adaptive(t);
    for np in [1, 3, 4] {
        t.run(np, || {
            let tables = mttl::spmd(many_broadcasts_task, ());
            for (rank, mine) in tables.iter().enumerate() {
                assert_eq!(
                    mine, &tables[0],
                    "rank {rank}'s tables differ from rank 0's"
                );
                for (_, root, table) in mine {
                    assert_valid(table, *root);
                }
            }
        })
        .assert_success();
    }
}

#[mttl::remote]
fn skewed_task() -> Vec<(String, usize, Vec<usize>)> {
    let r = me();
    for _ in 0..120 {
        // Rank 2 (the root's first child, which forwards to rank 3) works
        // longest; the data reaches rank 3 only after it.
        let work = match r {
            2 => 6,
            1 => 1,
            _ => 0,
        };
        std::thread::sleep(Duration::from_millis(work));
        mttl::broadcast(0, r);
        // As in an iterative solver: the next step starts together, so
        // the root does not run ahead of every report.
        mttl::barrier();
    }
    mttl::adaptive_tables()
}

fn skewed_arrivals_change_the_table(t: Scenario) {
    if t.in_job() {
        stop_job_on_panic();
    }
    adaptive(t)
        .run(4, || {
            let tables = mttl::spmd(skewed_task, ());
            let (_, root, table) = tables[0]
                .iter()
                .find(|(site, _, _)| site.contains("collectives_adaptive.rs"))
                .expect("rank 0 has the site's table")
                .clone();
            assert_eq!(root, 0);
            assert_valid(&table, 0);
            assert_ne!(table, vec![0, 1, 2, 3], "the skew changed nothing");
            for (rank, mine) in tables.iter().enumerate() {
                assert_eq!(
                    mine, &tables[0],
                    "rank {rank}'s tables differ from rank 0's"
                );
            }
        })
        .assert_success();
}

#[mttl::remote]
fn two_sites_task() {
    // One broadcast, called from two places: fine for the binomial tree,
    // not for tables kept per call site.
    if me() == 0 {
        mttl::broadcast(0, 1u32);
    } else {
        mttl::broadcast(0, 0u32);
    }
}

fn different_call_sites_are_reported(t: Scenario) {
    let out = adaptive(t).run(3, || {
        mttl::spmd(two_sites_task, ());
    });
    out.assert_failure();
    out.stderr_line(&["another call site", "MTTL_BCAST=adaptive"]);
}

#[mttl::remote]
fn arrival_task() -> usize {
    let (r, n) = (me(), mttl::size());
    let explicit = mttl::ArrivalOrderBroadcast;
    for i in 0..200usize {
        let root = (i / 5) % n;
        // Ranks arrive in a changing order, some far behind.
        if (i + 2 * r) % 3 == 0 {
            std::thread::sleep(Duration::from_micros(200 * ((r + i) % n) as u64));
        }
        let value = if r == root {
            format!("{i} from {root}")
        } else {
            String::new()
        };
        assert_eq!(mttl::broadcast(root, value), format!("{i} from {root}"));
        let mut slice = [0u32; 3];
        if r == root {
            slice = [i as u32, 7, root as u32];
        }
        explicit.broadcast_slice(root, &mut slice);
        assert_eq!(slice, [i as u32, 7, root as u32]);
    }
    let big: Vec<u8> = if r == n - 1 {
        (0..1 << 20).map(|k| (k % 253) as u8).collect()
    } else {
        Vec::new()
    };
    let big = explicit.broadcast(n - 1, big);
    assert!(big.len() == 1 << 20 && big.iter().enumerate().all(|(k, &b)| b == (k % 253) as u8));
    r
}

fn arrival_order_broadcasts_deliver_every_value(t: Scenario) {
    if t.in_job() {
        stop_job_on_panic();
    }
    let t = t.env("MTTL_BCAST", "arrival");
    for np in [1, 2, 5] {
        t.run(np, || {
            let ranks = mttl::spmd(arrival_task, ());
            assert_eq!(ranks, (0..mttl::size()).collect::<Vec<_>>());
        })
        .assert_success();
    }
}

#[mttl::remote]
fn fixed_table_task() -> (Vec<usize>, Option<(u64, u64, u64)>, String) {
    let r = me();
    let refused = mttl::AdaptiveBroadcast::with_table(0, &[1, 0, 2, 3])
        .expect_err("the root moved from virtual 0");
    let fixed = mttl::AdaptiveBroadcast::with_table(0, &[0, 3, 2, 1]).expect("a valid table");
    let learning = mttl::AdaptiveBroadcast::new();
    for i in 0..80u64 {
        // Rank 2 works longest; under the binomial table rank 3 waits
        // for it.
        std::thread::sleep(Duration::from_millis(if r == 2 { 4 } else { 0 }));
        assert_eq!(fixed.broadcast(0, if r == 0 { i } else { 0 }), i);
        assert_eq!(learning.broadcast(0, if r == 0 { i } else { 0 }), i);
        mttl::barrier();
    }
    let progress = learning
        .progress(0)
        .map(|p| (p.broadcasts, p.phases, p.changes));
    (fixed.table(0).expect("broadcast there"), progress, refused)
}

fn fixed_tables_stay_as_given(t: Scenario) {
    if t.in_job() {
        stop_job_on_panic();
    }
    t.run(4, || {
        let got = mttl::spmd(fixed_table_task, ());
        for (rank, (table, progress, refused)) in got.iter().enumerate() {
            assert_eq!(table, &vec![0, 3, 2, 1], "rank {rank}");
            assert!(refused.contains("not 0"), "{refused}");
            if rank == 0 {
                let (broadcasts, phases, changes) = progress.expect("the root counts");
                assert_eq!(broadcasts, 80);
                assert!(phases >= changes && changes > 0, "{progress:?}");
            } else {
                assert_eq!(*progress, None, "only the root learns");
            }
        }
    })
    .assert_success();
}
