//! The inbox: messages already taken out of the pre-posted receive but not
//! yet handed to the caller, in arrival order.
//!
//! An entry is either a whole message or a large message whose marker has
//! arrived and whose payload is being received (an `MPI_Irecv` on the large
//! channel, posted when the marker was seen, so a large send to this rank
//! completes even while this rank waits for something else). Messages land
//! here when a wait takes traffic other than what it waits for, when a probe
//! looks at the next message, and when a rank sends to itself. Probes and
//! receives serve the inbox before MPI. Per-sender order holds because a
//! sender's messages and markers enter the inbox in MPI's order, and every
//! message of that sender still in MPI is newer than all of its entries here.
//!
//! Invariant: the buffer of a payload receive is neither read nor freed
//! before `MPI_Test` reports the receive complete; dropping the inbox with
//! payloads still arriving leaks their buffers.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::mem::ManuallyDrop;
use std::sync::OnceLock;

use super::posted::LINE;
use super::raw::{Channel, MpiCode, Request, World};
use crate::comm::{Envelope, Message, Rank, Tag};

/// A large message's payload being received.
#[derive(Debug)]
pub(super) struct Incoming {
    source: Rank,
    tag: Tag,
    len: usize,
    request: Request,
    /// Capacity `len`; never touched while the receive is in flight.
    buf: ManuallyDrop<Vec<u8>>,
}

impl Incoming {
    /// Posts the receive of the payload a marker from `source` announced:
    /// `len` bytes (at most `i32::MAX`) under `tag` on the large channel,
    /// into `buf` (room for `len` bytes, from [`Inbox::payload_buffer`]).
    pub(super) fn start(
        world: &World,
        source: Rank,
        tag: Tag,
        len: usize,
        buf: Vec<u8>,
    ) -> Result<Incoming, MpiCode> {
        let count = c_int::try_from(len).map_err(|_| MpiCode::other())?;
        debug_assert!(buf.capacity() >= len);
        let mut buf = ManuallyDrop::new(buf);
        // SAFETY: `buf` has room for `len` bytes and moves into the returned
        // `Incoming` (moving a `Vec` does not move its heap buffer), which
        // leaves it alone until `MPI_Test` reports the receive complete
        // (module invariant). Ranks and tags fit MPI's `int`: they came from
        // MPI. If MPI_Irecv fails, nothing was posted and `buf` is freed.
        let posted = unsafe {
            world.irecv(
                Channel::Large,
                Some(source as c_int),
                Some(tag as c_int),
                buf.as_mut_ptr(),
                count,
            )
        };
        match posted {
            Ok(request) => Ok(Incoming {
                source,
                tag,
                len,
                request,
                buf,
            }),
            Err(code) => {
                drop(ManuallyDrop::into_inner(buf));
                Err(code)
            }
        }
    }

    /// Tests the receive once; the message once it has arrived whole.
    fn test(&mut self, world: &World) -> Result<Option<Message>, MpiCode> {
        let Some(received) = world.test_recv(&mut self.request)? else {
            return Ok(None);
        };
        // SAFETY: the receive is complete, so MPI released the buffer; it is
        // taken out exactly once, as the caller removes this entry at once.
        let mut data = unsafe { ManuallyDrop::take(&mut self.buf) };
        let len = (received.len as usize).min(self.len);
        // SAFETY: MPI wrote `len` bytes (at most the capacity) at the start.
        unsafe { data.set_len(len) };
        Ok(Some(Message {
            source: self.source,
            tag: self.tag,
            data,
        }))
    }
}

/// How many fresh blocks [`vec_at_line_offset`] looks at, at most.
const OFFSET_TRIES: usize = 4;

/// The largest payload a block is picked for ([`picks_among_blocks`]).
/// The blocks tried for it are freed together, and must stay well below
/// the trim threshold, past which glibc hands them back to the kernel, so
/// that the next payload is faulted in page by page again (which makes
/// large round trips several times slower). The limit is this or, if
/// smaller, an eighth of the memory `malloc` is known to keep (8 MiB with
/// the trim threshold `backend::malloc` sets; nothing if it set none).
/// Picking blocks for larger payloads under a higher trim threshold gains
/// nothing.
const OFFSET_MAX_LEN: usize = 4 << 20;

