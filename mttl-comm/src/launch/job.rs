//! The supervisor: starts a job's processes, watches them, stops them.
//!
//! Every process of a job (a rank, the `ssh` carrying a remote rank, or
//! `mpirun`) is started in its own process group, with `PR_SET_PDEATHSIG`
//! set to SIGKILL so that it dies if the launcher's thread dies. Signals are
//! always sent to the whole group, so what a rank started in its group goes
//! with it.
//!
//! Invariant: a group is signalled only while its leader is not reaped.
//! Exits are detected with `waitid(.., WNOWAIT)`, which leaves the leader a
//! zombie; the zombie keeps its pid (the group id) from being reused, so a
//! signal can never reach an unrelated group. Leaders are reaped at the end.
//!
//! The supervisor polls every [`TICK`]: it checks for signals sent to the
//! launcher and for processes that have exited, and runs the stop protocol
//! described in the [module docs](super).

use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::error::LaunchError;
use super::output::{OutputForwarders, Stream};
use super::signals::{signal_name, SignalWatch};
use super::{JobOutcome, RankExit, StopCause};

/// Prints one line for the user on stderr, prefixed `mttlrun: `. Unlike
/// `eprintln!`, a closed or broken stderr is ignored rather than a panic.
macro_rules! report {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "mttlrun: {}", format_args!($($arg)*));
    }};
}
pub(crate) use report;

/// How often the supervisor looks at its processes and at signals.
const TICK: Duration = Duration::from_millis(10);
/// How long output pipes may stay open once every process is reaped.
const OUTPUT_DRAIN: Duration = Duration::from_secs(1);

/// Which process of the job a member is.
#[derive(Debug, Clone)]
pub(crate) enum Who {
    /// A rank, with the remote host it runs on (`None`: this machine).
    Rank { rank: usize, host: Option<String> },
    /// `mpirun`, which runs every rank of an MPI job.
    Mpirun,
}

impl std::fmt::Display for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Rank { rank, host: None } => write!(f, "rank {rank}"),
            Who::Rank {
                rank,
                host: Some(host),
            } => write!(f, "rank {rank} on {host}"),
            Who::Mpirun => f.write_str("mpirun"),
        }
    }
}

/// What a started process reads on its standard input.
#[derive(Debug)]
pub(crate) enum Input {
    /// The launcher's own standard input.
    Inherit,
    /// Nothing (`/dev/null`).
    Null,
    /// A pipe that first carries these bytes and then stays open until the
    /// job stops: closing it tells a remote wrapper to stop its rank.
    Lifeline(Vec<u8>),
}

#[derive(Debug)]
struct Member {
    who: Who,
    child: Child,
    lifeline: Option<ChildStdin>,
    /// Set once `waitid` has seen the process exit (it is then a zombie).
    exit: Option<RankExit>,
}

impl Member {
    /// Sends `signal` to the member's process group.
    fn signal_group(&self, signal: i32) {
        let Ok(pgid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        // SAFETY: kill(2) has no memory-safety preconditions. The group id
        // is the pid of our own child, which is not reaped yet (the module
        // invariant), so it cannot name another process group.
        let rc = unsafe { libc::kill(-pgid, signal) };
        if rc != 0 {
            tracing::debug!(
                "signalling the group of {} failed: {}",
                self.who,
                io::Error::last_os_error()
            );
        }
    }
}

/// A running job.
#[derive(Debug)]
pub(crate) struct Job {
    members: Vec<Member>,
    grace: Duration,
    signals: SignalWatch,
    output: OutputForwarders,
}

/// How long the other ranks get to stop on their own after one fails,
/// before they are sent SIGTERM: an mttl rank notices a failed peer at once,
/// and then prints what it was waiting for, which a signal would cut short.
const SETTLE: Duration = Duration::from_secs(1);

/// The state of a stop in progress.
#[derive(Debug)]
struct Stopping {
    /// When to send SIGTERM, if not sent yet.
    term_at: Option<Instant>,
    deadline: Instant,
    killed: bool,
}

impl Job {
    /// A job with no processes yet; from now on signals to the launcher are
    /// forwarded to it.
    pub(crate) fn new(grace: Duration) -> Result<Job, LaunchError> {
        let signals = SignalWatch::start().map_err(|source| LaunchError::System {
            what: "install the signal handlers",
            source,
        })?;
        Ok(Job {
            members: Vec::new(),
            grace,
            signals,
            output: OutputForwarders::new(),
        })
    }

