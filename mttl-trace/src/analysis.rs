//! `timeline`, `reconstruct` and `check`: the run seen on one clock, with
//! the suspensions removed, and the messages' order checked.
//!
//! Messages are paired per (source, destination, tag) in order, which is
//! how every backend delivers them: a send or nsend is one message; a
//! `send_headed_bulk` or `nsend_headed` two, its header (tag
//! `a | TAG_LARGE`) and its body (tag `TAG_DATA`). A pair violates the
//! clock condition when its receive ends before its send began.

use std::collections::HashMap;
use std::fmt::Write;

use mttl_core::trace::format::{Event, Kind};

use crate::clock::{is_tracing, Clocks};
use crate::read::{RankTrace, Trace};

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The first line of `timeline`.
pub(crate) const TIMELINE_HEAD: &str = "# begin_ms end_ms rank event peer a b\n";

/// `timeline`: every event of every rank on rank 0's clock, in time
/// order, ms from the earliest.
pub fn timeline(t: &Trace) -> String {
    let clocks = Clocks::of(t);
    let mut rows: Vec<(u64, u64, usize, &Event)> = Vec::new();
    for (rank, r) in t.ranks.iter().enumerate() {
        for e in &r.events {
            let b = clocks.on_rank0(rank, e.begin);
            let end = clocks.on_rank0(rank, e.end);
            rows.push((b, end, rank, e));
        }
    }
    rows.sort_by_key(|&(b, end, rank, _)| (b, end, rank));
    let zero = rows.first().map_or(0, |r| r.0);
    let mut out = String::from(TIMELINE_HEAD);
    for (b, end, rank, e) in rows {
        out += &timeline_row(&t.ranks[rank], rank, b - zero, end - zero, e);
    }
    out
}

/// One line of `timeline`: `rank`'s event `e` (of `r`) at `b` to `end`, ns
/// from the earliest event.
pub(crate) fn timeline_row(r: &RankTrace, rank: usize, b: u64, end: u64, e: &Event) -> String {
    let a = match e.kind {
        Kind::InvokeIssued
        | Kind::InvokeServed
        | Kind::InvokeAnswered
        | Kind::SyncWait
        | Kind::CollEnter
        | Kind::CollExit
        | Kind::RegionBegin
        | Kind::RegionEnd => r.name(e.a),
        _ => e.a.to_string(),
    };
    let peer = e.peer.map_or("-".to_owned(), |p| p.to_string());
    format!(
        "{:.6} {:.6} {rank} {} {peer} {a} {}\n",
        ms(b),
        ms(end),
        e.kind.name(),
        e.b
    )
}

/// One rank of a reconstructed run.
#[derive(Debug, Clone)]
pub struct ReconstructedRank {
    /// The program's events, suspensions removed, on rank 0's clock
    /// (empty when read by [`crate::TraceFiles`], which keeps none): the
    /// protocol's records, the trace's writes and the messages inside
    /// suspensions (the protocol's own) left out.
    pub events: Vec<Event>,
    /// The program's events (as many as `events` holds when it was kept).
    pub event_count: usize,
    /// Suspensions.
    pub suspensions: usize,
    /// Their Z summed (what reconstruction removes), ns.
    pub suspended: u64,
    /// The time the rank actually spent in them, ns.
    pub waited: u64,
    /// First begin to last end as traced, ns.
    pub traced_span: u64,
    /// The same after reconstruction.
    pub span: u64,
}

/// A run with its suspensions removed.
#[derive(Debug, Clone)]
pub struct Reconstruction {
    /// Per rank.
    pub ranks: Vec<ReconstructedRank>,
    /// Earliest begin to latest end over all ranks, reconstructed, ns.
    pub run_time: u64,
    /// The time in each user region, per rank, traced and reconstructed.
    pub regions: Vec<RegionTime>,
}

/// The time one rank spent in the user regions of one name
/// (`mttl::trace::region`), summed over its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionTime {
    /// The rank.
    pub rank: usize,
    /// The region's name.
    pub name: String,
    /// Instances closed (an instance the trace does not close is left out).
    pub count: u64,
    /// Their time as traced, ns.
    pub traced: u64,
    /// Their time with the suspensions removed, ns.
    pub reconstructed: u64,
}

