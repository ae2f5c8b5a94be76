//! Detecting a program started by another MPI's launcher.
//!
//! An MPI program started by the `mpirun` of a different implementation (an
//! MPICH build under Open MPI's `mpirun`, or the reverse) does not fail: each
//! process silently initialises as a job of one, and the "job" is N unrelated
//! copies. The launcher still leaves its variables in the environment, so
//! when MPI reports one process while a launcher variable reports more, init
//! refuses with a message naming the variable, the launcher it belongs to and
//! the MPI library the program was built against.

use crate::env;

/// Launcher variables that hold the number of processes started, and whose
/// launcher sets them.
const SIZE_VARS: &[(&str, &str)] = &[
    ("OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"),
    (
        "PMI_SIZE",
        "an MPICH-family mpiexec (Hydra) or a PMI-1 srun",
    ),
    ("MPI_LOCALNRANKS", "an MPICH-family mpiexec (Hydra)"),
    ("SLURM_STEP_NUM_TASKS", "Slurm's srun"),
];

/// Launcher variables that hold this process's rank.
const RANK_VARS: &[(&str, &str)] = &[(
    "PMIX_RANK",
    "a PMIx launcher (Open MPI 5's mpirun, prterun or srun --mpi=pmix)",
)];

/// What the launcher's variables said before MPI started: `MPI_Init` may
/// rewrite some of them (Open MPI's singleton start sets `PMIX_RANK=0`), so
/// they are read first.
#[derive(Debug)]
pub(super) struct LauncherVars {
    /// The first variable saying this process is not alone: its name, its
    /// value and the launcher that sets it.
    says_not_alone: Option<(&'static str, String, &'static str)>,
}

impl LauncherVars {
    /// Reads the launcher's variables; call before initialising MPI.
    pub(super) fn read() -> LauncherVars {
        LauncherVars {
            says_not_alone: disagreeing_var(),
        }
    }

    /// Checks that a job MPI reports as `mpi_size` processes agrees with
    /// the launcher's variables; on a mismatch, returns a sentence saying
    /// what happened and what to do.
    pub(super) fn check(&self, mpi_size: usize) -> Result<(), String> {
        if mpi_size != 1 {
            return Ok(());
        }
        let Some((name, value, launcher)) = &self.says_not_alone else {
            return Ok(());
        };
        let built_with = library_name();
        let other = if name.starts_with("OMPI_") && built_with.starts_with("Open MPI") {
            "a different Open MPI installation's mpirun (another version or prefix)"
        } else {
            "a different MPI's mpirun"
        };
        Err(format!(
            "MPI reports a job of 1 process, but {name}={value} says {launcher} started more: \
             this program was started by {other} than the one it was built with \
             ({built_with}), so every process runs alone. Launch it with the mpirun of \
             {built_with} (mttlrun runs the one named by {mpirun}, else `mpirun`), or \
             rebuild it against the launcher's MPI (set MPI_PKG_CONFIG or MPICC, with a \
             separate --target-dir)",
            mpirun = env::MPIRUN
        ))
    }
}

/// The first launcher variable that says this process is not alone: the one
/// [`env::mpi_launcher_var`] finds first if it says so, else any other.
fn disagreeing_var() -> Option<(&'static str, String, &'static str)> {
    let says_more = |name: &str, value: &str| -> Option<&'static str> {
        let number: u64 = value.trim().parse().ok()?;
        if let Some((_, launcher)) = SIZE_VARS.iter().find(|(n, _)| *n == name) {
            return (number > 1).then_some(*launcher);
        }
        if let Some((_, launcher)) = RANK_VARS.iter().find(|(n, _)| *n == name) {
            return (number > 0).then_some(*launcher);
        }
        None
    };
    if let Some((name, value)) = env::mpi_launcher_var() {
        if let Some(launcher) = says_more(name, &value) {
            return Some((name, value, launcher));
        }
    }
    SIZE_VARS.iter().chain(RANK_VARS).find_map(|(name, _)| {
        let value = std::env::var(name).ok()?;
        says_more(name, &value).map(|launcher| (*name, value, launcher))
    })
}

/// The first line of `MPI_Get_library_version`, e.g. `Open MPI v4.1.4` or
/// `MPICH 4.0.2` (from `MPICH Version:\t4.0.2`).
pub(super) fn library_name() -> String {
    let full = mpi::environment::library_version().unwrap_or_default();
    short_library_name(full.trim_end_matches('\0'))
}

/// The name and version on the first line of an MPI library's version text.
fn short_library_name(full: &str) -> String {
    let first = full
        .lines()
        .next()
        .unwrap_or_default()
        .split(',')
        .next()
        .unwrap_or_default();
    let name = first
        .split_whitespace()
        .filter(|word| *word != "Version:")
        .collect::<Vec<_>>()
        .join(" ");
    if name.is_empty() {
        "an unnamed MPI library".to_owned()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::short_library_name;

    #[test]
    fn library_names_are_name_and_version() {
        assert_eq!(
            short_library_name(
                "MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 12:34:45 CDT 2022\n"
            ),
            "MPICH 4.0.2"
        );
        assert_eq!(
            short_library_name("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"),
            "Open MPI v4.1.4"
        );
        assert_eq!(short_library_name(""), "an unnamed MPI library");
    }
}
