//! The MPI backend: the eight primitives on MPI point-to-point messages
//! (rsmpi, with raw `mpi::ffi` calls on the hot path).
//!
//! # Algorithm
//!
//! mttl messages travel on two private duplicates of `MPI_COMM_WORLD`, the
//! payload as `MPI_UINT8_T`, the mttl tag as the MPI tag:
//!
//! - the **small channel** carries every message of at most
//!   [`SMALL_MAX`] bytes whole ([`BULK_MIN`] for `send_bulk` and
//!   `nsend_bulk`, whose messages `recv_from_into` can then take in place),
//!   and, for each larger one,
//!   a **marker**: its length and where it starts within a cache line,
//!   under its tag plus the marker bit (`max_tag + 1`, so 32768 on any MPI
//!   whose `MPI_TAG_UB` allows);
//! - the **large channel** carries the payloads the markers announce.
//!
//! On Open MPI a whole message of [`EAGER_MAX`] + 1 to twice that many
//! bytes is **split**: its first `EAGER_MAX` bytes go ahead as a message of
//! their own, under its tag plus twice the marker bit, then the rest under
//! its tag, both small enough to travel eagerly; the receiver receives the
//! rest right after the head and hands over the message whole
//! (`posted.rs`). Open MPI's shared memory moves a message past its 4 KiB
//! eager fragment by rendezvous, a system call's copy and an
//! acknowledgement, which costs more than a second eager message
//! ([`split_head_for`]).
//!
//! This rank always has one receive from `ANY_SOURCE` with `ANY_TAG` posted
//! on the small channel (`posted.rs`; persistent: `MPI_Recv_init` once,
//! `MPI_Start` per message): MPI matches a message against it as it
//! arrives, and polling is one `MPI_Test`. (Probing for an unknown message
//! with `MPI_Iprobe` and then receiving it costs more per small round trip,
//! and each empty `MPI_Iprobe` more than an `MPI_Test`.) A marker
//! at once posts the `MPI_Irecv` of its payload, from its sender, into a
//! `Vec` of the announced length. Markers and small messages of one sender
//! share a channel, and its payloads are received in marker order, so MPI's
//! non-overtaking rule gives the contract's per-sender order. Around that
//! sits a little local state:
//!
//! - the **inbox** (`inbox.rs`): messages already taken out of MPI (and large
//!   ones whose payload is arriving), in arrival order: taken while this rank
//!   waited for something else or probed (`progress.rs`), or sent to itself.
//!   Probes and receives serve it first;
//! - the **in-flight sends** (`sends.rs`): per destination, the requests and
//!   owned buffers of `nsend`s not yet seen complete.
//!
//! | primitive   | MPI                                                                    |
//! |-------------|------------------------------------------------------------------------|
//! | `init`      | `MPI_Init_thread(FUNNELED)`, `Comm_rank/size`, `Comm_dup` ×2, errors set to return |
//! | `finish`    | `MPI_Test` every in-flight send and payload receive (draining meanwhile), `MPI_Cancel` and `MPI_Request_free` the posted receive, `MPI_Finalize` |
//! | `probe`     | inbox, else `MPI_Test` of the posted receive                           |
//! | `send`      | `MPI_Send` up to [`EAGER_MAX`] bytes, else (marker and) `MPI_Isend` + `MPI_Test` |
//! | `nsend`     | (marker and) `MPI_Isend` owning the buffer (a split message: two)       |
//! | `send_done` | `MPI_Test` (and, at every 16th call finding the send in flight, one drain) |
//! | `recv_from` | inbox, else `MPI_Test` loop on the posted receive                      |
//! | `recv_any`  | inbox, else `MPI_Test` loop on the posted receive                      |
//! | `recv_from_into` | as `recv_from`; the next message from the source is copied from the posted buffer into the caller's, or if large `MPI_Irecv`'d into it (`in_place.rs`) |
//! | `send_bulk`, `nsend_bulk` | as `send`, `nsend`, but announced by a marker above [`BULK_MIN`] bytes, so that `recv_from_into` takes them in place |
//! | `nsend_borrowed` | as `nsend_bulk`, `MPI_Isend` straight from the caller's memory |
//! | `send_headed_bulk`, `nsend_headed_borrowed` | above [`BULK_MIN`] bytes, one *headed* marker carrying the small head message, then the payload as `send_bulk` / `nsend_borrowed` send it; otherwise a `send` of the head first |
//! | `send_finished` | `MPI_Test`, without the drain of `send_done` |
//!
//! A drain is one `MPI_Test` of the posted receive and, if it got a message,
//! filing it into the inbox (re-posting at the next poll). Every primitive
//! that waits drains (see `progress.rs`), so a large message, which MPI moves
//! only once it is matched, never waits on a rank that is busy waiting for
//! something else.
//!
//! ## `send`, step by step
//!
//! 1. Check the destination, tag and length. A send to self is copied into
//!    the inbox and never touches MPI.
//! 2. Up to [`EAGER_MAX`] bytes: `MPI_Send`. Every MPI sends such messages
//!    eagerly: the call needs the receiver's progress at most, never its
//!    matching receive, so two ranks sending to each other cannot deadlock.
//! 3. Larger: over [`SMALL_MAX`], first the marker
//!    (`MPI_Send`, eager); a split message's head by `MPI_Isend` (a
//!    blocking `MPI_Send` of it cost Open MPI more than the split saved).
//!    Then `MPI_Isend`, and until `MPI_Test` reports it (and the head)
//!    complete, back off (`wait.rs`; the spin is stretched by the time the
//!    copy should take), draining at every 16th poll while spinning and at
//!    every poll once parked (`progress.rs`, `DRAIN_EVERY`). Two ranks
//!    sending large messages to each other both drain, so both sends
//!    complete.
//!
//! ## Receive, step by step
//!
//! 1. Take the oldest inbox entry for this receive (`recv_any`: the oldest,
//!    after draining one more behind it, so a busy inbox cannot starve MPI;
//!    `recv_from`: the oldest from its source); if its payload is still
//!    arriving, keep testing it (draining meanwhile).
//! 2. Otherwise poll the posted receive (posting it first if the last one
//!    completed). A message for this receive is returned at once; anything
//!    else is filed into the inbox. Spin for `MTTL_SPIN_US` (by default at
//!    least twice what a nap really takes, see `wait.rs`), then park in
//!    growing naps until a message or the timeout.
//! 3. The head of a split message posts the receive of its rest, from its
//!    sender, right after it in the posted buffer; the pre-posted receive
//!    is started again only once the rest is in, so nothing else can match
//!    the rest. The message then goes on whole.
//! 4. A message of at most 4 KiB is copied out of the posted buffer into a
//!    `Vec` of its size; a larger one keeps the buffer (shrunk to fit) and a
//!    new one is posted next time.
//! 5. `recv_from_into` only: the next message from the source, if it fits
//!    the caller's buffer and is accepted, lands there: a whole one is
//!    copied out of the posted buffer at once (instead of step 4); for a
//!    marker, nothing is filed, and its payload is received straight into
//!    that buffer and waited for, however long the timeout (`in_place.rs`
//!    explains why).
//!
//! ## `finish`, step by step
//!
//! 1. Test every in-flight send and every payload receive, draining
//!    meanwhile (a peer may be waiting for this rank to take its large
//!    message before it takes ours), until none is in flight.
//! 2. Cancel the posted receive; if a marker had matched it first, receive
//!    that payload too (its sender waits for it).
//! 3. Drop the rsmpi `Universe`: `MPI_Finalize`.
//!
//! Dropping an `MpiComm` without `finish` (an early return, a panic) does
//! not finalise MPI: `MPI_Finalize` waits for every rank, which may be waiting
//! for this one. The process exits unfinalised, the launcher sees it fail and
//! ends the job, and buffers of sends and receives still in flight are
//! leaked, never freed under MPI.
//!
//! # Limits
//!
//! - Tags are `0..=32767`, the range every MPI promises (`MPI_TAG_UB`), when
//!   `MPI_TAG_UB` leaves room for the marker bit above them (Open MPI and
//!   MPICH do, by far); on an MPI with fewer tags, the lower half of them.
//!   Messages are split only where the tags leave room for split heads
//!   too, up to three times the marker bit.
//! - Messages are at most `min(MTTL_MAX_MESSAGE, i32::MAX)` bytes (MPI counts
//!   are `int`).
//! - MPI errors on the backend's communicators are returned (`MPI_ERRORS_RETURN`)
//!   and reported as [`ErrorKind::Mpi`] with the rank and the primitive.
//! - A rank that dies makes the launcher end the whole job; MPI gives no
//!   notice of a peer that finished normally, so a receive from it waits
//!   until its timeout ([`ErrorKind::PeerLost`] is never reported).
//! - `MpiComm` is `!Send`: MPI runs at `MPI_THREAD_FUNNELED`, so only the
//!   thread that called `init` may use it.
//! - A program started by another MPI's launcher is refused at `init`
//!   (`launcher.rs`).

