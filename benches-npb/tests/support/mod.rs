//! What the tests of this package's programs share: running a program with
//! a time limit, so a job that hangs fails its test instead of blocking the
//! suite.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one `mttl-bench` run of these tests may take: each is a few
/// seconds' work, so a run still going then is stuck.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(300);

/// Runs `command` to its end and returns its output, as
/// [`Command::output`]; if it is still running after [`RUN_LIMIT`], stops
/// it and fails the test with what it printed.
#[allow(dead_code)] // not every test file that shares this module uses it
pub(crate) fn output_within_limit(command: &mut Command) -> Output {
    run_within(command, RUN_LIMIT).unwrap_or_else(|out| {
        panic!(
            "{command:?} did not finish within {RUN_LIMIT:?} and was stopped; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs `command` to its end, at most `limit`, and returns its output; a
/// command still running then is stopped (SIGTERM, which a launcher
/// forwards to its ranks, then SIGKILL) and what it printed comes back as
/// the error.
pub(crate) fn run_within(command: &mut Command, limit: Duration) -> Result<Output, Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
    let collect = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = collect(Box::new(child.stdout.take().expect("stdout")));
    let stderr = collect(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if start.elapsed() > limit {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // our own child's, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            timed_out = true;
            break child.wait().expect("waiting for a stopped child");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = Output {
        status,
        stdout: stdout.join().expect("the stdout reader"),
        stderr: stderr.join().expect("the stderr reader"),
    };
    if timed_out {
        Err(output)
    } else {
        Ok(output)
    }
}
