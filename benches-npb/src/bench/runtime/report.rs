//! From runs to figures: per configuration and metric the best run
//! (the [figures table](crate::bench::sweep::figures), every metric a time
//! per operation, the lowest kept), the table, the targets check and the
//! `--json` document.

use serde_json::{json, Map, Value};

use super::measure::{Samples, AINVOKE_WINDOW, PING_LEN, SAMPLES, SPAWN_BATCH};
use super::Config;
use crate::bench::sweep::figures::{self, Figure};
use crate::bench::sweep::jobs::{BenchConfig, Measured};
use crate::bench::sweep::report::{render, short, Target};
use crate::bench::sweep::Run;

/// One run: seconds per operation, by metric.
type RunResult = Run<Measured<Samples>>;

/// How a figure is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Ns,
    Us,
    CallsPerS,
}

impl Unit {
    fn label(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "µs",
            Unit::CallsPerS => "calls/s",
        }
    }

    /// The figure in this unit, from seconds per operation.
    fn value(self, per_op_s: f64) -> f64 {
        match self {
            Unit::Ns => per_op_s * 1e9,
            Unit::Us => per_op_s * 1e6,
            Unit::CallsPerS => 1.0 / per_op_s,
        }
    }

    fn format(self, per_op_s: f64) -> String {
        let v = self.value(per_op_s);
        match self {
            Unit::Ns | Unit::Us => short(v),
            Unit::CallsPerS if v >= 1e6 => format!("{:.2} M", v / 1e6),
            Unit::CallsPerS => format!("{:.0} k", v / 1e3),
        }
    }
}

/// Every metric, in table order, and the unit it is shown in.
const METRICS: [(&str, Unit); 8] = [
    ("switch", Unit::Ns),
    ("spawn", Unit::Ns),
    ("invoke_local", Unit::Us),
    ("invoke_remote", Unit::Us),
    ("round_trip", Unit::Us),
    ("ainvoke", Unit::CallsPerS),
    ("invoke_nowait", Unit::CallsPerS),
    ("barrier", Unit::Us),
];

fn unit_of(metric: &str) -> Unit {
    METRICS
        .iter()
        .find(|m| m.0 == metric)
        .map_or(Unit::Us, |m| m.1)
}

/// One row of the table: a metric measured in up to three configurations,
/// shown in the columns `sched`, `mttl-tcp`, `mttl-mpi`.
struct Row {
    label: String,
    metric: &'static str,
    cells: [Option<Config>; 3],
    target: &'static str,
}

fn rows() -> Vec<Row> {
    let program = [Some(Config::Sched), Some(Config::Tcp), Some(Config::Mpi)];
    let backends = [None, Some(Config::Tcp), Some(Config::Mpi)];
    vec![
        Row {
            label: "thread switch (yield ping-pong)".into(),
            metric: "switch",
            cells: program,
            target: "≤ 10",
        },
        Row {
            label: format!("spawn + run an empty thread (batches of {SPAWN_BATCH})"),
            metric: "spawn",
            cells: program,
            target: "≤ 100",
        },
        Row {
            label: "invoke on its own node".into(),
            metric: "invoke_local",
            cells: backends,
            target: "",
        },
        Row {
            label: "invoke round trip to rank 1".into(),
            metric: "invoke_remote",
            cells: backends,
            target: "tcp ≤ 10, mpi ≤ raw + 1",
        },
        Row {
            label: format!("  comm layer round trip, {PING_LEN} B"),
            metric: "round_trip",
            cells: [None, Some(Config::CommTcp), Some(Config::CommMpi)],
            target: "",
        },
        Row {
            label: format!("  raw rsmpi round trip, {PING_LEN} B"),
            metric: "round_trip",
            cells: [None, None, Some(Config::RawMpi)],
            target: "",
        },
        Row {
            label: format!("ainvoke to rank 1, {AINVOKE_WINDOW} in flight"),
            metric: "ainvoke",
            cells: backends,
            target: "≥ 1 M",
        },
        Row {
            label: format!("invoke_nowait to rank 1, {AINVOKE_WINDOW} per fence"),
            metric: "invoke_nowait",
            cells: backends,
            target: "≥ ainvoke",
        },
        Row {
            label: "barrier, 2 ranks".into(),
            metric: "barrier",
            cells: backends,
            target: "",
        },
    ]
}

/// Everything measured in one invocation.
#[derive(Debug, Clone)]
pub(super) struct Summary(figures::Figures<Config>);

impl Summary {
    /// The figures of the runs of each configuration.
    pub(super) fn new(runs: &[(Config, Vec<RunResult>)]) -> Summary {
        Summary(figures::Figures::new(&[], &[0], runs, |r| {
            let known = r.samples.iter().filter_map(|(m, s)| {
                let &(key, _) = METRICS.iter().find(|k| k.0 == m)?;
                Some((key, 0, s.clone()))
            });
            known.collect()
        }))
    }

    /// The best run's median of `config` for `metric`, seconds per
    /// operation, if measured.
    pub(super) fn get(&self, config: Config, metric: &'static str) -> Option<f64> {
        self.0.get(Figure::Best(config, metric), 0)
    }

    /// The table.
    pub(super) fn table(&self) -> String {
        let headers: Vec<String> = ["", "unit", "sched", "mttl-tcp", "mttl-mpi", "target"]
            .map(String::from)
            .to_vec();
        let rows: Vec<Vec<String>> = rows()
            .into_iter()
            .map(|row| {
                let unit = unit_of(row.metric);
                let mut cells = vec![row.label, unit.label().to_owned()];
                for config in row.cells {
                    cells.push(
                        config
                            .and_then(|c| self.get(c, row.metric))
                            .map_or_else(|| "-".to_owned(), |b| unit.format(b)),
                    );
                }
                cells.push(row.target.to_owned());
                cells
            })
            .collect();
        render(&headers, &rows, &[], true)
    }

