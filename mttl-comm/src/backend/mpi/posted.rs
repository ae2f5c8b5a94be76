//! The pre-posted receive: one receive from any source with any tag on the
//! small channel, always waiting for the next message.
//!
//! A receive posted before its message arrives is matched by MPI as the
//! message comes in and filled straight from the transport; polling it is an
//! `MPI_Test`, which costs little more than MPI's own progress loop. Probing
//! for an unknown message instead (`MPI_Iprobe`, then `MPI_Recv` of what it
//! found) makes MPI queue the message as unexpected, search that queue twice
//! and copy the data once more, which shows even in 8-byte round trips,
//! and each unsuccessful `MPI_Iprobe` costs several times a `MPI_Test`.
//!
//! The receive is persistent (`MPI_Recv_init` once, `MPI_Start` per
//! message), bound to the buffer's address. A buffer that goes out with a
//! message is replaced by a new one, which the allocator usually places at
//! the same address once the caller has dropped that message. A caller
//! that still holds the message when the receive is posted again (an echo
//! replying from it) makes the allocator alternate between two addresses,
//! so two receives are kept, bound to the last two; one is made again only
//! for a third address. With one, every such round trip would remake it on
//! both ranks (`MPI_Request_free` and `MPI_Recv_init`), a cost that shows
//! against raw MPI (`mttl-bench comm`, `mpi-vs-raw`).
//!
//! A posted receive must be large enough for whatever matches it, so only
//! messages of at most [`SMALL_MAX`] bytes travel whole on the small channel.
//! A larger message is announced there by a *marker* (an 8-byte
//! [`marker_word`] under the message's tag plus the marker bit), and its
//! payload follows on the large channel; the receiver posts an `MPI_Irecv`
//! for the payload as soon as it sees the marker, into a buffer that
//! starts where the payload did at its sender within a cache line (see
//! `inbox.rs`). Markers and small messages from
//! one sender share one channel, so they keep their order; payloads from one
//! sender are received in marker order, so each lands under its own marker.
//!
//! A split message (`mod.rs`) arrives as its head, under its tag plus twice
//! the marker bit, then the rest, the next message from the same sender on
//! this channel. The head posts a receive of the rest from that sender
//! right after itself in the buffer, and the pre-posted receive waits to be
//! started again until the rest is in: MPI matches a message with the
//! first posted receive that takes it, and the rest's is the only one
//! posted. Polls test the rest's receive meanwhile (a probe reports the
//! message once it is whole); the message then goes on as if it had
//! arrived whole.
//!
//! The receive is started again lazily, at the next poll, so a rank that has
//! just received does not pay for posting again before it can answer.
//!
//! Invariant: while the receive (or the receive of a split message's rest)
//! is active its buffer is neither read, written nor freed; it is released
//! only once `MPI_Test` reports the receive complete or
//! [`Posted::withdraw`] has cancelled it (or received the rest). The receive is
//! started only while bound to the current buffer. Dropping a `Posted` with
//! the receive active leaks the buffer.

use std::ffi::c_int;
use std::mem::{self, ManuallyDrop};

use mpi::ffi;

use super::raw::{Channel, MpiCode, Persistent, Received, Request, World};
use super::SMALL_MAX;
use crate::comm::{Envelope, Message, Rank, Tag};

/// Messages up to this size are copied out of the posted buffer into a
/// `Vec` of their own, and the buffer is posted again; larger ones keep the
/// buffer (shrunk to fit) and a new one is allocated when the receive is
/// posted again.
const COPY_MAX: usize = 4 << 10;

/// The length of a marker: its [`marker_word`].
pub(super) const MARKER_LEN: usize = 8;

/// The cache-line size the payload offsets in markers are taken modulo:
/// 64 bytes, as on every x86-64 CPU and most Arm ones.
pub(super) const LINE: usize = 64;

/// Bits of a marker word that carry the payload's length.
const LEN_BITS: u32 = 56;

/// The first word of a marker, little-endian: the payload's length, and
/// in the top byte where `data` (the payload) starts within its cache line
/// (its address modulo [`LINE`]), so that the receiver can give the payload
/// a buffer at the same offset (see `inbox.rs`).
pub(super) fn marker_word(len: usize, data: *const u8) -> [u8; MARKER_LEN] {
    // MPI counts are `int`, so a payload's length fits its bits.
    debug_assert!((len as u64) < 1 << LEN_BITS);
    let offset = (data as usize % LINE) as u64;
    (len as u64 | offset << LEN_BITS).to_le_bytes()
}

