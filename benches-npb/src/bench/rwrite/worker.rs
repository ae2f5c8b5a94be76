//! Step 2 of the [orchestration](super): one worker rank, as an mttl
//! program (`tcp`, `mpi`, `mpi-owned`) or as a plain rsmpi program (`raw-mpi`,
//! `raw-mpi-tcp`), running [`measure::sweep`] on its [`Transfer`].
//!
//! - mttl: rank 0's main starts `rwrite_sweep` on both ranks with `spmd`.
//!   Each rank registers a `GlobalArray<u8>` of the largest size and learns
//!   the other's pointer (`allgather`); rank 0 `nwrite_slice`s into rank 1's
//!   array at offset 0 (as NetPIPE reuses one receive buffer), and both
//!   ranks call `barrier` to end a window. Rank 1's thread waits in the
//!   barrier while its runtime applies the writes. `mpi-owned` writes with
//!   `nwrite_owned` instead: a prefix of one `Arc<[u8]>` of the same bytes,
//!   shared with each write, so no write waits for the one before.
//! - raw rsmpi: rank 0 `MPI_Send`s, rank 1 `MPI_Recv`s into one buffer of
//!   the largest size, and both call `MPI_Barrier` to end a window.
//!
//! At the end rank 1 checks that its buffer holds what rank 0 sent.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mttl::{GlobalArray, GlobalPtr};

use super::measure::{self, SizeSamples, Transfer, FILL};
use super::Config;
use crate::bench::comm::BenchError;
use crate::bench::sweep::jobs::{self, BenchConfig};

/// What every worker is asked to measure.
#[derive(Debug, Clone)]
pub(super) struct Task {
    pub(super) sizes: Vec<usize>,
    pub(super) window: Option<usize>,
    pub(super) sample_time: Duration,
}

/// Runs one worker rank of `config`; rank 0 writes its results to `out`.
pub(super) fn run(config: Config, task: &Task, out: &Path) -> Result<(), BenchError> {
    match config {
        Config::Tcp | Config::Mpi | Config::MpiOwned => mttl_worker(config, task, out),
        Config::RawMpi | Config::RawMpiTcp => raw_worker(config, task, out),
    }
}

/// Checks that the first `len` bytes of a receive buffer are what rank 0
/// sent.
fn check_filled(bytes: &[u8], len: usize) -> Result<(), String> {
    match bytes[..len].iter().position(|&b| b != FILL) {
        None => Ok(()),
        Some(i) => Err(format!(
            "rank 1: byte {i} of the receive buffer is {:#04x}, not the {FILL:#04x} rank 0 sent",
            bytes[i]
        )),
    }
}

/// Remote writes into the other rank's global array.
struct MttlWrites {
    rank: usize,
    dest: GlobalPtr<u8>,
    /// For `nwrite_owned`: a buffer of the largest size, filled as
    /// [`measure`] fills its own, written in part.
    owned: Option<Arc<[u8]>>,
}

/// The first `.1` bytes of a shared buffer, as `nwrite_owned` takes them.
struct Prefix(Arc<[u8]>, usize);

impl AsRef<[u8]> for Prefix {
    fn as_ref(&self) -> &[u8] {
        &self.0[..self.1]
    }
}

impl Transfer for MttlWrites {
    fn rank(&self) -> usize {
        self.rank
    }

    fn put(&mut self, data: &[u8]) {
        if let Some(buf) = &self.owned {
            // The same bytes as `data` (both all FILL), without a copy.
            self.dest.nwrite_owned(Prefix(Arc::clone(buf), data.len()));
        } else {
            self.dest.nwrite_slice(data);
        }
    }

    fn take(&mut self, _len: usize) -> Result<(), String> {
        Ok(())
    }

    fn sync(&mut self) {
        mttl::barrier();
    }

    fn share(&mut self, count: u64) -> u64 {
        mttl::broadcast(0, count)
    }
}

