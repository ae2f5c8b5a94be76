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
    /// `len` bytes (at most `i32::MAX`) under `tag` on the large channel.
    pub(super) fn start(
        world: &World,
        source: Rank,
        tag: Tag,
        len: usize,
    ) -> Result<Incoming, MpiCode> {
        let count = c_int::try_from(len).map_err(|_| MpiCode::other())?;
        let mut buf = ManuallyDrop::new(Vec::<u8>::with_capacity(len));
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
}

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