/// Reads a [`marker_word`]: the payload's length and offset.
fn read_marker_word(word: [u8; MARKER_LEN]) -> Result<(usize, usize), MpiCode> {
    let word = u64::from_le_bytes(word);
    let offset = (word >> LEN_BITS) as usize;
    if offset >= LINE {
        return Err(MpiCode::other());
    }
    let len = usize::try_from(word & ((1 << LEN_BITS) - 1))
        .map_err(|_| MpiCode(ffi::MPI_ERR_COUNT as c_int))?;
    Ok((len, offset))
}

/// The length of a headed marker before its message's bytes: the
/// [`marker_word`], then the message's tag (little-endian `u32`).
pub(super) const HEADED_LEN: usize = MARKER_LEN + 4;

/// Where `recv_from_into` wants its message: a whole message that
/// [`takes`](Placement::takes) is copied from the posted buffer straight
/// into `buf`, instead of into a `Vec` of its own that the caller would copy
/// again (and free).
pub(super) struct Placement<'a> {
    /// The only sender whose messages may land in `buf`.
    pub(super) source: Rank,
    /// The caller's memory.
    pub(super) buf: &'a mut [u8],
    /// The caller's choice among the messages that fit.
    pub(super) accept: &'a dyn Fn(&Envelope) -> bool,
}

impl Placement<'_> {
    /// Whether the message (or announced payload) `envelope` describes
    /// goes into the caller's buffer.
    #[inline]
    pub(super) fn takes(&self, envelope: &Envelope) -> bool {
        envelope.source == self.source && envelope.len <= self.buf.len() && (self.accept)(envelope)
    }
}

/// What the pre-posted receive got.
#[derive(Debug)]
pub(super) enum Arrival {
    /// A whole message.
    Message(Message),
    /// A whole message copied into the buffer of the [`Placement`] the poll
    /// was given.
    Placed(Envelope),
    /// A marker: a message of `len` bytes from `source` with `tag` follows
    /// on the large channel.
    Marker {
        /// The sender.
        source: Rank,
        /// The tag the sender gave.
        tag: Tag,
        /// The payload's length in bytes.
        len: usize,
        /// Where the payload starts within a cache line at the sender.
        offset: usize,
    },
    /// A headed marker: `head`, a whole message, and then, as for
    /// [`Marker`](Arrival::Marker), a payload of `len` bytes under `tag`
    /// from the same sender.
    Headed {
        /// The message the marker carried (its sender is the payload's).
        head: Message,
        /// The payload's tag.
        tag: Tag,
        /// The payload's length in bytes.
        len: usize,
        /// Where the payload starts within a cache line at the sender.
        offset: usize,
    },
}

/// What a [`Posted`] has MPI receive into its buffer.
#[derive(Debug)]
enum Pending {
    /// No receive: the buffer is this side's.
    Nothing,
    /// The persistent receive is started.
    Posted,
    /// The receive of a split message's rest, after its head.
    Rest(Tail),
}

/// The pending receive of the rest of a split message.
#[derive(Debug)]
struct Tail {
    /// Into the buffer right after the head.
    request: Request,
    /// The sender.
    source: c_int,
    /// The message's tag.
    tag: c_int,
    /// The head's length.
    head: usize,
}

/// The pre-posted receive and its buffer.
#[derive(Debug)]
pub(super) struct Posted {
    /// Persistent receives and the addresses they are bound to, the one
    /// last started first: `buf`'s, or those of buffers that went out with
    /// messages (the allocator often hands the same memory back for the
    /// next one). Only the first is ever active.
    receives: [Option<(Persistent, *mut u8)>; 2],
    /// What MPI may be writing into `buf`.
    pending: Pending,
    /// Capacity [`SMALL_MAX`]; never touched while a receive is pending.
    buf: ManuallyDrop<Vec<u8>>,
    /// MPI tags at or above this are markers (see `mod.rs`).
    marker_bit: c_int,
}

impl Posted {
    /// Nothing posted yet; the first [`poll`](Posted::poll) posts.
    pub(super) fn new(marker_bit: c_int) -> Posted {
        Posted {
            receives: [None, None],
            pending: Pending::Nothing,
            buf: ManuallyDrop::new(Vec::with_capacity(SMALL_MAX)),
            marker_bit,
        }
    }

