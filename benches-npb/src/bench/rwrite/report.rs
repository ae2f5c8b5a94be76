//! From the runs to the figures: per configuration and size, the best run
//! (highest median throughput over the sweeps; over the undisturbed ones if
//! there are any) and its breakdown, each mttl configuration's ratio to its
//! reference, the targets check, and the table, JSON and CSV forms of all
//! that, from the [figures table](crate::bench::sweep::figures).
//!
//! | mttl         | reference  | same transport                          |
//! |--------------|------------|-----------------------------------------|
//! | `mttl-mpi`   | `raw-mpi`  | Open MPI's default (shared memory here) |
//! | `mttl-owned` | `raw-mpi`  | the same                                |
//! | `mttl-tcp`   | `ompi-tcp` | TCP on loopback (`raw-mpi-tcp`)         |

use std::fmt::Write as _;

use plotters::prelude::SeriesLabelPosition;
use plotters::style::full_palette::{BLUE_700, GREEN_700, ORANGE_700, PURPLE_700, RED_700};
use serde_json::{json, Value};

use super::measure::SizeSamples;
use super::Config;
use crate::bench::sweep::figures::{Column, Figure, Figures, Keep, Metric};
use crate::bench::sweep::jobs::{size_label, BenchConfig, Measured};
use crate::bench::sweep::plot::{Axis, LineChart, Panel, Series};
use crate::bench::sweep::report::{render, short, Target};
use crate::bench::sweep::Run;

/// One run: rank 0's samples for every size.
type RunResult = Run<Measured<Vec<SizeSamples>>>;

/// The paper's comparison: remote-write throughput against raw MPI.
pub(super) const TARGET_SMALL: (u64, f64) = (512, 0.8);
/// From this size up, the large-message target.
pub(super) const TARGET_LARGE: (u64, f64) = (64 << 10, 0.95);

/// Each mttl configuration and the raw MPI one it is compared with.
pub(super) const PAIRS: [(Config, Config); 3] = [
    (Config::Mpi, Config::RawMpi),
    (Config::MpiOwned, Config::RawMpi),
    (Config::Tcp, Config::RawMpiTcp),
];

/// Throughput (bytes per second) decides the best run; the breakdown and
/// plan are that run's.
const METRICS: &[Metric] = &[
    ("bytes_per_s", Keep::Highest),
    ("issue_us", Keep::RunBestBy("bytes_per_s")),
    ("sync_us", Keep::RunBestBy("bytes_per_s")),
    ("window", Keep::RunBestBy("bytes_per_s")),
    ("windows", Keep::RunBestBy("bytes_per_s")),
];

/// The reference `config` is compared with, if it is an mttl one.
pub(super) fn reference_of(config: Config) -> Option<Config> {
    PAIRS.iter().find(|(m, _)| *m == config).map(|&(_, r)| r)
}

/// Every configuration's best figures, by size.
#[derive(Debug, Clone)]
pub(super) struct Summary(Figures<Config>);

impl Summary {
    /// The best run of each configuration at each size.
    pub(super) fn new(sizes: &[u64], runs: &[(Config, Vec<RunResult>)]) -> Summary {
        Summary(Figures::new(METRICS, sizes, runs, |r| {
            let mut samples = Vec::new();
            for s in &r.samples {
                samples.extend([
                    ("bytes_per_s", s.size, s.bytes_per_s.clone()),
                    ("issue_us", s.size, s.issue_us.clone()),
                    ("sync_us", s.size, s.sync_us.clone()),
                    ("window", s.size, vec![s.window as f64]),
                    ("windows", s.size, vec![s.windows as f64]),
                ]);
            }
            samples
        }))
    }

    /// The best run's `metric` of `config` at `size` (`mb_per_s`: its
    /// throughput in MB/s).
    pub(super) fn get(&self, config: Config, metric: &'static str, size: u64) -> Option<f64> {
        if metric == "mb_per_s" {
            return Some(self.get(config, "bytes_per_s", size)? / 1e6);
        }
        self.0.get(Figure::Best(config, metric), size)
    }

    /// mttl's throughput over its reference's, at `size`.
    pub(super) fn ratio(&self, config: Config, size: u64) -> Option<f64> {
        let figure = Figure::Ratio(config, reference_of(config)?, "bytes_per_s");
        self.0.get(figure, size).filter(|r| r.is_finite())
    }

