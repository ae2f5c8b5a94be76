//! The figures table `mttl-bench comm`, `rwrite` and `runtime` report
//! from: configuration × metric × size → the samples of each run, and from
//! them the figures of step 4 of the [engine](super) (best-of, paired,
//! within one job), the tables laid out by size, and rows of the `--json`
//! documents (the CSV rows and plots read the same figures).
//!
//! A subcommand declares its metrics ([`Metric`]: a key, and which figure
//! of a run is the best) and says how its runs' results split into
//! `(metric, size, samples)`; a table is a list of [`Column`]s, each one
//! [`Figure`] at every size.

use serde_json::{Map, Value};

use super::jobs::{size_label, BenchConfig};
use super::report::{cell, median, render};
use super::{counted, median_ratio, paired, per_sweep, Ratio, Run};

/// Which figure of a run is the best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The lowest median (a time).
    Lowest,
    /// The highest median (a rate).
    Highest,
    /// The median in the run that is best by another metric (what that
    /// run's plan or breakdown was).
    RunBestBy(&'static str),
}

/// A metric: its key (in results and JSON) and which run is the best.
pub type Metric = (&'static str, Keep);

/// The samples of one run: `(metric, size, samples)`.
pub type Samples = Vec<(&'static str, u64, Vec<f64>)>;

/// One figure at a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure<C> {
    /// The best run's median ([`Keep`]).
    Best(C, &'static str),
    /// The best single sample of any run that counts.
    Extreme(C, &'static str),
    /// The best figure of the first over that of the second.
    Ratio(C, C, &'static str),
    /// The best figure of the first minus that of the second.
    Difference(C, C, &'static str),
    /// The first against the second sweep by sweep ([`paired`]).
    Paired(C, C, &'static str),
    /// Within each job of the configuration (one per sweep), the median of
    /// the first metric over that of the second; the median over the jobs.
    Within(C, &'static str, &'static str),
}

/// A table column: its header, its figure and how it is shown.
#[derive(Debug, Clone)]
pub struct Column<C> {
    pub header: String,
    pub figure: Figure<C>,
    pub show: fn(f64) -> String,
}

/// A JSON field: its key, and its value at a size.
pub type Field<'a> = (&'a str, &'a dyn Fn(u64) -> Option<f64>);

/// The figures of one invocation.
#[derive(Debug, Clone)]
pub struct Figures<C> {
    pub sizes: Vec<u64>,
    metrics: &'static [Metric],
    runs: Vec<(C, Vec<Run<Samples>>)>,
}

impl<C: BenchConfig> Figures<C> {
    /// The table of `runs` at `sizes`, each run's result split by
    /// `samples`; a metric not in `metrics` is a time ([`Keep::Lowest`]).
    pub fn new<R>(
        metrics: &'static [Metric],
        sizes: &[u64],
        runs: &[(C, Vec<Run<R>>)],
        samples: impl Fn(&R) -> Samples,
    ) -> Figures<C> {
        let runs = runs
            .iter()
            .map(|(c, runs)| {
                let runs = runs.iter().map(|r| Run {
                    sweep: r.sweep,
                    busy: r.busy,
                    result: samples(&r.result),
                });
                (*c, runs.collect())
            })
            .collect();
        Figures {
            sizes: sizes.to_vec(),
            metrics,
            runs,
        }
    }

    /// The configurations measured, in the order of the runs.
    pub fn configs(&self) -> impl Iterator<Item = C> + '_ {
        self.runs.iter().map(|r| r.0)
    }

    /// Whether `config` was measured.
    pub fn has(&self, config: C) -> bool {
        self.runs.iter().any(|r| r.0 == config)
    }

    fn runs(&self, config: C) -> &[Run<Samples>] {
        self.runs
            .iter()
            .find(|r| r.0 == config)
            .map_or(&[], |r| r.1.as_slice())
    }

    fn keep(&self, metric: &str) -> Keep {
        self.metrics
            .iter()
            .find(|m| m.0 == metric)
            .map_or(Keep::Lowest, |m| m.1)
    }

    /// `figure` at `size`, if measured.
    pub fn get(&self, figure: Figure<C>, size: u64) -> Option<f64> {
        match figure {
            Figure::Best(c, m) => self.best(c, m, size),
            Figure::Extreme(c, m) => {
                let all = counted(self.runs(c))
                    .into_iter()
                    .flat_map(|r| samples_of(&r.result, m, size).iter().copied());
                pick(all.map(|v| (v, v)), self.keep(m) == Keep::Highest)
            }
            Figure::Ratio(a, b, m) => Some(self.best(a, m, size)? / self.best(b, m, size)?),
            Figure::Difference(a, b, m) => Some(self.best(a, m, size)? - self.best(b, m, size)?),
            Figure::Paired(..) | Figure::Within(..) => self.ratio(figure, size).map(|r| r.value),
        }
    }

    /// `figure` at `size` with how many sweeps (or jobs) it is the median
    /// of: 0 but for [`Figure::Paired`] and [`Figure::Within`].
    pub fn ratio(&self, figure: Figure<C>, size: u64) -> Option<Ratio> {
        let at = |r: &Samples, m| median(samples_of(r, m, size));
        match figure {
            Figure::Paired(a, b, m) => paired(self.runs(a), self.runs(b), |r| at(r, m)),
            Figure::Within(c, m, against) => median_ratio(
                per_sweep(self.runs(c))
                    .into_iter()
                    .map(|r| (at(&r.result, m), at(&r.result, against))),
            ),
            _ => Some(Ratio {
                value: self.get(figure, size)?,
                count: 0,
            }),
        }
    }

    /// The best-of figure of `metric` for `config` at `size` ([`Keep`]).
    fn best(&self, config: C, metric: &str, size: u64) -> Option<f64> {
        let (by, higher) = match self.keep(metric) {
            Keep::Lowest => (metric, false),
            Keep::Highest => (metric, true),
            Keep::RunBestBy(by) => (by, self.keep(by) == Keep::Highest),
        };
        let medians = counted(self.runs(config)).into_iter().filter_map(|r| {
            let of = |m| median(samples_of(&r.result, m, size));
            Some((of(by)?, of(metric)?))
        });
        pick(medians, higher)
    }

    /// A table with one row per size: `size`, then `columns`; `gaps` as
    /// [`render`] has them.
    pub fn table(&self, columns: &[Column<C>], gaps: &[usize]) -> String {
        let mut headers = vec!["size".to_owned()];
        headers.extend(columns.iter().map(|c| c.header.clone()));
        let rows: Vec<Vec<String>> = self
            .sizes
            .iter()
            .map(|&size| {
                let mut row = vec![size_label(size)];
                row.extend(
                    columns
                        .iter()
                        .map(|c| cell(self.get(c.figure, size), c.show)),
                );
                row
            })
            .collect();
        render(&headers, &rows, gaps, false)
    }

    /// One JSON object per size at which `fields[0]` was measured:
    /// `size`, then each field's key and value (`null` if not measured; a
    /// whole number, such as a count, as an integer).
    pub fn rows(&self, fields: &[Field<'_>]) -> Vec<Value> {
        self.sizes
            .iter()
            .filter(|&&size| fields.first().is_some_and(|f| f.1(size).is_some()))
            .map(|&size| {
                let mut row = Map::new();
                row.insert("size".into(), size.into());
                for (key, value) in fields {
                    row.insert((*key).into(), value(size).map_or(Value::Null, number));
                }
                Value::Object(row)
            })
            .collect()
    }
}

/// `v` as a JSON number: an integer if it is a whole one.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        (v as i64).into()
    } else {
        v.into()
    }
}

/// The samples of `metric` at `size` in one run's samples.
fn samples_of<'a>(samples: &'a Samples, metric: &str, size: u64) -> &'a [f64] {
    samples
        .iter()
        .find(|(m, s, _)| *m == metric && *s == size)
        .map_or(&[], |s| s.2.as_slice())
}

/// The second of the pair whose first is the best (the highest if
/// `higher`), over the finite ones.
fn pick(pairs: impl Iterator<Item = (f64, f64)>, higher: bool) -> Option<f64> {
    pairs
        .filter(|(by, _)| by.is_finite())
        .reduce(|a, b| if (b.0 > a.0) == higher { b } else { a })
        .map(|p| p.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::jobs::Spec;

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Stack(&'static Spec);

    impl BenchConfig for Stack {
        fn spec(self) -> &'static Spec {
            self.0
        }
    }

    const fn stack(name: &'static str) -> Spec {
        Spec {
            name,
            column: name,
            mpi: false,
            env: &[],
            description: "a test stack",
        }
    }

    const METRICS: &[Metric] = &[
        ("time", Keep::Lowest),
        ("rate", Keep::Highest),
        ("plan", Keep::RunBestBy("rate")),
    ];

    fn run(sweep: usize, busy: f64, time: &[f64], rate: f64, plan: f64) -> Run<Samples> {
        Run {
            sweep,
            busy: Some(busy),
            result: vec![
                ("time", 8, time.to_vec()),
                ("rate", 8, vec![rate]),
                ("plan", 8, vec![plan]),
            ],
        }
    }

    const A: Stack = Stack(&stack("a"));
    const B: Stack = Stack(&stack("b"));

    fn figures() -> Figures<Stack> {
        let a = vec![
            run(0, 0.0, &[10.0, 30.0, 12.0], 1.0, 1.0),
            run(1, 0.0, &[9.0, 11.0, 50.0], 3.0, 3.0),
            run(2, 0.9, &[1.0], 99.0, 99.0),
        ];
        let b = vec![
            run(0, 0.0, &[10.0], 2.0, 0.0),
            run(1, 0.0, &[22.0], 1.0, 0.0),
        ];
        Figures::new(METRICS, &[8, 16], &[(A, a), (B, b)], Clone::clone)
    }

    #[test]
    fn the_best_undisturbed_run_is_kept_with_its_plan() {
        let f = figures();
        assert_eq!(f.get(Figure::Best(A, "time"), 8), Some(11.0));
        assert_eq!(f.get(Figure::Extreme(A, "time"), 8), Some(9.0));
        assert_eq!(f.get(Figure::Best(A, "rate"), 8), Some(3.0));
        assert_eq!(
            f.get(Figure::Best(A, "plan"), 8),
            Some(3.0),
            "of the best-rate run"
        );
        assert_eq!(f.get(Figure::Best(A, "time"), 16), None);
        assert_eq!(f.get(Figure::Ratio(A, B, "rate"), 8), Some(1.5));
        assert_eq!(f.get(Figure::Difference(A, B, "time"), 8), Some(1.0));
    }

    #[test]
    fn paired_and_one_job_figures_go_sweep_by_sweep() {
        let f = figures();
        // Sweep 0: 12 / 10; sweep 1: 11 / 22.
        let p = f.ratio(Figure::Paired(A, B, "time"), 8).expect("both ran");
        assert_eq!((p.value, p.count), ((1.2 + 0.5) / 2.0, 2));
        // Time over rate within each run of b: 10 / 2 and 22 / 1.
        assert_eq!(f.get(Figure::Within(B, "time", "rate"), 8), Some(13.5));
        assert_eq!(f.get(Figure::Paired(A, B, "time"), 16), None);
    }

    #[test]
    fn tables_and_rows_are_laid_out_by_size() {
        let f = figures();
        let columns = [Column {
            header: "a".into(),
            figure: Figure::Best(A, "time"),
            show: |v| format!("{v:.1}"),
        }];
        assert_eq!(
            f.table(&columns, &[]),
            "size     a\n   8  11.0\n  16     -\n"
        );
        let rate = |s| f.get(Figure::Best(B, "rate"), s);
        let rows = f.rows(&[("rate", &rate)]);
        assert_eq!(rows, [serde_json::json!({"size": 8, "rate": 2})]);
        assert_eq!(number(0.5), serde_json::json!(0.5));
    }
}
