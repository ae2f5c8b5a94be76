//! `mttl-bench comm`: round-trip latency and streaming bandwidth between two
//! ranks on this machine, for mttl's backends and for raw MPI, side by side.
//!
//! | configuration | what runs                                          | launched by                            |
//! |---------------|----------------------------------------------------|----------------------------------------|
//! | `tcp`         | mttl's TCP backend through [`AnyComm`]             | [`launch::run`], TCP                   |
//! | `mpi`         | mttl's MPI backend through [`AnyComm`]             | [`launch::run`], MPI (`mpirun`)        |
//! | `raw-mpi`     | plain rsmpi `Send`/`Recv`/`Isend`, no mttl         | `mpirun`, Open MPI's default transport |
//! | `raw-mpi-tcp` | the same over Open MPI's TCP transport             | `mpirun`, `pml ob1`, `btl tcp,self`    |
//!
//! The MPI configurations exist only in builds with the cargo feature `mpi`.
//!
//! # One invocation, step by step
//!
//! 1. The process the user started (the *orchestrator*) reads the sizes and
//!    configurations and makes a private temporary directory.
//! 2. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), it
//!    waits up to `--settle` seconds for other processes to leave the CPUs
//!    idle, then starts its own executable as a two-rank job: `mttl-bench
//!    comm --worker CONFIG --out FILE --sizes ...`. MPI configurations go through the
//!    launcher's MPI hand-over (`mpirun --oversubscribe -np 2`, plus
//!    `--allow-run-as-root` as root); `raw-mpi-tcp` also passes
//!    `OMPI_MCA_pml=ob1` and `OMPI_MCA_btl=tcp,self` to its ranks.
//! 3. Both worker ranks join the job (refusing a job of the wrong kind or
//!    size), run the loops of [`measure`](self::measure) for every size, and
//!    rank 0 writes its samples to FILE ([`results`](self::results)) before
//!    both leave the job.
//! 4. The orchestrator reads FILE. A job that fails stops the benchmark
//!    with the job's exit status. A job during which other processes kept
//!    more than [`BUSY_WARNING`] CPU busy ([`load::Meter`]) is *disturbed*:
//!    it is repeated, up to [`RETRIES`] times, and its figures count only if
//!    no undisturbed run of that configuration exists.
//! 5. After the last sweep it keeps, per configuration and size, the best
//!    undisturbed run ([`report`](self::report)), prints the tables, how it measured and
//!    the targets check (or one JSON document with `--json`), and removes
//!    the temporary directory.

mod endpoint;
mod error;
pub(super) mod load;
mod measure;
mod report;
mod results;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use mttl_comm::launch::{self, BackendKind, JobSpec};
use mttl_comm::{AnyComm, Comm};

use self::endpoint::MttlEndpoint;
pub use self::error::CommBenchError;
use self::report::{size_label, Summary};
use self::results::RunResult;

/// The default sizes: 8 B to 16 MiB.
const DEFAULT_SIZES: &[usize] = &[
    8,
    64,
    512,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

/// Foreign load, in CPUs, above which a run counts as disturbed.
const BUSY_WARNING: f64 = 0.25;

/// How many times a disturbed run is repeated within one sweep.
const RETRIES: usize = 2;

/// The largest size accepted (bandwidth windows hold several in memory).
const MAX_SIZE: usize = 256 << 20;

/// The command that rebuilds this benchmark with the MPI configurations.
const MPI_BUILD_HINT: &str =
    "cargo run --release -p benches-npb --features mpi --bin mttl-bench -- comm";

/// A communication stack to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Config {
    /// mttl's TCP backend, launched by mttl's launcher.
    Tcp,
    /// mttl's MPI backend, launched by `mpirun`.
    Mpi,
    /// Plain rsmpi, Open MPI's default transport.
    RawMpi,
    /// Plain rsmpi over Open MPI's TCP transport.
    RawMpiTcp,
}

impl Config {
    /// Every configuration, in table order.
    pub(super) const ALL: [Config; 4] =
        [Config::Tcp, Config::RawMpiTcp, Config::Mpi, Config::RawMpi];

