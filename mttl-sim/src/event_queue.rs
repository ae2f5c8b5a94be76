//! The pending events, earliest first: a 4-ary min-heap on (time, seq).
//!
//! The engine's run time is mostly spent here, and a large schedule keeps
//! one event per rank in the queue from the start, far beyond the caches.
//! Four children per node halve the depth of a binary heap, and the four
//! keys compared at each level sit in one or two cache lines; entries are
//! plain values, so pushing and popping never allocate once the vector has
//! grown to the largest queue length.
//!
//! Beside the heap sits a sorted run: an event not earlier than the run's
//! last one is appended to it instead of entering the heap, and `pop` takes
//! the earlier of the run's front and the heap's top. Schedules start with
//! one or more events per rank, all at time 0 in issue order, which thus
//! cost O(1) each instead of a walk through a heap of a million entries.
//!
//! `seq` is unique per event, so the order is total and does not depend on
//! the layout: the engine pops exactly the order LogGOPSim does.

use std::collections::VecDeque;

/// What an event is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// Operation `op` is tried.
    Op,
    /// The message of send `op` reaches its receiver.
    Msg,
    /// Waiting group `op` (see [`crate::waiting`]) is due; `seq` is its head's.
    Waiting,
}

/// One pending event at `time`; `seq` orders events of equal time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) time: u64,
    pub(crate) seq: u64,
    pub(crate) op: u32,
    pub(crate) kind: EventKind,
}

impl Event {
    #[inline]
    pub(crate) fn before(&self, other: &Event) -> bool {
        (self.time, self.seq) < (other.time, other.seq)
    }
}

const ARITY: usize = 4;

#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: Vec<Event>,
    /// Events in increasing (time, seq) order, all pushed after those before them.
    run: VecDeque<Event>,
}

impl EventQueue {
    pub(crate) fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: Vec::with_capacity(n),
            run: VecDeque::with_capacity(n),
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, ev: Event) {
        if self.run.back().is_none_or(|last| !ev.before(last)) {
            self.run.push_back(ev);
            return;
        }
        self.push_heap(ev);
    }

    /// The next event `pop` would return.
    #[inline]
    pub(crate) fn peek(&self) -> Option<&Event> {
        match (self.run.front(), self.heap.first()) {
            (Some(r), Some(h)) if h.before(r) => Some(h),
            (Some(r), _) => Some(r),
            (None, h) => h,
        }
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        match (self.run.front(), self.heap.first()) {
            (Some(r), Some(h)) if h.before(r) => self.pop_heap(),
            (Some(_), _) => self.run.pop_front(),
            (None, _) => self.pop_heap(),
        }
    }

    #[inline]
    fn push_heap(&mut self, ev: Event) {
        let mut i = self.heap.len();
        self.heap.push(ev);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !ev.before(&self.heap[parent]) {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = ev;
    }

    #[inline]
    fn pop_heap(&mut self) -> Option<Event> {
        let last = self.heap.pop()?;
        if self.heap.is_empty() {
            return Some(last);
        }
        let top = self.heap[0];
        // Sift `last` down from the root, moving the smallest child up.
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let first = i * ARITY + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut best = first;
            for c in first + 1..end {
                if self.heap[c].before(&self.heap[best]) {
                    best = c;
                }
            }
            if !self.heap[best].before(&last) {
                break;
            }
            self.heap[i] = self.heap[best];
            i = best;
        }
        self.heap[i] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_seq_order() {
        let mut q = EventQueue::with_capacity(4);
        let mut x: u64 = 12345;
        let mut all = Vec::new();
        for seq in 0..2000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let ev = Event {
                time: (x >> 40) % 97,
                seq,
                op: seq as u32,
                kind: EventKind::Op,
            };
            all.push(ev);
            q.push(ev);
            // Interleave pops with pushes, as the engine does; times go up
            // and down, so both the run and the heap are used.
            if seq % 5 == 0 {
                let peeked = *q.peek().expect("non-empty");
                let got = q.pop().expect("non-empty");
                assert_eq!(peeked, got);
                all.retain(|e| *e != got);
                assert!(all.iter().all(|e| !e.before(&got)));
            }
        }
        let mut prev: Option<Event> = None;
        while let Some(ev) = q.pop() {
            if let Some(p) = prev {
                assert!(p.before(&ev));
            }
            prev = Some(ev);
        }
    }
}