    /// Starts one process of the job. With `tag_output`, its stdout and
    /// stderr are forwarded line by line with the rank as prefix (or inherited
    /// otherwise). On error the caller should [`abort`](Job::abort) the job.
    pub(crate) fn start(
        &mut self,
        who: Who,
        mut command: Command,
        input: Input,
        tag_output: bool,
    ) -> Result<(), LaunchError> {
        let program = PathBuf::from(command.get_program());
        let (stdin, lifeline_bytes) = match input {
            Input::Inherit => (Stdio::inherit(), None),
            Input::Null => (Stdio::null(), None),
            Input::Lifeline(bytes) => (Stdio::piped(), Some(bytes)),
        };
        let (stdout, stderr) = if tag_output {
            (Stdio::piped(), Stdio::piped())
        } else {
            (Stdio::inherit(), Stdio::inherit())
        };
        command
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // Linux only: a rank dies with its launcher, however the launcher
        // ends. Other systems have no such signal; there a launcher killed
        // outright (SIGKILL) leaves its local ranks running, while every
        // other way it ends still stops them (see `begin_stop`).
        #[cfg(target_os = "linux")]
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed. prctl and getppid are system
        // calls; the closure allocates nothing and takes no lock (the errors
        // are built from raw error numbers).
        #[cfg(target_os = "linux")]
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The launcher may have died before the line above: then
                // nobody would ever kill us.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        // A rank's own program gets the shell's wording; a remote shell or
        // mpirun that cannot start is named with the process it was for.
        let local_rank = matches!(who, Who::Rank { host: None, .. });
        let mut child = command.spawn().map_err(|source| match source.kind() {
            io::ErrorKind::NotFound if local_rank => LaunchError::ProgramNotFound {
                program: program.clone(),
                searched_path: false,
            },
            io::ErrorKind::PermissionDenied if local_rank => LaunchError::NotExecutable {
                program: program.clone(),
            },
            _ => LaunchError::Spawn {
                who: who.to_string(),
                program: program.clone(),
                source,
            },
        })?;
        let mut lifeline = child.stdin.take();
        if let (Some(pipe), Some(bytes)) = (lifeline.as_mut(), lifeline_bytes) {
            // A process that dies at once closes the pipe; its exit status
            // then tells what happened, so a failed write is not an error.
            if let Err(e) = pipe.write_all(&bytes).and_then(|()| pipe.flush()) {
                tracing::debug!("writing to the standard input of {who} failed: {e}");
            }
        }
        let rank = match &who {
            Who::Rank { rank, .. } => *rank,
            Who::Mpirun => 0,
        };
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        self.members.push(Member {
            who,
            child,
            lifeline,
            exit: None,
        });
        let forwarded = stdout
            .map(|pipe| self.output.forward(rank, pipe, Stream::Stdout))
            .transpose()
            .and_then(|_| {
                stderr
                    .map(|pipe| self.output.forward(rank, pipe, Stream::Stderr))
                    .transpose()
            });
        forwarded.map_err(|source| LaunchError::System {
            what: "start a thread to forward output",
            source,
        })?;
        Ok(())
    }

    /// Stops a job that could not be started completely: every process
    /// started so far is stopped by the stop protocol and reaped.
    pub(crate) fn abort(mut self) {
        let mut stopping = self.begin_stop(libc::SIGTERM);
        while self.running() {
            // A member that cannot be waited for is dropped by the call.
            let _ = self.newly_exited();
            self.escalate_if_due(&mut stopping);
            std::thread::sleep(TICK);
        }
        self.finish();
    }

    /// Watches the job to its end and returns how it ended.
    pub(crate) fn supervise(mut self) -> Result<JobOutcome, LaunchError> {
        let mut cause: Option<StopCause> = None;
        let mut stopping: Option<Stopping> = None;
        while self.running() {
            if let Some(signal) = self.signals.poll() {
                if let Some(stop) = stopping.as_mut() {
                    // A second signal during the grace period: no more waiting.
                    if !stop.killed {
                        report!("got {} again; killing every rank now", signal_name(signal));
                        self.signal_all(libc::SIGKILL);
                        stop.killed = true;
                    }
                } else {
                    report!("got {}; stopping the job", signal_name(signal));
                    cause = Some(StopCause::Interrupted { signal });
                    stopping = Some(self.begin_stop(signal));
                }
            }
            let mut exited = match self.newly_exited() {
                Ok(exited) => exited,
                Err(source) => {
                    self.abort();
                    return Err(LaunchError::System {
                        what: "watch the processes of the job",
                        source,
                    });
                }
            };
            // Of several failures seen in one tick, report the one killed by
            // a signal first: a killed rank makes the others exit at once,
            // and is the cause.
            exited.sort_by_key(|&i| !matches!(self.members[i].exit, Some(RankExit::Signal(_))));
            for index in exited {
                let member = &self.members[index];
                let Some(exit) = member.exit.filter(|e| !e.success()) else {
                    continue;
                };
                if stopping.is_some() {
                    continue;
                }
                let hint = match (&member.who, exit) {
                    (
                        Who::Rank {
                            host: Some(host), ..
                        },
                        RankExit::Code(255),
                    ) => format!(
                        " (255 is also how ssh reports its own failure, such as {host} \
                         not answering for MTTL_LINK_TIMEOUT: check that \
                         `ssh -o BatchMode=yes {host} true` works)"
                    ),
                    _ => String::new(),
                };
                report!("{} {exit}{hint}", member.who);
                cause = Some(match member.who.clone() {
                    Who::Rank { rank, host } => StopCause::RankFailed { rank, host, exit },
                    Who::Mpirun => StopCause::MpirunFailed { exit },
                });
                stopping = Some(Stopping {
                    term_at: Some(Instant::now() + SETTLE),
                    deadline: Instant::now() + SETTLE + self.grace,
                    killed: false,
                });
            }
            if let Some(stop) = stopping.as_mut() {
                self.escalate_if_due(stop);
            }
            if self.running() {
                std::thread::sleep(TICK);
            }
        }
        let ranks = self.finish();
        let exit_code = match &cause {
            None => 0,
            Some(StopCause::Interrupted { signal }) => 128 + signal,
            Some(StopCause::RankFailed { exit, .. } | StopCause::MpirunFailed { exit }) => {
                exit.code()
            }
        };
        Ok(JobOutcome {
            exit_code,
            cause,
            ranks,
        })
    }

