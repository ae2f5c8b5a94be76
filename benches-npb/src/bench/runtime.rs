//! `mttl-bench runtime`: what mttl's runtime primitives cost on this
//! machine: thread switch and spawn, invoke on the caller's node and round
//! trip to another, ainvoke and invoke_nowait throughput with many calls in
//! flight, and barrier latency, on the TCP and MPI backends side by side,
//! with the comm layer's and raw MPI's round trips for reference.
//!
//! The configurations are the rows of [`Config`]: the scheduler alone in
//! this process, mttl programs on either backend, and 16-byte ping-pongs
//! through the comm layer and plain rsmpi for reference.
//!
//! The MPI configurations exist only in builds with the cargo feature `mpi`.
//! What each metric times is in `measure`.
//!
//! # One invocation, step by step
//!
//! 1. The orchestrator runs the sweeps of the [engine](crate::bench::sweep)
//!    without repeating disturbed runs: it measures `sched` itself, and
//!    starts every other configuration as a two-rank job of this program,
//!    `mttl-bench runtime --worker CONFIG --out FILE --sample-ms T`.
//! 2. In an mttl program (`tcp`, `mpi`), rank 0's main measures every
//!    metric against rank 1, which only serves; in a ping-pong
//!    configuration both ranks run the loop (the endpoints of
//!    [`comm`](super::comm)); rank 0 writes its samples to FILE.
//! 3. After the last sweep it keeps, per configuration and metric, the best
//!    run (`report`), prints the table, how it measured and the targets
//!    check (or one JSON document with `--json`).

mod measure;
mod report;

use std::path::Path;
use std::time::Duration;

use self::report::Summary;
use super::comm::endpoint::mttl_comm_worker;
pub use crate::bench::error::BenchError;
use crate::bench::sweep::jobs::{self, bench_configs, BenchConfig, Measured, SweepArgs};
use crate::bench::sweep::report::{self as rep, spin_us_setting, Report};
use crate::bench::sweep::BUSY_WARNING;

bench_configs! {
    /// What to measure.
    pub enum Config {
        /// The thread scheduler alone, in the orchestrator's process.
        Sched => "sched", "sched", false, &[],
            "mttl's thread scheduler alone: threads run by run_ready on the native stack, \
             no runtime loop, no network";
        /// An mttl program on the TCP backend.
        Tcp => "tcp", "mttl-tcp", false, &[],
            "an mttl program on the TCP backend, 2 ranks (mttl_comm::launch::run)";
        /// A ping-pong through the comm layer on TCP.
        CommTcp => "comm-tcp", "comm-tcp", false, &[],
            "16-byte ping-pong through AnyComm on the TCP backend, no runtime";
        /// An mttl program on the MPI backend.
        Mpi => "mpi", "mttl-mpi", true, &[], "an mttl program on the MPI backend, 2 ranks (mpirun)";
        /// A ping-pong through the comm layer on MPI.
        CommMpi => "comm-mpi", "comm-mpi", true, &[],
            "16-byte ping-pong through AnyComm on the MPI backend, no runtime";
        /// A ping-pong of plain rsmpi.
        RawMpi => "raw-mpi", "raw-mpi", true, &[],
            "16-byte ping-pong of plain rsmpi Send/Recv, no mttl, Open MPI's default \
             transport (shared memory)";
    }
}

/// Arguments of `mttl-bench runtime`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeArgs {
    /// About how long one timed sample takes, in milliseconds.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    sample_ms: u64,
    #[command(flatten)]
    sweep: SweepArgs<Config, 3>,
}

