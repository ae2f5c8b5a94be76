//! What the lab's tests share: running `mttl-netlab`, taking the one lab
//! this machine can have (its names are fixed), bringing it down whatever
//! happens, and reading `check`'s verdict.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static ONE_LAB_AT_A_TIME: Mutex<()> = Mutex::new(());

pub(crate) fn netlab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mttl-netlab"))
        .args(args)
        .output()
        .expect("cannot run mttl-netlab")
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub(crate) fn lab_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n == "mttl-wire" || n.starts_with("mttl-h"))
        .map(str::to_string)
        .collect()
}

/// The lab, taken by one test: dropping it runs `down`, so a test that
/// fails half-way leaves nothing behind.
pub(crate) struct TakenLab {
    _guard: MutexGuard<'static, ()>,
}

impl Drop for TakenLab {
    fn drop(&mut self) {
        if !lab_namespaces().is_empty() || std::path::Path::new("/run/mttl-netlab").exists() {
            let _ = netlab(&["down"]);
        }
    }
}

/// Takes the lab for one test: fails if one is up already (someone else's).
pub(crate) fn take_lab() -> TakenLab {
    let guard = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid only reads this process's credentials.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "these tests need root (network namespaces)");
    assert!(
        lab_namespaces().is_empty(),
        "a lab is up already ({:?}): run `mttl-netlab down` first",
        lab_namespaces()
    );
    TakenLab { _guard: guard }
}

/// Checks a test may take before the bandwidth must be met: the wire
/// shares this machine's 2 cores with whatever else runs (a check taken
/// while a build ran beside it has measured 62 and 89 Mb/s on 100 Mb/s).
pub(crate) const CHECKS: usize = 3;

/// Whether a check's bandwidth line says the profile's rate was met.
pub(crate) fn bandwidth_met(check: &str) -> bool {
    check
        .lines()
        .find(|l| l.starts_with("bandwidth:"))
        .is_some_and(|l| l.contains("ok (within 10%)"))
}

/// Runs `check` until the bandwidth is met, [`CHECKS`] times at most;
/// returns every check's output, the last one last.
pub(crate) fn check_until_bandwidth_met() -> Vec<String> {
    let mut checks = Vec::new();
    for _ in 0..CHECKS {
        let check = text(&netlab(&["check", "--seconds", "2"]));
        let met = bandwidth_met(&check);
        checks.push(check);
        if met {
            break;
        }
    }
    checks
}

/// Runs `command` to its end, at most `limit`; a command still running then
/// is killed (its process group: a launcher and what it started) and the
/// test fails with what it printed.
#[allow(dead_code)] // not every test file that shares this module uses it
pub(crate) fn output_within(command: &mut Command, limit: Duration) -> Output {
    use std::os::unix::process::CommandExt as _;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
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
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if start.elapsed() > limit {
            // SAFETY: signalling the process group this test started.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).to_string();
            panic!("{command:?} did not finish within {limit:?}; stderr:\n{err}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// The lab every test brings up: two hosts on 100Base-T through the wire.
pub(crate) const TWO_HOSTS: [&str; 7] = [
    "up",
    "--hosts",
    "2",
    "--profile",
    "100base-t",
    "--wire",
    "user",
];