mod in_place;
mod inbox;
mod launcher;
mod library;
mod posted;
mod progress;
mod raw;
mod sends;
mod split;
mod wait;

use std::ffi::c_int;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use mpi::environment::{Threading, Universe};

use self::inbox::Inbox;
use self::launcher::LauncherVars;
use self::library::{batch_len_for, combine_len_for, open_mpi_shared_memory, split_head_for};
use self::posted::Posted;
use self::progress::{Announced, DRAIN_EVERY};
use self::raw::{Channel, MpiCode, World, MIN_TAG_UB};
use self::sends::{Payload, PendingSends};
use self::split::Lead;
use self::wait::LearnedSpin;
use crate::comm::{Comm, Envelope, Message, Rank, Received, SendHandle, Tag};
use crate::env;
use crate::error::{CommError, ErrorKind, Op};
use crate::tuning::CommTuning;

/// The largest message `send` passes to a blocking `MPI_Send`; larger ones
/// take the `MPI_Isend` + drain path.
///
/// It must stay below the eager limit of every transport, past which
/// `MPI_Send` waits for the matching receive. Open MPI's shared-memory
/// transport (vader) is the smallest: its 4 KiB eager fragment carries up to
/// about 4040 payload bytes (Open MPI 4.1.4). MPICH 4.0.2
/// (Debian's, ch4:ucx) sends up to 8255 bytes eagerly on shared memory, and
/// TCP and InfiniBand allow more.
pub const EAGER_MAX: usize = 4000;

