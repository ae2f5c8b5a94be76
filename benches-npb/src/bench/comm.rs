//! `mttl-bench comm`: round-trip latency and streaming bandwidth between two
//! ranks on this machine, for mttl's backends and for raw MPI, side by side.
//!
//! | configuration | what runs                                   | launched by                                  |
//! |---------------|---------------------------------------------|----------------------------------------------|
//! | `tcp`         | mttl's TCP backend through [`AnyComm`]      | [`launch::run`], TCP                         |
//! | `mpi`         | mttl's MPI backend through [`AnyComm`]      | [`launch::run`], MPI (`mpirun`)              |
//! | `raw-mpi`     | plain rsmpi `Send`/`Recv`/`Isend`, no mttl  | `mpirun`, Open MPI's default transport       |
//! | `raw-mpi-tcp` | the same over Open MPI's TCP transport      | `mpirun`, `pml ob1`, `btl tcp,self`          |
//! | `mpi-vs-raw`  | `mpi` and `raw-mpi` taking turns in one job | [`launch::run`], MPI (`mpirun`)              |
//! | `raw-vs-raw`  | `raw-mpi` against itself, the same way      | `mpirun`, Open MPI's default transport       |
//!
//! `mpi-vs-raw` compares the first two in the same processes, on the same
//! cores, minutes apart at most: separate jobs on this VM run in fast or
//! slow modes that last a whole job (measured: mttl's 1 MiB stream
//! 8040-12500 MiB/s job to job, raw MPI's 9320-12690), which a comparison
//! of two jobs cannot tell from a difference between the stacks.
//!
//! [`AnyComm`]: mttl_comm::AnyComm
//! [`launch::run`]: mttl_comm::launch::run
//!
//! The MPI configurations exist only in builds with the cargo feature `mpi`.
//!
//! # One invocation, step by step
//!
//! 1. The process the user started (the *orchestrator*, `orchestrate.rs`)
//!    reads the sizes and configurations and makes a private temporary
//!    directory.
//! 2. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), it
//!    waits up to `--settle` seconds for other processes to leave the CPUs
//!    idle, then starts its own executable as a two-rank job:
//!    `mttl-bench comm --worker CONFIG --out FILE --sizes ...`. MPI
//!    configurations go through the launcher's MPI hand-over
//!    (`mpirun --oversubscribe -np 2`, plus `--allow-run-as-root` as root);
//!    `raw-mpi-tcp` also passes `OMPI_MCA_pml=ob1` and
//!    `OMPI_MCA_btl=tcp,self` to its ranks.
//! 3. Both worker ranks (`worker.rs`) join the job, refusing one of the
//!    wrong kind or size, run the loops of `measure.rs` for every size, and
//!    rank 0 writes its samples to FILE (`results.rs`) before both leave.
//! 4. The orchestrator reads FILE. A job that fails stops the benchmark
//!    with the job's exit status. A job during which other processes kept
//!    more than 0.25 CPU busy (`common::cpu_load`) is *disturbed*: it is repeated, up
//!    to twice, and its figures count only if no undisturbed run of that
//!    configuration exists.
//! 5. After the last sweep it keeps, per configuration and size, the best
//!    undisturbed run (`report.rs`), and for mttl's backends against their
//!    references the median of the sweeps' own ratios (`paired`), prints
//!    the tables, how it measured and the targets check (with `--json`: one JSON document on stdout, the
//!    tables on stderr), and removes the temporary directory.

mod endpoint;
mod measure;
mod orchestrate;
mod report;
mod results;
mod worker;

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use mttl_comm::launch::{BackendKind, JobSpec};

use self::report::size_label;
use crate::bench::common::jobs::{self, BenchConfig};
pub use crate::bench::error::BenchError;

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
    /// mttl's MPI backend and plain rsmpi taking turns in one job.
    MpiVsRaw,
    /// Plain rsmpi against itself, taking turns in one job: the control.
    RawVsRaw,
}

impl BenchConfig for Config {
    fn name(self) -> &'static str {
        match self {
            Config::Tcp => "tcp",
            Config::Mpi => "mpi",
            Config::RawMpi => "raw-mpi",
            Config::RawMpiTcp => "raw-mpi-tcp",
            Config::MpiVsRaw => "mpi-vs-raw",
            Config::RawVsRaw => "raw-vs-raw",
        }
    }

    fn needs_mpi(self) -> bool {
        self != Config::Tcp
    }
}

impl Config {
    /// Every configuration, in table order.
    pub(super) const ALL: [Config; 6] = [
        Config::Tcp,
        Config::RawMpiTcp,
        Config::Mpi,
        Config::RawMpi,
        Config::MpiVsRaw,
        Config::RawVsRaw,
    ];

    /// The column header in the tables.
    pub(super) fn column(self) -> &'static str {
        match self {
            Config::Tcp => "mttl-tcp",
            Config::Mpi => "mttl-mpi",
            Config::RawMpi => "raw-mpi",
            Config::RawMpiTcp => "ompi-tcp",
            Config::MpiVsRaw => "1 job",
            Config::RawVsRaw => "control",
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
            Config::MpiVsRaw => {
                "mttl MPI backend and raw rsmpi in one mpirun job, taking turns at each size \
                 (mpi, raw, raw, mpi, ...); the ratio is the job's median mpi sample over its \
                 median raw sample"
            }
            Config::RawVsRaw => {
                "raw rsmpi against itself in one mpirun job (two endpoints with buffers of their \
                 own), taking turns as mpi-vs-raw does: the control of the 1 job column"
            }
        }
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
    /// A worker of `mpi-vs-raw` or `raw-vs-raw` lets the second stack take
    /// the first turn (odd sweeps; see `measure::interleave`).
    #[arg(long, hide = true)]
    second_first: bool,
}

/// Parses `--settle`: a number of seconds to wait, 0 to 3600.
pub(super) fn parse_settle(text: &str) -> Result<f64, String> {
    jobs::parse_seconds(text, 3600)
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
pub fn run(args: CommArgs) -> Result<(), BenchError> {
    let sizes = args.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    match (args.worker, &args.out) {
        (Some(config), Some(out)) => worker::worker(config, &sizes, out, args.second_first),
        _ => orchestrate::orchestrate(&args, &sizes),
    }
}

/// The configurations asked for, checked against this build.
fn chosen_configs(args: &CommArgs) -> Result<Vec<Config>, BenchError> {
    jobs::chosen_configs(args.backends.as_deref(), &Config::ALL, MPI_BUILD_HINT)
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
