//! `mttl-bench runtime`: what mttl's runtime primitives cost on this
//! machine: thread switch and spawn, invoke on the caller's node and round
//! trip to another, ainvoke throughput with many calls in flight, and
//! barrier latency, on the TCP and MPI backends side by side, with the comm
//! layer's and raw MPI's round trips for reference.
//!
//! | configuration | what runs                                                     | launched by                     |
//! |---------------|---------------------------------------------------------------|---------------------------------|
//! | `sched`       | mttl's thread scheduler alone (no runtime, no network)        | in the orchestrator's process   |
//! | `tcp`         | an mttl program: runtime on the TCP backend, 2 ranks          | [`launch::run`](mttl::comm::launch::run), TCP            |
//! | `mpi`         | an mttl program: runtime on the MPI backend, 2 ranks          | [`launch::run`](mttl::comm::launch::run), MPI (`mpirun`) |
//! | `comm-tcp`    | 16-byte ping-pong through [`AnyComm`] on TCP, no runtime      | [`launch::run`](mttl::comm::launch::run), TCP            |
//! | `comm-mpi`    | 16-byte ping-pong through [`AnyComm`] on MPI, no runtime      | [`launch::run`](mttl::comm::launch::run), MPI            |
//! | `raw-mpi`     | 16-byte ping-pong of plain rsmpi `Send`/`Recv`, no mttl       | `mpirun`                        |
//!
//! The MPI configurations exist only in builds with the cargo feature `mpi`.
//! What each metric times is in `measure`.
//!
//! # One invocation, step by step
//!
//! 1. The process the user started (the *orchestrator*) picks the
//!    configurations and makes a private temporary directory.
//! 2. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), it
//!    waits up to `--settle` seconds for other processes to leave the CPUs
//!    (`common::cpu_load::settle`), then measures `sched` itself, or starts its own
//!    executable as a two-rank job: `mttl-bench runtime --worker CONFIG
//!    --out FILE --sample-ms T`. A run during which other processes kept
//!    more than `BUSY_WARNING` CPU busy (`common::cpu_load::Meter`) is reported as
//!    disturbed.
//! 3. In an mttl program (`tcp`, `mpi`), rank 0's main measures every
//!    metric against rank 1, which only serves, and writes its samples to
//!    FILE (`results`); in a ping-pong configuration both
//!    ranks run the loop and rank 0 writes FILE.
//! 4. The orchestrator reads FILE. A job that fails stops the benchmark
//!    with the job's exit status.
//! 5. After the last sweep it keeps, per configuration and metric, the best
//!    run (`report`), prints the table, how it measured and
//!    the targets check (or one JSON document with `--json`), and removes
//!    the temporary directory.

mod measure;
mod report;
mod results;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::ValueEnum;
use mttl_comm::launch::{BackendKind, JobSpec};
use mttl_comm::{AnyComm, Comm, Rank};

use self::measure::PingPong;
use self::report::Summary;
use self::results::RunResult;
use crate::bench::common::jobs::{self, BenchConfig, TempDir};
#[cfg(feature = "mpi")]
use crate::bench::common::raw_mpi;
use crate::bench::common::report::{print, push_how_measured, spin_us_setting};
use crate::bench::common::sweep::{
    disturbed_runs, not_measured_note, JobLog, Sweeps, Swept, BUSY_WARNING,
};
pub use crate::bench::error::BenchError;
use crate::bench::results_file::ResultsFile;

/// The command that rebuilds this benchmark with the MPI configurations.
const MPI_BUILD_HINT: &str =
    "cargo run --release -p benches-npb --features mpi --bin mttl-bench -- runtime";

/// The tag of every ping-pong message.
const PING_TAG: mttl_comm::Tag = 7;

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Config {
    /// The thread scheduler alone, in the orchestrator's process.
    Sched,
    /// An mttl program on the TCP backend.
    Tcp,
    /// An mttl program on the MPI backend.
    Mpi,
    /// A ping-pong through the comm layer on TCP.
    CommTcp,
    /// A ping-pong through the comm layer on MPI.
    CommMpi,
    /// A ping-pong of plain rsmpi.
    RawMpi,
}

impl BenchConfig for Config {
    fn name(self) -> &'static str {
        match self {
            Config::Sched => "sched",
            Config::Tcp => "tcp",
            Config::Mpi => "mpi",
            Config::CommTcp => "comm-tcp",
            Config::CommMpi => "comm-mpi",
            Config::RawMpi => "raw-mpi",
        }
    }

    fn needs_mpi(self) -> bool {
        matches!(self, Config::Mpi | Config::CommMpi | Config::RawMpi)
    }
}

