//! The learning part of the adaptive broadcast, as pure data: the
//! real-to-virtual rank [`Table`], a rank's own [`Evaluation`] of its
//! slack, and the optimizer's [`Learner`] that turns reported slacks into
//! table changes. No messages and no clocks here, so every rule is
//! unit-tested on given slack vectors (see the protocol in [`super`]).
//!
//! A rank's *slack* in one broadcast is the time from its entering the
//! receive to the data's arrival: positive when it waited, negative when
//! the data waited for it (the rank was late by that much).
//!
//! The learner optimises the broadcast's completion (its last rank's exit,
//! as a model of the tree gives it), not the summed wait:
//!
//! 1. From the reported slacks, the current table and the costs of a send
//!    (the hop: from a parent's send to the child's having the data; the
//!    gap: between a parent's successive sends), it rebuilds the last
//!    broadcasts: the root starts at 0, a parent's k-th child (from 0) gets
//!    the data one hop and k gaps after the parent started, a rank starts
//!    when both the data and the rank are there, so its arrival is its data
//!    time minus its slack. This gives every rank's arrival (relative to
//!    the root's) and the observed completion (the last rank's start plus
//!    a gap per send it makes).
//! 2. Both are measured: the hop, in a job, as half the round trip of the
//!    broadcast's data to a child of the root and that child's report back
//!    (the time the child held it taken off); the gap as the root's time to
//!    send to its children, per child; each averaged over samples. Until a
//!    hop was measured, it is estimated from the root's children that
//!    waited (the k-th gets the data about k + 1 hops after the root
//!    starts, so slack / (k + 1) estimates one: the median of these,
//!    smoothed over phases); until a gap was, it is taken to be the hop.
//! 3. A candidate table puts the ranks, sorted by estimated arrival, onto
//!    the tree's places sorted by when they get the data when all arrive
//!    together (ties: the place that sends most first): early ranks at
//!    inner nodes, late ranks at leaves (equal arrivals keep their current
//!    order).
//! 4. The candidate is taken only when its modelled completion (same
//!    arrivals) is shorter than the current one by at least half a hop and
//!    twice the noise (below), or, the completion not longer, when the
//!    ranks' modelled total wait is shorter by twice that (the paper's
//!    objective, second). It is then a trial.
//! 5. A trial is judged once the ranks have reported from the new table:
//!    if the observed completion got worse than before it by more than half
//!    a hop and three times the noise, the old table comes back and the
//!    search stops until the pattern changes.
//! 6. Noise is the median of the last 8 changes of the observed completion
//!    between phases that changed nothing (0 until 3 are known), so that a
//!    change of pattern is not taken for noise. A settled site whose
//!    observed completion moves by more than a hop and four times the
//!    noise from its settled value
//!    has a new pattern: it learns again from a phase interval of 1, from
//!    the next broadcast on. (A rank whose slack jumps restarts its own
//!    average, so the root sees the new pattern, not a blend.)
//!
//! Invariants: a table is always a permutation of `0..n`, and the root's
//! virtual rank is always 0 (a change never involves the root).

use std::collections::VecDeque;
use std::fmt;

use mttl_comm::Rank;

use super::super::schedule::{relative, tree_children, tree_parent};

/// The per-hop cost assumed (seconds) until the root's children give a
/// measurement.
const DEFAULT_HOP: f64 = 20e-6;

/// A rank reports its evaluation when it moved by more than the root's
/// report threshold (this many hops, or [`REPORT_NOISE`] times the noise,
/// whichever is more), and always on its first broadcast on a new table.
const REPORT_HOPS: f64 = 0.5;

/// See [`REPORT_HOPS`].
const REPORT_NOISE: f64 = 2.0;

/// The largest `i` of the weighted average: a new slack weighs at least
/// `1/2^i`, so a changed pattern shows within a few broadcasts.
const MAX_WEIGHT_EXP: u32 = 2;

/// The largest phase interval K: a settled site still looks again now and
/// then (and at once when reports show its completion moved).
const MAX_INTERVAL: u64 = 1024;

/// Broadcasts after a table change before a phase judges it: one measured
/// on the new table, one for its reports to reach the root, one spare for
/// reports still on their way in a job.
const SETTLE_BROADCASTS: u64 = 3;

/// A candidate must shorten the modelled completion by this many hops.
const ACCEPT_HOPS: f64 = 0.5;

