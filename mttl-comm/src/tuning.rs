//! `CommTuning`: the optional extension of [`Comm`] for speed.
//!
//! Nothing here is needed for correctness. Each method is a variant of one
//! or two of the eight primitives that a backend can carry out faster than
//! their plain combination, and each has a provided version written in
//! terms of the eight alone. A backend may therefore implement this trait
//! with an empty impl, `impl CommTuning for MyComm {}` (as the `local`
//! backend does), get correct behaviour, and override a method only where
//! it can do better. The runtime calls
//! these methods on every backend, so a backend's overrides must keep the
//! provided versions' meaning and the contract of [`Comm`] (per-pair order
//! shared with `send` and `nsend`, whole messages, progress, errors).
//!
//! | method                    | what it is, in terms of the eight                      | who overrides it |
//! |---------------------------|--------------------------------------------------------|------------------|
//! | [`batch_len`](CommTuning::batch_len)       | a size hint for the runtime's aggregation  | MPI |
//! | [`combine_len`](CommTuning::combine_len)   | a size hint: header and body in one message up to it | MPI |
//! | [`holds_received`](CommTuning::holds_received) | `probe`, or a cheaper look at what was already taken | TCP, MPI |
//! | [`send_finished`](CommTuning::send_finished)   | `send_done` that leaves incoming messages in the network | MPI |
//! | [`recv_from_into`](CommTuning::recv_from_into) | `recv_from` into the caller's memory       | TCP, MPI |
//! | [`send_bulk`](CommTuning::send_bulk)           | `send` of a message meant for `recv_from_into` | TCP, MPI |
//! | [`nsend_bulk`](CommTuning::nsend_bulk)         | `nsend` of one                            | TCP, MPI |
//! | [`nsend_borrowed`](CommTuning::nsend_borrowed) | `nsend_bulk` from borrowed memory (unsafe) | MPI |
//! | [`send_headed_bulk`](CommTuning::send_headed_bulk) | a small `send`, then `send_bulk`      | MPI |
//! | [`nsend_headed_borrowed`](CommTuning::nsend_headed_borrowed) | a small `send`, then `nsend_borrowed` | MPI |

use std::time::Duration;

use crate::comm::{Comm, Envelope, Rank, Received, SendHandle, Tag};
use crate::error::CommError;

/// Optional tuning on top of [`Comm`]: every method has a provided version
/// in terms of the eight primitives, so `impl CommTuning for MyComm {}` is
/// a correct implementation; a backend overrides a method for speed. See
/// the module docs for the list.
pub trait CommTuning: Comm {
    /// About how many bytes of small messages to one rank are best sent
    /// together as one message (the runtime's aggregation flushes a batch
    /// from this size on): up to where a message stops being about as
    /// cheap as a small one. The provided version says 16 KiB.
    fn batch_len(&self) -> usize {
        16 << 10
    }

    /// The largest body best sent in one message with a small header in
    /// front of it (the two copied together on each side); a larger one
    /// is best sent as a message of its own, straight from where it is
    /// (see [`send_headed_bulk`](CommTuning::send_headed_bulk)). The
    /// provided version says any size: where every message costs a system
    /// call or a queue operation, the copies cost less.
    fn combine_len(&self) -> usize {
        usize::MAX
    }

    /// Whether messages wait to be received, without taking one: a caller
    /// that holds the core for long (a thread writing in a loop) asks this
    /// to know when to let its receiving loop run. A backend that takes
    /// messages out of the network while it sends answers from what it
    /// already took, without looking at the network again (cheaper than
    /// [`probe`](Comm::probe), which may cost a system call). The provided
    /// version is `probe` (an error counts as nothing held: the next
    /// receive reports it).
    fn holds_received(&mut self) -> bool {
        matches!(self.probe(), Ok(Some(_)))
    }

