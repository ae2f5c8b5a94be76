//! The targets check: the project's performance targets for the
//! communication layer, judged on the figures of a [`Summary`].

use super::{fmt_mib, size_label, Paired, Summary};
use crate::bench::comm::Config;
use crate::bench::common::jobs::BenchConfig;
use crate::bench::common::report::{targets_text, Target, Verdict};

impl Summary {
    /// The project's performance targets, checked against the figures.
    pub(in crate::bench::comm) fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let mib1 = 1 << 20;
        let pair = |a: Config, b: Config, size: usize| self.get(a, size).zip(self.get(b, size));
        let not_measured = |what: String| (Verdict::NotMeasured, what);
        let needs = |a: Config, b: Config, size: usize| {
            format!(
                "needs {} and {} at {}",
                a.name(),
                b.name(),
                size_label(size)
            )
        };

        let (verdict, detail) = match pair(Config::Mpi, Config::RawMpi, 8) {
            Some((m, r)) => {
                let delta = m.rtt_us - r.rtt_us;
                let v = if delta <= 0.1 {
                    Verdict::Met
                } else {
                    Verdict::Missed
                };
                (
                    v,
                    format!("{:.3} vs {:.3} µs: {delta:+.3} µs", m.rtt_us, r.rtt_us),
                )
            }
            None => not_measured(needs(Config::Mpi, Config::RawMpi, 8)),
        };
        targets.push(Target {
            name: "mttl MPI backend: 8 B round trip at most 0.1 µs above raw rsmpi".into(),
            verdict,
            detail,
        });

        let (verdict, detail) = self.mpi_within_5_percent();
        targets.push(Target {
            name: "mttl MPI backend: within 5% of raw rsmpi at 4 KiB and above".into(),
            verdict,
            detail,
        });

        let (verdict, detail) = match self.get(Config::Tcp, 8) {
            Some(t) => {
                let v = if t.rtt_us <= 10.0 {
                    Verdict::Met
                } else {
                    Verdict::Missed
                };
                (v, format!("{:.2} µs", t.rtt_us))
            }
            None => not_measured(format!("needs {} at 8", Config::Tcp.name())),
        };
        targets.push(Target {
            name: "mttl TCP backend: 8 B round trip at most 10 µs".into(),
            verdict,
            detail,
        });

        let (verdict, detail) = match pair(Config::Tcp, Config::RawMpiTcp, 8) {
            Some((t, o)) => {
                let v = if t.rtt_us <= o.rtt_us {
                    Verdict::Met
                } else {
                    Verdict::Missed
                };
                (v, format!("{:.2} vs {:.2} µs", t.rtt_us, o.rtt_us))
            }
            None => not_measured(needs(Config::Tcp, Config::RawMpiTcp, 8)),
        };
        targets.push(Target {
            name: "mttl TCP backend: 8 B round trip not slower than Open MPI's TCP transport"
                .into(),
            verdict,
            detail,
        });

