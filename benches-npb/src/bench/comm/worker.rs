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

use super::endpoint::mttl_comm_worker;
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
        Config::Tcp | Config::Mpi => mttl_comm_worker(name, name, out, |ep| {
            let sizes = measure::sweep(ep, &sizes)?;
            Ok(Samples {
                sizes,
                reference: Vec::new(),
            })
        }),
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
    use crate::bench::comm::endpoint::{Endpoint, RawMpiEndpoint};

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
        match config {
            Config::MpiVsRaw => mttl_comm_worker(name, "mpi", out, |ep| {
                turns(
                    ep,
                    &mut raw(SimpleCommunicator::world()),
                    sizes,
                    second_first,
                )
            }),
            Config::RawVsRaw => jobs::raw_mpi_worker(name, out, |world| {
                turns(
                    &mut raw(world.duplicate()),
                    &mut raw(world),
                    sizes,
                    second_first,
                )
            }),
            _ => jobs::raw_mpi_worker(name, out, |world| {
                let sizes = measure::sweep(&mut raw(world), sizes)?;
                Ok(Samples {
                    sizes,
                    reference: Vec::new(),
                })
            }),
        }
    }

    /// Two stacks taking turns ([`measure::interleave`]).
    fn turns(
        first: &mut impl Endpoint,
        second: &mut impl Endpoint,
        sizes: &[usize],
        second_first: bool,
    ) -> Result<Samples, BenchError> {
        let (sizes, reference) = measure::interleave(first, second, sizes, second_first)?;
        Ok(Samples { sizes, reference })
    }
}
