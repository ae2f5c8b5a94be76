//! `MTTL_BACKEND=local`: the ranks of a job as threads of this process.
//!
//! [`run_job`] makes the job's endpoints (`mttl_comm`'s `LocalComm::job`),
//! runs every rank but 0 on an OS thread of its own, and rank 0 on the
//! calling thread (it runs the user's main, which need not be `Send`).
//! Each rank goes through the same start-up and loop as a rank of a
//! multi-process job ([`run_rank`]), with its own runtime: the runtime and
//! the scheduler live in thread-locals, so ranks share nothing but the
//! process.
//!
//! Process-wide state, and why several ranks in one process are fine with
//! it:
//!
//! - The panic hook and the stack-overflow signal handler are installed
//!   once per process; both find the mttl thread concerned through
//!   thread-locals, and each rank's OS thread gets its own alternate signal
//!   stack when it first runs mttl threads.
//! - The registry of remote functions is static and read-only; every rank
//!   has the same one, so the start-up check passes.
//! - Every rank reads the same environment (`MTTL_EAGER_LIMIT`,
//!   `MTTL_WATCHDOG`, `MTTL_STATS`, ...), so all are configured alike.
//! - A failure (a thread's panic, a comm error, an abort from another rank,
//!   the deadlock watchdog) ends in `std::process::exit` once the rank has
//!   said why and lingered for the others to say so too: here that ends
//!   the whole process, so the whole job, with the failing rank's code,
//!   which is what a launcher does to a job one of whose ranks fails.
//! - Standard output and error are shared and not tagged with the rank.
//!
//! The job's exit code is rank 0's, or if that is 0, the first other rank's
//! that is not; a rank whose OS thread panics (outside the runtime's own
//! handling, which stops the job first) counts as [`FAILURE_CODE`].

use mttl_comm::backend::local::LocalComm;
use mttl_comm::{AnyComm, Comm, CommError};

use super::start::{run_rank, MainResult};
use crate::context::FAILURE_CODE;

/// The native stack of a rank's OS thread: as much as a process's main
/// thread gets (the loop and the dispatcher run there; mttl threads run on
/// stacks of their own).
const RANK_STACK: usize = 8 << 20;

/// The size of the local job asked for by `MTTL_BACKEND=local` and
/// `MTTL_NP`, if one is.
pub(super) fn job_from_env() -> Option<Result<usize, CommError>> {
    mttl_comm::env::local_job_size().transpose()
}

/// Runs a local job of `size` ranks, rank 0 running `main` on this thread,
/// and returns the job's exit code (see the module docs).
pub(super) fn run_job<R: MainResult>(
    size: Result<usize, CommError>,
    main: impl FnOnce() -> R + 'static,
) -> i32 {
    let endpoints = match size.and_then(LocalComm::job) {
        Ok(endpoints) => endpoints,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    let mut endpoints = endpoints.into_iter();
    let Some(first) = endpoints.next() else {
        return FAILURE_CODE;
    };
    let mut others = Vec::new();
    for endpoint in endpoints {
        let rank = endpoint.rank();
        let spawned = std::thread::Builder::new()
            .name(format!("mttl rank {rank}"))
            .stack_size(RANK_STACK)
            .spawn(move || run_rank(AnyComm::Local(endpoint), None::<fn()>));
        match spawned {
            Ok(handle) => others.push((rank, handle)),
            Err(e) => {
                // The ranks already running find rank 0 gone and stop.
                eprintln!("mttl: cannot start rank {rank} as a thread: {e}");
                return FAILURE_CODE;
            }
        }
    }
    let mut code = run_rank(AnyComm::Local(first), Some(main));
    for (rank, handle) in others {
        let rank_code = handle.join().unwrap_or_else(|_| {
            eprintln!("mttl: rank {rank}: its thread panicked");
            FAILURE_CODE
        });
        if code == 0 {
            code = rank_code;
        }
    }
    code
}
