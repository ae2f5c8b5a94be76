//! MPI jobs: handed over to `mpirun`, which starts and stops the ranks.
//!
//! `mpirun --version` tells which MPI it is; the arguments each flavour
//! needs are listed in the [module docs](super).
//! The launcher watches `mpirun` as a job of one process, so signals are
//! forwarded to it and it is killed if it outlives the grace period.

use std::ffi::OsString;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::error::LaunchError;
use super::job::{Job, Who};
use super::{rank0_input, resolve_program, JobOutcome, JobSpec};
use crate::env;

/// The least grace period `mpirun` gets to stop its ranks.
const MPIRUN_GRACE: Duration = Duration::from_secs(5);

/// The MPI implementation behind an `mpirun`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// Open MPI (ORTE or PRRTE).
    OpenMpi,
    /// MPICH and Hydra-based derivatives (Intel MPI, MVAPICH).
    Mpich,
}

/// Runs an MPI job (see [`super::run`]).
pub(super) fn run(spec: &JobSpec) -> Result<JobOutcome, LaunchError> {
    let mpirun = std::env::var_os(env::MPIRUN)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| OsString::from("mpirun"));
    if spec.hosts.is_empty() {
        // mpirun's own message for a missing program is long and varies.
        resolve_program(&spec.program)?;
    }
    let flavour = detect(&mpirun)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    let mut command = Command::new(&mpirun);
    let forwarded: Vec<OsString> = super::tcp::forwarded_vars(std::env::vars_os())
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    command.args(mpirun_args(flavour, spec, as_root, &forwarded));
    command.env_remove(env::NP).env_remove(env::TAG_OUTPUT);
    let mut job = Job::new(spec.grace.max(MPIRUN_GRACE))?;
    if let Err(e) = job.start(Who::Mpirun, command, rank0_input(), false) {
        job.abort();
        return Err(e);
    }
    let mut outcome = job.supervise()?;
    outcome.ranks.clear();
    Ok(outcome)
}

/// Runs `mpirun --version` and tells the flavour from what it prints.
fn detect(mpirun: &std::ffi::OsStr) -> Result<Flavour, LaunchError> {
    let command = mpirun.to_string_lossy().into_owned();
    let output = Command::new(mpirun)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| LaunchError::MpirunVersion {
            command: command.clone(),
            source,
        })?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    flavour_from_version(&text).ok_or_else(|| LaunchError::UnknownMpi {
        command,
        first_line: text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_owned(),
    })
}

/// The flavour named by `mpirun --version` output, if recognised.
pub(crate) fn flavour_from_version(text: &str) -> Option<Flavour> {
    let lower = text.to_ascii_lowercase();
    if lower.contains("open mpi") || lower.contains("openrte") || lower.contains("open-mpi") {
        Some(Flavour::OpenMpi)
    } else if lower.contains("hydra") || lower.contains("mpich") || lower.contains("intel(r) mpi") {
        Some(Flavour::Mpich)
    } else {
        None
    }
}