/// One rank's user regions, fed its events in order: each end is paired
/// with the latest unclosed begin of its name.
#[derive(Debug, Default)]
pub(crate) struct Regions {
    open: HashMap<u64, Vec<u64>>,
    /// name id -> (count, traced, reconstructed), in order of first end.
    totals: Vec<(u64, u64, u64, u64)>,
}

impl Regions {
    pub(crate) fn add(&mut self, clocks: &Clocks, rank: usize, e: &Event) {
        match e.kind {
            Kind::RegionBegin => self.open.entry(e.a).or_default().push(e.end),
            Kind::RegionEnd => {
                let Some(begin) = self.open.get_mut(&e.a).and_then(Vec::pop) else {
                    return;
                };
                let traced = e.end.saturating_sub(begin);
                let rec = clocks
                    .corrected(rank, e.end)
                    .saturating_sub(clocks.corrected(rank, begin));
                match self.totals.iter_mut().find(|t| t.0 == e.a) {
                    Some(t) => {
                        t.1 += 1;
                        t.2 += traced;
                        t.3 += rec;
                    }
                    None => self.totals.push((e.a, 1, traced, rec)),
                }
            }
            _ => {}
        }
    }

    pub(crate) fn finish(self, rank: usize, r: &RankTrace, out: &mut Vec<RegionTime>) {
        out.extend(
            self.totals
                .into_iter()
                .map(|(id, count, traced, reconstructed)| RegionTime {
                    rank,
                    name: r.name(id),
                    count,
                    traced,
                    reconstructed,
                }),
        );
    }
}

/// First begin and last end of the events fed.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Span {
    first: Option<u64>,
    last: u64,
}

impl Span {
    pub(crate) fn add(&mut self, begin: u64, end: u64) {
        self.first = Some(self.first.map_or(begin, |f| f.min(begin)));
        self.last = self.last.max(end);
    }

    pub(crate) fn merge(&mut self, o: Span) {
        if let Some(f) = o.first {
            self.add(f, o.last);
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.first.map_or(0, |f| self.last.saturating_sub(f))
    }
}

/// One rank's reconstruction, fed its events in order; `keep` collects
/// the kept events when the caller wants them.
#[derive(Debug, Default)]
pub(crate) struct RankRecon {
    pub(crate) events: Vec<Event>,
    keep: bool,
    count: usize,
    traced: Span,
    span: Span,
    regions: Regions,
}

impl RankRecon {
    pub(crate) fn new(keep: bool) -> RankRecon {
        RankRecon {
            keep,
            ..RankRecon::default()
        }
    }

    pub(crate) fn add(&mut self, clocks: &Clocks, rank: usize, e: &Event) {
        self.traced.add(e.begin, e.end);
        self.regions.add(clocks, rank, e);
        if !kept_in_reconstruction(clocks, rank, e) {
            return;
        }
        let c = Event {
            begin: clocks.corrected(rank, e.begin),
            end: clocks.corrected(rank, e.end),
            ..*e
        };
        self.count += 1;
        self.span.add(c.begin, c.end);
        if self.keep {
            self.events.push(c);
        }
    }

