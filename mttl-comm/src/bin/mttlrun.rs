//! `mttlrun`: runs an mttl program as a job of N ranks.
//!
//! ```text
//! mttlrun -n N [--backend tcp|mpi] [--hosts a,b:2 | --hostfile F] [--tag-output] [--] PROGRAM ARGS...
//! ```
//!
//! A thin command line over [`mttl_comm::launch`], whose module docs say how
//! ranks are started, placed and stopped. Exit status: 0 if every rank
//! exited 0; the failing rank's status (128+N if killed by signal N); 128+N
//! if `mttlrun` got signal N; 127/126 if the program cannot be found or run;
//! 2 for bad arguments; 1 for other launcher errors.
//!
//! The launcher's own diagnostics are logged with `tracing`, filtered by
//! `MTTLRUN_LOG` (e.g. `MTTLRUN_LOG=debug`).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use mttl_comm::launch::{self, BackendKind, JobSpec, LaunchError};

/// Run an mttl program as a job of N ranks.
#[derive(Debug, Parser)]
#[command(name = "mttlrun", version)]
struct Cli {
    /// Number of ranks.
    #[arg(short = 'n', long = "np", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    np: u32,

    /// Communication backend: TCP (ranks started by mttlrun) or MPI (handed to mpirun).
    #[arg(long, value_enum, default_value_t = Backend::Tcp)]
    backend: Backend,

    /// Hosts to run on, comma-separated, each optionally `host:slots`.
    #[arg(long, value_name = "HOSTS", conflicts_with = "hostfile")]
    hosts: Option<String>,

    /// File listing the hosts, one per line: `host [slots=K]`; `#` starts a comment.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,

    /// Prefix every output line with `[RANK] `.
    #[arg(long)]
    tag_output: bool,

    /// Trace the run into DIR, one file per rank (sets `MTTL_TRACE` for
    /// the ranks; read it with `mttl-trace info DIR`).
    #[arg(long, value_name = "DIR")]
    trace: Option<PathBuf>,

    /// The program to run, and its arguments.
    #[arg(
        value_name = "PROGRAM",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<OsString>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Backend {
    Tcp,
    Mpi,
}

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("MTTLRUN_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    let cli = Cli::parse();
    if let Some(dir) = &cli.trace {
        // Absolute, so that every rank writes where the user meant. The
        // launcher is still one thread here: no one reads the environment
        // while it changes.
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        std::env::set_var("MTTL_TRACE", dir);
    }
    let code = match spec_from(cli).and_then(|spec| launch::run(&spec)) {
        Ok(outcome) => outcome.exit_code,
        Err(e) => {
            // A broken stderr must not turn the error into a panic.
            let _ = writeln!(std::io::stderr(), "mttlrun: {e}");
            e.exit_code()
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

fn spec_from(cli: Cli) -> Result<JobSpec, LaunchError> {
    let mut words = cli.command.into_iter();
    let program = words.next().map(PathBuf::from).unwrap_or_default();
    let mut spec = JobSpec::new(cli.np as usize, program).args(words);
    spec.backend = match cli.backend {
        Backend::Tcp => BackendKind::Tcp,
        Backend::Mpi => BackendKind::Mpi,
    };
    spec.tag_output = cli.tag_output;
    spec.hosts = match (cli.hosts, cli.hostfile) {
        (Some(list), _) => launch::parse_host_list(&list)?,
        (None, Some(path)) => launch::read_hostfile(&path)?,
        (None, None) => Vec::new(),
    };
    Ok(spec)
}
