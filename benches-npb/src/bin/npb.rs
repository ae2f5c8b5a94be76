//! `npb`: NPB CG and IS, in the paper's style on mttl or as the plain-MPI
//! baseline, with NPB's standard report.
//!
//! ```text
//! npb cg --class B -n 2 [--backend tcp|mpi] [--variant mttl|mpi] [--json]
//!        [--idle-secs S]
//! npb --line-diff
//! ```
//!
//! Each kernel runs on a power of two of ranks up to its class's limit
//! ([`RankLimit`]: 128 for IS class S, 1024 otherwise); `npb` refuses any
//! other count before it launches anything.
//!
//! With `--idle-secs S` (mttl variant), the kernel runs twice with `S`
//! seconds of silence between, every rank idle, as a job that pauses
//! between phases: both runs must verify, and the report (of the second)
//! adds the job's start-up time and each rank's peak memory
//! ([`footprint`]). A many-rank job that keeps its links through the pause
//! is the test of `MTTL_LINK_TIMEOUT`'s liveness checks.
//!
//! How a run starts:
//!
//! 1. Inside a job (started by `mttlrun`, `mpirun` or this program), the
//!    process runs the chosen variant as one rank of it: the `mttl` variant
//!    under the mttl runtime (node 0's main invokes the tasks, see
//!    [`benches_npb::npb::drivers`]), the `mpi` variant on rsmpi directly.
//! 2. Outside a job, with `-n N` (or `--backend mpi`), it launches itself as
//!    a job of N ranks (1 by default): TCP ranks through mttl's launcher,
//!    MPI ranks handed to `mpirun`; it exits with the job's status.
//! 3. Outside a job without either, it runs alone, as a job of one rank.
//!
//! The `mpi` variant runs on MPI only (its backend defaults to `mpi`), and
//! needs a build with the cargo feature `mpi`. Rank 0 prints the report (or
//! one JSON object with `--json`). The exit status is 0 for a verified run,
//! 1 for an unverified or failed one, 2 for a run that cannot start. With
//! `MTTL_STATS=1` every rank prints its communication counts at exit
//! (`mttl stats rank R: ...`).

use std::process::ExitCode;
use std::time::Duration;

use benches_npb::npb::cg::CgGrid;
use benches_npb::npb::drivers::{
    self, footprint, line_diff, DriverError, Kernel, Outcome, RankLimit, Variant,
};
use benches_npb::npb::is::check_procs;
use benches_npb::npb::Class;
use clap::Parser;
use mttl::comm::env as launch_env;
use mttl::comm::launch::{self, BackendKind, JobSpec};

/// The command that builds `npb` with the MPI variant and backend.
const MPI_BUILD_HINT: &str = "cargo build --release -p benches-npb --features mpi --bin npb";

/// Exit status of a run that cannot start.
const USAGE: u8 = 2;

/// NPB CG and IS on mttl (the paper's style) or on plain MPI.
#[derive(Debug, Parser)]
#[command(
    name = "npb",
    version,
    about = "NPB CG and IS on mttl (the paper's style) or on plain MPI"
)]
struct Cli {
    /// The benchmark.
    #[arg(value_enum, required_unless_present = "line_diff")]
    kernel: Option<Kernel>,

    /// Problem class: S, W, A, B, C (D for CG only).
    #[arg(long, short, default_value = "S")]
    class: Class,

    /// Number of processes (a power of two); outside a job, launch that many.
    #[arg(short = 'n', long = "np", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    np: Option<u32>,

    /// Communication backend [default: inside an mpirun, srun or mttlrun job,
    /// the job's own; else mpi for the mpi variant, tcp for mttl].
    #[arg(long, value_name = "tcp|mpi")]
    backend: Option<BackendKind>,

    /// The program: the paper's style on mttl, or the plain-MPI baseline.
    #[arg(long, value_enum, default_value_t = Variant::Mttl)]
    variant: Variant,

    /// Print one JSON object instead of NPB's report.
    #[arg(long)]
    json: bool,

    /// Run the kernel twice with this many seconds of silence between
    /// (mttl variant); report start-up time and each rank's peak memory.
    #[arg(long, value_name = "S")]
    idle_secs: Option<u64>,

    /// Print how many lines differ between the two variants of each kernel,
    /// and exit.
    #[arg(long)]
    line_diff: bool,

    /// Trace the mttl variant's run into DIR, one file per rank (sets
    /// `MTTL_TRACE`; read it with `mttl-trace info DIR`).
    #[arg(long, value_name = "DIR")]
    trace: Option<std::path::PathBuf>,
}

