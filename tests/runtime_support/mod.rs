//! The harness of the runtime's multi-process tests (`tests/runtime_*.rs`):
//! every test is a job of several ranks of its own test binary, run once per
//! backend under the same name (`tcp::invoke_every_node`,
//! `mpi::invoke_every_node`, `local::invoke_every_node`; the MPI ones need
//! the cargo feature `mpi`).
//!
//! On `local` the job is one child process whose ranks are threads
//! (`MTTL_BACKEND=local MTTL_NP=N`): step 3 below runs the ranks itself
//! instead of launching processes, and step 4 is those threads. Its exit
//! code and output are checked as any other job's. A scenario whose point
//! is a rank's *process* (killed by a signal, exiting on its own, started
//! by a launcher) cannot run so; [`on_every_backend`] takes such scenarios
//! after `not_local:`, each with the reason, and runs them on the other
//! backends only.
//!
//! How one test runs:
//!
//! 1. The test harness calls the test fn, e.g. `tcp::invoke_every_node`,
//!    which calls the scenario with a [`Scenario`] naming the backend and the
//!    test; the scenario calls [`Scenario::run`] with a rank count and the
//!    program's main.
//! 2. Not being in a job, `run` starts this very test binary again, asking
//!    it for that one test (`--exact NAME --nocapture`), with `MTTL_NP=N`,
//!    `MTTL_BACKEND`, `MTTL_TAG_OUTPUT=1` and the marker
//!    [`SCENARIO_VAR`]`=NAME` in its environment and its output piped back.
//! 3. That child (the *launcher*) runs the same test fn; seeing the marker,
//!    `run` calls `mttl::start`, whose self-launch (`mttl_comm::launch::run`)
//!    starts N ranks of the binary with the same arguments on the chosen
//!    backend (`mpirun` for MPI) and returns the job's exit status, which
//!    the launcher exits with.
//! 4. Each rank runs the test fn once more; `mttl::start` now runs the
//!    program: rank 0 runs the main, the others serve, and every rank exits
//!    with the job's code. Ranks inherit the launcher's piped output.
//! 5. Back in step 2, `run` returns every line written by the launcher and
//!    the ranks, and the job's exit status ([`JobOutput`]). A job that
//!    outlives [`JOB_TIMEOUT`] gets SIGTERM (the launcher stops its ranks)
//!    and the test fails.
//!
//! Jobs of one test binary run one at a time (CI machines have two cores; a
//! four-rank job is enough to keep them busy).

// Each test file uses part of this module.
#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use mttl::comm::env as launch_env;

/// The marker variable: the name of the test whose job this process is in.
pub(crate) const SCENARIO_VAR: &str = "MTTL_TEST_SCENARIO";

/// How long a job may take before the test fails.
pub(crate) const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// Held while a job runs, so jobs of one binary do not compete for CPUs.
static ONE_JOB_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// mttl's TCP backend, ranks started by mttl's launcher.
    Tcp,
    /// mttl's MPI backend, ranks started by `mpirun`.
    Mpi,
    /// mttl's local backend: the ranks are threads of one process.
    Local,
}

impl Backend {
    /// The name `MTTL_BACKEND` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Tcp => "tcp",
            Backend::Mpi => "mpi",
            Backend::Local => "local",
        }
    }
}

/// The `mpirun` that starts MPI jobs, as `mttlrun` picks it: `MTTL_MPIRUN`,
/// else `mpirun`.
pub(crate) fn mpirun() -> String {
    std::env::var(launch_env::MPIRUN)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "mpirun".to_owned())
}

/// Which implementation's launcher [`mpirun`] is. It decides how a failed
/// MPI job is reported, which the tests of failures check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mpirun {
    /// Open MPI's `mpirun`: names the failed rank on stderr and exits with
    /// the first failing rank's code.
    OpenMpi,
    /// MPICH's Hydra (`mpirun.mpich`, `mpiexec.hydra`): prints a banner with
    /// the PID of a failed process on stdout (the first to fail or one it
    /// killed), kills the ranks still running soon after one fails, and
    /// exits with the bitwise OR of the ranks' wait statuses, read as a
    /// signal's number if any was killed.
    Hydra,
}

/// Tells [`mpirun`]'s implementation from its `--version`, as `mttlrun` does.
pub(crate) fn mpirun_kind() -> Mpirun {
    let command = mpirun();
    let version = Command::new(&command)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command} --version: {e}"));
    let text = String::from_utf8_lossy(&version.stdout);
    if text.contains("Open MPI") {
        Mpirun::OpenMpi
    } else if text.contains("HYDRA") {
        Mpirun::Hydra
    } else {
        panic!("{command} --version names neither Open MPI nor Hydra:\n{text}")
    }
}

