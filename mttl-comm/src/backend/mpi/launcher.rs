//! Detecting a program started by another MPI's launcher.
//!
//! An MPI program started by the `mpirun` of a different implementation (an
//! MPICH build under Open MPI's `mpirun`, or the reverse) does not fail: each
//! process silently initialises as a job of one, and the "job" is N unrelated
//! copies. The launcher still leaves its variables in the environment, so
//! when MPI reports one process while a launcher variable reports more, init
//! refuses with a message naming the variable, the launcher it belongs to and
//! the MPI library the program was built against.
//!
//! Slurm's `srun` starts the processes itself and hands them to MPI through
//! one of its MPI plugins (`--mpi=pmix`, `pmi2`, or the site's `MpiDefault`,
//! often `none`). With a plugin the MPI library does not speak, Open MPI
//! aborts inside `MPI_Init` with a text that names neither the option nor
//! the setting, and MPICH runs N jobs of one. So before MPI starts, a
//! process that srun started without PMIx, whose Open MPI can only be
//! reached through PMIx, refuses with the fix ([`LauncherVars::check_srun`]);
//! and a job of one under srun names the plugin ([`LauncherVars::check`]).

use std::path::Path;

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
    /// How srun started this process, if it did.
    srun: Option<Srun>,
}

/// What srun's variables say about a process it started directly (not
/// through an `mpirun` inside an allocation).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Srun {
    /// srun's MPI plugin: `SLURM_MPI_TYPE`, which srun sets for every plugin
    /// but `none` (`None` then).
    plugin: Option<String>,
    /// Whether a PMIx server runs for the process (`PMIX_RANK` is set).
    pmix: bool,
}

impl Srun {
    /// From the environment `var` gives; `None` unless srun started the
    /// process directly.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<Srun> {
        let by_srun = var("SLURM_STEP_ID").is_some() && var("SLURM_PROCID").is_some();
        // mpirun inside an allocation starts its daemons with srun: its
        // processes carry srun's variables as well as its own.
        let by_mpirun = var("OMPI_COMM_WORLD_SIZE").is_some()
            || var("PMI_SIZE").is_some() && var("SLURM_MPI_TYPE").is_none();
        if !by_srun || by_mpirun {
            return None;
        }
        Some(Srun {
            plugin: var("SLURM_MPI_TYPE").filter(|v| !v.is_empty()),
            pmix: var("PMIX_RANK").is_some(),
        })
    }

    /// The plugin in words, e.g. "`pmi2`" or "`none` (the site's MpiDefault)".
    fn plugin_name(&self) -> String {
        match &self.plugin {
            Some(p) => format!("`{p}`"),
            None => "`none` (srun's --mpi, or the site's MpiDefault)".to_owned(),
        }
    }
}

impl LauncherVars {
    /// Reads the launcher's variables; call before initialising MPI.
    pub(super) fn read() -> LauncherVars {
        LauncherVars {
            says_not_alone: disagreeing_var(),
            srun: Srun::from_vars(|name| std::env::var(name).ok()),
        }
    }

