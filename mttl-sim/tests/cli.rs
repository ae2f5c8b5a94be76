//! The command line: outputs, exit statuses and error messages.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Writes `text` to a file of its own and runs `mttl-sim` on it with `args`.
fn run(name: &str, text: &str, args: &[&str]) -> Output {
    let dir = std::env::temp_dir().join(format!("mttl-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join(name);
    std::fs::write(&file, text).unwrap();
    Command::new(env!("CARGO_BIN_EXE_mttl-sim"))
        .args(args)
        .arg(&file)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const PAIR: &str = "num_ranks 2\nrank 0 {\ns: send 8b to 1\nc: calc 40\nc requires s\n}\n\
                    rank 1 {\nr: recv 8b from 0\nc: calc 50\nc requires r\n}\n";
const P: &[&str] = &[
    "-L", "100", "-o", "10", "-g", "20", "-G", "2", "-O", "1", "-S", "64",
];

#[test]
fn prints_every_rank_and_the_maximum() {
    let o = run("pair.goal", PAIR, P);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "rank 0: 57 ns (compute 40 ns, comm 17 ns, wait 0 ns)\n\
         rank 1: 184 ns (compute 50 ns, comm 24 ns, wait 110 ns)\n\
         max: 184 ns (rank 1)\n"
    );
    assert!(stderr(&o).contains("params: L=100 o=10 g=20 G=2 O=1 S=64"));
}

#[test]
fn json_has_the_same_figures() {
    let mut args = P.to_vec();
    args.push("--json");
    let o = run("pair-json.goal", PAIR, &args);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["max_ns"], 184);
    assert_eq!(v["ranks"][1]["wait_ns"], 110);
    assert_eq!(v["ranks"][0]["comm_ns"], 17);
    assert_eq!(v["params"]["big_g_ps"], 2000);
    assert!(v["deadlock"].is_null() && v["torus"].is_null());
}

#[test]
fn a_deadlock_lists_blocked_operations_and_exits_2() {
    let text =
        "num_ranks 2\nrank 0 {\nr: recv 8b from 1 tag 3\n}\nrank 1 {\nsend 8b to 0 tag 4\n}\n";
    let o = run("dead.goal", text, &["--json"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("deadlock: 1 rank(s)"), "{err}");
    assert!(
        err.contains("recv 8b from 1 tag 3 (rank 0, line 3): posted, no message matches it"),
        "{err}"
    );
    assert!(
        err.contains(
            "message of send 8b to 0 tag 4 (rank 1, line 6): arrived, no receive takes it"
        ),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["deadlock"][0]["rank"], 0);
}

#[test]
fn bad_input_and_options_exit_1_with_a_reason() {
    let o = run("bad.goal", "num_ranks 2\nrank 0 {\nsend 8b to 5\n}\n", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("bad.goal:3: send to rank 5"),
        "{}",
        stderr(&o)
    );
    let o = run("ok.goal", PAIR, &["--profile", "token-ring"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no profile `token-ring` (there are: shm"));
    let o = run("ok2.goal", PAIR, &["--torus", "1x1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("a torus of 1x1 has 1 nodes, but the schedule has 2 ranks"));
    let o = run("ok3.goal", PAIR, &["--torus", "2x"]);
    assert_eq!(o.status.code(), Some(1));
    let o = run("ok4.goal", PAIR, &["-G=-1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("-G -1: expected a non-negative number"),
        "{}",
        stderr(&o)
    );
    let o = run("ok6.goal", PAIR, &["--no-such-option"]);
    assert_eq!(o.status.code(), Some(1));
    let o = run(
        "ok5.goal",
        PAIR,
        &["--params-from", "/nonexistent/comm.json"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read /nonexistent/comm.json"));
}

#[test]
fn a_profile_sets_the_parameters_and_flags_override_them() {
    let o = run(
        "prof.goal",
        PAIR,
        &["--profile", "gige", "-S", "7", "--json"],
    );
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["params"]["l"], 20_000);
    assert_eq!(v["params"]["big_g_ps"], 8_000);
    assert_eq!(v["params"]["s"], 7);
    assert_eq!(v["profile"], "gige");
    // The torus profile lays 2 ranks on a 2x1x1 torus.
    let o = run("prof2.goal", PAIR, &["--profile", "k-torus", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["torus"]["dims"], serde_json::json!([2, 1, 1]));
}
