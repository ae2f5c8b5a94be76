//! From runs to figures: the best run per configuration and size, the two
//! tables, and the `--json` document; the targets check is in
//! `report/targets.rs`.
//!
//! A figure is the median of one run's samples (robust against a stray
//! slow sample), and of the K runs the best is kept: the lowest round trip,
//! the highest bandwidth (the VM is shared; slower runs measure neighbours).
//!
//! `mpi-vs-raw` runs give a third comparison of the MPI backend with raw
//! rsmpi, [`one_job`]: the two measured in the same job, in turns;
//! `raw-vs-raw` runs the same comparison of raw rsmpi with itself, the
//! control that shows how far the method strays from 1.0 by itself.

use serde_json::{json, Value};

use super::measure::{Plan, SizeSamples, SAMPLES};
use super::results::RunResult;
use super::Config;
use crate::bench::common::jobs::BenchConfig;
use crate::bench::common::report::{median, render_columns as render};

mod targets;

/// The best figures of one configuration at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Best {
    /// The plan the runs used.
    pub(super) plan: Plan,
    /// The lowest per-run median round trip, µs.
    pub(super) rtt_us: f64,
    /// The lowest round-trip sample of any run, µs.
    pub(super) rtt_min_us: f64,
    /// The highest per-run median bandwidth, bytes per second.
    pub(super) bw_bytes_per_s: f64,
    /// The highest bandwidth sample of any run, bytes per second.
    pub(super) bw_max_bytes_per_s: f64,
}

/// Everything measured in one invocation.
#[derive(Debug, Clone)]
pub(super) struct Summary {
    sizes: Vec<usize>,
    configs: Vec<ConfigSummary>,
    pairs: Vec<PairSummary>,
    /// By size, in the order of `sizes`: [`one_job`] ratios of
    /// `mpi-vs-raw`.
    one_job: Vec<Option<Paired>>,
    /// The same for `raw-vs-raw`, the control.
    control: Vec<Option<Paired>>,
}

/// How two configurations compare sweep by sweep at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Paired {
    /// The median over the sweeps of the first's round trip over the
    /// second's, each the median of its run's samples.
    pub(super) rtt: f64,
    /// The same for bandwidth.
    pub(super) bw: f64,
    /// How many sweeps measured both.
    pub(super) sweeps: usize,
}

/// The sweep-by-sweep comparison of `config` with its reference.
#[derive(Debug, Clone)]
struct PairSummary {
    config: Config,
    reference: Config,
    /// By size, in the order of `Summary::sizes`.
    paired: Vec<Option<Paired>>,
}

/// The configurations compared with a reference, and their references.
const PAIRS: [(Config, Config); 2] = [
    (Config::Tcp, Config::RawMpiTcp),
    (Config::Mpi, Config::RawMpi),
];

/// The run of each sweep that counts for pairing: the last undisturbed one
/// of the sweep, else its last one.
fn run_of_each_sweep(runs: &[RunResult]) -> Vec<(usize, &RunResult)> {
    let mut chosen: Vec<(usize, &RunResult)> = Vec::new();
    for run in runs {
        match chosen.iter_mut().find(|(sweep, _)| *sweep == run.sweep) {
            Some(slot) if !run.disturbed || slot.1.disturbed => slot.1 = run,
            Some(_) => {}
            None => chosen.push((run.sweep, run)),
        }
    }
    chosen
}

/// A JSON array of `row(size, figure)` for each size (in `sizes`' order)
/// that has a figure in `figures` (one per size).
fn rows_by_size<T: Copy>(
    sizes: &[usize],
    figures: &[Option<T>],
    row: impl Fn(usize, T) -> Value,
) -> Value {
    Value::Array(
        sizes
            .iter()
            .zip(figures)
            .filter_map(|(&size, figure)| figure.map(|f| row(size, f)))
            .collect(),
    )
}