    /// Before MPI starts: refuses a process that srun started without PMIx
    /// when the MPI library is Open MPI that has no other way to learn its
    /// job (no PMI-1/2 components: Debian's, and every Open MPI 5), which
    /// would abort in `MPI_Init` without naming the fix.
    pub(super) fn check_srun(&self) -> Result<(), String> {
        let Some(srun) = &self.srun else {
            return Ok(());
        };
        let built_with = library_name();
        if srun.pmix || !built_with.starts_with("Open MPI") || open_mpi_has_pmi1_or_2() {
            return Ok(());
        }
        Err(srun_without_pmix(srun, &built_with))
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
        if let Some(srun) = &self.srun {
            return Err(format!(
                "MPI reports a job of 1 process, but {name}={value} says srun started more: \
                 srun's MPI plugin {plugin} does not connect this program's MPI \
                 ({built_with}) to its job, so every process runs alone. Launch with the \
                 plugin your MPI speaks (`srun --mpi=pmix` for Open MPI, `--mpi=pmi2` for \
                 MPICH; `srun --mpi=list` shows what this Slurm has), or set it as \
                 `MpiDefault` in slurm.conf",
                plugin = srun.plugin_name()
            ));
        }
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

/// The message for a process srun started without PMIx, under an Open MPI
/// that needs it.
fn srun_without_pmix(srun: &Srun, built_with: &str) -> String {
    format!(
        "srun started this process with the MPI plugin {plugin}, but this program's MPI \
         ({built_with}) joins a job started by srun only through PMIx: launch it with \
         `srun --mpi=pmix ...`, or set `MpiDefault=pmix` in slurm.conf (or \
         SLURM_MPI_TYPE=pmix in the environment); `srun --mpi=list` shows this \
         Slurm's plugins",
        plugin = srun.plugin_name()
    )
}

/// Whether the Open MPI this process linked has components that join a
/// job through Slurm's PMI-1 or PMI-2 (`mca_pmix_s1`, `mca_pmix_s2`, found
/// beside `libmpi` in `openmpi*/`), so that srun's `pmi2` or `none` plugins
/// may work. Unknown (the library not found in `/proc/self/maps`) counts
/// as yes: better MPI's own error than a refusal that may be wrong.
fn open_mpi_has_pmi1_or_2() -> bool {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return true;
    };
    let Some(libmpi) = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libmpi.so"))
        })
    else {
        return true;
    };
    let Some(dir) = Path::new(libmpi).parent() else {
        return true;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("openmpi"))
        .any(|e| {
            ["mca_pmix_s1.so", "mca_pmix_s2.so"]
                .iter()
                .any(|c| e.path().join(c).exists())
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
    use super::{short_library_name, srun_without_pmix, Srun};

    fn srun_env(vars: &[(&str, &str)]) -> Option<Srun> {
        Srun::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn srun_is_told_from_mpirun_inside_an_allocation() {
        let step = [("SLURM_STEP_ID", "0"), ("SLURM_PROCID", "1")];
        assert_eq!(
            srun_env(&step),
            Some(Srun {
                plugin: None,
                pmix: false
            })
        );
        let pmix = [&step[..], &[("SLURM_MPI_TYPE", "pmix"), ("PMIX_RANK", "1")]].concat();
        assert_eq!(
            srun_env(&pmix),
            Some(Srun {
                plugin: Some("pmix".into()),
                pmix: true
            })
        );
        let pmi2 = [
            &step[..],
            &[
                ("SLURM_MPI_TYPE", "pmi2"),
                ("PMI_RANK", "1"),
                ("PMI_SIZE", "2"),
            ],
        ]
        .concat();
        assert_eq!(
            srun_env(&pmi2),
            Some(Srun {
                plugin: Some("pmi2".into()),
                pmix: false
            })
        );
        // Open MPI's mpirun in an allocation, and Hydra's.
        let ompi = [&step[..], &[("OMPI_COMM_WORLD_SIZE", "2")]].concat();
        assert_eq!(srun_env(&ompi), None);
        let hydra = [&step[..], &[("PMI_SIZE", "2")]].concat();
        assert_eq!(srun_env(&hydra), None);
        // Not started by srun at all (an allocation's shell).
        assert_eq!(srun_env(&[("SLURM_JOB_ID", "7")]), None);
    }

    #[test]
    fn srun_without_pmix_names_the_fix() {
        let srun = Srun {
            plugin: None,
            pmix: false,
        };
        let text = srun_without_pmix(&srun, "Open MPI v4.1.4");
        for part in [
            "`none`",
            "Open MPI v4.1.4",
            "srun --mpi=pmix",
            "MpiDefault=pmix",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
        let srun = Srun {
            plugin: Some("pmi2".into()),
            pmix: false,
        };
        assert!(srun_without_pmix(&srun, "Open MPI v5.0.3").contains("`pmi2`"));
    }

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
