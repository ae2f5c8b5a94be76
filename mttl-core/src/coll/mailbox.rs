//! The collective transport of one node: the sequence counter, the
//! mailbox of collective messages that arrived before their reader, and
//! [`Op`], one collective call in progress, which sends and receives them.
//!
//! Invariants:
//!
//! - At most one collective runs per node ([`State::current`]); starting a
//!   second one while it runs stops the job.
//! - Every message is keyed by (sequence, source, step); the algorithms
//!   never send two messages with the same key, and every message sent to a
//!   node is taken by that node within the same collective. So a message
//!   for a sequence this node has finished is a misuse, reported at once.
//! - All buffered messages of one sequence have the same kind (checked when
//!   each arrives), so one check at the start of a collective covers them.
//! - [`Collectives::handle`] runs on the native stack with the context
//!   borrowed: it only files the message and wakes the waiting thread; the
//!   thread takes the message itself.
//!
//! The state lives in this module's thread-local, set up and dropped by
//! the [`Collectives`] service.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::time::Instant;

use mttl_comm::{Rank, Tag};

use crate::context::{self, Context, Service};
use crate::thread::{self, BlockReason, ThreadId};
use crate::trace;
use crate::wire::{self, Fields};

/// The exit code of a job stopped by a collective's misuse or failure.
const FAILURE_CODE: i32 = 1;

/// The length of a `COLL` header: sequence u64, kind u8, step u8 (see
/// [`wire`]).
const COLL_HEADER_LEN: usize = 10;

/// The collective a message belongs to (the `kind` byte of a `COLL`
/// header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Barrier = 1,
    Broadcast = 2,
    Reduce = 3,
    Allreduce = 4,
    Gather = 5,
    Allgather = 6,
    Alltoall = 7,
    /// The trace's vote after a collective (`suspension`): internal.
    TraceVote = 8,
    /// The trace's suspension (clocks, t_i, Z): internal.
    TraceSuspension = 9,
}

/// The first sequence number of the internal collectives (the trace's
/// suspensions), which count apart so that the user's collectives have the
/// same numbers whether or not the trace suspends.
const INTERNAL_BASE: u64 = 1 << 63;

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Barrier,
            2 => Kind::Broadcast,
            3 => Kind::Reduce,
            4 => Kind::Allreduce,
            5 => Kind::Gather,
            6 => Kind::Allgather,
            7 => Kind::Alltoall,
            8 => Kind::TraceVote,
            9 => Kind::TraceSuspension,
            _ => return None,
        })
    }

    /// The name users call it by; also the block reason's description.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Broadcast => "broadcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Gather => "gather",
            Kind::Allgather => "allgather",
            Kind::Alltoall => "alltoall",
            Kind::TraceVote => "trace vote",
            Kind::TraceSuspension => "trace suspension",
        }
    }

    /// Whether it is one of the runtime's own collectives, numbered from
    /// [`INTERNAL_BASE`], not traced and followed by no suspension.
    pub(super) fn internal(self) -> bool {
        matches!(self, Kind::TraceVote | Kind::TraceSuspension)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// (sequence, source, step): names one message of one collective.
type Key = (u64, Rank, u8);

/// A message filed before its reader took it.
struct Parcel {
    kind: Kind,
    body: Vec<u8>,
    /// When it was filed: how long the data waited for its reader is the
    /// adaptive broadcast's measure of a late rank.
    filed: Instant,
}

/// The thread blocked in a collective and the message it waits for: from
/// `key`'s source, or from any source when `any_source`.
#[derive(Debug)]
struct Waiter {
    thread: ThreadId,
    key: Key,
    any_source: bool,
}

impl Waiter {
    fn wants(&self, key: Key) -> bool {
        self.key == key || (self.any_source && self.key.0 == key.0 && self.key.2 == key.2)
    }
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Runs `f` on this node's collective state.
///
/// # Panics
///
/// Panics outside a running mttl program, or when called re-entrantly.
fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|cell| {
        let mut guard = cell.borrow_mut();
        let state = guard.as_mut().expect(
            "the mttl runtime is not running: call mttl from #[mttl::main] and what it invokes",
        );
        f(state)
    })
}

/// The collective state of one node.
#[derive(Default)]
pub(crate) struct State {
    /// The sequence number of the next collective this node starts.
    next_seq: u64,
    /// The internal collectives this node has started.
    internal_started: u64,
    /// The collective running on this node, if any.
    current: Option<(u64, Kind)>,
    mailbox: BTreeMap<Key, Parcel>,
    waiter: Option<Waiter>,
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("coll::State")
            .field("next_seq", &self.next_seq)
            .field("internal_started", &self.internal_started)
            .field("current", &self.current)
            .field("buffered", &self.mailbox.len())
            .field("waiter", &self.waiter)
            .finish()
    }
}

