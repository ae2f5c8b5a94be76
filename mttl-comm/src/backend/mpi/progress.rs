//! Progress: polling the pre-posted receive, filing what it gets into the
//! inbox, and the blocking waits built on them.
//!
//! MPI buffers small messages by itself, but a large one (past the eager
//! limit) moves only once the receiver matches it. A rank that waits for
//! something else while a large message to it sits unmatched can close a
//! cycle: A's large send to B waits for B, B waits for a message from C, C
//! waits for A. The contract's progress rule (every primitive makes progress
//! in both directions) is kept by draining: whenever a primitive waits, it
//! also takes what others sent (the pre-posted receive matches anything on
//! the small channel, and a marker at once posts the receive of its
//! payload), into the inbox, in arrival order.
//!
//! | waiting in       | drains                                              |
//! |------------------|-----------------------------------------------------|
//! | `recv_from(src)` | other senders' messages, as they come               |
//! | `recv_any`       | nothing more: it takes whatever comes               |
//! | `recv_from_into` | as `recv_from`; then, for a payload received in place, at every poll once the spin is over (`in_place.rs`) |
//! | large `send`     | at every 16th poll while spinning, every poll once parked, until the send is done |
//! | `send_done`      | one message, at every 16th call finding the send still in flight |
//! | `finish`         | at every poll, until no send or receive is in flight |
//!
//! Polling the pre-posted receive is one `MPI_Test`, about as cheap as the
//! poll for what a wait is for, so every poll of a receive drains. A wait
//! for a send of this rank drains less often ([`DRAIN_EVERY`]): there the
//! extra `MPI_Test` only runs MPI's progress engine once more per poll,
//! which slows the receiver's copy.

use std::ffi::c_int;
use std::time::Duration;

use super::inbox::Incoming;
use super::posted::{marker_word, Arrival, Placement, HEADED_LEN, MARKER_LEN};
use super::raw::{Channel, MpiCode, Request};
use super::sends::isend_split;
use super::split::{Lead, Split, HEAD_MAX};
use super::wait::{self, Backoff};
use super::{MpiComm, SMALL_MAX};
use crate::comm::{Envelope, Message, Rank, Tag};
use crate::error::{CommError, ErrorKind, Op};

/// A rank waiting for its own large send to end drains incoming messages
/// at every this many polls while it spins (at every poll once parked).
///
/// Draining is one more `MPI_Test`, and so one more run of MPI's progress
/// engine, per poll; draining at every poll slows the receiver's copy of
/// the message itself (on Open MPI's shared memory), and draining never
/// while spinning would leave a peer's large message unmatched. At every
/// 16th poll, a peer's large message to this rank waits at most this many
/// polls (a few microseconds) to be matched.
pub(super) const DRAIN_EVERY: u32 = 16;

/// A payload whose headed marker has been taken out of MPI and whose head
/// was handed to the caller, but whose receive is not posted yet: the
/// caller's next call, if it is `recv_from_into` from the same source,
/// receives it in place; any other call posts it first (see
/// [`MpiComm::settle`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Announced {
    pub(super) source: Rank,
    pub(super) tag: Tag,
    pub(super) len: usize,
    /// Where the payload starts within a cache line at its sender.
    pub(super) offset: usize,
}

/// What [`MpiComm::wait_next`] found.
#[derive(Debug)]
pub(super) enum Next {
    /// A whole message.
    Message(Message),
    /// A whole message copied into the buffer of the wait's placement.
    Placed(Envelope),
    /// The marker of the next message from the awaited source, which the
    /// wait's placement takes: a payload of `len` bytes under `tag` follows on the
    /// large channel, and no receive is posted for it yet.
    Claimed {
        /// The sender's tag.
        tag: Tag,
        /// The payload's length in bytes.
        len: usize,
    },
}

impl MpiComm {
    /// Polls the pre-posted receive once (posting it first if needed).
    #[inline]
    pub(super) fn poll_posted(&mut self, op: Op) -> Result<Option<Arrival>, CommError> {
        self.poll_posted_placing(op, None)
    }

    /// [`poll_posted`](MpiComm::poll_posted), placing a whole message that
    /// `placement` takes.
    #[inline]
    fn poll_posted_placing(
        &mut self,
        op: Op,
        placement: Option<&mut Placement<'_>>,
    ) -> Result<Option<Arrival>, CommError> {
        let world = self.world;
        self.posted
            .poll(&world, placement)
            .map_err(|code| self.mpi_error(op, code))
    }

