//! The runtime of one process: its comm backend, the message handler and
//! the main loop that interleaves mttl threads with message handling.
//!
//! One OS thread per process runs everything. The loop:
//!
//! 1. run up to [`BATCH`] ready threads ([`thread::run_ready`]);
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
//! 1. Self-launch if `MTTL_NP` asks for it (see `mttl_comm::launch`).
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
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use mttl_comm::{
    AnyComm, Comm, CommError, ErrorKind, Message, Op, Rank, Received, SendHandle, Tag,
};
use rustc_hash::FxHashMap;

use crate::global::InPlace;
use crate::outbox::{self, Outbox, Route};
use crate::registry::Registry;
use crate::stats::{self, Stats};
use crate::thread;
use crate::watchdog::{self, Watchdog};
use crate::wire::{self, Fields, HeaderBuf};
use crate::{coll, global, invoke};

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

/// The name of the backend in use: `"tcp"` or `"mpi"`.
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

    /// Sends a message of `kind` with `header` and `body` to `dest`,
    /// splitting a large body off (see [`wire`]). Returns when both buffers
    /// may be reused.
    pub(crate) fn post(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body: &[u8],
    ) -> Result<(), CommError> {
        if body.len() > self.eager_limit {
            return self.post_split(dest, kind, header, body);
        }
        match self.outbox.admit(dest, kind, header, body) {
            Route::Batched => return Ok(()),
            Route::BatchedFull => return self.flush(dest),
            Route::Direct => self.flush(dest)?,
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(header);
        self.scratch.extend_from_slice(body);
        self.stats.sent(true, self.scratch.len());
        self.comm.send(dest, kind, &self.scratch)
    }

    /// Sends `header` and `body` as two messages, whatever the body's size
    /// (the large-message protocol of [`wire`]): the body goes straight from
    /// `body` and arrives as its own message, so neither side copies it into
    /// or out of a combined message, for the price of one more message.
    /// Returns when both buffers may be reused.
    pub(crate) fn post_split(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body: &[u8],
    ) -> Result<(), CommError> {
        self.check_large(dest, body.len())?;
        let head = (kind | wire::LARGE, header);
        self.comm.send_headed_bulk(dest, head, wire::DATA, body)?;
        self.stats.sent(true, header.len());
        self.stats.sent(true, body.len());
        Ok(())
    }

    /// [`post_split`](Self::post_split) without waiting for the body to
    /// leave: returns the handle of its non-blocking send.
    ///
    /// # Safety
    ///
    /// `body` must stay valid and unchanged until `send_finished` (or
    /// `send_done`) has returned `true` for the handle.
    pub(crate) unsafe fn post_split_borrowed(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body: &[u8],
    ) -> Result<SendHandle, CommError> {
        // SAFETY: the caller's contract, passed on.
        let handle = unsafe { self.post_split_nonblocking(dest, kind, header, body) }?;
        self.borrowed_sends.push(handle);
        Ok(handle)
    }

    /// [`post_split_borrowed`](Self::post_split_borrowed) for a body that
    /// outlives the thread sending it (the caller keeps the handle).
    ///
    /// # Safety
    ///
    /// As for [`post_split_borrowed`](Self::post_split_borrowed).
    pub(crate) unsafe fn post_split_nonblocking(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body: &[u8],
    ) -> Result<SendHandle, CommError> {
        self.check_large(dest, body.len())?;
        let head = (kind | wire::LARGE, header);
        // SAFETY: the caller's contract, passed on.
        let handle = unsafe {
            self.comm
                .nsend_headed_borrowed(dest, head, wire::DATA, body)
        }?;
        self.stats.sent(true, header.len());
        self.stats.sent(false, body.len());
        Ok(handle)
    }

    /// Waits (at most [`BORROWED_SEND_WAIT`]) for the sends of borrowed
    /// bodies still in flight, before the job's suspended threads are
    /// unwound and their memory released.
    /// Owned bodies still in flight are waited for too, so that the
    /// comm layer finishes with nothing left to send.
    fn finish_borrowed_sends(&mut self) {
        let start = std::time::Instant::now();
        while let Some(&handle) = self.borrowed_sends.last() {
            match self.comm.send_done(handle) {
                Ok(false) if start.elapsed() < BORROWED_SEND_WAIT => {}
                // Done, failed (the job ends anyway), or out of time.
                _ => {
                    self.borrowed_sends.pop();
                }
            }
        }
        while let Some(send) = self.owned_sends.front() {
            match self.comm.send_done(send.handle) {
                Ok(false) if start.elapsed() < BORROWED_SEND_WAIT => {}
                // The body is dropped only after the comm layer is: a send
                // given up on may still read it until then.
                Ok(false) | Err(_) => {
                    if let Some(send) = self.owned_sends.pop_front() {
                        std::mem::forget(send);
                    }
                }
                Ok(true) => {
                    self.owned_sends.pop_front();
                }
            }
        }
    }

    /// Before step 1 of the large-message protocol: checks that a body of
    /// `body_len` bytes can be sent (a header whose body cannot follow would
    /// leave `dest` waiting for it) and sends the small messages batched
    /// for `dest`, which go first.
    fn check_large(&mut self, dest: Rank, body_len: usize) -> Result<(), CommError> {
        let max = self.comm.max_message_len();
        if body_len > max {
            return Err(CommError::new(
                Some(self.rank),
                Op::Send(dest),
                ErrorKind::MessageTooLarge { len: body_len, max },
            ));
        }
        self.flush(dest)
    }

    /// Step 1 of the large-message protocol, once the body is known to be
    /// sendable: the header alone.
    fn send_large_header(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body_len: usize,
    ) -> Result<(), CommError> {
        self.check_large(dest, body_len)?;
        self.comm.send(dest, kind | wire::LARGE, header)?;
        self.stats.sent(true, header.len());
        Ok(())
    }

    /// Like [`post`](Self::post), with a body the comm layer may own: a
    /// large one goes by `nsend` without a copy.
    pub(crate) fn post_owned(
        &mut self,
        dest: Rank,
        kind: Tag,
        header: &[u8],
        body: Vec<u8>,
    ) -> Result<(), CommError> {
        if body.len() > self.eager_limit && dest != self.rank {
            self.send_large_header(dest, kind, header, body.len())?;
            self.stats.sent(false, body.len());
            let h = self.comm.nsend(dest, wire::DATA, body)?;
            // Completion is checked later; TCP and MPI keep the buffer.
            self.stats.test += 1;
            let _ = self.comm.send_done(h)?;
            return Ok(());
        }
        self.post(dest, kind, header, &body)
    }

    /// Sends the batch of small messages to `dest`, if any (see [`outbox`]).
    #[inline]
    pub(crate) fn flush(&mut self, dest: Rank) -> Result<(), CommError> {
        let Some(batch) = self.outbox.take(dest) else {
            return Ok(());
        };
        self.stats.sent(true, batch.len());
        let sent = self.comm.send(dest, wire::BATCH, &batch);
        self.outbox.sent_batch(dest, batch);
        sent
    }

    /// Sends every batch (the loop is about to look at the network).
    pub(crate) fn flush_all(&mut self) -> Result<(), CommError> {
        let mut dests = std::mem::take(&mut self.flush_list);
        self.outbox.take_touched(&mut dests);
        let mut result = Ok(());
        for &d in &dests {
            // Every other batch still leaves; the first error is reported.
            if let Err(e) = self.flush(d) {
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        self.flush_list = dests;
        result
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

    /// Dispatches one message (step 3 of the loop).
    fn dispatch(&mut self, m: Message) {
        let src = m.source;
        if m.tag == wire::BATCH {
            return self.dispatch_batch(src, &m.data);
        }
        let large = m.tag & wire::LARGE != 0;
        let kind = m.tag & !wire::LARGE;
        let Some(hlen) = wire::header_len(kind) else {
            self.fail(
                &format!("malformed message from rank {src}: unknown kind {}", m.tag),
                FAILURE_CODE,
            );
        };
        let data = m.data;
        if data.len() < hlen || (large && data.len() != hlen) {
            self.fail(
                &format!(
                    "malformed message from rank {src}: kind {kind} needs a {hlen}-byte header, got {} bytes",
                    data.len()
                ),
                FAILURE_CODE,
            );
        }
        let (header, body) = data.split_at(hlen);
        let body = if large {
            // Step 3 of the large-message protocol: the body comes next. A
            // remote write's lands in its region when it can.
            if matches!(kind, wire::WRITE | wire::WRITE_ACK) {
                match global::receive_write_in_place(self, src, kind, header) {
                    InPlace::Done => return,
                    InPlace::Received(body) => Cow::Owned(self.check_body(src, body)),
                    InPlace::NotTried => Cow::Owned(self.recv_body(src)),
                }
            } else {
                Cow::Owned(self.recv_body(src))
            }
        } else {
            Cow::Borrowed(body)
        };
        self.handle(src, kind, header, body);
    }

    /// Receives the body of a large message from `src` (step 3 of the
    /// large-message protocol).
    fn recv_body(&mut self, src: Rank) -> Vec<u8> {
        let got = self.comm.recv_from(src, Some(BODY_TIMEOUT));
        self.check_body(src, got.map(|m| m.map(Received::Owned)))
    }

    /// The body of a large message from `src`, as received, or the end of
    /// the job if it is not one.
    pub(crate) fn check_body(
        &mut self,
        src: Rank,
        got: Result<Option<Received>, CommError>,
    ) -> Vec<u8> {
        let tag = match &got {
            Ok(Some(Received::Owned(m))) => m.tag,
            Ok(Some(Received::Placed(e))) => e.tag,
            Ok(None) => self.fail(
                &format!("rank {src} sent a large message's header but not its body within {BODY_TIMEOUT:?}"),
                FAILURE_CODE,
            ),
            Err(e) => self.comm_failed(e),
        };
        if tag != wire::DATA {
            if let Ok(Some(Received::Owned(m))) = got {
                if m.tag == wire::ABORT && m.data.len() >= 4 {
                    // The sender failed between header and body: say why.
                    let (code, why) = m.data.split_at(4);
                    self.aborted(Fields(code).i32(), why);
                }
            }
            self.fail(
                &format!("malformed message from rank {src}: a large message's body has tag {tag}"),
                FAILURE_CODE,
            );
        }
        self.stats.recv += 1;
        match got {
            Ok(Some(Received::Owned(m))) => m.data,
            _ => Vec::new(),
        }
    }

    /// Dispatches the items of a `BATCH` (see [`outbox`]) in order.
    fn dispatch_batch(&mut self, src: Rank, batch: &[u8]) {
        for item in outbox::items(batch) {
            let (kind, data) = match item {
                Ok(item) => item,
                Err(e) => self.fail(
                    &format!("malformed message from rank {src}: {e}"),
                    FAILURE_CODE,
                ),
            };
            let hlen = match wire::header_len(kind) {
                Some(hlen) if kind != wire::BATCH && data.len() >= hlen => hlen,
                _ => self.fail(
                    &format!(
                        "malformed message from rank {src}: a batch holds kind {kind} with {} bytes",
                        data.len()
                    ),
                    FAILURE_CODE,
                ),
            };
            let (header, body) = data.split_at(hlen);
            self.handle(src, kind, header, Cow::Borrowed(body));
        }
    }

    /// Handles one message of `kind` from `src`, its header and body apart.
    fn handle(&mut self, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        let mut f = Fields(header);
        if matches!(kind, wire::WATCH | wire::WATCH_STATE | wire::WATCH_FIRE) {
            return watchdog::dispatch(self, src, kind, f);
        }
        self.watchdog.progressed(1);
        match kind {
            wire::INVOKE => {
                let id = f.u64();
                let cell = f.u32();
                invoke::serve(src, id, cell, body.into_owned());
            }
            wire::CELL_WRITE => {
                let cell = f.u32();
                let status = f.u8();
                if let Err(e) = self.cells.deliver(cell, status, &body) {
                    report_line(&format!(
                        "mttl: rank {}: a write from rank {src} was lost: {e}",
                        self.rank
                    ));
                }
            }
            wire::WRITE
            | wire::WRITE_ACK
            | wire::READ
            | wire::FENCE
            | wire::ATOMIC
            | wire::METHOD => {
                global::dispatch(self, kind, src, header, body);
            }
            wire::COLL => coll::dispatch(self, src, header, body.into_owned()),
            wire::EXIT => {
                let code = f.i32();
                if let Err(e) = self.post(src, wire::EXIT_ACK, &[], &[]) {
                    self.comm_failed(&e);
                }
                self.exit_code = Some(code);
            }
            wire::EXIT_ACK => self.exit_acks += 1,
            wire::ABORT => self.aborted(f.i32(), &body),
            _ => self.fail(
                &format!("malformed message from rank {src}: kind {kind} is not expected now"),
                FAILURE_CODE,
            ),
        }
    }

    /// Another rank failed and sent `ABORT` with `code` and `why`.
    fn aborted(&self, code: i32, why: &[u8]) -> ! {
        report_line(&format!(
            "mttl: rank {}: stopping because {}",
            self.rank,
            String::from_utf8_lossy(why)
        ));
        watchdog::report_waits(self.rank, "gave up waiting for");
        let_the_failing_rank_exit_first();
        std::process::exit(if code == 0 { FAILURE_CODE } else { code });
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

/// How long the end of a job waits for the sends of borrowed bodies.
const BORROWED_SEND_WAIT: Duration = Duration::from_secs(5);

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

/// What `#[mttl::main]` may return: `()`, an `i32` exit code, or a
/// `Result` whose error is printed.
pub trait MainResult {
    /// The process exit code.
    fn exit_code(self) -> i32;
}

impl MainResult for () {
    fn exit_code(self) -> i32 {
        0
    }
}

impl MainResult for i32 {
    fn exit_code(self) -> i32 {
        self
    }
}

impl<E: std::fmt::Debug> MainResult for Result<(), E> {
    fn exit_code(self) -> i32 {
        match self {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("Error: {e:?}");
                1
            }
        }
    }
}

/// Runs an mttl program: what `#[mttl::main]` expands to. Rank 0 runs
/// `main`; every other rank serves until rank 0's main returns. Returns the
/// exit code for the process.
pub fn start<R: MainResult>(main: impl FnOnce() -> R + 'static) -> i32 {
    if let Some(code) = mttl_comm::launch::self_launch_from_env() {
        return code;
    }
    let comm = match AnyComm::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    let rt = match Runtime::new(comm) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mttl: {e}");
            return FAILURE_CODE;
        }
    };
    let rank = rt.rank;
    RUNTIME.with(|cell| *cell.borrow_mut() = Some(rt));
    check_registries();
    with_rt(|rt| {
        if let Err(e) = rt.flush_all() {
            rt.comm_failed(&e);
        }
    });
    if rank == 0 {
        thread::spawn("main", move || {
            let code = main().exit_code();
            with_rt(|rt| rt.begin_exit(code));
        });
    }
    serve();
    // Threads still suspended are about to be unwound: their memory must
    // not be freed under a send still reading it.
    try_with_rt(Runtime::finish_borrowed_sends);
    let rt = RUNTIME.with(|cell| cell.borrow_mut().take());
    thread::unwind_all();
    let Some(rt) = rt else { return FAILURE_CODE };
    let code = rt.exit_code.unwrap_or(FAILURE_CODE);
    if stats::enabled() {
        report_line(&format!("mttl stats rank {}: {}", rt.rank, rt.stats));
    }
    if let Err(e) = rt.comm.finish() {
        eprintln!("mttl: {e}");
        return if code == 0 { FAILURE_CODE } else { code };
    }
    code
}

/// Start-up step 3.
fn check_registries() {
    with_rt(|rt| {
        let reg = Registry::get();
        if rt.size == 1 {
            return;
        }
        if rt.rank != 0 {
            let header = HeaderBuf::with_capacity(8).u64(reg.digest()).bytes;
            if let Err(e) = rt.post(0, wire::HELLO, &header, reg.listing().as_bytes()) {
                rt.comm_failed(&e);
            }
            let ack = match rt.comm.recv_from(0, None) {
                Ok(Some(m)) if m.tag == wire::HELLO_ACK && !m.data.is_empty() => m,
                Ok(_) => rt.fail(
                    "rank 0 answered the start-up check with something else",
                    FAILURE_CODE,
                ),
                Err(e) => rt.comm_failed(&e),
            };
            rt.stats.recv += 1;
            if ack.data[0] != wire::STATUS_OK {
                report_line(&format!(
                    "mttl: rank {}: refused at start-up: {}",
                    rt.rank,
                    String::from_utf8_lossy(&ack.data[1..])
                ));
                std::process::exit(MISMATCH_CODE);
            }
            return;
        }
        let mut problems = Vec::new();
        for _ in 1..rt.size {
            let m = match rt.comm.recv_any(None) {
                Ok(Some(m)) if m.tag == wire::HELLO && m.data.len() >= 8 => m,
                Ok(Some(m)) => rt.fail(
                    &format!(
                        "rank {} sent kind {} before the start-up check",
                        m.source, m.tag
                    ),
                    FAILURE_CODE,
                ),
                Ok(None) => continue,
                Err(e) => rt.comm_failed(&e),
            };
            rt.stats.recv += 1;
            let digest = Fields(&m.data[..8]).u64();
            if digest != reg.digest() {
                problems
                    .push(reg.explain_mismatch(m.source, &String::from_utf8_lossy(&m.data[8..])));
            }
        }
        let verdict = if problems.is_empty() {
            vec![wire::STATUS_OK]
        } else {
            let mut v = vec![wire::STATUS_ERROR];
            v.extend_from_slice(problems.join("\n").as_bytes());
            v
        };
        for r in 1..rt.size {
            let _ = rt.post(r, wire::HELLO_ACK, &verdict, &[]);
        }
        if !problems.is_empty() {
            report_line(&format!(
                "mttl: rank 0: refusing to start: {}",
                problems.join("\n")
            ));
            // Let the verdicts reach every rank before leaving.
            rt.exit_code = Some(MISMATCH_CODE);
            std::thread::sleep(Duration::from_millis(200));
            std::process::exit(MISMATCH_CODE);
        }
    });
}

/// The main loop (see the module docs).
fn serve() {
    let mut last_look = Instant::now();
    let poll_every = with_rt(|rt| match rt.comm {
        AnyComm::Tcp(_) => TCP_POLL_EVERY,
        #[allow(unreachable_patterns)]
        _ => Duration::ZERO,
    });
    loop {
        let ran = thread::run_ready(BATCH);
        if thread::pending_panics() > 0 {
            let p = thread::take_panics().remove(0);
            let at = p.location.map(|l| format!(" at {l}")).unwrap_or_default();
            let why = format!("thread '{}' panicked{at}: {}", p.name, p.message);
            with_rt(|rt| rt.fail(&why, 101));
        }
        if with_rt(|rt| {
            rt.watchdog.progressed(ran);
            // Batches leave before the loop looks at the network.
            if let Err(e) = rt.flush_all() {
                rt.comm_failed(&e);
            }
            rt.done()
        }) {
            return;
        }
        let idle = ran == 0 && thread::ready_threads() == 0;
        if !idle && !poll_every.is_zero() {
            // Threads are ready: look at the network only now and then.
            let now = Instant::now();
            if !thread::take_look_request() && now - last_look < poll_every {
                continue;
            }
            last_look = now;
        }
        let mut wait = Some(if idle { IDLE_TICK } else { Duration::ZERO });
        // Dispatch what has arrived, then get back to the threads.
        for _ in 0..BATCH {
            let got = with_rt(|rt| {
                let m = rt.comm.recv_any(wait);
                if let Ok(Some(_)) = &m {
                    rt.stats.recv += 1;
                }
                m
            });
            match got {
                Ok(Some(m)) => {
                    if with_rt(|rt| {
                        rt.dispatch(m);
                        if rt.done() {
                            // The last acknowledgement must leave.
                            if let Err(e) = rt.flush_all() {
                                rt.comm_failed(&e);
                            }
                            return true;
                        }
                        false
                    }) {
                        return;
                    }
                }
                Ok(None) => {
                    if wait == Some(IDLE_TICK) {
                        with_rt(watchdog::idle);
                    }
                    break;
                }
                Err(e) => with_rt(|rt| rt.comm_failed(&e)),
            }
            wait = Some(Duration::ZERO);
        }
    }
}
