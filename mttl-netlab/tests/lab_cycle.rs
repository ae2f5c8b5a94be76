//! The lab's whole life on this machine: `up`, `check`, `down`, and `down`
//! after the wire was killed. Needs root and iproute2, which a plain `cargo
//! test` cannot assume, so each test is ignored, with the reason in its
//! attribute; CI (root) runs them with `--ignored`. The lab's names are fixed (`mttl-h*`, `mttl-wire`), so
//! the tests take turns, and refuse to start over a lab someone else has up.
#![cfg(target_os = "linux")]

mod support;

use support::{
    bandwidth_met, check_until_bandwidth_met, lab_namespaces, netlab, take_lab, text, TWO_HOSTS,
};

fn up_two_hosts() -> std::process::Output {
    let out = netlab(&TWO_HOSTS);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(lab_namespaces().len(), 3, "{}", text(&out));
    out
}

fn down_leaves_nothing() {
    let out = netlab(&["down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(lab_namespaces().is_empty(), "left: {:?}", lab_namespaces());
    assert!(!std::path::Path::new("/run/mttl-netlab").exists());
    assert!(!std::path::Path::new("/etc/netns/mttl-h0").exists());
}

#[test]
#[ignore = "needs root and network namespaces: cargo test -p mttl-netlab --test lab_cycle -- --ignored"]
fn up_check_down() {
    let _lab = take_lab();
    let up = up_two_hosts();
    let again = netlab(&TWO_HOSTS);
    let other = netlab(&["up", "--hosts", "3", "--profile", "gige"]);
    // The lab must reach its profile's rate in one of a few checks.
    let checks = check_until_bandwidth_met();
    let status = netlab(&["status"]);
    down_leaves_nothing();
    assert!(text(&again).contains("reusing"), "{}", text(&again));
    assert!(text(&other).contains("already up"), "{}", text(&other));
    assert!(
        text(&status).contains("wire: user-space, pid"),
        "{}",
        text(&status)
    );
    let last = checks.last().expect("one check at least");
    assert!(bandwidth_met(last), "{}", checks.join("\n---\n"));
    assert!(
        last.contains("round trip:") && last.contains("wire CPU:"),
        "{last}"
    );
    assert!(text(&up).contains("calibrated:"), "{}", text(&up));
}

#[test]
#[ignore = "needs root and network namespaces: cargo test -p mttl-netlab --test lab_cycle -- --ignored"]
fn down_cleans_up_after_a_killed_wire() {
    let _lab = take_lab();
    up_two_hosts();
    let pid: i32 = std::fs::read_to_string("/run/mttl-netlab/wire.pid")
        .expect("the wire's pid file")
        .trim()
        .parse()
        .expect("a pid");
    // SAFETY: killing the wire process this test's `up` started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let status = netlab(&["status"]);
    let refused = netlab(&TWO_HOSTS);
    down_leaves_nothing();
    assert!(text(&status).contains("NOT RUNNING"), "{}", text(&status));
    assert!(
        !refused.status.success() && text(&refused).contains("gone"),
        "{}",
        text(&refused)
    );
}

#[test]
#[ignore = "needs root and network namespaces: cargo test -p mttl-netlab --test lab_cycle -- --ignored"]
fn two_downs_at_once_both_succeed() {
    // What one Ctrl-C to a terminal does to `npb-sweep --net`: its own
    // clean-up and the lab's signal handling both run `down`.
    let _lab = take_lab();
    up_two_hosts();
    let downs: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(|| netlab(&["down"])))
        .collect();
    for d in downs {
        let out = d.join().expect("down ran");
        assert!(out.status.success(), "{}", text(&out));
    }
    down_leaves_nothing();
}