/// Both ranks' side of an mttl run (started by `spmd`).
#[mttl::remote]
fn rwrite_sweep(
    sizes: Vec<u64>,
    window: Option<u64>,
    sample_us: u64,
    owned: bool,
) -> Result<Vec<SizeSamples>, String> {
    let sizes: Vec<usize> = sizes.into_iter().map(|s| s as usize).collect();
    let largest = sizes.iter().copied().max().unwrap_or(1);
    let target = GlobalArray::<u8>::new(largest);
    let ptrs = mttl::allgather(target.global_ptr());
    let mut writes = MttlWrites {
        rank: mttl::rank(),
        dest: ptrs[1],
        owned: owned.then(|| vec![FILL; largest].into()),
    };
    let window = window.map(|w| w as usize);
    let samples = measure::sweep(
        &mut writes,
        &sizes,
        window,
        Duration::from_micros(sample_us),
    )?;
    if writes.rank == 1 {
        check_filled(&target.borrow(), largest)?;
    }
    // No write may be in flight when the arrays are dropped.
    mttl::barrier();
    Ok(samples)
}

/// An mttl program: rank 0's main runs the sweep on both ranks.
fn mttl_worker(config: Config, task: &Task, out: &Path) -> Result<(), BenchError> {
    let owned = config == Config::MpiOwned;
    let sizes: Vec<u64> = task.sizes.iter().map(|&s| s as u64).collect();
    let window = task.window.map(|w| w as u64);
    let sample_us = task.sample_time.as_micros() as u64;
    jobs::mttl_program(config.name(), config.backend(), out, move || {
        let mut per_rank = mttl::spmd(rwrite_sweep, (sizes, window, sample_us, owned));
        per_rank.truncate(2);
        let from_rank1 = per_rank.pop().unwrap_or_else(|| Ok(Vec::new()));
        let from_rank0 = per_rank.pop().unwrap_or_else(|| Ok(Vec::new()));
        from_rank1?;
        from_rank0
    })
}

#[cfg(feature = "mpi")]
fn raw_worker(config: Config, task: &Task, out: &Path) -> Result<(), BenchError> {
    use mpi::collective::{CommunicatorCollectives, Root};
    use mpi::datatype::Equivalence;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Communicator, SimpleCommunicator};

    /// Plain `MPI_Send` / `MPI_Recv` / `MPI_Barrier`.
    struct RawSends {
        world: SimpleCommunicator,
        buffer: Vec<u8>,
    }

    impl Transfer for RawSends {
        fn rank(&self) -> usize {
            // A rank is never negative.
            self.world.rank().unsigned_abs() as usize
        }

        fn put(&mut self, data: &[u8]) {
            self.world.process_at_rank(1).send(data);
        }

        fn take(&mut self, len: usize) -> Result<(), String> {
            let status = self
                .world
                .process_at_rank(0)
                .receive_into(&mut self.buffer[..len]);
            let count = status.count(u8::equivalent_datatype());
            if usize::try_from(count).ok() == Some(len) {
                Ok(())
            } else {
                Err(format!(
                    "rank 1: expected a message of {len} bytes but received {count}"
                ))
            }
        }

        fn sync(&mut self) {
            self.world.barrier();
        }

        fn share(&mut self, count: u64) -> u64 {
            let mut count = count;
            self.world.process_at_rank(0).broadcast_into(&mut count);
            count
        }
    }

    let largest = task.sizes.iter().copied().max().unwrap_or(1);
    jobs::raw_mpi_worker(config.name(), out, |world| {
        let mut sends = RawSends {
            world,
            buffer: vec![0; largest],
        };
        measure::sweep(&mut sends, &task.sizes, task.window, task.sample_time)
            .and_then(|samples| {
                if sends.rank() == 1 {
                    check_filled(&sends.buffer, largest)?;
                }
                Ok(samples)
            })
            .map_err(|detail| BenchError::Protocol {
                rank: sends.rank(),
                detail,
            })
    })
}

#[cfg(not(feature = "mpi"))]
fn raw_worker(config: Config, _task: &Task, _out: &Path) -> Result<(), BenchError> {
    Err(jobs::no_mpi(config.name(), "rwrite"))
}