    /// Whether some member has not exited yet.
    fn running(&self) -> bool {
        self.members.iter().any(|m| m.exit.is_none())
    }

    /// Notes which members have exited since the last call; returns their
    /// indices. A member that cannot be waited for (someone else reaped it)
    /// is dropped from the job, as its group id may now be reused and must
    /// never be signalled again, and the error is returned.
    fn newly_exited(&mut self) -> io::Result<Vec<usize>> {
        let mut exited = Vec::new();
        for index in 0..self.members.len() {
            let member = &mut self.members[index];
            if member.exit.is_some() {
                continue;
            }
            match peek_exit(&member.child) {
                Ok(Some(exit)) => {
                    member.exit = Some(exit);
                    exited.push(index);
                }
                Ok(None) => {}
                Err(source) => {
                    let lost = self.members.remove(index);
                    tracing::warn!("lost track of {}: {source}", lost.who);
                    return Err(source);
                }
            }
        }
        Ok(exited)
    }

    /// Steps 2 and 3 of the stop protocol: close the lifelines of remote
    /// ranks and send `signal` to every group whose leader still runs.
    fn begin_stop(&mut self, signal: i32) -> Stopping {
        for member in &mut self.members {
            member.lifeline = None;
        }
        for member in self.members.iter().filter(|m| m.exit.is_none()) {
            member.signal_group(signal);
        }
        Stopping {
            term_at: None,
            deadline: Instant::now() + self.grace,
            killed: false,
        }
    }

    /// Step 3 after the settling time, and step 5 of the stop protocol:
    /// after the grace period, SIGKILL.
    fn escalate_if_due(&mut self, stop: &mut Stopping) {
        let now = Instant::now();
        if stop.term_at.is_some_and(|t| now >= t) {
            stop.term_at = None;
            self.begin_stop(libc::SIGTERM);
        }
        if !stop.killed && now >= stop.deadline {
            self.signal_all(libc::SIGKILL);
            stop.killed = true;
        }
    }

    /// Sends `signal` to every group (of living and not-yet-reaped leaders).
    fn signal_all(&self, signal: i32) {
        for member in &self.members {
            member.signal_group(signal);
        }
    }

    /// Step 6: kill what is left in the groups, reap every leader, drain the
    /// output. Returns each member's final status, in start order.
    fn finish(&mut self) -> Vec<RankExit> {
        for member in &mut self.members {
            member.lifeline = None;
        }
        self.signal_all(libc::SIGKILL);
        let mut exits = Vec::with_capacity(self.members.len());
        for member in &mut self.members {
            exits.push(match member.child.wait() {
                Ok(status) => RankExit::from_status(status),
                Err(e) => {
                    tracing::warn!("reaping {} failed: {e}", member.who);
                    member.exit.unwrap_or(RankExit::Code(-1))
                }
            });
        }
        self.members.clear();
        std::mem::replace(&mut self.output, OutputForwarders::new()).finish(OUTPUT_DRAIN);
        exits
    }
}

impl Drop for Job {
    /// A job dropped before its end (a panic, an early return) leaves
    /// nothing behind: its groups are killed and its leaders reaped.
    fn drop(&mut self) {
        if !self.members.is_empty() {
            self.finish();
        }
    }
}

impl RankExit {
    fn from_status(status: std::process::ExitStatus) -> RankExit {
        match (status.code(), status.signal()) {
            (Some(code), _) => RankExit::Code(code),
            (None, Some(signal)) => RankExit::Signal(signal),
            (None, None) => RankExit::Code(-1),
        }
    }
}

/// Whether `child` has exited, without reaping it.
fn peek_exit(child: &Child) -> io::Result<Option<RankExit>> {
    // SAFETY: siginfo_t is a plain C struct for which all-zero bytes are a
    // valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t owned by this frame;
        // waitid only writes into it. WNOWAIT leaves the child unreaped.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                child.id(),
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // SAFETY: waitid succeeded, so `info` is either still all zeros (no child
    // changed state: si_pid reads 0) or filled in for a SIGCHLD-style event,
    // where si_pid and si_status are the initialised union fields.
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if pid == 0 {
        return Ok(None);
    }
    Ok(match info.si_code {
        libc::CLD_EXITED => Some(RankExit::Code(status)),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(RankExit::Signal(status)),
        _ => None,
    })
}
