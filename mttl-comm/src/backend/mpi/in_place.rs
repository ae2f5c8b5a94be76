//! `recv_from_into`: a large message received straight into the caller's
//! memory, with no copy, and a small one copied there straight from the
//! pre-posted receive's buffer.
//!
//! # Algorithm
//!
//! 1. Wait as `recv_from` does (`progress.rs`), with one difference for
//!    what comes fresh out of MPI from the source while nothing older from
//!    it waits in the inbox, if it fits the buffer and `accept` takes its
//!    envelope (a [`Placement`] *takes* it): a whole message is copied from
//!    the posted buffer into the caller's and returned (no `Vec` is
//!    allocated for it, nor freed); a marker is *claimed* instead of filed.
//!    Nothing is posted for its payload yet. So is the payload of a headed
//!    marker whose head the previous call handed out (`progress.rs`): it is
//!    the next message from its source.
//! 2. A claimed payload is received by an `MPI_Irecv` on the large channel,
//!    from the source and under its tag, into the caller's buffer, then
//!    tested until complete: spinning for `MTTL_SPIN_US` plus the time the
//!    transfer should take, then parking, and draining other arrivals into
//!    the inbox at every poll once parked.
//! 3. Anything else takes the ordinary path: a message or marker filed into
//!    the inbox while this rank waited or probed (a marker's payload then
//!    arrives into a `Vec`), or one that does not fit or is refused. Such a
//!    message is copied into the buffer if it fits and `accept` takes it
//!    (what the trait's provided version does), else handed over as
//!    [`Received::Owned`].
//!
//! # Order
//!
//! A claimed marker is the next message from its source: the inbox holds
//! nothing from it, and MPI delivers a sender's small messages and markers in
//! order. No payload receive from that source is posted (those belong to
//! inbox entries), so the one posted in step 2 is the first for it, and MPI
//! matches it with the first payload the source sends after that marker:
//! this one. Markers from the source drained during step 2 post their
//! payload receives after it, so they match later payloads, in order.
//!
//! # Why step 2 waits without a timeout, and drains only once parked
//!
//! The timeout bounds step 1 only. Once a marker is claimed, its payload is
//! on its way (the sender posts its `MPI_Isend` right after the marker) and
//! arrives as soon as both ranks call into MPI, which the sender does in
//! every wait; no rank needs this one to drain first, so waiting for it
//! cannot close a cycle. Cancelling instead would be wrong: a cancelled
//! receive leaves the payload unmatched, and a receive posted for it later
//! would come after those of newer markers from the same source drained
//! meanwhile, which MPI would match with this payload first. So a claimed
//! payload is always received, and `Placed` returned even past the timeout.
//!
//! Draining during step 2 only serves third parties (their large sends wait
//! for this rank to match them), who can wait for the spin. Not draining
//! while spinning leaves the source's next marker in MPI, where the next
//! `recv_from_into` can claim it: a stream of large writes then lands in
//! place message after message, instead of every other one being filed into
//! a `Vec` and copied.
//!
//! # Safety
//!
//! MPI writes into the caller's buffer while the receive is posted. The
//! buffer is borrowed (`&mut`) by a [`ReceiveInto`] for as long as the
//! receive is posted, so nothing else reads or writes it; and a
//! `ReceiveInto` that is dropped with its receive still posted (an error
//! return, an unwinding panic) first waits for the receive to end, so the
//! borrow never ends while MPI may still write. `ReceiveInto` is never
//! leaked (`mem::forget`), which is why creating one is `unsafe`.

use std::ffi::c_int;
use std::marker::PhantomData;
use std::time::Duration;

use mpi::ffi;

use super::posted::Placement;
use super::progress::Next;
use super::raw::{Channel, MpiCode, Request, World};
use super::wait::{self, Backoff};
use super::MpiComm;
use crate::comm::{Envelope, Rank, Received};
use crate::error::{CommError, ErrorKind, Op};

/// An `MPI_Irecv` into memory borrowed from the caller for `'buf`.
#[derive(Debug)]
struct ReceiveInto<'buf> {
    world: World,
    /// The receive, until a test reports it over.
    request: Option<Request>,
    /// MPI writes into the borrowed buffer until `request` is over.
    _buf: PhantomData<&'buf mut [u8]>,
}

