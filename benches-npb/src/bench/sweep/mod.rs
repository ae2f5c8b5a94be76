//! The sweep engine every benchmark orchestrator runs on (`mttl-bench comm`,
//! `rwrite`, `runtime`, `load` and `npb-sweep`): configurations × sweeps,
//! each run watched for disturbance, and from the runs the figures a report
//! shows.
//!
//! 1. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), wait
//!    up to `--settle` seconds for other processes to leave the CPUs idle
//!    ([`cpu_load::settle`]), then run the configuration once.
//! 2. Watch what other processes took meanwhile ([`cpu_load::Meter`]): a
//!    run during which they kept [`BUSY_WARNING`] CPU or more busy is
//!    *disturbed*, and is repeated up to [`Sweeps::retries`] times.
//! 3. Keep every run ([`Run`]), disturbed or not, and a [`JobLog`] of each.
//!    A run that fails stops the sweeps with its error, or, for
//!    [`Sweeps::keep_going`], is recorded as a failure and the sweeps go on.
//! 4. From the runs: the *best-of* figure of a configuration is the best
//!    over the runs that count ([`counted`]: the undisturbed ones where
//!    there are any) of each run's own figure (the median of its samples,
//!    [`report::median`]); the *paired* figure of two configurations is the
//!    median over the sweeps of each sweep's ratio ([`paired`], one run per
//!    sweep, [`per_sweep`]), which one lucky job of either side moves less.
//!    The `mttl-bench` subcommands take both from the [`figures`] table.
//!
//! What the report is made of (tables, notes, targets and their verdicts,
//! the JSON document, CSV files and figures) is in [`figures`], [`report`]
//! and [`plot`]; starting worker jobs and their results files in [`jobs`].
//!
//! # A subcommand on the engine
//!
//! 1. Declare the configurations with `jobs::bench_configs!`: one row
//!    each (name, column, MPI or not, environment, what runs).
//! 2. Flatten [`jobs::SweepArgs`] into the subcommand's `clap::Args`
//!    (`--json`, `--settle`, `--reps`, `--backends` and the hidden worker
//!    options).
//! 3. In its `run`: if [`jobs::SweepArgs::worker`] says this process is a
//!    worker rank, measure and write the results
//!    ([`jobs::mttl_program`], `jobs::raw_mpi_worker` (feature `mpi`), or
//!    [`jobs::write_results`]); else [`jobs::SweepArgs::sweep`] runs every
//!    configuration's jobs and returns their runs.
//! 4. Declare the metrics and split each run's samples into a
//!    [`figures::Figures`] table; its [`figures::Figure`]s give best-of,
//!    paired and one-job figures, laid out by size as tables and JSON rows.
//! 5. Fill a [`report::Report`] (tables, method, targets, the subcommand's
//!    JSON keys; the notes and common keys are the engine's) and `emit` it;
//!    CSV files and figures go through [`report::OutputFiles`] and [`plot`].

pub mod cpu_load;
pub mod figures;
pub mod jobs;
pub mod plot;
pub mod report;

use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::bench::error::BenchError;

/// Foreign load, in CPUs, from which a run counts as disturbed.
pub const BUSY_WARNING: f64 = 0.25;

/// How a benchmark sweeps over its configurations.
#[derive(Debug, Clone)]
pub struct Sweeps<'a, C> {
    /// The program and subcommand, as the progress lines name them
    /// (`mttl-bench comm`).
    pub bench: &'a str,
    /// The configurations, in the order of the first sweep.
    pub configs: &'a [C],
    /// How many sweeps (`--reps`).
    pub reps: u32,
    /// How long to wait for a quiet machine before each run (`--settle`).
    pub settle: f64,
    /// How many times a disturbed run is repeated within one sweep.
    pub retries: usize,
    /// Whether a failed run is recorded and the sweeps go on (else it
    /// stops them).
    pub keep_going: bool,
}

/// One run of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Run<R> {
    /// The sweep it ran in, from 0.
    pub sweep: usize,
    /// CPUs others kept busy, on average, while it ran (`None` without
    /// `/proc`).
    pub busy: Option<f64>,
    /// What it measured.
    pub result: R,
}

