//! What `mttl-trace info` and `mttl-trace stats` print, as text.

use std::collections::BTreeMap;
use std::fmt::Write;

use mttl_core::trace::format::{Event, Kind, LOOP_THREAD};

use crate::read::{Ending, RankTrace, Trace};

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// What `info` says of one rank's events, fed in order.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RankSummary {
    events: u64,
    first_begin: Option<u64>,
    last_end: u64,
    threads: u64,
    switches: u64,
}

impl RankSummary {
    pub(crate) fn add(&mut self, e: &Event) {
        self.events += 1;
        self.first_begin.get_or_insert(e.begin);
        self.last_end = e.end;
        match e.kind {
            Kind::ThreadSpawn => self.threads += 1,
            Kind::ThreadRun => self.switches += 1,
            _ => {}
        }
    }
}

/// `info`: the job, then per rank its events, blocks, time span and how
/// its trace ends.
pub fn info(t: &Trace) -> String {
    let summaries: Vec<RankSummary> = t
        .ranks
        .iter()
        .map(|r| {
            let mut s = RankSummary::default();
            r.events.iter().for_each(|e| s.add(e));
            s
        })
        .collect();
    info_text(t, &summaries)
}

/// [`info`] of the ranks' headers and endings in `t` and their events'
/// summaries.
pub(crate) fn info_text(t: &Trace, summaries: &[RankSummary]) -> String {
    let h = &t.ranks[0].header;
    let policy = match h.policy {
        1 => "memory",
        2 => "local",
        3 => "equalized",
        4 => "static",
        _ => "unknown",
    };
    let mut out = format!(
        "{}: job {:#018x}, {} ranks, format {}, flush policy {policy}, buffer {} bytes\n",
        t.dir.display(),
        h.job_id,
        h.size,
        h.version,
        h.buffer
    );
    for (r, s) in t.ranks.iter().zip(summaries) {
        let span = s
            .first_begin
            .map_or(0, |first| s.last_end.saturating_sub(first));
        let ending = match &r.ending {
            Ending::Complete(totals) => format!(
                "complete ({} flushes before the end, {} events dropped)",
                totals.flushes, totals.dropped
            ),
            Ending::Truncated { offset } => format!(
                "INCOMPLETE: ends at byte {offset}, after its last complete block (rank killed?)"
            ),
            Ending::WriteFailed { offset } => {
                format!("INCOMPLETE: a write failed; readable up to byte {offset}")
            }
        };
        let (threads, switches) = (s.threads, s.switches);
        let level = if switches > 0 || threads > 0 {
            format!(", {threads} threads spawned, {switches} switches")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "rank {}: {} events, {} blocks, {:.3} ms{level}, {ending}",
            r.header.rank,
            s.events,
            r.blocks,
            ms(span)
        );
    }
    out
}

/// One line of a breakdown: how many, and the time they took.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    count: u64,
    ns: u64,
    bytes: u64,
}

impl Tally {
    fn add(&mut self, ns: u64, bytes: u64) {
        self.count += 1;
        self.ns += ns;
        self.bytes += bytes;
    }
}

/// `stats`: per rank, time in comm primitives by kind, remote calls,
/// global memory, waits, each collective kind's count and wait time, and
/// user regions.
pub fn stats(t: &Trace) -> String {
    let mut out = String::new();
    for r in &t.ranks {
        let mut s = RankStats::default();
        r.events.iter().for_each(|e| s.add(r, e));
        s.write(r, &mut out);
    }
    out
}

/// `stats` of one rank, fed its events in order.
#[derive(Debug, Default)]
pub(crate) struct RankStats {
    by_kind: BTreeMap<Kind, Tally>,
    colls: BTreeMap<String, Tally>,
    regions: BTreeMap<String, Tally>,
    served: BTreeMap<String, Tally>,
    open_coll: Option<(u64, u64)>,
    open_regions: Vec<(u64, u64)>,
    suspensions: Suspensions,
    threads: Threads,
}

