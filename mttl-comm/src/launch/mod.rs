//! The launcher library behind `mttlrun` and self-launch.
//!
//! [`run`] starts a job of `np` ranks of one program, as described by a
//! [`JobSpec`], watches it to its end and returns a [`JobOutcome`]. It is used
//! by the `mttlrun` binary, by test harnesses, and by programs that launch
//! themselves ([`self_launch_from_env`], called first thing in `main` by the
//! runtime: `MTTL_NP=4 ./prog` runs `./prog` as a job of four ranks).
//!
//! # TCP jobs (the default)
//!
//! Each rank is the program started with the launch environment of
//! [`crate::env`]: `MTTL_BACKEND=tcp`, `MTTL_RANK`, `MTTL_SIZE`, `MTTL_ROOT`,
//! `MTTL_SECRET` (fresh random per job) and `MTTL_BIND`. `MTTL_NP` and
//! `MTTL_TAG_OUTPUT` are removed, so ranks never launch again.
//!
//! - A local job gets `MTTL_ROOT=127.0.0.1:PORT`, where `PORT` is that of a
//!   listener the launcher binds (port 0: the kernel picks) and rank 0
//!   inherits open (`MTTL_ROOT_FD`), so no other process can take the port
//!   in between (the other ranks retry until `MTTL_CONNECT_TIMEOUT`), and
//!   `MTTL_BIND=loopback`.
//! - With hosts (`--hosts`, `--hostfile`), ranks are placed as described in
//!   [`hosts`](HostSlot). A job that has a rank on another machine gets
//!   `MTTL_BIND=any` and `MTTL_ROOT=FIRST_HOST:PORT`, where `FIRST_HOST` is
//!   the first host's name (this machine's host name if the first host is
//!   `localhost`) and `PORT` is `MTTL_ROOT_PORT` if set, else that of a
//!   listener bound and handed to rank 0 as above if rank 0 runs here, else
//!   a random port in 20000..30000
//!   (below Linux's ephemeral range, so it cannot be taken by an outgoing
//!   connection).
//! - A local rank gets the launcher's standard input if it is rank 0 and
//!   that input is not a terminal (a rank runs in its own process group, and
//!   reading the terminal from there would stop it); every other rank reads
//!   `/dev/null`.
//!
//! ## Remote ranks
//!
//! A rank on another host is started with `ssh -o BatchMode=yes -o
//! ServerAliveInterval=5 -o ServerAliveCountMax=5 HOST CMD` (the interval is
//! a fifth of `MTTL_LINK_TIMEOUT`, so that `ssh` gives up on a host that
//! stopped answering within that time, and the job stops; `MTTL_RSH`
//! replaces `ssh`, and must take these options; its words are split on
//! whitespace, so `MTTL_RSH="ssh -p 2222"` works). `CMD` runs a small POSIX `sh` script
//! (so the remote login shell must accept POSIX quoting), which:
//!
//! 1. reads `MTTL_SECRET` from the first line of its standard input: the
//!    launcher writes it into the pipe to `ssh`, so the secret never appears
//!    on a command line (visible in `ps` on either machine);
//! 2. changes to the launcher's working directory;
//! 3. runs `env MTTL_...=... PROGRAM ARGS` in the background, in a process
//!    group of its own (through `setsid`, where installed), with every other
//!    `MTTL_*` variable of the launcher, `RUST_LOG` and `RUST_BACKTRACE`
//!    passed along;
//! 4. keeps reading its standard input: when it ends (the launcher closed the
//!    pipe, or died, or `ssh` was killed and the connection dropped), it
//!    sends SIGTERM to the rank's group, then SIGKILL two seconds later;
//! 5. when the rank exits, sends SIGKILL to what is left in its group and
//!    exits with the rank's status, which `ssh` passes back (a remote rank
//!    killed by signal N therefore shows as status 128+N; `ssh` itself
//!    failing shows as 255).
//!
//! # Output
//!
//! Without `tag_output`, ranks write straight to the launcher's stdout and
//! stderr. With it, every line a rank writes is printed whole, as soon as it
//! is complete, as `[RANK] LINE` on the stream it was written to (see
//! `output.rs`).
//!
//! # The stop protocol
//!
//! Every process of a job runs in its own process group and every signal
//! goes to the whole group, so whatever a rank started in its group stops
//! with it. A process also gets `PR_SET_PDEATHSIG=SIGKILL`: if the launcher
//! is killed outright (so cannot run this protocol), its ranks die with it.
//! Note that Linux ties this to the *thread* that started the process; [`run`]
//! starts and waits in the calling thread, so this holds for its whole call.
//!
//! 1. A job stops when a rank exits with a non-zero status or is killed by a
//!    signal, or when the launcher gets SIGINT, SIGTERM or SIGHUP. (When a
//!    rank cannot be started at all, the ranks already started are stopped
//!    by steps 3 to 6 and [`run`] returns the error.)
//! 2. The launcher prints one line naming the cause, e.g.
//!    `mttlrun: rank 2 exited with status 3`,
//!    `mttlrun: rank 2 was killed by signal 9 (SIGKILL)` or
//!    `mttlrun: got SIGINT; stopping the job`. Later exits of other ranks,
//!    caused by the stop, are not reported.
//! 3. It closes the standard input of every remote rank's `ssh` (step 4 of
//!    the remote script) and sends every rank still running SIGTERM, or the
//!    signal the launcher got. When a rank failed, it first gives the others
//!    1 s to stop on their own: an mttl rank notices a failed peer at once
//!    and says what it was waiting for, which a signal would cut short.
//! 4. It waits for the ranks to exit, at most the grace period
//!    ([`JobSpec::grace`], 2 s by default).
//! 5. Ranks still running then, or every rank at once if a second signal
//!    reaches the launcher, get SIGKILL.
//! 6. At the end of every job, stopped or not, each rank's process group gets
//!    SIGKILL (whatever a rank left behind in it), every rank is reaped, and
//!    the output is drained.
//! 7. The job's exit code is 0 if every rank exited 0; else the failing
//!    rank's status, or 128+N for a rank killed by signal N, or 128+N when
//!    the launcher got signal N.
//!
//! A process that left its process group (`setsid`, daemons) escapes steps
//! 3 to 6; nothing short of a cgroup could catch it.
//!
//! # MPI jobs (`--backend mpi`)
//!
//! The job is handed to `mpirun` (or the command in `MTTL_MPIRUN`), which
//! places, starts and stops the ranks; the launcher watches `mpirun` alone
//! with the same protocol (grace period 5 s, as `mpirun` cleans up its own
//! ranks) and exits with its exit code. `mpirun --version` tells the
//! flavour:
//!
//! - Open MPI: `--allow-run-as-root` when run as root, `--oversubscribe`,
//!   `-np N`, `-x MTTL_BACKEND=mpi` (and `-x K=V` for each extra variable),
//!   `--tag-output` when asked, `--host a:2,b` for the hosts.
//! - MPICH (Hydra): `-np N -genv MTTL_BACKEND mpi` (and `-genv K V`),
//!   `-prepend-rank` when asked, `-hosts a:2,b` for the hosts. Hydra runs as
//!   root and oversubscribes without being told.
//!
//! A hostfile is read by the launcher and handed over as a host list, so the
//! same hostfile works with both flavours.
//!
//! The exit code is `mpirun`'s. Open MPI's is the first failing rank's;
//! Hydra kills the other ranks as soon as one fails and exits with the
//! bitwise OR of every rank's wait status (a signal's number when it killed
//! one), so it is only sure to be non-zero.
//!
//! The MPI library is fixed when the program is built. To use MPICH instead
//! of Open MPI, build with `MPI_PKG_CONFIG=mpich` and a separate
//! `--target-dir` (the build script does not notice a change of that
//! variable), e.g. `MPI_PKG_CONFIG=mpich cargo build --features mpi
//! --target-dir target-mpich`, and run with `MTTL_MPIRUN=mpirun.mpich mttlrun
//! --backend mpi -n 4 -- target-mpich/debug/prog` (`scripts/test-mpich` runs
//! the MPI tests so).