/// Defines, for each scenario `fn NAME(t: Scenario)` of the file, the tests
/// `tcp::NAME`, `local::NAME` and (with the cargo feature `mpi`)
/// `mpi::NAME`. Scenarios listed after `not_local:`, each as `NAME =>
/// "why it cannot run with ranks as threads"`, get no `local::NAME`.
macro_rules! on_every_backend {
    ($($scenario:ident),* $(,)? $(; not_local: $($process_only:ident => $why:literal),* $(,)?)?) => {
        crate::runtime_support::on_every_backend!(@backend tcp, Tcp, $($scenario,)* $($($process_only,)*)?);
        #[cfg(feature = "mpi")]
        crate::runtime_support::on_every_backend!(@backend mpi, Mpi, $($scenario,)* $($($process_only,)*)?);
        crate::runtime_support::on_every_backend!(@backend local, Local, $($scenario,)*);
    };
    (@backend $module:ident, $backend:ident, $($scenario:ident,)*) => {
        mod $module {
            $(
                #[test]
                fn $scenario() {
                    super::$scenario(crate::runtime_support::Scenario::new(
                        crate::runtime_support::Backend::$backend,
                        concat!(stringify!($module), "::", stringify!($scenario)),
                    ));
                }
            )*
        }
    };
}
pub(crate) use on_every_backend;

/// One test on one backend: what it runs as a job, and with what.
#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    /// The backend.
    pub(crate) backend: Backend,
    /// The full test name, e.g. `tcp::invoke_every_node`.
    pub(crate) name: &'static str,
    env: Vec<(String, String)>,
}

impl Scenario {
    /// The scenario of test `name` on `backend`.
    pub(crate) fn new(backend: Backend, name: &'static str) -> Scenario {
        Scenario {
            backend,
            name,
            env: Vec::new(),
        }
    }

    /// Sets a variable in the environment of the job's ranks.
    pub(crate) fn env(mut self, name: &str, value: &str) -> Scenario {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Whether this process is the launcher or a rank of this test's job
    /// (steps 3 and 4 of the module docs).
    pub(crate) fn in_job(&self) -> bool {
        std::env::var(SCENARIO_VAR).is_ok_and(|v| v == self.name)
    }

    /// In the job, runs `main` as the program (rank 0 runs it, the others
    /// serve) and exits with the job's code; outside, runs this test as a job
    /// of `np` ranks and returns how it ended.
    pub(crate) fn run<R: mttl::MainResult>(
        &self,
        np: usize,
        main: impl FnOnce() -> R + 'static,
    ) -> JobOutput {
        if self.in_job() {
            std::process::exit(mttl::start(main));
        }
        let mut cmd = self.rank_command();
        // Tagged output keeps every rank's lines whole: untagged ranks share
        // the pipe, and a line written in several pieces can be split.
        cmd.env(launch_env::NP, np.to_string())
            .env(launch_env::BACKEND, self.backend.name())
            .env(launch_env::TAG_OUTPUT, "1");
        let what = format!("{} ({np} ranks)", self.name);
        run_captured(&what, cmd, JOB_TIMEOUT)
    }

    /// A command that runs this test's fn in this test binary, with the
    /// marker and the scenario's environment set but no launch environment:
    /// add `MTTL_NP` to make it a launcher, or the `MTTL_*` rank variables to
    /// make it a rank.
    pub(crate) fn rank_command(&self) -> Command {
        let mut cmd = Command::new(this_test_binary());
        // Panic messages are what the tests read; backtraces only bury them.
        cmd.args(["--exact", self.name, "--nocapture", "--test-threads", "1"])
            .env(SCENARIO_VAR, self.name)
            .env("RUST_BACKTRACE", "0");
        for var in [
            launch_env::NP,
            launch_env::RANK,
            launch_env::SIZE,
            launch_env::ROOT,
            launch_env::SECRET,
            launch_env::BACKEND,
            launch_env::TAG_OUTPUT,
        ] {
            cmd.env_remove(var);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }
}

/// The path of the running test binary.
pub(crate) fn this_test_binary() -> PathBuf {
    std::env::current_exe().expect("the test binary knows its own path")
}

/// A binary cargo built beside this test binary: `sub` is `""` for the
/// workspace's programs (`target/<profile>/`) or `"examples"`; `how` says
/// how to build it when it is missing.
pub(crate) fn built_binary(sub: &str, name: &str, how: &str) -> PathBuf {
    let test_binary = this_test_binary();
    let profile_dir = test_binary
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lies in target/<profile>/deps");
    let path = profile_dir
        .join(sub)
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(path.is_file(), "{} does not exist: {how}", path.display());
    path
}

/// How a job (or a single process) ended, with everything it wrote.
#[derive(Debug)]
pub(crate) struct JobOutput {
    /// What ran, for messages.
    pub(crate) what: String,
    /// The exit status.
    pub(crate) status: ExitStatus,
    /// Standard output of the launcher and every rank.
    pub(crate) stdout: String,
    /// Standard error of the launcher and every rank.
    pub(crate) stderr: String,
    /// When the exit was seen (within 10 ms of it).
    pub(crate) ended: SystemTime,
    /// From the start to the exit.
    pub(crate) elapsed: Duration,
}

impl JobOutput {
    /// The exit code (`None` if killed by a signal).
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn dump(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}--- end ---",
            self.stdout, self.stderr
        )
    }