/// The largest message sent whole on the small channel, and so the size of
/// the pre-posted buffer. Larger ones pay for a marker (one more small MPI
/// message), negligible beside the transfer time from a few hundred KiB
/// up; smaller ones are handed over in the buffer they arrived in.
pub const SMALL_MAX: usize = 64 << 10;

/// The largest message `send_bulk` and `nsend_bulk` send whole on the
/// small channel; larger ones are announced by a marker, so that
/// `recv_from_into` receives them in place.
///
/// A whole message lands in the pre-posted buffer and is copied from there
/// into the caller's memory; an announced one costs a marker instead, which
/// is less than the copy from about this size on (`mttl-bench rwrite`
/// shows the difference for medium `nwrite`s).
pub const BULK_MIN: usize = 16 << 10;

/// Why a second `init` in one process fails.
const ALREADY_INITIALISED: &str = "MPI is already initialised in this process; the MPI backend \
    can be started once per process (MPI cannot be initialised again, even after finish)";

/// The MPI backend. See the [module documentation](self) for the algorithm.
pub struct MpiComm {
    world: World,
    rank: Rank,
    size: usize,
    max_message: usize,
    /// See [`CommTuning::batch_len`] and [`batch_len_for`].
    batch_len: usize,
    /// See [`CommTuning::combine_len`] and [`combine_len_for`].
    combine_len: usize,
    spin: Duration,
    /// What recent waits taught about how long to spin on (`wait.rs`).
    learned_spin: LearnedSpin,
    /// `send_done` calls that found their send in flight, for pacing
    /// their drains ([`DRAIN_EVERY`]).
    send_done_polls: u32,
    inbox: Inbox,
    posted: Posted,
    sends: PendingSends,
    /// A payload announced by a headed marker whose head was just handed
    /// out, its receive not yet posted (`progress.rs`).
    announced: Option<Announced>,
    /// The largest tag the caller may use.
    max_tag: c_int,
    /// Added to a tag, marks a marker (see `posted.rs`): `max_tag + 1`.
    marker_bit: c_int,
    /// Whole messages longer than this, up to twice as long, go as two
    /// eager messages, this head and the rest ([`split_head_for`]), to the
    /// ranks `split_to` marks.
    split_head: Option<usize>,
    /// Per rank, whether it shares this rank's node (its messages go
    /// through shared memory, where splitting pays).
    split_to: Vec<bool>,
    /// Present until `finish` (or drop) ends the job; dropping it calls
    /// `MPI_Finalize`.
    universe: Option<Universe>,
    /// `MPI_THREAD_FUNNELED`: the backend must stay on the thread that
    /// initialised MPI, whichever MPI implementation it is built on.
    _funneled: PhantomData<*const ()>,
}

