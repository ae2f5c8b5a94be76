//! The discrete-event engine: LogGOPS with LogGOPSim's rules.
//!
//! Each rank has `ncpus` CPUs and `nnics` NICs; each CPU has a time `nexto`
//! at which it is next free (it pays `o` and `O`), each NIC the times
//! `nextgs`/`nextgr` at which it may next send/receive (it pays `g` and `G`).
//! Events are kept in one heap ordered by (time, issue number), the
//! issue number growing by one for every operation issued and every message
//! sent, so that events at the same time run in the order they were created.
//!
//! The rules, per event (t is the event's time, s the size, `s-1` computed
//! modulo 2^64 as the reference does):
//! 1. **calc** on CPU c: if `nexto[c] > t`, retry at `nexto[c]`. Otherwise
//!    `nexto[c] = t + s`, and the operation counts as started *and* done now;
//!    its dependents are issued at their own CPU's `nexto`, so dependents on
//!    the same CPU wait for the end of the computation.
//! 2. **send** on CPU c, NIC n: if `max(nexto[c], nextgs[n]) > t`, retry then.
//!    Otherwise it starts: `nexto[c] = t + o + (s-1)·O`, `nextgs[n] = t + g +
//!    (s-1)·G`, and a message event is created at `t + o + L` at the
//!    receiver (later on a torus: [`crate::torus`]). An eager send
//!    (`s <= S`) is done now; a rendezvous send (`s > S`) is done when a
//!    receive matches it.
//! 3. **recv**: starts at once (it needs no resource) and searches the
//!    rank's unexpected queue in order (indexed: `match_queue`) for a
//!    matching message (source and tag equal, or either side a
//!    wildcard). Found: the receive is done; if
//!    the receive's size is above S, the sender's send is done too, and the
//!    sender's CPU and NIC (the indices the receive names) are moved up to t.
//!    Not found: it is appended to the posted-receive queue.
//! 4. **message** at the receiver, using the CPU and NIC indices of the send:
//!    if `max(nexto[c], nextgr[n]) > t`, retry then. Otherwise
//!    `nexto[c] = t + o + max((s-1)·O, (s-1)·G)` and
//!    `nextgr[n] = t + g + (s-1)·G`; the message then matches the first fitting posted receive (which is done;
//!    a rendezvous send is done and its sender's clocks moved up to t) or is
//!    appended to the unexpected queue.
//! 5. After each event, every rank that had an operation start or finish
//!    issues its newly executable operations: sorted by kind (send, recv,
//!    calc; ties as [`crate::tie_order`] explains), calc and recv at
//!    `nexto[c]`, send at `max(nexto[c], nextgs[n])`.
//!
//! Retries are not queued one by one; [`crate::waiting`] explains how they
//! are grouped without changing the order.
//!
//! A rank's finish time is the largest `nexto` of its CPUs. The run ends
//! when the heap is empty; operations left undone or queues left non-empty
//! are a deadlock, reported with what is blocked.

use std::time::Instant;

use crate::event_queue::{Event, EventKind, EventQueue};
use crate::match_queue::{MatchQueue, QueueEntry};
use crate::params::{per_byte, Params};
use crate::schedule::{DepKind, OpId, OpKind, Schedule};
use crate::tie_order::sort_by_key_like_gnu;
use crate::timeline::{Slice, SliceKind, Timeline};
use crate::torus::Torus;
use crate::waiting::{Signature, Waiting};
use rustc_hash::FxHashMap;

/// One rank's simulated times, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RankTimes {
    /// When its last CPU became free.
    pub finish: u64,
    /// Time in `calc` operations.
    pub compute: u64,
    /// CPU time charged for messages (o and O on send, o and the per-byte
    /// cost on reception).
    pub comm: u64,
    /// The rest of `finish`: idle, waiting for messages or the NIC. With
    /// several CPUs the busy times are summed over them, so this is a floor.
    pub wait: u64,
}