impl RankStats {
    /// Counts `e`, an event of `r` (whose names are all known).
    pub(crate) fn add(&mut self, r: &RankTrace, e: &Event) {
        let dur = e.end - e.begin;
        let threads = &mut self.threads;
        match e.kind {
            Kind::ThreadSpawn => threads.spawn(e.b, r.name(e.a)),
            Kind::ThreadRun => threads.run(e.b, e.end),
            Kind::ThreadBlock => threads.block(r.name(e.a), e.end),
            Kind::ThreadExit => threads.exit(e.end),
            Kind::Suspension => self.suspensions.add(e.a, e.b, dur),
            Kind::SuspensionClock => self.suspensions.clock(e.a, e.b),
            Kind::CollEnter => self.open_coll = Some((e.b, e.end)),
            Kind::CollExit => {
                if let Some((seq, t0)) = self.open_coll.take() {
                    if seq == e.b {
                        self.colls
                            .entry(r.name(e.a))
                            .or_default()
                            .add(e.end - t0, 0);
                    }
                }
            }
            Kind::RegionBegin => self.open_regions.push((e.a, e.end)),
            Kind::RegionEnd => {
                if let Some(i) = self.open_regions.iter().rposition(|&(a, _)| a == e.a) {
                    let (_, t0) = self.open_regions.remove(i);
                    self.regions
                        .entry(r.name(e.a))
                        .or_default()
                        .add(e.end - t0, 0);
                }
            }
            Kind::InvokeServed => self.served.entry(r.name(e.a)).or_default().add(dur, 0),
            _ => self.by_kind.entry(e.kind).or_default().add(dur, e.b),
        }
    }

    /// The rank's section of `stats`.
    pub(crate) fn write(self, r: &RankTrace, out: &mut String) {
        let _ = writeln!(out, "rank {}:", r.header.rank);
        let RankStats {
            by_kind,
            colls,
            regions,
            served,
            suspensions,
            threads,
            ..
        } = self;
        let section = |out: &mut String, title: &str, rows: Vec<(String, Tally)>, bytes: bool| {
            if rows.is_empty() {
                return;
            }
            let _ = writeln!(out, "  {title}:");
            for (name, t) in rows {
                let _ = write!(
                    out,
                    "    {name:<24} {:>9} calls {:>12.3} ms",
                    t.count,
                    ms(t.ns)
                );
                if bytes {
                    let _ = write!(out, " {:>14} bytes", t.bytes);
                }
                out.push('\n');
            }
        };
        let pick = |f: fn(Kind) -> bool| -> Vec<(String, Tally)> {
            by_kind
                .iter()
                .filter(|(k, _)| f(**k))
                .map(|(k, t)| (k.name().to_owned(), *t))
                .collect()
        };
        section(out, "comm primitives", pick(Kind::is_comm), true);
        section(
            out,
            "remote calls issued / answered",
            pick(|k| matches!(k, Kind::InvokeIssued | Kind::InvokeAnswered)),
            false,
        );
        section(
            out,
            "remote calls served",
            served.into_iter().collect(),
            false,
        );
        section(
            out,
            "global memory",
            pick(|k| matches!(k, Kind::Read | Kind::Write | Kind::Nwrite | Kind::Fence)),
            true,
        );
        section(
            out,
            "waits",
            pick(|k| k == Kind::SyncWait || k == Kind::Wait),
            false,
        );
        section(
            out,
            "collectives (enter to exit)",
            colls.into_iter().collect(),
            false,
        );
        section(out, "regions", regions.into_iter().collect(), false);
        section(out, "trace writes", pick(|k| k == Kind::Flush), true);
        if threads.switches > 0 || threads.spawned > 0 {
            let _ = writeln!(
                out,
                "  threads: {} spawned, {} switches, {} exits",
                threads.spawned, threads.switches, threads.exits
            );
            section(
                out,
                "threads by name (runs, time running)",
                threads.by_name.into_iter().collect(),
                false,
            );
            section(
                out,
                "thread blocks by reason (count, time blocked)",
                threads.blocked.into_iter().collect(),
                false,
            );
        }
        suspensions.write(out);
    }
}

