//! The imbalance patterns (how long each rank works before each
//! broadcast), the algorithms compared, and the ideal table of a pattern,
//! found offline on a model of the broadcast. Root 0 throughout.

use clap::ValueEnum;
use mttl::AdaptiveModel;

/// An imbalance pattern: rank `r`'s work before call `i`, in units of the
/// run's work (`--work-ms`, or `--sim-work-us` in the simulator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub(super) enum Pattern {
    /// The paper's: all the work on the rank that forwards most when
    /// virtual = real (rank n/2, the root's first child).
    Heavy,
    /// Work growing with the rank: rank r works r/(n-1).
    Growing,
    /// A fixed random skew per rank, uniform in [0, 1) (seeded).
    Random,
    /// Every rank works the same (a tenth of the unit).
    Balanced,
    /// `heavy` for the first half of the calls, then `growing`.
    Changing,
}

impl Pattern {
    /// Every pattern, in the order of the tables.
    pub(super) const ALL: [Pattern; 5] = [
        Pattern::Heavy,
        Pattern::Growing,
        Pattern::Random,
        Pattern::Balanced,
        Pattern::Changing,
    ];

    /// Its name on the command line and in the tables.
    pub(super) fn name(self) -> &'static str {
        match self {
            Pattern::Heavy => "heavy",
            Pattern::Growing => "growing",
            Pattern::Random => "random",
            Pattern::Balanced => "balanced",
            Pattern::Changing => "changing",
        }
    }

    /// Its index, for the worker's arguments.
    pub(super) fn index(self) -> u8 {
        Pattern::ALL
            .iter()
            .position(|&p| p == self)
            .map_or(0, |i| i as u8)
    }

    /// The pattern of `index`.
    pub(super) fn from_index(index: u8) -> Option<Pattern> {
        Pattern::ALL.get(usize::from(index)).copied()
    }

    /// How many calls a series of this pattern makes, `calls` per stage.
    pub(super) fn series_calls(self, calls: usize) -> usize {
        if self == Pattern::Changing {
            2 * calls
        } else {
            calls
        }
    }

    /// The stage call `i` of a series of `total` calls belongs to: the
    /// fixed pattern it follows then.
    pub(super) fn stage(self, i: usize, total: usize) -> Pattern {
        match self {
            Pattern::Changing if i < total / 2 => Pattern::Heavy,
            Pattern::Changing => Pattern::Growing,
            other => other,
        }
    }

    /// Rank `r`'s work (in units) before call `i` of `total`, in a job of
    /// `n`, for `seed`.
    pub(super) fn work(self, r: usize, i: usize, total: usize, n: usize, seed: u64) -> f64 {
        match self.stage(i, total) {
            Pattern::Heavy => f64::from(u8::from(r == n / 2 && n > 1)),
            Pattern::Growing => r as f64 / (n.max(2) - 1) as f64,
            Pattern::Random => unit_random(seed, r),
            Pattern::Balanced => 0.1,
            Pattern::Changing => 0.0,
        }
    }

    /// Every rank's work in a stage (a fixed pattern).
    pub(super) fn works(self, n: usize, seed: u64) -> Vec<f64> {
        (0..n).map(|r| self.work(r, 0, 1, n, seed)).collect()
    }
}

/// A deterministic number in [0, 1) for (`seed`, `r`): SplitMix64.
fn unit_random(seed: u64, r: usize) -> f64 {
    let mut z = seed
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(r as u64 + 1);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A broadcast algorithm compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Algo {
    /// The plain binomial tree.
    Binomial,
    /// The learned table (`AdaptiveBroadcast`).
    Adaptive,
    /// The pattern's ideal table, fixed (`AdaptiveBroadcast::with_table`).
    Ideal,
    /// The within-call arrival-order baseline (`ArrivalOrderBroadcast`).
    Arrival,
}

impl Algo {
    /// Every algorithm, in the order of the tables.
    pub(super) const ALL: [Algo; 4] = [Algo::Binomial, Algo::Adaptive, Algo::Ideal, Algo::Arrival];

    /// Its name in the tables.
    pub(super) fn name(self) -> &'static str {
        match self {
            Algo::Binomial => "binomial",
            Algo::Adaptive => "adaptive",
            Algo::Ideal => "ideal",
            Algo::Arrival => "arrival",
        }
    }

    /// Its index, for the worker's arguments.
    pub(super) fn index(self) -> u8 {
        Algo::ALL
            .iter()
            .position(|&a| a == self)
            .map_or(0, |i| i as u8)
    }

    /// The algorithm of `index`.
    pub(super) fn from_index(index: u8) -> Option<Algo> {
        Algo::ALL.get(usize::from(index)).copied()
    }
}

/// The model's times of one broadcast on `table` when rank `r` enters at
/// `arrival[r]` and every message costs its sender `send` (one after the
/// other, in the table's order): per rank, when it leaves.
pub(super) fn model_exits(table: &AdaptiveModel, arrival: &[f64], send: f64) -> Vec<f64> {
    let n = table.size();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&r| table.virtual_ranks()[r]);
    let mut data = vec![0.0f64; n];
    let mut exits = vec![0.0f64; n];
    // Virtual ranks in increasing order visit parents before children.
    for r in order {
        let start = if table.parent(r).is_none() {
            arrival[r]
        } else {
            data[r].max(arrival[r])
        };
        let children = table.children(r);
        for (k, &c) in children.iter().enumerate() {
            data[c] = start + (k + 1) as f64 * send;
        }
        exits[r] = start + children.len() as f64 * send;
    }
    exits
}