/// [`Paired`] figures of `runs` against `reference` at `size`, from the
/// sweeps in which both measured it.
fn paired(size: usize, runs: &[RunResult], reference: &[RunResult]) -> Option<Paired> {
    let theirs = run_of_each_sweep(reference);
    median_ratios(
        size,
        run_of_each_sweep(runs)
            .into_iter()
            .filter_map(|(sweep, run)| {
                let (_, other) = theirs.iter().find(|(s, _)| *s == sweep)?;
                Some((run.sizes.as_slice(), other.sizes.as_slice()))
            }),
    )
}

/// The first stack against the second in jobs where they took turns
/// (`mpi-vs-raw`, `raw-vs-raw`) at `size`: in each job, the median of the
/// first's samples over the median of the second's (both from all their
/// turns); the median of that over the jobs (one per sweep, as for
/// [`paired`]).
fn one_job(size: usize, runs: &[RunResult]) -> Option<Paired> {
    median_ratios(
        size,
        run_of_each_sweep(runs)
            .into_iter()
            .map(|(_, run)| (run.sizes.as_slice(), run.reference.as_slice())),
    )
}

/// The median over `pairs` of the ratio of the first's figures at `size`
/// to the second's, each figure the median of its samples; pairs where
/// either did not measure `size` are left out.
fn median_ratios<'a>(
    size: usize,
    pairs: impl Iterator<Item = (&'a [SizeSamples], &'a [SizeSamples])>,
) -> Option<Paired> {
    let figures = |samples: &[SizeSamples]| {
        let s = samples.iter().find(|s| s.plan.size == size)?;
        median(&s.rtt_us).zip(median(&s.bw_bytes_per_s))
    };
    let (mut rtt, mut bw) = (Vec::new(), Vec::new());
    for (first, second) in pairs {
        if let Some(((r, b), (ro, bo))) = figures(first).zip(figures(second)) {
            rtt.push(r / ro);
            bw.push(b / bo);
        }
    }
    Some(Paired {
        rtt: median(&rtt)?,
        bw: median(&bw)?,
        sweeps: rtt.len(),
    })
}

#[derive(Debug, Clone)]
struct ConfigSummary {
    config: Config,
    backend: String,
    runs: usize,
    /// Runs that were not disturbed by other processes.
    clean_runs: usize,
    /// By size, in the order of `Summary::sizes`.
    best: Vec<Option<Best>>,
}

fn best_of(size: usize, runs: &[RunResult]) -> Option<Best> {
    let mut best: Option<Best> = None;
    for s in runs
        .iter()
        .flat_map(|r| &r.sizes)
        .filter(|s| s.plan.size == size)
    {
        let (Some(rtt), Some(bw)) = (median(&s.rtt_us), median(&s.bw_bytes_per_s)) else {
            continue;
        };
        let rtt_min = s.rtt_us.iter().copied().fold(f64::INFINITY, f64::min);
        let bw_max = s.bw_bytes_per_s.iter().copied().fold(0.0, f64::max);
        let b = best.get_or_insert(Best {
            plan: s.plan,
            rtt_us: rtt,
            rtt_min_us: rtt_min,
            bw_bytes_per_s: bw,
            bw_max_bytes_per_s: bw_max,
        });
        b.rtt_us = b.rtt_us.min(rtt);
        b.rtt_min_us = b.rtt_min_us.min(rtt_min);
        b.bw_bytes_per_s = b.bw_bytes_per_s.max(bw);
        b.bw_max_bytes_per_s = b.bw_max_bytes_per_s.max(bw_max);
    }
    best
}

/// `size` as a short label: `8`, `4K`, `16M`.
pub(super) fn size_label(size: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (unit, suffix) in UNITS {
        if size >= unit && size % unit == 0 {
            return format!("{}{suffix}", size / unit);
        }
    }
    size.to_string()
}