impl<R> Run<R> {
    /// An undisturbed run of sweep 0, for tests and one-off runs.
    pub fn new(result: R) -> Run<R> {
        Run {
            sweep: 0,
            busy: None,
            result,
        }
    }

    /// Whether others kept [`BUSY_WARNING`] CPU or more busy meanwhile.
    pub fn disturbed(&self) -> bool {
        self.busy.is_some_and(|b| b >= BUSY_WARNING)
    }
}

/// What the sweeps measured.
#[derive(Debug)]
pub struct Swept<C, R> {
    /// The runs of each configuration, in the order of `Sweeps::configs`.
    pub runs: Vec<(C, Vec<Run<R>>)>,
    /// Every run, in the order made, failed ones included.
    pub log: Vec<JobLog<C>>,
    /// The runs that failed (with [`Sweeps::keep_going`]), and why.
    pub failures: Vec<(C, String)>,
}

impl<C: Clone, R> Swept<C, R> {
    /// The configurations swept, in the order of `Sweeps::configs`.
    pub fn configs(&self) -> Vec<C> {
        self.runs.iter().map(|r| r.0.clone()).collect()
    }
}

/// One run the orchestrator made, and how disturbed it was.
#[derive(Debug, Clone)]
pub struct JobLog<C> {
    pub sweep: usize,
    pub config: C,
    /// The configuration's name in the progress lines and notes.
    pub name: String,
    pub attempt: usize,
    /// CPUs others kept busy just before the run ([`cpu_load::settle`]).
    pub busy_before: Option<f64>,
    /// CPUs others kept busy, on average, while it ran.
    pub busy_during: Option<f64>,
    pub seconds: f64,
}

impl<C> JobLog<C> {
    /// Whether others kept [`BUSY_WARNING`] CPU or more busy meanwhile.
    pub fn disturbed(&self) -> bool {
        self.busy_during.is_some_and(|b| b >= BUSY_WARNING)
    }

    /// The entry of the `--json` document's `jobs`.
    pub fn to_json(&self) -> Value {
        json!({
            "sweep": self.sweep,
            "config": self.name,
            "attempt": self.attempt,
            "busy_cpus_before": self.busy_before,
            "busy_cpus_during": self.busy_during,
            "disturbed": self.disturbed(),
            "seconds": self.seconds,
        })
    }
}

impl<C: Clone + PartialEq> Sweeps<'_, C> {
    /// Steps 1 to 3 of the [module docs](self): `run(config, sweep,
    /// attempt)` measures once; `name` names a configuration. Prints one
    /// progress line per run on stderr.
    pub fn run<R>(
        &self,
        name: impl Fn(&C) -> String,
        mut run: impl FnMut(&C, usize, usize) -> Result<R, BenchError>,
    ) -> Result<Swept<C, R>, BenchError> {
        let configs = self.configs;
        let width = configs.iter().map(|c| name(c).len()).max().unwrap_or(0) + 1;
        let mut swept = Swept {
            runs: configs.iter().map(|c| (c.clone(), Vec::new())).collect(),
            log: Vec::new(),
            failures: Vec::new(),
        };
        for sweep in 0..self.reps as usize {
            for k in 0..configs.len() {
                let i = (k + sweep) % configs.len();
                let config = &configs[i];
                for attempt in 0..=self.retries {
                    eprint!(
                        "{}: sweep {}/{}: {:<width$}{}",
                        self.bench,
                        sweep + 1,
                        self.reps,
                        name(config),
                        if attempt > 0 { " again" } else { "" },
                    );
                    let _ = std::io::stderr().flush();
                    let busy_before =
                        cpu_load::settle(BUSY_WARNING, Duration::from_secs_f64(self.settle));
                    let meter = cpu_load::Meter::start();
                    let started = Instant::now();
                    let result = run(config, sweep, attempt);
                    let entry = JobLog {
                        sweep: sweep + 1,
                        config: config.clone(),
                        name: name(config),
                        attempt,
                        busy_before,
                        busy_during: meter.and_then(|m| m.foreign_cpus()),
                        seconds: started.elapsed().as_secs_f64(),
                    };
                    let disturbed = entry.disturbed();
                    let busy = entry.busy_during;
                    let seconds = entry.seconds;
                    swept.log.push(entry);
                    let result = match result {
                        Ok(result) => result,
                        Err(e) if self.keep_going => {
                            eprintln!(" FAILED: {e}");
                            swept.failures.push((config.clone(), e.to_string()));
                            break;
                        }
                        Err(e) => {
                            eprintln!();
                            return Err(e);
                        }
                    };
                    match busy {
                        Some(b) if disturbed => eprintln!(
                            " {seconds:.1} s, disturbed: others kept {b:.1} CPUs busy meanwhile"
                        ),
                        _ => eprintln!(" {seconds:.1} s"),
                    }
                    swept.runs[i].1.push(Run {
                        sweep,
                        busy,
                        result,
                    });
                    if !disturbed {
                        break;
                    }
                }
            }
        }
        Ok(swept)
    }
}

