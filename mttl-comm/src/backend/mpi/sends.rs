//! In-flight non-blocking sends (`nsend`): each owns its buffer until
//! `MPI_Test` reports it complete; and how a send starts
//! (`MpiComm::start_nsend`, `MpiComm::send_behind`): checked, to itself
//! straight into the inbox, else behind what announces it (a marker or a
//! split message's head, `split.rs`), by `MPI_Isend`.
//!
//! Per destination there is a sequence counter and a queue of in-flight
//! sends, ordered by sequence number (pushed in order; completions may remove
//! any of them). A handle `(dest, seq)` is complete when `seq` was issued and
//! is no longer queued: a binary search answers that without a map.
//!
//! Invariant: the buffer of a send not yet reported complete is never freed.
//! Completed sends are removed (and their buffers freed) as soon as a test
//! sees them complete: by [`send_done`](super::MpiComm), by the opportunistic
//! reaping of [`PendingSends::reap`], and by `finish`. Dropping the table with
//! sends still in flight leaks their buffers instead of freeing memory MPI may
//! still read.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::fmt;
use std::mem::ManuallyDrop;

use super::raw::{Channel, MpiCode, Request, World};
use super::split::{Lead, Split, HEAD_MAX};
use super::{MpiComm, BULK_MIN};
use crate::comm::{Message, Rank, SendHandle, Tag};
use crate::error::{CommError, ErrorKind, Op};

/// What an `nsend` sends from.
#[derive(Debug)]
pub(super) enum Payload {
    /// A buffer the send owns until it completes.
    Owned(Vec<u8>),
    /// Memory its owner keeps valid and unchanged until the send completes.
    Borrowed(*const u8),
}

impl Payload {
    /// Where the bytes start.
    pub(super) fn as_ptr(&self) -> *const u8 {
        match self {
            Payload::Owned(buf) => buf.as_ptr(),
            Payload::Borrowed(ptr) => *ptr,
        }
    }
}

/// `MPI_Isend` of the `len` bytes at `data` on `channel`, a split message's
/// head first (see `split.rs`, `Split`): the head's request, if any, and
/// the rest's. If the rest's send cannot start, waits for the head's to end
/// before returning the error, so that nothing reads `data` any more.
///
/// # Safety
///
/// `data` must be valid for reads of `len` bytes, and neither freed nor
/// written until `MPI_Test` reports both sends complete.
pub(super) unsafe fn isend_split(
    world: &World,
    channel: Channel,
    dest: c_int,
    tag: c_int,
    data: *const u8,
    len: c_int,
    split: Option<Split>,
) -> Result<(Option<Request>, Request), MpiCode> {
    let mut head = None;
    if let Some(split) = split {
        // SAFETY: the head is the first `split.len` of the `len` bytes the
        // caller keeps valid.
        let started =
            unsafe { world.isend(Channel::Small, dest, split.tag, data, split.len as c_int) };
        head = Some(started?);
    }
    let sent = split.map_or(0, |split| split.len);
    // SAFETY: as above, the bytes after the head.
    match unsafe { world.isend(channel, dest, tag, data.add(sent), len - sent as c_int) } {
        Ok(request) => Ok((head, request)),
        Err(code) => {
            if let Some(head) = &mut head {
                while let Ok(false) = world.test(head) {
                    std::thread::yield_now();
                }
            }
            Err(code)
        }
    }
}

/// One started `MPI_Isend` and the buffer it reads.
struct InFlight {
    seq: u64,
    /// The `MPI_Isend` of a split message's head, until seen complete.
    head: Option<Request>,
    request: Request,
    /// Never dropped while the send may still read it (see the module doc);
    /// empty for a borrowed payload.
    buf: ManuallyDrop<Vec<u8>>,
}

impl InFlight {
    /// Frees the buffer.
    ///
    /// # Safety
    ///
    /// `MPI_Test` must have reported this send complete, so MPI no longer
    /// reads the buffer.
    unsafe fn release(mut self) {
        // SAFETY: the send is complete (caller's contract); `self` is
        // consumed, so the buffer is dropped exactly once.
        unsafe { ManuallyDrop::drop(&mut self.buf) };
    }
}