/// An operation that could not complete, for deadlock reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// A posted receive no message matched.
    UnmatchedRecv(OpId),
    /// A message (from this send) that arrived and no receive took.
    UnreceivedMessage(OpId),
    /// An operation that was never done (waiting for a dependency, or a
    /// rendezvous send never matched).
    NotDone(OpId),
}

/// What remains when a run cannot complete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deadlock {
    /// Per blocked rank, its blocked operations (receives and messages
    /// first, then operations not done, in input order).
    pub ranks: Vec<(u32, Vec<Blocked>)>,
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Per rank times.
    pub ranks: Vec<RankTimes>,
    /// The largest finish time and the first rank that has it.
    pub max: (u64, u32),
    /// Events created: operations issued plus messages sent (the reference
    /// counts the same way).
    pub events: u64,
    /// Wall-clock seconds spent in the event loop.
    pub seconds: f64,
    /// Set when operations were left undone or queues non-empty.
    pub deadlock: Option<Deadlock>,
}

const NOT_DONE: u8 = 0;
const DONE: u8 = 1;
/// A receive in its rank's posted queue (not done yet).
const POSTED: u8 = 2;

struct Engine<'a> {
    s: &'a Schedule,
    p: Params,
    /// The topology, when messages travel on a torus.
    torus: Option<Torus>,
    ncpus: usize,
    nnics: usize,
    heap: EventQueue,
    /// Events whose resources were busy (the retries of rules 1, 2 and 4).
    waiting: Waiting,
    seq: u64,
    /// Unsatisfied dependencies per operation (empty for a chain, whose
    /// operations have one prerequisite at most).
    pending: Vec<u32>,
    done: Vec<u8>,
    /// Per rank, `stride` clocks side by side, so that an event touches one
    /// cache line: `nexto` of each CPU, `nextgs` then `nextgr` of each NIC,
    /// then the time spent computing and communicating.
    clock: Vec<u64>,
    stride: usize,
    posted: Vec<MatchQueue>,
    unexpected: Vec<MatchQueue>,
    /// Operations that became executable during the current event, in the
    /// order they did (all belong to ranks in `touched`).
    ready: Vec<OpId>,
    /// One rank's share of `ready`, being issued.
    batch: Vec<OpId>,
    /// Ranks to issue from after the current event (at most three).
    touched: Vec<u32>,
    /// What happened, when the caller asked for a timeline.
    rec: Option<Box<Recorder>>,
}

/// The timeline being recorded, and the starts of what may turn into
/// waits.
#[derive(Debug, Default)]
struct Recorder {
    timeline: Timeline,
    /// Posted receives: when they were posted.
    posted: FxHashMap<OpId, u64>,
    /// Rendezvous sends: when they started.
    rendezvous: FxHashMap<OpId, u64>,
}

/// Simulates `s` under `p`.
pub fn simulate(s: &Schedule, p: &Params) -> Report {
    simulate_on(s, p, None)
}

/// Simulates `s` under `p`, with messages routed on `torus` if given (see
/// [`crate::torus`]: their latency grows by the hops and the waits for
/// shared links).
pub fn simulate_on(s: &Schedule, p: &Params, torus: Option<Torus>) -> Report {
    run(s, p, torus, false).0
}

/// Simulates like [`simulate_on`] and records the run's [`Timeline`] (for
/// `--perfetto`; memory grows by about 40 bytes per operation).
pub fn simulate_traced(s: &Schedule, p: &Params, torus: Option<Torus>) -> (Report, Timeline) {
    let (report, timeline) = run(s, p, torus, true);
    (report, timeline.unwrap_or_default())
}