impl fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("max_message", &self.max_message)
            .field("batch_len", &self.batch_len)
            .field("combine_len", &self.combine_len)
            .field("spin", &self.spin)
            .field("learned_spin", &self.learned_spin.get())
            .field("inbox", &self.inbox.len())
            .field("posted", &self.posted)
            .field("sends_in_flight", &self.sends.len())
            .field("finished", &self.universe.is_none())
            .finish()
    }
}

impl MpiComm {
    /// An error seen by this rank during `op`.
    #[cold]
    fn error(&self, op: Op, kind: ErrorKind) -> CommError {
        CommError::new(Some(self.rank), op, kind)
    }

    /// An MPI call made for `op` failed with `code`.
    #[cold]
    fn mpi_error(&self, op: Op, code: MpiCode) -> CommError {
        self.error(op, ErrorKind::Mpi(code.describe()))
    }

    /// Checks a destination rank for `op`; returns it as an MPI rank.
    #[inline]
    fn check_rank(&self, op: Op, peer: Rank) -> Result<c_int, CommError> {
        if peer < self.size {
            // `size` came from MPI as a non-negative `int`.
            Ok(peer as c_int)
        } else {
            Err(self.error(
                op,
                ErrorKind::NoSuchRank {
                    peer,
                    size: self.size,
                },
            ))
        }
    }

    /// Checks destination, tag and length of an outgoing message for `op`;
    /// returns them as MPI's `int`s.
    #[inline]
    fn check_send(
        &self,
        op: Op,
        dest: Rank,
        tag: Tag,
        len: usize,
    ) -> Result<(c_int, c_int, c_int), CommError> {
        let dest = self.check_rank(op, dest)?;
        if tag > self.max_tag as Tag {
            return Err(self.tag_error(op, tag));
        }
        if len > self.max_message {
            return Err(self.error(
                op,
                ErrorKind::MessageTooLarge {
                    len,
                    max: self.max_message,
                },
            ));
        }
        // `tag <= max_tag` and `len <= max_message <= i32::MAX`: both fit.
        Ok((dest, tag as c_int, len as c_int))
    }

    #[cold]
    fn tag_error(&self, op: Op, tag: Tag) -> CommError {
        self.error(
            op,
            ErrorKind::Mpi(format!(
                "tag {tag} is above {max}, the largest tag the MPI backend carries (half of \
                 MPI_TAG_UB, at most {MIN_TAG_UB}); use tags 0..={max} with the MPI backend",
                max = self.max_tag
            )),
        )
    }

    /// Leaves MPI unfinalised so the launcher ends the job (see the module
    /// documentation); in-flight buffers are leaked by `PendingSends`.
    fn abandon(&mut self) {
        if let Some(universe) = self.universe.take() {
            std::mem::forget(universe);
        }
    }
}