/// ... and by this many times the noise.
const ACCEPT_NOISE: f64 = 2.0;

/// A trial is undone when the observed completion rose by more than this
/// many hops ...
const UNDO_HOPS: f64 = 0.5;

/// ... and this many times the noise.
const UNDO_NOISE: f64 = 3.0;

/// A settled site re-learns when its observed completion moved by more
/// than this many hops ...
const JUMP_HOPS: f64 = 1.0;

/// ... and this many times the noise.
const JUMP_NOISE: f64 = 4.0;

/// The changes of the completion the noise is the median of.
const NOISE_WINDOW: usize = 8;

/// A slack that differs from a rank's evaluation by more than this many
/// report thresholds and this fraction of the evaluation restarts the
/// average: the rank's pattern changed, and averaging the old one in would
/// only mislead the root for a few broadcasts.
const RESTART_FLOORS: f64 = 4.0;

/// See [`RESTART_FLOORS`].
const RESTART_CHANGE: f64 = 0.5;

/// Why a table change cannot be applied: it would break the invariants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableError {
    #[error("rank {rank} is not a rank of this job of {size}")]
    OutOfRange { rank: Rank, size: usize },
    #[error("rank {0} is the root, whose place in the tree is fixed")]
    Root(Rank),
    #[error("a swap of rank {0} with itself")]
    SelfSwap(Rank),
    #[error("a table of {got} ranks for a job of {size}")]
    Length { got: usize, size: usize },
    #[error("virtual rank {0} appears twice or is out of range: a table is a permutation")]
    NotPermutation(Rank),
    #[error("the root {root} has virtual rank {got}, not 0")]
    RootMoved { root: Rank, got: Rank },
}

/// The map from real rank to virtual rank (the place in the binomial tree
/// rooted at virtual 0) of one call site and root, and back.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Table {
    root: Rank,
    to_virtual: Vec<Rank>,
    to_real: Vec<Rank>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Table(root {}, virtual {:?})",
            self.root, self.to_virtual
        )
    }
}

impl Table {
    /// The binomial broadcast's table: virtual = rank relative to `root`.
    pub(crate) fn new(n: usize, root: Rank) -> Table {
        let to_virtual: Vec<Rank> = (0..n).map(|r| relative(r, root, n)).collect();
        let mut to_real = vec![0; n];
        for (r, &v) in to_virtual.iter().enumerate() {
            to_real[v] = r;
        }
        Table {
            root,
            to_virtual,
            to_real,
        }
    }

    /// The table giving real rank `r` the virtual rank `to_virtual[r]`,
    /// checked to be a permutation of a job of `n` with `root` at 0.
    pub(crate) fn from_virtual(
        n: usize,
        root: Rank,
        to_virtual: &[Rank],
    ) -> Result<Table, TableError> {
        if to_virtual.len() != n {
            return Err(TableError::Length {
                got: to_virtual.len(),
                size: n,
            });
        }
        if root >= n {
            return Err(TableError::OutOfRange {
                rank: root,
                size: n,
            });
        }
        let mut to_real = vec![usize::MAX; n];
        for (r, &v) in to_virtual.iter().enumerate() {
            if v >= n || to_real[v] != usize::MAX {
                return Err(TableError::NotPermutation(v));
            }
            to_real[v] = r;
        }
        if to_virtual[root] != 0 {
            return Err(TableError::RootMoved {
                root,
                got: to_virtual[root],
            });
        }
        Ok(Table {
            root,
            to_virtual: to_virtual.to_vec(),
            to_real,
        })
    }

    /// The rank at virtual 0.
    pub(crate) fn root(&self) -> Rank {
        self.root
    }

    pub(crate) fn size(&self) -> usize {
        self.to_virtual.len()
    }

    /// Real rank -> virtual rank, for every real rank in order.
    pub(crate) fn virtual_ranks(&self) -> &[Rank] {
        &self.to_virtual
    }

    fn virtual_of(&self, real: Rank) -> Rank {
        self.to_virtual[real]
    }

    /// The rank `real` receives from, `None` for the root.
    pub(crate) fn parent(&self, real: Rank) -> Option<Rank> {
        let v = self.virtual_of(real);
        (v != 0).then(|| self.to_real[tree_parent(v)])
    }

