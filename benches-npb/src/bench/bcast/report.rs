//! What a series measured, its figures over the steady calls, the tables
//! and the targets.
//!
//! Figures of one call: the broadcast's time (first entry to last exit),
//! the mean time a rank spends in it, and the total wait (the time every
//! rank but the root spends in it). A series' figure is the mean over its
//! steady calls: the second half of its (last) stage, when the learning
//! has had the first half. Ratios between algorithms are taken per
//! repetition (the series of one repetition run one after the other in the
//! same job) and their median is shown.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::pattern::{Algo, Pattern};

/// The figures of one broadcast, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CallTimes {
    pub(super) bcast: f64,
    pub(super) per_rank: f64,
    pub(super) total_wait: f64,
}

impl CallTimes {
    /// From every rank's (entry, exit), rank 0 the root.
    pub(super) fn from_spans(spans: impl Iterator<Item = (f64, f64)>) -> CallTimes {
        let (mut first, mut last, mut sum, mut waits, mut n) =
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0, 0usize);
        for (r, (a, b)) in spans.enumerate() {
            first = first.min(a);
            last = last.max(b);
            sum += b - a;
            if r > 0 {
                waits += b - a;
            }
            n += 1;
        }
        CallTimes {
            bcast: last - first,
            per_rank: sum / n.max(1) as f64,
            total_wait: waits,
        }
    }
}

/// How far an adaptive series' learning went (as the root counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Progress {
    pub(super) broadcasts: u64,
    pub(super) phases: u64,
    pub(super) changes: u64,
    pub(super) last_change_broadcast: u64,
    pub(super) last_change_phase: u64,
}

impl From<mttl::LearningProgress> for Progress {
    fn from(p: mttl::LearningProgress) -> Progress {
        Progress {
            broadcasts: p.broadcasts,
            phases: p.phases,
            changes: p.changes,
            last_change_broadcast: p.last_change_broadcast,
            last_change_phase: p.last_change_phase,
        }
    }
}

impl Progress {
    /// From a worker's JSON.
    pub(super) fn from_json(v: &Value) -> Option<Progress> {
        let f = |k: &str| v.get(k).and_then(Value::as_u64);
        Some(Progress {
            broadcasts: f("broadcasts")?,
            phases: f("phases")?,
            changes: f("changes")?,
            last_change_broadcast: f("last_change_broadcast")?,
            last_change_phase: f("last_change_phase")?,
        })
    }
}

/// One series of one algorithm.
#[derive(Debug, Clone)]
pub(super) struct Series {
    pub(super) algo: Algo,
    pub(super) rep: usize,
    pub(super) calls: Vec<CallTimes>,
    /// Adaptive only: at the end, and after the first half of the calls.
    pub(super) progress: Option<Progress>,
    pub(super) progress_half: Option<Progress>,
}

impl Series {
    /// The first steady call of a series of `pattern`.
    fn steady_from(&self, pattern: Pattern) -> usize {
        let n = self.calls.len();
        if pattern == Pattern::Changing {
            3 * n / 4
        } else {
            n / 2
        }
    }

    /// The mean figures over the steady calls.
    pub(super) fn steady(&self, pattern: Pattern) -> CallTimes {
        let calls = &self.calls[self.steady_from(pattern).min(self.calls.len())..];
        let k = calls.len().max(1) as f64;
        CallTimes {
            bcast: calls.iter().map(|c| c.bcast).sum::<f64>() / k,
            per_rank: calls.iter().map(|c| c.per_rank).sum::<f64>() / k,
            total_wait: calls.iter().map(|c| c.total_wait).sum::<f64>() / k,
        }
    }

    /// Phases the learning took after the pattern changed (the last
    /// change's phase minus the phases run by the half), 0 if nothing
    /// changed after it.
    pub(super) fn relearn_phases(&self) -> Option<u64> {
        let (end, half) = (self.progress?, self.progress_half?);
        Some(if end.last_change_broadcast > half.broadcasts {
            end.last_change_phase - half.phases
        } else {
            0
        })
    }
}

/// Every algorithm's series of one (where, n, pattern).
#[derive(Debug, Clone)]
pub(super) struct Case {
    /// `tcp job` or `simulated`.
    pub(super) place: &'static str,
    pub(super) n: usize,
    pub(super) pattern: Pattern,
    /// The unit of work, seconds.
    pub(super) work: f64,
    /// One line on the conditions (bytes, clocks, model).
    pub(super) note: String,
    pub(super) series: Vec<Series>,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

impl Case {
    fn of(&self, algo: Algo) -> impl Iterator<Item = &Series> {
        self.series.iter().filter(move |s| s.algo == algo)
    }

