//! Bad input gets a clear error naming what is wrong, and changes nothing:
//! each of these fails before the lab is touched, so they run anywhere, as
//! root or not, with or without a lab up.
#![cfg(target_os = "linux")]

use std::process::{Command, Output};

fn netlab(args: &[&str], path: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mttl-netlab"));
    command.args(args);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().expect("cannot run mttl-netlab")
}

/// Asserts `out` failed with exit code `code` and a message holding `says`.
fn fails_saying(out: &Output, code: i32, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(says), "expected `{says}` in: {stderr}");
}

#[test]
fn a_bad_host_count_or_profile_is_named() {
    fails_saying(
        &netlab(&["up", "--hosts", "1", "--profile", "gige"], None),
        2,
        "--hosts 1: the lab has 2 to 200 hosts",
    );
    fails_saying(
        &netlab(&["up", "--hosts", "2", "--profile", "token-ring"], None),
        2,
        "unknown profile `token-ring`",
    );
    fails_saying(
        &netlab(&["up", "--hosts", "2", "--profile", "100,5us"], None),
        2,
        "kbit, mbit or gbit",
    );
}

#[test]
fn missing_root_or_tools_are_named() {
    // SAFETY: geteuid only reads this process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let out = netlab(
        &["up", "--hosts", "2", "--profile", "gige"],
        Some("/nonexistent"),
    );
    if root {
        fails_saying(&out, 2, "`ip` is not installed");
    } else {
        fails_saying(&out, 2, "needs root");
    }
}

#[test]
fn bad_check_and_rsh_arguments_are_named() {
    fails_saying(
        &netlab(&["check", "--seconds", "0"], None),
        2,
        "give more than 0 and at most 600",
    );
    // As ssh does for its own failures (255), so mttlrun tells them apart.
    fails_saying(
        &netlab(&["rsh", "-o", "BatchMode=yes"], None),
        255,
        "no host given",
    );
    fails_saying(&netlab(&["rsh", "mttl-h0"], None), 255, "no command given");
}