    /// [`send_done`](Comm::send_done) for a caller whose own loop receives
    /// meanwhile: makes progress on the send, but takes no incoming message
    /// out of the network to keep for later, so that the caller's next
    /// receive finds it where it can still choose where it goes (a large
    /// payload that `recv_from_into` would place). A caller that waits for a
    /// send by this alone, receiving nothing, may deadlock with a peer doing
    /// the same: `send_done` is for that. The provided version is
    /// `send_done`.
    fn send_finished(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        self.send_done(handle)
    }

    /// `_pmttl_brecnode` into the caller's memory: receive the next message
    /// from `source` straight into `buf` if it is no longer than `buf` and
    /// `accept` takes its envelope, else as [`recv_from`](Comm::recv_from)
    /// would. This is how a large remote write lands in its region without
    /// a copy (MPI: `MPI_Recv` into the region once a probe gave the size).
    ///
    /// The provided version receives with `recv_from` and copies.
    fn recv_from_into(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Received>, CommError> {
        Ok(self
            .recv_from(source, timeout)?
            .map(|m| Received::place_or_own(m, buf, accept)))
    }

    /// [`send`](Comm::send) of a message whose receiver will likely take it
    /// with [`recv_from_into`](CommTuning::recv_from_into), such as a remote
    /// write's body. Any receive still takes it: only the way it travels
    /// may differ. A backend that receives in place only the messages it
    /// announces (MPI: large ones) announces this one from a smaller size,
    /// so that it lands in place instead of being copied there. The
    /// provided version is `send`.
    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send(dest, tag, data)
    }

    /// [`nsend`](Comm::nsend) of a message meant for
    /// [`recv_from_into`](CommTuning::recv_from_into), as
    /// [`send_bulk`](CommTuning::send_bulk) is `send` of one. The provided
    /// version is `nsend`.
    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend(dest, tag, data)
    }

    /// [`nsend_bulk`](CommTuning::nsend_bulk) of borrowed memory: starts
    /// sending `data` and returns at once, without copying it where the
    /// backend can (MPI: `MPI_Isend` from `data`). For a caller that must
    /// not block while a large message leaves, so that its own loop takes
    /// what arrives meanwhile where it belongs; it then polls
    /// [`send_finished`](CommTuning::send_finished). The provided version
    /// copies `data` for `nsend_bulk`.
    ///
    /// # Safety
    ///
    /// `data` must stay valid and unchanged until `send_done` or
    /// `send_finished` has returned `true` for the handle (or `finish` has
    /// returned): the backend may read it until then.
    unsafe fn nsend_borrowed(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        self.nsend_bulk(dest, tag, data.to_vec())
    }

    /// Sends `head` (a small message: tag and bytes) and then `data` as
    /// [`send_bulk`](CommTuning::send_bulk) does, to the same `dest`: two
    /// messages, received as two, in that order. For a header announcing
    /// the body that follows it, such as a remote write's: a backend may
    /// carry `head` inside what announces `data` (MPI: in the marker,
    /// saving a message). The provided version is `send` then `send_bulk`.
    fn send_headed_bulk(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<(), CommError> {
        self.send(dest, head.0, head.1)?;
        self.send_bulk(dest, tag, data)
    }

    /// [`nsend_borrowed`](CommTuning::nsend_borrowed) of `data` behind
    /// `head`, as [`send_headed_bulk`](CommTuning::send_headed_bulk) is
    /// `send_bulk` behind it: `head` is sent at once; the handle is
    /// `data`'s. The provided version is `send` then `nsend_borrowed`.
    ///
    /// # Safety
    ///
    /// As for `nsend_borrowed`: `data` must stay valid and unchanged until
    /// `send_done` or `send_finished` has returned `true` for the handle
    /// (or `finish` has returned).
    unsafe fn nsend_headed_borrowed(
        &mut self,
        dest: Rank,
        head: (Tag, &[u8]),
        tag: Tag,
        data: &[u8],
    ) -> Result<SendHandle, CommError> {
        self.send(dest, head.0, head.1)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.nsend_borrowed(dest, tag, data) }
    }
}