    /// The project's performance targets, checked against the figures.
    pub(super) fn targets(&self) -> Vec<Target> {
        let judge = |metric: &'static str, config: Config, what: &str, met: fn(f64) -> bool| {
            let unit = unit_of(metric);
            Target::judge(
                format!("{what} ({})", config.column()),
                self.get(config, metric),
                |&b| met(unit.value(b)),
                |&b| format!("{} {}", unit.format(b), unit.label()),
                config.name(),
            )
        };
        let mut targets = Vec::new();
        for config in [Config::Sched, Config::Tcp, Config::Mpi] {
            targets.push(judge(
                "switch",
                config,
                "thread switch at most 10 ns",
                |v| v <= 10.0,
            ));
        }
        for config in [Config::Sched, Config::Tcp, Config::Mpi] {
            targets.push(judge("spawn", config, "spawn at most 100 ns", |v| {
                v <= 100.0
            }));
        }
        let invoke = "invoke round trip at most 10 µs";
        targets.push(judge("invoke_remote", Config::Tcp, invoke, |v| v <= 10.0));
        targets.push(Target::judge(
            "invoke round trip at most raw MPI's round trip + 1 µs (mttl-mpi)",
            self.get(Config::Mpi, "invoke_remote")
                .zip(self.get(Config::RawMpi, "round_trip"))
                .map(|(m, r)| (m * 1e6, r * 1e6)),
            |(m, r)| m - r <= 1.0,
            |(m, r)| format!("{m:.2} vs {r:.2} µs: {:+.2} µs", m - r),
            "mpi and raw-mpi",
        ));
        for config in [Config::Tcp, Config::Mpi] {
            let what = "ainvoke at least 1 M calls/s";
            targets.push(judge("ainvoke", config, what, |v| v >= 1e6));
        }
        targets
    }

    /// The figures' part of the `--json` document ([`Report`]).
    ///
    /// [`Report`]: crate::bench::sweep::report::Report
    pub(super) fn to_json(&self, sample_ms: u64) -> Value {
        let mut results = Map::new();
        for config in self.0.configs() {
            let mut figures = Map::new();
            for (key, unit) in METRICS {
                let Some(s) = self.get(config, key) else {
                    continue;
                };
                let min_s = self.0.get(Figure::Extreme(config, key), 0).unwrap_or(s);
                figures.insert(
                    key.into(),
                    json!({
                        "value": unit.value(s),
                        "unit": unit.label(),
                        "best_sample": unit.value(min_s),
                        "seconds_per_op": s,
                    }),
                );
            }
            if !figures.is_empty() {
                results.insert(config.name().into(), figures.into());
            }
        }
        json!({
            "samples": SAMPLES,
            "sample_ms": sample_ms,
            "ainvoke_window": AINVOKE_WINDOW,
            "spawn_batch": SPAWN_BATCH,
            "ping_bytes": PING_LEN,
            "results": results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::report::Verdict;

    fn run(metrics: Vec<(&str, Vec<f64>)>) -> RunResult {
        Run::new(Measured {
            backend: "tcp".into(),
            samples: metrics
                .into_iter()
                .map(|(m, s)| (m.to_owned(), s))
                .collect(),
        })
    }

    #[test]
    fn best_run_median_is_kept() {
        let runs = vec![(
            Config::Tcp,
            vec![
                run(vec![("invoke_remote", vec![10e-6, 30e-6, 12e-6])]),
                run(vec![("invoke_remote", vec![9e-6, 11e-6, 50e-6])]),
            ],
        )];
        let summary = Summary::new(&runs);
        let best = summary.get(Config::Tcp, "invoke_remote").expect("measured");
        assert!((best - 11e-6).abs() < 1e-12);
        let doc = summary.to_json(1);
        let best_sample = &doc["results"]["tcp"]["invoke_remote"]["best_sample"];
        assert!((best_sample.as_f64().unwrap() - 9.0).abs() < 1e-9);
        assert!(summary.get(Config::Mpi, "invoke_remote").is_none());
    }

    #[test]
    fn targets_are_judged_and_others_not_measured() {
        let runs = vec![(
            Config::Tcp,
            vec![run(vec![
                ("invoke_remote", vec![12e-6]),
                ("ainvoke", vec![0.5e-6]),
                ("switch", vec![6e-9]),
            ])],
        )];
        let summary = Summary::new(&runs);
        let targets = summary.targets();
        let verdict = |name: &str| {
            targets
                .iter()
                .find(|t| t.name.contains(name))
                .map(|t| t.verdict)
        };
        assert_eq!(
            verdict("invoke round trip at most 10 µs"),
            Some(Verdict::Missed)
        );
        assert_eq!(
            verdict("ainvoke at least 1 M calls/s (mttl-tcp)"),
            Some(Verdict::Met)
        );
        assert_eq!(
            verdict("thread switch at most 10 ns (mttl-tcp)"),
            Some(Verdict::Met)
        );
        assert_eq!(verdict("raw MPI"), Some(Verdict::NotMeasured));
        let table = summary.table();
        assert!(table.contains("12.0"), "{table}");
        assert!(table.contains("2.00 M"), "{table}");
    }

    #[test]
    fn units_format_for_reading() {
        assert_eq!(Unit::Ns.format(5.4e-9), "5.40");
        assert_eq!(Unit::Us.format(12.34e-6), "12.3");
        assert_eq!(Unit::CallsPerS.format(2.5e-6), "400 k");
        assert_eq!(Unit::CallsPerS.format(0.8e-6), "1.25 M");
    }
}