    /// The median over repetitions of `algo`'s steady figures.
    pub(super) fn figures(&self, algo: Algo) -> Option<CallTimes> {
        let s: Vec<CallTimes> = self.of(algo).map(|s| s.steady(self.pattern)).collect();
        (!s.is_empty()).then(|| CallTimes {
            bcast: median(s.iter().map(|c| c.bcast).collect()),
            per_rank: median(s.iter().map(|c| c.per_rank).collect()),
            total_wait: median(s.iter().map(|c| c.total_wait).collect()),
        })
    }

    /// The median over repetitions of `a`'s steady broadcast time over
    /// `b`'s in the same repetition.
    pub(super) fn ratio(&self, a: Algo, b: Algo) -> Option<f64> {
        let ratios: Vec<f64> = self
            .of(a)
            .filter_map(|x| {
                self.of(b)
                    .find(|y| y.rep == x.rep)
                    .map(|y| x.steady(self.pattern).bcast / y.steady(self.pattern).bcast)
            })
            .collect();
        (!ratios.is_empty()).then(|| median(ratios))
    }

    /// The adaptive series' worst (largest) figure of `f` over repetitions.
    fn worst_progress(&self, f: impl Fn(&Series) -> Option<u64>) -> Option<u64> {
        self.of(Algo::Adaptive).filter_map(f).max()
    }

    /// The table of this case.
    pub(super) fn table(&self) -> String {
        let mut t = String::new();
        let reps = self.of(Algo::Binomial).count();
        let _ = writeln!(
            t,
            "{}, {} ranks, pattern {}, work unit {} ({}); median of {reps} repetition(s)",
            self.place,
            self.n,
            self.pattern.name(),
            work_label(self.work),
            self.note
        );
        let _ = writeln!(
            t,
            "  {:<9} {:>10} {:>11} {:>13} {:>14} {:>17}",
            "algorithm",
            "bcast ms",
            "/ binomial",
            "per rank ms",
            "total wait ms",
            "settled call/phase"
        );
        for algo in Algo::ALL {
            let Some(f) = self.figures(algo) else {
                continue;
            };
            let ratio = self
                .ratio(algo, Algo::Binomial)
                .map_or("-".to_owned(), |r| format!("{r:.3}"));
            let settled = match algo {
                Algo::Adaptive => {
                    let call = self.worst_progress(|s| s.progress.map(|p| p.last_change_broadcast));
                    let phase = self.worst_progress(|s| s.progress.map(|p| p.last_change_phase));
                    match (call, phase) {
                        (Some(c), Some(p)) => format!("{c}/{p}"),
                        _ => "-".to_owned(),
                    }
                }
                _ => "-".to_owned(),
            };
            let _ = writeln!(
                t,
                "  {:<9} {:>10.3} {:>11} {:>13.3} {:>14.3} {:>17}",
                algo.name(),
                f.bcast * 1e3,
                ratio,
                f.per_rank * 1e3,
                f.total_wait * 1e3,
                settled
            );
        }
        if self.pattern == Pattern::Changing {
            if let Some(p) = self.worst_progress(Series::relearn_phases) {
                let _ = writeln!(
                    t,
                    "  re-learned after the change within {p} phase(s) (worst repetition)"
                );
            }
        }
        t
    }

    /// The case as JSON.
    pub(super) fn to_json(&self) -> Value {
        let algos: Vec<Value> = Algo::ALL
            .iter()
            .filter_map(|&a| {
                let f = self.figures(a)?;
                Some(json!({
                    "algorithm": a.name(),
                    "bcast_s": f.bcast,
                    "per_rank_s": f.per_rank,
                    "total_wait_s": f.total_wait,
                    "vs_binomial": self.ratio(a, Algo::Binomial),
                }))
            })
            .collect();
        json!({
            "place": self.place,
            "ranks": self.n,
            "pattern": self.pattern.name(),
            "work_s": self.work,
            "note": self.note,
            "algorithms": algos,
            "settled_call": self.worst_progress(|s| s.progress.map(|p| p.last_change_broadcast)),
            "settled_phase": self.worst_progress(|s| s.progress.map(|p| p.last_change_phase)),
            "relearn_phases": self.worst_progress(Series::relearn_phases),
        })
    }
}

/// A unit of work as `500 us` or `2 ms`.
fn work_label(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{} us", (seconds * 1e6 * 1000.0).round() / 1000.0)
    } else {
        format!("{} ms", (seconds * 1e3 * 1000.0).round() / 1000.0)
    }
}

/// One target's verdict.
#[derive(Debug, Clone)]
pub(super) struct Verdict {
    pub(super) target: String,
    pub(super) measured: String,
    pub(super) met: bool,
}