    /// The name `--backends` takes.
    pub(super) fn name(self) -> &'static str {
        match self {
            Config::Tcp => "tcp",
            Config::Mpi => "mpi",
            Config::RawMpi => "raw-mpi",
            Config::RawMpiTcp => "raw-mpi-tcp",
        }
    }

    /// The column header in the tables.
    pub(super) fn column(self) -> &'static str {
        match self {
            Config::Tcp => "mttl-tcp",
            Config::Mpi => "mttl-mpi",
            Config::RawMpi => "raw-mpi",
            Config::RawMpiTcp => "ompi-tcp",
        }
    }

    /// One line saying what runs.
    fn description(self) -> &'static str {
        match self {
            Config::Tcp => "mttl TCP backend (AnyComm), launched by mttl_comm::launch::run",
            Config::Mpi => "mttl MPI backend (AnyComm), launched by mpirun",
            Config::RawMpi => {
                "raw rsmpi Send/Recv/Isend, no mttl, Open MPI's default transport (shared memory)"
            }
            Config::RawMpiTcp => {
                "raw rsmpi Send/Recv/Isend, no mttl, Open MPI's TCP transport \
                 (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self)"
            }
        }
    }

    pub(super) fn needs_mpi(self) -> bool {
        self != Config::Tcp
    }

    /// Whether this build can run it.
    pub(super) fn available(self) -> bool {
        cfg!(feature = "mpi") || !self.needs_mpi()
    }

    /// The two-rank job that runs this configuration's workers.
    pub(super) fn job(self, program: &Path, args: Vec<String>) -> JobSpec {
        let mut spec = JobSpec::new(2, program).args(args);
        if self.needs_mpi() {
            spec.backend = BackendKind::Mpi;
        }
        if self == Config::RawMpiTcp {
            spec.extra_env = vec![
                ("OMPI_MCA_pml".into(), "ob1".into()),
                ("OMPI_MCA_btl".into(), "tcp,self".into()),
            ];
        }
        spec
    }
}

/// Arguments of `mttl-bench comm`.
#[derive(Debug, Clone, clap::Args)]
pub struct CommArgs {
    /// Print one JSON document on stdout (the tables go to stderr).
    #[arg(long)]
    json: bool,
    /// Message sizes in bytes, comma-separated; K, M and G (or KiB, MiB,
    /// GiB) multiply by 1024, 1024² and 1024³. Default: 8,64,512,4K,16K,64K,
    /// 256K,1M,4M,16M.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Option<Vec<usize>>,
    /// Sweeps per configuration; the best is kept.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Configurations to measure, comma-separated. Default: every one this
    /// build has (the MPI ones need the cargo feature `mpi`).
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<Config>>,
    /// Before each job, wait up to this many seconds for other processes to
    /// leave the CPUs idle (this machine may be shared).
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = parse_settle)]
    settle: f64,
    /// Run as a worker rank of this configuration (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    worker: Option<Config>,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    out: Option<PathBuf>,
}

/// Parses a number of seconds to wait, 0 to 3600.
pub(super) fn parse_settle(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=3600.0).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to 3600"
        )),
    }
}

/// Parses a size such as `8`, `64K`, `1MiB`.
pub(super) fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let multiplier: usize = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "{text:?} is not a size: use bytes, optionally followed by K, M or G"
            ))
        }
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size: it does not start with a number"))?;
    let size = n
        .checked_mul(multiplier)
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if size == 0 || size > MAX_SIZE {
        return Err(format!(
            "{text:?} is outside the sizes measured, 1 byte to {}",
            size_label(MAX_SIZE)
        ));
    }
    Ok(size)
}

/// Runs `mttl-bench comm`: the orchestrator, or a worker rank when started
/// with `--worker`.
pub fn run(args: CommArgs) -> Result<(), CommBenchError> {
    let sizes = args.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    match (args.worker, &args.out) {
        (Some(config), Some(out)) => worker(config, &sizes, out),
        _ => orchestrate(&args, &sizes),
    }
}