/// The largest payload a block is picked for in this process.
fn offset_max_len() -> usize {
    OFFSET_MAX_LEN.min(crate::backend::malloc::kept_free_bytes() / (2 * OFFSET_TRIES))
}

/// Whether a payload of `len` bytes is received into a block picked for
/// its offset ([`vec_at_line_offset`]) or into the first block `malloc`
/// gives, given the largest payload blocks are picked for (`max_len`,
/// [`offset_max_len`]), `cache` bytes of cache per core (the L2 cache) and
/// whether the sender's offset is `steady` (the same as for its last
/// payload).
///
/// While the offset holds steady (a round trip, a sender reusing its
/// buffers), the block picked for one payload is the first block for the
/// next, and picking costs nothing.
///
/// When the sender's offsets vary (a program allocating one `Vec` per
/// message gets blocks 16 bytes further into a line each), the messages are
/// received into up to [`OFFSET_TRIES`] blocks in turn where the first
/// block alone would have been reused for every one, and each copy writes
/// to lines the cache may no longer hold. That pays while the blocks fit in
/// the cache with the message being read, and again once one block alone
/// would not stay there. In between (payloads from a quarter to a half of
/// the cache, say 512 KiB to 1 MiB with 2 MiB of L2) the first block alone
/// streams faster.
fn picks_among_blocks(len: usize, max_len: usize, cache: usize, steady: bool) -> bool {
    let rotation_pays = (OFFSET_TRIES + 1) * len <= cache || 2 * len > cache;
    len <= max_len && (steady || rotation_pays)
}

/// The cache [`picks_among_blocks`] weighs blocks against: the L2 cache's
/// size as glibc reports it, or 1 MiB, a common size, if it does not (or
/// on another C library, which has no such query).
fn cache_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: `sysconf` only reads a system parameter.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        let reported = unsafe { libc::sysconf(libc::_SC_LEVEL2_CACHE_SIZE) };
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        let reported: libc::c_long = 0;
        usize::try_from(reported)
            .ok()
            .filter(|&size| size > 0)
            .unwrap_or(1 << 20)
    })
}

/// An empty vector with room for `len` bytes whose buffer starts `offset`
/// bytes into a cache line (of [`LINE`] bytes) if the allocator hands out
/// such a block within [`OFFSET_TRIES`] tries, else the first block it
/// gave.
///
/// A payload is copied fastest into a buffer that starts where its source
/// does within a cache line: otherwise every line written takes parts of
/// two lines read, which slows a large copy with `process_vm_readv` (how
/// Open MPI's shared memory moves large messages) by about a tenth.
/// Whether that pays for a stream of
/// messages depends on their size; see [`picks_among_blocks`]. A `Vec<u8>`
/// cannot ask for an alignment (it is freed as allocated with alignment
/// 1), so the buffer is picked among fresh blocks instead: glibc cuts
/// blocks of one size one after another, each 16 bytes further into a line
/// for sizes such as a power of two, so a few tries find the offset if
/// glibc can give it at all. The blocks not taken are freed at once (never
/// touched, they cost no page faults).
fn vec_at_line_offset(len: usize, offset: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    if buf.as_ptr() as usize % LINE == offset {
        return buf;
    }
    let mut tried: [Vec<u8>; OFFSET_TRIES - 1] = Default::default();
    for slot in &mut tried {
        let next = Vec::with_capacity(len);
        if next.as_ptr() as usize % LINE == offset {
            *slot = std::mem::replace(&mut buf, next);
            return buf;
        }
        *slot = next;
    }
    buf
}

/// One message waiting in the inbox.
#[derive(Debug)]
enum Entry {
    Ready(Message),
    Arriving(Incoming),
}

impl Entry {
    fn source(&self) -> Rank {
        match self {
            Entry::Ready(message) => message.source,
            Entry::Arriving(incoming) => incoming.source,
        }
    }

    fn envelope(&self) -> Envelope {
        match self {
            Entry::Ready(message) => message.envelope(),
            Entry::Arriving(incoming) => Envelope {
                source: incoming.source,
                tag: incoming.tag,
                len: incoming.len,
            },
        }
    }
}

