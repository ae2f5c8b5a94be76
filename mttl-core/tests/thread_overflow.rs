//! Stack overflow in an mttl thread kills the process with a message naming
//! the thread and `MTTL_STACK_SIZE`; other faults keep their usual outcome.
//!
//! Each scenario re-runs this test binary as a child process with
//! `MTTL_TEST_OVERFLOW_CHILD` set, running one of the `child_*` functions
//! (ignored in normal runs; they do nothing without the variable), and
//! checks how the child died.

use std::hint::black_box;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use mttl_core::thread;

const CHILD_VAR: &str = "MTTL_TEST_OVERFLOW_CHILD";

/// How long a child may take: it dies or ends in well under a second, so
/// one still running then is stuck (in the overflow handler, say).
const CHILD_LIMIT: Duration = Duration::from_secs(60);

/// Runs child scenario `name` with `MTTL_STACK_SIZE` set to `stack_size`
/// (unset for `None`); returns its exit status and stderr.
fn run_child(name: &str, stack_size: Option<&str>) -> (ExitStatus, String) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut command = Command::new(exe);
    command
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, "1");
    match stack_size {
        Some(value) => command.env(thread::STACK_SIZE_VAR, value),
        None => command.env_remove(thread::STACK_SIZE_VAR),
    };
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the child test process");
    let mut stderr = child.stderr.take().expect("the child's stderr");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "child {name} still ran after {CHILD_LIMIT:?} and was killed; stderr:\n{}",
                reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (status, reader.join().expect("the stderr reader"))
}

fn is_child() -> bool {
    std::env::var_os(CHILD_VAR).is_some()
}

#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1).wrapping_add(u64::from(frame[7]))
}

/// Drives one mttl thread so the overflow handler is installed.
fn start_scheduler() {
    thread::spawn("warm-up", || {});
    while thread::run_ready(usize::MAX) > 0 {}
}

#[test]
fn overflow_in_a_thread_names_the_thread_and_the_variable() {
    let (status, stderr) = run_child("child_recurses_in_thread", None);
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "{status}; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(
            "mttl: thread 'deep:recursion' overflowed its 256 KiB stack; \
             raise MTTL_STACK_SIZE (e.g. MTTL_STACK_SIZE=512K)"
        ),
        "stderr:\n{stderr}"
    );
}

#[test]
fn overflow_message_gives_the_configured_size() {
    let (status, stderr) = run_child("child_recurses_in_thread", Some("1M"));
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "{status}; stderr:\n{stderr}"
    );
    assert!(
        stderr
            .contains("thread 'deep:recursion' overflowed its 1 MiB stack; raise MTTL_STACK_SIZE"),
        "stderr:\n{stderr}"
    );
}

#[test]
fn other_faults_in_a_thread_stay_plain_segfaults() {
    let (status, stderr) = run_child("child_writes_to_null_in_thread", None);
    assert_eq!(
        status.signal(),
        Some(libc::SIGSEGV),
        "{status}; stderr:\n{stderr}"
    );
    assert!(!stderr.contains("overflowed"), "stderr:\n{stderr}");
}

#[test]
fn overflow_of_an_os_thread_keeps_rusts_report() {
    let (status, stderr) = run_child("child_overflows_an_os_thread", None);
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "{status}; stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("thread 'small-os-thread'"),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("has overflowed its stack"),
        "stderr:\n{stderr}"
    );
    assert!(!stderr.contains("mttl:"), "stderr:\n{stderr}");
}

#[test]
fn bad_stack_size_is_reported_with_the_variable_name() {
    let (status, stderr) = run_child("child_spawns_a_thread", Some("12Q"));
    assert!(!status.success(), "stderr:\n{stderr}");
    assert!(
        stderr.contains(
            "mttl: cannot spawn thread 'any': MTTL_STACK_SIZE=\"12Q\" is not a usable stack size: \
             the suffix is not one of K, M, G"
        ),
        "stderr:\n{stderr}"
    );
}

// ---- child scenarios ----

#[test]
#[ignore = "child process of overflow_in_a_thread_*"]
fn child_recurses_in_thread() {
    if !is_child() {
        return;
    }
    thread::spawn("deep:recursion", || {
        black_box(recurse(0));
    });
    thread::run_ready(1);
    unreachable!("the thread should have overflowed its stack");
}

#[test]
#[ignore = "child process of other_faults_in_a_thread_stay_plain_segfaults"]
fn child_writes_to_null_in_thread() {
    if !is_child() {
        return;
    }
    thread::spawn("null-writer", || {
        let address = black_box(8_usize) as *mut u8;
        // SAFETY: not safe at all: this deliberately faults, to check that
        // faults outside guard pages keep their default outcome.
        unsafe { address.write_volatile(1) };
    });
    thread::run_ready(1);
    unreachable!("the thread should have faulted");
}

#[test]
#[ignore = "child process of overflow_of_an_os_thread_keeps_rusts_report"]
fn child_overflows_an_os_thread() {
    if !is_child() {
        return;
    }
    start_scheduler();
    let handle = std::thread::Builder::new()
        .name("small-os-thread".into())
        .stack_size(128 * 1024)
        .spawn(|| black_box(recurse(0)))
        .expect("spawn an OS thread");
    let _ = handle.join();
    unreachable!("the OS thread should have overflowed its stack");
}

#[test]
#[ignore = "child process of bad_stack_size_is_reported_with_the_variable_name"]
fn child_spawns_a_thread() {
    if !is_child() {
        return;
    }
    thread::spawn("any", || {});
}