mod error;
mod hosts;
mod job;
mod mpi;
mod output;
mod signals;
mod tcp;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

pub use error::LaunchError;
pub use hosts::{parse_host_list, read_hostfile, HostSlot};

use crate::env;

/// The default grace period between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);

/// The backend a job's ranks communicate over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// The TCP backend; ranks are started by this launcher.
    #[default]
    Tcp,
    /// The MPI backend; ranks are started by `mpirun`.
    Mpi,
}

impl FromStr for BackendKind {
    type Err = String;

    fn from_str(s: &str) -> Result<BackendKind, String> {
        match s {
            "tcp" => Ok(BackendKind::Tcp),
            "mpi" => Ok(BackendKind::Mpi),
            other => Err(format!(
                "unknown backend {other:?}: expected \"tcp\" or \"mpi\""
            )),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Tcp => "tcp",
            BackendKind::Mpi => "mpi",
        })
    }
}

/// What to run: a job of `np` ranks of one program.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The number of ranks.
    pub np: usize,
    /// The backend the ranks use.
    pub backend: BackendKind,
    /// Where to run the ranks; empty means this machine only.
    pub hosts: Vec<HostSlot>,
    /// Prefix each output line with its rank.
    pub tag_output: bool,
    /// The program: a path, or a bare name looked up in `PATH`.
    pub program: PathBuf,
    /// The program's arguments.
    pub args: Vec<OsString>,
    /// More environment variables for every rank.
    pub extra_env: Vec<(String, String)>,
    /// How long ranks may take to exit after SIGTERM before SIGKILL (TCP jobs;
    /// MPI jobs give `mpirun` at least 5 s).
    pub grace: Duration,
}

