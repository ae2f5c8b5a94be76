//! One IS process: its keys, the bucket sort and ranking of one iteration,
//! partial and full verification.
//!
//! One ranking iteration ([`IsRank::rank_keys`]), as NPB 3.4-MPI's `rank`:
//!
//! 1. Process 0 sets `key[it] = it` and `key[it + 10] = max_key − it`.
//! 2. The owner of each test index records its key value after the
//!    histogram, in slots `num_buckets ..` of the bucket sizes.
//! 3. Local histogram of buckets (`key >> (max_key_log2 −
//!    num_buckets_log2)`), and the keys copied bucket by bucket.
//! 4. Allreduce of the bucket sizes.
//! 5. Buckets go to processes in order: process `j` takes buckets until the
//!    running global total reaches `(j + 1) · keys_per_process`. This gives
//!    the send counts and displacements; processes left without buckets get
//!    an empty range.
//! 6. Alltoall of the counts, receive displacements by prefix sum, alltoallv
//!    of the keys. A driver whose exchange leaves this process's own keys
//!    in the send buffer ([`IsComm::keeps_own_keys`]) gets displacements
//!    without room for them.
//! 7. Counting sort of the received keys (and this process's own, where
//!    they were left) over this process's key range
//!    `[min, max]`: populations, then cumulative counts, so `count[k − min]`
//!    is the number of local keys `≤ k`.
//! 8. Partial verification: for each test key in `[min, max]`, its rank is
//!    the local keys `< k` plus the keys of all lower processes, and must
//!    equal the official rank adjusted for the iteration
//!    ([`IsParams::expected_rank`]).
//!
//! Steps 1, 3 (the bucket of a key) and 5, and the keys themselves, are
//! `mttl_kernels::is_buckets`'s, which the IS skeleton of `mttl-trace
//! scale` shares to compute the all-to-all sizes.
//!
//! Full verification ([`IsRank::full_verify`]) places the last iteration's
//! keys at their ranks, checks they are sorted, that the last key of the
//! previous process is not greater than this process's first, and that no
//! key was lost.

use std::fmt;
use std::time::Instant;

use super::comm::IsComm;
use crate::npb::class::{IsParams, IS_ITERATIONS, IS_TEST_KEYS};
use crate::npb::prefetch::prefetch;
pub use mttl_kernels::is_buckets::max_procs;
use mttl_kernels::is_buckets::{self, bucket, BucketRanges};

/// Checks that IS can run on `nprocs` processes: a power of two up to
/// [`max_procs`].
pub fn check_procs(params: &IsParams, nprocs: usize) -> Result<(), IsError> {
    let max = max_procs(params);
    if !nprocs.is_power_of_two() || nprocs > max {
        return Err(IsError::BadProcessCount { nprocs, max });
    }
    Ok(())
}

/// The length of a process's receive buffer for the keys of its bucket
/// range, NPB's `SIZE_OF_BUFFERS`: the keys per process times 3/2 below 256
/// processes, 5/2 below 512, 4 below 1024, 13/2 from there (NPB validated
/// these for its bucket counts; the keys are roughly Gaussian, so the first
/// and last processes get wide key ranges).
pub fn key_buffer_len(params: &IsParams, nprocs: usize) -> usize {
    let keys = params.total_keys() / nprocs.max(1);
    match nprocs {
        0..256 => 3 * keys / 2,
        256..512 => 5 * keys / 2,
        512..1024 => 4 * keys,
        _ => 13 * keys / 2,
    }
}

/// Why an IS process cannot be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsError {
    /// IS needs a power-of-two number of processes within NPB's limit.
    BadProcessCount {
        /// The number asked for.
        nprocs: usize,
        /// The largest allowed for the class.
        max: usize,
    },
    /// The rank is not below the number of processes.
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
        /// The number of processes.
        nprocs: usize,
    },
}

impl fmt::Display for IsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IsError::BadProcessCount { nprocs, max } => write!(
                f,
                "IS needs a power-of-two number of processes from 1 to {max}, got {nprocs}"
            ),
            IsError::RankOutOfRange { rank, nprocs } => {
                write!(f, "rank {rank} is out of range for {nprocs} processes")
            }
        }
    }
}

impl std::error::Error for IsError {}

/// A partial verification test that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartialFailure {
    /// 1-based iteration.
    pub iteration: usize,
    /// 0-based test key.
    pub entry: usize,
    /// The rank found.
    pub found: i64,
    /// The rank NPB's table requires.
    pub expected: i64,
}