impl InFlight {
    /// `MPI_Test` of the send (the head's first, for a split message):
    /// whether all of it is complete.
    #[inline]
    fn test(&mut self, world: &World) -> Result<bool, MpiCode> {
        if let Some(head) = &mut self.head {
            if !world.test(head)? {
                return Ok(false);
            }
            self.head = None;
        }
        world.test(&mut self.request)
    }
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InFlight")
            .field("seq", &self.seq)
            .field("request", &self.request)
            .field("len", &self.buf.len())
            .finish()
    }
}

/// The sends to one destination.
#[derive(Debug, Default)]
struct DestQueue {
    /// The sequence number the next `nsend` to this destination gets.
    next_seq: u64,
    /// Sends not yet seen complete, by increasing `seq`.
    in_flight: VecDeque<InFlight>,
}

/// What [`PendingSends::test`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SendState {
    /// The send has completed; its buffer is freed.
    Done,
    /// The send is still in flight.
    InFlight,
    /// No send with this sequence number was started to this destination.
    NeverStarted {
        /// How many sends to this destination were started.
        started: u64,
    },
}

/// Every in-flight `nsend` of this process.
#[derive(Debug)]
pub(super) struct PendingSends {
    per_dest: Vec<DestQueue>,
    in_flight: usize,
}

impl PendingSends {
    /// An empty table for a job of `size` ranks.
    pub(super) fn new(size: usize) -> PendingSends {
        PendingSends {
            per_dest: (0..size).map(|_| DestQueue::default()).collect(),
            in_flight: 0,
        }
    }

    /// How many sends are in flight.
    pub(super) fn len(&self) -> usize {
        self.in_flight
    }

    /// How many sends to `dest` are in flight (`dest` below the job's size).
    #[inline]
    pub(super) fn in_flight_to(&self, dest: usize) -> usize {
        self.per_dest[dest].in_flight.len()
    }

    /// How many sends to `dest` were started (`dest` below the job's size).
    #[inline]
    pub(super) fn started(&self, dest: usize) -> u64 {
        self.per_dest[dest].next_seq
    }

    /// Takes the next sequence number for `dest`, for a send that completes
    /// at once (a send to self). `dest` must be below the job's size.
    pub(super) fn complete_now(&mut self, dest: usize) -> u64 {
        let queue = &mut self.per_dest[dest];
        let seq = queue.next_seq;
        queue.next_seq += 1;
        seq
    }