impl JobSpec {
    /// A local TCP job of `np` ranks of `program`, without arguments.
    pub fn new(np: usize, program: impl Into<PathBuf>) -> JobSpec {
        JobSpec {
            np,
            backend: BackendKind::Tcp,
            hosts: Vec::new(),
            tag_output: false,
            program: program.into(),
            args: Vec::new(),
            extra_env: Vec::new(),
            grace: DEFAULT_GRACE,
        }
    }

    /// Sets the program's arguments.
    pub fn args<I, S>(mut self, args: I) -> JobSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }
}

/// How one process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankExit {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

impl RankExit {
    /// The status a shell would report: the code, or 128+signal.
    pub fn code(self) -> i32 {
        match self {
            RankExit::Code(code) => code,
            RankExit::Signal(signal) => 128 + signal,
        }
    }

    /// Whether it exited with status 0.
    pub fn success(self) -> bool {
        self == RankExit::Code(0)
    }
}

impl fmt::Display for RankExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RankExit::Code(code) => write!(f, "exited with status {code}"),
            RankExit::Signal(signal) => {
                write!(
                    f,
                    "was killed by signal {signal} ({})",
                    signals::signal_name(signal)
                )
            }
        }
    }
}

/// Why a job stopped before every rank finished on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopCause {
    /// A rank failed first.
    RankFailed {
        /// The rank.
        rank: usize,
        /// The remote host it ran on, if not this machine.
        host: Option<String>,
        /// How it ended.
        exit: RankExit,
    },
    /// `mpirun` failed (MPI jobs; it reports the ranks itself).
    MpirunFailed {
        /// How it ended.
        exit: RankExit,
    },
    /// The launcher got this signal and stopped the job.
    Interrupted {
        /// The signal.
        signal: i32,
    },
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// What the launcher should exit with (see step 7 of the stop protocol).
    pub exit_code: i32,
    /// Why the job was stopped; `None` if every rank exited 0.
    pub cause: Option<StopCause>,
    /// How each rank ended, by rank (TCP jobs; empty for MPI jobs, whose
    /// ranks `mpirun` watches).
    pub ranks: Vec<RankExit>,
}

impl JobOutcome {
    /// Whether every rank exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && self.cause.is_none()
    }
}

/// Runs a job to its end: starts its ranks, forwards signals to them, and
/// stops them all if one fails (the stop protocol in the module docs).
/// Lines naming a failed rank or a signal go to stderr as they happen.
pub fn run(spec: &JobSpec) -> Result<JobOutcome, LaunchError> {
    if spec.np == 0 {
        return Err(LaunchError::NoRanks);
    }
    match spec.backend {
        BackendKind::Tcp => tcp::run(spec),
        BackendKind::Mpi => mpi::run(spec),
    }
}

/// Self-launch: if `MTTL_NP=N` is set and this process is not already a rank
/// (no `MTTL_RANK`, no MPI launcher variable), runs the current executable
/// with the same arguments as a job of N ranks and returns the exit code for
/// the caller to exit with; otherwise returns `None` and the program goes on
/// as a rank (or alone).
///
/// The backend comes from `MTTL_BACKEND` (default `tcp`); `MTTL_TAG_OUTPUT=1`
/// tags output lines. Errors are printed to stderr and turned into an exit
/// code. `MTTL_BACKEND=local` is no self-launch (the ranks are threads of
/// this process, see [`env::local_job_size`]): `None`.
pub fn self_launch_from_env() -> Option<i32> {
    let np = std::env::var_os(env::NP).filter(|v| !v.is_empty())?;
    if std::env::var_os(env::RANK).is_some_and(|v| !v.is_empty())
        || env::mpi_launcher_var().is_some()
        || std::env::var_os(env::BACKEND).is_some_and(|v| v == "local")
    {
        return None;
    }
    let launched = self_launch_spec(&np).and_then(|spec| run(&spec));
    Some(match launched {
        Ok(outcome) => outcome.exit_code,
        Err(e) => {
            job::report!("{e}");
            e.exit_code()
        }
    })
}

