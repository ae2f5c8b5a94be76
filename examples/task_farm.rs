//! A task farm: 10 000 tasks of very uneven cost, pulled one at a time by
//! worker threads on every other node from a master queue on node 0, so
//! that a worker that drew cheap tasks takes more of them and no node waits
//! for a slow one's share.
//!
//! It shows:
//!
//! - a queue as a [`mttl::SyncCell`] on node 0, kept in a `thread_local!`
//!   (node 0's state) and reached from every node by
//!   [`mttl::invoke`]`(0, next_task, ())`: the remote function runs on node
//!   0, where it takes the next task;
//! - results sent back through a [`mttl::GlobalSync`], the global handle of
//!   a cell that node 0's main reads, and [`mttl::fence`]: once a worker's
//!   fence returns, its results are in that cell;
//! - several threads per node ([`mttl::thread::spawn`]), and how to wait
//!   for them with today's API: each thread writes into a `SyncCell<()>`
//!   when it ends, and the task that spawned them reads it once per
//!   thread. The threads of one node take turns: one computes until it
//!   blocks in its next `invoke`, and the others' replies wait meanwhile;
//! - why node 0 runs no workers when there are other nodes: its loop
//!   answers a `next_task` only between two of its threads' turns, so a
//!   worker computing there would keep every other node waiting for its
//!   next task (and, taking its own tasks by a local call, would take most
//!   of them).
//!
//! The result is checked: every task done exactly once, and a sample of
//! the results recomputed.
//!
//! ```text
//! MTTL_NP=4 cargo run --release --example task_farm         # 10 000 tasks on four nodes
//! MTTL_NP=4 cargo run --example task_farm 2000              # 2 000 tasks
//! MTTL_BACKEND=local MTTL_NP=4 cargo run --example task_farm 2000
//! ```
//!
//! It prints one line ending in `each done once: OK` when every check
//! passed (and panics, failing the job, otherwise).

use std::cell::RefCell;

use mttl::{GlobalSync, SyncCell};

/// Tasks in all, unless the first argument says otherwise.
const DEFAULT_TASKS: u32 = 10_000;
/// Worker threads on each node that works.
const WORKERS_PER_NODE: usize = 2;

/// One finished task: its number, its result, and the node that ran it.
type Done = (u32, u64, u32);

thread_local! {
    /// Node 0's queue of task numbers, set by main before the workers start.
    static QUEUE: RefCell<Option<SyncCell<u32>>> = const { RefCell::new(None) };
}

/// The cost of task `t`: 1 to 4 000 rounds, most of them cheap, a few very
/// expensive.
fn cost(t: u32) -> u64 {
    let r = u64::from(t).wrapping_mul(0x9e37_79b9) % 1000;
    1 + r * r * r / 250_000
}

/// Task `t`'s work: `cost(t)` rounds of mixing.
fn run_task(t: u32) -> u64 {
    (0..cost(t) * 10).fold(u64::from(t), |x, i| {
        (x ^ i).wrapping_mul(0x94d0_49bb_1331_11eb).rotate_left(17)
    })
}

/// Runs on node 0: the next task, or `None` when the queue is empty.
#[mttl::remote]
fn next_task() -> Option<u32> {
    QUEUE.with(|q| {
        q.borrow()
            .as_ref()
            .expect("main filled the queue before starting the workers")
            .try_read()
    })
}

/// Worker threads on this node: none on node 0 when others can work, so
/// that it answers `next_task` at once.
fn workers_here() -> usize {
    if mttl::rank() == 0 && mttl::size() > 1 {
        0
    } else {
        WORKERS_PER_NODE
    }
}

/// The SPMD task: runs this node's worker threads and returns, once they
/// are all done, how many tasks this node ran.
#[mttl::remote]
fn work(results: GlobalSync<Done>) -> u64 {
    let finished: SyncCell<u64> = SyncCell::new();
    let workers = workers_here();
    for _ in 0..workers {
        let finished = finished.clone();
        mttl::thread::spawn("worker", move || {
            let mut ran = 0;
            while let Some(t) = mttl::invoke(0, next_task, ()) {
                results.write((t, run_task(t), mttl::rank() as u32));
                ran += 1;
            }
            finished.write(ran);
        });
    }
    // Wait for the workers: one value from each.
    let ran = (0..workers).map(|_| finished.read()).sum();
    // This node's result writes are in node 0's cell once the fence returns.
    mttl::fence();
    ran
}

#[mttl::main]
fn main() {
    let tasks: u32 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .unwrap_or_else(|_| panic!("the number of tasks must be a whole number, not {arg:?}")),
        None => DEFAULT_TASKS,
    };
    let queue = SyncCell::new();
    for t in 0..tasks {
        queue.write(t);
    }
    QUEUE.with(|q| *q.borrow_mut() = Some(queue));

    let results: SyncCell<Done> = SyncCell::new();
    let started = std::time::Instant::now();
    let per_node = mttl::spmd(work, (results.global(),));
    let elapsed = started.elapsed();

    // Every worker fenced before its node's task returned: all results are
    // in the cell.
    let mut seen = vec![false; tasks as usize];
    let mut by_node = vec![0u64; mttl::size()];
    while let Some((t, result, node)) = results.try_read() {
        assert!(!seen[t as usize], "task {t} was done twice");
        seen[t as usize] = true;
        by_node[node as usize] += 1;
        if t % 97 == 0 {
            assert_eq!(result, run_task(t), "task {t}'s result is wrong");
        }
    }
    let missing = seen.iter().filter(|&&s| !s).count();
    assert_eq!(missing, 0, "{missing} tasks were never done");
    assert_eq!(
        per_node, by_node,
        "the nodes' counts differ from the results"
    );
    let workers = if mttl::size() > 1 {
        (mttl::size() - 1) * WORKERS_PER_NODE
    } else {
        WORKERS_PER_NODE
    };
    println!(
        "task_farm: {tasks} tasks on {} nodes ({workers} workers, tasks per node {by_node:?}) in {:.3} s, each done once: OK",
        mttl::size(),
        elapsed.as_secs_f64()
    );
}