/// The targets over `cases`.
pub(super) fn targets(cases: &[Case]) -> Vec<Verdict> {
    let mut out = Vec::new();
    for c in cases {
        let at = format!("{}, {} ranks, work {}", c.place, c.n, work_label(c.work));
        let log2n = (c.n as f64).log2().ceil() as u64;
        match c.pattern {
            Pattern::Heavy if c.n >= 16 => {
                if let Some(r) = c.ratio(Algo::Adaptive, Algo::Binomial) {
                    out.push(Verdict {
                        target: format!("{at}, heavy: adaptive >= 30% shorter than binomial"),
                        measured: format!("{:.1}% shorter", (1.0 - r) * 100.0),
                        met: r <= 0.70,
                    });
                }
                if let Some(r) = c.ratio(Algo::Adaptive, Algo::Ideal) {
                    out.push(Verdict {
                        target: format!("{at}, heavy: adaptive within 10% of the ideal table"),
                        measured: format!("{:+.1}%", (r - 1.0) * 100.0),
                        met: r <= 1.10,
                    });
                }
            }
            Pattern::Balanced => {
                if let Some(r) = c.ratio(Algo::Adaptive, Algo::Binomial) {
                    out.push(Verdict {
                        target: format!("{at}, balanced: adaptive at most 2% slower than binomial"),
                        measured: format!("{:+.1}%", (r - 1.0) * 100.0),
                        met: r <= 1.02,
                    });
                }
            }
            Pattern::Changing => {
                if let Some(p) = c.worst_progress(Series::relearn_phases) {
                    out.push(Verdict {
                        target: format!("{at}, changing: re-learned within 2 phases"),
                        measured: format!("{p} phase(s)"),
                        met: p <= 2,
                    });
                }
            }
            _ => {}
        }
        if matches!(
            c.pattern,
            Pattern::Heavy | Pattern::Growing | Pattern::Random
        ) {
            if let Some(p) = c.worst_progress(|s| s.progress.map(|p| p.last_change_phase)) {
                out.push(Verdict {
                    target: format!(
                        "{at}, {}: settles within log2 N = {log2n} phases",
                        c.pattern.name()
                    ),
                    measured: format!("last change at phase {p}"),
                    met: p <= log2n,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(algo: Algo, rep: usize, bcast: f64) -> Series {
        Series {
            algo,
            rep,
            calls: vec![
                CallTimes {
                    bcast: 100.0,
                    per_rank: 1.0,
                    total_wait: 1.0
                };
                4
            ]
            .into_iter()
            .chain(std::iter::repeat_n(
                CallTimes {
                    bcast,
                    per_rank: 1.0,
                    total_wait: 1.0,
                },
                4,
            ))
            .collect(),
            progress: None,
            progress_half: None,
        }
    }

    #[test]
    fn spans_give_the_three_figures() {
        let c = CallTimes::from_spans([(0.0, 1.0), (0.5, 3.0), (2.0, 2.5)].into_iter());
        assert_eq!(c.bcast, 3.0);
        assert!((c.per_rank - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(c.total_wait, 3.0);
    }

    #[test]
    fn ratios_pair_repetitions_and_targets_judge_them() {
        let case = Case {
            place: "simulated",
            n: 16,
            pattern: Pattern::Heavy,
            work: 1e-3,
            note: String::new(),
            series: vec![
                series(Algo::Binomial, 0, 10.0),
                series(Algo::Adaptive, 0, 6.0),
                series(Algo::Ideal, 0, 5.9),
                series(Algo::Binomial, 1, 20.0),
                series(Algo::Adaptive, 1, 12.0),
                series(Algo::Ideal, 1, 11.0),
            ],
        };
        assert_eq!(case.figures(Algo::Binomial).unwrap().bcast, 15.0);
        assert!((case.ratio(Algo::Adaptive, Algo::Binomial).unwrap() - 0.6).abs() < 1e-12);
        let v = targets(&[case]);
        assert_eq!(v.len(), 2);
        assert!(v[0].met, "{v:?}");
        assert!(v[1].met, "{v:?}");
        let mut worse = Case {
            place: "simulated",
            n: 16,
            pattern: Pattern::Balanced,
            work: 1e-3,
            note: String::new(),
            series: vec![
                series(Algo::Binomial, 0, 10.0),
                series(Algo::Adaptive, 0, 10.5),
            ],
        };
        assert!(!targets(std::slice::from_ref(&worse))[0].met);
        worse.series[1] = series(Algo::Adaptive, 0, 10.1);
        assert!(targets(&[worse])[0].met);
    }
}
