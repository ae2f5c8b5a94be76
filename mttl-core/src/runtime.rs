//! The runtime of one process: its comm backend, the message handler and
//! the main loop that interleaves mttl threads with message handling.
//! Start-up and the loop live in `start`, what the loop does with a message
//! in `dispatch`, sending in `send`; this file holds the state they share.
//!
//! One OS thread per process runs everything. The loop:
//!
//! 1. run up to [`BATCH`] ready threads ([`thread::run_ready`](crate::thread::run_ready));
//! 2. if a thread panicked (outside a remote function, whose panics go back
//!    to its caller), stop the job (see *Failure* below);
//! 3. send the batches of small messages the threads left (see `outbox`);
//!    then take messages: without waiting when threads are ready (on TCP
//!    only once [`TCP_POLL_EVERY`] has passed since the last look), else spinning
//!    then parking in the backend (`recv_any` with a timeout); dispatch each
//!    one on the native stack ([`Runtime::dispatch`]), which may wake or
//!    spawn threads but never runs user code itself;
//! 4. repeat until the exit protocol says this node is done.
//!
//! # Start-up
//!
//! 1. Self-launch if `MTTL_NP` asks for it (see `mttl_comm::launch`); with
//!    `MTTL_BACKEND=local`, run the ranks as threads of this process instead
//!    (`local`), each going on from step 3 with the endpoint it was given
//!    in place of step 2's `Comm::init`.
//! 2. `Comm::init`; the runtime is installed in a thread-local.
//! 3. Every rank but 0 sends `HELLO` with its registry digest and listing;
//!    rank 0 compares each with its own and answers `HELLO_ACK` (ok, or the
//!    differences, after which every rank exits with status 2).
//! 4. Rank 0 spawns the user's main as thread `main`; the others serve.
//!
//! # Exit protocol
//!
//! 1. Rank 0's main returns with an exit code.
//! 2. Rank 0 sends `EXIT(code)` to every other rank.
//! 3. Each rank answers `EXIT_ACK` and leaves its loop.
//! 4. Rank 0 leaves its loop once every `EXIT_ACK` is in.
//! 5. Every rank unwinds its remaining threads, prints its statistics if
//!    `MTTL_STATS` is set, calls `Comm::finish` and exits with the code.
//!
//! # Failure
//!
//! A thread panic, a comm error or a malformed message stops the job: the
//! rank prints one line naming itself and the cause, sends `ABORT` to every
//! other rank (which print whose failure stopped them and exit with the same
//! code), and exits non-zero. No rank exits until [`ABORT_LINGER`] after it
//! sent or printed, as a launcher kills every rank once one exits non-zero:
//! each rank gets to say why it stops. When the cause is a rank that is
//! gone, or an abort from another rank, the rank also prints what each of
//! its blocked threads gave up waiting for. A job in which nothing can move any more is
//! stopped by the deadlock watchdog (see `watchdog`).

use std::any::Any;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::time::Duration;

use mttl_comm::{AnyComm, Comm, CommError, CommTuning, Rank, SendHandle};
use rustc_hash::FxHashMap;

use crate::outbox::Outbox;
use crate::stats::Stats;
use crate::watchdog::{self, Watchdog};
use crate::wire::{self, HeaderBuf};
use crate::{coll, global};

mod dispatch;
mod local;
mod send;
mod start;

pub use self::start::{start, MainResult};

/// Threads run between two looks at the network, at the most.
const BATCH: usize = 64;

/// On TCP, while threads are ready, the loop looks at the network only
/// once this long has passed since it last did (or when a thread asks it
/// to, see `thread::yield_to_loop`): a look there is a system call (about
/// half a microsecond, which made threads yielding to each other pay 8 ns
/// a switch, 16 instead of 9). Messages wait at most this long more for a
/// rank whose threads keep running. On MPI a look is one `MPI_Test`, and
/// the loop looks after every batch of threads, as before: looking less
/// often there gained nothing measurable and `ainvoke` throughput seemed
/// to suffer.
const TCP_POLL_EVERY: Duration = Duration::from_micros(5);

