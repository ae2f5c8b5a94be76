//! The sweeps of an orchestrator, the same for every subcommand that
//! compares configurations:
//!
//! 1. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), wait
//!    up to `--settle` seconds for other processes to leave the CPUs idle
//!    ([`cpu_load::settle`]), then run the configuration once.
//! 2. Watch what other processes took meanwhile ([`cpu_load::Meter`]): a
//!    run during which they kept [`BUSY_WARNING`] CPU or more busy is
//!    *disturbed*, and is repeated up to [`Sweeps::retries`] times.
//! 3. Keep every run, disturbed or not, with a [`JobLog`] of each: the
//!    subcommand picks the best (of the undisturbed ones where there are
//!    any) and says which runs were disturbed ([`disturbance_notes`]).
//!
//! A run that fails stops the sweeps with its error.

use std::io::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cpu_load;
use super::jobs::BenchConfig;
use crate::bench::error::BenchError;

/// Foreign load, in CPUs, from which a run counts as disturbed.
pub(crate) const BUSY_WARNING: f64 = 0.25;

/// How a subcommand sweeps over its configurations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sweeps<'a, C> {
    /// The subcommand, as the progress lines name it.
    pub(crate) bench: &'static str,
    /// The configurations, in the order of the first sweep.
    pub(crate) configs: &'a [C],
    /// How many sweeps (`--reps`).
    pub(crate) reps: u32,
    /// How long to wait for a quiet machine before each run (`--settle`).
    pub(crate) settle: f64,
    /// How many times a disturbed run is repeated within one sweep.
    pub(crate) retries: usize,
    /// The width of the configuration's name in the progress lines.
    pub(crate) name_width: usize,
}

/// What the sweeps measured.
#[derive(Debug)]
pub(crate) struct Swept<C, R> {
    /// The runs of each configuration, in the order of `Sweeps::configs`.
    pub(crate) runs: Vec<(C, Vec<R>)>,
    /// Every run, in the order made.
    pub(crate) log: Vec<JobLog<C>>,
}

impl<C: BenchConfig> Sweeps<'_, C> {
    /// Runs the sweeps: `run(config, rep, attempt)` measures once;
    /// `mark(result, disturbed)` records on its result whether others
    /// disturbed it. Prints one progress line per run on stderr.
    pub(crate) fn run<R>(
        &self,
        mut run: impl FnMut(C, usize, usize) -> Result<R, BenchError>,
        mark: impl Fn(&mut R, bool),
    ) -> Result<Swept<C, R>, BenchError> {
        let configs = self.configs;
        let mut log = Vec::new();
        let mut runs: Vec<(C, Vec<R>)> = configs.iter().map(|&c| (c, Vec::new())).collect();
        for rep in 0..self.reps as usize {
            for k in 0..configs.len() {
                let i = (k + rep) % configs.len();
                let config = configs[i];
                for attempt in 0..=self.retries {
                    eprint!(
                        "mttl-bench {}: sweep {}/{}: {:<width$}{}",
                        self.bench,
                        rep + 1,
                        self.reps,
                        config.name(),
                        if attempt > 0 { " again" } else { "" },
                        width = self.name_width
                    );
                    let _ = std::io::stderr().flush();
                    let busy_before =
                        cpu_load::settle(BUSY_WARNING, Duration::from_secs_f64(self.settle));
                    let meter = cpu_load::Meter::start();
                    let started = Instant::now();
                    let result = run(config, rep, attempt);
                    let entry = JobLog {
                        sweep: rep + 1,
                        config,
                        attempt,
                        busy_before,
                        busy_during: meter.and_then(|m| m.foreign_cpus()),
                        seconds: started.elapsed().as_secs_f64(),
                    };
                    let mut result = result.inspect_err(|_| eprintln!())?;
                    mark(&mut result, entry.disturbed());
                    match entry.busy_during {
                        Some(b) if entry.disturbed() => eprintln!(
                            " {:.1} s, disturbed: others kept {b:.1} CPUs busy meanwhile",
                            entry.seconds
                        ),
                        _ => eprintln!(" {:.1} s", entry.seconds),
                    }
                    log.push(entry);
                    runs[i].1.push(result);
                    if !entry.disturbed() {
                        break;
                    }
                }
            }
        }
        Ok(Swept { runs, log })
    }
}