impl State {
    /// The kind and sender of a message already filed for `seq`, if any.
    fn filed_kind(&self, seq: u64) -> Option<(Kind, Rank)> {
        self.mailbox
            .range((seq, 0, 0)..=(seq, Rank::MAX, u8::MAX))
            .next()
            .map(|(&(_, src, _), p)| (p.kind, src))
    }

    /// Files a message, or says why it is a misuse.
    fn accept(
        &mut self,
        src: Rank,
        seq: u64,
        kind: Kind,
        step: u8,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let internal = seq >= INTERNAL_BASE;
        if internal != kind.internal() {
            return Err(format!(
                "rank {src} sent a message for {kind} numbered {seq}, outside its numbering: \
                 are both running the same mttl?"
            ));
        }
        let floor = match self.current {
            Some((s, _)) if (s >= INTERNAL_BASE) == internal => s,
            _ if internal => INTERNAL_BASE + self.internal_started,
            _ => self.next_seq,
        };
        if seq < floor {
            return Err(format!(
                "rank {src} sent a message for {kind} #{seq}, which this node has already \
                 finished: do all nodes call the same collectives, with the same roots, in the \
                 same order?"
            ));
        }
        let theirs = match self.current {
            Some((s, k)) if s == seq => Some((k, None)),
            _ => self.filed_kind(seq).map(|(k, r)| (k, Some(r))),
        };
        if let Some((k, filed_by)) = theirs {
            if k != kind {
                let mine = match filed_by {
                    None => format!("{k} on this node"),
                    Some(r) => format!("{k} on rank {r}"),
                };
                return Err(mismatch(seq, &mine, kind, src));
            }
        }
        let key = (seq, src, step);
        match self.mailbox.entry(key) {
            Entry::Occupied(_) => {
                return Err(format!(
                    "rank {src} sent step {step} of {kind} #{seq} twice: do all nodes agree on \
                     the root?"
                ))
            }
            Entry::Vacant(v) => {
                v.insert(Parcel {
                    kind,
                    body,
                    filed: Instant::now(),
                });
            }
        }
        if self.waiter.as_ref().is_some_and(|w| w.wants(key)) {
            if let Some(w) = self.waiter.take() {
                thread::wake(w.thread);
            }
        }
        Ok(())
    }
}

fn mismatch(seq: u64, one: &str, other: Kind, other_rank: Rank) -> String {
    format!(
        "collective #{seq} is {one} but {other} on rank {other_rank}: every node must call the \
         same collectives in the same order"
    )
}

/// The service of the collectives: owns `COLL` (step 3 of the protocol).
#[derive(Debug)]
pub(crate) struct Collectives;

impl Service for Collectives {
    fn start(_cx: &Context) -> Result<(), String> {
        super::adaptive::start()?;
        STATE.with(|cell| *cell.borrow_mut() = Some(State::default()));
        super::suspension::reset();
        Ok(())
    }

    fn stop() {
        let state = STATE.with(|cell| cell.borrow_mut().take());
        drop(state);
        super::adaptive::stop();
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        kind == wire::COLL || kind == wire::COLL_REPORT
    }

    /// Files the message and wakes the thread waiting for it (a report of
    /// the adaptive broadcast goes to its learner).
    fn handle(cx: &mut Context, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        if kind == wire::COLL_REPORT {
            if let Err(why) = super::adaptive::take_report(src, header, &body) {
                cx.fail(&why, FAILURE_CODE);
            }
            return;
        }
        let mut f = Fields(header);
        let seq = f.u64();
        let kind = f.u8();
        let step = f.u8();
        let Some(kind) = Kind::from_u8(kind) else {
            cx.fail(
                &format!("malformed message from rank {src}: unknown collective kind {kind}"),
                FAILURE_CODE,
            );
        };
        if let Err(why) = with_state(|st| st.accept(src, seq, kind, step, body.into_owned())) {
            cx.fail(&why, FAILURE_CODE);
        }
    }
}

/// One collective call in progress on this node: its sequence number, and
/// sends and receives tagged with it. Dropping it ends the collective.
#[derive(Debug)]
pub(super) struct Op {
    pub(super) seq: u64,
    pub(super) kind: Kind,
    pub(super) rank: Rank,
    pub(super) size: usize,
    /// The root, for the trace (rootless collectives have none).
    root: Option<Rank>,
    reason: BlockReason,
}

