//! Progress: polling MPI, draining incoming messages into the inbox, and the
//! blocking waits built on them.
//!
//! MPI buffers small messages by itself, but a large one (past the eager
//! limit) moves only once the receiver matches it. A rank that waits for
//! something else while a large message to it sits unmatched can close a
//! cycle: A's large send to B waits for B, B waits for a message from C, C
//! waits for A. The contract's progress rule (every primitive makes progress
//! in both directions) is kept by draining: whenever a primitive waits, it
//! also receives what others sent into the inbox, in arrival order.
//!
//! | waiting in       | drains                                                     |
//! |------------------|------------------------------------------------------------|
//! | `recv_from(src)` | other senders' messages, every few polls (each once parked) |
//! | `recv_any`       | nothing more: it takes whatever comes                      |
//! | large `send`     | every few polls (each once parked), until the send is done |
//! | `send_done`      | one message, when the send is still in flight              |
//! | `finish`         | at every poll, until no send is in flight                  |
//!
//! Receiving a drained message whose sender is not inside MPI at that moment
//! can wait for the sender's next MPI call on transports where the sender
//! pushes the data (TCP); with shared memory the receiver copies it alone.

use std::ffi::c_int;
use std::time::Duration;

use super::raw::{MpiCode, Probed, Request};
use super::wait::{self, Backoff};
use super::MpiComm;
use crate::comm::{Message, Rank, Tag};
use crate::error::{CommError, ErrorKind, Op};

/// While spinning in `recv_from` or a large `send`, incoming messages are
/// drained once per this many polls (a drain's probe costs about as much as
/// the poll for what the wait is for, so draining at every poll would slow
/// the fast path; once parked, every poll drains).
const DRAIN_EVERY: u32 = 8;

impl MpiComm {
    /// The next message waiting in MPI from `source` (`None`: any source):
    /// the peeked one if it fits, else whatever `MPI_Iprobe` finds. The
    /// caller must receive what this returns.
    #[inline]
    pub(super) fn poll_mpi(&mut self, source: Option<c_int>) -> Result<Option<Probed>, MpiCode> {
        if let Some(peeked) = self.peeked {
            if source.is_none_or(|s| s == peeked.source) {
                self.peeked = None;
                return Ok(Some(peeked));
            }
        }
        // A peeked message from another source stays valid: receiving from
        // `source` does not take messages of other senders.
        self.world.iprobe(source)
    }

    /// Receives the probed message from MPI.
    #[inline]
    pub(super) fn take_mpi(&self, op: Op, probed: Probed) -> Result<Message, CommError> {
        let data = self
            .world
            .recv(probed)
            .map_err(|code| self.mpi_error(op, code))?;
        Ok(Message {
            // Ranks and tags MPI reports are non-negative `int`s.
            source: probed.source as Rank,
            tag: probed.tag as Tag,
            data,
        })
    }

    /// Moves one message waiting in MPI (if any) into the inbox; returns
    /// whether there was one.
    pub(super) fn drain_one(&mut self, op: Op) -> Result<bool, CommError> {
        match self.poll_mpi(None) {
            Ok(Some(probed)) => {
                let message = self.take_mpi(op, probed)?;
                self.inbox.push(message);
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(code) => Err(self.mpi_error(op, code)),
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

    /// Polls MPI for a message from `source` (`None`: any) until one comes
    /// or `timeout` passes, spinning then parking; waiting for one source,
    /// drains the others into the inbox.
    pub(super) fn wait_mpi(
        &mut self,
        op: Op,
        source: Option<c_int>,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        let mut backoff = Backoff::new(self.spin, timeout);
        let mut polls: u32 = 0;
        loop {
            match self.poll_mpi(source) {
                Ok(Some(probed)) => return self.take_mpi(op, probed).map(Some),
                Ok(None) => {}
                Err(code) => return Err(self.mpi_error(op, code)),
            }
            polls = polls.wrapping_add(1);
            if let Some(awaited) = source {
                if (backoff.parked() || polls % DRAIN_EVERY == 0) && self.drain_one(op)? {
                    // The drained message may be the awaited one, arrived
                    // between the two probes.
                    if let Some(message) = self.inbox.pop_from(awaited as Rank) {
                        return Ok(Some(message));
                    }
                    if !backoff.progressed() {
                        return Ok(None);
                    }
                    continue;
                }
            }
            if backoff.parked() {
                self.reap_all(op)?;
            }
            if !backoff.idle() {
                return Ok(None);
            }
        }
    }

    /// Step 3 of `send`: `MPI_Isend` of the borrowed `data`, draining
    /// incoming messages into the inbox until `MPI_Test` reports it done.
    pub(super) fn send_large(
        &mut self,
        op: Op,
        dest: c_int,
        tag: c_int,
        len: c_int,
        data: &[u8],
    ) -> Result<(), CommError> {
        // SAFETY: `data` is borrowed for this whole function, and the
        // function returns only once the send is over: `MPI_Test` reported it
        // complete, or reported an error, after which MPI has finished with
        // the request (it completed with that error).
        let mut request = unsafe { self.world.isend(dest, tag, data.as_ptr(), len) }
            .map_err(|code| self.mpi_error(op, code))?;
        // While the receiver copies the message this rank only waits for the
        // end, so it spins for about as long as the copy takes before parking
        // (a nap would delay the receiver's next step, e.g. its reply).
        let mut backoff = Backoff::new(self.spin + wait::transfer_time(data.len()), None);
        let mut polls: u32 = 0;
        loop {
            match self.world.test(&mut request) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(code) => return Err(self.mpi_error(op, code)),
            }
            polls = polls.wrapping_add(1);
            if backoff.parked() || polls % DRAIN_EVERY == 0 {
                match self.drain_one(op) {
                    Ok(true) => {
                        backoff.progressed();
                        continue;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        self.wait_without_draining(&mut request);
                        return Err(error);
                    }
                }
            }
            if backoff.parked() {
                self.reap_all(op)?;
            }
            backoff.idle();
        }
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

    /// Step 1 of `finish`: completes every in-flight send, draining incoming
    /// messages into the inbox meanwhile.
    pub(super) fn complete_sends(&mut self) -> Result<(), CommError> {
        let mut backoff = Backoff::new(self.spin, None);
        while !self.reap_all(Op::Finish)? {
            if self.drain_one(Op::Finish)? {
                backoff.progressed();
            } else {
                backoff.idle();
            }
        }
        Ok(())
    }
}
