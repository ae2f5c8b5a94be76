//! The skeleton of NPB IS's mttl driver (`benches-npb`'s `is_mttl.rs`),
//! from IS's keys and bucket partition in `mttl_kernels::is_buckets`.
//!
//! Node 0's main calls `is_init(class)` on every node (each generates its
//! keys and returns its boundary slot's global pointer and a time), then
//! `is_kernel(boundaries)`: one untimed ranking and ten timed ones, then
//! the full verification. A ranking is:
//!
//! 1. computation (the histogram of the keys, the keys copied bucket by
//!    bucket; before it, the counting sort of the previous ranking);
//! 2. an allreduce of the bucket sizes and the five test keys
//!    (`num_buckets + 5` values of 4 bytes);
//! 3. an all-to-all of the send counts (one value each), then one of the
//!    landing pointers (a global pointer each, 16 bytes as plain data);
//! 4. the keys: a remote write of `send_counts[d]` keys to each node `d`
//!    (`me + 1` first, none to itself or of no key), split into a header
//!    and a body above the eager limit (64 KiB), then a barrier.
//!
//! The full verification writes one key to the right neighbour, then
//! meets the others at a barrier.
//!
//! **The all-to-all sizes** depend on the keys. The skeleton computes them
//! exactly, as the kernel does: for a job of n ranks it generates every
//! rank's keys with NPB's generator (`is_buckets::keys`, the kernel's own
//! function), keeps only their bucket histograms (no sort, no key kept),
//! applies process 0's per-iteration change of two keys, and walks the
//! global totals with `is_buckets::BucketRanges::assign` for every
//! sender: the send counts of every (sender, receiver, ranking). This costs
//! one pass over the class's keys per job size (2^27 keys for class C,
//! about a second) and `11 · n²` counts in memory (44 MB at 1024 ranks).
//! Scaling the real trace's sizes instead would be cheaper but wrong in
//! detail (the key distribution is not uniform: the outer ranks get wider
//! key ranges and other counts), and the pseudo traces could not be checked
//! against real ones message by message.
//!
//! Work per rank, for scaling computation: the keys per rank
//! (`total_keys / n`), which every phase handles in its histogram and
//! counting sort.

use std::cell::RefCell;
use std::rc::Rc;

use mttl_kernels::class::{Class, IsParams, IS_ITERATIONS, IS_TEST_KEYS};
use mttl_kernels::is_buckets::{self, bucket, BucketRanges};

use super::runtime::{first_reply_to_rank0, varint_len, wire, Emitter};
use super::Step;
use crate::ti::TiTrace;

const F64: u64 = 8;
/// An IS key or count (`i32`).
const KEY: u64 = 4;
/// A `GlobalPtr` sent as plain data (`alltoall_slice`).
const GLOBAL_PTR_BYTES: u64 = 16;

/// IS's skeleton for one class, with what it learned.
#[derive(Debug, Clone)]
pub(crate) struct Is {
    params: IsParams,
    /// Bytes of a global pointer's region and offset (encoded).
    ptr_rest: u64,
    /// The send counts of the last job size asked for.
    counts: RefCell<Option<Rc<SendCounts>>>,
}

/// Keys sent by every rank to every rank in every ranking of a job.
#[derive(Debug)]
struct SendCounts {
    n: usize,
    /// `[ranking][sender · n + receiver]`.
    sent: Vec<Vec<i32>>,
}

impl SendCounts {
    /// The rankings in order: the untimed one (iteration 1), then 1 to 10.
    fn iterations() -> impl Iterator<Item = usize> {
        std::iter::once(1).chain(1..=IS_ITERATIONS)
    }

    /// Computes the counts of a job of `n` ranks (see the module docs).
    fn new(params: &IsParams, n: usize) -> SendCounts {
        let nb = params.num_buckets();
        let shift = is_buckets::bucket_shift(params);
        let keys_per_proc = params.total_keys() / n;
        // Rank 0's keys that the rankings overwrite.
        let marked = 2 * IS_ITERATIONS + 1;
        let mut first_keys = Vec::with_capacity(marked);
        let mut hist = vec![vec![0i32; nb]; n];
        for (me, h) in hist.iter_mut().enumerate() {
            for (i, k) in is_buckets::keys(params, me, n).enumerate() {
                h[bucket(k, shift)] += 1;
                if me == 0 && i < marked {
                    first_keys.push(k);
                }
            }
        }
        let mut sent = Vec::new();
        let mut ranges = BucketRanges::new(n);
        for it in Self::iterations() {
            for (i, v) in is_buckets::test_key_changes(params, it) {
                if let Some(old) = first_keys.get_mut(i) {
                    hist[0][bucket(*old, shift)] -= 1;
                    hist[0][bucket(v, shift)] += 1;
                    *old = v;
                }
            }
            let totals: Vec<i32> = (0..nb).map(|b| hist.iter().map(|h| h[b]).sum()).collect();
            let mut counts = Vec::with_capacity(n * n);
            for h in &hist {
                ranges.assign(&totals, h, keys_per_proc);
                counts.extend_from_slice(&ranges.send_counts);
            }
            sent.push(counts);
        }
        SendCounts { n, sent }
    }
}

