//! The orchestrator of `mttl-bench comm`: steps 1, 2, 4 and 5 of the
//! [module docs](super). It starts the worker jobs (the sweeps of
//! [`common::sweep`](crate::bench::common::sweep)), and prints what they
//! measured.

use std::path::Path;

use super::report::Summary;
use super::results::RunResult;
use super::{chosen_configs, measure, BenchError, CommArgs, Config, MPI_BUILD_HINT, RETRIES};
use crate::bench::common::jobs::{self, BenchConfig, TempDir};
use crate::bench::common::report::{print, push_how_measured, spin_us_setting};
use crate::bench::common::sweep::{
    disturbance_notes, not_measured_note, JobLog, Sweeps, Swept, BUSY_WARNING,
};
use crate::bench::results_file::ResultsFile;

/// Runs one worker job of `config` and reads its results.
fn run_job(
    config: Config,
    program: &Path,
    args: Vec<String>,
    out: &Path,
) -> Result<RunResult, BenchError> {
    jobs::run_worker_job(config, &config.job(program, args))?;
    RunResult::read(config.name(), out)
}

/// Steps 1, 2, 4 and 5 of the [module docs](super).
pub(super) fn orchestrate(args: &CommArgs, sizes: &[usize]) -> Result<(), BenchError> {
    let configs = chosen_configs(args)?;
    let program = jobs::this_program()?;
    let dir = TempDir::new("comm")?;
    let size_list = sizes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let sweeps = Sweeps {
        bench: "comm",
        configs: &configs,
        reps: args.reps,
        settle: args.settle,
        retries: RETRIES,
        name_width: 12,
    };
    let Swept { runs, log } = sweeps.run(
        |config, rep, attempt| {
            let out = dir
                .path()
                .join(format!("{}-{rep}-{attempt}.json", config.name()));
            let mut worker_args = vec![
                "comm".to_owned(),
                "--worker".to_owned(),
                config.name().to_owned(),
                "--out".to_owned(),
                out.to_string_lossy().into_owned(),
                "--sizes".to_owned(),
                size_list.clone(),
            ];
            if rep % 2 == 1 && matches!(config, Config::MpiVsRaw | Config::RawVsRaw) {
                worker_args.push("--second-first".to_owned());
            }
            run_job(config, &program, worker_args, &out).map(|run| RunResult { sweep: rep, ..run })
        },
        |result, disturbed| result.disturbed = disturbed,
    )?;
    let summary = Summary::new(sizes, &runs);
    let method = method_lines(args.reps, args.settle, &configs);
    let notes = notes(&configs, &log);
    let mut text = summary.tables();
    push_how_measured(&mut text, &method, &notes);
    text.push_str(&summary.targets_text());
    if args.json {
        // The tables still reach a person watching, on stderr.
        eprint!("{text}");
        let mut doc = summary.to_json(args.reps, &method, &notes);
        doc["jobs"] = log.iter().map(|j| j.to_json()).collect();
        print(&format!("{doc:#}\n"))
    } else {
        print(&text)
    }
}

/// How the figures were measured, one sentence per line.
fn method_lines(reps: u32, settle: f64, configs: &[Config]) -> Vec<String> {
    let spin = spin_us_setting();
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
    let has = |c: Config| configs.contains(&c);
    if (has(Config::Tcp) && has(Config::RawMpiTcp)) || (has(Config::Mpi) && has(Config::RawMpi)) {
        lines.insert(
            1,
            "Ratios (tcp/ompi, mpi/raw) divide the two best figures; paired is the median over \
             the sweeps of each sweep's ratio (the two jobs of a sweep ran one after the other), \
             which one lucky job of either side moves less."
                .to_owned(),
        );
    }
    if has(Config::MpiVsRaw) || has(Config::RawVsRaw) {
        let turns = measure::TURNS
            .iter()
            .map(|&second| if second { "second" } else { "first" })
            .collect::<Vec<_>>()
            .join(", ");
        lines.push(format!(
            "1 job (mpi-vs-raw): mttl's MPI backend (first) and raw rsmpi (second) in the same \
             two processes, taking turns at each size ({turns}; the other way round every other \
             sweep, as the side that goes first touches its memory first), each turn a full round-trip \
             and bandwidth measurement as above; the job's ratio divides the median of the \
             first's samples by that of the second's, and the column is the median of the \
             sweeps' ratios. Separate jobs on a shared VM can run in faster or slower modes for \
             their whole life; in one job both stacks meet the same one."
        ));
        lines.push(
            "control (raw-vs-raw): the same with raw rsmpi on both sides, two endpoints with \
             buffers of their own; how far it strays from 1.00 shows how far the 1 job column \
             can be trusted at that size (which memory a large message's buffers get decides \
             much of its speed)."
                .to_owned(),
        );
    }
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
fn notes(configs: &[Config], log: &[JobLog<Config>]) -> Vec<String> {
    let mut notes = disturbance_notes(configs, log, RETRIES);
    if !cfg!(feature = "mpi") {
        notes.push(format!(
            "This mttl-bench was built without the `mpi` feature, so only mttl's TCP backend \
             was measured. For the MPI columns (Open MPI TCP, mttl MPI backend, raw rsmpi) run \
             `{MPI_BUILD_HINT}`."
        ));
    } else {
        notes.extend(not_measured_note(&Config::ALL, configs));
    }
    notes
}