    /// The ranks `real` sends to, largest subtree first.
    pub(crate) fn children(&self, real: Rank) -> impl Iterator<Item = Rank> + '_ {
        tree_children(self.virtual_of(real), self.size())
            .rev()
            .map(|c| self.to_real[c])
    }

    /// Exchanges the places of `a` and `b`: a swap is its own undo.
    pub(crate) fn swap(&mut self, a: Rank, b: Rank) -> Result<(), TableError> {
        let size = self.size();
        for rank in [a, b] {
            if rank >= size {
                return Err(TableError::OutOfRange { rank, size });
            }
            if rank == self.root {
                return Err(TableError::Root(rank));
            }
        }
        if a == b {
            return Err(TableError::SelfSwap(a));
        }
        let (va, vb) = (self.to_virtual[a], self.to_virtual[b]);
        self.to_virtual.swap(a, b);
        self.to_real[va] = b;
        self.to_real[vb] = a;
        Ok(())
    }

    /// Applies a list of swaps in order, all or none.
    pub(crate) fn apply(&mut self, swaps: &[(Rank, Rank)]) -> Result<(), TableError> {
        let mut next = self.clone();
        for &(a, b) in swaps {
            next.swap(a, b)?;
        }
        *self = next;
        Ok(())
    }
}

/// One rank's evaluation of its slack: the weighted average
/// `NewVal = ((2^i - 1) * PreVal + Slack) / 2^i`, `i` counting the slacks
/// measured since the table last changed (capped), so the first slack on a
/// new table replaces what was learned on the old one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evaluation {
    value: f64,
    samples: u32,
    /// The value last reported; `None` before the first report on this
    /// table.
    reported: Option<f64>,
}

impl Evaluation {
    /// Takes one slack (seconds, negative for a late rank); returns the
    /// value to report to the optimizer if it moved by more than
    /// `threshold` (seconds, the root's) since the last report, or is the
    /// first on this table.
    pub(crate) fn record(&mut self, slack: f64, threshold: f64) -> Option<f64> {
        let jump = (slack - self.value).abs();
        if self.samples > 0
            && jump > RESTART_FLOORS * threshold
            && jump > RESTART_CHANGE * self.value.abs()
        {
            self.samples = 0;
        }
        let i = self.samples.min(MAX_WEIGHT_EXP);
        let w = f64::from(1u32 << i);
        self.value = ((w - 1.0) * self.value + slack) / w;
        self.samples = self.samples.saturating_add(1);
        let due = match self.reported {
            None => true,
            Some(last) => (self.value - last).abs() > threshold,
        };
        due.then(|| {
            self.reported = Some(self.value);
            self.value
        })
    }

    /// The table changed: the next slack starts the average afresh and is
    /// reported.
    pub(crate) fn restart(&mut self) {
        self.samples = 0;
        self.reported = None;
    }
}

/// A table change being tried: judged once the ranks reported from it,
/// undone if the observed completion got worse.
#[derive(Debug, Clone)]
struct Trial {
    /// The observed completion before the change (seconds).
    before: f64,
    /// The table before the change.
    previous: Table,
}

/// What the reports say about the last broadcasts on the current table.
#[derive(Debug, Clone)]
pub(crate) struct Estimate {
    /// Every rank's arrival relative to the root's (the root's is 0).
    pub(crate) arrival: Vec<f64>,
    /// The last exit: when the last rank has the data and has sent it on.
    pub(crate) completion: f64,
}

/// The optimizer of one call site and root (it runs on the root): its
/// view of every rank's evaluation (the last value each reported), the
/// per-hop cost, the noise, the phase interval and the trial under way.
#[derive(Debug, Clone)]
pub(crate) struct Learner {
    views: Vec<f64>,
    /// The hop as measured by round trips (seconds).
    measured: Option<f64>,
    /// The gap between a parent's sends, as measured (seconds).
    gap: Option<f64>,
    hop: Option<f64>,
    noise: f64,
    /// The last changes of the observed completion between phases that
    /// changed nothing.
    changes: VecDeque<f64>,
    interval: u64,
    since_phase: u64,
    since_change: u64,
    /// The observed completion at the last phase, and whether that phase
    /// left the table alone (so the next difference is noise).
    last_completion: Option<(f64, bool)>,
    trial: Option<Trial>,
    /// The observed completion of the settled table: one that moves well
    /// past it is a changed pattern.
    calm: Option<f64>,
    /// A trial was undone: no new one until the pattern changes.
    exhausted: bool,
    /// A report came since the site last looked for a changed pattern.
    dirty: bool,
    progress: LearningProgress,
}
/// How far one site's learning went, as its root counts: broadcasts,
/// optimization phases, and the phases that changed the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LearningProgress {
    /// Broadcasts of the site so far.
    pub broadcasts: u64,
    /// Optimization phases run (every K-th broadcast, K adapting).
    pub phases: u64,
    /// Phases that changed the table (a swap, several, or an undo with the
    /// next candidate).
    pub changes: u64,
    /// The broadcast (counted from 1) whose phase last changed the table,
    /// 0 if none did: from the one after it on, the table is settled.
    pub last_change_broadcast: u64,
    /// The phase (counted from 1) that last changed the table, 0 if none.
    pub last_change_phase: u64,
    /// The phases that restarted learning on a changed pattern.
    pub relearns: u64,
}