impl<'buf> ReceiveInto<'buf> {
    /// Posts the receive of `buf.len()` bytes from `source` under `tag` on
    /// the large channel into `buf`.
    ///
    /// # Safety
    ///
    /// The returned value must be dropped, not leaked: its drop is what
    /// keeps `buf` borrowed until MPI has finished with it.
    unsafe fn start(
        world: &World,
        source: c_int,
        tag: c_int,
        buf: &'buf mut [u8],
    ) -> Result<ReceiveInto<'buf>, MpiCode> {
        let count = c_int::try_from(buf.len()).map_err(|_| MpiCode(ffi::MPI_ERR_COUNT as c_int))?;
        // SAFETY: `buf` is valid for writes of `count` bytes and exclusively
        // borrowed for `'buf`, a borrow the returned value holds; that value
        // is not leaked (caller's contract) and its drop waits for the
        // receive to end, so MPI is done with `buf` before anything else can
        // touch it or free it.
        let request = unsafe {
            world.irecv(
                Channel::Large,
                Some(source),
                Some(tag),
                buf.as_mut_ptr(),
                count,
            )
        }?;
        Ok(ReceiveInto {
            world: *world,
            request: Some(request),
            _buf: PhantomData,
        })
    }

    /// Tests the receive once: the number of bytes received once it is
    /// over. After `Some` or an error MPI has let go of the buffer.
    fn test(&mut self) -> Result<Option<usize>, MpiCode> {
        let Some(request) = &mut self.request else {
            return Err(MpiCode(ffi::MPI_ERR_REQUEST as c_int));
        };
        let tested = self.world.test_recv(request);
        if !matches!(tested, Ok(None)) {
            // Completed, or failed (an MPI_Test that reports an error has
            // completed the request with it): either way it is over.
            self.request = None;
        }
        // MPI reports non-negative counts.
        tested.map(|received| received.map(|r| r.len as usize))
    }
}

impl Drop for ReceiveInto<'_> {
    fn drop(&mut self) {
        let Some(mut request) = self.request.take() else {
            return;
        };
        // The receive is still posted (an error or a panic left the wait):
        // wait for its end before the borrow of the buffer ends. Its payload
        // needs only the sender's MPI progress (see the module docs).
        let mut backoff = Backoff::new(Duration::ZERO, None);
        while let Ok(None) = self.world.test_recv(&mut request) {
            backoff.idle();
        }
    }
}

impl MpiComm {
    /// `recv_from_into` (see the module documentation).
    pub(super) fn recv_in_place(
        &mut self,
        op: Op,
        source: Rank,
        timeout: Option<Duration>,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Received>, CommError> {
        let mut placement = Placement {
            source,
            buf,
            accept,
        };
        if let Some(announced) = self.announced {
            // The payload of the head this backend just handed out.
            let envelope = Envelope {
                source: announced.source,
                tag: announced.tag,
                len: announced.len,
            };
            if placement.takes(&envelope) {
                self.announced = None;
                self.receive_payload(op, envelope, &mut placement.buf[..envelope.len])?;
                return Ok(Some(Received::Placed(envelope)));
            }
            self.settle(op)?;
        }
        match self.wait_next(op, Some(source), timeout, Some(&mut placement))? {
            None => Ok(None),
            Some(Next::Placed(envelope)) => Ok(Some(Received::Placed(envelope))),
            // Step 3: as the trait's provided version does.
            Some(Next::Message(message)) => {
                Ok(Some(Received::place_or_own(message, placement.buf, accept)))
            }
            Some(Next::Claimed { tag, len }) => {
                let envelope = Envelope { source, tag, len };
                self.receive_payload(op, envelope, &mut placement.buf[..len])?;
                Ok(Some(Received::Placed(envelope)))
            }
        }
    }

    /// Step 2: receives the payload `envelope` announced into `target` (of
    /// its length), draining once the spin is over.
    fn receive_payload(
        &mut self,
        op: Op,
        envelope: Envelope,
        target: &mut [u8],
    ) -> Result<(), CommError> {
        // Source and tag came from MPI, so they fit its `int`.
        let (source, tag) = (envelope.source as c_int, envelope.tag as c_int);
        // SAFETY: `receive` is a local of this function and is dropped, not
        // leaked, on every way out of it.
        let mut receive = unsafe { ReceiveInto::start(&self.world, source, tag, target) }
            .map_err(|code| self.mpi_error(op, code))?;
        let mut backoff = Backoff::new(self.spin + wait::transfer_time(envelope.len), None);
        loop {
            match receive.test() {
                Ok(Some(len)) if len == envelope.len => return Ok(()),
                Ok(Some(len)) => {
                    return Err(self.error(
                        op,
                        ErrorKind::Mpi(format!(
                            "rank {} announced a message of {} bytes under tag {} and sent \
                             {len} bytes: the sender does not follow the MPI backend's protocol",
                            envelope.source, envelope.len, envelope.tag
                        )),
                    ))
                }
                Ok(None) => {}
                Err(code) => return Err(self.mpi_error(op, code)),
            }
            // On an error below, dropping `receive` waits for the payload.
            if backoff.parked() {
                if self.drain_one(op)? {
                    continue;
                }
                self.reap_all(op)?;
            }
            backoff.idle();
        }
    }
}
