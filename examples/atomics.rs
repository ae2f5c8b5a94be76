//! Remote atomics: threads on every node update counters that live on the
//! last node, and the totals come out exact.
//!
//! Each node runs `THREADS` threads; each thread, `ROUNDS` times:
//!
//! - takes a ticket with `fetch_add(1)` on counter 0;
//! - increments counter 1 with a `compare_exchange` loop (retrying when
//!   another thread got there first);
//! - records its largest ticket with `fetch_max` on counter 2.
//!
//! Every update is applied in one step at the owner, so none is lost:
//! counters 0 and 1 end at `nodes × THREADS × ROUNDS`, every ticket below
//! that is handed out exactly once, and counter 2 holds the last ticket.
//!
//! ```text
//! cargo run --example atomics                  # one node
//! MTTL_NP=4 cargo run --example atomics        # four nodes on TCP
//! ```

use std::time::Instant;

use mttl::{GlobalArray, GlobalPtr};

const THREADS: usize = 4;
const ROUNDS: u64 = 500;

thread_local! {
    static COUNTERS: std::cell::RefCell<Vec<GlobalArray<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Three zeroed counters on this node, kept for the rest of the run.
#[mttl::remote]
fn make_counters() -> GlobalPtr<u64> {
    let a = GlobalArray::<u64>::new(3);
    let p = a.global_ptr();
    COUNTERS.with(|c| c.borrow_mut().push(a));
    p
}

/// Starts `THREADS` threads on this node and waits for them; returns the
/// tickets they took.
#[mttl::remote]
fn node_work(counters: GlobalPtr<u64>) -> Vec<u64> {
    let threads: Vec<_> = (0..THREADS)
        .map(|_| mttl::ainvoke(mttl::rank(), thread_work, (counters,)))
        .collect();
    threads.into_iter().flat_map(mttl::Pending::wait).collect()
}

/// One thread's rounds (see the module docs).
#[mttl::remote]
fn thread_work(counters: GlobalPtr<u64>) -> Vec<u64> {
    let (tickets, cas, max) = (counters, counters.add(1), counters.add(2));
    let mut mine = Vec::with_capacity(ROUNDS as usize);
    for _ in 0..ROUNDS {
        let ticket = tickets.fetch_add(1);
        mine.push(ticket);
        let mut current = cas.read();
        while let Err(actual) = cas.compare_exchange(current, current + 1) {
            current = actual;
        }
        max.fetch_max(ticket);
    }
    mine
}

#[mttl::main]
fn main() -> Result<(), String> {
    let n = mttl::size();
    let owner = n - 1;
    let counters = mttl::invoke(owner, make_counters, ());
    let start = Instant::now();
    let tickets: Vec<u64> = mttl::spmd(node_work, (counters,)).concat();
    let elapsed = start.elapsed();

    let total = (n * THREADS) as u64 * ROUNDS;
    let [taken, incremented, largest] = <[u64; 3]>::try_from(counters.read_vec(3))
        .map_err(|v| format!("read {} counters", v.len()))?;
    let mut sorted = tickets;
    sorted.sort_unstable();
    let each_once = sorted.iter().copied().eq(0..total);

    println!(
        "atomics: {n} nodes x {THREADS} threads x {ROUNDS} rounds on counters at rank {owner} ({} backend)",
        mttl::backend_name()
    );
    println!(
        "fetch_add tickets:          {taken} (expected {total}), each handed out once: {each_once}"
    );
    println!("compare_exchange increments: {incremented} (expected {total})");
    println!(
        "fetch_max of tickets:       {largest} (expected {})",
        total - 1
    );
    println!(
        "{:.0} remote atomic operations per second",
        (total * 4) as f64 / elapsed.as_secs_f64()
    );
    if taken != total || incremented != total || largest != total - 1 || !each_once {
        return Err("an atomic update was lost or duplicated".into());
    }
    Ok(())
}
