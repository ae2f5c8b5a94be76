//! A rank's posted-receive or unexpected-message queue, with MPI's
//! first-match rule and an index for long queues.
//!
//! The rule (the reference's): a search for (source, tag) takes the
//! *earliest* entry, in arrival order, whose source and tag each equal the
//! searched ones or are a wildcard on either side. A linear scan does that,
//! but an all-to-all of n ranks keeps n - 1 entries per queue and makes the
//! whole run O(n³). So:
//!
//! 1. A queue of one entry keeps it inline (`lone`); from two on,
//!    entries sit in arrival order in `slots`; a taken entry leaves a hole
//!    (`None`), and holes at the front are dropped, each shifting `base`, the
//!    arrival number of `slots[0]`. Arrival numbers are never reused.
//! 2. While the queue is short (under [`INDEX_FROM`] entries, where a scan of contiguous
//!    entries costs less than the index's scattered look-ups) searches scan
//!    it; from that length on, an index maps each exact (source, tag) an
//!    entry carries (wildcards included, as values) to the arrival numbers of
//!    the entries carrying it, in order.
//! 3. A search without wildcards can only be matched by entries keyed
//!    (source, tag), (any, tag), (source, any) or (any, any): the first live
//!    arrival number at the front of those four lists is the earliest match.
//!    Numbers of entries already taken (by a scan) are skipped and dropped
//!    when they reach a front.
//! 4. A search with a wildcard scans the slots in order, as the reference
//!    does (wildcard receives are rare in schedules; in the reference every
//!    search is a scan).
//! 5. When holes outnumber entries the slots are compacted and the index
//!    rebuilt (amortised over the holes); an empty queue drops its index.
//!    Memory is thus linear in the queue's length.

use std::collections::VecDeque;

use rustc_hash::FxHashMap;

use crate::schedule::{OpId, ANY_SOURCE, ANY_TAG};

/// Queue length from which searches use the index.
const INDEX_FROM: usize = 64;

/// A posted receive or an unexpected message: its source, tag and operation
/// (the receive, or the send whose message it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueEntry {
    pub(crate) src: u32,
    pub(crate) tag: u32,
    pub(crate) op: OpId,
}

impl QueueEntry {
    #[inline]
    fn matches(&self, src: u32, tag: u32) -> bool {
        (src == ANY_SOURCE || self.src == ANY_SOURCE || self.src == src)
            && (tag == ANY_TAG || self.tag == ANY_TAG || self.tag == tag)
    }
}

#[inline]
fn key(src: u32, tag: u32) -> u64 {
    (u64::from(src) << 32) | u64::from(tag)
}

#[derive(Debug, Default)]
pub(crate) struct MatchQueue {
    /// The entry of a queue holding just one, kept here so that the many
    /// queues that never hold more (a tree's receives) need no allocation
    /// and no second cache line; while it is set, `many` is empty.
    lone: Option<QueueEntry>,
    /// The entries of a queue that held more than one at a time (boxed:
    /// most ranks never need it, and a queue stays 24 bytes).
    many: Option<Box<Many>>,
}

/// A queue's entries beyond the lone one.
#[derive(Debug, Default)]
struct Many {
    slots: VecDeque<Option<QueueEntry>>,
    /// Arrival number of `slots[0]`.
    base: u32,
    /// Entries not taken.
    live: u32,
    /// Per (source, tag) key, arrival numbers in order (step 2).
    index: Option<Box<Index>>,
}

#[derive(Debug, Default)]
struct Index {
    lists: FxHashMap<u64, VecDeque<u32>>,
    /// Which wildcard keys have a list, bit `i` for the `i + 1`th key of
    /// [`MatchQueue::take`]'s four, so searches skip absent ones.
    wild: u8,
}

