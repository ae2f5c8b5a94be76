//! Messages: every send primitive paired with the receive that took it.
//!
//! A `send` or `nsend` is one message of tag `a`; a `send_headed_bulk` or
//! `nsend_headed` is two, its header (tag `a | TAG_LARGE`) and then its
//! body (tag `TAG_DATA`). Every backend delivers the messages between two
//! ranks with one tag in the order sent, so the k-th receive on rank d of
//! tag t from rank s takes the k-th message of tag t that s sent to d:
//! pairing is counting, per (source, destination, tag), in order.
//!
//! It pairs any per-rank event lists, such as the reconstructed ones the TI
//! export walks (`check` pairs the raw trace the same way).

use std::collections::{HashMap, VecDeque};

use mttl_core::trace::format::{Event, Kind, TAG_DATA, TAG_LARGE};

/// An event of one rank: (rank, index in the event list given).
pub type At = (usize, usize);

/// One message: the send event that sent it, which part of it, and the
/// receive event that took it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// The send event.
    pub send: At,
    /// 0 for a one-message send or a header, 1 for a body.
    pub part: u8,
    /// Its tag on the wire.
    pub tag: u64,
    /// The destination rank.
    pub dest: u32,
    /// The receive event that took it, if any did.
    pub recv: Option<At>,
}

/// All messages of a run and the receives no send explains.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    /// Every message, in the order of its sender's events (ranks in order).
    pub messages: Vec<Message>,
    /// Receives with no message to take.
    pub unmatched_receives: Vec<At>,
}

impl Pairing {
    /// Per receive event, the message it took: (rank, event index) to an
    /// index into [`Pairing::messages`].
    pub fn by_receive(&self) -> HashMap<At, usize> {
        self.messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.recv.map(|r| (r, i)))
            .collect()
    }
}

/// The tags of the messages a send event puts on the wire, in order.
pub fn wire_tags(e: &Event) -> &'static [(u8, TagOf)] {
    match e.kind {
        Kind::Send | Kind::Nsend => &[(0, TagOf::Own)],
        Kind::SendHeadedBulk | Kind::NsendHeaded => &[(0, TagOf::Large), (1, TagOf::Data)],
        _ => &[],
    }
}

/// How a message's tag follows from its send event's `a`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagOf {
    /// `a` itself.
    Own,
    /// `a | TAG_LARGE` (a header).
    Large,
    /// `TAG_DATA` (a body).
    Data,
}

impl TagOf {
    /// The tag on the wire for a send whose `a` is `a`.
    pub fn tag(self, a: u64) -> u64 {
        match self {
            TagOf::Own => a,
            TagOf::Large => a | TAG_LARGE,
            TagOf::Data => TAG_DATA,
        }
    }
}

/// Whether `e` is a receive that returned a message.
pub fn is_receive(e: &Event) -> bool {
    matches!(e.kind, Kind::RecvAny | Kind::RecvFrom | Kind::RecvInto) && e.peer.is_some()
}

/// Pairs the sends and receives of `ranks` (each rank's events in the
/// order recorded).
pub fn pair<'a>(ranks: impl IntoIterator<Item = &'a [Event]>) -> Pairing {
    let ranks: Vec<&[Event]> = ranks.into_iter().collect();
    let mut out = Pairing::default();
    // (src, dst, tag) -> indices into out.messages, in order.
    let mut queues: HashMap<(u32, u32, u64), VecDeque<usize>> = HashMap::new();
    for (rank, events) in ranks.iter().enumerate() {
        for (i, e) in events.iter().enumerate() {
            let Some(dest) = e.peer else { continue };
            for &(part, of) in wire_tags(e) {
                let tag = of.tag(e.a);
                queues
                    .entry((rank as u32, dest, tag))
                    .or_default()
                    .push_back(out.messages.len());
                out.messages.push(Message {
                    send: (rank, i),
                    part,
                    tag,
                    dest,
                    recv: None,
                });
            }
        }
    }
    for (rank, events) in ranks.iter().enumerate() {
        for (i, e) in events.iter().enumerate() {
            if !is_receive(e) {
                continue;
            }
            let src = e.peer.expect("a receive has a source");
            match queues
                .get_mut(&(src, rank as u32, e.a))
                .and_then(VecDeque::pop_front)
            {
                Some(m) => out.messages[m].recv = Some((rank, i)),
                None => out.unmatched_receives.push((rank, i)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, peer: u32, a: u64, b: u64, t: u64) -> Event {
        Event {
            kind,
            peer: Some(peer),
            a,
            b,
            begin: t,
            end: t + 1,
        }
    }

    #[test]
    fn messages_pair_in_order_per_source_and_tag_and_headed_sends_are_two() {
        let r0 = [
            ev(Kind::Send, 1, 3, 10, 0),
            ev(Kind::SendHeadedBulk, 1, 1, 100, 5),
            ev(Kind::Send, 1, 3, 11, 9),
        ];
        let r1 = [
            ev(Kind::RecvAny, 0, 3, 10, 2),
            ev(Kind::RecvAny, 0, 1 | TAG_LARGE, 20, 6),
            ev(Kind::RecvFrom, 0, TAG_DATA, 80, 7),
            ev(Kind::RecvAny, 0, 3, 11, 10),
            ev(Kind::RecvAny, 0, 7, 1, 11),
        ];
        let p = pair([&r0[..], &r1[..]]);
        let got: Vec<_> = p
            .messages
            .iter()
            .map(|m| (m.send, m.part, m.recv))
            .collect();
        assert_eq!(
            got,
            vec![
                ((0, 0), 0, Some((1, 0))),
                ((0, 1), 0, Some((1, 1))),
                ((0, 1), 1, Some((1, 2))),
                ((0, 2), 0, Some((1, 3))),
            ]
        );
        assert_eq!(p.unmatched_receives, vec![(1, 4)]);
        assert_eq!(p.by_receive()[&(1, 2)], 2);
    }
}