    /// The pairs both of whose configurations were measured.
    fn pairs(&self) -> impl Iterator<Item = (Config, Config)> + '_ {
        PAIRS
            .into_iter()
            .filter(|(m, r)| self.0.has(*m) && self.0.has(*r))
    }

    /// Both targets for every pair measured: mttl's throughput at least
    /// [`TARGET_SMALL`]'s share of its reference's at its size, and
    /// [`TARGET_LARGE`]'s at every size from its (the paper lost up to 50%
    /// below 512 B); one target not measured if no pair was.
    pub(super) fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        for (m, r) in self.pairs() {
            for ((from, min), every) in [(TARGET_SMALL, false), (TARGET_LARGE, true)] {
                let worst = self
                    .0
                    .sizes
                    .iter()
                    .filter(|&&s| if every { s >= from } else { s == from })
                    .filter_map(|&s| Some((self.ratio(m, s)?, s)))
                    .min_by(|a, b| a.0.total_cmp(&b.0));
                let at = if every { "at every size from" } else { "at" };
                targets.push(Target::judge(
                    format!(
                        "{} vs {}: remote-write throughput >= {min:.2}x {at} {}",
                        m.column(),
                        r.column(),
                        size_label(from)
                    ),
                    worst,
                    |&(ratio, _)| ratio >= min,
                    |&(ratio, s)| format!("worst {ratio:.2}x at {}", size_label(s)),
                    &format!("both at {}", size_label(from)),
                ));
            }
        }
        if targets.is_empty() {
            targets.push(Target::judge(
                "remote-write throughput against raw MPI",
                None::<f64>,
                |_| true,
                |_| String::new(),
                "an mttl configuration measured with its reference (mttl-mpi with raw-mpi, \
                 mttl-tcp with raw-mpi-tcp)",
            ));
        }
        targets
    }

    /// The throughput table with the ratios, and the breakdown table, of
    /// `reps` sweeps.
    /// The tables; `place`: where the 2 ranks ran (`on this machine`).
    pub(super) fn tables(&self, reps: u32, place: &str) -> String {
        let mut columns: Vec<Column<Config>> = self
            .0
            .configs()
            .map(|c| Column {
                header: c.column().into(),
                figure: Figure::Best(c, "bytes_per_s"),
                show: |v| format!("{:.1}", v / 1e6),
            })
            .collect();
        columns.extend(self.pairs().map(|(m, r)| Column {
            header: format!("{}/{}", m.column(), r.column()),
            figure: Figure::Ratio(m, r, "bytes_per_s"),
            show: |v| format!("{v:.2}x"),
        }));
        let mut t = format!(
            "Remote-write throughput, 2 ranks {place}, MB/s (10^6 bytes/s), best of \
             {reps} sweep(s)\n\n{}",
            self.0.table(&columns, &[])
        );
        let mut headers = vec!["size".to_owned(), "window".to_owned()];
        headers.extend(self.0.configs().map(|c| c.column().to_owned()));
        let rows: Vec<Vec<String>> = self
            .0
            .sizes
            .iter()
            .map(|&size| {
                let window = self.0.configs().find_map(|c| self.get(c, "window", size));
                let mut row = vec![
                    size_label(size),
                    window.map_or("-".into(), |w| w.to_string()),
                ];
                for c in self.0.configs() {
                    let (issue, sync) =
                        (self.get(c, "issue_us", size), self.get(c, "sync_us", size));
                    let breakdown = |(i, s)| format!("{} | {}", short(i), short(s));
                    row.push(issue.zip(sync).map_or("-".into(), breakdown));
                }
                row
            })
            .collect();
        let _ = write!(
            t,
            "\nBreakdown of the best run: rank 0's µs issuing one transfer (nwrite / \
             MPI_Send) | µs per window synchronising (barrier / MPI_Barrier)\n\n{}",
            render(&headers, &rows, &[], false)
        );
        t
    }

    /// Every figure as JSON.
    pub(super) fn to_json(&self) -> Value {
        let sizes: Vec<Value> = self
            .0
            .sizes
            .iter()
            .map(|&size| {
                let mut entry = json!({ "size": size, "label": size_label(size) });
                for c in self.0.configs() {
                    let get = |m| self.get(c, m, size);
                    entry[c.column()] = match get("bytes_per_s") {
                        None => Value::Null,
                        Some(_) => json!({
                            "mb_per_s": get("mb_per_s"),
                            "issue_us": get("issue_us"),
                            "sync_us": get("sync_us"),
                            "window": get("window").map(|w| w as u64),
                            "windows_per_sample": get("windows").map(|w| w as u64),
                        }),
                    };
                }
                let ratios: serde_json::Map<String, Value> = self
                    .pairs()
                    .map(|(m, r)| {
                        let ratio = self.ratio(m, size).map_or(Value::Null, Value::from);
                        (format!("{}/{}", m.column(), r.column()), ratio)
                    })
                    .collect();
                entry["ratios"] = Value::Object(ratios);
                entry
            })
            .collect();
        json!({
            "unit": "MB/s (10^6 bytes per second)",
            "configs": self.0.configs().map(|c| c.column()).collect::<Vec<_>>(),
            "sizes": sizes,
        })
    }

    /// One CSV row per configuration and size.
    pub(super) fn to_csv(&self) -> String {
        let mut t = String::from(
            "config,size_bytes,mb_per_s,reference,ratio,issue_us,sync_us_per_window,window,\
             windows_per_sample\n",
        );
        for c in self.0.configs() {
            for &size in &self.0.sizes {
                let get = |m| self.get(c, m, size).unwrap_or(f64::NAN);
                if self.get(c, "bytes_per_s", size).is_none() {
                    continue;
                }
                let reference = reference_of(c).map_or("", Config::column);
                let ratio = self
                    .ratio(c, size)
                    .map_or(String::new(), |r| format!("{r:.4}"));
                let _ = writeln!(
                    t,
                    "{},{size},{:.3},{reference},{ratio},{:.4},{:.3},{},{}",
                    c.column(),
                    get("mb_per_s"),
                    get("issue_us"),
                    get("sync_us"),
                    get("window"),
                    get("windows")
                );
            }
        }
        t
    }
}