fn run(s: &Schedule, p: &Params, torus: Option<Torus>, record: bool) -> (Report, Option<Timeline>) {
    let n = s.num_ranks();
    let (ncpus, nnics) = (s.ncpus(), s.nnics());
    let mut e = Engine {
        s,
        p: *p,
        torus,
        ncpus,
        nnics,
        heap: EventQueue::with_capacity(n * 2),
        waiting: Waiting::default(),
        seq: 0,
        pending: s
            .rows()
            .map_or_else(Vec::new, |rows| rows.dep_count.clone()),
        done: vec![NOT_DONE; s.num_ops()],
        clock: vec![0; n * (ncpus + 2 * nnics + 2)],
        stride: ncpus + 2 * nnics + 2,
        posted: (0..n).map(|_| MatchQueue::default()).collect(),
        unexpected: (0..n).map(|_| MatchQueue::default()).collect(),
        ready: Vec::new(),
        batch: Vec::new(),
        touched: Vec::with_capacity(4),
        rec: record.then(Box::default),
    };
    let start = Instant::now();
    for r in 0..n {
        for id in s.rank_ops(r) {
            if s.initially_ready(id) {
                e.ready.push(id);
            }
        }
        e.issue(r as u32);
        e.ready.clear();
    }
    while let Some(ev) = e.heap.pop() {
        if let Some(next) = e.heap.peek() {
            if next.kind != EventKind::Waiting {
                prefetch(s.op(next.op));
                prefetch(&e.done[next.op as usize]);
                if let Some(rows) = s.rows() {
                    rows.prefetch(next.op);
                }
            }
        }
        match ev.kind {
            EventKind::Waiting => e.run_waiting(ev),
            EventKind::Op | EventKind::Msg => {
                let free = e.free_at(&ev);
                if free > ev.time {
                    let sig = e.signature(&ev);
                    if let Some(key) = e.waiting.park(ev, sig, free) {
                        e.heap.push(key);
                    }
                    continue;
                }
                e.step(ev);
            }
        }
        e.touched.sort_unstable();
        e.touched.dedup();
        for i in 0..e.touched.len() {
            let r = e.touched[i];
            e.issue(r);
        }
        e.touched.clear();
        e.ready.clear();
    }
    let seconds = start.elapsed().as_secs_f64();
    let timeline = e.rec.take().map(|r| r.timeline);
    (e.finish(seconds), timeline)
}

/// Asks the CPU to bring `x`'s cache line in: the next event's operation is
/// known one event ahead, and on a large schedule it is rarely cached.
#[inline]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; any address is allowed, and
    // this one is a valid reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