impl Index {
    fn add(&mut self, e: &QueueEntry, at: u32) {
        self.wild |= match (e.src == ANY_SOURCE, e.tag == ANY_TAG) {
            (false, false) => 0,
            (true, false) => 1,
            (false, true) => 2,
            (true, true) => 4,
        };
        self.lists
            .entry(key(e.src, e.tag))
            .or_default()
            .push_back(at);
    }
}

impl MatchQueue {
    /// Appends `e` (it arrived last).
    pub(crate) fn push(&mut self, e: QueueEntry) {
        let empty = self.many.as_ref().is_none_or(|m| m.slots.is_empty());
        if empty && self.lone.is_none() {
            self.lone = Some(e);
            return;
        }
        let m = self.many.get_or_insert_with(Box::default);
        if let Some(first) = self.lone.take() {
            m.push_slot(first);
        }
        m.push_slot(e);
    }

    /// Removes and returns the earliest entry matching (src, tag).
    pub(crate) fn take(&mut self, src: u32, tag: u32) -> Option<QueueEntry> {
        if let Some(first) = self.lone {
            let found = first.matches(src, tag);
            if found {
                self.lone = None;
            }
            return found.then_some(first);
        }
        self.many.as_mut()?.take(src, tag)
    }

    /// The entries not taken, in arrival order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &QueueEntry> {
        let many = self.many.iter().flat_map(|m| m.slots.iter().flatten());
        self.lone.iter().chain(many)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.many.as_ref().map_or(0, |m| m.live as usize) + usize::from(self.lone.is_some())
    }

    #[cfg(test)]
    fn slots(&self) -> usize {
        self.many.as_ref().map_or(0, |m| m.slots.len())
    }

    #[cfg(test)]
    fn indexed(&self) -> bool {
        self.many.as_ref().is_some_and(|m| m.index.is_some())
    }
}

impl Many {
    fn push_slot(&mut self, e: QueueEntry) {
        let at = self.base + self.slots.len() as u32;
        self.slots.push_back(Some(e));
        self.live += 1;
        if let Some(ix) = &mut self.index {
            ix.add(&e, at);
        }
        if self.slots.len() > (2 * self.live as usize).max(INDEX_FROM) {
            self.rebuild();
        } else if self.index.is_none() && self.live as usize >= INDEX_FROM {
            self.build_index();
        }
    }