fn fmt_us(us: f64) -> String {
    if us < 100.0 {
        format!("{us:.2}")
    } else if us < 10_000.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn mib_per_s(bytes_per_s: f64) -> f64 {
    bytes_per_s / f64::from(1u32 << 20)
}

fn fmt_mib(bytes_per_s: f64) -> String {
    let mib = mib_per_s(bytes_per_s);
    if mib < 100.0 {
        format!("{mib:.1}")
    } else {
        format!("{mib:.0}")
    }
}

impl Summary {
    /// Summarises the runs of each configuration at `sizes`: the best of
    /// the undisturbed runs, or of all runs if every one was disturbed.
    pub(super) fn new(sizes: &[usize], runs: &[(Config, Vec<RunResult>)]) -> Summary {
        let configs = runs
            .iter()
            .map(|(config, runs)| {
                let clean: Vec<RunResult> = runs.iter().filter(|r| !r.disturbed).cloned().collect();
                let counted = if clean.is_empty() { runs } else { &clean };
                ConfigSummary {
                    config: *config,
                    backend: runs.first().map(|r| r.backend.clone()).unwrap_or_default(),
                    runs: runs.len(),
                    clean_runs: clean.len(),
                    best: sizes.iter().map(|&size| best_of(size, counted)).collect(),
                }
            })
            .collect();
        let runs_of = |config: Config| {
            runs.iter()
                .find(|(c, _)| *c == config)
                .map(|(_, runs)| runs.as_slice())
        };
        let pairs = PAIRS
            .iter()
            .filter_map(|&(config, reference)| {
                let (mine, theirs) = runs_of(config).zip(runs_of(reference))?;
                Some(PairSummary {
                    config,
                    reference,
                    paired: sizes
                        .iter()
                        .map(|&size| paired(size, mine, theirs))
                        .collect(),
                })
            })
            .collect();
        let turns = |config: Config| match runs_of(config) {
            Some(runs) => sizes.iter().map(|&size| one_job(size, runs)).collect(),
            None => vec![None; sizes.len()],
        };
        Summary {
            sizes: sizes.to_vec(),
            configs,
            pairs,
            one_job: turns(Config::MpiVsRaw),
            control: turns(Config::RawVsRaw),
        }
    }

    /// How the MPI backend compares with raw rsmpi at `size` in one job.
    pub(super) fn one_job(&self, size: usize) -> Option<Paired> {
        let i = self.sizes.iter().position(|&s| s == size)?;
        self.one_job[i]
    }

    /// How raw rsmpi compares with itself at `size` in one job.
    pub(super) fn control(&self, size: usize) -> Option<Paired> {
        let i = self.sizes.iter().position(|&s| s == size)?;
        self.control[i]
    }

    /// How `config` compares with its reference at `size`, sweep by sweep.
    pub(super) fn paired(&self, config: Config, size: usize) -> Option<Paired> {
        let i = self.sizes.iter().position(|&s| s == size)?;
        self.pairs
            .iter()
            .find(|p| p.config == config)
            .and_then(|p| p.paired[i])
    }

    /// The best figures of `config` at `size`, if measured.
    pub(super) fn get(&self, config: Config, size: usize) -> Option<Best> {
        let i = self.sizes.iter().position(|&s| s == size)?;
        self.configs
            .iter()
            .find(|c| c.config == config)
            .and_then(|c| c.best[i])
    }

    fn has(&self, config: Config) -> bool {
        self.configs.iter().any(|c| c.config == config)
    }

    /// The round-trip and bandwidth tables.
    pub(super) fn tables(&self) -> String {
        let cell = |v: Option<f64>, f: fn(f64) -> String| v.map_or("-".to_owned(), f);
        let mut out = String::new();
        for bandwidth in [false, true] {
            let mut headers = vec!["size".to_owned()];
            let mut gaps = vec![0];
            for group in [
                [Config::Tcp, Config::RawMpiTcp],
                [Config::Mpi, Config::RawMpi],
            ] {
                let present: Vec<Config> = group.into_iter().filter(|&c| self.has(c)).collect();
                let turns: Vec<Config> = [Config::MpiVsRaw, Config::RawVsRaw]
                    .into_iter()
                    .filter(|&c| group[0] == Config::Mpi && self.has(c))
                    .collect();
                if present.is_empty() && turns.is_empty() {
                    continue;
                }
                headers.extend(present.iter().map(|c| c.column().to_owned()));
                if present.len() == 2 {
                    let name = if group[0] == Config::Tcp {
                        "tcp/ompi"
                    } else {
                        "mpi/raw"
                    };
                    if group[0] == Config::Mpi && !bandwidth {
                        headers.push("mpi-raw µs".into());
                    }
                    headers.push(name.into());
                    headers.push("paired".into());
                }
                headers.extend(turns.iter().map(|c| c.column().to_owned()));
                gaps.push(headers.len() - 1);
            }
            let figure = |config: Config, size: usize| {
                self.get(config, size).map(|b| {
                    if bandwidth {
                        b.bw_bytes_per_s
                    } else {
                        b.rtt_us
                    }
                })
            };
            let rows: Vec<Vec<String>> = self
                .sizes
                .iter()
                .map(|&size| {
                    let mut row = vec![size_label(size)];
                    let value_fmt: fn(f64) -> String = if bandwidth { fmt_mib } else { fmt_us };
                    let ratio = |a: Option<f64>, b: Option<f64>| {
                        cell(a.zip(b).map(|(a, b)| a / b), |r| format!("{r:.2}"))
                    };
                    for group in [
                        [Config::Tcp, Config::RawMpiTcp],
                        [Config::Mpi, Config::RawMpi],
                    ] {
                        for c in group.into_iter().filter(|&c| self.has(c)) {
                            row.push(cell(figure(c, size), value_fmt));
                        }
                        let pick = |p: Paired| if bandwidth { p.bw } else { p.rtt };
                        if self.has(group[0]) && self.has(group[1]) {
                            let (a, b) = (figure(group[0], size), figure(group[1], size));
                            if group[0] == Config::Mpi && !bandwidth {
                                row.push(cell(a.zip(b).map(|(a, b)| a - b), |d| {
                                    format!("{d:+.2}")
                                }));
                            }
                            row.push(ratio(a, b));
                            row.push(cell(self.paired(group[0], size).map(pick), |r| {
                                format!("{r:.2}")
                            }));
                        }
                        if group[0] == Config::Mpi {
                            for (config, ratio) in [
                                (Config::MpiVsRaw, self.one_job(size)),
                                (Config::RawVsRaw, self.control(size)),
                            ] {
                                if self.has(config) {
                                    row.push(cell(ratio.map(pick), |r| format!("{r:.2}")));
                                }
                            }
                        }
                    }
                    row
                })
                .collect();
            out.push_str(if bandwidth {
                "\nStreaming bandwidth, MiB/s of payload (higher is better)\n"
            } else {
                "Round trip, µs (lower is better; one-way latency is half)\n"
            });
            gaps.pop();
            out.push_str(&render(&headers, &rows, &gaps));
        }
        out
    }

    /// The whole invocation as one JSON document.
    pub(super) fn to_json(&self, reps: u32, method: &[String], notes: &[String]) -> Value {
        let configs: Vec<Value> = self
            .configs
            .iter()
            .map(|c| {
                json!({
                    "name": c.config.name(),
                    "column": c.config.column(),
                    "description": c.config.description(),
                    "backend": c.backend,
                    "runs": c.runs,
                    "undisturbed_runs": c.clean_runs,
                })
            })
            .collect();
        let mut results = serde_json::Map::new();
        for c in &self.configs {
            let rows = rows_by_size(&self.sizes, &c.best, |size, b| {
                json!({
                    "size": size,
                    "rtt_us": b.rtt_us,
                    "rtt_min_us": b.rtt_min_us,
                    "bw_bytes_per_s": b.bw_bytes_per_s,
                    "bw_mib_per_s": mib_per_s(b.bw_bytes_per_s),
                    "bw_max_bytes_per_s": b.bw_max_bytes_per_s,
                    "rtt_iters": b.plan.rtt_iters,
                    "window": b.plan.window,
                    "windows": b.plan.windows,
                })
            });
            results.insert(c.config.name().to_owned(), rows);
        }
        let mut paired = serde_json::Map::new();
        for p in &self.pairs {
            let rows = rows_by_size(&self.sizes, &p.paired, |size, q| {
                json!({
                    "size": size,
                    "rtt_ratio": q.rtt,
                    "bw_ratio": q.bw,
                    "sweeps": q.sweeps,
                })
            });
            paired.insert(format!("{}/{}", p.config.name(), p.reference.name()), rows);
        }
        for (config, ratios) in [
            (Config::MpiVsRaw, &self.one_job),
            (Config::RawVsRaw, &self.control),
        ] {
            if ratios.iter().any(Option::is_some) {
                let rows = rows_by_size(&self.sizes, ratios, |size, q| {
                    json!({
                        "size": size,
                        "rtt_ratio": q.rtt,
                        "bw_ratio": q.bw,
                        "jobs": q.sweeps,
                    })
                });
                paired.insert(config.name().to_owned(), rows);
            }
        }
        let targets: Vec<Value> = self
            .targets()
            .into_iter()
            .map(|t| json!({ "target": t.name, "status": t.verdict.word(), "detail": t.detail }))
            .collect();
        json!({
            "benchmark": "comm",
            "ranks": 2,
            "reps": reps,
            "samples": SAMPLES,
            "sizes": self.sizes,
            "method": method,
            "configs": configs,
            "results": results,
            "paired": paired,
            "targets": targets,
            "notes": notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::comm::measure::SizeSamples;

    pub(super) fn run(rtt: &[f64], bw: &[f64]) -> RunResult {
        RunResult {
            backend: "tcp".into(),
            sizes: vec![SizeSamples {
                plan: Plan::for_size(8),
                rtt_us: rtt.to_vec(),
                bw_bytes_per_s: bw.to_vec(),
            }],
            reference: Vec::new(),
            disturbed: false,
            sweep: 0,
        }
    }

    /// An `mpi-vs-raw` run at `size`: the backend's samples, then raw's.
    pub(super) fn one_job_run(
        sweep: usize,
        size: usize,
        mpi: (&[f64], &[f64]),
        raw: (f64, f64),
    ) -> RunResult {
        let samples = |rtt: &[f64], bw: &[f64]| SizeSamples {
            plan: Plan::for_size(size),
            rtt_us: rtt.to_vec(),
            bw_bytes_per_s: bw.to_vec(),
        };
        RunResult {
            backend: "mpi".into(),
            sizes: vec![samples(mpi.0, mpi.1)],
            reference: vec![samples(&[raw.0], &[raw.1])],
            disturbed: false,
            sweep,
        }
    }

    pub(super) fn in_sweep(sweep: usize, rtt: f64, bw: f64) -> RunResult {
        RunResult {
            sweep,
            ..run(&[rtt], &[bw])
        }
    }

    #[test]
    fn paired_ratios_are_the_median_of_each_sweeps_ratio() {
        let mpi = vec![
            in_sweep(0, 11.0, 90.0),
            in_sweep(1, 30.0, 50.0),
            in_sweep(2, 10.0, 100.0),
            // Run again after a disturbed run: the undisturbed one counts.
            RunResult {
                disturbed: true,
                ..in_sweep(3, 1.0, 1.0)
            },
            in_sweep(3, 20.0, 50.0),
        ];
        // Sweep 1 of raw MPI was a slow job: the best-of ratio hides it,
        // the pairing does not.
        let raw = vec![
            in_sweep(0, 10.0, 100.0),
            in_sweep(1, 30.0, 50.0),
            in_sweep(2, 10.0, 100.0),
            in_sweep(3, 20.0, 50.0),
            in_sweep(4, 5.0, 200.0),
        ];
        let summary = Summary::new(&[8], &[(Config::Mpi, mpi), (Config::RawMpi, raw)]);
        let p = summary.paired(Config::Mpi, 8).expect("both measured 8");
        assert_eq!(p.sweeps, 4, "sweep 4 has no mpi run");
        assert_eq!((p.rtt, p.bw), (1.0, 1.0));
        assert!(summary.paired(Config::Tcp, 8).is_none());
        assert!(summary.paired(Config::Mpi, 16).is_none());
        let tables = summary.tables();
        assert!(tables.contains("paired"), "{tables}");

        let doc = summary.to_json(5, &[], &[]);
        assert_eq!(doc["paired"]["mpi/raw-mpi"][0]["sweeps"], 4);
    }

    #[test]
    fn one_job_ratios_divide_medians_within_each_job() {
        let k16 = 16 << 10;
        // Job 0: medians 10 / 8 and 90 / 100; job 1 even; job 2 fast.
        let runs = vec![
            one_job_run(
                0,
                k16,
                (&[10.0, 50.0, 9.0], &[90.0, 1.0, 95.0]),
                (8.0, 100.0),
            ),
            one_job_run(1, k16, (&[5.0], &[200.0]), (5.0, 200.0)),
            one_job_run(2, k16, (&[4.0], &[300.0]), (5.0, 250.0)),
        ];
        let summary = Summary::new(&[k16], &[(Config::MpiVsRaw, runs)]);
        let o = summary.one_job(k16).expect("measured");
        assert_eq!(o.sweeps, 3);
        assert_eq!((o.rtt, o.bw), (1.0, 1.0));
        assert!(summary.one_job(8).is_none());
        let tables = summary.tables();
        assert!(tables.contains("1 job"), "{tables}");
        assert_eq!(
            summary.to_json(3, &[], &[])["paired"]["mpi-vs-raw"][0]["jobs"],
            3
        );
        // Alone, it judges the target.
        let targets = summary.targets_text();
        assert!(targets.contains("1 sizes compared"), "{targets}");
    }

    #[test]
    fn best_run_median_is_kept() {
        let runs = vec![
            run(&[10.0, 30.0, 12.0], &[1.0, 5.0, 3.0]),
            run(&[9.0, 11.0, 50.0], &[2.0, 2.0, 9.0]),
        ];
        let summary = Summary::new(&[8], &[(Config::Tcp, runs)]);
        let best = summary.get(Config::Tcp, 8).expect("8 was measured");
        assert_eq!(best.rtt_us, 11.0);
        assert_eq!(best.rtt_min_us, 9.0);
        assert_eq!(best.bw_bytes_per_s, 3.0);
        assert_eq!(best.bw_max_bytes_per_s, 9.0);
        assert!(summary.get(Config::Tcp, 16).is_none());
        assert!(summary.get(Config::Mpi, 8).is_none());
    }

    #[test]
    fn disturbed_runs_count_only_when_nothing_else_was_measured() {
        let mut slow = run(&[50.0], &[1.0]);
        slow.disturbed = true;
        let fast_but_disturbed = RunResult {
            disturbed: true,
            ..run(&[5.0], &[9.0])
        };
        let clean = run(&[10.0], &[2.0]);
        let summary = Summary::new(
            &[8],
            &[(Config::Tcp, vec![fast_but_disturbed.clone(), clean])],
        );
        assert_eq!(summary.get(Config::Tcp, 8).map(|b| b.rtt_us), Some(10.0));
        let summary = Summary::new(&[8], &[(Config::Tcp, vec![fast_but_disturbed, slow])]);
        assert_eq!(summary.get(Config::Tcp, 8).map(|b| b.rtt_us), Some(5.0));
    }

    #[test]
    fn labels_use_binary_units() {
        assert_eq!(size_label(8), "8");
        assert_eq!(size_label(4096), "4K");
        assert_eq!(size_label(16 << 20), "16M");
        assert_eq!(size_label(1000), "1000");
    }
}
