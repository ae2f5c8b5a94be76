//! The configurations a subcommand measures and the worker jobs that
//! measure them: which configurations this build can run, where the worker
//! program is, where its results files go, and how a job's failure reads.

use std::path::{Path, PathBuf};

use mttl_comm::launch::{self, JobSpec};

use crate::bench::error::BenchError;

/// A configuration of a subcommand: something measured by one job (or,
/// for `runtime`'s `sched`, in the orchestrator itself).
pub(crate) trait BenchConfig: Copy + PartialEq {
    /// The name `--backends` and `--worker` take.
    fn name(self) -> &'static str;

    /// Whether it runs on MPI (and so needs the cargo feature `mpi`).
    fn needs_mpi(self) -> bool;

    /// Whether this build can run it.
    fn available(self) -> bool {
        cfg!(feature = "mpi") || !self.needs_mpi()
    }
}

/// The configurations `asked` for (`--backends`), without repeats and
/// checked against this build, or every one of `all` this build has;
/// `mpi_build_hint` is the command that rebuilds with MPI.
pub(crate) fn chosen_configs<C: BenchConfig>(
    asked: Option<&[C]>,
    all: &[C],
    mpi_build_hint: &str,
) -> Result<Vec<C>, BenchError> {
    let Some(asked) = asked else {
        return Ok(all.iter().copied().filter(|c| c.available()).collect());
    };
    let mut chosen = Vec::new();
    for &config in asked {
        if !config.available() {
            return Err(BenchError::Usage(format!(
                "configuration {} needs MPI, and this mttl-bench was built without the \
                 `mpi` feature; rebuild with `{mpi_build_hint}`",
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

/// The path of this program, which the orchestrator starts as its workers.
pub(crate) fn this_program() -> Result<PathBuf, BenchError> {
    std::env::current_exe().map_err(|source| BenchError::Io {
        what: "find the path of",
        path: PathBuf::from("this program"),
        source,
    })
}

/// Runs the worker job `spec` of `config` to its end; a job that cannot
/// start or does not succeed is an error naming `config`.
pub(crate) fn run_worker_job<C: BenchConfig>(config: C, spec: &JobSpec) -> Result<(), BenchError> {
    let outcome = launch::run(spec).map_err(|source| BenchError::Launch {
        config: config.name(),
        source,
    })?;
    if !outcome.success() {
        return Err(BenchError::WorkerFailed {
            config: config.name(),
            code: outcome.exit_code,
            hint: if config.needs_mpi() {
                " (is `mpirun`, or $MTTL_MPIRUN when set, the mpirun of the MPI this program \
                 was built against?)"
            } else {
                ""
            },
        });
    }
    Ok(())
}

/// A temporary directory for the workers' results files, removed when
/// dropped.
#[derive(Debug)]
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory for subcommand `name` of this process.
    pub(crate) fn new(name: &str) -> Result<TempDir, BenchError> {
        let path = std::env::temp_dir().join(format!("mttl-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|source| BenchError::Io {
            what: "create the temporary directory",
            path: path.clone(),
            source,
        })?;
        Ok(TempDir(path))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Parses a number of seconds to wait, 0 to `max` (`--settle`).
pub(crate) fn parse_seconds(text: &str, max: u32) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(secs) if (0.0..=f64::from(max)).contains(&secs) => Ok(secs),
        _ => Err(format!(
            "{text:?} is not a number of seconds from 0 to {max}"
        )),
    }
}
