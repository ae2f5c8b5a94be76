//! The measurement loop both ranks of a worker job run, the same for an mttl
//! program and for raw rsmpi: only the [`Transfer`] differs.
//!
//! For every size S, in order:
//!
//! 1. A **window** is W transfers of S bytes from rank 0 to rank 1, then a
//!    synchronisation of both ranks ([`Transfer`] says what each is). W is
//!    [`window_for`] S (16 MiB worth, 8 to 1024 transfers) unless
//!    `--window` fixes it.
//! 2. [`WARMUP_WINDOWS`] untimed windows; rank 0 picks from the last one how
//!    many windows fill a sample of about the sample time, and shares the
//!    count with rank 1 ([`Transfer::share`]).
//! 3. [`SAMPLES`] samples of that many windows. Rank 0 times each window
//!    from its first transfer to the end of its synchronisation; a sample is
//!    S·W·windows bytes over the summed time. Rank 0 also keeps, for the
//!    breakdown, the time spent issuing transfers (inside `nwrite` or
//!    `MPI_Send`), per transfer, and the time spent synchronising, per
//!    window.
//!
//! Only rank 0 times; rank 1 receives (raw rsmpi) or lets its runtime apply
//! the writes (mttl) and synchronises.

use std::time::{Duration, Instant};

/// Timed samples per size.
pub(super) const SAMPLES: usize = 5;

/// Untimed windows before the samples.
pub(super) const WARMUP_WINDOWS: usize = 2;

/// The payload a window carries by default, before clamping.
const WINDOW_BYTES: usize = 16 << 20;

/// Bounds of the default transfers per window.
const WINDOW_LEN: (usize, usize) = (8, 1024);

/// Bounds of the calibrated windows per sample.
const WINDOWS: (usize, usize) = (1, 100_000);

/// The byte every transfer carries, checked at the end.
pub(super) const FILL: u8 = 0xA5;

/// The default transfers per window for `size`-byte transfers.
pub(super) fn window_for(size: usize) -> usize {
    (WINDOW_BYTES / size.max(1)).clamp(WINDOW_LEN.0, WINDOW_LEN.1)
}

/// One side of the transfer being measured.
pub(super) trait Transfer {
    /// This process's rank, 0 or 1.
    fn rank(&self) -> usize;

    /// Rank 0: moves `data` into rank 1's buffer, returning when `data` may
    /// be reused (mttl `nwrite_slice`, `MPI_Send`).
    fn put(&mut self, data: &[u8]);

    /// Rank 1: takes one transfer of `len` bytes (`MPI_Recv`; nothing for
    /// mttl, whose runtime applies writes as they arrive).
    fn take(&mut self, len: usize) -> Result<(), String>;

    /// Both ranks: ends a window (mttl `barrier`, which fences first;
    /// `MPI_Barrier`).
    fn sync(&mut self);

    /// Both ranks: rank 0's `count`, on both.
    fn share(&mut self, count: u64) -> u64;
}

/// What rank 0 measured for one size in one run.
#[derive(Debug, Clone, PartialEq, mttl::Encode, mttl::Decode)]
#[bincode(crate = "mttl::bincode")]
pub(super) struct SizeSamples {
    /// The transfer size in bytes.
    pub(super) size: u64,
    /// Transfers per window.
    pub(super) window: u64,
    /// Windows per sample (calibrated).
    pub(super) windows: u64,
    /// Throughput of each sample, payload bytes per second.
    pub(super) bytes_per_s: Vec<f64>,
    /// Time issuing one transfer, µs, per sample (rank 0's side).
    pub(super) issue_us: Vec<f64>,
    /// Time synchronising once, µs, per sample (rank 0's side).
    pub(super) sync_us: Vec<f64>,
}

/// How many windows that took `each` fill `sample_time`.
fn calibrate(each: Duration, sample_time: Duration) -> u64 {
    crate::bench::sweep::calibrate(each, sample_time, WINDOWS) as u64
}