    /// Posts the receive if needed and tests it once: the message or marker
    /// that arrived, if any. A whole message that `placement` takes is
    /// copied into its buffer ([`Arrival::Placed`]).
    #[inline]
    pub(super) fn poll(
        &mut self,
        world: &World,
        placement: Option<&mut Placement<'_>>,
    ) -> Result<Option<Arrival>, MpiCode> {
        if !matches!(self.pending, Pending::Rest(_)) {
            let receive = match (&self.pending, &mut self.receives[0]) {
                (Pending::Posted, Some((receive, _))) => receive,
                _ => self.post(world)?,
            };
            let Some(received) = world.test_persistent(receive)? else {
                return Ok(None);
            };
            self.pending = Pending::Nothing;
            if !self.start_tail(world, received)? {
                return self.take(received, placement).map(Some);
            }
        }
        self.poll_tail(world, placement)
    }

    /// If `received` is the head of a split message (`mod.rs`,
    /// `split_head_for`), posts the receive of its rest right after it in
    /// the buffer and returns `true`.
    ///
    /// The rest is the next message from the head's sender on the small
    /// channel, and the only receive posted there now is this one (the
    /// pre-posted one is started again only once the rest is in), so MPI
    /// matches the rest with it.
    #[inline]
    fn start_tail(&mut self, world: &World, received: Received) -> Result<bool, MpiCode> {
        let split_bit = 2 * self.marker_bit;
        if received.tag < split_bit {
            return Ok(false);
        }
        let tag = received.tag - split_bit;
        if tag >= self.marker_bit {
            return Err(MpiCode(ffi::MPI_ERR_TAG as c_int));
        }
        // MPI never writes more than the buffer's capacity.
        let head = (received.len as usize).min(SMALL_MAX);
        // SAFETY: `buf` has room for SMALL_MAX bytes, of which the rest may
        // fill the `SMALL_MAX - head` after the head, and is left alone
        // while the rest's receive is pending (module invariant): only
        // `poll_tail` reads it, once `MPI_Test` reported the receive complete.
        let request = unsafe {
            world.irecv(
                Channel::Small,
                Some(received.source),
                None,
                self.buf.as_mut_ptr().add(head),
                (SMALL_MAX - head) as c_int,
            )
        }?;
        self.pending = Pending::Rest(Tail {
            request,
            source: received.source,
            tag,
            head,
        });
        Ok(true)
    }

    /// Tests the receive of a split message's rest, if one is pending: the
    /// whole message once it is in (placed, if `placement` takes it).
    #[inline]
    fn poll_tail(
        &mut self,
        world: &World,
        placement: Option<&mut Placement<'_>>,
    ) -> Result<Option<Arrival>, MpiCode> {
        let Pending::Rest(tail) = &mut self.pending else {
            return Ok(None);
        };
        let Some(rest) = world.test_recv(&mut tail.request)? else {
            return Ok(None);
        };
        let Tail {
            source, tag, head, ..
        } = *tail;
        self.pending = Pending::Nothing;
        if rest.tag != tag {
            // Not the rest of the head: the sender broke the protocol.
            return Err(MpiCode::other());
        }
        let whole = Received {
            source,
            tag,
            len: head as c_int + rest.len,
        };
        self.take(whole, placement).map(Some)
    }

    /// Starts the receive into `buf`, allocating a new buffer first if
    /// the last one went out with a message.
    #[inline]
    fn post(&mut self, world: &World) -> Result<&mut Persistent, MpiCode> {
        if self.buf.capacity() < SMALL_MAX {
            // The last buffer went out with a message. Allocated only now,
            // when the caller has likely dropped that message, so the
            // allocator hands back its memory (still in cache), and the
            // receive made for it is still bound to the right address.
            *self.buf = Vec::with_capacity(SMALL_MAX);
        }
        let at = self.buf.as_mut_ptr();
        let bound_here = |slot: &Option<(Persistent, *mut u8)>| {
            slot.as_ref().is_some_and(|&(_, bound)| bound == at)
        };
        if !bound_here(&self.receives[0]) {
            // The other one, or a new one in place of the older (which is
            // inactive: only the first is ever started).
            self.receives.swap(0, 1);
            if !bound_here(&self.receives[0]) {
                if let Some((receive, _)) = self.receives[0].take() {
                    world.free_persistent(receive)?;
                }
            }
        }
        let receive = match &mut self.receives[0] {
            Some((receive, _)) => receive,
            slot @ None => {
                // SAFETY: MPI only records the address here; see below.
                let receive =
                    unsafe { world.recv_init_any(Channel::Small, at, SMALL_MAX as c_int) }?;
                &mut slot.insert((receive, at)).0
            }
        };
        // SAFETY: the receive is bound to `buf` (checked above), which has
        // room for SMALL_MAX bytes and is left alone while the receive is
        // active (module invariant): `take` reads it only after `MPI_Test`
        // reported completion, `withdraw` after the cancellation.
        unsafe { world.start(receive) }?;
        self.pending = Pending::Posted;
        Ok(receive)
    }