impl Learner {
    pub(crate) fn new(n: usize) -> Learner {
        Learner {
            views: vec![0.0; n],
            measured: None,
            gap: None,
            hop: None,
            noise: 0.0,
            changes: VecDeque::with_capacity(NOISE_WINDOW),
            interval: 1,
            since_phase: 0,
            since_change: SETTLE_BROADCASTS,
            last_completion: None,
            trial: None,
            calm: None,
            exhausted: false,
            dirty: false,
            progress: LearningProgress::default(),
        }
    }

    /// How far the learning went.
    pub(crate) fn progress(&self) -> LearningProgress {
        self.progress
    }

    /// Takes `rank`'s reported evaluation (seconds); reports from ranks
    /// outside the job, or that are not numbers, are ignored.
    pub(crate) fn report(&mut self, rank: Rank, slack: f64) {
        if let Some(v) = self.views.get_mut(rank) {
            if slack.is_finite() {
                *v = slack;
                self.dirty = true;
            }
        }
    }

    /// Takes one measurement of the per-hop cost (seconds); ignored
    /// unless positive and finite.
    pub(crate) fn hop_sample(&mut self, hop: f64) {
        if hop.is_finite() && hop > 0.0 {
            self.measured = Some(self.measured.map_or(hop, |h| (3.0 * h + hop) / 4.0));
        }
    }

    /// Takes one measurement of the gap between a parent's sends
    /// (seconds); ignored unless positive and finite.
    pub(crate) fn gap_sample(&mut self, gap: f64) {
        if gap.is_finite() && gap > 0.0 {
            self.gap = Some(self.gap.map_or(gap, |g| (3.0 * g + gap) / 4.0));
        }
    }

    /// The per-hop cost in use (seconds): measured, else estimated from
    /// the slacks, else a default.
    pub(crate) fn hop(&self) -> f64 {
        self.measured.or(self.hop).unwrap_or(DEFAULT_HOP)
    }

    /// How much a rank's evaluation must move before it reports it again
    /// (seconds): sent to the ranks in every trailer.
    pub(crate) fn report_threshold(&self) -> f64 {
        (REPORT_HOPS * self.hop()).max(REPORT_NOISE * self.noise)
    }

    /// The costs the model uses.
    fn costs(&self) -> Costs {
        let hop = self.hop();
        Costs {
            hop,
            gap: self.gap.unwrap_or(hop),
        }
    }

    /// The phase interval K.
    #[cfg(test)]
    pub(crate) fn interval(&self) -> u64 {
        self.interval
    }

    /// Step 1: the arrivals and the observed completion of the last
    /// broadcasts on `table`, from the reports.
    pub(crate) fn estimate(&self, table: &Table) -> Estimate {
        let n = table.size();
        let costs = self.costs();
        let mut data = vec![0.0; n];
        let mut arrival = vec![0.0; n];
        let mut completion = 0.0f64;
        for v in 0..n {
            let r = table.to_real[v];
            let start = if v == 0 {
                0.0
            } else {
                arrival[r] = data[r] - self.views[r];
                data[r].max(arrival[r])
            };
            let mut sent = 0;
            for c in table.children(r) {
                data[c] = costs.data_at(start, sent);
                sent += 1;
            }
            completion = completion.max(costs.exit(start, sent));
        }
        Estimate {
            arrival,
            completion,
        }
    }

