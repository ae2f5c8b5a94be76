//! The inbox: messages already taken out of MPI but not yet handed to the
//! caller, in arrival order.
//!
//! Messages land here when a large `send` or `finish` drains incoming traffic
//! while it waits, and when a rank sends to itself. Receives and probes serve
//! the inbox before MPI. Per-sender order holds because a sender's messages
//! enter the inbox in MPI's order, and every message of that sender still in
//! MPI is newer than all of its messages here.

use std::collections::VecDeque;

use crate::comm::{Envelope, Message, Rank};

/// Received messages waiting for `recv_any` / `recv_from`.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    queue: VecDeque<Message>,
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
        self.queue.push_back(message);
    }

    /// The envelope of the oldest message.
    #[inline]
    pub(super) fn front(&self) -> Option<Envelope> {
        self.queue.front().map(Message::envelope)
    }

    /// Takes the oldest message.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Message> {
        self.queue.pop_front()
    }

    /// Takes the oldest message from `source`.
    #[inline]
    pub(super) fn pop_from(&mut self, source: Rank) -> Option<Message> {
        if self.queue.is_empty() {
            return None;
        }
        let at = self.queue.iter().position(|m| m.source == source)?;
        self.queue.remove(at)
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
        assert_eq!(inbox.pop_from(2).map(|m| m.tag), Some(20));
        assert_eq!(inbox.front().map(|e| e.tag), Some(10));
        assert_eq!(inbox.pop().map(|m| m.tag), Some(10));
        assert_eq!(inbox.pop_from(1).map(|m| m.tag), Some(11));
        assert_eq!(inbox.pop_from(1), None);
        assert_eq!(inbox.pop().map(|m| m.tag), Some(21));
        assert!(inbox.is_empty());
    }
}