impl Engine<'_> {
    /// Index in `clock` of `nexto` of CPU `cpu` of `rank`.
    #[inline]
    fn cpu(&self, rank: u32, cpu: u8) -> usize {
        rank as usize * self.stride + cpu as usize
    }

    /// Index of `nextgs` (sending) of NIC `nic` of `rank`.
    #[inline]
    fn nics(&self, rank: u32, nic: u8) -> usize {
        rank as usize * self.stride + self.ncpus + nic as usize
    }

    /// Index of `nextgr` (receiving) of NIC `nic` of `rank`.
    #[inline]
    fn nicr(&self, rank: u32, nic: u8) -> usize {
        rank as usize * self.stride + self.ncpus + self.nnics + nic as usize
    }

    /// Index of `rank`'s computing time; its communication time follows.
    #[inline]
    fn busy(&self, rank: u32) -> usize {
        (rank as usize + 1) * self.stride - 2
    }

    /// Records a slice, when recording.
    #[inline]
    fn slice(&mut self, rank: u32, cpu: u8, kind: SliceKind, begin: u64, end: u64, op: OpId) {
        if let Some(rec) = &mut self.rec {
            rec.timeline.slices.push(Slice {
                rank,
                cpu,
                kind,
                begin,
                end,
                op,
            });
        }
    }

    /// Records the end of a wait that began when `op` was posted (a
    /// receive) or started (a rendezvous send), when recording.
    #[inline]
    fn wait_ends(&mut self, op: OpId, kind: SliceKind, end: u64) {
        if let Some(rec) = &mut self.rec {
            let began = match kind {
                SliceKind::Rendezvous => rec.rendezvous.remove(&op),
                _ => rec.posted.remove(&op),
            };
            if let Some(begin) = began {
                let rank = self.s.op(op).rank;
                self.slice(rank, 0, kind, begin, end, op);
            }
        }
    }

    /// Issues rank `r`'s newly executable operations (rule 5).
    fn issue(&mut self, r: u32) {
        let s = self.s;
        let mut ready = std::mem::take(&mut self.batch);
        ready.clear();
        ready.extend(self.ready.iter().filter(|&&id| s.op(id).rank == r));
        sort_by_key_like_gnu(&mut ready, |&id| s.op(id).kind);
        for &id in &ready {
            let op = s.op(id);
            let c = self.clock[self.cpu(r, op.cpu)];
            let time = match op.kind {
                OpKind::Send => c.max(self.clock[self.nics(r, op.nic)]),
                OpKind::Recv | OpKind::Calc => c,
            };
            self.heap.push(Event {
                time,
                seq: self.seq,
                op: id,
                kind: EventKind::Op,
            });
            self.seq += 1;
        }
        self.batch = ready;
    }

    fn started(&mut self, id: OpId) {
        let s = self.s;
        match s.rows() {
            Some(rows) => {
                for &d in rows.start_dependents(id) {
                    self.release(d);
                }
            }
            None => {
                if s.op(id).next == Some(DepKind::IRequires) {
                    self.ready.push(id + 1);
                }
            }
        }
    }

    fn completed(&mut self, id: OpId) {
        self.done[id as usize] = DONE;
        let s = self.s;
        match s.rows() {
            Some(rows) => {
                for &d in rows.done_dependents(id) {
                    self.release(d);
                }
            }
            None => {
                if s.op(id).next == Some(DepKind::Requires) {
                    self.ready.push(id + 1);
                }
            }
        }
    }

    #[inline]
    fn release(&mut self, d: OpId) {
        let c = &mut self.pending[d as usize];
        *c -= 1;
        if *c == 0 {
            self.ready.push(d);
        }
    }

    /// When the resources `ev` needs are next free (rules 1, 2, 4: the CPU
    /// for a calc, CPU and sending NIC for a send, the receiver's CPU and
    /// receiving NIC, at the send's indices, for a message; a receive needs
    /// none).
    #[inline]
    fn free_at(&self, ev: &Event) -> u64 {
        let op = self.s.op(ev.op);
        if ev.kind == EventKind::Msg {
            let h = op.peer;
            return self.clock[self.cpu(h, op.cpu)].max(self.clock[self.nicr(h, op.nic)]);
        }
        let r = op.rank;
        match op.kind {
            OpKind::Calc => self.clock[self.cpu(r, op.cpu)],
            OpKind::Send => self.clock[self.cpu(r, op.cpu)].max(self.clock[self.nics(r, op.nic)]),
            OpKind::Recv => 0,
        }
    }

    /// The resources `ev` waits for, as a [`Signature`]: events with equal
    /// signatures always see the same `free_at`.
    #[inline]
    fn signature(&self, ev: &Event) -> Signature {
        let op = self.s.op(ev.op);
        let (rank, class, nic) = match (ev.kind, op.kind) {
            (EventKind::Msg, _) => (op.peer, 2, op.nic),
            (_, OpKind::Send) => (op.rank, 1, op.nic),
            _ => (op.rank, 0, 0),
        };
        (u64::from(rank) << 24) | (class << 16) | (u64::from(op.cpu) << 8) | u64::from(nic)
    }

    /// Whether the resources that keep `ev` waiting at `t` stay as they are
    /// until `t` has passed, whatever else runs at `t`.
    ///
    /// An event changes a CPU or NIC clock only when it runs, which needs
    /// that clock at or before `t` (a completed rendezvous only raises
    /// clocks to `t`). So a busy clock stays put, and so does a free one
    /// that no other kind of event can use while the busy one blocks it:
    /// a computation needs one clock; a send's or message's NIC clock is
    /// used only by events that also need a CPU of the same rank, which,
    /// with one CPU per rank, is the busy one.
    #[inline]
    fn stays_busy(&self, ev: &Event, t: u64) -> bool {
        let op = self.s.op(ev.op);
        let (rank, nic_free_at) = match (ev.kind, op.kind) {
            (EventKind::Msg, _) => (op.peer, self.clock[self.nicr(op.peer, op.nic)]),
            (_, OpKind::Send) => (op.rank, self.clock[self.nics(op.rank, op.nic)]),
            _ => return true,
        };
        let cpu_busy = self.clock[self.cpu(rank, op.cpu)] > t;
        cpu_busy && (nic_free_at > t || self.ncpus == 1)
    }

    /// A waiting group is due: its first member runs if its resources are
    /// free; otherwise the members due before anything else move on.
    fn run_waiting(&mut self, key: Event) {
        let g = key.op;
        let (mut head, _) = self.waiting.head(g);
        head.time = key.time;
        let free = self.free_at(&head);
        if free <= key.time {
            if let Some(rest) = self.waiting.take_head(g) {
                self.heap.push(rest);
            }
            self.step(head);
        } else {
            let next = if self.stays_busy(&head, key.time) {
                None
            } else {
                self.heap.peek().copied()
            };
            for k in self
                .waiting
                .defer(g, free, next.as_ref())
                .into_iter()
                .flatten()
            {
                self.heap.push(k);
            }
        }
    }

    /// The rendezvous sender `send` is done at `t`: its CPU `cpu` and NIC
    /// `nic` cannot be free earlier than that.
    fn rendezvous_done(&mut self, send: OpId, cpu: u8, nic: u8, t: u64) {
        self.wait_ends(send, SliceKind::Rendezvous, t);
        let src = self.s.op(send).rank;
        self.completed(send);
        self.touched.push(src);
        let c = self.cpu(src, cpu);
        let n = self.nics(src, nic);
        self.clock[c] = self.clock[c].max(t);
        self.clock[n] = self.clock[n].max(t);
    }

    fn step(&mut self, ev: Event) {
        let s = self.s;
        let p = self.p;
        let t = ev.time;
        let op = *s.op(ev.op);
        let bytes_less_one = op.size.wrapping_sub(1);
        if ev.kind == EventKind::Msg {
            // Rule 4: the message of send `op` arrives at `op.peer`.
            let h = op.peer;
            let c = self.cpu(h, op.cpu);
            let n = self.nicr(h, op.nic);
            let charge = p.o.wrapping_add(
                per_byte(bytes_less_one, p.big_o_ps).max(per_byte(bytes_less_one, p.big_g_ps)),
            );
            self.clock[c] = t.wrapping_add(charge);
            self.clock[n] = t
                .wrapping_add(p.g)
                .wrapping_add(per_byte(bytes_less_one, p.big_g_ps));
            let b = self.busy(h) + 1;
            self.clock[b] = self.clock[b].wrapping_add(charge);
            self.slice(h, op.cpu, SliceKind::Recv, t, t.wrapping_add(charge), ev.op);
            match self.posted[h as usize].take(op.rank, op.tag) {
                Some(recv) => {
                    self.wait_ends(recv.op, SliceKind::Wait, t);
                    if op.size > p.s {
                        self.rendezvous_done(ev.op, op.cpu, op.nic, t);
                    }
                    self.completed(recv.op);
                    self.touched.push(h);
                }
                None => self.unexpected[h as usize].push(QueueEntry {
                    src: op.rank,
                    tag: op.tag,
                    op: ev.op,
                }),
            }
            return;
        }
        let r = op.rank;
        match op.kind {
            OpKind::Calc => {
                let c = self.cpu(r, op.cpu);
                self.clock[c] = t.wrapping_add(op.size);
                let b = self.busy(r);
                self.clock[b] = self.clock[b].wrapping_add(op.size);
                self.slice(
                    r,
                    op.cpu,
                    SliceKind::Calc,
                    t,
                    t.wrapping_add(op.size),
                    ev.op,
                );
                self.started(ev.op);
                self.completed(ev.op);
                self.touched.push(r);
            }
            OpKind::Send => {
                let c = self.cpu(r, op.cpu);
                let n = self.nics(r, op.nic);
                self.started(ev.op);
                self.touched.push(r);
                let charge = p.o.wrapping_add(per_byte(bytes_less_one, p.big_o_ps));
                self.clock[c] = t.wrapping_add(charge);
                self.clock[n] = t
                    .wrapping_add(p.g)
                    .wrapping_add(per_byte(bytes_less_one, p.big_g_ps));
                let b = self.busy(r) + 1;
                self.clock[b] = self.clock[b].wrapping_add(charge);
                self.slice(r, op.cpu, SliceKind::Send, t, t.wrapping_add(charge), ev.op);
                if op.size > p.s {
                    if let Some(rec) = &mut self.rec {
                        rec.rendezvous.insert(ev.op, t);
                    }
                }
                let inject = t.wrapping_add(p.o);
                let mut arrive = inject.wrapping_add(p.l);
                if let Some(torus) = &mut self.torus {
                    let route = torus.route(r, op.peer, inject, op.size, p.big_g_ps);
                    arrive = arrive.saturating_add(route);
                }
                self.heap.push(Event {
                    time: arrive,
                    seq: self.seq,
                    op: ev.op,
                    kind: EventKind::Msg,
                });
                self.seq += 1;
                if op.size <= p.s {
                    self.completed(ev.op);
                }
            }
            OpKind::Recv => {
                self.started(ev.op);
                self.touched.push(r);
                match self.unexpected[r as usize].take(op.peer, op.tag) {
                    Some(msg) => {
                        if op.size > p.s {
                            self.rendezvous_done(msg.op, op.cpu, op.nic, t);
                        }
                        self.completed(ev.op);
                    }
                    None => {
                        if let Some(rec) = &mut self.rec {
                            rec.posted.insert(ev.op, t);
                        }
                        self.done[ev.op as usize] = POSTED;
                        self.posted[r as usize].push(QueueEntry {
                            src: op.peer,
                            tag: op.tag,
                            op: ev.op,
                        });
                    }
                }
            }
        }
    }

    fn finish(self, seconds: f64) -> Report {
        let s = self.s;
        let mut times = Vec::with_capacity(s.num_ranks());
        let mut max = (0u64, 0u32);
        for (r, clocks) in self.clock.chunks_exact(self.stride).enumerate() {
            let finish = clocks[..self.ncpus].iter().copied().max().unwrap_or(0);
            let (compute, comm) = (clocks[self.stride - 2], clocks[self.stride - 1]);
            times.push(RankTimes {
                finish,
                compute,
                comm,
                wait: finish.saturating_sub(compute.saturating_add(comm)),
            });
            if finish > max.0 {
                max = (finish, r as u32);
            }
        }
        let mut blocked = Vec::new();
        for r in 0..s.num_ranks() {
            let mut list: Vec<Blocked> = self.posted[r]
                .iter()
                .map(|e| Blocked::UnmatchedRecv(e.op))
                .collect();
            list.extend(
                self.unexpected[r]
                    .iter()
                    .map(|e| Blocked::UnreceivedMessage(e.op)),
            );
            list.extend(
                s.rank_ops(r)
                    .filter(|&id| self.done[id as usize] == NOT_DONE)
                    .map(Blocked::NotDone),
            );
            if !list.is_empty() {
                blocked.push((r as u32, list));
            }
        }
        Report {
            ranks: times,
            max,
            events: self.seq,
            seconds,
            deadlock: (!blocked.is_empty()).then_some(Deadlock { ranks: blocked }),
        }
    }
}
