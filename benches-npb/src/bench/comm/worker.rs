//! A worker rank of `mttl-bench comm` (step 3 of the [module docs](super)):
//! joins a two-rank job of one configuration, runs the measurement loops,
//! and on rank 0 writes the results file.

use std::path::Path;

use mttl_comm::{AnyComm, Comm};

#[cfg(feature = "mpi")]
use super::endpoint;
use super::endpoint::MttlEndpoint;
use super::results::RunResult;
#[cfg(not(feature = "mpi"))]
use super::MPI_BUILD_HINT;
use super::{measure, BenchError, Config};
use crate::bench::common::jobs::BenchConfig;
#[cfg(feature = "mpi")]
use crate::bench::common::raw_mpi;
use crate::bench::results_file::ResultsFile;

/// Step 3 of the [module docs](super): one worker rank.
pub(super) fn worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), BenchError> {
    match config {
        Config::Tcp | Config::Mpi => mttl_worker(config, sizes, out),
        Config::RawMpi | Config::RawMpiTcp => raw_worker(config, sizes, out),
    }
}

fn mttl_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), BenchError> {
    let comm = AnyComm::init()?;
    let setup = |detail: String| BenchError::Setup {
        config: config.name(),
        detail,
    };
    let backend = comm.backend_name();
    if backend != config.name() {
        return Err(setup(format!(
            "the launch environment chose the {backend} backend instead"
        )));
    }
    if comm.size() != 2 {
        return Err(setup(format!(
            "the job has {} ranks instead of 2",
            comm.size()
        )));
    }
    let mut ep = MttlEndpoint::new(comm);
    let samples = measure::sweep(&mut ep, sizes)?;
    let comm = ep.into_comm();
    if comm.rank() == 0 {
        RunResult {
            backend: backend.to_owned(),
            sizes: samples,
            disturbed: false,
            sweep: 0,
        }
        .write(config.name(), out)?;
    }
    comm.finish()?;
    Ok(())
}

#[cfg(feature = "mpi")]
fn raw_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), BenchError> {
    use mpi::topology::Communicator;

    let (universe, world) = raw_mpi::init_pair(config.name())?;
    let rank = world.rank();
    let max_len = sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(measure::ACK_LEN);
    let mut ep = endpoint::RawMpiEndpoint::new(world, max_len);
    let samples = measure::sweep(&mut ep, sizes)?;
    if rank == 0 {
        RunResult {
            backend: "rsmpi".to_owned(),
            sizes: samples,
            disturbed: false,
            sweep: 0,
        }
        .write(config.name(), out)?;
    }
    drop(ep);
    drop(universe);
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn raw_worker(config: Config, _sizes: &[usize], _out: &Path) -> Result<(), BenchError> {
    Err(BenchError::Setup {
        config: config.name(),
        detail: format!("this build has no MPI; rebuild with `{MPI_BUILD_HINT}`"),
    })
}