impl Config {
    /// Every configuration, in the order of a first sweep.
    const ALL: [Config; 6] = [
        Config::Sched,
        Config::Tcp,
        Config::CommTcp,
        Config::Mpi,
        Config::CommMpi,
        Config::RawMpi,
    ];

    /// How the configuration is named in the table.
    fn column(self) -> &'static str {
        match self {
            Config::Sched => "sched",
            Config::Tcp => "mttl-tcp",
            Config::Mpi => "mttl-mpi",
            Config::CommTcp => "comm-tcp",
            Config::CommMpi => "comm-mpi",
            Config::RawMpi => "raw-mpi",
        }
    }

    /// One line saying what runs.
    fn description(self) -> &'static str {
        match self {
            Config::Sched => {
                "mttl's thread scheduler alone: threads run by run_ready on the native stack, \
                 no runtime loop, no network"
            }
            Config::Tcp => "an mttl program on the TCP backend, 2 ranks (mttl_comm::launch::run)",
            Config::Mpi => "an mttl program on the MPI backend, 2 ranks (mpirun)",
            Config::CommTcp => "16-byte ping-pong through AnyComm on the TCP backend, no runtime",
            Config::CommMpi => "16-byte ping-pong through AnyComm on the MPI backend, no runtime",
            Config::RawMpi => {
                "16-byte ping-pong of plain rsmpi Send/Recv, no mttl, Open MPI's default \
                 transport (shared memory)"
            }
        }
    }

    /// The two-rank job that runs this configuration's workers.
    fn job(self, program: &Path, args: Vec<String>) -> JobSpec {
        let mut spec = JobSpec::new(2, program).args(args);
        if self.needs_mpi() {
            spec.backend = BackendKind::Mpi;
        }
        spec
    }
}

/// Arguments of `mttl-bench runtime`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeArgs {
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Sweeps per configuration; the best is kept.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// About how long one timed sample takes, in milliseconds.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    sample_ms: u64,
    /// How long to wait before each run for other processes to leave the
    /// CPUs, in seconds (0: do not wait).
    #[arg(long, default_value_t = 3.0, value_name = "SECS", value_parser = parse_settle)]
    settle: f64,
    /// Configurations to measure, comma-separated. Default: every one this
    /// build has (the MPI ones need the cargo feature `mpi`).
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<Config>>,
    /// Run as a worker rank of this configuration (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    worker: Option<Config>,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    out: Option<PathBuf>,
}

/// Parses `--settle`: a number of seconds, 0 to 600.
fn parse_settle(text: &str) -> Result<f64, String> {
    jobs::parse_seconds(text, 600)
}

/// Runs `mttl-bench runtime`: the orchestrator, or a worker rank when
/// started with `--worker`.
pub fn run(args: RuntimeArgs) -> Result<(), BenchError> {
    let sample_time = Duration::from_millis(args.sample_ms);
    match (args.worker, &args.out) {
        (Some(config), Some(out)) => worker(config, sample_time, out),
        _ => orchestrate(&args, sample_time),
    }
}

/// The configurations asked for, checked against this build.
fn chosen_configs(args: &RuntimeArgs) -> Result<Vec<Config>, BenchError> {
    jobs::chosen_configs(args.backends.as_deref(), &Config::ALL, MPI_BUILD_HINT)
}

/// Steps 1 to 5 of the module docs.
fn orchestrate(args: &RuntimeArgs, sample_time: Duration) -> Result<(), BenchError> {
    let configs = chosen_configs(args)?;
    let program = jobs::this_program()?;
    let dir = TempDir::new("runtime")?;
    let sweeps = Sweeps {
        bench: "runtime",
        configs: &configs,
        reps: args.reps,
        settle: args.settle,
        retries: 0,
        name_width: 9,
    };
    let Swept { runs, log } = sweeps.run(
        |config, rep, _| {
            if config == Config::Sched {
                return Ok(RunResult {
                    backend: "none".to_owned(),
                    metrics: measure::scheduler_alone(sample_time),
                });
            }
            let out = dir.path().join(format!("{}-{rep}.json", config.name()));
            run_job(config, &program, &out, args.sample_ms)?;
            RunResult::read(config.name(), &out)
        },
        |_, _| {},
    )?;
    let summary = Summary::new(&runs);
    let method = method_lines(args, &configs);
    let notes = notes(&configs, &log);
    if args.json {
        let mut doc = summary.to_json(args.reps, args.sample_ms, &method, &notes);
        doc["foreign_load"] = log.iter().map(foreign_load_json).collect();
        print(&format!("{doc:#}\n"))
    } else {
        let mut text = format!(
            "mttl runtime micro-benchmarks, 2 ranks on this machine, best of {} run(s)\n\n",
            args.reps
        );
        text.push_str(&summary.table());
        push_how_measured(&mut text, &method, &notes);
        text.push_str(&summary.targets_text());
        print(&text)
    }
}