    /// Asserts that the job exited 0.
    #[track_caller]
    pub(crate) fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "{} failed: {}\n{}",
            self.what,
            self.status,
            self.dump()
        );
        self
    }

    /// Asserts that the job exited with `code`.
    #[track_caller]
    pub(crate) fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code(),
            Some(code),
            "{} should have exited with status {code}, but {}\n{}",
            self.what,
            self.status,
            self.dump()
        );
        self
    }

    /// Asserts that a job on `backend` whose ranks all fail with `code`
    /// exited with it, as far as its launcher tells: [`Mpirun::Hydra`] only
    /// tells that it failed, as it kills a rank that lingers (to let the
    /// others report) and then exits with a code mixed from every rank's
    /// wait status.
    #[track_caller]
    pub(crate) fn assert_ranks_code(&self, backend: Backend, code: i32) -> &Self {
        if backend == Backend::Mpi && mpirun_kind() == Mpirun::Hydra {
            self.assert_failure()
        } else {
            self.assert_code(code)
        }
    }

    /// Asserts that the job exited with a non-zero code.
    #[track_caller]
    pub(crate) fn assert_failure(&self) -> &Self {
        assert!(
            matches!(self.code(), Some(c) if c != 0),
            "{} should have exited non-zero, but {}\n{}",
            self.what,
            self.status,
            self.dump()
        );
        self
    }

    /// The first line of stderr containing every one of `parts`.
    #[track_caller]
    pub(crate) fn stderr_line(&self, parts: &[&str]) -> &str {
        self.line_of("stderr", &self.stderr, parts)
    }

    /// The first line of stdout containing every one of `parts`.
    #[track_caller]
    pub(crate) fn stdout_line(&self, parts: &[&str]) -> &str {
        self.line_of("stdout", &self.stdout, parts)
    }

    #[track_caller]
    fn line_of<'a>(&self, stream: &str, text: &'a str, parts: &[&str]) -> &'a str {
        match text
            .lines()
            .find(|line| parts.iter().all(|p| line.contains(p)))
        {
            Some(line) => line,
            None => panic!(
                "{}: no line of {stream} contains all of {parts:?}\n{}",
                self.what,
                self.dump()
            ),
        }
    }
}

/// Waits until no other job of this test binary runs; the job may run while
/// the guard lives.
pub(crate) fn job_turn() -> MutexGuard<'static, ()> {
    ONE_JOB_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `cmd` with its output captured, stopping it after `timeout`.
pub(crate) fn run_captured(what: &str, cmd: Command, timeout: Duration) -> JobOutput {
    let _turn = job_turn();
    let child = spawn_captured(what, cmd);
    finish_captured(what, child, timeout)
}

/// Starts `cmd` with stdin closed and stdout and stderr piped.
pub(crate) fn spawn_captured(what: &str, mut cmd: Command) -> CapturedChild {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what} ({cmd:?}): {e}"));
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    CapturedChild {
        child,
        stdout,
        stderr,
    }
}

/// A running process whose output is being collected.
#[derive(Debug)]
pub(crate) struct CapturedChild {
    child: Child,
    stdout: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<String>,
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

/// Waits for a process started by [`spawn_captured`], at most `timeout`;
/// then sends it SIGTERM, and SIGKILL 5 s later, and fails the test.
pub(crate) fn finish_captured(what: &str, mut c: CapturedChild, timeout: Duration) -> JobOutput {
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        match c.child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => panic!("waiting for {what}: {e}"),
        }
        if !timed_out && start.elapsed() > timeout {
            timed_out = true;
            // SIGTERM lets a launcher stop its ranks (its stop protocol).
            let _ = Command::new("kill")
                .args(["-TERM", &c.child.id().to_string()])
                .status();
        }
        if timed_out && start.elapsed() > timeout + Duration::from_secs(5) {
            let _ = c.child.kill();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The launcher reaps its ranks before it exits, so the pipes close soon.
    let collect = |rx: &mpsc::Receiver<String>| {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| "<output not closed within 10 s of the exit>\n".to_owned())
    };
    let (ended, elapsed) = (SystemTime::now(), start.elapsed());
    let out = JobOutput {
        what: what.to_owned(),
        status,
        ended,
        elapsed,
        stdout: collect(&c.stdout),
        stderr: collect(&c.stderr),
    };
    assert!(
        !timed_out,
        "{what} did not finish within {timeout:?} and was stopped\n{}",
        out.dump()
    );
    out
}

/// In a job: a failed check on any rank ends that rank at once, which
/// stops the job with the check's message, instead of leaving the other
/// ranks waiting in a collective for it.
pub(crate) fn stop_job_on_panic() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::exit(101);
    }));
}