    /// Step 2: a new measurement of the hop from the root's children
    /// that waited, averaged with the last one.
    fn measure_hop(&mut self, table: &Table) {
        let mut samples: Vec<f64> = table
            .children(table.root)
            .enumerate()
            .filter(|&(_, c)| self.views[c] > 0.0)
            .map(|(k, c)| self.views[c] / (k + 1) as f64)
            .collect();
        if samples.is_empty() {
            return;
        }
        samples.sort_by(f64::total_cmp);
        let m = samples.len() / 2;
        let median = if samples.len() % 2 == 1 {
            samples[m]
        } else {
            (samples[m - 1] + samples[m]) / 2.0
        };
        self.hop = Some(self.hop.map_or(median, |h| (h + median) / 2.0));
    }

    /// Step 3: the table putting the ranks sorted by `arrival` onto the
    /// places sorted by time, equal arrivals in `table`'s order.
    pub(crate) fn candidate(&self, table: &Table, arrival: &[f64]) -> Table {
        let costs = self.costs();
        let root = table.root;
        let places = places_by_time(table.size(), costs);
        let mut order = vec![0; table.size()];
        for (k, &v) in places.iter().enumerate() {
            order[v] = k;
        }
        let mut ranks: Vec<Rank> = (0..table.size()).filter(|&r| r != root).collect();
        ranks.sort_by(|&a, &b| {
            arrival[a]
                .total_cmp(&arrival[b])
                .then(order[table.virtual_of(a)].cmp(&order[table.virtual_of(b)]))
        });
        let mut to_virtual = vec![0; table.size()];
        for (&r, &v) in ranks.iter().zip(&places) {
            to_virtual[r] = v;
        }
        Table::from_virtual(table.size(), root, &to_virtual)
            .expect("every rank but the root takes one place but the root's")
    }

    /// Called by the root at each broadcast of the site, after it has
    /// computed this broadcast's tree: runs a phase when one is due and
    /// returns the swaps it made to `table` (empty when nothing changed),
    /// which every rank applies after this broadcast.
    pub(crate) fn after_broadcast(&mut self, table: &mut Table) -> Vec<(Rank, Rank)> {
        self.since_phase += 1;
        self.since_change = self.since_change.saturating_add(1);
        self.progress.broadcasts += 1;
        if self.dirty && self.since_change >= SETTLE_BROADCASTS {
            self.dirty = false;
            if let Some(calm) = self.calm {
                let now = self.estimate(table).completion;
                if (now - calm).abs() > self.jump_margin() {
                    // A changed pattern: learn again from a short interval.
                    self.calm = None;
                    self.exhausted = false;
                    self.interval = 1;
                    self.since_phase = 0;
                    self.last_completion = None;
                    self.progress.relearns += 1;
                    // Look at the next broadcast, once the reports of the
                    // changed ranks are all in.
                    self.since_change = SETTLE_BROADCASTS - 1;
                }
            }
        }
        if self.since_phase < self.interval || self.since_change < SETTLE_BROADCASTS {
            return Vec::new();
        }
        self.since_phase = 0;
        let swaps = self.phase(table);
        self.progress.phases += 1;
        if swaps.is_empty() {
            self.interval = (self.interval * 2).min(MAX_INTERVAL);
        } else {
            self.interval = 1;
            self.since_change = 0;
            self.progress.changes += 1;
            self.progress.last_change_broadcast = self.progress.broadcasts;
            self.progress.last_change_phase = self.progress.phases;
        }
        swaps
    }

    fn jump_margin(&self) -> f64 {
        (JUMP_HOPS * self.hop()).max(JUMP_NOISE * self.noise)
    }

