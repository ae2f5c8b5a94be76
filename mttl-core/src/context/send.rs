//! Sending: a message with its header and body, a large body split off
//! behind its header (the sending thread waiting for it, or its memory
//! borrowed or owned while it leaves), and the flushing of the batches of
//! small messages the threads left in the outbox. The large-message
//! protocol's steps are in [`wire`].

use std::time::Duration;

use mttl_comm::{Comm, CommError, CommTuning, ErrorKind, Op, Rank, SendHandle, Tag};

use super::Context;
use crate::outbox::Route;
use crate::trace::{self, traced, Kind};
use crate::wire;

/// How long the end of a job waits for the sends of borrowed bodies.
const BORROWED_SEND_WAIT: Duration = Duration::from_secs(5);

impl Context {
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
        let len = self.scratch.len();
        traced!(
            Kind::Send,
            dest,
            kind,
            len,
            self.comm.send(dest, kind, &self.scratch)
        )
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
        let len = header.len() + body.len();
        traced!(
            Kind::SendHeadedBulk,
            dest,
            kind,
            len,
            self.comm.send_headed_bulk(dest, head, wire::DATA, body)
        )?;
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
        let len = header.len() + body.len();
        let handle = traced!(
            Kind::NsendHeaded,
            dest,
            kind,
            len,
            // SAFETY: the caller's contract, passed on.
            unsafe {
                self.comm
                    .nsend_headed_borrowed(dest, head, wire::DATA, body)
            }
        )?;
        self.stats.sent(true, header.len());
        self.stats.sent(false, body.len());
        Ok(handle)
    }

    /// Waits (at most [`BORROWED_SEND_WAIT`]) for the sends of borrowed
    /// bodies still in flight, before the job's suspended threads are
    /// unwound and their memory released.
    /// Owned bodies still in flight are waited for too, so that the
    /// comm layer finishes with nothing left to send.
    pub(crate) fn finish_borrowed_sends(&mut self) {
        let start = std::time::Instant::now();
        while let Some(&handle) = self.borrowed_sends.last() {
            let done = self.comm.send_done(handle);
            test_event(handle.dest, &done);
            match done {
                Ok(false) if start.elapsed() < BORROWED_SEND_WAIT => {}
                // Done, failed (the job ends anyway), or out of time.
                _ => {
                    self.borrowed_sends.pop();
                }
            }
        }
        while let Some(send) = self.owned_sends.front() {
            let done = self.comm.send_done(send.handle);
            test_event(send.handle.dest, &done);
            match done {
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
        let len = header.len();
        traced!(
            Kind::Send,
            dest,
            kind | wire::LARGE,
            len,
            self.comm.send(dest, kind | wire::LARGE, header)
        )?;
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
            let len = body.len();
            let h = traced!(
                Kind::Nsend,
                dest,
                wire::DATA,
                len,
                self.comm.nsend(dest, wire::DATA, body)
            )?;
            // Completion is checked later; TCP and MPI keep the buffer.
            self.stats.test += 1;
            let done = self.comm.send_done(h);
            test_event(dest, &done);
            let _ = done?;
            return Ok(());
        }
        self.post(dest, kind, header, &body)
    }

    /// Sends the batch of small messages to `dest`, if any (see [`outbox`](crate::outbox)).
    #[inline]
    pub(crate) fn flush(&mut self, dest: Rank) -> Result<(), CommError> {
        let Some(batch) = self.outbox.take(dest) else {
            return Ok(());
        };
        self.stats.sent(true, batch.len());
        let len = batch.len();
        let sent = traced!(
            Kind::Send,
            dest,
            wire::BATCH,
            len,
            self.comm.send(dest, wire::BATCH, &batch)
        );
        self.outbox.sent_batch(dest, batch);
        sent
    }

    /// [`flush_all`](Self::flush_all), stopping the job if a send fails.
    pub(crate) fn flush_all_or_fail(&mut self) {
        if let Err(e) = self.flush_all() {
            self.comm_failed(&e);
        }
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
}

/// Records the completion test of a send to `dest` that found it over (an
/// instant: a test does not wait; `b` 1) or failed (`b` 0). Tests that find
/// the send still running are not recorded: a polling loop makes millions,
/// and they say nothing the completing one does not.
#[inline]
pub(crate) fn test_event(dest: Rank, done: &Result<bool, CommError>) {
    if trace::on() && !matches!(done, Ok(false)) {
        let over = matches!(done, Ok(true));
        trace::event(Kind::Test, Some(dest), 0, u64::from(over), None);
    }
}
