//! NPB IS's keys and bucket partition: who sends how many keys to whom.
//!
//! IS's all-to-all sizes depend on the data: process `s` sends process `d`
//! the keys of `s` that fall in `d`'s buckets. The kernel
//! (`benches-npb`'s `npb/is/ranking.rs`) and the IS skeleton of
//! `mttl-trace scale` both take them from here, so the skeleton's sizes are
//! the kernel's, exactly:
//!
//! 1. [`keys`]: process `me`'s slice of NPB's one global key sequence
//!    (`create_seq`: each key `(max_key / 4) · (r1 + r2 + r3 + r4)` from
//!    NPB's generator, each process starting at its own offset);
//! 2. [`mark_test_keys`]: before each ranking, process 0 overwrites two of
//!    its keys (`key[it] = it`, `key[it + 10] = max_key − it`), so its
//!    histogram changes from one iteration to the next;
//! 3. [`bucket`]: the bucket of a key, its top `num_buckets_log2` bits;
//! 4. [`BucketRanges::assign`]: from the global bucket totals and this
//!    process's own bucket sizes, which buckets each process ranks and how
//!    many keys this process sends each one.

use crate::class::{IsParams, IS_ITERATIONS};
use crate::randlc::{find_my_seed, Randlc, MULTIPLIER, SEED};

/// The largest process count NPB allows for IS (128 for class S, 1024
/// otherwise); IS runs on a power of two up to it.
pub fn max_procs(params: &IsParams) -> usize {
    if params.total_keys_log2 <= 16 {
        128
    } else {
        1024
    }
}

/// The shift that takes a key to its bucket ([`bucket`]).
pub fn bucket_shift(params: &IsParams) -> u32 {
    params.max_key_log2 - params.num_buckets_log2
}

/// The bucket of `key` (`key >> shift`, `shift` from [`bucket_shift`]).
#[inline(always)]
pub fn bucket(key: i32, shift: u32) -> usize {
    (key >> shift) as usize
}

/// Process `me` of `nprocs`'s keys, in order (NPB's `create_seq`): the
/// `total_keys / nprocs` keys from position `me · total_keys / nprocs` of
/// the one global sequence, whatever the process count.
pub fn keys(params: &IsParams, me: usize, nprocs: usize) -> impl Iterator<Item = i32> {
    let total = params.total_keys();
    let count = total / nprocs.max(1);
    let seed = find_my_seed(me as u64, nprocs as u64, 4 * total as u64, SEED, MULTIPLIER);
    let k = f64::from(params.max_key() / 4);
    let mut rng = Randlc::new(seed);
    (0..count).map(move |_| {
        let mut x = rng.next_f64();
        x += rng.next_f64();
        x += rng.next_f64();
        x += rng.next_f64();
        (k * x) as i32
    })
}

/// The keys process 0 overwrites before ranking `iteration` (1-based), as
/// (index in its keys, new value).
pub fn test_key_changes(params: &IsParams, iteration: usize) -> [(usize, i32); 2] {
    [
        (iteration, iteration as i32),
        (
            iteration + IS_ITERATIONS,
            params.max_key() - iteration as i32,
        ),
    ]
}

/// Process 0's step before ranking `iteration`: applies
/// [`test_key_changes`] to its `keys`.
pub fn mark_test_keys(params: &IsParams, keys: &mut [i32], iteration: usize) {
    for (i, v) in test_key_changes(params, iteration) {
        keys[i] = v;
    }
}

/// Which buckets each process ranks and what this process sends each one,
/// for one ranking (NPB's `bucket_size_totals` walk).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketRanges {
    /// Keys this process sends each process.
    pub send_counts: Vec<i32>,
    /// Where each process's keys start in this process's bucketed keys.
    pub send_displs: Vec<i32>,
    /// Each process's first bucket.
    pub first_bucket: Vec<usize>,
    /// Each process's last bucket (`first_bucket > last_bucket`: none).
    pub last_bucket: Vec<isize>,
}