    /// The rank's figures; its regions go to `regions`, its span is
    /// merged into `all`.
    pub(crate) fn finish(
        self,
        clocks: &Clocks,
        rank: usize,
        r: &RankTrace,
        regions: &mut Vec<RegionTime>,
        all: &mut Span,
    ) -> ReconstructedRank {
        self.regions.finish(rank, r, regions);
        all.merge(self.span);
        let (suspensions, suspended, waited) = clocks.suspended(rank);
        ReconstructedRank {
            events: self.events,
            event_count: self.count,
            suspensions,
            suspended,
            waited,
            traced_span: self.traced.len(),
            span: self.span.len(),
        }
    }
}

/// Whether `rank`'s event `e` is the program's, kept when the suspensions
/// are removed: not the protocol's records, not the trace's writes, not a
/// message of a suspension's own exchanges.
pub fn kept_in_reconstruction(clocks: &Clocks, rank: usize, e: &Event) -> bool {
    let protocol_message = e.kind.is_comm() && clocks.suspended_at(rank, e.end);
    !is_tracing(e) && !protocol_message
}

/// Removes the suspensions of `t` (see [`crate::clock`]).
pub fn reconstruct(t: &Trace) -> Reconstruction {
    let clocks = Clocks::removing_lone_writes(t);
    let (mut regions, mut all) = (Vec::new(), Span::default());
    let mut ranks = Vec::new();
    for (rank, r) in t.ranks.iter().enumerate() {
        let mut rec = RankRecon::new(true);
        for e in &r.events {
            rec.add(&clocks, rank, e);
        }
        ranks.push(rec.finish(&clocks, rank, r, &mut regions, &mut all));
    }
    Reconstruction {
        run_time: all.len(),
        ranks,
        regions,
    }
}

/// `reconstruct`'s text: the run time, then per rank its totals.
pub fn reconstruct_report(t: &Trace) -> String {
    reconstruction_text(&reconstruct(t))
}

/// [`reconstruct_report`] of a reconstruction.
pub fn reconstruction_text(rec: &Reconstruction) -> String {
    let mut out = format!("reconstructed run time: {:.3} ms\n", ms(rec.run_time));
    for (rank, r) in rec.ranks.iter().enumerate() {
        let _ = writeln!(
            out,
            "rank {rank}: traced {:.3} ms, {} suspensions of Z totalling {:.3} ms (waited {:.3} ms), \
             reconstructed {:.3} ms, {} events",
            ms(r.traced_span),
            r.suspensions,
            ms(r.suspended),
            ms(r.waited),
            ms(r.span),
            r.event_count
        );
    }
    for g in &rec.regions {
        let _ = writeln!(
            out,
            "rank {}: region {:?}: {} times, traced {:.3} ms, reconstructed {:.3} ms",
            g.rank,
            g.name,
            g.count,
            ms(g.traced),
            ms(g.reconstructed)
        );
    }
    out
}

/// `reconstruct --json`: the same figures as one JSON object, times in ns:
/// `run_time_ns`; `ranks`, per rank `suspensions`, `suspended_ns` (the Z
/// and lone writes removed), `waited_ns`, `traced_span_ns`, `span_ns`,
/// `events`; `regions`, per rank and region name `rank`, `name`, `count`,
/// `traced_ns`, `reconstructed_ns`.
pub fn reconstruct_json(t: &Trace) -> String {
    reconstruction_json(&reconstruct(t))
}

/// [`reconstruct_json`] of a reconstruction.
pub fn reconstruction_json(rec: &Reconstruction) -> String {
    let ranks: Vec<serde_json::Value> = rec
        .ranks
        .iter()
        .map(|r| {
            serde_json::json!({
                "suspensions": r.suspensions,
                "suspended_ns": r.suspended,
                "waited_ns": r.waited,
                "traced_span_ns": r.traced_span,
                "span_ns": r.span,
                "events": r.event_count,
            })
        })
        .collect();
    let regions: Vec<serde_json::Value> = rec
        .regions
        .iter()
        .map(|g| {
            serde_json::json!({
                "rank": g.rank,
                "name": g.name,
                "count": g.count,
                "traced_ns": g.traced,
                "reconstructed_ns": g.reconstructed,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "run_time_ns": rec.run_time,
        "ranks": ranks,
        "regions": regions,
    });
    format!("{doc}\n")
}

/// `check --json`: [`Check`]'s counts as one JSON object.
pub fn check_json(c: &Check) -> String {
    let doc = serde_json::json!({
        "pairs": c.pairs,
        "inside_suspensions": c.inside_suspensions,
        "violations_before": c.violations_before,
        "violations_after": c.violations_after,
        "unmatched_sends": c.unmatched_sends,
        "unmatched_receives": c.unmatched_receives,
    });
    format!("{doc}\n")
}

/// What `check` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// Pairs of a send and its receive.
    pub pairs: u64,
    /// Sends never received.
    pub unmatched_sends: u64,
    /// Receives with no send.
    pub unmatched_receives: u64,
    /// Receives ending before their send began, on the ranks' own clocks.
    pub violations_before: u64,
    /// The same after correction (offsets applied, suspensions removed).
    pub violations_after: u64,
    /// Pairs sent and received inside suspensions (the protocol's own,
    /// removed with them: not counted after correction).
    pub inside_suspensions: u64,
}

impl Check {
    /// Whether anything is wrong after correction.
    pub fn failed(&self) -> bool {
        self.violations_after > 0 || self.unmatched_sends > 0 || self.unmatched_receives > 0
    }
}

/// One message: a send (or one of the two messages of a headed send)
/// paired with its receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePair {
    /// The sending rank and the index of its send in that rank's events.
    pub send: (usize, usize),
    /// The receiving rank and the index of its receive in its events.
    pub recv: (usize, usize),
    /// The message's tag on the wire.
    pub tag: u64,
}

/// Every message of a run: the pairs, and what has no pair.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    /// Sends paired with their receives, in the order of the receiving
    /// ranks' events.
    pub pairs: Vec<MessagePair>,
    /// Messages sent and never received: (rank, event index, tag).
    pub unmatched_sends: Vec<(usize, usize, u64)>,
    /// Receives with no send: (rank, event index).
    pub unmatched_receives: Vec<(usize, usize)>,
}

