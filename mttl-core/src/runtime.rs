//! The router: start-up, the loop that interleaves mttl threads with
//! message handling, and dispatch. It is the one module that names every
//! service (the list is in `dispatch`); the services know only the
//! context below them.
//!
//! One OS thread per process runs everything. The loop:
//!
//! 1. run up to [`BATCH`] ready threads ([`thread::run_ready`](crate::thread::run_ready));
//! 2. if a thread panicked and nothing caught it (a remote function's
//!    panic goes back to its caller, a joined thread's to its joiner; an
//!    `spmd` task's is not caught), stop the job at once (the failure
//!    protocol in `context`);
//! 3. send the batches of small messages the threads left (see `outbox`);
//!    then take messages: without waiting when threads are ready (on TCP
//!    only once [`TCP_POLL_EVERY`] has passed since the last look), else spinning
//!    then parking in the backend (`recv_any` with a timeout); dispatch each
//!    one on the native stack to the service that owns its kind, which may
//!    wake or spawn threads but never runs user code itself;
//! 4. repeat until the exit protocol (in `exit`) says this node is done.
//!
//! # Start-up
//!
//! 1. Self-launch if `MTTL_NP` asks for it (see `mttl_comm::launch`); with
//!    `MTTL_BACKEND=local`, run the ranks as threads of this process instead
//!    (`local`), each going on from step 2 with the endpoint it was given in
//!    place of `Comm::init`.
//! 2. `Comm::init`; the context is installed, then every service starts,
//!    in the order of the list.
//! 3. Every rank but 0 sends `HELLO` with its registry digest and listing;
//!    rank 0 compares each with its own and answers `HELLO_ACK` (ok, or the
//!    differences, after which every rank exits with status 2). See `hello`.
//! 4. Rank 0 spawns the user's main as thread `main`; the others serve.
//!
//! # Shut-down
//!
//! 1. The loop ends (see the exit protocol in `exit`).
//! 2. Sends of bodies borrowed from threads are waited for; the context is
//!    taken back and every service stops (its state dropped).
//! 3. The remaining threads are unwound; the rank prints its statistics if
//!    `MTTL_STATS` is set, calls `Comm::finish` and exits with the code.
//!
//! A job in which nothing can move any more is stopped by the deadlock
//! watchdog (see `watchdog`).

use std::time::Duration;

mod dispatch;
mod exit;
mod hello;
mod local;
mod start;

pub use self::start::{start, MainResult};

/// Threads run between two looks at the network, at the most.
const BATCH: usize = 64;

/// On TCP, while threads are ready, the loop looks at the network only
/// once this long has passed since it last did (or when a thread asks it
/// to, see `thread::yield_to_loop`): a look there is a system call, which
/// costs threads that yield to each other more than the switch itself.
/// Messages wait at most this long more for a rank whose threads keep
/// running. On MPI a look is one `MPI_Test`, and the loop looks after
/// every batch of threads.
const TCP_POLL_EVERY: Duration = Duration::from_micros(5);

/// How long an idle loop parks in the backend before looking again.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// The exit code of a job whose ranks run different programs.
const MISMATCH_CODE: i32 = 2;