/// How many repetitions of something that took `each` fill a sample of
/// `sample_time`, within `(least, most)`: the calibration of every
/// measurement loop.
pub fn calibrate(each: Duration, sample_time: Duration, (least, most): (usize, usize)) -> usize {
    let n = (sample_time.as_secs_f64() / each.as_secs_f64().max(1e-9)).round();
    // Saturating float-to-int conversion, then clamped.
    (n as usize).clamp(least, most)
}

/// The runs that count for a best-of figure: the undisturbed ones, or all
/// if every one was disturbed.
pub fn counted<R>(runs: &[Run<R>]) -> Vec<&Run<R>> {
    let clean: Vec<&Run<R>> = runs.iter().filter(|r| !r.disturbed()).collect();
    if clean.is_empty() {
        runs.iter().collect()
    } else {
        clean
    }
}

/// The run of each sweep that counts for pairing: the last undisturbed one
/// of the sweep, else its last one; by sweep.
pub fn per_sweep<R>(runs: &[Run<R>]) -> Vec<&Run<R>> {
    let mut chosen: Vec<&Run<R>> = Vec::new();
    for run in runs {
        match chosen.iter_mut().find(|r| r.sweep == run.sweep) {
            Some(slot) if !run.disturbed() || slot.disturbed() => *slot = run,
            Some(_) => {}
            None => chosen.push(run),
        }
    }
    chosen
}

/// A median of ratios, and how many ratios it is the median of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub value: f64,
    pub count: usize,
}

/// The median of `first / second` over the pairs where both are known.
pub fn median_ratio(pairs: impl IntoIterator<Item = (Option<f64>, Option<f64>)>) -> Option<Ratio> {
    let ratios: Vec<f64> = pairs
        .into_iter()
        .filter_map(|(a, b)| Some(a? / b?))
        .filter(|r| r.is_finite())
        .collect();
    Some(Ratio {
        value: report::median(&ratios)?,
        count: ratios.len(),
    })
}

