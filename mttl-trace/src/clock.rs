//! Time across ranks: each rank's events on rank 0's clock (offsets from
//! rank 0's `ClockOffset` records, interpolated linearly between
//! suspensions, held flat before the first and after the last), and the
//! suspensions removed (`reconstruct`): an event at time x of a rank is
//! moved earlier by the Z of every suspension of that rank that began
//! before x (at most by x's distance from the suspension's start). Z, not
//! the time the rank actually waited, is what the method added to every
//! rank alike; a rank that overshot (descheduled during its busy-wait) was
//! late the way any preempted rank is, and the others saw it so.
//!
//! `reconstruct` removes a write a rank made alone (a `Flush` of cause
//! `Local` or `Fallback`) the same way, its length in place of Z: the
//! correction common
//! tracers apply. It removes the writer's own delay but not the delay it
//! caused the ranks that waited on it (the indirect perturbation the
//! equalized suspensions avoid), which is why `local`'s reconstructed
//! times stay off. `check` does not: its correction is the method's
//! (offsets and suspensions), so a trace of lone writes does not fail it
//! for a compensation the method never makes.

use mttl_core::trace::format::{unzigzag, Event, FlushCause, Kind};

use crate::read::Trace;

/// One suspension of one rank, ns.
#[derive(Debug, Clone, Copy)]
struct Span {
    begin: u64,
    /// When its wait ended.
    end: u64,
    z: u64,
    /// The Z of the rank's earlier suspensions.
    before: u64,
    /// A write the rank made alone, not a suspension.
    lone: bool,
}

/// The times of one run, per rank: offsets to rank 0 and suspensions.
#[derive(Debug, Clone)]
pub struct Clocks {
    /// Per rank, (rank 0's time of the measurement, the rank's clock
    /// minus rank 0's), in time order.
    offsets: Vec<Vec<(u64, i64)>>,
    /// Per rank, its suspensions in order.
    suspensions: Vec<Vec<Span>>,
}

impl Clocks {
    /// Reads the offsets and suspensions of `t`: the method's correction
    /// (`check`, `timeline`).
    pub fn of(t: &Trace) -> Clocks {
        Clocks::read(t, false)
    }

    /// [`Clocks::of`], the writes each rank made alone removed too
    /// (`reconstruct`; see the module doc).
    pub fn removing_lone_writes(t: &Trace) -> Clocks {
        Clocks::read(t, true)
    }

    fn read(t: &Trace, lone_writes: bool) -> Clocks {
        let n = t.ranks.len();
        let mut offsets = vec![Vec::new(); n];
        if let Some(r0) = t.ranks.first() {
            for e in r0.events.iter().filter(|e| e.kind == Kind::ClockOffset) {
                if let Some(p) = e.peer.map(|p| p as usize).filter(|&p| p < n) {
                    offsets[p].push((e.end, unzigzag(e.a)));
                }
            }
        }
        let suspensions = t
            .ranks
            .iter()
            .map(|r| {
                let mut before = 0;
                r.events
                    .iter()
                    .filter_map(|e| match e.kind {
                        Kind::Suspension => Some((e, e.a, false)),
                        Kind::Flush if lone_writes && e.a != FlushCause::Suspension as u64 => {
                            Some((e, e.end.saturating_sub(e.begin), true))
                        }
                        _ => None,
                    })
                    .map(|(e, z, lone)| {
                        let s = Span {
                            begin: e.begin,
                            end: e.end,
                            z,
                            before,
                            lone,
                        };
                        before += z;
                        s
                    })
                    .collect()
            })
            .collect();
        Clocks {
            offsets,
            suspensions,
        }
    }

    /// `rank`'s clock minus rank 0's at `rank`'s time `x`.
    pub fn offset(&self, rank: usize, x: u64) -> i64 {
        let pts = match self.offsets.get(rank) {
            Some(p) if !p.is_empty() => p,
            _ => return 0,
        };
        let i = pts.partition_point(|&(at, _)| at <= x);
        if i == 0 {
            return pts[0].1;
        }
        if i == pts.len() {
            return pts[i - 1].1;
        }
        let ((a, ca), (b, cb)) = (pts[i - 1], pts[i]);
        let f = (x - a) as f64 / (b - a).max(1) as f64;
        (ca as f64 + f * (cb - ca) as f64).round() as i64
    }

    /// `rank`'s time `x` on rank 0's clock.
    pub fn on_rank0(&self, rank: usize, x: u64) -> u64 {
        (i128::from(x) - i128::from(self.offset(rank, x))).max(0) as u64
    }

    /// Whether `x` falls inside one of `rank`'s suspensions (not a write it
    /// made alone).
    pub fn suspended_at(&self, rank: usize, x: u64) -> bool {
        self.suspension_at(rank, x)
            .is_some_and(|s| !s.lone && x <= s.end)
    }

    /// The last suspension of `rank` that began at or before `x`.
    fn suspension_at(&self, rank: usize, x: u64) -> Option<Span> {
        let s = self.suspensions.get(rank)?;
        let i = s.partition_point(|s| s.begin <= x);
        (i > 0).then(|| s[i - 1])
    }

    /// `rank`'s time `x` with its suspensions removed (still on its own
    /// clock).
    pub fn without_suspensions(&self, rank: usize, x: u64) -> u64 {
        match self.suspension_at(rank, x) {
            None => x,
            Some(s) => x.saturating_sub(s.before) - (x - s.begin).min(s.z),
        }
    }

    /// `rank`'s time `x` corrected: suspensions removed, on rank 0's clock.
    pub fn corrected(&self, rank: usize, x: u64) -> u64 {
        let y = self.without_suspensions(rank, x);
        (i128::from(y) - i128::from(self.offset(rank, x))).max(0) as u64
    }

    /// `rank`'s suspensions, their Z summed with the lengths of the writes
    /// it made alone (what reconstruction removes), and the time it
    /// actually spent in both, ns.
    pub fn suspended(&self, rank: usize) -> (usize, u64, u64) {
        let s = self.suspensions.get(rank).map_or(&[][..], |s| &s[..]);
        (
            s.iter().filter(|s| !s.lone).count(),
            s.iter().map(|s| s.z).sum(),
            s.iter().map(|s| s.end - s.begin).sum(),
        )
    }
}

/// Whether an event is the protocol's bookkeeping rather than the
/// program's: suspensions, clock records and the writes of the trace.
pub fn is_tracing(e: &Event) -> bool {
    matches!(
        e.kind,
        Kind::Suspension | Kind::SuspensionClock | Kind::ClockOffset | Kind::Flush
    )
}
