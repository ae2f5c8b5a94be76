//! `npb-sweep --net`'s bad input: each refused with a message naming what
//! is wrong, before any lab is brought up (these tests never make one).
#![cfg(target_os = "linux")]

use std::process::{Command, Output};

fn sweep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_npb-sweep"))
        .args(args)
        .output()
        .expect("npb-sweep runs")
}

fn refused(out: &Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
}

#[test]
fn an_unknown_profile_is_named() {
    let out = sweep(&["--net", "100base-t,token-ring", "--hosts", "2"]);
    refused(&out, "--net token-ring: unknown profile `token-ring`");
}

#[test]
fn hosts_and_net_go_together_and_hosts_are_counted_from_one() {
    refused(&sweep(&["--hosts", "2"]), "--net");
    refused(&sweep(&["--net", "gige"]), "--hosts");
    refused(
        &sweep(&["--net", "gige", "--hosts", "2", "--ranks", "2"]),
        "--ranks",
    );
    refused(
        &sweep(&["--net", "gige", "--hosts", "0,2"]),
        "give host counts from 1 to",
    );
}

#[test]
fn without_root_the_sweep_says_it_needs_root() {
    let args = ["--net", "100base-t", "--hosts", "2", "--out", "/tmp"];
    // SAFETY: geteuid only reads this process's credentials.
    let out = if unsafe { libc::geteuid() } == 0 {
        // As root, as nobody: util-linux's setpriv drops the credentials.
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_npb-sweep"))
            .args(args)
            .output()
            .expect("setpriv (util-linux) runs");
        assert_ne!(out.status.code(), Some(127), "setpriv cannot run npb-sweep");
        out
    } else {
        sweep(&args)
    };
    refused(&out, "--net needs root");
}