/// Pairs every message's send with its receive, per (source, destination,
/// tag) in order ([`crate::pairing`], which the TI export uses on the
/// reconstructed events).
pub fn pair_messages(t: &Trace) -> Messages {
    let p = crate::pairing::pair(t.ranks.iter().map(|r| &r.events[..]));
    let mut m = Messages {
        unmatched_receives: p.unmatched_receives,
        ..Messages::default()
    };
    for msg in p.messages {
        match msg.recv {
            Some(recv) => m.pairs.push(MessagePair {
                send: msg.send,
                recv,
                tag: msg.tag,
            }),
            None => m.unmatched_sends.push((msg.send.0, msg.send.1, msg.tag)),
        }
    }
    // In the order of the receives, as `check` reports them.
    m.pairs.sort_unstable_by_key(|p| p.recv);
    m.unmatched_sends.sort_unstable();
    m
}

/// Pairs every send with its receive and counts the violations.
pub fn check(t: &Trace) -> Check {
    let clocks = Clocks::of(t);
    let m = pair_messages(t);
    let mut c = Check {
        pairs: m.pairs.len() as u64,
        unmatched_sends: m.unmatched_sends.len() as u64,
        unmatched_receives: m.unmatched_receives.len() as u64,
        ..Check::default()
    };
    for p in &m.pairs {
        let (from, si) = p.send;
        let (rank, ri) = p.recv;
        let begin = t.ranks[from].events[si].begin;
        let end = t.ranks[rank].events[ri].end;
        c.judge(&clocks, (from, begin), (rank, end));
    }
    c
}

impl Check {
    /// Counts one pair: sent by rank `send.0` at its time `send.1` (the
    /// send's begin), received by `recv.0` at `recv.1` (the receive's end).
    pub(crate) fn judge(&mut self, clocks: &Clocks, send: (usize, u64), recv: (usize, u64)) {
        let ((from, begin), (rank, end)) = (send, recv);
        if end < begin {
            self.violations_before += 1;
        }
        if clocks.suspended_at(from, begin) && clocks.suspended_at(rank, end) {
            self.inside_suspensions += 1;
        } else if clocks.corrected(rank, end) < clocks.corrected(from, begin) {
            self.violations_after += 1;
        }
    }
}

/// `check`'s text.
pub fn check_report(c: &Check) -> String {
    format!(
        "{} messages paired ({} inside suspensions); clock-condition violations: {} before \
         correction, {} after; {} sends never received, {} receives without a send\n",
        c.pairs,
        c.inside_suspensions,
        c.violations_before,
        c.violations_after,
        c.unmatched_sends,
        c.unmatched_receives
    )
}