    /// Starts `MPI_Isend` of the `len` bytes of `payload` on `channel` to
    /// `dest` (an MPI rank equal to `dest`), a split message's head first,
    /// and keeps an owned payload until the send completes. Returns its
    /// sequence number.
    ///
    /// # Safety
    ///
    /// The payload must hold `len` bytes. A borrowed payload must stay
    /// valid and unchanged until `MPI_Test` reports the send complete (its
    /// owner waits for [`test`](Self::test) to say `Done`).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(super) unsafe fn start(
        &mut self,
        world: &World,
        channel: Channel,
        dest: usize,
        mpi_dest: c_int,
        tag: c_int,
        len: c_int,
        split: Option<Split>,
        payload: Payload,
    ) -> Result<u64, MpiCode> {
        let (ptr, buf) = match payload {
            Payload::Owned(buf) => (buf.as_ptr(), ManuallyDrop::new(buf)),
            Payload::Borrowed(ptr) => (ptr, ManuallyDrop::new(Vec::new())),
        };
        // SAFETY: an owned `buf` moves into this table right below and stays
        // there, never freed, until MPI_Test reports the send (head and rest)
        // complete (module invariant); moving the `Vec` does not move its
        // heap buffer. A borrowed payload stays valid as long (caller's
        // contract). If the sends cannot start, nothing reads `buf` any more
        // and it is freed below.
        let started = unsafe { isend_split(world, channel, mpi_dest, tag, ptr, len, split) };
        let (head, request) = match started {
            Ok(started) => started,
            Err(code) => {
                drop(ManuallyDrop::into_inner(buf));
                return Err(code);
            }
        };
        let queue = &mut self.per_dest[dest];
        let seq = queue.next_seq;
        queue.next_seq += 1;
        queue.in_flight.push_back(InFlight {
            seq,
            head,
            request,
            buf,
        });
        self.in_flight += 1;
        Ok(seq)
    }

    /// `MPI_Test` on the send `seq` to `dest`; a completed send is removed.
    /// `dest` must be below the job's size.
    pub(super) fn test(
        &mut self,
        world: &World,
        dest: usize,
        seq: u64,
    ) -> Result<SendState, MpiCode> {
        let queue = &mut self.per_dest[dest];
        if seq >= queue.next_seq {
            return Ok(SendState::NeverStarted {
                started: queue.next_seq,
            });
        }
        let Ok(at) = queue.in_flight.binary_search_by_key(&seq, |s| s.seq) else {
            return Ok(SendState::Done);
        };
        if !queue.in_flight[at].test(world)? {
            return Ok(SendState::InFlight);
        }
        if let Some(done) = queue.in_flight.remove(at) {
            // SAFETY: MPI_Test just reported this send complete.
            unsafe { done.release() };
            self.in_flight -= 1;
        }
        Ok(SendState::Done)
    }

    /// Frees the oldest sends to `dest` that have completed, testing at most
    /// `max` of them and stopping at the first still in flight.
    #[inline]
    pub(super) fn reap(&mut self, world: &World, dest: usize, max: usize) -> Result<(), MpiCode> {
        let queue = &mut self.per_dest[dest];
        for _ in 0..max {
            let Some(oldest) = queue.in_flight.front_mut() else {
                return Ok(());
            };
            if !oldest.test(world)? {
                return Ok(());
            }
            if let Some(done) = queue.in_flight.pop_front() {
                // SAFETY: MPI_Test just reported this send complete.
                unsafe { done.release() };
                self.in_flight -= 1;
            }
        }
        Ok(())
    }

    /// Tests every in-flight send once, freeing the completed ones. Returns
    /// whether none is left in flight. On an error, names the destination of
    /// the send whose test failed.
    pub(super) fn reap_all(&mut self, world: &World) -> Result<bool, (usize, MpiCode)> {
        if self.in_flight == 0 {
            return Ok(true);
        }
        for (dest, queue) in self.per_dest.iter_mut().enumerate() {
            let mut failure = None;
            let mut freed = 0;
            queue.in_flight.retain_mut(|send| {
                if failure.is_some() {
                    return true;
                }
                match send.test(world) {
                    Ok(true) => {
                        // SAFETY: MPI_Test reported the send complete, so MPI
                        // no longer reads the buffer; returning `false`
                        // removes the entry at once, so the buffer is dropped
                        // exactly once (`InFlight` has no drop of its own).
                        unsafe { ManuallyDrop::drop(&mut send.buf) };
                        freed += 1;
                        false
                    }
                    Ok(false) => true,
                    Err(code) => {
                        failure = Some(code);
                        true
                    }
                }
            });
            self.in_flight -= freed;
            if let Some(code) = failure {
                return Err((dest, code));
            }
        }
        Ok(self.in_flight == 0)
    }
}

impl Drop for PendingSends {
    fn drop(&mut self) {
        // Sends still in flight keep their buffers: MPI may still read them.
        // Their `ManuallyDrop` buffers are simply not dropped (leaked).
        if self.in_flight > 0 {
            tracing::debug!(
                in_flight = self.in_flight,
                "MPI backend dropped with sends in flight; their buffers are leaked"
            );
        }
    }
}

/// Once this many sends to a destination are in flight, every
/// [`REAP_EVERY`]th `nsend` to it tests the oldest (up to `REAP_EVERY`,
/// stopping at the first still in flight), so the buffers of completed
/// sends are freed without waiting for `send_done` or a parked wait.
///
/// A test of a send in flight runs MPI's progress engine, which costs more
/// than the send itself for small messages: a stream of small `nsend`s
/// slows the more often it tests, so it tests only this deep in flight
/// and only every few sends.
const REAP_DEPTH: usize = 64;
/// See [`REAP_DEPTH`].
const REAP_EVERY: u64 = 8;

impl MpiComm {
    /// Whether whole messages to the MPI rank `dest` may be split: it shares
    /// this rank's node (see [`split_head_for`](super::library::split_head_for)).
    #[inline]
    pub(super) fn splits_to(&self, dest: c_int) -> bool {
        usize::try_from(dest)
            .ok()
            .and_then(|dest| self.split_to.get(dest))
            .is_some_and(|&same| same)
    }