/// The configurations asked for, checked against this build.
fn chosen_configs(args: &CommArgs) -> Result<Vec<Config>, CommBenchError> {
    let Some(asked) = &args.backends else {
        return Ok(Config::ALL.into_iter().filter(|c| c.available()).collect());
    };
    let mut chosen = Vec::new();
    for &config in asked {
        if !config.available() {
            return Err(CommBenchError::Usage(format!(
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
        return Err(CommBenchError::Usage(
            "--backends names no configuration".into(),
        ));
    }
    Ok(chosen)
}

/// A temporary directory removed when dropped.
#[derive(Debug)]
pub(super) struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory for subcommand `name` of this process.
    pub(super) fn new(name: &str) -> Result<TempDir, CommBenchError> {
        let path = std::env::temp_dir().join(format!("mttl-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| CommBenchError::Io {
            what: "create the temporary directory",
            path: path.clone(),
            source,
        })?;
        Ok(TempDir(path))
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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
) -> Result<RunResult, CommBenchError> {
    let outcome =
        launch::run(&config.job(program, args)).map_err(|source| CommBenchError::Launch {
            config: config.name(),
            source,
        })?;
    if !outcome.success() {
        return Err(CommBenchError::WorkerFailed {
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

/// Steps 1 to 5 of the module docs.
fn orchestrate(args: &CommArgs, sizes: &[usize]) -> Result<(), CommBenchError> {
    let configs = chosen_configs(args)?;
    let program = std::env::current_exe().map_err(|source| CommBenchError::Io {
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
    printed.map_err(|source| CommBenchError::Io {
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
             highest over the sweeps of the median of {} samples. mttl's nsend consumes owned buffers: they are filled between \
             windows, outside the timer.",
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

/// Step 3 of the module docs: one worker rank.
fn worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), CommBenchError> {
    match config {
        Config::Tcp | Config::Mpi => mttl_worker(config, sizes, out),
        Config::RawMpi | Config::RawMpiTcp => raw_worker(config, sizes, out),
    }
}

fn mttl_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), CommBenchError> {
    let comm = AnyComm::init()?;
    let setup = |detail: String| CommBenchError::Setup {
        config: config.name(),
        detail,
    };
    let backend = comm.backend_name();
    if backend != config.name() {
        return Err(setup(format!(
            "the launch environment chose the {backend} backend instead"
        )));
    }
    if comm.size() != 2 {
        return Err(setup(format!(
            "the job has {} ranks instead of 2",
            comm.size()
        )));
    }
    let mut ep = MttlEndpoint::new(comm);
    let samples = measure::sweep(&mut ep, sizes)?;
    let comm = ep.into_comm();
    if comm.rank() == 0 {
        RunResult {
            backend: backend.to_owned(),
            sizes: samples,
            disturbed: false,
        }
        .write(config.name(), out)?;
    }
    comm.finish()?;
    Ok(())
}

#[cfg(feature = "mpi")]
fn raw_worker(config: Config, sizes: &[usize], out: &Path) -> Result<(), CommBenchError> {
    use mpi::topology::Communicator;
    use mpi::Threading;

    let setup = |detail: String| CommBenchError::Setup {
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
    let rank = world.rank();
    let max_len = sizes
        .iter()
        .copied()
        .max()
        .unwrap_or(0)
        .max(measure::ACK_LEN);
    let mut ep = endpoint::RawMpiEndpoint::new(world, max_len);
    let samples = measure::sweep(&mut ep, sizes)?;
    if rank == 0 {
        RunResult {
            backend: "rsmpi".to_owned(),
            sizes: samples,
            disturbed: false,
        }
        .write(config.name(), out)?;
    }
    drop(ep);
    drop(universe);
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn raw_worker(config: Config, _sizes: &[usize], _out: &Path) -> Result<(), CommBenchError> {
    Err(CommBenchError::Setup {
        config: config.name(),
        detail: format!("this build has no MPI; rebuild with `{MPI_BUILD_HINT}`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("16m"), Ok(16 << 20));
        assert!(parse_size("0").is_err());
        assert!(parse_size("1G").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("8 bytes").is_err());
    }

    #[test]
    fn configs_name_themselves_as_clap_does() {
        for c in Config::ALL {
            let parsed = Config::from_str(c.name(), false);
            assert_eq!(parsed, Ok(c));
        }
    }
}