/// Received messages waiting for `recv_any` / `recv_from`.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    queue: VecDeque<Entry>,
    /// How many entries are `Arriving`.
    arriving: usize,
    /// By source rank: the line offset of its last payload at the sender,
    /// or [`NO_OFFSET`].
    offsets: Vec<u8>,
}

/// In [`Inbox::offsets`]: no payload from that source yet.
const NO_OFFSET: u8 = u8::MAX;

impl Inbox {
    /// Whether no message is waiting here.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// How many messages are waiting here.
    pub(super) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Appends a message that arrived after every message already here.
    pub(super) fn push(&mut self, message: Message) {
        self.queue.push_back(Entry::Ready(message));
    }

    /// A buffer for a payload of `len` bytes from `source`, which starts
    /// `offset` bytes into a cache line at the sender: at the same offset
    /// when [`picks_among_blocks`] says so.
    pub(super) fn payload_buffer(&mut self, source: Rank, len: usize, offset: usize) -> Vec<u8> {
        let steady = self.note_offset(source, offset);
        if picks_among_blocks(len, offset_max_len(), cache_size(), steady) {
            vec_at_line_offset(len, offset)
        } else {
            Vec::with_capacity(len)
        }
    }

    /// Notes that `source`'s latest payload starts `offset` bytes into a
    /// cache line; returns whether its last one did too.
    fn note_offset(&mut self, source: Rank, offset: usize) -> bool {
        if self.offsets.len() <= source {
            self.offsets.resize(source + 1, NO_OFFSET);
        }
        // An offset is below LINE (64), so it fits and is never NO_OFFSET.
        let offset = offset as u8;
        std::mem::replace(&mut self.offsets[source], offset) == offset
    }

    /// Appends a large message whose payload is arriving.
    pub(super) fn push_arriving(&mut self, incoming: Incoming) {
        self.queue.push_back(Entry::Arriving(incoming));
        self.arriving += 1;
    }

    /// The envelope of the oldest message.
    #[inline]
    pub(super) fn front(&self) -> Option<Envelope> {
        self.queue.front().map(Entry::envelope)
    }

    /// Where the oldest message from `source` (`None`: from anyone) is.
    #[inline]
    pub(super) fn position(&self, source: Option<Rank>) -> Option<usize> {
        if self.queue.is_empty() {
            return None;
        }
        match source {
            None => Some(0),
            Some(source) => self.queue.iter().position(|e| e.source() == source),
        }
    }

    /// Takes the message at `at` (from [`position`](Inbox::position)) if it
    /// is whole; a payload still arriving is tested once.
    pub(super) fn take(&mut self, world: &World, at: usize) -> Result<Option<Message>, MpiCode> {
        let message = match self.queue.get_mut(at) {
            None => return Ok(None),
            Some(Entry::Ready(_)) => None,
            Some(Entry::Arriving(incoming)) => match incoming.test(world)? {
                None => return Ok(None),
                Some(message) => Some(message),
            },
        };
        let entry = self.queue.remove(at);
        match (message, entry) {
            (Some(message), _) => {
                // The `Arriving` entry's buffer was moved into `message`.
                self.arriving -= 1;
                Ok(Some(message))
            }
            (None, Some(Entry::Ready(message))) => Ok(Some(message)),
            (None, _) => Ok(None),
        }
    }