impl Comm for MpiComm {
    fn init() -> Result<Self, CommError> {
        let init_error = |rank: Option<Rank>, kind| CommError::new(rank, Op::Init, kind);
        let spin_set = std::env::var(env::SPIN_US).is_ok_and(|v| !v.is_empty());
        let spin = wait::spin_time(env::spin_time()?, spin_set);
        let max_message = env::max_message()?.min(i32::MAX as usize);
        let launcher_vars = LauncherVars::read();
        launcher_vars
            .check_srun()
            .map_err(|why| init_error(None, ErrorKind::Environment(why)))?;
        super::malloc::keep_freed_memory();
        let (universe, threading) = mpi::initialize_with_threading(Threading::Funneled)
            .ok_or_else(|| init_error(None, ErrorKind::Environment(ALREADY_INITIALISED.into())))?;
        if threading < Threading::Funneled {
            tracing::debug!(?threading, "MPI provides less than MPI_THREAD_FUNNELED");
        }
        // SAFETY: MPI was just initialised on this thread. `universe`, which
        // finalises MPI when dropped, goes into the returned `MpiComm` beside
        // the `World` and is dropped only in `finish`/`drop`, after the last
        // use of the `World`; an early return below drops it after the
        // `World`'s last use too. `MpiComm` is `!Send`, so the `World` stays
        // on this thread.
        let world = unsafe { World::new() }
            .map_err(|code| init_error(None, ErrorKind::Mpi(code.describe())))?;
        let (rank, size) = world
            .rank_and_size()
            .map_err(|code| init_error(None, ErrorKind::Mpi(code.describe())))?;
        let (Ok(rank), Ok(size)) = (Rank::try_from(rank), usize::try_from(size)) else {
            return Err(init_error(
                None,
                ErrorKind::Mpi(format!("MPI reported rank {rank} of {size} processes")),
            ));
        };
        launcher_vars
            .check(size)
            .map_err(|why| init_error(Some(rank), ErrorKind::Environment(why)))?;
        let tag_ub = world
            .tag_ub()
            .map_err(|code| init_error(Some(rank), ErrorKind::Mpi(code.describe())))?;
        // Tags up to 32767 (what every MPI carries) when markers fit above
        // them; on an MPI with fewer tags, the lower half for each.
        let max_tag = MIN_TAG_UB.min(tag_ub / 2);
        let library = launcher::library_name();
        let shared_memory = open_mpi_shared_memory(
            std::env::var("OMPI_MCA_pml").ok().as_deref(),
            std::env::var("OMPI_MCA_btl").ok().as_deref(),
            std::fs::read_to_string("/proc/self/maps").ok().as_deref(),
        );
        let mut split_to = vec![false; size];
        for peer in world
            .same_node_ranks()
            .map_err(|code| init_error(Some(rank), ErrorKind::Mpi(code.describe())))?
        {
            if let Some(same) = usize::try_from(peer).ok().and_then(|p| split_to.get_mut(p)) {
                *same = true;
            }
        }
        tracing::debug!(rank, size, "MPI backend up");
        Ok(MpiComm {
            world,
            rank,
            size,
            max_message,
            batch_len: batch_len_for(&library),
            combine_len: combine_len_for(&library),
            spin,
            learned_spin: LearnedSpin::default(),
            send_done_polls: 0,
            inbox: Inbox::default(),
            posted: Posted::new(max_tag + 1),
            sends: PendingSends::new(size),
            announced: None,
            max_tag,
            marker_bit: max_tag + 1,
            split_head: split_head_for(&library, shared_memory, tag_ub, max_tag + 1),
            split_to,
            universe: Some(universe),
            _funneled: PhantomData,
        })
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn backend_name(&self) -> &'static str {
        "mpi"
    }

    fn max_message_len(&self) -> usize {
        self.max_message
    }

    fn finish(mut self) -> Result<(), CommError> {
        if let Err(error) = self.settle(Op::Finish).and_then(|()| self.complete_all()) {
            self.abandon();
            return Err(error);
        }
        // Step 2: MPI_Finalize.
        drop(self.universe.take());
        Ok(())
    }

    #[inline]
    fn probe(&mut self) -> Result<Option<Envelope>, CommError> {
        self.settle(Op::Probe)?;
        if let Some(envelope) = self.inbox.front() {
            return Ok(Some(envelope));
        }
        if self.drain_one(Op::Probe)? {
            return Ok(self.inbox.front());
        }
        Ok(None)
    }

    #[inline]
    fn send(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        let op = Op::Send(dest);
        self.settle(op)?;
        let (mpi_dest, mpi_tag, len) = self.check_send(op, dest, tag, data.len())?;
        if dest == self.rank {
            self.inbox.push(Message {
                source: dest,
                tag,
                data: data.to_vec(),
            });
            return Ok(());
        }
        if data.len() <= EAGER_MAX {
            return self
                .world
                .send(Channel::Small, mpi_dest, mpi_tag, data)
                .map_err(|code| self.mpi_error(op, code));
        }
        self.send_large(
            op,
            mpi_dest,
            mpi_tag,
            len,
            data,
            Lead::MarkerAbove(SMALL_MAX),
        )
    }