    /// Removes and returns the earliest entry matching (src, tag).
    fn take(&mut self, src: u32, tag: u32) -> Option<QueueEntry> {
        if self.live == 0 {
            return None;
        }
        let at = match &mut self.index {
            Some(ix) if src != ANY_SOURCE && tag != ANY_TAG => {
                let (slots, base) = (&self.slots, self.base);
                let mut best: Option<(u32, u64)> = None;
                let keys = [
                    key(src, tag),
                    key(ANY_SOURCE, tag),
                    key(src, ANY_TAG),
                    key(ANY_SOURCE, ANY_TAG),
                ];
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 && ix.wild & (1 << (i - 1)) == 0 {
                        continue;
                    }
                    let Some(list) = ix.lists.get_mut(&k) else {
                        continue;
                    };
                    while let Some(&front) = list.front() {
                        let taken = front < base || slots[(front - base) as usize].is_none();
                        if !taken {
                            break;
                        }
                        list.pop_front();
                    }
                    if let Some(&front) = list.front() {
                        if best.is_none_or(|(b, _)| front < b) {
                            best = Some((front, k));
                        }
                    }
                }
                let (at, k) = best?;
                ix.lists.get_mut(&k).map(VecDeque::pop_front);
                at
            }
            _ => {
                let i = self
                    .slots
                    .iter()
                    .position(|s| s.is_some_and(|e| e.matches(src, tag)))?;
                self.base + i as u32
            }
        };
        Some(self.take_at(at))
    }

    fn take_at(&mut self, at: u32) -> QueueEntry {
        let e = self.slots[(at - self.base) as usize]
            .take()
            .expect("a live entry is taken");
        self.live -= 1;
        if self.live == 0 {
            self.base += self.slots.len() as u32;
            self.slots.clear();
            self.index = None;
        } else {
            while self.slots.front().is_some_and(Option::is_none) {
                self.slots.pop_front();
                self.base += 1;
            }
            if self.slots.len() > (2 * self.live as usize).max(INDEX_FROM) {
                self.rebuild();
            }
        }
        e
    }

    /// Step 5: drops the holes; keeps an index only if still long.
    fn rebuild(&mut self) {
        let next = self.base + self.slots.len() as u32;
        self.slots.retain(Option::is_some);
        self.base = next - self.slots.len() as u32;
        self.index = None;
        if self.live as usize >= INDEX_FROM {
            self.build_index();
        }
    }

    fn build_index(&mut self) {
        let mut ix = Index::default();
        for (i, s) in self.slots.iter().enumerate() {
            if let Some(e) = s {
                ix.add(e, self.base + i as u32);
            }
        }
        self.index = Some(Box::new(ix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule stated plainly: scan in order, take the first match.
    #[derive(Default)]
    struct Reference(Vec<QueueEntry>);

    impl Reference {
        fn take(&mut self, src: u32, tag: u32) -> Option<QueueEntry> {
            let i = self.0.iter().position(|e| e.matches(src, tag))?;
            Some(self.0.remove(i))
        }
    }

    fn lcg(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 33
    }

    /// A source or tag among `n` values, a wildcard one time in `wild`.
    fn pick(x: &mut u64, n: u64, wild: u64) -> u32 {
        if wild > 0 && lcg(x) % wild == 0 {
            u32::MAX
        } else {
            (lcg(x) % n) as u32
        }
    }

    /// Random pushes and searches, with and without wildcards on either
    /// side, long and short queues: every search takes what the plain scan
    /// takes.
    #[test]
    fn takes_what_a_scan_takes() {
        for (seed, spread, wild, push_pct) in [
            (1u64, 4u64, 0u64, 50u64),
            (2, 50, 0, 60),
            (3, 8, 7, 55),
            (4, 300, 20, 70),
            (5, 3, 3, 50),
            (6, 40, 0, 90),
        ] {
            let mut x = seed;
            let (mut q, mut r) = (MatchQueue::default(), Reference::default());
            for op in 0..20_000u32 {
                if lcg(&mut x) % 100 < push_pct {
                    let e = QueueEntry {
                        src: pick(&mut x, spread, wild),
                        tag: pick(&mut x, 3, wild),
                        op,
                    };
                    q.push(e);
                    r.0.push(e);
                } else {
                    let (src, tag) = (pick(&mut x, spread, wild), pick(&mut x, 3, wild));
                    assert_eq!(q.take(src, tag), r.take(src, tag), "seed {seed}, op {op}");
                }
                assert_eq!(q.len(), r.0.len());
                // Holes never outnumber entries by much (memory is linear).
                assert!(q.slots() <= (2 * q.len()).max(INDEX_FROM));
            }
            assert!(q.iter().eq(r.0.iter()));
        }
    }

    #[test]
    fn a_long_queue_is_indexed_and_an_emptied_one_is_not() {
        let mut q = MatchQueue::default();
        for i in 0..100 {
            q.push(QueueEntry {
                src: i,
                tag: 0,
                op: i,
            });
        }
        assert!(q.indexed());
        assert_eq!(q.take(57, 0).map(|e| e.op), Some(57));
        assert_eq!(q.take(57, 0), None);
        assert_eq!(q.take(ANY_SOURCE, 0).map(|e| e.op), Some(0));
        for i in 1..100 {
            if i != 57 {
                assert_eq!(q.take(i, ANY_TAG).map(|e| e.op), Some(i));
            }
        }
        assert_eq!(q.len(), 0);
        assert!(!q.indexed() && q.slots() == 0);
    }
}
