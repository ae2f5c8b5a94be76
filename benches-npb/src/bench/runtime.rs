//! `mttl-bench runtime`: what mttl's runtime primitives cost on this
//! machine: thread switch and spawn, invoke on the caller's node and round
//! trip to another, ainvoke throughput with many calls in flight, and
//! barrier latency, on the TCP and MPI backends side by side, with the comm
//! layer's and raw MPI's round trips for reference.
//!
//! | configuration | what runs                                                     | launched by                     |
//! |---------------|---------------------------------------------------------------|---------------------------------|
//! | `sched`       | mttl's thread scheduler alone (no runtime, no network)        | in the orchestrator's process   |
//! | `tcp`         | an mttl program: runtime on the TCP backend, 2 ranks          | [`launch::run`], TCP            |
//! | `mpi`         | an mttl program: runtime on the MPI backend, 2 ranks          | [`launch::run`], MPI (`mpirun`) |
//! | `comm-tcp`    | 16-byte ping-pong through [`AnyComm`] on TCP, no runtime      | [`launch::run`], TCP            |
//! | `comm-mpi`    | 16-byte ping-pong through [`AnyComm`] on MPI, no runtime      | [`launch::run`], MPI            |
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
//!    (`load::settle`), then measures `sched` itself, or starts its own
//!    executable as a two-rank job: `mttl-bench runtime --worker CONFIG
//!    --out FILE --sample-ms T`. A run during which other processes kept
//!    more than `BUSY_WARNING` CPU busy (`load::Meter`) is reported as
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

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use mttl_comm::launch::{self, BackendKind, JobSpec};
use mttl_comm::{AnyComm, Comm, Rank};

use self::measure::PingPong;
use self::report::Summary;
use self::results::RunResult;
use super::comm::load;
pub use crate::bench::error::BenchError;

/// The command that rebuilds this benchmark with the MPI configurations.
const MPI_BUILD_HINT: &str =
    "cargo run --release -p benches-npb --features mpi --bin mttl-bench -- runtime";

/// Foreign load, in CPUs, above which a run counts as disturbed.
const BUSY_WARNING: f64 = 0.25;

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

    /// The name `--backends` takes.
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
                 no runtime loop, no network (as mttl-core's thread_bench)"
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

    fn needs_mpi(self) -> bool {
        matches!(self, Config::Mpi | Config::CommMpi | Config::RawMpi)
    }

    /// Whether this build can run it.
    fn available(self) -> bool {
        cfg!(feature = "mpi") || !self.needs_mpi()
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
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=600.0).contains(&secs) => Ok(secs),
        _ => Err(format!("{text:?} is not a number of seconds from 0 to 600")),
    }
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
    let Some(asked) = &args.backends else {
        return Ok(Config::ALL.into_iter().filter(|c| c.available()).collect());
    };
    let mut chosen = Vec::new();
    for &config in asked {
        if !config.available() {
            return Err(BenchError::Usage(format!(
                "configuration {} needs MPI, and this mttl-bench was built without the \
                 `mpi` feature; rebuild with `{MPI_BUILD_HINT}`",
                config.name()
            )));
        }
        if !chosen.contains(&config) {
            chosen.push(config);
        }
    }
    if chosen.is_empty() {
        return Err(BenchError::Usage(
            "--backends names no configuration".into(),
        ));
    }
    Ok(chosen)
}

