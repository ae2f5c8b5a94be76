//! Events whose CPU or NIC was busy, kept in groups so that they are not
//! retried one by one.
//!
//! The reference puts an event that finds its resources busy back into the
//! queue at the time they become free, with its old sequence number. When k
//! operations of a rank wait for one CPU (an all-to-all issues all its sends
//! at once), every completion makes the k-1 others fail and be re-queued:
//! O(k²) queue operations, minutes for 1024 ranks. A failed attempt changes
//! nothing, though, so the same order can be had more cheaply:
//!
//! 1. Events that wait for the same resources — a *signature*: rank, kind
//!    (calc, send, message) and CPU/NIC indices — see the same free time.
//!    A failed event joins the open group of its signature if that group
//!    waits for the same time and ends with a smaller sequence number;
//!    otherwise it starts a new group. Members are in sequence order.
//! 2. The queue holds one entry per group, keyed by (time, sequence number
//!    of its first member): exactly where the first member would be.
//! 3. When the entry is due and the first member's resources are free, that
//!    member runs, and the group goes back in the queue keyed by the next
//!    member, at the same time, as that member would have been.
//! 4. When they are busy, every member that the reference would try before
//!    any other queued event — those before the queue's next key — fails the
//!    same way, as nothing changes in between; they move together to the
//!    free time (the whole group when nothing else is queued at this time).
//!    The others keep their place — unless the engine knows that nothing
//!    running at this time can change the clocks the group waits for (a
//!    busy clock stays busy; see `Engine::stays_busy`): then every member
//!    would fail the same way whenever it is tried, and the whole group
//!    moves. Without that, groups of an all-to-all, whose members
//!    interleave with other ranks' in sequence order, would split into
//!    single events, each retried at every free time: O(k²) again.
//!
//! The engine then sees the same events at the same times in the same order
//! as with one retry per event; only failed attempts are skipped.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::event_queue::{Event, EventKind};

/// Identifies the resources an event waits for.
pub(crate) type Signature = u64;

#[derive(Debug, Default)]
struct Group {
    time: u64,
    sig: Signature,
    members: VecDeque<Event>,
    live: bool,
}

/// The waiting groups; group ids are indices, reused once a group empties.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    groups: Vec<Group>,
    spare: Vec<u32>,
    /// The group a newly failed event of a signature may join.
    open: FxHashMap<Signature, u32>,
}

impl Waiting {
    fn new_group(&mut self, sig: Signature, time: u64) -> u32 {
        let g = match self.spare.pop() {
            Some(g) => g,
            None => {
                self.groups.push(Group::default());
                (self.groups.len() - 1) as u32
            }
        };
        let grp = &mut self.groups[g as usize];
        grp.time = time;
        grp.sig = sig;
        grp.live = true;
        debug_assert!(grp.members.is_empty());
        g
    }

    fn key(&self, g: u32) -> Event {
        let grp = &self.groups[g as usize];
        Event {
            time: grp.time,
            seq: grp.members.front().expect("a queued group has members").seq,
            op: g,
            kind: EventKind::Waiting,
        }
    }

    /// Rule 1: `ev` found its resources busy until `at`. Returns the queue
    /// entry of a new group, if one was started.
    pub(crate) fn park(&mut self, ev: Event, sig: Signature, at: u64) -> Option<Event> {
        if let Some(&g) = self.open.get(&sig) {
            let grp = &mut self.groups[g as usize];
            let fits = grp.live
                && grp.sig == sig
                && grp.time == at
                && grp.members.back().is_some_and(|last| last.seq < ev.seq);
            if fits {
                grp.members.push_back(ev);
                return None;
            }
        }
        let g = self.new_group(sig, at);
        self.groups[g as usize].members.push_back(ev);
        self.open.insert(sig, g);
        Some(self.key(g))
    }

    /// The first member of group `g` and its signature.
    pub(crate) fn head(&self, g: u32) -> (Event, Signature) {
        let grp = &self.groups[g as usize];
        (
            *grp.members.front().expect("a due group has members"),
            grp.sig,
        )
    }

    /// Rule 3: removes the first member (which runs now); returns the queue
    /// entry for the rest, if any.
    pub(crate) fn take_head(&mut self, g: u32) -> Option<Event> {
        let grp = &mut self.groups[g as usize];
        grp.members.pop_front();
        if grp.members.is_empty() {
            grp.live = false;
            self.spare.push(g);
            None
        } else {
            Some(self.key(g))
        }
    }

    /// Rule 4: group `g`, due at its time, found its resources busy until
    /// `free`; `next` is the queue's next key, or `None` when the whole
    /// group is known to fail alike. Returns the queue entries to
    /// push (one or two).
    pub(crate) fn defer(&mut self, g: u32, free: u64, next: Option<&Event>) -> [Option<Event>; 2] {
        let (time, sig) = {
            let grp = &self.groups[g as usize];
            (grp.time, grp.sig)
        };
        // Members tried before `next` in the reference: all, unless `next` is
        // at this same time, then those with smaller sequence numbers.
        let grp = &self.groups[g as usize];
        let moving = match next {
            Some(n) if n.time == time => grp.members.partition_point(|m| m.seq < n.seq),
            _ => grp.members.len(),
        };
        if moving == grp.members.len() {
            self.groups[g as usize].time = free;
            self.open.insert(sig, g);
            return [Some(self.key(g)), None];
        }
        let moved = self.new_group(sig, free);
        let prefix: Vec<Event> = self.groups[g as usize].members.drain(..moving).collect();
        self.groups[moved as usize].members.extend(prefix);
        self.open.insert(sig, moved);
        [Some(self.key(moved)), Some(self.key(g))]
    }
}
