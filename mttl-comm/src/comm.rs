//! The `Comm` trait: the eight communication primitives of MPC++ MTTL.
//!
//! Everything in mttl above this trait is portable; a backend (TCP, MPI, or a
//! future shared-memory, UCX or libfabric one) implements these eight
//! operations and nothing more. The table maps each to its MTTL name (paper,
//! table 1), to the MPI call of the paper's mapping, and to what the MPI
//! backend does instead where measurements made it differ:
//!
//! | method          | MTTL name          | paper's MPI mapping                  | MPI backend                         |
//! |-----------------|--------------------|--------------------------------------|-------------------------------------|
//! | [`Comm::init`]      | `_pmttl_cominit`   | `MPI_Init_thread`, `Comm_rank/size`  | the same, plus two private duplicates of `MPI_COMM_WORLD` |
//! | [`Comm::finish`]    | `_pmttl_comfinish` | `MPI_Finalize`                       | the same                            |
//! | [`Comm::probe`]     | `_pmttl_prob`      | `MPI_Iprobe(ANY_SOURCE, ANY_TAG)`    | `MPI_Test` of an always pre-posted persistent receive from `ANY_SOURCE`, `ANY_TAG` (cheaper per poll, one copy less) |
//! | [`Comm::send`]      | `_pmttl_asend`     | `MPI_Send`                           | `MPI_Send` up to 4000 B, else `MPI_Isend` + `MPI_Test` while draining |
//! | [`Comm::nsend`]     | `_pmttl_nsend`     | `MPI_Isend`                          | the same                            |
//! | [`Comm::send_done`] | `_pmttl_senddone`  | `MPI_Test`                           | the same                            |
//! | [`Comm::recv_from`] | `_pmttl_brecnode`  | `MPI_Recv(src, ANY_TAG)`             | `MPI_Test` of the pre-posted receive; large messages by a marker and an `MPI_Irecv` on the second duplicate |
//! | [`Comm::recv_any`]  | `_pmttl_brecany`   | `MPI_Recv(ANY_SOURCE, ANY_TAG)`      | as `recv_from`                      |
//!
//! [`Comm::recv_from_into`] is `_pmttl_brecnode` into the caller's memory
//! (`MPI_Recv` into a given buffer), with a provided version in terms of
//! `recv_from`; [`Comm::send_bulk`] and [`Comm::nsend_bulk`] are `send` and
//! `nsend` of a message meant for it, provided as `send` and `nsend`;
//! [`Comm::nsend_borrowed`] is an `nsend_bulk` from borrowed memory (unsafe:
//! the caller keeps the memory until the send is done),
//! [`Comm::send_finished`] a `send_done` that leaves incoming messages in
//! the network, for a caller whose own loop receives them, and
//! [`Comm::send_headed_bulk`] and [`Comm::nsend_headed_borrowed`] a small
//! `send` followed by `send_bulk` or `nsend_borrowed` (the MPI backend
//! carries the first inside the second's marker); [`Comm::holds_received`]
//! is a `probe` that does not look at the network.
//!
//! # Contract every backend keeps
//!
//! 1. **Ordering.** Messages from one rank to another are received in the
//!    order they were sent (`send` and `nsend` share one order: the order of
//!    the calls). Nothing is promised across different senders.
//! 2. **Whole messages.** A message is a tag plus a byte buffer of any length
//!    from 0 up to [`Comm::max_message_len`]; it arrives whole or not at all.
//! 3. **Progress.** Every primitive makes progress on all pending traffic, in
//!    both directions: a rank blocked in `send` still drains what peers send
//!    it, so two ranks sending large messages to each other never deadlock.
//! 4. **Blocking is bounded by the caller.** The two receives take an
//!    optional timeout. While blocked they spin briefly and then park, so an
//!    idle rank does not burn a core; a peer that disappears turns a blocked
//!    receive into [`ErrorKind::PeerLost`](crate::ErrorKind::PeerLost), not a
//!    hang.
//! 5. **Self-sends** (destination == own rank) are allowed and loop back
//!    without the network.
//! 6. **Errors name the rank and the operation** ([`CommError`]).
//!
//! A backend is used from one OS thread at a time (`&mut self` everywhere).

use std::time::Duration;

use crate::error::CommError;

/// A process's index in the job, `0..size`.
pub type Rank = usize;

/// A message tag: chosen by the sender, reported by probe and receive.
pub type Tag = u32;

/// What [`Comm::probe`] reports about the next message waiting to be received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// The sending rank.
    pub source: Rank,
    /// The tag the sender gave.
    pub tag: Tag,
    /// The message's length in bytes.
    pub len: usize,
}

/// A received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The sending rank.
    pub source: Rank,
    /// The tag the sender gave.
    pub tag: Tag,
    /// The payload, exactly as sent.
    pub data: Vec<u8>,
}

impl Message {
    /// The message's envelope (source, tag, length).
    pub fn envelope(&self) -> Envelope {
        Envelope {
            source: self.source,
            tag: self.tag,
            len: self.data.len(),
        }
    }
}

/// Names a non-blocking send started by [`Comm::nsend`], to test with
/// [`Comm::send_done`]. Handles are cheap to copy; testing a completed handle
/// again keeps answering `true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendHandle {
    /// The destination rank.
    pub dest: Rank,
    /// A backend-chosen sequence number, increasing per destination.
    pub seq: u64,
}