    /// Files an arrival into the inbox; a marker posts its payload's
    /// receive.
    pub(super) fn file(&mut self, op: Op, arrival: Arrival) -> Result<(), CommError> {
        match arrival {
            Arrival::Message(message) => self.inbox.push(message),
            Arrival::Placed(_) => unreachable!("a message is placed only by the wait it is for"),
            Arrival::Marker {
                source,
                tag,
                len,
                offset,
            } => self.file_payload(op, source, tag, len, offset)?,
            Arrival::Headed {
                head,
                tag,
                len,
                offset,
            } => {
                let source = head.source;
                self.inbox.push(head);
                self.file_payload(op, source, tag, len, offset)?;
            }
        }
        Ok(())
    }

    /// Posts the receive of a payload a marker announced (starting
    /// `offset` bytes into a cache line at its sender) and files it.
    fn file_payload(
        &mut self,
        op: Op,
        source: Rank,
        tag: Tag,
        len: usize,
        offset: usize,
    ) -> Result<(), CommError> {
        let buf = self.inbox.payload_buffer(source, len, offset);
        let incoming = Incoming::start(&self.world, source, tag, len, buf)
            .map_err(|code| self.mpi_error(op, code))?;
        self.inbox.push_arriving(incoming);
        Ok(())
    }

    /// Posts the receive of the [`Announced`] payload, if any, and files
    /// it: every primitive but `recv_from_into` starts here, so a sender
    /// never waits for a payload this rank has seen announced.
    ///
    /// The payload is the next message from its source: its head was the
    /// last thing this backend handed out, and was handed out fresh from
    /// MPI, when nothing from that source was in the inbox.
    #[inline]
    pub(super) fn settle(&mut self, op: Op) -> Result<(), CommError> {
        match self.announced.take() {
            None => Ok(()),
            Some(Announced {
                source,
                tag,
                len,
                offset,
            }) => self.file_payload(op, source, tag, len, offset),
        }
    }

