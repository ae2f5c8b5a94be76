//! A worker rank of `mttl-bench comm` (step 3 of the [module docs](super)):
//! joins a two-rank job of one configuration, runs the measurement loops,
//! and on rank 0 writes the results file.

use std::path::Path;

use mttl_comm::{AnyComm, Comm};

#[cfg(feature = "mpi")]
use super::endpoint;
use super::endpoint::MttlEndpoint;
use super::measure::SizeSamples;
use super::results::RunResult;
#[cfg(not(feature = "mpi"))]
use super::MPI_BUILD_HINT;
use super::{measure, BenchError, Config};
use crate::bench::common::jobs::BenchConfig;
#[cfg(feature = "mpi")]
use crate::bench::common::raw_mpi;
use crate::bench::results_file::ResultsFile;

/// Step 3 of the [module docs](super): one worker rank.
/// `second_first`: in `mpi-vs-raw` and `raw-vs-raw`, the second stack
/// takes the first turn ([`measure::interleave`]).
pub(super) fn worker(
    config: Config,
    sizes: &[usize],
    out: &Path,
    second_first: bool,
) -> Result<(), BenchError> {
    match config {
        Config::Tcp | Config::Mpi => mttl_worker(config, sizes, out),
        Config::RawMpi | Config::RawMpiTcp => raw_worker(config, sizes, out),
        #[cfg(feature = "mpi")]
        Config::MpiVsRaw => interleaved_worker(config, sizes, out, second_first),
        #[cfg(feature = "mpi")]
        Config::RawVsRaw => control_worker(config, sizes, out, second_first),
        // Without MPI, the same refusal as raw MPI's.
        #[cfg(not(feature = "mpi"))]
        Config::MpiVsRaw | Config::RawVsRaw => {
            let _ = second_first;
            raw_worker(config, sizes, out)
        }
    }
}

/// Joins the job on mttl's `backend`, checking it is a two-rank job of
/// that backend.
fn join_mttl(config: Config, backend: &str) -> Result<AnyComm, BenchError> {
    let comm = AnyComm::init()?;
    let setup = |detail: String| BenchError::Setup {
        config: config.name(),
        detail,
    };
    let chosen = comm.backend_name();
    if chosen != backend {
        return Err(setup(format!(
            "the launch environment chose the {chosen} backend instead of {backend}"
        )));
    }
    if comm.size() != 2 {
        return Err(setup(format!(
            "the job has {} ranks instead of 2",
            comm.size()
        )));
    }
    Ok(comm)
}

fn mttl_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), BenchError> {
    let comm = join_mttl(config, config.name())?;
    let backend = comm.backend_name().to_owned();
    let mut ep = MttlEndpoint::new(comm);
    let samples = measure::sweep(&mut ep, sizes)?;
    let comm = ep.into_comm();
    if comm.rank() == 0 {
        write_run(config, out, &backend, samples, Vec::new())?;
    }
    comm.finish()?;
    Ok(())
}

/// Rank 0's results file: `backend`'s samples, and raw rsmpi's from the
/// same job (`reference`; empty for a single stack).
fn write_run(
    config: Config,
    out: &Path,
    backend: &str,
    sizes: Vec<SizeSamples>,
    reference: Vec<SizeSamples>,
) -> Result<(), BenchError> {
    RunResult {
        backend: backend.to_owned(),
        sizes,
        reference,
        disturbed: false,
        sweep: 0,
    }
    .write(config.name(), out)
}

/// The largest message a raw endpoint must receive in a sweep of `sizes`.
#[cfg(feature = "mpi")]
fn raw_max_len(sizes: &[usize]) -> usize {
    sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(measure::ACK_LEN)
}

/// `mpi-vs-raw`: mttl's MPI backend and raw rsmpi in one job, taking
/// turns. The backend initialises MPI (and finalises it in `finish`); raw
/// rsmpi works on `MPI_COMM_WORLD`, which the backend leaves alone (it
/// talks on communicators of its own), so the two never see each other's
/// messages.
#[cfg(feature = "mpi")]
fn interleaved_worker(
    config: Config,
    sizes: &[usize],
    out: &Path,
    second_first: bool,
) -> Result<(), BenchError> {
    let comm = join_mttl(config, Config::Mpi.name())?;
    let rank = comm.rank();
    let mut raw = endpoint::RawMpiEndpoint::new(
        mpi::topology::SimpleCommunicator::world(),
        raw_max_len(sizes),
    );
    let mut ep = MttlEndpoint::new(comm);
    let (samples, reference) = measure::interleave(&mut ep, &mut raw, sizes, second_first)?;
    drop(raw);
    if rank == 0 {
        write_run(config, out, Config::Mpi.name(), samples, reference)?;
    }
    ep.into_comm().finish()?;
    Ok(())
}

#[cfg(feature = "mpi")]
fn raw_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), BenchError> {
    use mpi::topology::Communicator;

    let (universe, world) = raw_mpi::init_pair(config.name())?;
    let rank = world.rank();
    let mut ep = endpoint::RawMpiEndpoint::new(world, raw_max_len(sizes));
    let samples = measure::sweep(&mut ep, sizes)?;
    if rank == 0 {
        write_run(config, out, "rsmpi", samples, Vec::new())?;
    }
    drop(ep);
    drop(universe);
    Ok(())
}

/// `raw-vs-raw`: two raw rsmpi endpoints, each with buffers of its own,
/// taking turns as in `mpi-vs-raw`.
#[cfg(feature = "mpi")]
fn control_worker(
    config: Config,
    sizes: &[usize],
    out: &Path,
    second_first: bool,
) -> Result<(), BenchError> {
    use mpi::topology::Communicator;

    let (universe, world) = raw_mpi::init_pair(config.name())?;
    let rank = world.rank();
    let mut first = endpoint::RawMpiEndpoint::new(world.duplicate(), raw_max_len(sizes));
    let mut second = endpoint::RawMpiEndpoint::new(world, raw_max_len(sizes));
    let (samples, reference) = measure::interleave(&mut first, &mut second, sizes, second_first)?;
    if rank == 0 {
        write_run(config, out, "rsmpi", samples, reference)?;
    }
    drop((first, second));
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
