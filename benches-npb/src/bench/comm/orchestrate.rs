//! The orchestrator of `mttl-bench comm`: steps 1, 2, 4 and 5 of the
//! [module docs](super). It starts the worker jobs, watches how disturbed
//! each was, and prints what they measured.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mttl_comm::launch;

use super::report::Summary;
use super::results::RunResult;
use super::{
    chosen_configs, load, measure, BenchError, CommArgs, Config, TempDir, BUSY_WARNING,
    MPI_BUILD_HINT, RETRIES,
};

/// One worker job the orchestrator ran, and how disturbed it was.
#[derive(Debug, Clone, Copy)]
struct JobLog {
    sweep: usize,
    config: Config,
    attempt: usize,
    /// CPUs others kept busy just before the job.
    busy_before: Option<f64>,
    /// CPUs others kept busy, on average, while the job ran.
    busy_during: Option<f64>,
    seconds: f64,
}

impl JobLog {
    fn disturbed(&self) -> bool {
        self.busy_during.is_some_and(|b| b >= BUSY_WARNING)
    }

    fn to_json(self) -> serde_json::Value {
        serde_json::json!({
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

/// Runs one worker job of `config` and reads its results.
fn run_job(
    config: Config,
    program: &Path,
    args: Vec<String>,
    out: &Path,
) -> Result<RunResult, BenchError> {
    let outcome = launch::run(&config.job(program, args)).map_err(|source| BenchError::Launch {
        config: config.name(),
        source,
    })?;
    if !outcome.success() {
        return Err(BenchError::WorkerFailed {
            config: config.name(),
            code: outcome.exit_code,
            hint: if config.needs_mpi() {
                " (is Open MPI's mpirun the one this program was built against?)"
            } else {
                ""
            },
        });
    }
    RunResult::read(config.name(), out)
}

/// Steps 1, 2, 4 and 5 of the [module docs](super).
pub(super) fn orchestrate(args: &CommArgs, sizes: &[usize]) -> Result<(), BenchError> {
    let configs = chosen_configs(args)?;
    let program = std::env::current_exe().map_err(|source| BenchError::Io {
        what: "find the path of",
        path: PathBuf::from("this program"),
        source,
    })?;
    let dir = TempDir::new("comm")?;
    let size_list = sizes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut log: Vec<JobLog> = Vec::new();
    let mut runs: Vec<(Config, Vec<RunResult>)> =
        configs.iter().map(|&c| (c, Vec::new())).collect();
    for rep in 0..args.reps as usize {
        for k in 0..configs.len() {
            let i = (k + rep) % configs.len();
            let config = configs[i];
            for attempt in 0..=RETRIES {
                let out = dir
                    .path()
                    .join(format!("{}-{rep}-{attempt}.json", config.name()));
                let worker_args = vec![
                    "comm".to_owned(),
                    "--worker".to_owned(),
                    config.name().to_owned(),
                    "--out".to_owned(),
                    out.to_string_lossy().into_owned(),
                    "--sizes".to_owned(),
                    size_list.clone(),
                ];
                eprint!(
                    "mttl-bench comm: sweep {}/{}: {:<12}{}",
                    rep + 1,
                    args.reps,
                    config.name(),
                    if attempt > 0 { " again" } else { "" }
                );
                let _ = std::io::stderr().flush();
                let busy_before = load::settle(BUSY_WARNING, Duration::from_secs_f64(args.settle));
                let meter = load::Meter::start();
                let started = Instant::now();
                let result = run_job(config, &program, worker_args, &out);
                let entry = JobLog {
                    sweep: rep + 1,
                    config,
                    attempt,
                    busy_before,
                    busy_during: meter.and_then(|m| m.foreign_cpus()),
                    seconds: started.elapsed().as_secs_f64(),
                };
                let mut result = result.inspect_err(|_| eprintln!())?;
                result.disturbed = entry.disturbed();
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
    let summary = Summary::new(sizes, &runs);
    let method = method_lines(args.reps, args.settle, &configs);
    let notes = notes(&configs, &log);
    let mut stdout = std::io::stdout().lock();
    let mut text = summary.tables();
    text.push_str("\nHow measured\n");
    for line in method.iter().chain(&notes) {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&summary.targets_text());
    let printed = if args.json {
        // The tables still reach a person watching, on stderr.
        eprint!("{text}");
        let mut doc = summary.to_json(args.reps, &method, &notes);
        doc["jobs"] = log.iter().map(|j| j.to_json()).collect();
        writeln!(stdout, "{doc:#}")
    } else {
        write!(stdout, "{text}")
    };
    printed.map_err(|source| BenchError::Io {
        what: "write the results to",
        path: PathBuf::from("standard output"),
        source,
    })
}

/// How the figures were measured, one sentence per line.
fn method_lines(reps: u32, settle: f64, configs: &[Config]) -> Vec<String> {
    let spin = std::env::var(mttl_comm::env::SPIN_US).unwrap_or_else(|_| "50 (default)".into());
    let mut lines = vec![
        format!(
            "2 ranks on this machine; {reps} sweep(s) per configuration, configurations \
             alternated (order rotated each sweep); every sweep is a fresh job, started after \
             waiting up to {settle} s for other processes to use less than {BUSY_WARNING} CPU."
        ),
        format!(
            "Round trip: ping-pong of blocking send and receive, the echo sent back as received; \
             a sample times N round trips together, N calibrated in the warm-up so that a sample \
             takes about {} ms; figure = the lowest over the sweeps of the median of {} samples.",
            measure::SAMPLE_TIME.as_millis(),
            measure::SAMPLES
        ),
        format!(
            "Bandwidth: rank 0 starts a window of W non-blocking sends (mttl nsend / MPI_Isend; \
             W = 64 up to 64K, then 4 MiB / size, at least 2) and waits for them, rank 1 \
             receives all W and acknowledges with one 8-byte message; timed from first send to \
             acknowledgement; a sample is as many windows as take about {} ms; figure = the \
             highest over the sweeps of the median of {} samples. Every configuration \
             streams freshly written data: one buffer per message (mttl's nsend consumes owned \
             buffers; raw MPI rewrites reused ones), filled between windows, outside the timer.",
            measure::SAMPLE_TIME.as_millis(),
            measure::SAMPLES
        ),
    ];
    for c in configs {
        let mut line = format!("{}: {}", c.column(), c.description());
        if *c == Config::Tcp {
            line.push_str(&format!("; MTTL_SPIN_US={spin}"));
        }
        lines.push(line);
    }
    lines
}

/// Remarks about what was not measured, and about busy neighbours.
fn notes(configs: &[Config], log: &[JobLog]) -> Vec<String> {
    let mut notes = Vec::new();
    let disturbed: Vec<String> = log
        .iter()
        .filter(|j| j.disturbed())
        .map(|j| {
            format!(
                "sweep {} {}: {:.1}",
                j.sweep,
                j.config.name(),
                j.busy_during.unwrap_or(0.0)
            )
        })
        .collect();
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
             repeated up to {RETRIES} times, and only undisturbed runs count where a \
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
    if !cfg!(feature = "mpi") {
        notes.push(format!(
            "This mttl-bench was built without the `mpi` feature, so only mttl's TCP backend \
             was measured. For the MPI columns (Open MPI TCP, mttl MPI backend, raw rsmpi) run \
             `{MPI_BUILD_HINT}`."
        ));
    } else if configs.len() < Config::ALL.len() {
        let missing: Vec<&str> = Config::ALL
            .into_iter()
            .filter(|c| !configs.contains(c))
            .map(Config::name)
            .collect();
        notes.push(format!(
            "Not measured this time (see --backends): {}.",
            missing.join(", ")
        ));
    }
    notes
}