/// Why `npb` cannot run as asked.
#[derive(Debug, thiserror::Error)]
enum NpbError {
    #[error("the mpi variant runs on the MPI backend only (drop --backend tcp)")]
    MpiVariantOnTcp,
    #[error("this npb was built without MPI; build it with `{MPI_BUILD_HINT}`")]
    NoMpi,
    #[error("the mpi variant cannot run in a TCP job; start it with mpirun or `--backend mpi`")]
    MpiVariantInTcpJob,
    #[error("--idle-secs is for the mttl variant")]
    IdleMpiVariant,
    #[error("--backend {asked} was asked for, but this job runs on {actual}")]
    BackendMismatch { asked: BackendKind, actual: String },
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error("cannot launch the job: {0}")]
    Launch(#[from] launch::LaunchError),
    #[error("cannot find this program to launch it: {0}")]
    CurrentExe(std::io::Error),
}

fn main() -> ExitCode {
    keep_large_allocations_mapped();
    let cli = Cli::parse();
    if let Some(dir) = &cli.trace {
        // Absolute, so that every rank writes where the user meant; set
        // before any thread or rank starts, so no one reads it meanwhile.
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        std::env::set_var("MTTL_TRACE", dir);
    }
    if cli.line_diff {
        print!("{}", line_diff::report());
        return ExitCode::SUCCESS;
    }
    match run(cli) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("npb: {e}");
            ExitCode::from(USAGE)
        }
    }
}

/// Keeps large allocations in the heap, mapped once and reused, instead of
/// glibc's default of mapping each one afresh and unmapping it when freed.
///
/// mttl receives every message into a fresh buffer; IS's key exchange is tens
/// of MiB per iteration, and faulting those pages in again on every
/// iteration would cost a large part of the exchange. The setting is
/// process-wide, so both
/// variants run with it; the MPI variant, which allocates nothing per
/// iteration, is unaffected.
fn keep_large_allocations_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before
    // any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// Whether this process is a rank of a job (steps 1-3 of the module doc).
fn in_job() -> bool {
    std::env::var_os(launch_env::RANK).is_some_and(|v| !v.is_empty())
        || launch_env::mpi_launcher_var().is_some()
}

fn run(cli: Cli) -> Result<i32, NpbError> {
    let kernel = cli.kernel.unwrap_or(Kernel::Cg);
    let np = cli.np.map(|n| n as usize);
    let backend = match (cli.variant, cli.backend) {
        (Variant::Mpi, Some(BackendKind::Tcp)) => return Err(NpbError::MpiVariantOnTcp),
        (Variant::Mpi, _) => BackendKind::Mpi,
        (Variant::Mttl, asked) => asked.unwrap_or_default(),
    };
    if backend == BackendKind::Mpi && !cfg!(feature = "mpi") {
        return Err(NpbError::NoMpi);
    }
    if cli.idle_secs.is_some() && cli.variant == Variant::Mpi {
        return Err(NpbError::IdleMpiVariant);
    }
    if !in_job() && (np.is_some() || backend == BackendKind::Mpi) {
        let np = np.unwrap_or(1);
        check_job(kernel, cli.class, np)?;
        return launch_self(np, backend);
    }
    match cli.variant {
        Variant::Mpi => {
            if std::env::var_os(launch_env::RANK).is_some() {
                return Err(NpbError::MpiVariantInTcpJob);
            }
            let outcome = run_mpi(kernel, cli.class, np)?;
            Ok(outcome.map_or(0, |o| finish(&o, None, cli.json)))
        }
        Variant::Mttl => {
            let (class, json, asked) = (cli.class, cli.json, cli.backend);
            let idle = cli.idle_secs.map(Duration::from_secs);
            Ok(mttl::start(move || {
                match run_mttl(kernel, class, np, asked, idle) {
                    Ok((outcome, facts)) => finish(&outcome, facts.as_ref(), json),
                    Err(e) => {
                        eprintln!("npb: {e}");
                        i32::from(USAGE)
                    }
                }
            }))
        }
    }
}

/// Refuses, before launching, a job size the kernel cannot run on: past its
/// rank limit ([`RankLimit`]), or one its class's tables cannot lay out.
fn check_job(kernel: Kernel, class: Class, np: usize) -> Result<(), DriverError> {
    RankLimit::of(kernel, class).check(np)?;
    match kernel {
        Kernel::Cg => CgGrid::new(class.cg().na, np, 0).map(drop)?,
        Kernel::Is => check_procs(&class.is()?, np)?,
    }
    Ok(())
}