impl Op {
    /// Starts the next collective, of `kind` (with `root`, if it has
    /// one), on this node. `reason` (made at the user's call site) gets the
    /// sequence number as its detail.
    pub(super) fn begin(kind: Kind, root: Option<Rank>, reason: BlockReason) -> Op {
        if !thread::in_thread() && context::size() > 1 {
            panic!(
                "mttl: {kind} must be called from an mttl thread (main, or a function it invokes)"
            );
        }
        let (seq, rank, size) = context::with(|cx| {
            let st = with_state(|st| {
                let current = st.current;
                let seq = if kind.internal() {
                    INTERNAL_BASE + st.internal_started
                } else {
                    st.next_seq
                };
                let filed = st.filed_kind(seq);
                if current.is_none() && filed.is_none_or(|(k, _)| k == kind) {
                    if kind.internal() {
                        st.internal_started += 1;
                    } else {
                        st.next_seq += 1;
                    }
                    st.current = Some((seq, kind));
                }
                (current, seq, filed)
            });
            let (current, seq, filed) = st;
            if let Some((s, k)) = current {
                cx.fail(
                    &format!(
                        "{kind} was called while {k} #{s} is still running on this node: call \
                         collectives from one thread per node at a time"
                    ),
                    FAILURE_CODE,
                );
            }
            if let Some((k, r)) = filed {
                if k != kind {
                    cx.fail(
                        &mismatch(seq, &format!("{kind} on this node"), k, r),
                        FAILURE_CODE,
                    );
                }
            }
            (seq, cx.rank, cx.size)
        });
        if trace::on() && !kind.internal() {
            trace::named(trace::Kind::CollEnter, root, kind.name(), seq, None);
        }
        Op {
            seq,
            kind,
            rank,
            size,
            root,
            reason: reason.with_detail("number", seq),
        }
    }

    fn header(&self, step: u8) -> [u8; COLL_HEADER_LEN] {
        let mut h = [0u8; COLL_HEADER_LEN];
        h[..8].copy_from_slice(&self.seq.to_le_bytes());
        h[8] = self.kind as u8;
        h[9] = step;
        h
    }

    /// Sends step `step` of this collective to `dest`.
    pub(super) fn send(&self, dest: Rank, step: u8, body: &[u8]) {
        let header = self.header(step);
        context::with(|cx| {
            if let Err(e) = cx.post(dest, wire::COLL, &header, body) {
                cx.send_failed(
                    &format!("{} #{}: sending to rank {dest}", self.kind, self.seq),
                    &e,
                );
            }
        });
    }

    /// Like [`send`](Self::send), handing a large body to the comm layer
    /// without a copy.
    pub(super) fn send_owned(&self, dest: Rank, step: u8, body: Vec<u8>) {
        let header = self.header(step);
        context::with(|cx| {
            if let Err(e) = cx.post_owned(dest, wire::COLL, &header, body) {
                cx.send_failed(
                    &format!("{} #{}: sending to rank {dest}", self.kind, self.seq),
                    &e,
                );
            }
        });
    }

    /// Takes step `step` of this collective from `src`, blocking the
    /// calling thread until it arrives.
    pub(super) fn recv(&self, src: Rank, step: u8) -> Vec<u8> {
        let key = (self.seq, src, step);
        loop {
            let got = with_state(|st| match st.mailbox.remove(&key) {
                Some(p) => {
                    st.waiter = None;
                    Some(p.body)
                }
                None => {
                    let thread = thread::current()
                        .expect("a collective that receives runs in a thread (checked in begin)");
                    st.waiter = Some(Waiter {
                        thread,
                        key,
                        any_source: false,
                    });
                    None
                }
            });
            if let Some(body) = got {
                return body;
            }
            thread::block(self.reason);
        }
    }

    /// Takes step `step` of this collective from whichever node sent it,
    /// blocking until one arrives: for a receiver that must check who sent
    /// rather than hang when the nodes disagree about the sender.
    pub(super) fn recv_any(&self, step: u8) -> (Rank, Vec<u8>) {
        let (src, body, _) = self.recv_any_filed(step);
        (src, body)
    }

    /// As [`Op::recv_any`], also saying when the message was filed (at
    /// or after the call when the call had to wait for it).
    pub(super) fn recv_any_filed(&self, step: u8) -> (Rank, Vec<u8>, Instant) {
        loop {
            let got = with_state(|st| {
                let found = st
                    .mailbox
                    .range((self.seq, 0, step)..=(self.seq, Rank::MAX, step))
                    .map(|(&k, _)| k)
                    .find(|k| k.2 == step);
                match found.and_then(|k| st.mailbox.remove(&k).map(|p| (k.1, p.body, p.filed))) {
                    Some(got) => {
                        st.waiter = None;
                        Some(got)
                    }
                    None => {
                        let thread = thread::current().expect(
                            "a collective that receives runs in a thread (checked in begin)",
                        );
                        st.waiter = Some(Waiter {
                            thread,
                            key: (self.seq, 0, step),
                            any_source: true,
                        });
                        None
                    }
                }
            });
            if let Some(got) = got {
                return got;
            }
            thread::block(self.reason);
        }
    }