/// The thread records of one rank (`MTTL_TRACE_LEVEL=threads`): each
/// thread runs from its `ThreadRun` to the rank's next `ThreadRun` (or its
/// block or exit); a block lasts until the thread runs again.
#[derive(Debug, Default)]
struct Threads {
    /// Names by thread id.
    /// Names by thread id, of the threads not yet exited (an exited
    /// thread's id is never run again, so memory follows the live
    /// threads, not the trace's length).
    names: BTreeMap<u64, String>,
    /// Threads spawned.
    spawned: u64,
    /// The running thread and since when.
    running: Option<(u64, u64)>,
    /// Blocked threads: id to (reason, since).
    blocked_since: BTreeMap<u64, (String, u64)>,
    by_name: BTreeMap<String, Tally>,
    blocked: BTreeMap<String, Tally>,
    switches: u64,
    exits: u64,
}

impl Threads {
    fn spawn(&mut self, id: u64, name: String) {
        self.spawned += 1;
        self.names.insert(id, name);
    }

    fn name(&self, id: u64) -> String {
        if id == LOOP_THREAD {
            return "(runtime loop)".to_owned();
        }
        self.names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("<thread {id:#x}>"))
    }

    /// Ends the running thread's run at `at`.
    fn stop(&mut self, at: u64) -> Option<u64> {
        let (id, since) = self.running.take()?;
        let name = self.name(id);
        self.by_name
            .entry(name)
            .or_default()
            .add(at.saturating_sub(since), 0);
        Some(id)
    }

    fn run(&mut self, id: u64, at: u64) {
        self.switches += 1;
        self.stop(at);
        if let Some((reason, since)) = self.blocked_since.remove(&id) {
            self.blocked
                .entry(reason)
                .or_default()
                .add(at.saturating_sub(since), 0);
        }
        self.running = Some((id, at));
    }

    fn block(&mut self, reason: String, at: u64) {
        if let Some(id) = self.stop(at) {
            self.blocked_since.insert(id, (reason, at));
        }
    }

    fn exit(&mut self, at: u64) {
        self.exits += 1;
        if let Some(id) = self.stop(at) {
            self.names.remove(&id);
        }
    }
}

/// The suspensions of one rank (the `equalized` or `static` protocol):
/// Z asked of every rank, w the spread of the ranks' t, m the mean one-way
/// message time, d the largest clock-offset error, and what the rank
/// actually waited (Z, or more when it was descheduled).
#[derive(Debug, Default)]
struct Suspensions {
    count: u64,
    z_sum: u64,
    z_max: u64,
    w_max: u64,
    m_sum: u64,
    clocks: u64,
    d_max: u64,
    waited: u64,
}

impl Suspensions {
    fn add(&mut self, z: u64, w: u64, waited: u64) {
        self.count += 1;
        self.z_sum += z;
        self.z_max = self.z_max.max(z);
        self.w_max = self.w_max.max(w);
        self.waited += waited;
    }

    fn clock(&mut self, m: u64, d: u64) {
        self.clocks += 1;
        self.m_sum += m;
        self.d_max = self.d_max.max(d);
    }

    fn write(&self, out: &mut String) {
        if self.count == 0 {
            return;
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let _ = writeln!(
            out,
            "  suspensions: {} (Z mean {:.1} us, max {:.1} us; w max {:.1} us; m mean {:.1} us; \
             d max {:.1} us; waited {:.3} ms in all)",
            self.count,
            us(self.z_sum / self.count),
            us(self.z_max),
            us(self.w_max),
            us(self.m_sum / self.clocks.max(1)),
            us(self.d_max),
            ms(self.waited)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stats` on a stream of short-lived threads holds the live ones'
    /// names only, whatever the stream's length, and counts every spawn.
    #[test]
    fn thread_names_follow_the_live_threads() {
        let mut t = Threads::default();
        for id in 0..100_000u64 {
            t.spawn(id, "worker".to_owned());
            t.run(id, id * 10);
            t.block("reply".to_owned(), id * 10 + 2);
            t.run(id, id * 10 + 4);
            t.exit(id * 10 + 6);
            assert!(
                t.names.len() <= 1,
                "{} names held at thread {id}",
                t.names.len()
            );
            assert!(t.blocked_since.is_empty());
        }
        assert_eq!(
            (t.spawned, t.exits, t.switches),
            (100_000, 100_000, 200_000)
        );
        assert_eq!(t.by_name["worker"].count, 200_000);
        assert_eq!(t.blocked["reply"].count, 100_000);
    }
}