/// The colour of a configuration: one per transport, shared by mttl and
/// its reference.
fn colour(config: Config) -> plotters::style::RGBColor {
    match config {
        Config::Mpi => RED_700,
        Config::MpiOwned => PURPLE_700,
        Config::RawMpi => ORANGE_700,
        Config::Tcp => BLUE_700,
        Config::RawMpiTcp => GREEN_700,
    }
}

/// A size on the axis: `8`, `512`, `4K`, `1M`.
fn axis_label(size: f64) -> String {
    size_label(size.round() as u64)
}

impl Summary {
    /// The figure, like the paper's figs. 5 and 7: throughput against
    /// transfer size, one line per configuration (raw MPI dashed), and
    /// below it each mttl configuration's ratio to its reference with the
    /// targets as guides.
    pub(super) fn figure(&self, title: String) -> LineChart {
        let sizes = &self.0.sizes;
        let (lo, hi) = match (sizes.iter().min(), sizes.iter().max()) {
            (Some(&lo), Some(&hi)) if hi > lo => (lo as f64, hi as f64),
            _ => (8.0, f64::from(1 << 20)),
        };
        let mut ticks: Vec<f64> = (1..=10)
            .map(|k| 8f64.powi(k))
            .filter(|&t| t >= lo && t <= hi)
            .collect();
        for end in [lo, hi] {
            if !ticks.iter().any(|t| (t / end - 1.0).abs() < 1e-9) {
                ticks.push(end);
            }
        }
        ticks.sort_by(f64::total_cmp);
        let x = Axis {
            desc: "transfer size (bytes)".into(),
            range: lo..hi,
            log: true,
            ticks,
            label: axis_label,
        };
        let series = |c: Config, y: &dyn Fn(u64) -> Option<f64>, label: String| Series {
            label,
            colour: colour(c),
            dashed: matches!(c, Config::RawMpi | Config::RawMpiTcp),
            points: sizes
                .iter()
                .filter_map(|&s| Some((s as f64, y(s)?)))
                .collect(),
        };
        let lines: Vec<Series> = self
            .0
            .configs()
            .map(|c| series(c, &|s| self.get(c, "mb_per_s", s), c.column().to_owned()))
            .collect();
        let ratios: Vec<Series> = self
            .0
            .configs()
            .filter_map(|c| {
                let label = format!("{} / {}", c.column(), reference_of(c)?.column());
                Some(series(c, &|s| self.ratio(c, s), label)).filter(|l| !l.points.is_empty())
            })
            .collect();
        let top = |lines: &[Series]| {
            let top = lines
                .iter()
                .flat_map(|l| l.points.iter().map(|p| p.1))
                .filter(|y| y.is_finite())
                .fold(0.0, f64::max);
            if top > 0.0 {
                top
            } else {
                1.0
            }
        };
        let y = |desc: &str, top: f64, label: fn(f64) -> String| Axis {
            desc: desc.into(),
            range: 0.0..top,
            log: false,
            ticks: Vec::new(),
            label,
        };
        let mut panels = vec![Panel {
            x: x.clone(),
            y: y("throughput (MB/s)", top(&lines) * 1.08, |v| {
                format!("{v:.0}")
            }),
            series: lines,
            guides: Vec::new(),
            unity: false,
            legend: SeriesLabelPosition::UpperLeft,
            height: 64,
        }];
        if !ratios.is_empty() {
            // Ratios above 2 are off the chart: the targets are near 1.
            let top = top(&ratios).clamp(1.2, 2.0) * 1.05;
            panels.push(Panel {
                x,
                y: y("mttl / raw MPI", top, |v| format!("{v:.1}")),
                series: ratios,
                guides: vec![TARGET_SMALL.1, TARGET_LARGE.1],
                unity: true,
                legend: SeriesLabelPosition::UpperRight,
                height: 36,
            });
        }
        LineChart {
            title,
            size: (960, 800),
            panels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::sweep::report::Verdict;

    fn run(size: u64, bytes_per_s: &[f64]) -> RunResult {
        Run::new(Measured {
            backend: "x".into(),
            samples: vec![SizeSamples {
                size,
                window: 8,
                windows: 2,
                bytes_per_s: bytes_per_s.to_vec(),
                issue_us: vec![1.0; bytes_per_s.len()],
                sync_us: vec![2.0; bytes_per_s.len()],
            }],
        })
    }

    #[test]
    fn ratios_and_targets_compare_with_the_reference() {
        let sizes = [512, 64 << 10, 1 << 20];
        let runs = |bw: [f64; 3]| {
            vec![Run::new(Measured {
                backend: "x".into(),
                samples: sizes
                    .iter()
                    .zip(bw)
                    .map(|(&s, b)| run(s, &[b]).result.samples.remove(0))
                    .collect(),
            })]
        };
        let summary = Summary::new(
            &sizes,
            &[
                (Config::Mpi, runs([0.9, 0.99, 0.9])),
                (Config::RawMpi, runs([1.0, 1.0, 1.0])),
                (Config::Tcp, runs([1.0, 1.0, 1.0])),
            ],
        );
        assert_eq!(summary.ratio(Config::Mpi, 512), Some(0.9));
        assert_eq!(summary.ratio(Config::RawMpi, 512), None);
        assert_eq!(summary.ratio(Config::Tcp, 512), None, "no ompi-tcp");
        let targets = summary.targets();
        assert_eq!(targets.len(), 2, "only the MPI pair was measured");
        assert_eq!(targets[0].verdict, Verdict::Met);
        assert_eq!(targets[1].detail, "worst 0.90x at 1M");
        assert_eq!(targets[1].verdict, Verdict::Missed);
        let table = summary.tables(3, "across mttl-h0,mttl-h1");
        assert!(table.contains("best of 3 sweep(s)"), "{table}");
        assert!(table.contains("2 ranks across mttl-h0,mttl-h1,"), "{table}");
        assert!(table.contains("0.90x"), "{table}");
        let csv = summary.to_csv();
        assert_eq!(csv.lines().count(), 1 + 3 * 3);
        assert!(csv.contains("mttl-mpi,512,0.000,raw-mpi,0.9000,"), "{csv}");
        let json = summary.to_json();
        assert_eq!(json["sizes"][0]["ratios"]["mttl-mpi/raw-mpi"], 0.9);
    }
}