/// Step 2 of the module doc: this program with the same arguments as a job
/// of `np` ranks; returns the job's exit status.
fn launch_self(np: usize, backend: BackendKind) -> Result<i32, NpbError> {
    let program = std::env::current_exe().map_err(NpbError::CurrentExe)?;
    let mut spec = JobSpec::new(np, program).args(std::env::args_os().skip(1));
    spec.backend = backend;
    spec.extra_env
        .push((footprint::LAUNCHED_AT.into(), footprint::launch_stamp()));
    Ok(launch::run(&spec)?.exit_code)
}

/// What a run with `--idle-secs` reports besides NPB's figures.
#[derive(Debug)]
struct JobFacts {
    /// From launch until every rank answered (a job `npb` launched).
    startup: Option<Duration>,
    /// The silence between the two runs.
    idle: Duration,
    /// Every rank's peak resident memory, KiB.
    peak_kib: Vec<u64>,
}

/// The `mttl` variant, as node 0's main; with `idle`, twice with that
/// silence between (see the module doc).
fn run_mttl(
    kernel: Kernel,
    class: Class,
    np: Option<usize>,
    asked: Option<BackendKind>,
    idle: Option<Duration>,
) -> Result<(Outcome, Option<JobFacts>), NpbError> {
    let actual = mttl::backend_name();
    if let Some(asked) = asked.filter(|b| b.to_string() != actual) {
        return Err(NpbError::BackendMismatch {
            asked,
            actual: actual.to_owned(),
        });
    }
    let startup = idle.and_then(|_| {
        footprint::all_ranks_answer();
        footprint::since_launch()
    });
    let run = || -> Result<Outcome, NpbError> {
        Ok(match kernel {
            Kernel::Cg => drivers::cg_mttl::run(class, np)?,
            Kernel::Is => drivers::is_mttl::run(class, np)?,
        })
    };
    let first = run()?;
    let Some(idle) = idle else {
        return Ok((first, None));
    };
    if !first.verified {
        return Ok((first, None));
    }
    // Every other rank waits in its message handler meanwhile.
    std::thread::sleep(idle);
    let second = run()?;
    let facts = JobFacts {
        startup,
        idle,
        peak_kib: footprint::peak_memory_by_rank(),
    };
    Ok((second, Some(facts)))
}

/// The `mpi` variant, as one process of an MPI job; rank 0 gets the outcome.
#[cfg(feature = "mpi")]
fn run_mpi(kernel: Kernel, class: Class, np: Option<usize>) -> Result<Option<Outcome>, NpbError> {
    Ok(match kernel {
        Kernel::Cg => drivers::cg_mpi::run(class, np)?,
        Kernel::Is => drivers::is_mpi::run(class, np)?,
    })
}

#[cfg(not(feature = "mpi"))]
fn run_mpi(_: Kernel, _: Class, _: Option<usize>) -> Result<Option<Outcome>, NpbError> {
    Err(NpbError::NoMpi)
}

/// Prints the outcome (and `facts`) and returns the exit status.
fn finish(outcome: &Outcome, facts: Option<&JobFacts>, json: bool) -> i32 {
    let peak = facts.map(|f| {
        let max = f.peak_kib.iter().copied().max().unwrap_or(0);
        let mean = f.peak_kib.iter().sum::<u64>() / f.peak_kib.len().max(1) as u64;
        (max, mean)
    });
    if json {
        let mut v = outcome.to_json();
        if let (Some(f), Some((max, mean))) = (facts, peak) {
            v["startup_seconds"] = serde_json::json!(f.startup.map(|d| d.as_secs_f64()));
            v["idle_seconds"] = serde_json::json!(f.idle.as_secs());
            v["rank_peak_kib_max"] = serde_json::json!(max);
            v["rank_peak_kib_mean"] = serde_json::json!(mean);
        }
        println!("{v}");
    } else {
        outcome.print();
        if let (Some(f), Some((max, mean))) = (facts, peak) {
            match f.startup {
                Some(d) => println!(" Start-up (s)    = {:>24.3}", d.as_secs_f64()),
                None => println!(" Start-up (s)    = {:>24}", "not launched by npb"),
            }
            println!(" Idle between (s)= {:>24}", f.idle.as_secs());
            println!(
                " Peak KiB/rank   = {:>24}",
                format!("max {max}, mean {mean}")
            );
            println!();
        }
    }
    outcome.exit_code()
}