/// How long an idle loop parks in the backend before looking again.
const IDLE_TICK: Duration = Duration::from_secs(1);

/// How long the body of a large message may lag its header.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a failing rank waits after sending its aborts before exiting.
const ABORT_LINGER: Duration = Duration::from_millis(300);

/// The exit code of a job stopped by a failure.
const FAILURE_CODE: i32 = 1;

/// The exit code of a job whose ranks run different programs.
const MISMATCH_CODE: i32 = 2;

thread_local! {
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

/// Runs `f` on this process's runtime.
///
/// # Panics
///
/// Panics outside a running mttl program (no `#[mttl::main]`), or when
/// called re-entrantly (a runtime bug).
pub(crate) fn with_rt<R>(f: impl FnOnce(&mut Runtime) -> R) -> R {
    RUNTIME.with(|cell| {
        let mut guard = cell.borrow_mut();
        let rt = guard.as_mut().expect(
            "the mttl runtime is not running: call mttl from #[mttl::main] and what it invokes",
        );
        f(rt)
    })
}

/// Like [`with_rt`], doing nothing when the runtime is absent or busy (for
/// destructors).
pub(crate) fn try_with_rt(f: impl FnOnce(&mut Runtime)) {
    let _ = RUNTIME.try_with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut() {
            if let Some(rt) = guard.as_mut() {
                f(rt);
            }
        }
    });
}

/// This process's rank (node number).
pub fn rank() -> Rank {
    with_rt(|rt| rt.rank)
}

/// The number of processes (nodes) in the job.
pub fn size() -> usize {
    with_rt(|rt| rt.size)
}

/// The name of the backend in use: `"tcp"`, `"mpi"` or `"local"`.
pub fn backend_name() -> &'static str {
    with_rt(|rt| rt.comm.backend_name())
}

/// Sends now the small messages this rank holds back to send together.
///
/// A burst of small messages to one rank (`ainvoke`s, `nwrite`s, replies)
/// leaves as one message: the first at once, the others when the calling
/// thread blocks or yields, or the batch fills (see `MTTL_AGGREGATE`). A
/// thread that starts a burst and then computes for a long time without
/// blocking should call `flush` first, so the peers are not kept waiting
/// for all but the first message until the computation ends:
///
/// ```
/// use mttl_core::GlobalArray;
///
/// let code = mttl_core::start(|| {
///     let halo = GlobalArray::<f64>::new(4);
///     // In a job of several nodes, a pointer into the next node's array.
///     let next = halo.ptr(0);
///     for (i, v) in [1.0, 2.0, 3.0, 4.0].into_iter().enumerate() {
///         next.add(i).nwrite(v); // to another node: batched after the first
///     }
///     mttl_core::flush(); // they leave now, not after the computation
///     let work: f64 = (1..=1000).map(f64::from).sum();
///     mttl_core::fence();
///     assert_eq!(halo.to_vec(), vec![1.0, 2.0, 3.0, 4.0]);
///     assert_eq!(work, 500_500.0);
/// });
/// assert_eq!(code, 0);
/// ```
pub fn flush() {
    with_rt(|rt| {
        if let Err(e) = rt.flush_all() {
            rt.comm_failed(&e);
        }
    });
}

/// This rank's communication statistics so far.
pub fn stats() -> Stats {
    with_rt(|rt| rt.stats)
}

/// Decodes a remote write into the cell it names.
pub(crate) type Deliver = fn(cell: &dyn Any, status: u8, body: &[u8]) -> Result<(), String>;

/// Cells reachable from other nodes: global `SyncCell`s and invoke replies.
///
/// A cell's id is never given to another cell while ids remain (they are
/// handed out in order and wrap after 2^32), so a handle kept past its
/// cell's end can only miss, never reach a newer cell.
#[derive(Default)]
pub(crate) struct CellTable {
    cells: FxHashMap<u32, (Weak<dyn Any>, Deliver)>,
    next: u32,
}