/// What a full verification found on one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FullVerification {
    /// Keys out of order, counting the boundary with the previous process.
    pub out_of_order: usize,
    /// Whether the key counts are unchanged (locally and in the global
    /// bucket totals).
    pub counts_ok: bool,
}

impl FullVerification {
    /// Whether this process passes.
    pub fn passed(&self) -> bool {
        self.out_of_order == 0 && self.counts_ok
    }
}

/// The key range and count of the last ranking, for full verification.
#[derive(Clone, Copy, Debug)]
struct LastRanking {
    min_key: i32,
    local_keys: usize,
    /// Where in `bucketed` this process's own keys stayed, if they did.
    own_keys: Option<(usize, usize)>,
    global_count_ok: bool,
}

/// Seconds a process spent in each part of its rankings so far, NPB 3.4's
/// `rcomp` split in two: `bucket` (steps 1-3 of the module doc) plus
/// `count` (steps 7-8) is NPB's `rcomp`, `exchange` (steps 4-6) its
/// `rcomm`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IsPhases {
    /// Steps 1-3: the histogram and the bucket sort.
    pub bucket: f64,
    /// Steps 4-6: the collectives, and the bucket assignment between them.
    pub exchange: f64,
    /// Steps 7-8: the counting sort and the partial verification.
    pub count: f64,
}

/// One process's share of IS.
#[derive(Debug)]
pub struct IsRank {
    params: IsParams,
    me: usize,
    keys_per_proc: usize,
    shift: u32,
    /// This process's keys (`key_array`).
    keys: Vec<i32>,
    /// The keys in bucket order, the alltoallv send buffer.
    bucketed: Vec<i32>,
    /// Key populations, then cumulative counts, over this process's range.
    counts: Vec<i32>,
    /// Local bucket sizes plus the test key values; their global sums.
    bucket_size: Vec<i32>,
    bucket_totals: Vec<i32>,
    bucket_ptrs: Vec<u32>,
    /// Send counts and displacements, each process's buckets (step 5).
    ranges: BucketRanges,
    recv_counts: Vec<i32>,
    recv_displs: Vec<i32>,
    last: Option<LastRanking>,
    failures: Vec<PartialFailure>,
    phases: IsPhases,
}

impl IsRank {
    /// Sets up rank `me` of `nprocs`: its starting seed and its keys
    /// (untimed in NPB).
    pub fn new(params: IsParams, nprocs: usize, me: usize) -> Result<Self, IsError> {
        check_procs(&params, nprocs)?;
        if me >= nprocs {
            return Err(IsError::RankOutOfRange { rank: me, nprocs });
        }
        let total = params.total_keys();
        let keys_per_proc = total / nprocs;
        let keys: Vec<i32> = is_buckets::keys(&params, me, nprocs).collect();
        let nb = params.num_buckets();
        Ok(Self {
            params,
            me,
            keys_per_proc,
            shift: is_buckets::bucket_shift(&params),
            keys,
            bucketed: vec![0; keys_per_proc],
            counts: vec![0; params.max_key() as usize],
            bucket_size: vec![0; nb + IS_TEST_KEYS],
            bucket_totals: vec![0; nb + IS_TEST_KEYS],
            bucket_ptrs: vec![0; nb],
            ranges: BucketRanges::new(nprocs),
            recv_counts: vec![0; nprocs],
            recv_displs: vec![0; nprocs],
            last: None,
            failures: Vec::new(),
            phases: IsPhases::default(),
        })
    }

    /// The class parameters.
    pub fn params(&self) -> &IsParams {
        &self.params
    }

    /// This process's keys (as generated, plus the per-iteration changes).
    pub fn keys(&self) -> &[i32] {
        &self.keys
    }

    /// The partial verification tests that failed so far.
    pub fn failures(&self) -> &[PartialFailure] {
        &self.failures
    }

    /// Forgets recorded failures (after the untimed iteration).
    pub fn clear_failures(&mut self) {
        self.failures.clear();
    }

    /// The time spent in each part of the rankings since the last
    /// [`IsRank::clear_phases`] (or since this process was set up).
    pub fn phases(&self) -> IsPhases {
        self.phases
    }

    /// Starts the phase times again from zero (before the timed loop).
    pub fn clear_phases(&mut self) {
        self.phases = IsPhases::default();
    }