/// The model's cost of a table: the broadcast's time (last exit), then
/// the total time the ranks spend in it.
fn model_cost(table: &AdaptiveModel, arrival: &[f64], send: f64) -> (f64, f64) {
    let exits = model_exits(table, arrival, send);
    let last = exits.iter().copied().fold(0.0, f64::max);
    let spent = exits.iter().zip(arrival).map(|(e, a)| e - a).sum();
    (last, spent)
}

/// The ideal table of a job of `n` rooted at 0 whose ranks arrive at
/// `arrival`, found offline on [`model_exits`] with message cost `send`:
/// the ranks sorted by arrival take the tree's places sorted by when they
/// get the data in a broadcast where all arrive together (ties: the place
/// that sends most first), then, up to `max_n` ranks, pairwise swaps that
/// shorten the model's broadcast (or its time in the call) until none
/// does. Returns the virtual rank of each real rank.
pub(super) fn ideal_table(arrival: &[f64], send: f64, max_n: usize) -> Vec<usize> {
    let n = arrival.len();
    let binomial = AdaptiveModel::new(n, 0);
    let together = model_exits(&binomial, &vec![0.0; n], send);
    // Places (virtual ranks) by when they get the data.
    let mut places: Vec<usize> = (1..n).collect();
    let when = |v: usize| {
        let r = v; // virtual = real in the binomial table rooted at 0
        let got = together[r] - binomial.children(r).len() as f64 * send;
        (got, std::cmp::Reverse(binomial.children(r).len()))
    };
    places.sort_by(|&a, &b| {
        let (ta, sa) = when(a);
        let (tb, sb) = when(b);
        ta.total_cmp(&tb).then(sa.cmp(&sb)).then(a.cmp(&b))
    });
    let mut ranks: Vec<usize> = (1..n).collect();
    ranks.sort_by(|&a, &b| arrival[a].total_cmp(&arrival[b]).then(a.cmp(&b)));
    let mut to_virtual = vec![0; n];
    for (&r, &v) in ranks.iter().zip(&places) {
        to_virtual[r] = v;
    }
    if n > max_n {
        return to_virtual;
    }
    let cost = |t: &[usize]| {
        let m = AdaptiveModel::fixed(n, 0, t).expect("swaps keep a permutation");
        model_cost(&m, arrival, send)
    };
    let mut best = cost(&to_virtual);
    loop {
        let mut improved = false;
        for a in 1..n {
            for b in a + 1..n {
                to_virtual.swap(a, b);
                let c = cost(&to_virtual);
                let better =
                    c.0 < best.0 - 1e-12 || (c.0 <= best.0 + 1e-12 && c.1 < best.1 - 1e-12);
                if better {
                    best = c;
                    improved = true;
                } else {
                    to_virtual.swap(a, b);
                }
            }
        }
        if !improved {
            return to_virtual;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_put_the_work_where_they_say() {
        let heavy = Pattern::Heavy.works(16, 1);
        assert_eq!(heavy.iter().filter(|&&w| w > 0.0).count(), 1);
        assert_eq!(heavy[8], 1.0);
        let growing = Pattern::Growing.works(16, 1);
        assert_eq!((growing[0], growing[15]), (0.0, 1.0));
        let random = Pattern::Random.works(16, 7);
        assert!(random.iter().all(|&w| (0.0..1.0).contains(&w)));
        assert_ne!(random, Pattern::Random.works(16, 8));
        assert_eq!(random, Pattern::Random.works(16, 7));
        assert_eq!(Pattern::Changing.series_calls(10), 20);
        assert_eq!(Pattern::Changing.work(8, 9, 20, 16, 0), 1.0);
        assert_eq!(Pattern::Changing.work(8, 10, 20, 16, 0), 8.0 / 15.0);
        for p in Pattern::ALL {
            assert_eq!(Pattern::from_index(p.index()), Some(p));
        }
        for a in Algo::ALL {
            assert_eq!(Algo::from_index(a.index()), Some(a));
        }
    }

    #[test]
    fn the_ideal_table_puts_the_late_rank_at_a_leaf_and_beats_binomial() {
        let n = 16;
        let arrival: Vec<f64> = Pattern::Heavy
            .works(n, 0)
            .iter()
            .map(|w| w * 0.01)
            .collect();
        let send = 50e-6;
        let ideal = ideal_table(&arrival, send, 64);
        let model = AdaptiveModel::fixed(n, 0, &ideal).unwrap();
        assert!(model.children(8).is_empty(), "{ideal:?}");
        let binomial = AdaptiveModel::new(n, 0);
        let (b, _) = model_cost(&binomial, &arrival, send);
        let (i, _) = model_cost(&model, &arrival, send);
        assert!(i < b && (i - 0.01).abs() < 1e-9, "{i} vs {b}");
        // The greedy placement alone, for large jobs, is a valid table.
        let big: Vec<f64> = Pattern::Growing.works(256, 0);
        assert!(AdaptiveModel::fixed(256, 0, &ideal_table(&big, send, 64)).is_ok());
    }
}