impl Is {
    /// The skeleton of class `class` (a letter); learns the size of a
    /// global pointer from rank 1's reply to `is_init`.
    pub(crate) fn new(class: char, real: &TiTrace) -> Result<Is, String> {
        let class: Class = class
            .to_string()
            .parse()
            .map_err(|e| format!("--class: {e}"))?;
        let params = class.is().map_err(|e| format!("--class: {e}"))?;
        let ptr_rest = if real.ranks.len() < 2 {
            0
        } else {
            let bytes = first_reply_to_rank0(real)
                .ok_or("rank 1 never replies to rank 0 (to `is_init`)")?;
            bytes
                .checked_sub(wire::CELL_WRITE_HEADER + F64 + varint_len(1))
                .ok_or_else(|| format!("rank 1's reply to `is_init` has {bytes} bytes, too few"))?
        };
        Ok(Is {
            params,
            ptr_rest,
            counts: RefCell::new(None),
        })
    }

    fn ptr(&self, node: usize) -> u64 {
        varint_len(node as u64) + self.ptr_rest
    }

    /// The work of a rank of `n`: its keys.
    pub(crate) fn work(&self, n: usize) -> f64 {
        (self.params.total_keys() / n.max(1)).max(1) as f64
    }

    fn counts(&self, n: usize) -> Rc<SendCounts> {
        let mut slot = self.counts.borrow_mut();
        match &*slot {
            Some(c) if c.n == n => Rc::clone(c),
            _ => {
                let c = Rc::new(SendCounts::new(&self.params, n));
                *slot = Some(Rc::clone(&c));
                c
            }
        }
    }

    /// Rank `me` of `n` (see the module docs).
    pub(crate) fn steps(&self, me: usize, n: usize) -> Result<Vec<Step>, String> {
        let max = is_buckets::max_procs(&self.params);
        if !n.is_power_of_two() || n > max {
            return Err(format!(
                "IS runs on a power-of-two number of ranks up to {max} for class {}, not {n}",
                self.params.class
            ));
        }
        let counts = self.counts(n);
        let mut e = Emitter::new(me, n);
        // is_init(class): the keys.
        e.spmd_call(1);
        e.compute();
        e.spmd_return(|d| self.ptr(d) + F64);
        // is_kernel(boundaries).
        e.spmd_call(varint_len(n as u64) + (0..n).map(|d| self.ptr(d)).sum::<u64>());
        let buckets = (self.params.num_buckets() + IS_TEST_KEYS) as u64;
        for sent in &counts.sent {
            e.compute();
            e.allreduce(KEY * buckets);
            e.alltoall(KEY);
            e.alltoall(GLOBAL_PTR_BYTES);
            for d in (1..=n).map(|k| (me + k) % n) {
                e.nwrite(d, KEY * sent[me * n + d] as u64);
            }
            for s in 0..n {
                e.nwrite_in(s, KEY * sent[s * n + me] as u64);
            }
            let from: Vec<usize> = (0..n)
                .filter(|&s| s != me && sent[s * n + me] > 0)
                .collect();
            barrier(&mut e, &from);
        }
        // The full verification: the last key to the right neighbour.
        e.compute();
        if me + 1 < n {
            e.nwrite(me + 1, KEY);
        }
        let left: Vec<usize> = me.checked_sub(1).into_iter().collect();
        for &l in &left {
            e.nwrite_in(l, KEY);
        }
        barrier(&mut e, &left);
        e.compute();
        // (tests passed, fewer than 251; seconds)
        e.spmd_return(|_| varint_len(1) + F64);
        e.exit();
        Ok(e.steps)
    }
}

/// `mttl::barrier`: a fence of this rank's writes, the fences of the ranks
/// in `from` (those that wrote to it) acknowledged, then dissemination.
fn barrier(e: &mut Emitter, from: &[usize]) {
    let written = e.fence_out();
    for &s in from {
        e.fence_in(s);
    }
    e.fence_wait(&written);
    e.dissemination();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ranking_sends_every_key_once_and_rank_0s_changes_move_some() {
        let p = Class::S.is().unwrap();
        let c = SendCounts::new(&p, 4);
        assert_eq!(c.sent.len(), IS_ITERATIONS + 1);
        for s in &c.sent {
            assert_eq!(s.iter().sum::<i32>() as usize, p.total_keys());
            for sender in 0..4 {
                let row: i32 = s[sender * 4..][..4].iter().sum();
                assert_eq!(row as usize, p.total_keys() / 4);
            }
        }
        // Iteration 1 twice: the same counts; later ones differ on rank 0.
        assert_eq!(c.sent[0], c.sent[1]);
    }

    #[test]
    fn a_job_size_is_cannot_run_on_is_refused_with_the_reason_why() {
        let trace = TiTrace::default();
        let is = Is::new('S', &trace).unwrap();
        let e = is.steps(0, 6).unwrap_err();
        assert!(e.contains("power-of-two"), "{e}");
        assert!(is.steps(0, 256).is_err());
    }
}
