//! Collective latency: the time of one `barrier`, one `allreduce` and, for
//! comparison, one `reduce` + `broadcast` (what `allreduce` would cost on a
//! tree), as the job sees it.
//!
//! How each function measures, on every node (call it from a thread on
//! every node at once, e.g. in a task node 0's main runs with `mttl::spmd`):
//!
//! 1. run `iters / 10` (at most 100) collectives to warm up connections
//!    and buffers, then a barrier so that every node starts together;
//! 2. time `iters` collectives back to back;
//! 3. return the slowest node's mean time per collective (an
//!    `allreduce_max` of the means, so every node returns the same figure).
//!
//! Back to back, a collective cannot start on a node before the previous
//! one finished there, so the mean is the latency of one collective (a
//! barrier or allreduce also cannot finish anywhere before every node
//! started it). The figures include mttl's whole path: thread switch,
//! message dispatch, the backend.

use std::time::{Duration, Instant};

/// Warm-up collectives before timing.
fn warmup(iters: usize) -> usize {
    (iters / 10).min(100)
}

/// Runs `one` `iters` times as in the module docs and returns the slowest
/// node's mean time of one.
fn measure(iters: usize, mut one: impl FnMut()) -> Duration {
    assert!(iters > 0, "a latency needs at least one iteration");
    for _ in 0..warmup(iters) {
        one();
    }
    mttl::barrier();
    let start = Instant::now();
    for _ in 0..iters {
        one();
    }
    let mean = start.elapsed().as_secs_f64() / iters as f64;
    Duration::from_secs_f64(mttl::allreduce_max(mean))
}

/// The latency of one `barrier`. Call on every node, from a thread.
pub(crate) fn barrier_latency(iters: usize) -> Duration {
    measure(iters, mttl::barrier)
}

/// The latency of one `allreduce_sum_slice` of `len` f64s (1 to 5 for a CG
/// dot product, 1024 i32-sized for IS's buckets). Call on every node, from
/// a thread.
pub(crate) fn allreduce_latency(len: usize, iters: usize) -> Duration {
    let mut values = vec![1.0f64; len];
    measure(iters, || mttl::allreduce_sum_slice(&mut values))
}

/// The latency of one `reduce` to rank 0 followed by one `broadcast_slice`
/// from it, of `len` f64s: the tree alternative to
/// [`allreduce_latency`] (the reduce encodes its `Vec`, a few ns per value).
/// Call on every node, from a thread.
pub(crate) fn reduce_broadcast_latency(len: usize, iters: usize) -> Duration {
    let mut values = vec![1.0f64; len];
    measure(iters, || {
        let _ = mttl::reduce(0, values.clone(), |a: Vec<f64>, b| {
            a.iter().zip(&b).map(|(x, y)| x + y).collect()
        });
        mttl::broadcast_slice(0, &mut values);
    })
}