/// What [`Comm::recv_from_into`] did with a message.
#[derive(Debug)]
pub enum Received {
    /// The message is in the caller's buffer, in its first `len` bytes.
    Placed(Envelope),
    /// The message did not fit (or was not accepted) and was received as
    /// usual.
    Owned(Message),
}

impl Received {
    /// A message received the ordinary way, copied into `buf` if it fits
    /// and `accept` takes its envelope (what
    /// [`Comm::recv_from_into`] does with a message it could not receive
    /// in place).
    pub(crate) fn place_or_own(
        message: Message,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Received {
        let envelope = message.envelope();
        match buf.get_mut(..message.data.len()) {
            Some(target) if accept(&envelope) => {
                target.copy_from_slice(&message.data);
                Received::Placed(envelope)
            }
            _ => Received::Owned(message),
        }
    }
}

/// The eight primitives of MTTL's communication layer.
pub trait Comm {
    /// `_pmttl_cominit`: join the job and learn this process's rank and size.
    ///
    /// Launch information (rank, size, rendezvous address, job secret for
    /// TCP; the MPI runtime's own for MPI) comes from the environment set by
    /// the launcher. Afterwards [`rank`](Comm::rank) and
    /// [`size`](Comm::size) answer what was learned.
    fn init() -> Result<Self, CommError>
    where
        Self: Sized;

    /// This process's rank, learned by [`init`](Comm::init).
    fn rank(&self) -> Rank;

    /// The number of processes in the job, learned by [`init`](Comm::init).
    fn size(&self) -> usize;

    /// A short name of the backend for reports: `"tcp"` or `"mpi"`.
    fn backend_name(&self) -> &'static str;

    /// The largest message this backend carries, in bytes.
    fn max_message_len(&self) -> usize;

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
    /// (see [`send_headed_bulk`](Comm::send_headed_bulk)). The provided
    /// version says any size: where every message costs a system call
    /// (TCP), the copies cost less.
    fn combine_len(&self) -> usize {
        usize::MAX
    }

    /// `_pmttl_comfinish`: complete every pending send, then leave the job.
    fn finish(self) -> Result<(), CommError>
    where
        Self: Sized;

    /// `_pmttl_prob`: is a message from any rank waiting? Never blocks.
    fn probe(&mut self) -> Result<Option<Envelope>, CommError>;

    /// Whether messages this backend has already taken out of the network
    /// wait to be received (while it waited in a send, say), without
    /// looking at the network: cheaper than [`probe`](Comm::probe), which
    /// may cost a system call. The provided version says `false`.
    fn holds_received(&self) -> bool {
        false
    }

    /// `_pmttl_asend`: send `data` to `dest`; returns when `data` may be
    /// reused (the message is buffered by the backend or the kernel, not
    /// necessarily received).
    fn send(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError>;

    /// `_pmttl_nsend`: start sending `data` to `dest` and return at once.
    /// The backend owns the buffer until the send completes.
    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError>;

    /// `_pmttl_senddone`: has the non-blocking send `handle` completed?
    /// Never blocks; makes progress.
    fn send_done(&mut self, handle: SendHandle) -> Result<bool, CommError>;

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

    /// `_pmttl_brecnode`: receive the next message from `source` (any tag),
    /// blocking up to `timeout` (`None`: without limit). `Ok(None)` means the
    /// timeout passed with no message.
    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError>;

    /// `_pmttl_brecnode` into the caller's memory: receive the next message
    /// from `source` straight into `buf` if it is no longer than `buf` and
    /// `accept` takes its envelope, else as [`recv_from`](Comm::recv_from)
    /// would. This is how a large remote write lands in its region without
    /// a copy (MPI: `MPI_Recv` into the region once a probe gave the size).
    ///
    /// The provided version receives as usual and copies; backends that
    /// can receive in place override it.
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
    /// with [`recv_from_into`](Comm::recv_from_into), such as a remote
    /// write's body. Any receive still takes it: only the way it travels
    /// may differ. A backend that receives in place only the messages it
    /// announces (MPI: those above 64 KiB) announces this one from a smaller
    /// size, so that it lands in place instead of being copied there. The
    /// provided version is `send`.
    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send(dest, tag, data)
    }

    /// [`nsend`](Comm::nsend) of a message meant for
    /// [`recv_from_into`](Comm::recv_from_into), as [`send_bulk`](Comm::send_bulk)
    /// is `send` of one. The provided version is `nsend`.
    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend(dest, tag, data)
    }

    /// [`nsend_bulk`](Comm::nsend_bulk) of borrowed memory: starts sending
    /// `data` and returns at once, without copying it where the backend can
    /// (MPI: `MPI_Isend` from `data`). For a caller that must not block
    /// while a large message leaves, so that its own loop takes what
    /// arrives meanwhile where it belongs; it then polls
    /// [`send_finished`](Comm::send_finished). The provided version copies
    /// `data` for `nsend_bulk`.
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
    /// [`send_bulk`](Comm::send_bulk) does, to the same `dest`: two
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

    /// [`nsend_borrowed`](Comm::nsend_borrowed) of `data` behind `head`, as
    /// [`send_headed_bulk`](Comm::send_headed_bulk) is `send_bulk` behind
    /// it: `head` is sent at once; the handle is `data`'s. The provided
    /// version is `send` then `nsend_borrowed`.
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

    /// `_pmttl_brecany`: receive the next message from any rank (any tag),
    /// blocking up to `timeout` (`None`: without limit). `Ok(None)` means the
    /// timeout passed with no message.
    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError>;
}