/// Step 2 for a configuration that runs as a job.
fn run_job(config: Config, program: &Path, out: &Path, sample_ms: u64) -> Result<(), BenchError> {
    let worker_args = vec![
        "runtime".to_owned(),
        "--worker".to_owned(),
        config.name().to_owned(),
        "--out".to_owned(),
        out.to_string_lossy().into_owned(),
        "--sample-ms".to_owned(),
        sample_ms.to_string(),
    ];
    jobs::run_worker_job(config, &config.job(program, worker_args))
}

/// An entry of the `--json` document's `foreign_load`: one run, and how
/// busy other processes kept the machine around it.
fn foreign_load_json(run: &JobLog<Config>) -> serde_json::Value {
    serde_json::json!({
        "sweep": run.sweep,
        "config": run.config.name(),
        "busy_cpus_before": run.busy_before,
        "busy_cpus_during": run.busy_during,
        "disturbed": run.disturbed(),
    })
}

/// How the figures were measured, one sentence per line.
fn method_lines(args: &RuntimeArgs, configs: &[Config]) -> Vec<String> {
    let (reps, sample_ms, settle) = (args.reps, args.sample_ms, args.settle);
    let mut lines = vec![
        format!(
            "{reps} sweep(s) per configuration, configurations alternated (order rotated each \
             sweep); every sweep of a job configuration is a fresh two-rank job, started after \
             waiting up to {settle} s for other processes to use less than {BUSY_WARNING} CPU."
        ),
        format!(
            "Each metric is calibrated so that a sample takes about {sample_ms} ms; a run's \
             figure is the median of {} samples, and the table shows the best run.",
            measure::SAMPLES
        ),
        "switch: two threads yield_now in turn; spawn: empty threads spawned in batches and \
         run to their end; invoke: a u64 echo, one call at a time; ainvoke: windows of calls \
         started before the first is waited for, then all waited for; barrier: a loop of \
         barriers on both ranks started by spmd, timed on rank 0; round trip: 16 bytes each \
         way, blocking send and receive."
            .to_owned(),
        format!(
            "MTTL_SPIN_US={} (how long a blocked TCP receive spins before parking).",
            spin_us_setting()
        ),
    ];
    for c in configs {
        lines.push(format!("{}: {}", c.column(), c.description()));
    }
    lines
}

/// Remarks about busy neighbours and what was not measured.
fn notes(configs: &[Config], log: &[JobLog<Config>]) -> Vec<String> {
    let mut notes = Vec::new();
    let disturbed = disturbed_runs(log);
    if disturbed.is_empty() {
        notes.push(format!(
            "No run was disturbed: other processes kept less than {BUSY_WARNING} CPU busy \
             while each ran."
        ));
    } else {
        notes.push(format!(
            "Other processes kept CPUs busy during some runs ({}); those runs may be slow, \
             and a best-of-K figure is clean only if another run of it was not disturbed.",
            disturbed.join(", ")
        ));
    }
    if !cfg!(feature = "mpi") {
        notes.push(format!(
            "This mttl-bench was built without the `mpi` feature, so only the TCP backend and \
             the scheduler were measured. For the MPI column run `{MPI_BUILD_HINT}`."
        ));
    } else {
        notes.extend(not_measured_note(&Config::ALL, configs));
    }
    notes
}

/// Step 3 of the module docs: one worker rank.
fn worker(config: Config, sample_time: Duration, out: &Path) -> Result<(), BenchError> {
    match config {
        Config::Sched => Err(BenchError::Usage(
            "the sched configuration runs in the orchestrator, not as a job".into(),
        )),
        Config::Tcp | Config::Mpi => program_worker(config, sample_time, out),
        Config::CommTcp | Config::CommMpi => comm_worker(config, sample_time, out),
        Config::RawMpi => raw_worker(config, sample_time, out),
    }
}

/// The backend an mttl configuration must run on.
fn backend_of(config: Config) -> &'static str {
    if config.needs_mpi() {
        "mpi"
    } else {
        "tcp"
    }
}