/// Runs `mttl-bench runtime`: the orchestrator, or a worker rank when
/// started with `--worker`.
pub fn run(args: RuntimeArgs) -> Result<(), BenchError> {
    let sample_time = Duration::from_millis(args.sample_ms);
    if let Some((config, out)) = args.sweep.worker() {
        return worker(config, sample_time, out);
    }
    let extra = ["--sample-ms".to_owned(), args.sample_ms.to_string()];
    let swept = args.sweep.sweep(
        "runtime",
        Config::ALL,
        0,
        |_, _| extra.to_vec(),
        |config| {
            (config == Config::Sched).then(|| Measured {
                backend: "none".to_owned(),
                samples: measure::scheduler_alone(sample_time),
            })
        },
    )?;
    let summary = Summary::new(&swept.runs);
    let mut report = Report::new("runtime", args.sweep.reps, Config::ALL, &swept, 0);
    report.method = method_lines(&args, &swept.configs());
    report.tables = format!(
        "mttl runtime micro-benchmarks, 2 ranks on this machine, best of {} run(s)\n\n{}",
        args.sweep.reps,
        summary.table()
    );
    report.targets = summary.targets();
    report.doc = summary.to_json(args.sample_ms);
    report.emit(args.sweep.json, false)
}

/// How the figures were measured, one sentence per line.
fn method_lines(args: &RuntimeArgs, configs: &[Config]) -> Vec<String> {
    let (reps, settle) = (args.sweep.reps, args.sweep.settle());
    let mut lines = vec![
        format!(
            "{reps} sweep(s) per configuration, configurations alternated (order rotated each \
             sweep); every sweep of a job configuration is a fresh two-rank job, started after \
             waiting up to {settle} s for other processes to use less than {BUSY_WARNING} CPU."
        ),
        format!(
            "Each metric is calibrated so that a sample takes about {} ms; a run's figure is \
             the median of {} samples, and the table shows the best run.",
            args.sample_ms,
            measure::SAMPLES
        ),
        "switch: two threads yield_now in turn; spawn: empty threads spawned in batches and \
         run to their end; invoke: a u64 echo, one call at a time; ainvoke: windows of calls \
         started before the first is waited for, then all waited for; invoke_nowait: windows \
         of calls completed by one fence; barrier: a loop of \
         barriers on both ranks started by spmd, timed on rank 0; round trip: 16 bytes each \
         way, blocking send and receive."
            .to_owned(),
        format!(
            "MTTL_SPIN_US={} (how long a blocked TCP receive spins before parking).",
            spin_us_setting()
        ),
    ];
    lines.extend(rep::config_lines(configs, false));
    lines
}

/// Step 2 of the module docs: one worker rank.
fn worker(config: Config, sample_time: Duration, out: &Path) -> Result<(), BenchError> {
    let name = config.name();
    match config {
        Config::Sched => Err(BenchError::Usage(
            "the sched configuration runs in the orchestrator, not as a job".into(),
        )),
        Config::Tcp | Config::Mpi => jobs::mttl_program(name, config.backend(), out, move || {
            Ok(measure::in_program(sample_time))
        }),
        Config::CommTcp | Config::CommMpi => mttl_comm_worker(name, config.backend(), out, |ep| {
            Ok(vec![(
                "round_trip".to_owned(),
                measure::ping_pong(ep, sample_time)?,
            )])
        }),
        #[cfg(feature = "mpi")]
        Config::RawMpi => jobs::raw_mpi_worker(name, out, |world| {
            let mut ep = super::comm::endpoint::RawMpiEndpoint::new(world, 64);
            Ok(vec![(
                "round_trip".to_owned(),
                measure::ping_pong(&mut ep, sample_time)?,
            )])
        }),
        #[cfg(not(feature = "mpi"))]
        Config::RawMpi => Err(jobs::no_mpi(name, "runtime")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_themselves_as_clap_does() {
        jobs::assert_named_as_clap_does::<Config>();
    }

    #[test]
    fn settle_defaults_to_three_seconds_here() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: RuntimeArgs,
        }
        let parse = |args: &[&str]| <Cli as clap::Parser>::parse_from(args).args.sweep.settle();
        assert_eq!(parse(&["runtime"]), 3.0);
        assert_eq!(parse(&["runtime", "--settle", "0.5"]), 0.5);
    }
}