/// The arguments to `mpirun` for `spec` (after the command itself).
///
/// `forwarded` names the launcher's variables every rank gets too (the
/// `MTTL_*` knobs, as on TCP): Open MPI passes only `-x` variables to ranks
/// on other hosts, so each is named; Hydra passes the whole environment.
pub(crate) fn mpirun_args(
    flavour: Flavour,
    spec: &JobSpec,
    as_root: bool,
    forwarded: &[OsString],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    let mut push = |a: &str| args.push(OsString::from(a));
    let hosts = spec
        .hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    match flavour {
        Flavour::OpenMpi => {
            if as_root {
                push("--allow-run-as-root");
            }
            push("--oversubscribe");
            push("-np");
            push(&spec.np.to_string());
            push("-x");
            push(&format!("{}=mpi", env::BACKEND));
            for (name, value) in &spec.extra_env {
                push("-x");
                push(&format!("{name}={value}"));
            }
            for name in forwarded {
                if !spec.extra_env.iter().any(|(set, _)| name == set.as_str()) {
                    push("-x");
                    push(&name.to_string_lossy());
                }
            }
            if spec.tag_output {
                push("--tag-output");
            }
            if !hosts.is_empty() {
                push("--host");
                push(&hosts);
            }
        }
        Flavour::Mpich => {
            push("-np");
            push(&spec.np.to_string());
            push("-genv");
            push(env::BACKEND);
            push("mpi");
            for (name, value) in &spec.extra_env {
                push("-genv");
                push(name);
                push(value);
            }
            if spec.tag_output {
                push("-prepend-rank");
            }
            if !hosts.is_empty() {
                push("-hosts");
                push(&hosts);
            }
        }
    }
    args.push(spec.program.clone().into_os_string());
    args.extend(spec.args.iter().cloned());
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::HostSlot;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn spec() -> JobSpec {
        let mut spec = JobSpec::new(4, "./prog").args(["--size", "big"]);
        spec.extra_env = vec![("MTTL_STATS".into(), "1".into())];
        spec
    }

    #[test]
    fn flavours_are_told_apart() {
        assert_eq!(flavour_from_version("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"), Some(Flavour::OpenMpi));
        assert_eq!(
            flavour_from_version("mpirun (Open MPI) 5.0.3\n"),
            Some(Flavour::OpenMpi)
        );
        assert_eq!(
            flavour_from_version(
                "HYDRA build details:\n    Version:                                 4.0.2\n"
            ),
            Some(Flavour::Mpich)
        );
        assert_eq!(
            flavour_from_version("Intel(R) MPI Library for Linux* OS, Version 2021.6\n"),
            Some(Flavour::Mpich)
        );
        assert_eq!(flavour_from_version("srun: unrecognized option\n"), None);
        assert_eq!(flavour_from_version(""), None);
    }

    #[test]
    fn open_mpi_arguments() {
        let args = strings(&mpirun_args(Flavour::OpenMpi, &spec(), false, &[]));
        assert_eq!(
            args,
            [
                "--oversubscribe",
                "-np",
                "4",
                "-x",
                "MTTL_BACKEND=mpi",
                "-x",
                "MTTL_STATS=1",
                "./prog",
                "--size",
                "big"
            ]
        );

        let mut tagged = spec();
        tagged.tag_output = true;
        tagged.hosts = vec![
            HostSlot {
                name: "a".into(),
                slots: Some(2),
            },
            HostSlot::new("b"),
        ];
        // The launcher's knobs reach ranks on other hosts by name, once.
        let forwarded = ["MTTL_TRACE".into(), "MTTL_STATS".into()];
        let args = strings(&mpirun_args(Flavour::OpenMpi, &tagged, true, &forwarded));
        assert_eq!(
            args,
            [
                "--allow-run-as-root",
                "--oversubscribe",
                "-np",
                "4",
                "-x",
                "MTTL_BACKEND=mpi",
                "-x",
                "MTTL_STATS=1",
                "-x",
                "MTTL_TRACE",
                "--tag-output",
                "--host",
                "a:2,b",
                "./prog",
                "--size",
                "big",
            ]
        );
    }

    #[test]
    fn mpich_arguments() {
        let args = strings(&mpirun_args(
            Flavour::Mpich,
            &spec(),
            true,
            &["MTTL_TRACE".into()],
        ));
        assert_eq!(
            args,
            [
                "-np",
                "4",
                "-genv",
                "MTTL_BACKEND",
                "mpi",
                "-genv",
                "MTTL_STATS",
                "1",
                "./prog",
                "--size",
                "big"
            ]
        );

        let mut tagged = spec();
        tagged.tag_output = true;
        tagged.extra_env.clear();
        tagged.hosts = vec![
            HostSlot::new("a"),
            HostSlot {
                name: "b".into(),
                slots: Some(3),
            },
        ];
        let args = strings(&mpirun_args(Flavour::Mpich, &tagged, false, &[]));
        assert_eq!(
            args,
            [
                "-np",
                "4",
                "-genv",
                "MTTL_BACKEND",
                "mpi",
                "-prepend-rank",
                "-hosts",
                "a,b:3",
                "./prog",
                "--size",
                "big"
            ]
        );
    }
}
