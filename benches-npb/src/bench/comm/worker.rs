//! A worker rank of `mttl-bench comm` (step 2 of the [module docs](super)):
//! joins a two-rank job of one configuration, runs the measurement loops,
//! and on rank 0 writes the results file.
//!
//! In `mpi-vs-raw` mttl's MPI backend initialises MPI (and finalises it in
//! `finish`); raw rsmpi works on `MPI_COMM_WORLD`, which the backend leaves
//! alone (it talks on communicators of its own), so the two never see each
//! other's messages. `raw-vs-raw` gives each of its two raw endpoints
//! buffers and a communicator of its own.

use std::path::Path;

use mttl_comm::Comm;

use super::endpoint::MttlEndpoint;
use super::measure::{self, Samples};
use super::{BenchError, Config};
use crate::bench::sweep::jobs::{self, BenchConfig};

/// One worker rank. `second_first`: in `mpi-vs-raw` and `raw-vs-raw`, the
/// second stack takes the first turn ([`measure::interleave`]).
pub(super) fn worker(
    config: Config,
    sizes: &[u64],
    out: &Path,
    second_first: bool,
) -> Result<(), BenchError> {
    let sizes: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
    let name = config.name();
    match config {
        Config::Tcp | Config::Mpi => {
            let mut ep = MttlEndpoint::new(jobs::join_comm(name, name)?);
            let sizes = measure::sweep(&mut ep, &sizes)?;
            let comm = ep.into_comm();
            if comm.rank() == 0 {
                let samples = Samples {
                    sizes,
                    reference: Vec::new(),
                };
                jobs::write_results(name, name, &samples, out)?;
            }
            Ok(comm.finish()?)
        }
        #[cfg(feature = "mpi")]
        _ => raw::worker(config, &sizes, out, second_first),
        #[cfg(not(feature = "mpi"))]
        _ => {
            let _ = second_first;
            Err(jobs::no_mpi(name, "comm"))
        }
    }
}

#[cfg(feature = "mpi")]
mod raw {
    use mpi::topology::{Communicator, SimpleCommunicator};

    use super::*;
    use crate::bench::comm::endpoint::RawMpiEndpoint;

    /// The workers with raw rsmpi in them.
    pub(super) fn worker(
        config: Config,
        sizes: &[usize],
        out: &Path,
        second_first: bool,
    ) -> Result<(), BenchError> {
        let name = config.name();
        let max_len = sizes
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(measure::ACK_LEN);
        let raw = |world| RawMpiEndpoint::new(world, max_len);
        let write = |backend: &str, sizes, reference| {
            jobs::write_results(name, backend, &Samples { sizes, reference }, out)
        };
        if config == Config::MpiVsRaw {
            let comm = jobs::join_comm(name, "mpi")?;
            let rank = comm.rank();
            let mut raw = raw(SimpleCommunicator::world());
            let mut ep = MttlEndpoint::new(comm);
            let (samples, reference) = measure::interleave(&mut ep, &mut raw, sizes, second_first)?;
            drop(raw);
            if rank == 0 {
                write("mpi", samples, reference)?;
            }
            return Ok(ep.into_comm().finish()?);
        }
        let (universe, world) = jobs::raw_mpi_pair(name)?;
        let rank = world.rank();
        let (samples, reference) = if config == Config::RawVsRaw {
            let mut first = raw(world.duplicate());
            let mut second = raw(world);
            measure::interleave(&mut first, &mut second, sizes, second_first)?
        } else {
            (measure::sweep(&mut raw(world), sizes)?, Vec::new())
        };
        if rank == 0 {
            write("rsmpi", samples, reference)?;
        }
        drop(universe);
        Ok(())
    }
}