/// An mttl program: rank 0 measures, rank 1 serves.
fn program_worker(config: Config, sample_time: Duration, out: &Path) -> Result<(), BenchError> {
    let out = out.to_owned();
    let name = config.name();
    let code = mttl::start(move || -> Result<(), String> {
        let (backend, size) = (mttl::backend_name(), mttl::size());
        if backend != backend_of(config) || size != 2 {
            return Err(format!(
                "worker for {name}: the job runs {size} ranks on the {backend} backend \
                 instead of 2 on {}",
                backend_of(config)
            ));
        }
        RunResult {
            backend: backend.to_owned(),
            metrics: measure::in_program(sample_time),
        }
        .write(name, &out)
        .map_err(|e| e.to_string())
    });
    if code == 0 {
        Ok(())
    } else {
        Err(BenchError::Setup {
            config: name,
            detail: format!("the mttl program exited with status {code}"),
        })
    }
}

/// A ping-pong endpoint on mttl's comm layer.
#[derive(Debug)]
struct CommEndpoint {
    comm: AnyComm,
    last: Vec<u8>,
}

impl PingPong for CommEndpoint {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn send(&mut self, data: &[u8]) -> Result<(), BenchError> {
        let peer: Rank = 1 - self.comm.rank();
        Ok(self.comm.send(peer, PING_TAG, data)?)
    }

    fn recv(&mut self) -> Result<&[u8], BenchError> {
        let peer: Rank = 1 - self.comm.rank();
        match self.comm.recv_from(peer, None)? {
            Some(message) => {
                self.last = message.data;
                Ok(&self.last)
            }
            None => Err(BenchError::Protocol {
                rank: self.comm.rank(),
                detail: "a receive without a timeout returned no message".into(),
            }),
        }
    }
}

fn comm_worker(config: Config, sample_time: Duration, out: &Path) -> Result<(), BenchError> {
    let comm = AnyComm::init()?;
    let backend = comm.backend_name();
    if backend != backend_of(config) || comm.size() != 2 {
        return Err(BenchError::Setup {
            config: config.name(),
            detail: format!(
                "the job runs {} ranks on the {backend} backend instead of 2 on {}",
                comm.size(),
                backend_of(config)
            ),
        });
    }
    let mut ep = CommEndpoint {
        comm,
        last: Vec::new(),
    };
    let samples = measure::ping_pong(&mut ep, sample_time)?;
    if ep.comm.rank() == 0 {
        RunResult {
            backend: backend.to_owned(),
            metrics: vec![(measure::Metric::RoundTrip, samples)],
        }
        .write(config.name(), out)?;
    }
    ep.comm.finish()?;
    Ok(())
}

#[cfg(feature = "mpi")]
fn raw_worker(config: Config, sample_time: Duration, out: &Path) -> Result<(), BenchError> {
    use mpi::datatype::Equivalence;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Communicator, SimpleCommunicator};

    /// A ping-pong endpoint on plain rsmpi.
    struct RawEndpoint {
        world: SimpleCommunicator,
        buffer: Vec<u8>,
        len: usize,
    }

    impl PingPong for RawEndpoint {
        fn rank(&self) -> usize {
            self.world.rank().unsigned_abs() as usize
        }

        fn send(&mut self, data: &[u8]) -> Result<(), BenchError> {
            let peer = 1 - self.world.rank();
            self.world.process_at_rank(peer).send(data);
            Ok(())
        }

        fn recv(&mut self) -> Result<&[u8], BenchError> {
            let peer = 1 - self.world.rank();
            let status = self
                .world
                .process_at_rank(peer)
                .receive_into(&mut self.buffer[..]);
            let count = status.count(u8::equivalent_datatype());
            self.len = usize::try_from(count).map_err(|_| BenchError::Protocol {
                rank: self.rank(),
                detail: format!("MPI reported a message of {count} elements"),
            })?;
            Ok(&self.buffer[..self.len])
        }
    }

    let (universe, world) = raw_mpi::init_pair(config.name())?;
    let mut ep = RawEndpoint {
        world,
        buffer: vec![0; 64],
        len: 0,
    };
    let samples = measure::ping_pong(&mut ep, sample_time)?;
    if ep.rank() == 0 {
        RunResult {
            backend: "rsmpi".to_owned(),
            metrics: vec![(measure::Metric::RoundTrip, samples)],
        }
        .write(config.name(), out)?;
    }
    drop(ep);
    drop(universe);
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn raw_worker(config: Config, _sample_time: Duration, _out: &Path) -> Result<(), BenchError> {
    Err(BenchError::Setup {
        config: config.name(),
        detail: format!("this build has no MPI; rebuild with `{MPI_BUILD_HINT}`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_themselves_as_clap_does() {
        for c in Config::ALL {
            assert_eq!(Config::from_str(c.name(), false), Ok(c));
        }
    }
}