    /// Whether a message of `len` bytes to `dest` goes behind a headed
    /// marker carrying `head`: when it would be announced by a marker
    /// anyway (above [`BULK_MIN`]) and `head` is small.
    #[inline]
    pub(super) fn heads_marker(&self, dest: Rank, head: &[u8], len: usize) -> bool {
        len > BULK_MIN && head.len() <= HEAD_MAX && dest != self.rank
    }

    /// `send` of `data` to another rank, preceded by what `lead` says,
    /// through the `MPI_Isend` + drain path.
    pub(super) fn send_behind(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
        lead: Lead<'_>,
    ) -> Result<(), CommError> {
        let op = Op::Send(dest);
        self.settle(op)?;
        let (mpi_dest, mpi_tag, len) = self.check_send(op, dest, tag, data.len())?;
        self.send_large(op, mpi_dest, mpi_tag, len, data, lead)
    }

    /// `nsend` of `payload` (`len` bytes), preceded by what `lead` says.
    ///
    /// # Safety
    ///
    /// As [`PendingSends::start`]: a borrowed payload stays valid and
    /// unchanged until a test reports the send complete.
    #[inline]
    pub(super) unsafe fn start_nsend(
        &mut self,
        dest: Rank,
        tag: Tag,
        payload: Payload,
        len: usize,
        lead: Lead<'_>,
    ) -> Result<SendHandle, CommError> {
        let op = Op::Nsend(dest);
        self.settle(op)?;
        let (mpi_dest, mpi_tag, mpi_len) = self.check_send(op, dest, tag, len)?;
        if dest == self.rank {
            let data = match payload {
                Payload::Owned(data) => data,
                // SAFETY: the caller keeps `len` bytes at `ptr` valid.
                Payload::Borrowed(ptr) => unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec(),
            };
            let seq = self.sends.complete_now(dest);
            self.inbox.push(Message {
                source: dest,
                tag,
                data,
            });
            return Ok(SendHandle { dest, seq });
        }
        let world = self.world;
        if self.sends.in_flight_to(dest) >= REAP_DEPTH && self.sends.started(dest) % REAP_EVERY == 0
        {
            self.sends
                .reap(&world, dest, REAP_EVERY as usize)
                .map_err(|code| self.mpi_error(op, code))?;
        }
        // SAFETY: the payload's `len` bytes are valid (owned, or the
        // caller's contract for a borrowed one).
        let data = unsafe { std::slice::from_raw_parts(payload.as_ptr(), len) };
        let (channel, split) = self
            .announce(mpi_dest, mpi_tag, data, lead)
            .map_err(|code| self.mpi_error(op, code))?;
        // SAFETY: passed on from the caller.
        let seq = unsafe {
            self.sends.start(
                &world, channel, dest, mpi_dest, mpi_tag, mpi_len, split, payload,
            )
        }
        .map_err(|code| self.mpi_error(op, code))?;
        Ok(SendHandle { dest, seq })
    }

    /// `nsend` of an owned `data`, announced by a marker if it is larger
    /// than `limit` bytes.
    #[inline]
    pub(super) fn nsend_owned(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: Vec<u8>,
        limit: usize,
    ) -> Result<SendHandle, CommError> {
        let len = data.len();
        // SAFETY: the payload is owned.
        unsafe {
            self.start_nsend(
                dest,
                tag,
                Payload::Owned(data),
                len,
                Lead::MarkerAbove(limit),
            )
        }
    }

    /// `MPI_Test` of the send `handle`, nothing more.
    #[inline]
    pub(super) fn test_send(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        let op = Op::SendDone(handle.dest);
        self.check_rank(op, handle.dest)?;
        let world = self.world;
        match self.sends.test(&world, handle.dest, handle.seq) {
            Ok(SendState::Done) => Ok(true),
            Ok(SendState::InFlight) => Ok(false),
            Ok(SendState::NeverStarted { started }) => Err(self.error(
                op,
                ErrorKind::Mpi(format!(
                    "no nsend to rank {} has sequence number {} (only {started} were started): \
                     the handle did not come from this backend",
                    handle.dest, handle.seq
                )),
            )),
            Err(code) => Err(self.mpi_error(op, code)),
        }
    }
}