    /// Takes step `step` of this collective from whichever node sent it,
    /// if one is filed already; never blocks.
    pub(super) fn try_recv_any(&self, step: u8) -> Option<(Rank, Vec<u8>)> {
        with_state(|st| {
            let found = st
                .mailbox
                .range((self.seq, 0, step)..=(self.seq, Rank::MAX, step))
                .map(|(&k, _)| k)
                .find(|k| k.2 == step)?;
            st.mailbox.remove(&found).map(|p| (found.1, p.body))
        })
    }

    /// Stops the job: the nodes disagree about this collective.
    pub(super) fn fail(&self, why: &str) -> ! {
        let why = format!("{} #{}: {why}", self.kind, self.seq);
        match context::with(|cx| -> Infallible { cx.fail(&why, FAILURE_CODE) }) {}
    }
}

impl Drop for Op {
    /// The collective's end: its state cleared, its exit recorded, and the
    /// trace's seam after every collective run (not while unwinding).
    fn drop(&mut self) {
        let internal = self.kind.internal();
        if trace::on() && !internal {
            let name = self.kind.name();
            trace::named(trace::Kind::CollExit, self.root, name, self.seq, None);
        }
        let _ = STATE.try_with(|cell| {
            if let Ok(mut guard) = cell.try_borrow_mut() {
                if let Some(st) = guard.as_mut() {
                    st.current = None;
                    st.waiter = None;
                }
            }
        });
        if !internal && !std::thread::panicking() {
            if let Some(due) = trace::after_collective() {
                super::suspension::run(due);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_length_matches_the_wire_table() {
        assert_eq!(wire::header_len(wire::COLL), Some(COLL_HEADER_LEN));
    }

    #[test]
    fn internal_collectives_count_apart() {
        let mut st = State::default();
        accept(&mut st, 1, INTERNAL_BASE, Kind::TraceVote, 0).unwrap();
        accept(&mut st, 1, 0, Kind::Barrier, 0).unwrap();
        st.internal_started = 1;
        st.current = Some((INTERNAL_BASE + 1, Kind::TraceSuspension));
        // A faster rank already in the next user collective.
        accept(&mut st, 2, 0, Kind::Barrier, 1).unwrap();
        let e = accept(&mut st, 2, INTERNAL_BASE, Kind::TraceVote, 1).unwrap_err();
        assert!(e.contains("already finished"), "{e}");
        let e = accept(&mut st, 2, 5, Kind::TraceVote, 0).unwrap_err();
        assert!(e.contains("outside its numbering"), "{e}");
    }

    #[test]
    fn kinds_round_trip() {
        for b in 0..=u8::MAX {
            if let Some(k) = Kind::from_u8(b) {
                assert_eq!(k as u8, b);
            }
        }
        assert_eq!(Kind::from_u8(Kind::Alltoall as u8), Some(Kind::Alltoall));
    }

    fn accept(st: &mut State, src: Rank, seq: u64, kind: Kind, step: u8) -> Result<(), String> {
        st.accept(src, seq, kind, step, Vec::new())
    }

    #[test]
    fn misuse_is_named() {
        let mut st = State::default();
        accept(&mut st, 1, 0, Kind::Barrier, 0).unwrap();
        accept(&mut st, 2, 3, Kind::Broadcast, 0).unwrap();
        let e = accept(&mut st, 2, 0, Kind::Allreduce, 0).unwrap_err();
        assert!(
            e.contains("#0 is barrier on rank 1 but allreduce on rank 2"),
            "{e}"
        );
        let e = accept(&mut st, 1, 0, Kind::Barrier, 0).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        st.current = Some((1, Kind::Gather));
        let e = accept(&mut st, 3, 1, Kind::Reduce, 0).unwrap_err();
        assert!(
            e.contains("#1 is gather on this node but reduce on rank 3"),
            "{e}"
        );
        let e = accept(&mut st, 3, 0, Kind::Barrier, 1).unwrap_err();
        assert!(e.contains("already finished"), "{e}");
        assert_eq!(st.filed_kind(3), Some((Kind::Broadcast, 2)));
        assert_eq!(st.filed_kind(2), None);
    }
}