/// A temporary directory removed when dropped.
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, BenchError> {
        let path = std::env::temp_dir().join(format!("mttl-bench-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| BenchError::Io {
            what: "create the temporary directory",
            path: path.clone(),
            source,
        })?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Steps 1 to 5 of the module docs.
fn orchestrate(args: &RuntimeArgs, sample_time: Duration) -> Result<(), BenchError> {
    let configs = chosen_configs(args)?;
    let program = std::env::current_exe().map_err(|source| BenchError::Io {
        what: "find the path of",
        path: PathBuf::from("this program"),
        source,
    })?;
    let dir = TempDir::new()?;
    let mut runs: Vec<(Config, Vec<RunResult>)> =
        configs.iter().map(|&c| (c, Vec::new())).collect();
    let mut load_log: Vec<LoadEntry> = Vec::new();
    for rep in 0..args.reps as usize {
        for k in 0..configs.len() {
            let i = (k + rep) % configs.len();
            let config = configs[i];
            eprint!(
                "mttl-bench runtime: sweep {}/{}: {:<9}",
                rep + 1,
                args.reps,
                config.name()
            );
            let _ = std::io::stderr().flush();
            let busy_before = load::settle(BUSY_WARNING, Duration::from_secs_f64(args.settle));
            let meter = load::Meter::start();
            let started = Instant::now();
            let result = if config == Config::Sched {
                RunResult {
                    backend: "none".to_owned(),
                    metrics: measure::scheduler_alone(sample_time),
                }
            } else {
                let out = dir.0.join(format!("{}-{rep}.json", config.name()));
                run_job(config, &program, &out, args.sample_ms)?;
                RunResult::read(config.name(), &out)?
            };
            let busy_during = meter.and_then(|m| m.foreign_cpus());
            match busy_during {
                Some(b) if b >= BUSY_WARNING => eprintln!(
                    " {:.1} s, disturbed: others kept {b:.1} CPUs busy meanwhile",
                    started.elapsed().as_secs_f64()
                ),
                _ => eprintln!(" {:.1} s", started.elapsed().as_secs_f64()),
            }
            load_log.push(LoadEntry {
                sweep: rep + 1,
                config,
                busy_before,
                busy_during,
            });
            runs[i].1.push(result);
        }
    }
    let summary = Summary::new(&runs);
    let method = method_lines(args, &configs);
    let notes = notes(&configs, &load_log);
    let mut stdout = std::io::stdout().lock();
    let printed = if args.json {
        let mut doc = summary.to_json(args.reps, args.sample_ms, &method, &notes);
        doc["foreign_load"] = load_log.iter().map(|e| e.to_json()).collect();
        writeln!(stdout, "{doc:#}")
    } else {
        let mut text = format!(
            "mttl runtime micro-benchmarks, 2 ranks on this machine, best of {} run(s)\n\n",
            args.reps
        );
        text.push_str(&summary.table());
        text.push_str("\nHow measured\n");
        for line in method.iter().chain(&notes) {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
        text.push_str(&summary.targets_text());
        write!(stdout, "{text}")
    };
    printed.map_err(|source| BenchError::Io {
        what: "write the results to",
        path: PathBuf::from("standard output"),
        source,
    })
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
    let outcome = launch::run(&config.job(program, worker_args)).map_err(|source| {
        eprintln!();
        BenchError::Launch {
            config: config.name(),
            source,
        }
    })?;
    if !outcome.success() {
        eprintln!();
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
    Ok(())
}

/// One run, and how busy other processes kept the machine around it.
#[derive(Debug, Clone, Copy)]
struct LoadEntry {
    sweep: usize,
    config: Config,
    /// CPUs others kept busy just before the run ([`load::settle`]).
    busy_before: Option<f64>,
    /// CPUs others kept busy while it ran ([`load::Meter`]).
    busy_during: Option<f64>,
}

impl LoadEntry {
    fn disturbed(&self) -> bool {
        self.busy_during.is_some_and(|b| b >= BUSY_WARNING)
    }

    fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "sweep": self.sweep,
            "config": self.config.name(),
            "busy_cpus_before": self.busy_before,
            "busy_cpus_during": self.busy_during,
            "disturbed": self.disturbed(),
        })
    }
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
            std::env::var(mttl_comm::env::SPIN_US).unwrap_or_else(|_| "50 (default)".into())
        ),
    ];
    for c in configs {
        lines.push(format!("{}: {}", c.column(), c.description()));
    }
    lines
}

/// Remarks about busy neighbours and what was not measured.
fn notes(configs: &[Config], load_log: &[LoadEntry]) -> Vec<String> {
    let mut notes = Vec::new();
    let disturbed: Vec<String> = load_log
        .iter()
        .filter(|e| e.disturbed())
        .map(|e| {
            format!(
                "sweep {} {}: {:.1}",
                e.sweep,
                e.config.name(),
                e.busy_during.unwrap_or_default()
            )
        })
        .collect();
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
    use mpi::Threading;

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

    let setup = |detail: String| BenchError::Setup {
        config: config.name(),
        detail,
    };
    // The mttl MPI backend runs at FUNNELED; the baseline does the same.
    let (universe, _) = mpi::initialize_with_threading(Threading::Funneled)
        .ok_or_else(|| setup("MPI was already initialised in this process".into()))?;
    let world = universe.world();
    if world.size() != 2 {
        return Err(setup(format!(
            "the MPI job has {} ranks instead of 2 (was this program started by the mpirun \
             of the MPI it was built against?)",
            world.size()
        )));
    }
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