impl std::fmt::Debug for CellTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CellTable({} cells, next id {})",
            self.cells.len(),
            self.next
        )
    }
}

impl CellTable {
    pub(crate) fn insert(&mut self, cell: Weak<dyn Any>, deliver: Deliver) -> u32 {
        // After a wrap, skip the ids of cells that still live.
        while self.cells.contains_key(&self.next) {
            self.next = self.next.wrapping_add(1);
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.cells.insert(id, (cell, deliver));
        id
    }

    pub(crate) fn remove(&mut self, id: u32) {
        self.cells.remove(&id);
    }

    /// Hands a remote write to its cell.
    pub(crate) fn deliver(&mut self, id: u32, status: u8, body: &[u8]) -> Result<(), String> {
        let Some((weak, deliver)) = self.cells.get(&id) else {
            return Err(format!(
                "cell {id} does not exist (it was dropped, or never made global)"
            ));
        };
        let Some(cell) = weak.upgrade() else {
            // The one reply a dropped call's cell was kept for (see
            // `Pending`'s `Drop`): the id is done with from now on.
            self.remove(id);
            return Err(format!(
                "cell {id} no longer exists (the call it answers was dropped unwaited)"
            ));
        };
        deliver(&*cell, status, body)
    }
}

/// The runtime of this process.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) comm: AnyComm,
    pub(crate) rank: Rank,
    pub(crate) size: usize,
    pub(crate) eager_limit: usize,
    pub(crate) stats: Stats,
    pub(crate) cells: CellTable,
    pub(crate) global: global::Memory,
    pub(crate) coll: coll::State,
    /// Reusable buffer for small messages (header and body in one).
    scratch: Vec<u8>,
    pub(crate) watchdog: Watchdog,
    outbox: Outbox,
    /// Reused by [`Runtime::flush_all`].
    flush_list: Vec<Rank>,
    exit_code: Option<i32>,
    exit_acks: usize,
    /// Non-blocking sends of bodies borrowed from a suspended thread's
    /// memory (`nsend_borrowed`), until that thread saw them over.
    pub(crate) borrowed_sends: Vec<SendHandle>,
    /// Non-blocking sends of bodies the runtime keeps (`nwrite_owned`),
    /// oldest first, until a fence (or the limit on their number) sees
    /// them over.
    pub(crate) owned_sends: VecDeque<OwnedSend>,
    /// The bytes of the bodies in `owned_sends`.
    pub(crate) owned_bytes: usize,
}

/// A send of a body that the runtime owns while it leaves.
#[derive(Debug)]
pub(crate) struct OwnedSend {
    pub(crate) handle: SendHandle,
    /// The bytes this send carries.
    pub(crate) len: usize,
    /// What holds the body's memory, dropped once the send is over (only
    /// with the last send of a body sent in pieces: earlier ones are over
    /// first, since these are taken off in order).
    pub(crate) _body: Option<Rc<dyn Any>>,
}