    #[inline]
    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_owned(dest, tag, data, SMALL_MAX)
    }

    #[inline]
    fn send_done(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        self.settle(Op::SendDone(handle.dest))?;
        let done = self.test_send(handle)?;
        if !done {
            // Progress in both directions: a peer may wait for this rank to
            // take its large message before it takes ours. Callers poll
            // this in a loop, so every DRAIN_EVERY-th call is often enough
            // (see `progress.rs`).
            self.send_done_polls = self.send_done_polls.wrapping_add(1);
            if self.send_done_polls % DRAIN_EVERY == 0 {
                self.drain_one(Op::SendDone(handle.dest))?;
            }
        }
        Ok(done)
    }

    #[inline]
    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        let op = Op::RecvFrom(source);
        self.settle(op)?;
        self.check_rank(op, source)?;
        self.wait_message(op, Some(source), timeout)
    }

    #[inline]
    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError> {
        self.settle(Op::RecvAny)?;
        if !self.inbox.is_empty() {
            // Drain one more message behind the oldest, so a busy inbox
            // cannot starve MPI; before taking it, so an error loses nothing.
            self.drain_one(Op::RecvAny)?;
        }
        self.wait_message(Op::RecvAny, None, timeout)
    }
}

impl CommTuning for MpiComm {
    fn batch_len(&self) -> usize {
        self.batch_len
    }

    fn combine_len(&self) -> usize {
        self.combine_len
    }

    fn holds_received(&mut self) -> bool {
        !self.inbox.is_empty() || self.announced.is_some()
    }

    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        if data.len() <= BULK_MIN || dest == self.rank {
            return self.send(dest, tag, data);
        }
        self.send_behind(dest, tag, data, Lead::MarkerAbove(BULK_MIN))
    }

    fn send_headed_bulk(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<(), CommError> {
        let (head_tag, head) = head;
        if !self.heads_marker(dest, head, data.len()) {
            self.send(dest, head_tag, head)?;
            return self.send_bulk(dest, tag, data);
        }
        let (_, mpi_head_tag, _) = self.check_send(Op::Send(dest), dest, head_tag, head.len())?;
        self.send_behind(dest, tag, data, Lead::Headed(mpi_head_tag, head))
    }

    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_owned(dest, tag, data, BULK_MIN)
    }

    unsafe fn nsend_borrowed(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        let payload = Payload::Borrowed(data.as_ptr());
        // SAFETY: the caller keeps `data` valid and unchanged until a test
        // reports the send complete (the trait's contract).
        unsafe { self.start_nsend(dest, tag, payload, data.len(), Lead::MarkerAbove(BULK_MIN)) }
    }

    unsafe fn nsend_headed_borrowed(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        let (head_tag, head) = head;
        let payload = Payload::Borrowed(data.as_ptr());
        if !self.heads_marker(dest, head, data.len()) {
            self.send(dest, head_tag, head)?;
            // SAFETY: the caller's contract, passed on.
            return unsafe {
                self.start_nsend(dest, tag, payload, data.len(), Lead::MarkerAbove(BULK_MIN))
            };
        }
        let op = Op::Nsend(dest);
        let (_, mpi_head_tag, _) = self.check_send(op, dest, head_tag, head.len())?;
        let lead = Lead::Headed(mpi_head_tag, head);
        // SAFETY: the caller keeps `data` valid and unchanged until a test
        // reports the send complete (the trait's contract).
        unsafe { self.start_nsend(dest, tag, payload, data.len(), lead) }
    }

    #[inline]
    fn send_finished(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        self.settle(Op::SendDone(handle.dest))?;
        self.test_send(handle)
    }

    fn recv_from_into(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Received>, CommError> {
        let op = Op::RecvFrom(source);
        self.check_rank(op, source)?;
        self.recv_in_place(op, source, timeout, buf, accept)
    }
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        if self.universe.is_some() {
            if !std::thread::panicking() {
                tracing::warn!(
                    rank = self.rank,
                    "MPI backend dropped without finish: MPI is left unfinalised, so the \
                     launcher will end the job"
                );
            }
            self.abandon();
        }
    }
}