impl BucketRanges {
    /// Empty ranges for `nprocs` processes.
    pub fn new(nprocs: usize) -> Self {
        Self {
            send_counts: vec![0; nprocs],
            send_displs: vec![0; nprocs],
            first_bucket: vec![0; nprocs],
            last_bucket: vec![0; nprocs],
        }
    }

    /// Buckets go to processes in order: process `j` takes buckets until
    /// the running global total (`totals`) reaches `(j + 1) ·
    /// keys_per_proc`; this process sends `j` its own keys (`local`, its
    /// bucket sizes) of those buckets. Processes left without buckets get
    /// the empty range `[1, 0]`. `local` and `totals` hold at least one
    /// size per bucket (further entries are ignored).
    pub fn assign(&mut self, totals: &[i32], local: &[i32], keys_per_proc: usize) {
        let nprocs = self.send_counts.len();
        let keys_per_proc = keys_per_proc as i64;
        let mut global = 0i64;
        let mut mine = 0i32;
        let mut j = 0usize;
        self.send_displs[0] = 0;
        self.first_bucket[0] = 0;
        for (i, (&total, &size)) in totals.iter().zip(local).enumerate() {
            if j == nprocs {
                break;
            }
            global += i64::from(total);
            mine += size;
            if global >= (j as i64 + 1) * keys_per_proc {
                self.send_counts[j] = mine;
                if j != 0 {
                    self.send_displs[j] = self.send_displs[j - 1] + self.send_counts[j - 1];
                    self.first_bucket[j] = (self.last_bucket[j - 1] + 1) as usize;
                }
                self.last_bucket[j] = i as isize;
                j += 1;
                mine = 0;
            }
        }
        while j < nprocs {
            self.send_counts[j] = 0;
            if j != 0 {
                self.send_displs[j] = self.send_displs[j - 1] + self.send_counts[j - 1];
            }
            self.first_bucket[j] = 1;
            self.last_bucket[j] = 0;
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::Class;

    #[test]
    fn the_first_class_s_keys_are_npbs() {
        let p = Class::S.is().unwrap();
        let first: Vec<i32> = keys(&p, 0, 1).take(8).collect();
        assert_eq!(first, [1585, 825, 1060, 1343, 956, 437, 759, 841]);
    }

    #[test]
    fn every_key_is_sent_once_and_each_process_gets_a_contiguous_range() {
        let p = Class::S.is().unwrap();
        let (n, nb, shift) = (4, p.num_buckets(), bucket_shift(&p));
        let hist: Vec<Vec<i32>> = (0..n)
            .map(|me| {
                let mut h = vec![0; nb];
                keys(&p, me, n).for_each(|k| h[bucket(k, shift)] += 1);
                h
            })
            .collect();
        let totals: Vec<i32> = (0..nb).map(|b| hist.iter().map(|h| h[b]).sum()).collect();
        let mut sent = 0;
        for h in &hist {
            let mut r = BucketRanges::new(n);
            r.assign(&totals, h, p.total_keys() / n);
            sent += r.send_counts.iter().sum::<i32>();
            assert_eq!(r.send_counts.iter().sum::<i32>(), h.iter().sum::<i32>());
            assert_eq!(r.first_bucket[0], 0);
            for j in 1..n {
                assert_eq!(r.first_bucket[j] as isize, r.last_bucket[j - 1] + 1);
            }
        }
        assert_eq!(sent as usize, p.total_keys());
    }

    #[test]
    fn a_process_past_the_last_bucket_gets_the_empty_range() {
        let mut r = BucketRanges::new(3);
        // 2 buckets of 4 keys, 3 processes of 3: the third gets nothing.
        r.assign(&[4, 4], &[1, 2], 3);
        assert_eq!(r.send_counts, [1, 2, 0]);
        assert_eq!(r.send_displs, [0, 1, 3]);
        assert_eq!((r.first_bucket[2], r.last_bucket[2]), (1, 0));
    }

    #[test]
    fn process_0_overwrites_two_keys_per_iteration() {
        let p = Class::S.is().unwrap();
        let mut k: Vec<i32> = keys(&p, 0, 2).collect();
        mark_test_keys(&p, &mut k, 3);
        assert_eq!((k[3], k[13]), (3, p.max_key() - 3));
    }
}
