//! The start of every raw rsmpi baseline worker: MPI at the thread level
//! mttl's MPI backend uses, in a job of exactly two ranks.

use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;

use crate::bench::error::BenchError;

/// Initialises MPI at `FUNNELED` (as mttl's MPI backend does) and checks
/// the job has two ranks; `config` names the configuration in errors.
/// Keep the universe until the worker is done: dropping it finalises MPI.
pub(crate) fn init_pair(
    config: &'static str,
) -> Result<(Universe, SimpleCommunicator), BenchError> {
    let setup = |detail: String| BenchError::Setup { config, detail };
    // The mttl MPI backend runs at FUNNELED; the baseline does the same.
    let (universe, _) = mpi::initialize_with_threading(Threading::Funneled)
        .ok_or_else(|| setup("MPI was already initialised in this process".into()))?;
    let world = universe.world();
    if world.size() != 2 {
        return Err(setup(format!(
            "the MPI job has {} ranks instead of 2 (was this program started by the mpirun \
             of the MPI it was built against?)",
            world.size()
        )));
    }
    Ok((universe, world))
}