/// One run the orchestrator made, and how disturbed it was.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobLog<C> {
    pub(crate) sweep: usize,
    pub(crate) config: C,
    pub(crate) attempt: usize,
    /// CPUs others kept busy just before the run ([`cpu_load::settle`]).
    pub(crate) busy_before: Option<f64>,
    /// CPUs others kept busy, on average, while it ran
    /// ([`cpu_load::Meter`]).
    pub(crate) busy_during: Option<f64>,
    pub(crate) seconds: f64,
}

impl<C: BenchConfig> JobLog<C> {
    /// Whether others kept [`BUSY_WARNING`] CPU or more busy meanwhile.
    pub(crate) fn disturbed(&self) -> bool {
        self.busy_during.is_some_and(|b| b >= BUSY_WARNING)
    }

    /// The entry of the `--json` document's `jobs`.
    pub(crate) fn to_json(self) -> Value {
        json!({
            "sweep": self.sweep,
            "config": self.config.name(),
            "attempt": self.attempt,
            "busy_cpus_before": self.busy_before,
            "busy_cpus_during": self.busy_during,
            "disturbed": self.disturbed(),
            "seconds": self.seconds,
        })
    }
}

/// The disturbed runs of `log`, as `sweep 2 tcp: 1.3` (CPUs others used).
pub(crate) fn disturbed_runs<C: BenchConfig>(log: &[JobLog<C>]) -> Vec<String> {
    log.iter()
        .filter(|j| j.disturbed())
        .map(|j| {
            format!(
                "sweep {} {}: {:.1}",
                j.sweep,
                j.config.name(),
                j.busy_during.unwrap_or(0.0)
            )
        })
        .collect()
}

/// The notes about disturbance of sweeps that repeat disturbed runs up to
/// `retries` times and count undisturbed ones first: whether the load
/// could be read, which runs were disturbed, and which configurations had
/// no undisturbed run.
pub(crate) fn disturbance_notes<C: BenchConfig>(
    configs: &[C],
    log: &[JobLog<C>],
    retries: usize,
) -> Vec<String> {
    let mut notes = Vec::new();
    let disturbed = disturbed_runs(log);
    if log.iter().all(|j| j.busy_during.is_none()) {
        notes.push(
            "The load of other processes could not be read (no /proc): runs were not \
             checked for disturbance."
                .into(),
        );
    } else if disturbed.is_empty() {
        notes.push(format!(
            "No run was disturbed: other processes kept less than {BUSY_WARNING} CPU busy \
             during every run."
        ));
    } else {
        notes.push(format!(
            "Disturbed runs (other processes kept this many CPUs busy meanwhile; each was \
             repeated up to {retries} times, and only undisturbed runs count where a \
             configuration has any): {}.",
            disturbed.join(", ")
        ));
        for &config in configs {
            let all_disturbed = log
                .iter()
                .filter(|j| j.config == config)
                .all(JobLog::disturbed);
            if all_disturbed {
                notes.push(format!(
                    "Every run of {} was disturbed: its figures are suspect.",
                    config.name()
                ));
            }
        }
    }
    notes
}

/// The note naming the configurations of `all` not in `configs`, if any.
pub(crate) fn not_measured_note<C: BenchConfig>(all: &[C], configs: &[C]) -> Option<String> {
    let missing: Vec<&str> = all
        .iter()
        .filter(|c| !configs.contains(c))
        .map(|c| c.name())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "Not measured this time (see --backends): {}.",
            missing.join(", ")
        )
    })
}