    /// Ranks the keys once (steps 1-8 of the module doc) and returns how many
    /// partial verification tests this process passed.
    ///
    /// # Panics
    ///
    /// If the driver's `alltoallv` delivers another number of keys than the
    /// bucket totals promise.
    pub fn rank_keys<C: IsComm + ?Sized>(&mut self, comm: &mut C, iteration: usize) -> usize {
        let nb = self.params.num_buckets();
        let shift = self.shift;
        let keys_per_proc = self.keys_per_proc as i64;

        // Step 1.
        let t0 = Instant::now();
        if self.me == 0 {
            is_buckets::mark_test_keys(&self.params, &mut self.keys, iteration);
        }

        // Steps 2-3.
        self.bucket_size.fill(0);
        for (i, &index) in self.params.test_index.iter().enumerate() {
            if index / keys_per_proc == self.me as i64 {
                self.bucket_size[nb + i] = self.keys[(index % keys_per_proc) as usize];
            }
        }
        histogram(&self.keys, shift, &mut self.bucket_size[..nb]);
        let mut acc = 0u32;
        for (ptr, &size) in self.bucket_ptrs.iter_mut().zip(&self.bucket_size[..nb]) {
            *ptr = acc;
            acc += size as u32;
        }
        scatter(&self.keys, shift, &mut self.bucket_ptrs, &mut self.bucketed);

        // Step 4.
        let t1 = Instant::now();
        comm.allreduce_sum(&self.bucket_size, &mut self.bucket_totals);

        // Step 5.
        self.ranges.assign(
            &self.bucket_totals[..nb],
            &self.bucket_size[..nb],
            self.keys_per_proc,
        );

        // Step 6.
        comm.alltoall(&self.ranges.send_counts, &mut self.recv_counts);
        let me = self.me;
        let own_keys = comm.keeps_own_keys().then(|| {
            let displ = self.ranges.send_displs[me] as usize;
            (displ, displ + self.ranges.send_counts[me] as usize)
        });
        let mut displ = 0;
        for (s, (d, &c)) in self
            .recv_displs
            .iter_mut()
            .zip(&self.recv_counts)
            .enumerate()
        {
            *d = displ;
            if own_keys.is_none() || s != me {
                displ += c;
            }
        }
        comm.alltoallv(
            &self.bucketed,
            &self.ranges.send_counts,
            &self.ranges.send_displs,
            &self.recv_counts,
            &self.recv_displs,
        );

        // Step 7.
        let t2 = Instant::now();
        let (first_bucket, last_bucket) = (&self.ranges.first_bucket, &self.ranges.last_bucket);
        let min_key = (first_bucket[me] << shift) as i32;
        let max_key = (((last_bucket[me] + 1) << shift) - 1) as i32;
        let width = (max_key - min_key + 1).max(0) as usize;
        let bucket_sum = |lo: usize, hi: isize| -> i64 {
            (lo as isize..=hi)
                .map(|b| i64::from(self.bucket_totals[b as usize]))
                .sum()
        };
        let lesser: i64 = (0..me)
            .map(|k| bucket_sum(first_bucket[k], last_bucket[k]))
            .sum();
        let local_keys = bucket_sum(first_bucket[me], last_bucket[me]) as usize;

        let counts = &mut self.counts[..width];
        counts.fill(0);
        let received = comm.received_keys();
        let own = own_keys.map_or(&[][..], |(from, to)| &self.bucketed[from..to]);
        assert_eq!(
            received.len() + own.len(),
            local_keys,
            "process {me}: the alltoallv delivered {} keys and left {} in place, the bucket totals say {local_keys}",
            received.len(),
            own.len()
        );
        count(received, min_key, counts);
        count(own, min_key, counts);
        accumulate(counts);

        // Step 8.
        let mut passed = 0;
        for entry in 0..IS_TEST_KEYS {
            let k = self.bucket_totals[nb + entry];
            if min_key <= k && k <= max_key {
                let below = if k > min_key {
                    counts[(k - 1 - min_key) as usize]
                } else {
                    0
                };
                let found = i64::from(below) + lesser;
                let expected = self.params.expected_rank(entry, iteration);
                if found == expected {
                    passed += 1;
                } else {
                    self.failures.push(PartialFailure {
                        iteration,
                        entry,
                        found,
                        expected,
                    });
                }
            }
        }

        let global: i64 = self.bucket_totals[..nb].iter().map(|&c| i64::from(c)).sum();
        self.last = Some(LastRanking {
            min_key,
            local_keys,
            own_keys,
            global_count_ok: global == self.params.total_keys() as i64,
        });
        let t3 = Instant::now();
        self.phases.bucket += (t1 - t0).as_secs_f64();
        self.phases.exchange += (t2 - t1).as_secs_f64();
        self.phases.count += (t3 - t2).as_secs_f64();
        passed
    }