fn self_launch_spec(np: &std::ffi::OsStr) -> Result<JobSpec, LaunchError> {
    let bad =
        |var: &'static str, value: &std::ffi::OsStr, expected: &'static str| LaunchError::BadEnv {
            var,
            value: value.to_string_lossy().into_owned(),
            expected,
        };
    let np = np
        .to_str()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .ok_or_else(|| bad(env::NP, np, "a number of ranks, 1 or more"))?;
    let backend = match std::env::var_os(env::BACKEND).filter(|v| !v.is_empty()) {
        None => BackendKind::Tcp,
        Some(v) => v
            .to_str()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(env::BACKEND, &v, "\"tcp\" or \"mpi\""))?,
    };
    let tag_output = match std::env::var_os(env::TAG_OUTPUT) {
        None => false,
        Some(v) => match v.to_str() {
            Some("" | "0") => false,
            Some("1") => true,
            _ => return Err(bad(env::TAG_OUTPUT, &v, "\"1\" or \"0\"")),
        },
    };
    let program = std::env::current_exe().map_err(|source| LaunchError::System {
        what: "find the path of this program",
        source,
    })?;
    let mut spec = JobSpec::new(np, program).args(std::env::args_os().skip(1));
    spec.backend = backend;
    spec.tag_output = tag_output;
    Ok(spec)
}

/// Checks that `program` can be run here and returns the path to execute:
/// a path is taken as is, a bare name is looked up in `PATH`.
fn resolve_program(program: &Path) -> Result<PathBuf, LaunchError> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        std::fs::metadata(path).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let name = program.as_os_str().as_encoded_bytes();
    if name.is_empty() {
        return Err(LaunchError::ProgramNotFound {
            program: program.to_owned(),
            searched_path: false,
        });
    }
    if name.contains(&b'/') {
        return match executable(program) {
            Ok(true) => Ok(program.to_owned()),
            Ok(false) => Err(LaunchError::NotExecutable {
                program: program.to_owned(),
            }),
            Err(_) => Err(LaunchError::ProgramNotFound {
                program: program.to_owned(),
                searched_path: false,
            }),
        };
    }
    let mut found_unexecutable = false;
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidate = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        }
        .join(program);
        match executable(&candidate) {
            Ok(true) => return Ok(candidate),
            Ok(false) => found_unexecutable = true,
            Err(_) => {}
        }
    }
    if found_unexecutable {
        Err(LaunchError::NotExecutable {
            program: program.to_owned(),
        })
    } else {
        Err(LaunchError::ProgramNotFound {
            program: program.to_owned(),
            searched_path: true,
        })
    }
}

/// Standard input for local rank 0: the launcher's own, unless it is a
/// terminal (the rank runs in a background process group).
fn rank0_input() -> job::Input {
    // SAFETY: isatty only inspects the given descriptor number.
    if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
        job::Input::Null
    } else {
        job::Input::Inherit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_parses() {
        assert_eq!("tcp".parse::<BackendKind>(), Ok(BackendKind::Tcp));
        assert_eq!("mpi".parse::<BackendKind>(), Ok(BackendKind::Mpi));
        assert!("udp".parse::<BackendKind>().is_err());
    }

    #[test]
    fn rank_exit_codes_and_wording() {
        assert_eq!(RankExit::Code(3).code(), 3);
        assert_eq!(RankExit::Signal(9).code(), 137);
        assert_eq!(RankExit::Code(3).to_string(), "exited with status 3");
        assert_eq!(
            RankExit::Signal(9).to_string(),
            "was killed by signal 9 (SIGKILL)"
        );
    }

    #[test]
    fn programs_resolve_through_path_or_as_paths() {
        let sh = resolve_program(Path::new("sh")).expect("sh is in PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert!(matches!(
            resolve_program(Path::new("no-such-program-mttl")),
            Err(LaunchError::ProgramNotFound {
                searched_path: true,
                ..
            })
        ));
        assert!(matches!(
            resolve_program(Path::new("./no-such-program-mttl")),
            Err(LaunchError::ProgramNotFound {
                searched_path: false,
                ..
            })
        ));
        let plain = std::env::temp_dir().join(format!("mttl-launch-plain-{}", std::process::id()));
        std::fs::write(&plain, b"not a program").expect("temp file");
        let verdict = resolve_program(&plain);
        let _ = std::fs::remove_file(&plain);
        assert!(matches!(verdict, Err(LaunchError::NotExecutable { .. })));
        assert!(matches!(
            resolve_program(Path::new("/tmp")),
            Err(LaunchError::NotExecutable { .. })
        ));
        assert!(resolve_program(Path::new("")).is_err());
    }

    #[test]
    fn zero_ranks_is_an_error() {
        assert!(matches!(
            run(&JobSpec::new(0, "true")),
            Err(LaunchError::NoRanks)
        ));
    }
}
