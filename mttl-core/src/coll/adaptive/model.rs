//! The adaptive broadcast's learning without messages or clocks: the same
//! [`Table`], [`Evaluation`]s and [`Learner`] a job runs, fed with slacks
//! that something else measured or predicted (a simulator, a model). The
//! order is the protocol's (see [`super`]): the root's phase at the start
//! of a broadcast uses the reports of the broadcasts before it, its swaps
//! take effect from the next broadcast, and each rank's slack in this
//! broadcast (from entering the receive to the data's arrival: negative
//! when the rank was late) updates its evaluation and maybe its report.

use mttl_comm::Rank;

use super::learner::{Evaluation, Learner, LearningProgress, Table};

/// One site and root of an adaptive broadcast, played outside a job: ask
/// it for the tree, tell it each broadcast's slacks.
///
/// ```
/// use mttl_core::AdaptiveModel;
/// let mut model = AdaptiveModel::new(4, 0);
/// assert_eq!(model.children(0), vec![2, 1]);
/// // Rank 2 is 5 ms late (the data waited for it) and rank 3, below it,
/// // waits for it.
/// for _ in 0..10 {
///     model.after_broadcast(&[0.0, 0.0, -0.005, 0.005]).unwrap();
/// }
/// assert_ne!(model.virtual_ranks(), &[0, 1, 2, 3]);
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveModel {
    table: Table,
    /// `None` for a fixed table.
    learner: Option<Learner>,
    evals: Vec<Evaluation>,
}

impl AdaptiveModel {
    /// A learning site of `n` ranks rooted at `root`, starting from the
    /// binomial table.
    ///
    /// # Panics
    ///
    /// If `root >= n`.
    pub fn new(n: usize, root: Rank) -> AdaptiveModel {
        assert!(root < n, "root {root} of a job of {n} ranks");
        AdaptiveModel {
            table: Table::new(n, root),
            learner: Some(Learner::new(n)),
            evals: vec![Evaluation::default(); n],
        }
    }

    /// A site that keeps the table giving real rank `r` the virtual rank
    /// `to_virtual[r]` and never learns; an error unless it is a
    /// permutation of `0..n` with the root at 0.
    pub fn fixed(n: usize, root: Rank, to_virtual: &[Rank]) -> Result<AdaptiveModel, String> {
        let table = Table::from_virtual(n, root, to_virtual).map_err(|e| e.to_string())?;
        Ok(AdaptiveModel {
            table,
            learner: None,
            evals: Vec::new(),
        })
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.table.size()
    }

    /// The current virtual rank of every real rank.
    pub fn virtual_ranks(&self) -> &[Rank] {
        self.table.virtual_ranks()
    }

    /// The rank `real` receives from, `None` for the root.
    pub fn parent(&self, real: Rank) -> Option<Rank> {
        self.table.parent(real)
    }

    /// The ranks `real` sends to, in the order it sends (largest subtree
    /// first).
    pub fn children(&self, real: Rank) -> Vec<Rank> {
        self.table.children(real).collect()
    }

    /// One broadcast on the current table, in which rank `r`'s slack was
    /// `slacks[r]` seconds (the time from entering the receive to the
    /// data's arrival, negative when the data waited for the rank; the
    /// root's entry is ignored): runs the root's phase if one is due, then
    /// every rank's evaluation. Returns how many swaps changed the table
    /// for the next broadcast; an error if `slacks` does not have one
    /// finite entry per rank.
    pub fn after_broadcast(&mut self, slacks: &[f64]) -> Result<usize, String> {
        if slacks.len() != self.size() {
            return Err(format!(
                "{} slacks for a broadcast of {} ranks",
                slacks.len(),
                self.size()
            ));
        }
        if let Some(r) = slacks.iter().position(|s| !s.is_finite()) {
            return Err(format!("the slack of rank {r} is {}", slacks[r]));
        }
        let Some(learner) = self.learner.as_mut() else {
            return Ok(0);
        };
        let swaps = learner.after_broadcast(&mut self.table);
        let threshold = learner.report_threshold();
        for (r, e) in self.evals.iter_mut().enumerate() {
            if r == self.table.root() {
                continue;
            }
            if let Some(v) = e.record(slacks[r], threshold) {
                learner.report(r, v);
            }
            if !swaps.is_empty() {
                e.restart();
            }
        }
        Ok(swaps.len())
    }

    /// Gives the learner one measurement of the per-hop cost (seconds):
    /// what a job's round trips to the root's children measure, from
    /// whatever plays the broadcasts. Ignored for a fixed table, or unless
    /// positive and finite.
    pub fn hop_sample(&mut self, hop: f64) {
        if let Some(learner) = self.learner.as_mut() {
            learner.hop_sample(hop);
        }
    }

    /// Gives the learner one measurement of the gap between a parent's
    /// successive sends (seconds): what a job's root measures as its time
    /// to send to its children, per child. Ignored as
    /// [`hop_sample`](Self::hop_sample) ignores a hop.
    pub fn gap_sample(&mut self, gap: f64) {
        if let Some(learner) = self.learner.as_mut() {
            learner.gap_sample(gap);
        }
    }

    /// The per-hop cost the learner measured (seconds; its default before
    /// a measurement; `None` for a fixed table).
    pub fn hop(&self) -> Option<f64> {
        self.learner.as_ref().map(Learner::hop)
    }

    /// How far the learning went (all zero for a fixed table).
    pub fn progress(&self) -> LearningProgress {
        self.learner
            .as_ref()
            .map(Learner::progress)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_tables_are_checked_and_never_change() {
        assert!(AdaptiveModel::fixed(4, 0, &[0, 1, 1, 3])
            .unwrap_err()
            .contains("permutation"));
        assert!(AdaptiveModel::fixed(4, 0, &[1, 0, 2, 3])
            .unwrap_err()
            .contains("not 0"));
        assert!(AdaptiveModel::fixed(4, 0, &[0, 1, 2]).is_err());
        let mut m = AdaptiveModel::fixed(4, 0, &[0, 3, 2, 1]).unwrap();
        assert_eq!(m.children(0), vec![2, 3]);
        assert_eq!(m.parent(1), Some(2));
        for _ in 0..20 {
            assert_eq!(m.after_broadcast(&[0.0, 0.01, 0.0, 0.0]), Ok(0));
        }
        assert_eq!(m.virtual_ranks(), &[0, 3, 2, 1]);
        assert!(m.after_broadcast(&[0.0]).is_err());
    }

    #[test]
    fn a_learning_model_counts_its_phases_and_changes() {
        let mut m = AdaptiveModel::new(8, 0);
        let mut changed = 0;
        for _ in 0..30 {
            // Rank 4 is always 10 ms late, ranks 5-7 below it wait for it:
            // every table change is counted.
            changed += usize::from(
                m.after_broadcast(&[0.0, 0.0, 0.0, 0.0, -0.01, 0.01, 0.01, 0.01])
                    .unwrap()
                    > 0,
            );
        }
        assert!(m
            .after_broadcast(&[0.0, 0.0, f64::NAN, 0.0, 0.0, 0.0, 0.0, 0.0])
            .is_err());
        let p = m.progress();
        assert_eq!(p.broadcasts, 30);
        assert!(p.phases >= p.changes && p.changes as usize == changed && changed > 0);
        assert!(p.last_change_broadcast <= 30 && p.last_change_phase <= p.phases);
    }
}
