//! The `Comm` trait: the eight communication primitives of MPC++ MTTL.
//!
//! Everything in mttl above this trait is portable; a backend (TCP, MPI,
//! `local`, or a future shared-memory, UCX or libfabric one) implements these
//! eight operations, plus four questions about itself (`rank`, `size`,
//! `max_message_len`, `backend_name`). The table maps each primitive to its
//! MTTL name (paper, table 1), to the MPI call of the paper's mapping, and to
//! what the MPI backend does instead where that is cheaper:
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
//! # Required and optional
//!
//! - **Required**: [`Comm`], the eight primitives above and `rank`, `size`,
//!   `max_message_len`, `backend_name`. A new backend implements this trait
//!   and nothing else of substance.
//! - **Optional**: [`CommTuning`](crate::CommTuning), the extension the
//!   runtime uses for speed (batch sizes, sends meant to be received in
//!   place, zero-copy sends from borrowed memory). Every one of its methods
//!   has a provided version written in terms of the eight, so a backend may
//!   implement it with an empty `impl CommTuning for MyComm {}` and behave
//!   correctly; it overrides a method only where it can do better (the
//!   `local` backend does exactly that: an empty impl).
//!
//! # Contract every backend keeps
//!
//! 1. **Ordering.** Messages from one rank to another are received in the
//!    order they were sent (`send` and `nsend`, and every send of
//!    `CommTuning`, share one order: the order of the calls). Nothing is
//!    promised across different senders.
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

/// What [`CommTuning::recv_from_into`](crate::CommTuning::recv_from_into)
/// did with a message.
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
    /// and `accept` takes its envelope (what `recv_from_into` does with a
    /// message it could not receive in place).
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

/// The eight primitives of MTTL's communication layer (see the module docs
/// for the contract), and what a backend tells about itself.
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

    /// `_pmttl_comfinish`: complete every pending send, then leave the job.
    fn finish(self) -> Result<(), CommError>
    where
        Self: Sized;

    /// This process's rank, learned by [`init`](Comm::init).
    fn rank(&self) -> Rank;

    /// The number of processes in the job, learned by [`init`](Comm::init).
    fn size(&self) -> usize;

    /// A short name of the backend for reports: `"tcp"`, `"mpi"` or
    /// `"local"`.
    fn backend_name(&self) -> &'static str;

    /// The largest message this backend carries, in bytes.
    fn max_message_len(&self) -> usize;

    /// `_pmttl_prob`: is a message from any rank waiting? Never blocks.
    fn probe(&mut self) -> Result<Option<Envelope>, CommError>;

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

    /// `_pmttl_brecnode`: receive the next message from `source` (any tag),
    /// blocking up to `timeout` (`None`: without limit). `Ok(None)` means the
    /// timeout passed with no message.
    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError>;

    /// `_pmttl_brecany`: receive the next message from any rank (any tag),
    /// blocking up to `timeout` (`None`: without limit). `Ok(None)` means the
    /// timeout passed with no message.
    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError>;
}
