//! The learning part of the adaptive broadcast, as pure data: the
//! real-to-virtual rank [`Table`], a rank's own [`Evaluation`] of its
//! waits, and the optimizer's [`Learner`] that turns reported waits into
//! swaps. No messages and no clocks here, so every rule is unit-tested on
//! given wait vectors (see the protocol in [`super`]).
//!
//! Invariants: a table is always a permutation of `0..n`, and the root's
//! virtual rank is always 0 (a swap never involves the root).

use std::collections::VecDeque;
use std::fmt;

use mttl_comm::Rank;

use super::super::schedule::{relative, tree_children, tree_parent};

/// A wait at or below this (seconds) counts as no wait: it is what a rank
/// waits for the data's own latency in a balanced program, and reports of
/// changes below it would only send noise.
pub(crate) const FLOOR: f64 = 250e-6;

/// A rank reports its evaluation when it moved by more than this fraction
/// of the value last reported (and by more than [`FLOOR`]).
const REPORT_CHANGE: f64 = 0.5;

/// The largest `i` of the weighted average: a new wait weighs at least
/// `1/2^i`, so a changed pattern shows within a few broadcasts.
const MAX_WEIGHT_EXP: u32 = 2;

/// The phase interval K doubles when the total wait changed by at most
/// this fraction since the last phase, and halves otherwise.
const STABLE_CHANGE: f64 = 0.25;

/// The largest phase interval K: a settled site still looks again now and
/// then.
const MAX_INTERVAL: u64 = 1024;

/// Broadcasts after a table change before a phase judges it: one measured
/// on the new table, one for its reports to reach the optimizer.
const SETTLE_BROADCASTS: u64 = 2;

/// With at least this many idle ranks, a phase swaps several waiting ranks
/// at once (one per four idle ranks), so large jobs converge in fewer
/// phases than the paper's one swap per phase.
const MULTI_SWAP_IDLE: usize = 8;

/// A trial counts as worse only when the total wait rose by more than
/// this (seconds): a rise within the noise of a loaded machine is "stayed",
/// and the trial is kept.
const WORSE_MARGIN: f64 = FLOOR;

/// The idle ranks a waiting rank is tried with, in priority order, before
/// the phases stop searching: on a noisy machine, trying every idle rank
/// would keep changing the table for as many phases as there are ranks.
const MAX_CANDIDATES: usize = 4;

/// A settled site re-learns when its total wait grows past this factor of
/// the settled total (and by more than [`JUMP_FLOOR`]).
const JUMP_FACTOR: f64 = 2.0;

/// See [`JUMP_FACTOR`]: a jump smaller than this (seconds) is noise.
const JUMP_FLOOR: f64 = 4.0 * FLOOR;

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

    /// How many messages `real` sends in a broadcast.
    fn sends(&self, real: Rank) -> usize {
        tree_children(self.virtual_of(real), self.size()).count()
    }

    /// How many receives lie on the path from the root to `real` (its
    /// depth in the tree).
    fn receives_on_path(&self, real: Rank) -> u32 {
        self.virtual_of(real).count_ones()
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

/// One rank's evaluation of its waits at one site: the weighted average
/// `NewVal = ((2^i - 1) * PreVal + Wait) / 2^i`, `i` counting the waits
/// measured since the table last changed (capped), so the first wait on a
/// new table replaces what was learned on the old one.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evaluation {
    value: f64,
    samples: u32,
    reported: f64,
}

impl Evaluation {
    /// Takes one wait (seconds); returns the value to report to the
    /// optimizer if it moved enough since the last report.
    pub(crate) fn record(&mut self, wait: f64) -> Option<f64> {
        let i = self.samples.min(MAX_WEIGHT_EXP);
        let w = f64::from(1u32 << i);
        self.value = ((w - 1.0) * self.value + wait.max(0.0)) / w;
        self.samples = self.samples.saturating_add(1);
        let change = (self.value - self.reported).abs();
        if change > REPORT_CHANGE * self.reported && change > FLOOR {
            self.reported = self.value;
            return Some(self.value);
        }
        None
    }

    /// The table changed: the next wait starts the average afresh.
    pub(crate) fn restart(&mut self) {
        self.samples = 0;
    }
}

/// A table change being tried: judged at the next phase, undone if the
/// total wait went up.
#[derive(Debug, Clone)]
struct Trial {
    /// The total wait before the change.
    before: f64,
    swaps: Vec<(Rank, Rank)>,
    /// The waiting rank being moved, and the idle ranks still to try with it.
    waiter: Rank,
    candidates: VecDeque<Rank>,
}