    /// Full verification after the last ranking: sorts this process's keys
    /// by their ranks and checks order, the boundary with the previous
    /// process, and the key counts. Every process must call it, once, before
    /// any further ranking (it consumes the cumulative counts).
    ///
    /// # Panics
    ///
    /// If no ranking has run.
    pub fn full_verify<C: IsComm + ?Sized>(&mut self, comm: &mut C) -> FullVerification {
        let last = self.last.expect("full_verify runs after rank_keys");
        let received = comm.received_keys();
        let own = last
            .own_keys
            .map_or(&[][..], |(from, to)| &self.bucketed[from..to]);
        let received_len = received.len() + own.len();
        let mut sorted = vec![0i32; last.local_keys];
        for &k in received.iter().chain(own) {
            let c = &mut self.counts[(k - last.min_key) as usize];
            *c -= 1;
            sorted[*c as usize] = k;
        }
        let from_left = comm.shift_right(sorted.last().copied().unwrap_or(i32::MIN));
        let mut out_of_order = sorted.windows(2).filter(|w| w[0] > w[1]).count();
        if let (Some(prev), Some(&first)) = (from_left, sorted.first()) {
            if prev > first {
                out_of_order += 1;
            }
        }
        FullVerification {
            out_of_order,
            counts_ok: last.global_count_ok && received_len == last.local_keys,
        }
    }
}

/// Keys between two prefetch hints on a key stream (one cache line).
const KEYS_PER_LINE: usize = 16;

/// How many keys ahead a stream is prefetched.
const PREFETCH_AHEAD: usize = 512;

/// Adds the bucket (`key >> shift`) of every key to `sizes`.
fn histogram(keys: &[i32], shift: u32, sizes: &mut [i32]) {
    for (line, chunk) in keys.chunks(KEYS_PER_LINE).enumerate() {
        prefetch(keys, line * KEYS_PER_LINE + PREFETCH_AHEAD);
        for &k in chunk {
            sizes[bucket(k, shift)] += 1;
        }
    }
}

/// Copies `keys` to `out` bucket by bucket, keeping their order within a
/// bucket; `next[b]` starts as bucket `b`'s first slot. Each bucket's write
/// position asks for its next-but-one cache line when it enters a new one.
fn scatter(keys: &[i32], shift: u32, next: &mut [u32], out: &mut [i32]) {
    for (line, chunk) in keys.chunks(KEYS_PER_LINE).enumerate() {
        prefetch(keys, line * KEYS_PER_LINE + PREFETCH_AHEAD);
        for &k in chunk {
            let slot = &mut next[bucket(k, shift)];
            let i = *slot as usize;
            out[i] = k;
            if i % KEYS_PER_LINE == 0 {
                prefetch(out, i + 2 * KEYS_PER_LINE);
            }
            *slot += 1;
        }
    }
}

/// Adds the keys (all in `[min_key, min_key + counts.len())`) to their
/// populations in `counts`.
fn count(keys: &[i32], min_key: i32, counts: &mut [i32]) {
    for (line, chunk) in keys.chunks(KEYS_PER_LINE).enumerate() {
        prefetch(keys, line * KEYS_PER_LINE + PREFETCH_AHEAD);
        for &k in chunk {
            counts[(k - min_key) as usize] += 1;
        }
    }
}

/// Makes the populations cumulative: `counts[i]` becomes the number of keys
/// `≤ min_key + i`.
fn accumulate(counts: &mut [i32]) {
    let mut total = 0;
    for c in counts {
        total += *c;
        *c = total;
    }
}

/// The outcome of an IS benchmark run on one process.
#[derive(Clone, Debug, PartialEq)]
pub struct IsRun {
    /// Partial tests passed in the timed iterations on this process.
    pub partial_passed: usize,
    /// The failed partial tests, if any.
    pub failures: Vec<PartialFailure>,
    /// This process's full verification.
    pub full: FullVerification,
    /// Seconds spent generating keys, untimed by NPB.
    pub setup_seconds: f64,
    /// Seconds of the timed loop on this process ("Time in seconds" is the
    /// maximum over processes).
    pub seconds: f64,
}

impl IsRun {
    /// This process's contribution to NPB's verification counter.
    pub fn passed(&self) -> usize {
        self.partial_passed + usize::from(self.full.passed())
    }
}

