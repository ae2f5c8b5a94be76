//! From runs to figures: per configuration and size the best run, for
//! mttl's backends against their references the paired figures and the
//! ratios in one job, the two tables, the `--json` document and the
//! targets check.
//!
//! A run's figure is the median of its samples (robust against a stray
//! slow sample); of the runs the best is kept: the lowest round trip, the
//! highest bandwidth (the VM is shared; slower runs measure neighbours).
//! `mpi-vs-raw` runs give a third comparison of the MPI backend with raw
//! rsmpi, [`Summary::one_job`]: the two measured in the same job, in turns;
//! `raw-vs-raw` runs the same comparison of raw rsmpi with itself, the
//! control that shows how far the method strays from 1.0 by itself.

use serde_json::{json, Map, Value};

use super::measure::{Plan, Samples, SizeSamples, SAMPLES};
use super::Config;
use crate::bench::sweep::jobs::{size_label, BenchConfig, Measured};
use crate::bench::sweep::report::{cell, median, render, Target, Verdict};
use crate::bench::sweep::{best, counted, median_ratio, paired, per_sweep, Ratio, Run};

/// The runs of one configuration.
type Runs = [Run<Measured<Samples>>];

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

/// How two stacks compare sweep by sweep (or job by job) at one size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Paired {
    /// The median ratio of the first's round trip to the second's.
    pub(super) rtt: f64,
    /// The same for bandwidth.
    pub(super) bw: f64,
    /// How many sweeps measured both.
    pub(super) sweeps: usize,
}

impl Paired {
    fn of(rtt: Option<Ratio>, bw: Option<Ratio>) -> Option<Paired> {
        let (rtt, bw) = rtt.zip(bw)?;
        Some(Paired {
            rtt: rtt.value,
            bw: bw.value,
            sweeps: rtt.count,
        })
    }
}

/// The configurations compared with a reference, and their references.
const PAIRS: [(Config, Config); 2] = [
    (Config::Tcp, Config::RawMpiTcp),
    (Config::Mpi, Config::RawMpi),
];

/// The table groups: a configuration and its reference.
const GROUPS: [[Config; 2]; 2] = [
    [Config::Tcp, Config::RawMpiTcp],
    [Config::Mpi, Config::RawMpi],
];

/// A table column: its header, and its cell at a size.
type Column<'a> = (String, Box<dyn Fn(u64) -> String + 'a>);

/// The median round trip and bandwidth of `samples` at `size`.
fn medians(samples: &[SizeSamples], size: u64) -> Option<(f64, f64)> {
    let s = samples.iter().find(|s| s.plan.size as u64 == size)?;
    median(&s.rtt_us).zip(median(&s.bw_bytes_per_s))
}

fn best_of(size: u64, runs: &Runs) -> Option<Best> {
    let at: Vec<&SizeSamples> = counted(runs)
        .into_iter()
        .filter_map(|r| {
            r.result
                .samples
                .sizes
                .iter()
                .find(|s| s.plan.size as u64 == size)
        })
        .collect();
    let all = |f: fn(&SizeSamples) -> &Vec<f64>| at.iter().flat_map(move |s| f(s).iter());
    Some(Best {
        plan: at.first()?.plan,
        rtt_us: best(at.iter().map(|s| median(&s.rtt_us)), false)?,
        rtt_min_us: best(all(|s| &s.rtt_us).map(|&v| Some(v)), false)?,
        bw_bytes_per_s: best(at.iter().map(|s| median(&s.bw_bytes_per_s)), true)?,
        bw_max_bytes_per_s: best(all(|s| &s.bw_bytes_per_s).map(|&v| Some(v)), true)?,
    })
}

/// The paired figures of `mine` against `theirs` at `size`.
fn paired_at(size: u64, mine: &Runs, theirs: &Runs) -> Option<Paired> {
    let of = |pick: fn((f64, f64)) -> f64| {
        paired(mine, theirs, |r| medians(&r.samples.sizes, size).map(pick))
    };
    Paired::of(of(|m| m.0), of(|m| m.1))
}

/// The first stack against the second in jobs where they took turns, at
/// `size`: in each job (one per sweep), the median of the first's samples
/// over the median of the second's; the median of that over the jobs.
fn one_job_at(size: u64, runs: &Runs) -> Option<Paired> {
    let jobs = per_sweep(runs);
    let of = |pick: fn((f64, f64)) -> f64| {
        median_ratio(jobs.iter().map(|r| {
            let s = &r.result.samples;
            (
                medians(&s.sizes, size).map(pick),
                medians(&s.reference, size).map(pick),
            )
        }))
    };
    Paired::of(of(|m| m.0), of(|m| m.1))
}