/// The paired figure of `mine` against `theirs`: the median over the
/// sweeps in which both ran of `figure(mine) / figure(theirs)`, one run
/// per sweep ([`per_sweep`]).
pub fn paired<R>(
    mine: &[Run<R>],
    theirs: &[Run<R>],
    figure: impl Fn(&R) -> Option<f64>,
) -> Option<Ratio> {
    let theirs = per_sweep(theirs);
    median_ratio(per_sweep(mine).into_iter().filter_map(|run| {
        let other = theirs.iter().find(|t| t.sweep == run.sweep)?;
        Some((figure(&run.result), figure(&other.result)))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(sweep: usize, busy: f64, figure: f64) -> Run<f64> {
        Run {
            sweep,
            busy: Some(busy),
            result: figure,
        }
    }

    #[test]
    fn undisturbed_runs_count_where_there_are_any() {
        let figures = |runs: &[Run<f64>]| -> Vec<f64> {
            counted(runs).into_iter().map(|r| r.result).collect()
        };
        let runs = [run(0, 0.0, 10.0), run(1, 0.9, 5.0), run(2, 0.1, 8.0)];
        assert_eq!(figures(&runs), [10.0, 8.0], "the disturbed 5.0 is left out");
        let all_disturbed = [run(0, 0.5, 10.0), run(1, 0.9, 5.0)];
        assert_eq!(figures(&all_disturbed), [10.0, 5.0]);
    }

    #[test]
    fn paired_is_the_median_of_each_sweeps_ratio() {
        // Sweep 1 of theirs was a fast job: the best-of ratio would be 2,
        // sweep by sweep the two are even.
        let mine = [
            run(0, 0.0, 10.0),
            run(1, 0.0, 10.0),
            run(2, 0.0, 10.0),
            // Run again after a disturbed run: the undisturbed one counts.
            run(3, 0.9, 1.0),
            run(3, 0.0, 20.0),
        ];
        let theirs = [
            run(0, 0.0, 10.0),
            run(1, 0.0, 5.0),
            run(2, 0.0, 10.0),
            run(3, 0.0, 20.0),
            run(4, 0.0, 1.0),
        ];
        let p = paired(&mine, &theirs, |&f| Some(f)).expect("both ran");
        assert_eq!(
            p,
            Ratio {
                value: 1.0,
                count: 4
            },
            "sweep 4 has no run of mine"
        );
        assert_eq!(per_sweep(&mine).len(), 4);
        assert_eq!(per_sweep(&mine)[3].result, 20.0);
        assert!(paired(&mine, &theirs, |_| None).is_none());
    }

    #[test]
    fn sweeps_rotate_the_order_and_record_failures_when_told_to() {
        let configs = ["a", "b", "c"];
        let mut sweeps = Sweeps {
            bench: "test",
            configs: &configs,
            reps: 2,
            settle: 0.0,
            retries: 0,
            keep_going: true,
        };
        let mut order = Vec::new();
        let swept = sweeps
            .run(
                |c| c.to_string(),
                |&c, sweep, _| {
                    order.push((sweep, c));
                    match c {
                        "b" => Err(BenchError::Check("b fails".into())),
                        _ => Ok(sweep * 10),
                    }
                },
            )
            .expect("failures are recorded, not returned");
        let names: Vec<&str> = order.iter().map(|o| o.1).collect();
        assert_eq!(
            names,
            ["a", "b", "c", "b", "c", "a"],
            "rotated by one per sweep"
        );
        assert_eq!(swept.failures.len(), 2);
        assert!(swept
            .failures
            .iter()
            .all(|f| f.0 == "b" && f.1 == "b fails"));
        let results: Vec<Vec<usize>> = swept
            .runs
            .iter()
            .map(|(_, runs)| runs.iter().map(|r| r.result).collect())
            .collect();
        assert_eq!(results, [vec![0, 10], vec![], vec![0, 10]]);
        assert_eq!(swept.log.len(), 6, "every run is logged, failed ones too");
        sweeps.keep_going = false;
        sweeps.reps = 1;
        let stopped = sweeps.run(
            |c| c.to_string(),
            |&c, _, _| match c {
                "b" => Err(BenchError::Check("b fails".into())),
                _ => Ok(()),
            },
        );
        assert!(
            stopped.is_err(),
            "without keep_going a failure stops the sweeps"
        );
    }

    #[test]
    fn calibration_fills_a_sample_within_bounds() {
        let sample = Duration::from_millis(20);
        assert_eq!(calibrate(sample / 10, sample, (1, 100)), 10);
        assert_eq!(calibrate(Duration::ZERO, sample, (1, 100)), 100);
        assert_eq!(calibrate(sample * 10, sample, (2, 100)), 2);
    }

    #[test]
    fn median_ratio_skips_pairs_with_a_missing_side() {
        let r = median_ratio([
            (Some(2.0), Some(1.0)),
            (None, Some(1.0)),
            (Some(3.0), Some(1.0)),
        ]);
        assert_eq!(
            r,
            Some(Ratio {
                value: 2.5,
                count: 2
            })
        );
    }
}