impl Runtime {
    fn new(comm: AnyComm) -> Result<Runtime, String> {
        let eager_limit = match std::env::var("MTTL_EAGER_LIMIT") {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("MTTL_EAGER_LIMIT={v:?} is not a number of bytes"))?,
            Err(_) => 64 * 1024,
        };
        let size = comm.size();
        let outbox = Outbox::new(size, comm.batch_len())?;
        Ok(Runtime {
            rank: comm.rank(),
            size,
            comm,
            eager_limit,
            stats: Stats::default(),
            cells: CellTable::default(),
            global: global::Memory::default(),
            coll: coll::State::default(),
            scratch: Vec::with_capacity(4096),
            watchdog: Watchdog::from_env()?,
            outbox,
            flush_list: Vec::new(),
            exit_code: None,
            exit_acks: 0,
            borrowed_sends: Vec::new(),
            owned_sends: VecDeque::new(),
            owned_bytes: 0,
        })
    }

    /// Stops the job because of `why` (see *Failure*). Never returns.
    pub(crate) fn fail(&mut self, why: &str, code: i32) -> ! {
        report_line(&format!("mttl: rank {}: {why}", self.rank));
        self.abort_others(why, code)
    }

    /// Stops the job because a comm primitive failed. When a peer is gone,
    /// says what each thread of this rank was waiting for: none of it will
    /// come.
    pub(crate) fn comm_failed(&mut self, e: &CommError) -> ! {
        // The error names this rank already; say it once.
        let why = format!("{}: {}", e.op, e.kind);
        report_line(&format!("mttl: rank {}: {why}", self.rank));
        if e.lost_peer().is_some() {
            watchdog::report_waits(self.rank, "gave up waiting for");
        }
        self.abort_others(&why, FAILURE_CODE)
    }

    /// Sends `ABORT` to every other rank, lingers and exits with `code`.
    fn abort_others(&mut self, why: &str, code: i32) -> ! {
        let mut message = HeaderBuf::with_capacity(4).i32(code).bytes;
        message.extend_from_slice(format!("rank {}: {why}", self.rank).as_bytes());
        let me = self.rank;
        for r in (0..self.size).filter(|&r| r != me) {
            // On its own, never in a batch: a rank waiting for the body of
            // a large message takes it for what it is.
            let _ = self.flush(r);
            let _ = self.comm.send(r, wire::ABORT, &message);
        }
        self.linger();
        std::process::exit(code);
    }

    /// Before a failing rank exits: a launcher (mpirun above all) kills the
    /// other ranks as soon as this one exits non-zero, so give them a moment
    /// to read what this rank sent them and say why they stop.
    pub(crate) fn linger(&mut self) {
        // What could not be sent is lost with its rank anyway.
        let _ = self.flush_all();
        if self.size > 1 {
            std::thread::sleep(ABORT_LINGER);
        }
    }

    fn done(&self) -> bool {
        match self.exit_code {
            None => false,
            Some(_) if self.rank == 0 => self.exit_acks + 1 >= self.size,
            Some(_) => true,
        }
    }

    /// Step 2 of the exit protocol.
    fn begin_exit(&mut self, code: i32) {
        self.exit_code = Some(code);
        let header = HeaderBuf::with_capacity(4).i32(code).bytes;
        for r in 1..self.size {
            if let Err(e) = self.post(r, wire::EXIT, &header, &[]) {
                self.comm_failed(&e);
            }
        }
    }
}

/// Before a rank stopped by another one's failure exits, once it has said
/// why: waits as long as the failing rank lingers, so that the failing rank
/// exits first. A launcher kills every rank once one exits non-zero (MPICH's
/// Hydra within milliseconds), which would cut short the reports of the
/// ranks still writing theirs.
pub(crate) fn let_the_failing_rank_exit_first() {
    std::thread::sleep(ABORT_LINGER);
}

/// Prints `line` and a newline on stderr in one write, so that it stays
/// whole when ranks share a pipe or `mpirun --tag-output` tags each write.
pub(crate) fn report_line(line: &str) {
    use std::io::Write as _;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Sends a cell write to `node` (or delivers it here).
pub(crate) fn write_cell(node: Rank, cell: u32, status: u8, body: &[u8]) {
    with_rt(|rt| {
        if node == rt.rank {
            if let Err(e) = rt.cells.deliver(cell, status, body) {
                panic!("write to a local SyncCell failed: {e}");
            }
            return;
        }
        let header = HeaderBuf::with_capacity(5).u32(cell).u8(status).bytes;
        if let Err(e) = rt.post(node, wire::CELL_WRITE, &header, body) {
            rt.comm_failed(&e);
        }
    })
}