        let (verdict, detail) = match pair(Config::Tcp, Config::RawMpiTcp, mib1) {
            Some((t, o)) => {
                let ratio = t.bw_bytes_per_s / o.bw_bytes_per_s;
                let v = if ratio >= 0.9 {
                    Verdict::Met
                } else {
                    Verdict::Missed
                };
                (
                    v,
                    format!(
                        "{} vs {} MiB/s: {ratio:.2}x",
                        fmt_mib(t.bw_bytes_per_s),
                        fmt_mib(o.bw_bytes_per_s)
                    ),
                )
            }
            None => not_measured(needs(Config::Tcp, Config::RawMpiTcp, mib1)),
        };
        targets.push(Target {
            name: "mttl TCP backend: 1 MiB bandwidth at least 0.9x Open MPI's TCP transport".into(),
            verdict,
            detail,
        });
        targets
    }

    /// The target "mttl MPI backend within 5% of raw rsmpi at 4 KiB and
    /// above", size by size. Judged on the ratio in one job (`mpi-vs-raw`)
    /// where measured, the comparison that strays least (see `control`),
    /// else on the best runs of the separate jobs (`mpi`, `raw-mpi`). A
    /// size that misses by no more than the control (`raw-vs-raw`, raw
    /// rsmpi against itself the same way) strays from 1.00 there is
    /// unresolved rather than missed: this machine cannot tell. Each miss
    /// shows the other ratios measured.
    fn mpi_within_5_percent(&self) -> (Verdict, String) {
        let mut compared = 0;
        let (mut misses, mut unresolved) = (Vec::new(), Vec::new());
        let mut by_one_job = false;
        for &size in self.sizes.iter().filter(|&&s| s >= 4 << 10) {
            let best = self
                .get(Config::Mpi, size)
                .zip(self.get(Config::RawMpi, size))
                .map(|(m, r)| Paired {
                    rtt: m.rtt_us / r.rtt_us,
                    bw: m.bw_bytes_per_s / r.bw_bytes_per_s,
                    sweeps: 0,
                });
            let one_job = self.one_job(size);
            let control = self.control(size);
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
                let within = if limit > 1.0 {
                    ratio <= limit
                } else {
                    ratio >= limit
                };
                if within {
                    continue;
                }
                let mut also = Vec::new();
                if one_job.is_some() {
                    if let Some(b) = best {
                        also.push(format!("best runs {:.2}x", pick(b)));
                    }
                }
                if let Some(p) = self.paired(Config::Mpi, size) {
                    also.push(format!("paired {:.2}x", pick(p)));
                }
                if one_job.is_none() {
                    if let Some(c) = control {
                        also.push(format!("control {:.2}x", pick(c)));
                    }
                }
                let strays = control
                    .filter(|_| one_job.is_some())
                    .map(|c| (pick(c) - 1.0).abs())
                    .filter(|&strays| strays >= (ratio - 1.0).abs());
                if let Some(strays) = strays {
                    also.insert(0, format!("control strays {strays:.2}"));
                }
                let line = format!(
                    "{} {what} {ratio:.3}x{by}{}",
                    size_label(size),
                    if also.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", also.join(", "))
                    }
                );
                if strays.is_some() {
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
                format!(
                    "needs {} and {}, or {}, at sizes of 4K or more",
                    Config::Mpi.name(),
                    Config::RawMpi.name(),
                    Config::MpiVsRaw.name()
                ),
            )
        } else if !misses.is_empty() {
            misses.extend(unresolved.into_iter().map(|u| format!("unresolved: {u}")));
            (Verdict::Missed, misses.join(", "))
        } else if !unresolved.is_empty() {
            (
                Verdict::Unresolved,
                format!(
                    "{sizes}; missed only by as much as raw rsmpi strays from itself: {}",
                    unresolved.join(", ")
                ),
            )
        } else {
            (Verdict::Met, sizes)
        }
    }

    /// The targets as text, one per line.
    pub(in crate::bench::comm) fn targets_text(&self) -> String {
        targets_text(&self.targets())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{in_sweep, one_job_run, run};
    use super::*;
    use crate::bench::comm::measure::Plan;
    use crate::bench::comm::results::RunResult;

    #[test]
    fn a_missed_target_shows_the_paired_ratio() {
        let at_4k = |sweep: usize, rtt: f64, bw: f64| {
            let mut run = in_sweep(sweep, rtt, bw);
            run.sizes[0].plan = Plan::for_size(4 << 10);
            run
        };
        // Raw MPI's one fast job (sweep 1) makes the best figures miss;
        // sweep by sweep, the two are even.
        let mpi = vec![at_4k(0, 10.0, 100.0), at_4k(1, 10.0, 100.0)];
        let raw = vec![at_4k(0, 10.0, 100.0), at_4k(1, 9.0, 120.0)];
        let summary = Summary::new(&[4 << 10], &[(Config::Mpi, mpi), (Config::RawMpi, raw)]);
        let targets = summary.targets_text();
        assert!(
            targets.contains("4K round trip 1.111x (paired 1.06x)"),
            "{targets}"
        );
        assert!(
            targets.contains("4K bandwidth 0.833x (paired 0.92x)"),
            "{targets}"
        );
    }

    /// One `mpi-vs-raw` run with the sizes of `runs`, in order.
    fn one_job_sizes(runs: &[RunResult]) -> RunResult {
        RunResult {
            sizes: runs.iter().flat_map(|r| r.sizes.clone()).collect(),
            reference: runs.iter().flat_map(|r| r.reference.clone()).collect(),
            ..runs[0].clone()
        }
    }

    #[test]
    fn one_job_judges_and_the_control_tells_a_miss_from_noise() {
        let (k16, m16) = (16 << 10, 16 << 20);
        let separate = |size: usize, rtt: f64, bw: f64| {
            let mut run = in_sweep(0, rtt, bw);
            run.sizes[0].plan = Plan::for_size(size);
            run
        };
        let summary = |one_job: f64, control: f64| {
            Summary::new(
                &[k16, m16],
                &[
                    (
                        Config::Mpi,
                        vec![separate(k16, 10.0, 90.0), separate(m16, 10.0, 100.0)],
                    ),
                    (
                        Config::RawMpi,
                        vec![separate(k16, 10.0, 100.0), separate(m16, 10.0, 100.0)],
                    ),
                    (
                        Config::MpiVsRaw,
                        vec![one_job_sizes(&[
                            one_job_run(0, k16, (&[10.0], &[97.0]), (10.0, 100.0)),
                            one_job_run(0, m16, (&[10.0], &[one_job]), (10.0, 100.0)),
                        ])],
                    ),
                    (
                        Config::RawVsRaw,
                        vec![one_job_run(0, m16, (&[10.0], &[control]), (10.0, 100.0))],
                    ),
                ],
            )
        };
        let verdict = |s: &Summary| {
            s.targets()
                .into_iter()
                .find(|t| t.name.contains("within 5%"))
                .map(|t| (t.verdict, t.detail))
                .unwrap()
        };

        // 16K: 0.90 in the best runs, 0.97 in one job: judged in one job.
        // 16M: 0.93 in one job, and raw rsmpi strays 0.08 from itself there.
        let (v, detail) = verdict(&summary(93.0, 92.0));
        assert_eq!(v, Verdict::Unresolved, "{detail}");
        assert!(
            detail.contains("2 sizes compared in one job")
                && detail.contains("16M bandwidth 0.930x in one job (control strays 0.08"),
            "{detail}"
        );

        // The control close to 1.00 there: a miss, with the other ratios.
        let (v, detail) = verdict(&summary(93.0, 99.0));
        assert_eq!(v, Verdict::Missed, "{detail}");
        assert!(
            detail.contains("16M bandwidth 0.930x in one job (best runs 1.00x, paired 1.00x)"),
            "{detail}"
        );

        // Within 5% in one job everywhere: met.
        let (v, detail) = verdict(&summary(99.0, 92.0));
        assert_eq!(v, Verdict::Met, "{detail}");

        let tables = summary(93.0, 92.0).tables();
        assert!(tables.contains("control"), "{tables}");
        let doc = summary(93.0, 101.0).to_json(1, &[], &[]);
        assert_eq!(doc["paired"]["raw-vs-raw"][0]["bw_ratio"], 1.01);
        assert_eq!(doc["paired"]["mpi-vs-raw"][1]["bw_ratio"], 0.93);
    }

    #[test]
    fn tcp_targets_are_judged_and_others_not_measured() {
        let summary = Summary::new(&[8], &[(Config::Tcp, vec![run(&[9.0], &[1.0])])]);
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
