//! Producers and consumers meeting in one `SyncCell`: producers on several
//! nodes write items into a cell on node 0 through its `GlobalSync` handle;
//! consumer threads on node 0 read them. The program checks that every item
//! arrived exactly once, that the sums agree, and that each producer's items
//! were taken in the order it wrote them (the cell is FIFO, and messages
//! from one node to another keep their order).
//!
//! ```text
//! MTTL_NP=4 cargo run --example producer_consumer
//! mttlrun -n 4 --backend mpi -- target/debug/examples/producer_consumer   # built with --features mpi
//! ```

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

use mttl::{GlobalSync, SyncCell};

/// Items each producer writes.
const ITEMS_PER_PRODUCER: u32 = 2_000;
/// Producer threads on each producing node.
const PRODUCERS_PER_NODE: u32 = 2;
/// Consumer threads on node 0.
const CONSUMERS: u32 = 3;

/// One unit of work, written by a producer and taken by a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, mttl::Encode, mttl::Decode)]
#[bincode(crate = "mttl::bincode")]
struct Item {
    producer: u32,
    seq: u32,
    value: u64,
}

/// What travels through the queue: an item, or `None` telling a consumer
/// to stop.
type Slot = Option<Item>;

/// The value of a producer's `seq`-th item (some arithmetic to stand in for
/// real work).
fn make_value(producer: u32, seq: u32) -> u64 {
    let x = u64::from(producer) << 32 | u64::from(seq);
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40
}

/// Runs on a producing node: writes `count` items into `queue` and returns
/// the sum of their values.
#[mttl::remote]
fn produce(queue: GlobalSync<Slot>, producer: u32, count: u32) -> u64 {
    let mut sum = 0;
    for seq in 0..count {
        let value = make_value(producer, seq);
        queue.write(Some(Item {
            producer,
            seq,
            value,
        }));
        sum += value;
        if seq % 64 == 63 {
            // Let the node's other producer write too.
            mttl::yield_now();
        }
    }
    sum
}

/// What one consumer took.
#[derive(Debug, Default)]
struct Tally {
    items: u64,
    sum: u64,
}

/// Checks the log of every take, in the order taken: each producer's items
/// must appear once each, in sequence. Returns the problems found.
fn check_order(log: &[(u32, u32)], producers: u32) -> Vec<String> {
    let mut next = vec![0u32; producers as usize];
    let mut problems = Vec::new();
    for &(producer, seq) in log {
        let expected = &mut next[producer as usize];
        if seq != *expected {
            problems.push(format!(
                "producer {producer}: item {seq} was taken when item {expected} was due"
            ));
        }
        *expected = seq + 1;
    }
    for (producer, &n) in next.iter().enumerate() {
        if n != ITEMS_PER_PRODUCER {
            problems.push(format!(
                "producer {producer}: {n} of {ITEMS_PER_PRODUCER} items taken"
            ));
        }
    }
    problems
}

#[mttl::main]
fn main() -> Result<(), String> {
    let nodes = mttl::size();
    // With one node, node 0 produces too (its producers run as local threads).
    let producing_nodes: Vec<usize> = if nodes == 1 {
        vec![0]
    } else {
        (1..nodes).collect()
    };
    let producers = PRODUCERS_PER_NODE * producing_nodes.len() as u32;
    println!(
        "{producers} producers on node(s) {producing_nodes:?} write {ITEMS_PER_PRODUCER} items \
         each into a SyncCell on node 0; {CONSUMERS} consumers on node 0 take them"
    );

    let queue: SyncCell<Slot> = SyncCell::new();
    let handle = queue.global();
    // Every take, in the order taken: threads switch only when they block,
    // so the take and the log entry after it are one step.
    let log: Rc<RefCell<Vec<(u32, u32)>>> = Rc::new(RefCell::new(Vec::new()));
    let tallies: SyncCell<(u32, Tally)> = SyncCell::new();
    for consumer in 0..CONSUMERS {
        let (queue, log, tallies) = (queue.clone(), log.clone(), tallies.clone());
        mttl::thread::spawn("consumer", move || {
            let mut tally = Tally::default();
            while let Some(item) = queue.read() {
                log.borrow_mut().push((item.producer, item.seq));
                tally.items += 1;
                tally.sum += item.value;
            }
            tallies.write((consumer, tally));
        });
    }

    let start = Instant::now();
    let calls: Vec<_> = (0..producers)
        .map(|p| {
            let node = producing_nodes[(p / PRODUCERS_PER_NODE) as usize];
            mttl::ainvoke(node, produce, (handle, p, ITEMS_PER_PRODUCER))
        })
        .collect();
    // A producer's reply comes after all its items (same path, in order).
    let produced_sum: u64 = calls.into_iter().map(mttl::Pending::wait).sum();
    for _ in 0..CONSUMERS {
        queue.write(None);
    }
    let mut consumed = Tally::default();
    for _ in 0..CONSUMERS {
        let (consumer, tally) = tallies.read();
        println!("consumer {consumer} took {} items", tally.items);
        consumed.items += tally.items;
        consumed.sum += tally.sum;
    }
    let elapsed = start.elapsed();

    let expected_items = u64::from(producers) * u64::from(ITEMS_PER_PRODUCER);
    let mut problems = check_order(&log.borrow(), producers);
    if consumed.items != expected_items {
        problems.push(format!(
            "{} items taken, {expected_items} written",
            consumed.items
        ));
    }
    if consumed.sum != produced_sum {
        problems.push(format!(
            "the values taken add up to {}, the producers wrote {produced_sum}",
            consumed.sum
        ));
    }
    if queue.queue_len() != 0 {
        problems.push(format!("{} items left in the queue", queue.queue_len()));
    }
    if !problems.is_empty() {
        return Err(problems.join("\n"));
    }
    println!(
        "OK: {} items, sum {produced_sum}, each producer's items taken in order \
         ({:.0} items/s)",
        consumed.items,
        consumed.items as f64 / elapsed.as_secs_f64()
    );
    Ok(())
}
