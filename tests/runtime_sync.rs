//! `SyncCell` across nodes through `GlobalSync`, on every backend: several
//! writers on several nodes and several readers, FIFO order kept per
//! writer, blocked readers woken by remote writes, `peek` and `queue_len`,
//! and a cell owned by a node other than 0.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::collections::BTreeMap;

use mttl::{GlobalSync, SyncCell};
use runtime_support::{on_every_backend, Scenario};

on_every_backend!(
    many_writers_many_readers_keep_per_writer_order,
    peek_and_queue_len_see_queued_values,
    cell_on_another_node_fed_by_every_node,
    a_stale_global_handle_never_reaches_a_newer_cell,
    barrier_makes_global_sync_writes_visible,
    a_thread_that_only_yields_sees_remote_writes,
);

/// What writers write: (writer id, sequence number).
type Item = (u32, u32);

/// Writes `count` items of `writer` into `cell`, yielding now and then so
/// that writers on one node interleave.
#[mttl::remote]
fn produce(cell: GlobalSync<Item>, writer: u32, count: u32) -> u32 {
    for seq in 0..count {
        cell.write((writer, seq));
        if seq % 7 == 0 {
            mttl::yield_now();
        }
    }
    count
}

/// Owns a cell on this node, announces its handle, reads `expected` items
/// from it and returns them in the order read.
#[mttl::remote]
fn consume(expected: u32, announce: GlobalSync<GlobalSync<Item>>) -> Vec<Item> {
    let cell: SyncCell<Item> = SyncCell::new();
    announce.write(cell.global());
    (0..expected).map(|_| cell.read()).collect()
}

/// Checks that `seen` holds each writer's items in increasing order and
/// returns how many it holds of each writer.
#[track_caller]
fn check_per_writer_order(who: &str, seen: &[Item]) -> BTreeMap<u32, u32> {
    let mut next: BTreeMap<u32, u32> = BTreeMap::new();
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    for &(writer, seq) in seen {
        let least = next.entry(writer).or_insert(0);
        assert!(
            seq >= *least,
            "{who}: writer {writer}'s item {seq} came after its item {}",
            *least - 1
        );
        *least = seq + 1;
        *counts.entry(writer).or_insert(0) += 1;
    }
    counts
}

fn many_writers_many_readers_keep_per_writer_order(t: Scenario) {
    t.run(4, || {
        const WRITERS_PER_NODE: u32 = 2;
        const COUNT: u32 = 500;
        const READERS: u32 = 3;
        let writers = WRITERS_PER_NODE * (mttl::size() as u32 - 1);
        let total = writers * COUNT;
        assert_eq!(total % READERS, 0);

        let cell: SyncCell<Item> = SyncCell::new();
        let handle = cell.global();
        assert_eq!(handle, cell.global(), "a cell has one global handle");
        assert_eq!(handle.node(), 0);

        // The readers start first and block on the empty cell.
        let results: SyncCell<(u32, Vec<Item>)> = SyncCell::new();
        for reader in 0..READERS {
            let (cell, results) = (cell.clone(), results.clone());
            mttl::thread::spawn("reader", move || {
                let seen: Vec<Item> = (0..total / READERS).map(|_| cell.read()).collect();
                results.write((reader, seen));
            });
        }
        mttl::yield_now();
        assert_eq!(cell.queue_len(), 0);

        let calls: Vec<_> = (0..writers)
            .map(|w| {
                let node = 1 + (w / WRITERS_PER_NODE) as usize;
                mttl::ainvoke(node, produce, (handle, w, COUNT))
            })
            .collect();
        for call in calls {
            assert_eq!(call.wait(), COUNT);
        }

        let mut all: BTreeMap<u32, u32> = BTreeMap::new();
        for _ in 0..READERS {
            let (reader, seen) = results.read();
            assert_eq!(seen.len() as u32, total / READERS);
            for (writer, n) in check_per_writer_order(&format!("reader {reader}"), &seen) {
                *all.entry(writer).or_insert(0) += n;
            }
        }
        let expected: BTreeMap<u32, u32> = (0..writers).map(|w| (w, COUNT)).collect();
        assert_eq!(all, expected, "items read per writer");
        assert_eq!(cell.queue_len(), 0);
        assert_eq!(cell.try_read(), None);
        println!("{READERS} readers got {total} items from {writers} writers in order");
    })
    .assert_success();
}