/// Everything measured in one invocation.
#[derive(Debug, Clone)]
pub(super) struct Summary {
    sizes: Vec<u64>,
    /// The configurations measured, and their best figures by size.
    best: Vec<(Config, Vec<Option<Best>>)>,
    /// Per pair of [`PAIRS`] measured, the paired figures by size.
    pairs: Vec<(Config, Config, Vec<Option<Paired>>)>,
    /// By size: the one-job ratios of `mpi-vs-raw`, and of `raw-vs-raw`.
    one_job: Vec<Option<Paired>>,
    control: Vec<Option<Paired>>,
}

fn fmt_us(us: f64) -> String {
    match us {
        us if us < 100.0 => format!("{us:.2}"),
        us if us < 10_000.0 => format!("{us:.1}"),
        us => format!("{us:.0}"),
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

fn fmt_ratio(r: f64) -> String {
    format!("{r:.2}")
}

impl Summary {
    /// Summarises the runs of each configuration at `sizes`.
    pub(super) fn new(sizes: &[u64], runs: &[(Config, Vec<Run<Measured<Samples>>>)]) -> Summary {
        let runs_of = |c: Config| {
            runs.iter()
                .find(|(k, _)| *k == c)
                .map(|(_, r)| r.as_slice())
        };
        let by_size = |f: &dyn Fn(u64) -> Option<Paired>| sizes.iter().map(|&s| f(s)).collect();
        let turns = |c: Config| match runs_of(c) {
            Some(r) => by_size(&|s| one_job_at(s, r)),
            None => vec![None; sizes.len()],
        };
        Summary {
            sizes: sizes.to_vec(),
            best: runs
                .iter()
                .map(|(c, r)| (*c, sizes.iter().map(|&s| best_of(s, r)).collect()))
                .collect(),
            pairs: PAIRS
                .iter()
                .filter_map(|&(c, reference)| {
                    let (mine, theirs) = runs_of(c).zip(runs_of(reference))?;
                    Some((c, reference, by_size(&|s| paired_at(s, mine, theirs))))
                })
                .collect(),
            one_job: turns(Config::MpiVsRaw),
            control: turns(Config::RawVsRaw),
        }
    }

    fn index(&self, size: u64) -> Option<usize> {
        self.sizes.iter().position(|&s| s == size)
    }

    /// How the MPI backend compares with raw rsmpi at `size` in one job.
    pub(super) fn one_job(&self, size: u64) -> Option<Paired> {
        self.one_job[self.index(size)?]
    }

    /// How raw rsmpi compares with itself at `size` in one job.
    pub(super) fn control(&self, size: u64) -> Option<Paired> {
        self.control[self.index(size)?]
    }

    /// How `config` compares with its reference at `size`, sweep by sweep.
    pub(super) fn paired(&self, config: Config, size: u64) -> Option<Paired> {
        let i = self.index(size)?;
        self.pairs.iter().find(|p| p.0 == config)?.2[i]
    }

    /// The best figures of `config` at `size`, if measured.
    pub(super) fn get(&self, config: Config, size: u64) -> Option<Best> {
        let i = self.index(size)?;
        self.best.iter().find(|b| b.0 == config)?.1[i]
    }

    fn has(&self, config: Config) -> bool {
        self.best.iter().any(|b| b.0 == config)
    }

    /// The round-trip and bandwidth tables.
    pub(super) fn tables(&self) -> String {
        let mut out = String::new();
        for bandwidth in [false, true] {
            let figure = |c: Config, size: u64| {
                let b = self.get(c, size)?;
                Some(if bandwidth {
                    b.bw_bytes_per_s
                } else {
                    b.rtt_us
                })
            };
            let pick = |p: Paired| if bandwidth { p.bw } else { p.rtt };
            let value: fn(f64) -> String = if bandwidth { fmt_mib } else { fmt_us };
            let mut headers = vec!["size".to_owned()];
            let mut rows: Vec<Vec<String>> =
                self.sizes.iter().map(|&s| vec![size_label(s)]).collect();
            let mut gaps = vec![0];
            for group in GROUPS {
                let mpi = group[0] == Config::Mpi;
                let mut columns: Vec<Column<'_>> = Vec::new();
                for c in group.into_iter().filter(|&c| self.has(c)) {
                    columns.push((
                        c.column().into(),
                        Box::new(move |s| cell(figure(c, s), value)),
                    ));
                }
                if self.has(group[0]) && self.has(group[1]) {
                    let both = move |s| figure(group[0], s).zip(figure(group[1], s));
                    if mpi && !bandwidth {
                        let diff =
                            move |s| cell(both(s).map(|(a, b)| a - b), |d| format!("{d:+.2}"));
                        columns.push(("mpi-raw µs".into(), Box::new(diff)));
                    }
                    let name = if mpi { "mpi/raw" } else { "tcp/ompi" };
                    let ratio = move |s| cell(both(s).map(|(a, b)| a / b), fmt_ratio);
                    columns.push((name.into(), Box::new(ratio)));
                    let paired = move |s| cell(self.paired(group[0], s).map(pick), fmt_ratio);
                    columns.push(("paired".into(), Box::new(paired)));
                }
                if mpi {
                    for (c, ratios) in [
                        (Config::MpiVsRaw, &self.one_job),
                        (Config::RawVsRaw, &self.control),
                    ] {
                        if self.has(c) {
                            let at = move |s| {
                                cell(self.index(s).and_then(|i| ratios[i]).map(pick), fmt_ratio)
                            };
                            columns.push((c.column().into(), Box::new(at)));
                        }
                    }
                }
                if columns.is_empty() {
                    continue;
                }
                for (header, at) in columns {
                    headers.push(header);
                    for (row, &size) in rows.iter_mut().zip(&self.sizes) {
                        row.push(at(size));
                    }
                }
                gaps.push(headers.len() - 1);
            }
            out.push_str(if bandwidth {
                "\nStreaming bandwidth, MiB/s of payload (higher is better)\n"
            } else {
                "Round trip, µs (lower is better; one-way latency is half)\n"
            });
            gaps.pop();
            out.push_str(&render(&headers, &rows, &gaps, false));
        }
        out
    }

    /// The whole invocation as one JSON document (without its `configs`
    /// and `jobs`, which come from the runs).
    pub(super) fn to_json(&self, reps: u32, method: &[String], notes: &[String]) -> Value {
        let rows = |figures: &[Option<Paired>], count: &str| -> Value {
            self.sizes
                .iter()
                .zip(figures)
                .filter_map(|(&size, p)| {
                    let p = (*p)?;
                    Some(json!({"size": size, "rtt_ratio": p.rtt, "bw_ratio": p.bw, count: p.sweeps}))
                })
                .collect()
        };
        let mut results = Map::new();
        for (c, best) in &self.best {
            let sizes = self.sizes.iter().zip(best).filter_map(|(&size, b)| {
                let b = (*b)?;
                Some(json!({
                    "size": size,
                    "rtt_us": b.rtt_us,
                    "rtt_min_us": b.rtt_min_us,
                    "bw_bytes_per_s": b.bw_bytes_per_s,
                    "bw_mib_per_s": mib_per_s(b.bw_bytes_per_s),
                    "bw_max_bytes_per_s": b.bw_max_bytes_per_s,
                    "rtt_iters": b.plan.rtt_iters,
                    "window": b.plan.window,
                    "windows": b.plan.windows,
                }))
            });
            results.insert(c.name().to_owned(), sizes.collect());
        }
        let mut paired = Map::new();
        for (c, reference, figures) in &self.pairs {
            paired.insert(
                format!("{}/{}", c.name(), reference.name()),
                rows(figures, "sweeps"),
            );
        }
        for (c, ratios) in [
            (Config::MpiVsRaw, &self.one_job),
            (Config::RawVsRaw, &self.control),
        ] {
            if ratios.iter().any(Option::is_some) {
                paired.insert(c.name().to_owned(), rows(ratios, "jobs"));
            }
        }
        let mut doc = crate::bench::sweep::report::document("comm", reps, method, notes);
        doc["samples"] = SAMPLES.into();
        doc["sizes"] = self.sizes.clone().into();
        doc["results"] = results.into();
        doc["paired"] = paired.into();
        doc["targets"] = crate::bench::sweep::report::targets_json(&self.targets());
        doc
    }

    /// The project's performance targets for the communication layer,
    /// checked against the figures.
    pub(super) fn targets(&self) -> Vec<Target> {
        let pair = |a: Config, b: Config, size| self.get(a, size).zip(self.get(b, size));
        let needs = |a: Config, b: Config, size| {
            format!("{} and {} at {}", a.name(), b.name(), size_label(size))
        };
        let (verdict, detail) = self.mpi_within_5_percent();
        vec![
            Target::judge(
                "mttl MPI backend: 8 B round trip at most 0.1 µs above raw rsmpi",
                pair(Config::Mpi, Config::RawMpi, 8),
                |(m, r)| m.rtt_us - r.rtt_us <= 0.1,
                |(m, r)| {
                    let delta = m.rtt_us - r.rtt_us;
                    format!("{:.3} vs {:.3} µs: {delta:+.3} µs", m.rtt_us, r.rtt_us)
                },
                &needs(Config::Mpi, Config::RawMpi, 8),
            ),
            Target {
                name: "mttl MPI backend: within 5% of raw rsmpi at 4 KiB and above".into(),
                verdict,
                detail,
            },
            Target::judge(
                "mttl TCP backend: 8 B round trip at most 10 µs",
                self.get(Config::Tcp, 8),
                |t| t.rtt_us <= 10.0,
                |t| format!("{:.2} µs", t.rtt_us),
                "tcp at 8",
            ),
            Target::judge(
                "mttl TCP backend: 8 B round trip not slower than Open MPI's TCP transport",
                pair(Config::Tcp, Config::RawMpiTcp, 8),
                |(t, o)| t.rtt_us <= o.rtt_us,
                |(t, o)| format!("{:.2} vs {:.2} µs", t.rtt_us, o.rtt_us),
                &needs(Config::Tcp, Config::RawMpiTcp, 8),
            ),
            Target::judge(
                "mttl TCP backend: 1 MiB bandwidth at least 0.9x Open MPI's TCP transport",
                pair(Config::Tcp, Config::RawMpiTcp, 1 << 20),
                |(t, o)| t.bw_bytes_per_s / o.bw_bytes_per_s >= 0.9,
                |(t, o)| {
                    let ratio = t.bw_bytes_per_s / o.bw_bytes_per_s;
                    let (a, b) = (fmt_mib(t.bw_bytes_per_s), fmt_mib(o.bw_bytes_per_s));
                    format!("{a} vs {b} MiB/s: {ratio:.2}x")
                },
                &needs(Config::Tcp, Config::RawMpiTcp, 1 << 20),
            ),
        ]
    }

    /// The target "mttl MPI backend within 5% of raw rsmpi at 4 KiB and
    /// above", size by size. Judged on the ratio in one job (`mpi-vs-raw`)
    /// where measured, the comparison that strays least, else on the best
    /// runs of the separate jobs. A size that misses by no more than the
    /// control (`raw-vs-raw`) strays from 1.00 there is unresolved rather
    /// than missed ([`Verdict::on_ratio`]). Each miss shows the other
    /// ratios measured.
    fn mpi_within_5_percent(&self) -> (Verdict, String) {
        let mut compared = 0;
        let (mut misses, mut unresolved) = (Vec::new(), Vec::new());
        let mut by_one_job = false;
        for &size in self.sizes.iter().filter(|&&s| s >= 4 << 10) {
            let best = pair_ratio(self.get(Config::Mpi, size), self.get(Config::RawMpi, size));
            let (one_job, control) = (self.one_job(size), self.control(size));
            let (judged, by) = match (one_job, best) {
                (Some(o), _) => (o, " in one job"),
                (None, Some(b)) => (b, ""),
                (None, None) => continue,
            };
            by_one_job |= one_job.is_some();
            compared += 1;
            for (what, pick, limit) in [
                ("round trip", (|p: Paired| p.rtt) as fn(Paired) -> f64, 1.05),
                ("bandwidth", |p: Paired| p.bw, 0.95),
            ] {
                let ratio = pick(judged);
                let strays = control
                    .filter(|_| one_job.is_some())
                    .map(|c| (pick(c) - 1.0).abs());
                let verdict = Verdict::on_ratio(ratio, limit, strays);
                if verdict == Verdict::Met {
                    continue;
                }
                let mut also = Vec::new();
                if verdict == Verdict::Unresolved {
                    also.push(format!("control strays {:.2}", strays.unwrap_or(0.0)));
                }
                if let Some(b) = best.filter(|_| one_job.is_some()) {
                    also.push(format!("best runs {:.2}x", pick(b)));
                }
                if let Some(p) = self.paired(Config::Mpi, size) {
                    also.push(format!("paired {:.2}x", pick(p)));
                }
                if let Some(c) = control.filter(|_| one_job.is_none()) {
                    also.push(format!("control {:.2}x", pick(c)));
                }
                let also = if also.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", also.join(", "))
                };
                let line = format!("{} {what} {ratio:.3}x{by}{also}", size_label(size));
                if verdict == Verdict::Unresolved {
                    unresolved.push(line);
                } else {
                    misses.push(line);
                }
            }
        }
        let sizes = format!(
            "{compared} sizes compared{}",
            if by_one_job { " in one job" } else { "" }
        );
        if compared == 0 {
            (
                Verdict::NotMeasured,
                "needs mpi and raw-mpi, or mpi-vs-raw, at sizes of 4K or more".into(),
            )
        } else if !misses.is_empty() {
            misses.extend(unresolved.into_iter().map(|u| format!("unresolved: {u}")));
            (Verdict::Missed, misses.join(", "))
        } else if !unresolved.is_empty() {
            let detail = format!(
                "{sizes}; missed only by as much as raw rsmpi strays from itself: {}",
                unresolved.join(", ")
            );
            (Verdict::Unresolved, detail)
        } else {
            (Verdict::Met, sizes)
        }
    }
}

/// The ratios of the best figures of two configurations.
fn pair_ratio(a: Option<Best>, b: Option<Best>) -> Option<Paired> {
    let (a, b) = a.zip(b)?;
    Some(Paired {
        rtt: a.rtt_us / b.rtt_us,
        bw: a.bw_bytes_per_s / b.bw_bytes_per_s,
        sweeps: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::report::targets_text;

    fn samples(size: u64, rtt: &[f64], bw: &[f64]) -> SizeSamples {
        SizeSamples {
            plan: Plan::for_size(size as usize),
            rtt_us: rtt.to_vec(),
            bw_bytes_per_s: bw.to_vec(),
        }
    }

    /// A run of sweep `sweep` at `size`, disturbed if `busy`; `reference`
    /// only for the one-job configurations.
    fn run(
        sweep: usize,
        size: u64,
        rtt: &[f64],
        bw: &[f64],
        reference: Option<(f64, f64)>,
    ) -> Run<Measured<Samples>> {
        Run {
            sweep,
            busy: Some(0.0),
            result: Measured {
                backend: "tcp".into(),
                samples: Samples {
                    sizes: vec![samples(size, rtt, bw)],
                    reference: reference
                        .map(|(r, b)| samples(size, &[r], &[b]))
                        .into_iter()
                        .collect(),
                },
            },
        }
    }

    fn disturbed(mut r: Run<Measured<Samples>>) -> Run<Measured<Samples>> {
        r.busy = Some(1.0);
        r
    }

    #[test]
    fn the_best_run_median_is_kept_and_disturbed_runs_count_last() {
        let runs = vec![
            run(0, 8, &[10.0, 30.0, 12.0], &[1.0, 5.0, 3.0], None),
            run(1, 8, &[9.0, 11.0, 50.0], &[2.0, 2.0, 9.0], None),
            disturbed(run(2, 8, &[1.0], &[99.0], None)),
        ];
        let summary = Summary::new(&[8], &[(Config::Tcp, runs)]);
        let best = summary.get(Config::Tcp, 8).expect("8 was measured");
        assert_eq!((best.rtt_us, best.rtt_min_us), (11.0, 9.0));
        assert_eq!((best.bw_bytes_per_s, best.bw_max_bytes_per_s), (3.0, 9.0));
        assert!(summary.get(Config::Tcp, 16).is_none() && summary.get(Config::Mpi, 8).is_none());
        let only_disturbed = vec![disturbed(run(0, 8, &[5.0], &[9.0], None))];
        let summary = Summary::new(&[8], &[(Config::Tcp, only_disturbed)]);
        assert_eq!(summary.get(Config::Tcp, 8).map(|b| b.rtt_us), Some(5.0));
    }

    #[test]
    fn paired_ratios_show_where_best_figures_miss() {
        let k4 = 4 << 10;
        // Raw MPI's one fast job (sweep 1) makes the best figures miss;
        // sweep by sweep, the two are even.
        let mpi = vec![
            run(0, k4, &[10.0], &[100.0], None),
            run(1, k4, &[10.0], &[100.0], None),
        ];
        let raw = vec![
            run(0, k4, &[10.0], &[100.0], None),
            run(1, k4, &[9.0], &[120.0], None),
        ];
        let summary = Summary::new(&[k4], &[(Config::Mpi, mpi), (Config::RawMpi, raw)]);
        let p = summary.paired(Config::Mpi, k4).expect("both measured");
        assert_eq!((p.rtt, p.sweeps), (1.0555555555555556, 2));
        let targets = targets_text(&summary.targets());
        assert!(
            targets.contains("4K round trip 1.111x (paired 1.06x)"),
            "{targets}"
        );
        assert!(
            targets.contains("4K bandwidth 0.833x (paired 0.92x)"),
            "{targets}"
        );
        assert!(summary.tables().contains("paired"));
        let doc = summary.to_json(2, &[], &[]);
        assert_eq!(doc["paired"]["mpi/raw-mpi"][0]["sweeps"], 2);
    }

    #[test]
    fn one_job_judges_and_the_control_tells_a_miss_from_noise() {
        let (k16, m16) = (16 << 10, 16 << 20);
        let one_job = |bw_16m: f64| {
            let mut r = run(0, k16, &[10.0], &[97.0], Some((10.0, 100.0)));
            let other = run(0, m16, &[10.0], &[bw_16m], Some((10.0, 100.0)));
            r.result.samples.sizes.extend(other.result.samples.sizes);
            r.result
                .samples
                .reference
                .extend(other.result.samples.reference);
            r
        };
        let summary = |bw_16m: f64, control: f64| {
            Summary::new(
                &[k16, m16],
                &[
                    (Config::Mpi, vec![run(0, k16, &[10.0], &[90.0], None)]),
                    (Config::RawMpi, vec![run(0, k16, &[10.0], &[100.0], None)]),
                    (Config::MpiVsRaw, vec![one_job(bw_16m)]),
                    (
                        Config::RawVsRaw,
                        vec![run(0, m16, &[10.0], &[control], Some((10.0, 100.0)))],
                    ),
                ],
            )
        };
        let verdict = |s: &Summary| {
            let t = s
                .targets()
                .into_iter()
                .find(|t| t.name.contains("within 5%"))
                .unwrap();
            (t.verdict, t.detail)
        };
        // 16K: 0.90 in the best runs, 0.97 in one job: judged in one job.
        // 16M: 0.93 in one job, and raw rsmpi strays 0.08 from itself there.
        let (v, detail) = verdict(&summary(93.0, 92.0));
        assert_eq!(v, Verdict::Unresolved, "{detail}");
        assert!(
            detail.contains("2 sizes compared in one job")
                && detail.contains("16M bandwidth 0.930x in one job (control strays 0.08)"),
            "{detail}"
        );
        let (v, detail) = verdict(&summary(93.0, 99.0));
        assert_eq!(v, Verdict::Missed, "{detail}");
        assert_eq!(verdict(&summary(99.0, 92.0)).0, Verdict::Met);
        let tables = summary(93.0, 92.0).tables();
        assert!(
            tables.contains("1 job") && tables.contains("control"),
            "{tables}"
        );
        let doc = summary(93.0, 101.0).to_json(1, &[], &[]);
        assert_eq!(doc["paired"]["raw-vs-raw"][0]["bw_ratio"], 1.01);
        assert_eq!(doc["paired"]["mpi-vs-raw"][1]["bw_ratio"], 0.93);
        assert_eq!(doc["paired"]["mpi-vs-raw"][1]["jobs"], 1);
    }

    #[test]
    fn tcp_targets_are_judged_and_others_not_measured() {
        let summary = Summary::new(
            &[8],
            &[(Config::Tcp, vec![run(0, 8, &[9.0], &[1.0], None)])],
        );
        let targets = summary.targets();
        let verdict = |name: &str| {
            targets
                .iter()
                .find(|t| t.name.contains(name))
                .map(|t| t.verdict)
        };
        assert_eq!(verdict("at most 10"), Some(Verdict::Met));
        assert_eq!(verdict("0.1 µs"), Some(Verdict::NotMeasured));
        assert!(summary.tables().contains("9.00"));
    }
}