    /// Tests every payload still arriving once, keeping the completed ones
    /// as whole messages; returns whether none is left arriving.
    pub(super) fn complete_arrivals(&mut self, world: &World) -> Result<bool, MpiCode> {
        if self.arriving == 0 {
            return Ok(true);
        }
        for entry in self.queue.iter_mut() {
            if let Entry::Arriving(incoming) = entry {
                if let Some(message) = incoming.test(world)? {
                    // The buffer moved into `message`; replacing the entry
                    // drops the `Incoming` without touching it again.
                    *entry = Entry::Ready(message);
                    self.arriving -= 1;
                }
            }
        }
        Ok(self.arriving == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With glibc's `malloc` set up as the backends set it up, a payload
    /// buffer can start at any 16-byte offset into a cache line.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn payload_buffers_start_where_their_senders_did() {
        crate::backend::malloc::keep_freed_memory();
        for len in [(64 << 10) + 1, 1 << 20, 3_000_000, 4 << 20] {
            for offset in (0..LINE).step_by(16) {
                let buf = vec_at_line_offset(len, offset);
                assert!(buf.capacity() >= len);
                assert_eq!(
                    buf.as_ptr() as usize % LINE,
                    offset,
                    "a buffer of {len} bytes"
                );
            }
        }
        // An offset no block can have: the first block, whatever it is.
        assert!(vec_at_line_offset(1 << 20, 5).capacity() >= 1 << 20);
    }

    #[test]
    fn picks_blocks_for_steady_offsets_or_where_they_fit_the_cache() {
        const MIB: usize = 1 << 20;
        let picked = |cache: usize, steady: bool| {
            [
                16 << 10,
                256 << 10,
                512 << 10,
                MIB,
                2 * MIB,
                4 * MIB,
                16 * MIB,
                32 * MIB,
            ]
            .into_iter()
            .filter(|&len| picks_among_blocks(len, OFFSET_MAX_LEN, cache, steady))
            .collect::<Vec<_>>()
        };
        // 2 MiB of L2: offsets that vary get
        // blocks picked except from 512 KiB to 1 MiB; steady ones always;
        // none past OFFSET_MAX_LEN.
        assert_eq!(
            picked(2 * MIB, false),
            [16 << 10, 256 << 10, 2 * MIB, 4 * MIB]
        );
        assert_eq!(
            picked(2 * MIB, true),
            [16 << 10, 256 << 10, 512 << 10, MIB, 2 * MIB, 4 * MIB]
        );
        assert_eq!(picked(MIB, false), [16 << 10, MIB, 2 * MIB, 4 * MIB]);
        // Nothing when malloc's trim threshold is not known.
        assert!(!picks_among_blocks(16 << 10, 0, 2 * MIB, true));
        assert!(cache_size() > 0);
    }

    /// A source whose offsets hold steady is told apart from one whose
    /// offsets vary, source by source.
    #[test]
    fn steady_offsets_are_told_source_by_source() {
        let mut inbox = Inbox::default();
        assert!(!inbox.note_offset(3, 16), "the first payload from a source");
        assert!(inbox.note_offset(3, 16));
        // Another source in between does not break source 3's run.
        assert!(!inbox.note_offset(0, 48));
        assert!(inbox.note_offset(3, 16));
        assert!(!inbox.note_offset(3, 32), "an offset that moved");
        assert!(!inbox.note_offset(1, 0), "source 1 never sent one");
    }

    /// Steady payloads get buffers at their offset.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn payload_buffers_follow_steady_senders() {
        crate::backend::malloc::keep_freed_memory();
        assert_eq!(
            offset_max_len(),
            OFFSET_MAX_LEN,
            "malloc's trim threshold as the backends set it (unset MALLOC_* tunables)"
        );
        let len = 2 << 20;
        let mut inbox = Inbox::default();
        let _ = inbox.payload_buffer(3, len, 16);
        for _ in 0..3 {
            let buf = inbox.payload_buffer(3, len, 16);
            assert!(buf.capacity() >= len);
            assert_eq!(buf.as_ptr() as usize % LINE, 16);
        }
    }

    fn message(source: Rank, tag: u32) -> Message {
        Message {
            source,
            tag,
            data: vec![tag as u8],
        }
    }

    #[test]
    fn keeps_per_sender_order() {
        let mut inbox = Inbox::default();
        for (source, tag) in [(1, 10), (2, 20), (1, 11), (2, 21)] {
            inbox.push(message(source, tag));
        }
        // `Inbox::take` needs MPI only for arriving entries; these are whole.
        let take = |inbox: &mut Inbox, source| {
            let at = inbox.position(source)?;
            match inbox.queue.remove(at)? {
                Entry::Ready(message) => Some(message.tag),
                Entry::Arriving(_) => None,
            }
        };
        assert_eq!(take(&mut inbox, Some(2)), Some(20));
        assert_eq!(inbox.front().map(|e| e.tag), Some(10));
        assert_eq!(take(&mut inbox, None), Some(10));
        assert_eq!(take(&mut inbox, Some(1)), Some(11));
        assert_eq!(take(&mut inbox, Some(1)), None);
        assert_eq!(take(&mut inbox, None), Some(21));
        assert!(inbox.is_empty());
    }
}