    /// Moves one message that has arrived (if any) into the inbox; returns
    /// whether there was one.
    #[inline]
    pub(super) fn drain_one(&mut self, op: Op) -> Result<bool, CommError> {
        match self.poll_posted(op)? {
            Some(arrival) => {
                self.file(op, arrival)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Frees every completed in-flight send; returns whether none is left.
    pub(super) fn reap_all(&mut self, op: Op) -> Result<bool, CommError> {
        self.sends.reap_all(&self.world).map_err(|(dest, code)| {
            self.error(
                op,
                ErrorKind::Mpi(format!("test of a send to rank {dest}: {code}")),
            )
        })
    }

    /// Waits for the next message from `source` (`None`: from anyone),
    /// from the inbox or from MPI, until `timeout` passes, spinning then
    /// parking; waiting for one source, files the others' into the inbox.
    #[inline]
    pub(super) fn wait_message(
        &mut self,
        op: Op,
        source: Option<Rank>,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        match self.wait_next(op, source, timeout, None)? {
            None => Ok(None),
            Some(Next::Message(message)) => Ok(Some(message)),
            Some(Next::Placed(_) | Next::Claimed { .. }) => {
                unreachable!("nothing is placed or claimed without a placement")
            }
        }
    }

    /// [`wait_message`](MpiComm::wait_message), except that what comes
    /// fresh out of MPI from `placement`'s source, with nothing older from
    /// it in the inbox (so it is the next message from that source), goes
    /// where the placement says if it [`takes`](Placement::takes) it: a
    /// whole message is copied into its buffer ([`Next::Placed`]); a marker
    /// is returned as [`Next::Claimed`] without posting the receive of its
    /// payload, which the caller must receive (see `in_place.rs`). Every
    /// other marker is filed as usual.
    pub(super) fn wait_next(
        &mut self,
        op: Op,
        source: Option<Rank>,
        timeout: Option<Duration>,
        placement: Option<&mut Placement<'_>>,
    ) -> Result<Option<Next>, CommError> {
        debug_assert!(placement.as_ref().is_none_or(|p| source == Some(p.source)));
        let mut backoff = Backoff::new(self.spin, timeout).with_learned(self.learned_spin);
        let next = self.wait_next_paced(op, source, placement, &mut backoff);
        if next.is_ok() {
            self.learned_spin.learn(self.spin, backoff.waited());
        }
        next
    }

    /// The loop of [`wait_next`](MpiComm::wait_next), paced by `backoff`.
    fn wait_next_paced(
        &mut self,
        op: Op,
        source: Option<Rank>,
        mut placement: Option<&mut Placement<'_>>,
        backoff: &mut Backoff,
    ) -> Result<Option<Next>, CommError> {
        let world = self.world;
        loop {
            let arrival = if let Some(at) = self.inbox.position(source) {
                // The oldest message for this wait is here already; its
                // payload may still be arriving.
                match self.inbox.take(&world, at) {
                    Ok(Some(message)) => return Ok(Some(Next::Message(message))),
                    Ok(None) => {}
                    Err(code) => return Err(self.mpi_error(op, code)),
                }
                self.poll_posted(op)?
            } else {
                match self.poll_posted_placing(op, placement.as_deref_mut())? {
                    Some(Arrival::Placed(envelope)) => return Ok(Some(Next::Placed(envelope))),
                    Some(Arrival::Message(message))
                        if source.is_none_or(|s| s == message.source) =>
                    {
                        return Ok(Some(Next::Message(message)));
                    }
                    Some(Arrival::Marker {
                        source: from,
                        tag,
                        len,
                        ..
                    }) if placement.as_deref().is_some_and(|placement| {
                        placement.takes(&Envelope {
                            source: from,
                            tag,
                            len,
                        })
                    }) =>
                    {
                        return Ok(Some(Next::Claimed { tag, len }));
                    }
                    Some(Arrival::Headed {
                        head,
                        tag,
                        len,
                        offset,
                    }) if source.is_none_or(|s| s == head.source) => {
                        // Its payload's receive is posted by the caller's
                        // next call, unless that call places it.
                        self.announced = Some(Announced {
                            source: head.source,
                            tag,
                            len,
                            offset,
                        });
                        return Ok(Some(Next::Message(head)));
                    }
                    other => other,
                }
            };
            if let Some(arrival) = arrival {
                // Another sender's message, or a marker (perhaps for this
                // wait: the next round takes it from the inbox).
                self.file(op, arrival)?;
                if !backoff.progressed() {
                    return Ok(None);
                }
                continue;
            }
            if backoff.parked() {
                self.reap_all(op)?;
            }
            if !backoff.idle() {
                return Ok(None);
            }
        }
    }

    /// Step 3 of `send`: `MPI_Isend` of the borrowed `data` (preceded by
    /// `lead`), draining incoming messages into the inbox until `MPI_Test`
    /// reports it done.
    pub(super) fn send_large(
        &mut self,
        op: Op,
        dest: c_int,
        tag: c_int,
        len: c_int,
        data: &[u8],
        lead: Lead<'_>,
    ) -> Result<(), CommError> {
        let (channel, split) = self
            .announce(dest, tag, data, lead)
            .map_err(|code| self.mpi_error(op, code))?;
        // SAFETY: `data` is borrowed for this whole function, and the
        // function returns only once each send is over: `MPI_Test` reported
        // it complete, or reported an error, after which MPI has finished
        // with the request (it completed with that error).
        let (mut head, mut request) =
            unsafe { isend_split(&self.world, channel, dest, tag, data.as_ptr(), len, split) }
                .map_err(|code| self.mpi_error(op, code))?;
        // While the receiver copies the message this rank only waits for the
        // end, so it spins for about as long as the copy takes before parking
        // (a nap would delay the receiver's next step, e.g. its reply).
        let mut backoff = Backoff::new(self.spin + wait::transfer_time(data.len()), None);
        let mut polls = 0u32;
        loop {
            // The head first: the rest is tested only once the head is over
            // (a completed request is not tested again).
            if let Some(head_request) = &mut head {
                match self.world.test(head_request) {
                    Ok(true) => head = None,
                    Ok(false) => {}
                    Err(code) => {
                        // The head's send is over; the rest's must end too.
                        self.wait_without_draining(&mut request);
                        return Err(self.mpi_error(op, code));
                    }
                }
            }
            if head.is_none() {
                match self.world.test(&mut request) {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(code) => return Err(self.mpi_error(op, code)),
                }
            }
            polls = polls.wrapping_add(1);
            if polls % DRAIN_EVERY != 0 && !backoff.parked() {
                backoff.idle();
                continue;
            }
            let failed = match self.drain_one(op) {
                Ok(true) => {
                    backoff.progressed();
                    continue;
                }
                Ok(false) if backoff.parked() => self.reap_all(op).err(),
                Ok(false) => None,
                Err(error) => Some(error),
            };
            if let Some(error) = failed {
                // `data` must outlive the sends, even on an error.
                if let Some(head) = &mut head {
                    self.wait_without_draining(head);
                }
                self.wait_without_draining(&mut request);
                return Err(error);
            }
            backoff.idle();
        }
    }

    /// Sends what `lead` says goes ahead of the message `data`: a marker if
    /// it is larger than the limit, or a headed marker. Returns the channel
    /// the message goes on, and for a whole message on the small channel
    /// that [`split_head`](MpiComm::split_head) splits, its head, which the
    /// caller sends first.
    #[inline]
    pub(super) fn announce(
        &self,
        dest: c_int,
        tag: c_int,
        data: &[u8],
        lead: Lead<'_>,
    ) -> Result<(Channel, Option<Split>), MpiCode> {
        let len = data.len();
        let marker_tag = tag + self.marker_bit;
        match lead {
            Lead::MarkerAbove(limit) => {
                debug_assert!(limit <= SMALL_MAX);
                if len <= limit {
                    let split = self
                        .split_head
                        .filter(|&head| head < len && len <= 2 * head && self.splits_to(dest))
                        .map(|head| Split {
                            len: head,
                            tag: tag + 2 * self.marker_bit,
                        });
                    return Ok((Channel::Small, split));
                }
                let marker = marker_word(len, data.as_ptr());
                self.world.send(Channel::Small, dest, marker_tag, &marker)?;
            }
            Lead::Headed(head_tag, head) => {
                debug_assert!(head.len() <= HEAD_MAX);
                let mut marker = [0u8; HEADED_LEN + HEAD_MAX];
                marker[..MARKER_LEN].copy_from_slice(&marker_word(len, data.as_ptr()));
                // MPI tags are never negative.
                marker[MARKER_LEN..HEADED_LEN].copy_from_slice(&(head_tag as u32).to_le_bytes());
                let end = HEADED_LEN + head.len();
                marker[HEADED_LEN..end].copy_from_slice(head);
                self.world
                    .send(Channel::Small, dest, marker_tag, &marker[..end])?;
            }
        }
        Ok((Channel::Large, None))
    }

    /// Waits out a send whose buffer must not be released before it ends,
    /// after draining failed: tests until it completes or fails.
    #[cold]
    fn wait_without_draining(&self, request: &mut Request) {
        let mut backoff = Backoff::new(self.spin, None);
        while let Ok(false) = self.world.test(request) {
            backoff.idle();
        }
    }

    /// Step 1 of `finish`: completes every in-flight send and payload
    /// receive, draining incoming messages into the inbox meanwhile; then
    /// withdraws the pre-posted receive.
    pub(super) fn complete_all(&mut self) -> Result<(), CommError> {
        let op = Op::Finish;
        let world = self.world;
        let mut backoff = Backoff::new(self.spin, None);
        loop {
            let sends_done = self.reap_all(op)?;
            let receives_done = self
                .inbox
                .complete_arrivals(&world)
                .map_err(|code| self.mpi_error(op, code))?;
            if sends_done && receives_done {
                break;
            }
            if self.drain_one(op)? {
                backoff.progressed();
            } else {
                backoff.idle();
            }
        }
        // A marker the withdrawn receive had already taken announces a
        // payload its sender waits to hand over: receive it too.
        match self.posted.withdraw(&world) {
            Ok(None) => Ok(()),
            Ok(Some(arrival)) => {
                self.file(op, arrival)?;
                while !self
                    .inbox
                    .complete_arrivals(&world)
                    .map_err(|code| self.mpi_error(op, code))?
                {
                    backoff.idle();
                }
                Ok(())
            }
            Err(code) => Err(self.mpi_error(op, code)),
        }
    }
}