fn peek_and_queue_len_see_queued_values(t: Scenario) {
    t.run(3, || {
        const COUNT: u32 = 100;
        let cell: SyncCell<Item> = SyncCell::new();
        let handle = cell.global();
        assert_eq!(cell.peek(), None);
        assert_eq!(cell.queue_len(), 0);

        // A writer's items have all arrived once its call has returned: the
        // reply travels the same ordered path after them.
        let calls: Vec<_> = (1..3u32)
            .map(|node| mttl::ainvoke(node as usize, produce, (handle, node, COUNT)))
            .collect();
        for call in calls {
            call.wait();
        }
        assert_eq!(cell.queue_len(), 2 * COUNT as usize);
        // Writes from this node, through the handle and directly.
        handle.write((0, 0));
        cell.write((0, 1));
        let total = 2 * COUNT as usize + 2;
        assert_eq!(cell.queue_len(), total);

        let mut seen = Vec::new();
        while let Some(front) = cell.peek() {
            let len = cell.queue_len();
            assert_eq!(cell.peek(), Some(front), "peek does not take");
            assert_eq!(cell.read(), front, "read takes what peek showed");
            assert_eq!(cell.queue_len(), len - 1);
            seen.push(front);
        }
        assert_eq!(seen.len(), total);
        assert_eq!(&seen[total - 2..], &[(0, 0), (0, 1)], "local writes last");
        let counts = check_per_writer_order("the reader", &seen);
        assert_eq!(counts.get(&1), Some(&COUNT));
        assert_eq!(counts.get(&2), Some(&COUNT));
        assert_eq!(cell.try_read(), None);
        assert_eq!(cell.queue_len(), 0);
    })
    .assert_success();
}

fn cell_on_another_node_fed_by_every_node(t: Scenario) {
    t.run(4, || {
        const COUNT: u32 = 300;
        let n = mttl::size() as u32;
        // The consumer on node 1 makes its cell and sends back its handle.
        let announced: SyncCell<GlobalSync<Item>> = SyncCell::new();
        let consumer = mttl::ainvoke(1, consume, (n * COUNT, announced.global()));
        let remote_cell = announced.read();
        assert_eq!(remote_cell.node(), 1);

        // One writer on every node, node 1's own included.
        let calls: Vec<_> = (0..n)
            .map(|node| mttl::ainvoke(node as usize, produce, (remote_cell, node, COUNT)))
            .collect();
        for call in calls {
            assert_eq!(call.wait(), COUNT);
        }
        let seen = consumer.wait();
        assert_eq!(seen.len() as u32, n * COUNT);
        let counts = check_per_writer_order("node 1's reader", &seen);
        let expected: BTreeMap<u32, u32> = (0..n).map(|w| (w, COUNT)).collect();
        assert_eq!(counts, expected, "items read per writer");
    })
    .assert_success();
}

thread_local! {
    /// A cell a node keeps between calls.
    static KEPT: std::cell::RefCell<Option<SyncCell<Vec<u8>>>> = const { std::cell::RefCell::new(None) };
}

/// Makes a cell, returns its handle and drops the cell.
#[mttl::remote]
fn dropped_cell() -> GlobalSync<Vec<u8>> {
    SyncCell::<Vec<u8>>::new().global()
}

/// Makes a cell this node keeps, and returns its handle.
#[mttl::remote]
fn kept_cell() -> GlobalSync<Vec<u8>> {
    let cell = SyncCell::new();
    let handle = cell.global();
    KEPT.with(|k| *k.borrow_mut() = Some(cell));
    handle
}