    /// Cancels the posted receive, for `finish`: what it had received
    /// before the cancellation took effect, if anything (a split message
    /// whole: the rest is waited for, as its sender sent it right after the
    /// head). Frees the receives.
    pub(super) fn withdraw(&mut self, world: &World) -> Result<Option<Arrival>, MpiCode> {
        let mut arrival = None;
        if let (Pending::Posted, Some((receive, _))) = (&self.pending, &mut self.receives[0]) {
            let received = world.cancel_persistent(receive)?;
            self.pending = Pending::Nothing;
            if let Some(received) = received {
                if !self.start_tail(world, received)? {
                    arrival = Some(self.take(received, None)?);
                }
            }
        }
        while matches!(self.pending, Pending::Rest(_)) {
            arrival = self.poll_tail(world, None)?;
            if arrival.is_none() {
                std::thread::yield_now();
            }
        }
        for (receive, _) in self.receives.iter_mut().filter_map(Option::take) {
            world.free_persistent(receive)?;
        }
        Ok(arrival)
    }

    /// Reads what the completed receive put in the buffer, placing a whole
    /// message that `placement` takes.
    #[inline]
    fn take(
        &mut self,
        received: Received,
        placement: Option<&mut Placement<'_>>,
    ) -> Result<Arrival, MpiCode> {
        // MPI reports non-negative ranks, tags and counts, and never writes
        // more than the buffer's capacity.
        let len = (received.len as usize).min(SMALL_MAX);
        let source = received.source as Rank;
        if received.tag >= self.marker_bit {
            let tag = (received.tag - self.marker_bit) as Tag;
            // SAFETY: the receive completed, so MPI initialised the first
            // `len` bytes of the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), len) };
            let (word, rest) = bytes
                .split_first_chunk::<MARKER_LEN>()
                .ok_or_else(MpiCode::other)?;
            let (len, offset) = read_marker_word(*word)?;
            if rest.is_empty() {
                return Ok(Arrival::Marker {
                    source,
                    tag,
                    len,
                    offset,
                });
            }
            let (head_tag, head) = rest.split_first_chunk::<4>().ok_or_else(MpiCode::other)?;
            let head_tag = u32::from_le_bytes(*head_tag);
            if head_tag >= self.marker_bit as u32 {
                return Err(MpiCode(ffi::MPI_ERR_TAG as c_int));
            }
            let head = Message {
                source,
                tag: head_tag,
                data: head.to_vec(),
            };
            return Ok(Arrival::Headed {
                head,
                tag,
                len,
                offset,
            });
        }
        let envelope = Envelope {
            source,
            tag: received.tag as Tag,
            len,
        };
        if let Some(placement) = placement.filter(|placement| placement.takes(&envelope)) {
            // SAFETY: as above, MPI initialised the first `len` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), len) };
            placement.buf[..len].copy_from_slice(bytes);
            return Ok(Arrival::Placed(envelope));
        }
        let data = if len <= COPY_MAX {
            // SAFETY: as above, MPI initialised the first `len` bytes.
            unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), len) }.to_vec()
        } else {
            let mut data = mem::take(&mut *self.buf);
            // SAFETY: MPI initialised the first `len` bytes, `len` is at
            // most the capacity, and the receive is over: the buffer is ours.
            unsafe { data.set_len(len) };
            if len <= SMALL_MAX / 2 {
                data.shrink_to_fit();
            }
            data
        };
        Ok(Arrival::Message(Message {
            source,
            tag: envelope.tag,
            data,
        }))
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        if matches!(self.pending, Pending::Nothing) {
            // SAFETY: no receive is posted, so MPI does not hold the buffer;
            // `self` is being dropped, so it is dropped exactly once.
            unsafe { ManuallyDrop::drop(&mut self.buf) };
        }
        // Otherwise MPI may still write into it: leak it.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_words_carry_length_and_offset() {
        let buf = [0u8; 200];
        for at in [0, 1, 17, 63, 64, 130] {
            let data = buf[at..].as_ptr();
            let (len, offset) = read_marker_word(marker_word(5_000_000, data)).unwrap();
            assert_eq!((len, offset), (5_000_000, data as usize % LINE));
        }
        let (len, _) = read_marker_word(marker_word(i32::MAX as usize, buf.as_ptr())).unwrap();
        assert_eq!(len, i32::MAX as usize);
        assert!(
            read_marker_word((1u64 << 63 | 10).to_le_bytes()).is_err(),
            "an offset past a cache line is refused"
        );
    }
}
