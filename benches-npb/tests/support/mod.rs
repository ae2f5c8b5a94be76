//! What the `mttl-bench` smoke tests share: running the program with a
//! time limit, so a benchmark whose job hangs fails its test instead of
//! blocking the suite.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one `mttl-bench` run of these tests may take: each is a few
/// seconds' work, so a run still going then is stuck.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(300);

/// Runs `command` to its end and returns its output, as
/// [`Command::output`]; if it is still running after [`RUN_LIMIT`], stops
/// it (SIGTERM, which the launcher forwards to the ranks, then SIGKILL) and
/// fails the test with what it printed.
pub(crate) fn output_within_limit(command: &mut Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mttl-bench starts");
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
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mttl-bench") {
            break status;
        }
        if start.elapsed() > RUN_LIMIT {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // our own child's, not yet reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{command:?} did not finish within {RUN_LIMIT:?} and was stopped; stderr:\n{}",
                String::from_utf8_lossy(&stderr.join().unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().expect("the stdout reader"),
        stderr: stderr.join().expect("the stderr reader"),
    }
}