/// Takes every value queued in the kept cell without waiting.
#[mttl::remote]
fn drain_kept() -> Vec<Vec<u8>> {
    KEPT.with(|k| {
        let kept = k.borrow();
        let cell = kept.as_ref().expect("a kept cell");
        std::iter::from_fn(|| cell.try_read()).collect()
    })
}

fn a_stale_global_handle_never_reaches_a_newer_cell(t: Scenario) {
    let out = t.run(2, || {
        let stale = mttl::invoke(1, dropped_cell, ());
        let live = mttl::invoke(1, kept_cell, ());
        assert_ne!(stale, live, "a new cell must not get a dead cell's handle");
        stale.write(b"to the dead cell".to_vec());
        live.write(b"to the live cell".to_vec());
        mttl::fence();
        assert_eq!(
            mttl::invoke(1, drain_kept, ()),
            vec![b"to the live cell".to_vec()]
        );
    });
    out.assert_success();
    out.stderr_line(&[
        "mttl: rank 1: a write from rank 0 was lost",
        "does not exist",
    ]);
}

/// Writes `count` values into `cell` (rank 0; one from every other rank),
/// then enters a barrier; returns how many values the kept cell holds after
/// it (on its node).
#[mttl::remote]
fn write_then_barrier(cell: GlobalSync<Vec<u8>>, count: usize) -> usize {
    let me = mttl::rank();
    let n = if me == 0 { count } else { 1 };
    for _ in 0..n {
        cell.write(vec![me as u8; 8]);
    }
    mttl::barrier();
    if me == cell.node() {
        KEPT.with(|k| k.borrow().as_ref().expect("a kept cell").queue_len())
    } else {
        0
    }
}

fn barrier_makes_global_sync_writes_visible(t: Scenario) {
    const FROM_0: usize = 20_000;
    t.run(4, || {
        let cell = mttl::invoke(3, kept_cell, ());
        // A fence waits for GlobalSync writes: it asks their node.
        cell.write(vec![0; 8]);
        let before = mttl::stats().messages();
        mttl::fence();
        assert!(
            mttl::stats().messages() > before,
            "a fence after a GlobalSync write sent nothing"
        );
        assert_eq!(mttl::invoke(3, drain_kept, ()).len(), 1);
        // Rank 3 does not hear from rank 0 in a 4-rank dissemination
        // barrier, and rank 0 writes a lot: without the fence in the
        // barrier, rank 3 could leave before the last writes arrive.
        for round in 0..3 {
            let seen = mttl::spmd(write_then_barrier, (cell, FROM_0));
            assert_eq!(
                seen[3],
                FROM_0 + 3,
                "round {round}: values at rank 3 after the barrier"
            );
            assert_eq!(mttl::invoke(3, drain_kept, ()).len(), FROM_0 + 3);
        }
    })
    .assert_success();
}

/// Writes `count` items into `cell` with no reply awaited in between.
#[mttl::remote]
fn feed(cell: GlobalSync<Item>, count: u32) {
    for seq in 0..count {
        cell.write((1, seq));
    }
}

/// Node 0's main never blocks: it polls its cell with `peek` and yields,
/// while node 1 writes into the cell. Every write must reach it (the loop
/// looks at the network while threads stay ready), in order.
fn a_thread_that_only_yields_sees_remote_writes(t: Scenario) {
    t.run(2, || {
        const COUNT: u32 = 200;
        let cell: SyncCell<Item> = SyncCell::new();
        let _call = mttl::ainvoke(1, feed, (cell.global(), COUNT));
        let start = std::time::Instant::now();
        let mut seen = Vec::new();
        while seen.len() < COUNT as usize {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "only {} of {COUNT} writes seen while yielding",
                seen.len()
            );
            match cell.try_read() {
                Some(item) => seen.push(item),
                None => mttl::yield_now(),
            }
        }
        let expected: Vec<Item> = (0..COUNT).map(|seq| (1, seq)).collect();
        assert_eq!(seen, expected);
        println!("{COUNT} writes seen by a thread that only yields");
    })
    .assert_success();
}