/// Runs every size on `t`. Rank 0 returns its samples, rank 1 an empty
/// list; both fail if rank 1 received something unexpected.
pub(super) fn sweep(
    t: &mut impl Transfer,
    sizes: &[usize],
    window: Option<usize>,
    sample_time: Duration,
) -> Result<Vec<SizeSamples>, String> {
    let mut results = Vec::new();
    for &size in sizes {
        let w = window.unwrap_or_else(|| window_for(size));
        let data = vec![FILL; size];
        let mut last = Duration::ZERO;
        for _ in 0..WARMUP_WINDOWS {
            let (issue, sync) = run_window(t, &data, w)?;
            last = issue + sync;
        }
        let windows = t.share(calibrate(last, sample_time));
        let mut samples = SizeSamples {
            size: size as u64,
            window: w as u64,
            windows,
            bytes_per_s: Vec::with_capacity(SAMPLES),
            issue_us: Vec::with_capacity(SAMPLES),
            sync_us: Vec::with_capacity(SAMPLES),
        };
        for _ in 0..SAMPLES {
            let (mut issue, mut sync) = (Duration::ZERO, Duration::ZERO);
            for _ in 0..windows {
                let (i, s) = run_window(t, &data, w)?;
                issue += i;
                sync += s;
            }
            let bytes = (size * w) as f64 * windows as f64;
            samples
                .bytes_per_s
                .push(bytes / (issue + sync).as_secs_f64().max(1e-12));
            let transfers = (w as u64 * windows) as f64;
            samples.issue_us.push(issue.as_secs_f64() * 1e6 / transfers);
            samples
                .sync_us
                .push(sync.as_secs_f64() * 1e6 / windows as f64);
        }
        if t.rank() == 0 {
            results.push(samples);
        }
    }
    Ok(results)
}

/// One window: rank 0 puts `data` `w` times, rank 1 takes as many, then
/// both synchronise. Returns the time transferring and the time
/// synchronising.
fn run_window(
    t: &mut impl Transfer,
    data: &[u8],
    w: usize,
) -> Result<(Duration, Duration), String> {
    let start = Instant::now();
    if t.rank() == 0 {
        for _ in 0..w {
            t.put(data);
        }
    } else {
        for _ in 0..w {
            t.take(data.len())?;
        }
    }
    let issued = Instant::now();
    t.sync();
    let end = Instant::now();
    Ok((issued - start, end - issued))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_hold_sixteen_mebibytes_within_bounds() {
        assert_eq!(window_for(8), 1024);
        assert_eq!(window_for(16 << 10), 1024);
        assert_eq!(window_for(64 << 10), 256);
        assert_eq!(window_for(1 << 20), 16);
        assert_eq!(window_for(16 << 20), 8);
        assert_eq!(window_for(0), 1024);
    }

    /// A transfer between two halves of one process, recording calls.
    struct Recorder {
        rank: usize,
        puts: usize,
        takes: usize,
        syncs: usize,
    }

    impl Transfer for Recorder {
        fn rank(&self) -> usize {
            self.rank
        }
        fn put(&mut self, data: &[u8]) {
            assert!(data.iter().all(|&b| b == FILL));
            self.puts += 1;
        }
        fn take(&mut self, _len: usize) -> Result<(), String> {
            self.takes += 1;
            Ok(())
        }
        fn sync(&mut self) {
            self.syncs += 1;
        }
        fn share(&mut self, _count: u64) -> u64 {
            3
        }
    }

    #[test]
    fn both_ranks_run_the_same_windows() {
        let mut r0 = Recorder {
            rank: 0,
            puts: 0,
            takes: 0,
            syncs: 0,
        };
        let mut r1 = Recorder { rank: 1, ..r0 };
        let sample = Duration::from_millis(1);
        let got = sweep(&mut r0, &[8, 64], Some(4), sample).unwrap();
        assert!(sweep(&mut r1, &[8, 64], Some(4), sample)
            .unwrap()
            .is_empty());
        let windows = 2 * (WARMUP_WINDOWS + SAMPLES * 3);
        assert_eq!((r0.puts, r0.takes, r0.syncs), (4 * windows, 0, windows));
        assert_eq!((r1.puts, r1.takes, r1.syncs), (0, 4 * windows, windows));
        assert_eq!(got.len(), 2);
        assert_eq!((got[1].size, got[1].window, got[1].windows), (64, 4, 3));
        assert_eq!(got[1].bytes_per_s.len(), SAMPLES);
        assert!(got[1].bytes_per_s.iter().all(|&b| b > 0.0));
    }
}
