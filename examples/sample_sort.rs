//! A sample sort of 4 M random 64-bit keys spread over every node, the
//! classic use of [`mttl::alltoallv`]: each node sorts its keys, the nodes
//! agree on splitters by sampling, every key goes to the node whose range
//! holds it in one all-to-all exchange, and each node sorts what it
//! received. The result is checked: every node's keys sorted, each node's
//! keys below the next node's, as many keys as went in, and the same
//! checksum.
//!
//! The steps, run on every node by one SPMD task ([`mttl::spmd`]), so every
//! node calls the same collectives in the same order:
//!
//! 1. generate this node's share of the keys (deterministically, from the
//!    rank) and sort them;
//! 2. take `SAMPLES` evenly spaced keys as this node's sample;
//!    [`mttl::allgather`] gives every node all the samples, and every node
//!    picks the same `n - 1` splitters from them;
//! 3. cut the sorted keys at the splitters (`n` runs, run `d` for node
//!    `d`) and exchange the runs with [`mttl::alltoallv`] (plain data, sent
//!    as raw bytes);
//! 4. sort the keys received and report count, smallest, largest and
//!    checksum to node 0's main, which checks them.
//!
//! ```text
//! cargo run --release --example sample_sort                    # one node, 4 M keys
//! MTTL_NP=4 cargo run --release --example sample_sort          # four nodes on TCP
//! MTTL_NP=4 cargo run --release --example sample_sort 100000   # 100 000 keys in all
//! MTTL_BACKEND=local MTTL_NP=4 cargo run --example sample_sort 100000
//! ```
//!
//! It prints one line ending in `sorted: OK` when every check passed (and
//! panics, failing the job, otherwise).

use mttl::{Decode, Encode};

/// Keys in all, unless the first argument says otherwise.
const DEFAULT_KEYS: u64 = 4 << 20;
/// Keys each node contributes to the sample.
const SAMPLES: usize = 64;

/// What a node reports after the sort.
#[derive(Debug, Clone, Copy, Encode, Decode)]
#[bincode(crate = "mttl::bincode")]
struct Report {
    /// Keys this node generated.
    generated: u64,
    /// Keys this node holds after the exchange.
    held: u64,
    /// Whether they are in order.
    sorted: bool,
    /// The smallest and largest key held (`None` if it holds none).
    range: Option<(u64, u64)>,
    /// Wrapping sums of the keys generated and of those held.
    sum_generated: u64,
    sum_held: u64,
}

/// A 64-bit mix (SplitMix64), enough for test keys.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The keys of `rank`: its share of `total`, the remainder going to the
/// lowest ranks.
fn keys_of(rank: usize, size: usize, total: u64) -> Vec<u64> {
    let (share, rest) = (total / size as u64, total % size as u64);
    let n = share + u64::from((rank as u64) < rest);
    let seed = (rank as u64) << 40;
    (0..n).map(|i| mix(seed + i)).collect()
}

/// The SPMD task: steps 1 to 4 on this node.
#[mttl::remote]
fn sort_task(total: u64) -> Report {
    let (me, n) = (mttl::rank(), mttl::size());

    // 1. This node's keys, sorted.
    let mut keys = keys_of(me, n, total);
    let generated = keys.len() as u64;
    let sum_generated = keys.iter().fold(0u64, |s, &k| s.wrapping_add(k));
    keys.sort_unstable();

    // 2. Splitters from everyone's samples; every node computes the same.
    let sample: Vec<u64> = (0..SAMPLES.min(keys.len()))
        .map(|i| keys[i * keys.len() / SAMPLES.min(keys.len())])
        .collect();
    let mut samples: Vec<u64> = mttl::allgather(sample).into_iter().flatten().collect();
    samples.sort_unstable();
    let splitters: Vec<u64> = (1..n)
        .map(|d| {
            samples
                .get(d * samples.len() / n)
                .copied()
                .unwrap_or(u64::MAX)
        })
        .collect();

    // 3. Run d (keys below splitter d, from the previous cut on) goes to
    //    node d; the keys are sorted, so each cut is a binary search.
    let mut counts = Vec::with_capacity(n);
    let mut start = 0;
    for &s in &splitters {
        let end = start + keys[start..].partition_point(|&k| k < s);
        counts.push(end - start);
        start = end;
    }
    counts.push(keys.len() - start);
    let mut mine = Vec::new();
    mttl::alltoallv(&keys, &counts, &mut mine);
    drop(keys);

    // 4. Sort what came in and report.
    mine.sort_unstable();
    Report {
        generated,
        held: mine.len() as u64,
        sorted: mine.windows(2).all(|w| w[0] <= w[1]),
        range: mine.first().zip(mine.last()).map(|(&a, &b)| (a, b)),
        sum_generated,
        sum_held: mine.iter().fold(0u64, |s, &k| s.wrapping_add(k)),
    }
}

#[mttl::main]
fn main() {
    let total: u64 = match std::env::args().nth(1) {
        Some(arg) => arg
            .parse()
            .unwrap_or_else(|_| panic!("the number of keys must be a whole number, not {arg:?}")),
        None => DEFAULT_KEYS,
    };
    let started = std::time::Instant::now();
    let reports = mttl::spmd(sort_task, (total,));
    let elapsed = started.elapsed();

    let generated: u64 = reports.iter().map(|r| r.generated).sum();
    let held: u64 = reports.iter().map(|r| r.held).sum();
    assert_eq!(generated, total, "the nodes generated {generated} keys");
    assert_eq!(held, total, "{held} keys came out of the exchange");
    let sum = |f: fn(&Report) -> u64| reports.iter().map(f).fold(0u64, u64::wrapping_add);
    assert_eq!(
        sum(|r| r.sum_generated),
        sum(|r| r.sum_held),
        "the keys' checksum changed in the exchange"
    );
    for (rank, r) in reports.iter().enumerate() {
        assert!(r.sorted, "rank {rank}'s keys are not in order");
    }
    let ranges: Vec<(u64, u64)> = reports.iter().filter_map(|r| r.range).collect();
    for pair in ranges.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "a node holds keys above the next node's smallest"
        );
    }
    let held_by: Vec<u64> = reports.iter().map(|r| r.held).collect();
    println!(
        "sample_sort: {total} keys on {} nodes (held {held_by:?}) in {:.3} s, sorted: OK",
        mttl::size(),
        elapsed.as_secs_f64()
    );
}