    /// One optimization phase (steps 2-6).
    fn phase(&mut self, table: &mut Table) -> Vec<(Rank, Rank)> {
        self.measure_hop(table);
        let now = self.estimate(table);
        let costs = self.costs();
        let hop = costs.hop;
        if let Some((last, unchanged)) = self.last_completion {
            if unchanged && self.trial.is_none() {
                if self.changes.len() == NOISE_WINDOW {
                    self.changes.pop_front();
                }
                self.changes.push_back((now.completion - last).abs());
                self.noise = if self.changes.len() < 3 {
                    0.0
                } else {
                    let mut sorted: Vec<f64> = self.changes.iter().copied().collect();
                    sorted.sort_by(f64::total_cmp);
                    sorted[(sorted.len() - 1) / 2]
                };
            }
        }
        if let Some(trial) = self.trial.take() {
            let margin = (UNDO_HOPS * hop).max(UNDO_NOISE * self.noise);
            if now.completion > trial.before + margin {
                let swaps = swaps_between(table, &trial.previous);
                *table = trial.previous;
                self.exhausted = true;
                self.calm = Some(trial.before);
                self.last_completion = Some((trial.before, false));
                return swaps;
            }
        }
        self.last_completion = Some((now.completion, true));
        if self.exhausted {
            self.calm = Some(now.completion);
            return Vec::new();
        }
        let next = self.candidate(table, &now.arrival);
        let (modelled, waits) = model_cost(&next, &now.arrival, costs);
        let (_, waits_now) = model_cost(table, &now.arrival, costs);
        let margin = (ACCEPT_HOPS * hop).max(ACCEPT_NOISE * self.noise);
        let shorter = modelled < now.completion - margin;
        let less_wait = modelled <= now.completion && waits < waits_now - 2.0 * margin;
        if next == *table || !(shorter || less_wait) {
            self.calm = Some(now.completion);
            return Vec::new();
        }
        let swaps = swaps_between(table, &next);
        self.trial = Some(Trial {
            before: now.completion,
            previous: std::mem::replace(table, next),
        });
        self.calm = None;
        self.last_completion = Some((now.completion, false));
        swaps
    }
}

/// The costs of a send in the learner's model (seconds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Costs {
    /// From a parent's send to the child's having the data.
    pub(crate) hop: f64,
    /// Between a parent's successive sends.
    pub(crate) gap: f64,
}

impl Costs {
    /// When the `k`-th child (from 0) of a parent that started at `start`
    /// has the data.
    fn data_at(self, start: f64, k: u32) -> f64 {
        start + self.hop + f64::from(k) * self.gap
    }

    /// When a rank that started at `start` and sends `sends` messages is
    /// done.
    fn exit(self, start: f64, sends: u32) -> f64 {
        start + f64::from(sends) * self.gap
    }
}

/// Every place but the root's (virtual 1..n), sorted by when it gets the
/// data in a broadcast where all ranks arrive together, the place that
/// sends most first among equals (times compared to the nanosecond).
fn places_by_time(n: usize, costs: Costs) -> Vec<Rank> {
    let mut when = vec![0.0f64; n];
    for v in 0..n {
        for (k, c) in tree_children(v, n).rev().enumerate() {
            when[c] = costs.data_at(when[v], k as u32);
        }
    }
    let mut places: Vec<Rank> = (1..n).collect();
    places.sort_by_key(|&v| {
        (
            (when[v] * 1e9).round() as i64,
            std::cmp::Reverse(tree_children(v, n).count()),
            v,
        )
    });
    places
}

/// The model's completion (last exit) of a broadcast on `table` when rank
/// `r` arrives at `arrival[r]` (the root at 0) and every send costs `hop`
/// (both its hop and its gap).
#[cfg(test)]
pub(crate) fn model_completion(table: &Table, arrival: &[f64], hop: f64) -> f64 {
    model_cost(table, arrival, Costs { hop, gap: hop }).0
}

/// The model's completion (last exit) and the ranks' total wait in a
/// broadcast on `table` when rank `r` arrives at `arrival[r]` (the root
/// at 0).
fn model_cost(table: &Table, arrival: &[f64], costs: Costs) -> (f64, f64) {
    let n = table.size();
    let mut data = vec![0.0f64; n];
    let mut completion = 0.0f64;
    let mut wait = 0.0;
    for v in 0..n {
        let r = table.to_real[v];
        let start = if v == 0 {
            0.0
        } else {
            wait += (data[r] - arrival[r]).max(0.0);
            data[r].max(arrival[r])
        };
        let mut sent = 0;
        for c in table.children(r) {
            data[c] = costs.data_at(start, sent);
            sent += 1;
        }
        completion = completion.max(costs.exit(start, sent));
    }
    (completion, wait)
}

/// The swaps (never of the root) that turn `from` into `to`, two tables of
/// one job and root.
fn swaps_between(from: &Table, to: &Table) -> Vec<(Rank, Rank)> {
    let mut at = from.clone();
    let mut swaps = Vec::new();
    for v in 1..to.size() {
        let want = to.to_real[v];
        let there = at.to_real[v];
        if want != there {
            at.swap(there, want)
                .expect("two ranks of the job other than the root");
            swaps.push((there, want));
        }
    }
    swaps
}

#[cfg(test)]
mod tests;