/// Runs the whole IS benchmark as rank `me` of `nprocs`: key generation, one
/// untimed ranking, ten timed rankings, full verification.
///
/// The run verifies when the sum of [`IsRun::passed`] over all processes is
/// [`IsParams::passes_required`].
pub fn run_benchmark<C: IsComm + ?Sized>(
    comm: &mut C,
    params: IsParams,
    nprocs: usize,
    me: usize,
) -> Result<IsRun, IsError> {
    let t0 = Instant::now();
    let mut rank = IsRank::new(params, nprocs, me)?;
    let setup_seconds = t0.elapsed().as_secs_f64();

    rank.rank_keys(comm, 1);
    rank.clear_failures();

    let t0 = Instant::now();
    let mut partial_passed = 0;
    for iteration in 1..=IS_ITERATIONS {
        partial_passed += rank.rank_keys(comm, iteration);
    }
    let seconds = t0.elapsed().as_secs_f64();

    let full = rank.full_verify(comm);
    Ok(IsRun {
        partial_passed,
        failures: rank.failures().to_vec(),
        full,
        setup_seconds,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npb::class::Class;

    #[test]
    fn first_class_s_keys_are_npb_s() {
        let p = Class::S.is().unwrap();
        let rank = IsRank::new(p, 1, 0).unwrap();
        assert_eq!(
            rank.keys()[..8],
            [1585, 825, 1060, 1343, 956, 437, 759, 841]
        );
    }

    #[test]
    fn keys_do_not_depend_on_the_process_count() {
        let p = Class::S.is().unwrap();
        let whole = IsRank::new(p, 1, 0).unwrap().keys().to_vec();
        for nprocs in [2, 4, 8] {
            let joined: Vec<i32> = (0..nprocs)
                .flat_map(|me| IsRank::new(p, nprocs, me).unwrap().keys().to_vec())
                .collect();
            assert_eq!(joined, whole, "{nprocs} processes");
        }
    }

    /// One process's exchange with itself: a copy into its own landing
    /// buffer, or (`keep_own`) none at all.
    struct Alone {
        keep_own: bool,
        landing: Vec<i32>,
    }

    impl IsComm for Alone {
        fn allreduce_sum(&mut self, local: &[i32], total: &mut [i32]) {
            total.copy_from_slice(local);
        }

        fn alltoall(&mut self, send: &[i32], recv: &mut [i32]) {
            recv.copy_from_slice(send);
        }

        fn alltoallv(
            &mut self,
            send: &[i32],
            send_counts: &[i32],
            send_displs: &[i32],
            recv_counts: &[i32],
            recv_displs: &[i32],
        ) {
            assert_eq!(send_counts, recv_counts);
            assert_eq!(recv_displs, [0]);
            self.landing.clear();
            if !self.keep_own {
                let from = send_displs[0] as usize;
                self.landing
                    .extend_from_slice(&send[from..][..send_counts[0] as usize]);
            }
        }

        fn received_keys(&self) -> &[i32] {
            &self.landing
        }

        fn keeps_own_keys(&self) -> bool {
            self.keep_own
        }

        fn shift_right(&mut self, _: i32) -> Option<i32> {
            None
        }
    }

    #[test]
    fn own_keys_verify_whether_copied_or_left_in_place() {
        for class in [Class::S, Class::W] {
            let p = class.is().unwrap();
            for keep_own in [false, true] {
                let mut comm = Alone {
                    keep_own,
                    landing: Vec::new(),
                };
                let run = run_benchmark(&mut comm, p, 1, 0).unwrap();
                assert_eq!(
                    run.passed(),
                    p.passes_required(1),
                    "class {class}, keep_own {keep_own}: {run:?}"
                );
                assert_eq!(comm.landing.is_empty(), keep_own);
            }
        }
    }

    #[test]
    fn phases_add_up_per_ranking_and_clear() {
        let p = Class::W.is().unwrap();
        let mut rank = IsRank::new(p, 1, 0).unwrap();
        let mut comm = Alone {
            keep_own: false,
            landing: Vec::new(),
        };
        let t0 = Instant::now();
        rank.rank_keys(&mut comm, 1);
        let whole = t0.elapsed().as_secs_f64();
        let once = rank.phases();
        assert!(
            once.bucket > 0.0 && once.exchange > 0.0 && once.count > 0.0,
            "{once:?}"
        );
        assert!(
            once.bucket + once.exchange + once.count <= whole,
            "{once:?} {whole}"
        );
        rank.rank_keys(&mut comm, 2);
        assert!(rank.phases().bucket > once.bucket, "{:?}", rank.phases());
        rank.clear_phases();
        assert_eq!(rank.phases(), IsPhases::default());
    }

    #[test]
    fn rejects_bad_process_counts() {
        let p = Class::S.is().unwrap();
        assert_eq!(
            IsRank::new(p, 3, 0).unwrap_err(),
            IsError::BadProcessCount {
                nprocs: 3,
                max: 128
            }
        );
        assert!(IsRank::new(p, 256, 0).is_err());
        assert!(IsRank::new(p, 4, 4).is_err());
    }
}
