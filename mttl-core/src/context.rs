//! The context: everything a service may reach, and nothing of any
//! service's own state. It owns this rank's comm backend, its rank and the
//! job's size, the outbox of small messages waiting to leave together, the
//! statistics, the sends still in flight (bodies borrowed from a thread or
//! owned by the runtime), and the way a rank stops the job when something
//! fails.
//!
//! Services (`sync`, `invoke`, `global`, `coll`, `watchdog`) reach it
//! through [`with`] from their threads, and get it as `&mut Context` when
//! the router hands them a message ([`Service::handle`]); either way it is
//! borrowed once, so a service never calls [`with`] from inside a handler.
//! The router (`runtime`) creates it at start-up ([`install`]) and takes it
//! back when the loop ends ([`uninstall`]).
//!
//! Files: `send` (sending: messages, the large-message split, owned and
//! borrowed bodies, the outbox's flush), `receive` (a large message's body),
//! `fail` (stopping the job), `service` (what a service provides the
//! router).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use mttl_comm::{AnyComm, Comm, CommTuning, Rank, SendHandle};

use crate::outbox::Outbox;
use crate::stats::Stats;

mod fail;
mod receive;
mod send;
mod service;

pub(crate) use self::fail::{let_the_failing_rank_exit_first, report_line, report_waits, Waiting};
pub(crate) use self::send::test_event;
pub(crate) use self::service::Service;

/// How long the body of a large message may lag its header.
pub(crate) const BODY_TIMEOUT: Duration = Duration::from_secs(60);

/// The exit code of a job stopped by a failure.
pub(crate) const FAILURE_CODE: i32 = 1;

thread_local! {
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
    /// The context's rank and size, also apart: fixed while the job runs,
    /// asked for on every call, and readable inside a handler.
    static RANK_SIZE: Cell<Option<(Rank, usize)>> = const { Cell::new(None) };
}

const NOT_RUNNING: &str =
    "the mttl runtime is not running: call mttl from #[mttl::main] and what it invokes";

/// Runs `f` on this rank's context.
///
/// # Panics
///
/// Panics outside a running mttl program (no `#[mttl::main]`), or when
/// called re-entrantly (a runtime bug: a handler already holds it).
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&mut Context) -> R) -> R {
    CONTEXT.with(|cell| {
        let mut guard = cell.borrow_mut();
        let cx = guard.as_mut().expect(NOT_RUNNING);
        f(cx)
    })
}

/// Like [`with`], doing nothing when the context is absent or busy (for
/// destructors).
pub(crate) fn try_with(f: impl FnOnce(&mut Context)) {
    let _ = CONTEXT.try_with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut() {
            if let Some(cx) = guard.as_mut() {
                f(cx);
            }
        }
    });
}

/// Makes `cx` this rank's context (start-up).
pub(crate) fn install(cx: Context) {
    RANK_SIZE.with(|rs| rs.set(Some((cx.rank, cx.size))));
    CONTEXT.with(|cell| *cell.borrow_mut() = Some(cx));
}

/// Takes this rank's context back (the loop has ended).
pub(crate) fn uninstall() -> Option<Context> {
    RANK_SIZE.with(|rs| rs.set(None));
    CONTEXT.with(|cell| cell.borrow_mut().take())
}

/// This rank and the job's size.
///
/// # Panics
///
/// Panics outside a running mttl program.
#[inline]
#[track_caller]
pub(crate) fn rank_and_size() -> (Rank, usize) {
    RANK_SIZE.with(Cell::get).expect(NOT_RUNNING)
}

/// This process's rank (node number).
#[inline]
#[track_caller]
pub fn rank() -> Rank {
    rank_and_size().0
}

/// The number of processes (nodes) in the job.
#[inline]
#[track_caller]
pub fn size() -> usize {
    rank_and_size().1
}

/// The name of the backend in use: `"tcp"`, `"mpi"` or `"local"`.
#[track_caller]
pub fn backend_name() -> &'static str {
    with(|cx| cx.comm.backend_name())
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
#[track_caller]
pub fn flush() {
    with(Context::flush_all_or_fail);
}

/// This rank's communication statistics so far.
#[track_caller]
pub fn stats() -> Stats {
    with(|cx| cx.stats)
}

/// What every service may use on this rank.
#[derive(Debug)]
pub(crate) struct Context {
    pub(crate) comm: AnyComm,
    pub(crate) rank: Rank,
    pub(crate) size: usize,
    /// Bodies above this many bytes travel as their own message.
    pub(crate) eager_limit: usize,
    pub(crate) stats: Stats,
    /// Reusable buffer for small messages (header and body in one).
    scratch: Vec<u8>,
    outbox: Outbox,
    /// Reused by [`Context::flush_all`].
    flush_list: Vec<Rank>,
    /// Non-blocking sends of bodies borrowed from a suspended thread's
    /// memory (`post_split_borrowed`), until that thread saw them over.
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

impl Context {
    /// The context of a rank that joined the job through `comm`; reads
    /// `MTTL_EAGER_LIMIT` (and the outbox its own variables).
    pub(crate) fn new(comm: AnyComm) -> Result<Context, String> {
        let eager_limit = match std::env::var("MTTL_EAGER_LIMIT") {
            Ok(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("MTTL_EAGER_LIMIT={v:?} is not a number of bytes"))?,
            Err(_) => 64 * 1024,
        };
        let size = comm.size();
        let outbox = Outbox::new(size, comm.batch_len())?;
        Ok(Context {
            rank: comm.rank(),
            size,
            comm,
            eager_limit,
            stats: Stats::default(),
            scratch: Vec::with_capacity(4096),
            outbox,
            flush_list: Vec::new(),
            borrowed_sends: Vec::new(),
            owned_sends: VecDeque::new(),
            owned_bytes: 0,
        })
    }
}