/// The optimizer of one call site and root (it runs on the root): its
/// view of every rank's evaluation (the last value each reported), the
/// phase interval and the trial under way.
#[derive(Debug, Clone)]
pub(crate) struct Learner {
    views: Vec<f64>,
    interval: u64,
    since_phase: u64,
    since_change: u64,
    last_total: Option<f64>,
    trial: Option<Trial>,
    /// The total at the last phase that found nothing to change: a total
    /// that jumps well past it is a changed pattern.
    calm: Option<f64>,
    /// Every candidate was tried and none helped: phases stop searching
    /// until the pattern changes.
    exhausted: bool,
    /// After a multi-swap trial failed, search one swap at a time until a
    /// trial is kept.
    single: bool,
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
            interval: 1,
            since_phase: 0,
            since_change: SETTLE_BROADCASTS,
            last_total: None,
            trial: None,
            calm: None,
            exhausted: false,
            single: false,
            progress: LearningProgress::default(),
        }
    }

    /// How far the learning went.
    pub(crate) fn progress(&self) -> LearningProgress {
        self.progress
    }

    /// Takes `rank`'s reported evaluation (seconds); reports from ranks
    /// outside the job are ignored.
    pub(crate) fn report(&mut self, rank: Rank, value: f64) {
        if let Some(v) = self.views.get_mut(rank) {
            *v = value.max(0.0);
        }
    }

    /// The total wait as reported.
    pub(crate) fn total(&self) -> f64 {
        self.views.iter().sum()
    }

    /// The phase interval K.
    #[cfg(test)]
    pub(crate) fn interval(&self) -> u64 {
        self.interval
    }

    /// Called by the root at each broadcast of the site, after it has
    /// computed this broadcast's tree: runs a phase when one is due and
    /// returns the swaps it made to `table` (empty when nothing changed),
    /// which every rank applies after this broadcast.
    pub(crate) fn after_broadcast(&mut self, table: &mut Table) -> Vec<(Rank, Rank)> {
        self.since_phase += 1;
        self.since_change = self.since_change.saturating_add(1);
        self.progress.broadcasts += 1;
        let total = self.total();
        if let Some(calm) = self.calm {
            if total > JUMP_FACTOR * calm && total - calm > JUMP_FLOOR {
                // A changed pattern: learn again from a short interval.
                self.calm = None;
                self.exhausted = false;
                self.single = false;
                self.interval = 1;
                self.since_phase = self.interval;
                self.progress.relearns += 1;
            }
        }
        if self.since_phase < self.interval || self.since_change < SETTLE_BROADCASTS {
            return Vec::new();
        }
        self.since_phase = 0;
        let swaps = self.phase(table, total);
        self.progress.phases += 1;
        if !swaps.is_empty() {
            self.since_change = 0;
            self.progress.changes += 1;
            self.progress.last_change_broadcast = self.progress.broadcasts;
            self.progress.last_change_phase = self.progress.phases;
        }
        swaps
    }

    /// One optimization phase at total wait `total`.
    fn phase(&mut self, table: &mut Table, total: f64) -> Vec<(Rank, Rank)> {
        if let Some(last) = self.last_total {
            let change = (total - last).abs();
            self.interval = if change <= STABLE_CHANGE * last || change <= FLOOR {
                (self.interval * 2).min(MAX_INTERVAL)
            } else {
                (self.interval / 2).max(1)
            };
        }
        self.last_total = Some(total);
        let mut made = Vec::new();
        if let Some(mut trial) = self.trial.take() {
            if total <= trial.before + WORSE_MARGIN {
                self.single = false;
            } else {
                // Worse: undo (each swap is its own inverse, undone in
                // reverse order) and try the waiter's next candidate.
                for &(a, b) in trial.swaps.iter().rev() {
                    swap(table, a, b, &mut made);
                }
                self.single |= trial.swaps.len() > 1;
                match trial.candidates.pop_front() {
                    Some(z) => {
                        swap(table, trial.waiter, z, &mut made);
                        trial.swaps = vec![(trial.waiter, z)];
                        self.trial = Some(trial);
                    }
                    None => {
                        self.exhausted = true;
                        self.calm = Some(trial.before);
                    }
                }
                return made;
            }
        }
        if self.exhausted {
            self.calm = Some(self.calm.map_or(total, |c| c.min(total)));
        } else {
            self.search(table, total, &mut made);
        }
        made
    }

    /// Starts a trial: the ranks that wait most swap with idle ranks in
    /// the paper's priority order.
    fn search(&mut self, table: &mut Table, total: f64, made: &mut Vec<(Rank, Rank)>) {
        let root = table.root;
        let mut waiters: Vec<Rank> = (0..self.views.len())
            .filter(|&r| r != root && self.views[r] > FLOOR)
            .collect();
        waiters.sort_by(|&a, &b| self.views[b].total_cmp(&self.views[a]).then(a.cmp(&b)));
        let mut idle: Vec<Rank> = (0..self.views.len())
            .filter(|&r| r != root && self.views[r] <= FLOOR)
            .collect();
        idle.sort_by_key(|&r| {
            (
                std::cmp::Reverse(table.sends(r)),
                table.receives_on_path(r),
                r,
            )
        });
        if waiters.is_empty() || idle.is_empty() {
            // Nothing to gain now (no waits), or nothing to swap with (every
            // rank waits: the root is late). Search again next phase.
            self.calm = Some(total);
            return;
        }
        let pairs = if !self.single && idle.len() >= MULTI_SWAP_IDLE {
            waiters.len().min(idle.len() / 4).max(1)
        } else {
            1
        };
        let swaps: Vec<(Rank, Rank)> = waiters
            .iter()
            .copied()
            .zip(idle.iter().copied())
            .take(pairs)
            .collect();
        for &(a, b) in &swaps {
            swap(table, a, b, made);
        }
        self.trial = Some(Trial {
            before: total,
            swaps,
            waiter: waiters[0],
            candidates: idle[1..].iter().copied().take(MAX_CANDIDATES - 1).collect(),
        });
    }
}

/// Swaps two ranks the learner chose (never the root, never equal) and
/// records the swap.
fn swap(table: &mut Table, a: Rank, b: Rank, made: &mut Vec<(Rank, Rank)>) {
    if table.swap(a, b).is_ok() {
        made.push((a, b));
    }
}

#[cfg(test)]
mod tests;
