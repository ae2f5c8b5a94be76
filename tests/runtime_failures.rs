//! How a job fails, on every backend: a remote panic comes back to
//! `try_invoke` as an error and the job goes on; through `invoke` it ends
//! the job; a panic in node 0's main or in a thread a remote function
//! spawned ends the job with a line naming the rank, the thread and the
//! message; a call to a node that does not exist is a clear error; and
//! ranks running different programs are refused at start-up.
//!
//! Each test is a job of its own; see `runtime_support` for how it runs.

mod runtime_support;

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mttl::comm::env as launch_env;
use mttl::{RemoteError, SyncCell};
use runtime_support::{on_every_backend, Backend, JobOutput, Mpirun, Scenario};

on_every_backend!(
    try_invoke_of_a_panicking_function_is_an_error,
    invoke_of_a_panicking_function_ends_the_job,
    panic_in_main_ends_the_job,
    panic_in_a_thread_spawned_by_a_remote_function_ends_the_job,
    call_to_a_nonexistent_node_is_a_clear_error,
    invoke_of_a_nonexistent_node_ends_the_job,
    an_argument_above_the_message_limit_is_named_on_every_rank;
    not_local:
    ranks_of_different_programs_are_refused_at_start_up =>
        "its ranks are two different programs; a local job's ranks run one",
    ranks_with_different_broadcasts_are_refused_at_start_up =>
        "a local job's ranks share one environment",
);

#[mttl::remote]
fn explode(why: String) -> u32 {
    panic!("boom: {why}")
}
/// The line of the `panic!` in [`explode`].
const EXPLODE_LINE: u32 = line!() - 3;

/// Where [`explode`] panics, as a panic message names it.
fn explode_site() -> String {
    format!("{}:{EXPLODE_LINE}:", file!())
}

#[mttl::remote]
fn still_here() -> usize {
    mttl::rank()
}

/// Starts a thread on this node that panics, and returns at once.
#[mttl::remote]
fn spawn_doomed_thread() {
    mttl::thread::spawn("doomed", || {
        mttl::yield_now();
        panic!("the doomed thread gives up");
    });
}

/// Blocks the calling thread for good (until the job is stopped).
fn wait_forever() {
    let never: SyncCell<u8> = SyncCell::new();
    never.read();
}

fn try_invoke_of_a_panicking_function_is_an_error(t: Scenario) {
    t.run(3, || {
        for node in [2, 0, 1] {
            let err: RemoteError = mttl::try_invoke(node, explode, (format!("on {node}"),))
                .expect_err("explode panics");
            assert_eq!(err.rank, node, "{err}");
            for part in [
                "runtime_failures::explode".to_owned(),
                format!("boom: on {node}"),
                explode_site(),
            ] {
                assert!(err.message.contains(&part), "{part:?} not in {err}");
            }
            assert!(err.to_string().starts_with(&format!("on rank {node}: ")));
            // The same through ainvoke.
            let err = mttl::ainvoke(node, explode, ("again".to_owned(),))
                .try_wait()
                .expect_err("explode panics");
            assert!(err.message.contains("boom: again"), "{err}");
            // The node that panicked goes on serving.
            assert_eq!(mttl::invoke(node, still_here, ()), node);
        }
        println!("every remote panic came back as an error");
    })
    .assert_success();
}

fn invoke_of_a_panicking_function_ends_the_job(t: Scenario) {
    let out = t.run(3, || {
        mttl::invoke(1, explode, ("invoked".to_owned(),));
        println!("invoke returned after a remote panic");
    });
    out.assert_failure();
    assert!(!out.stdout.contains("invoke returned"), "{}", out.stdout);
    // Rank 0's main died of the remote panic, and says where it started.
    out.stderr_line(&[
        "mttl: rank 0, thread 'main' panicked",
        "on rank 1",
        "boom: invoked",
        &explode_site(),
    ]);
    told_first_names_the_cause(&out, "boom: invoked");
}

fn panic_in_main_ends_the_job(t: Scenario) {
    let out = t.run(3, || {
        assert_eq!(mttl::invoke(2, still_here, ()), 2);
        if mttl::rank() == 0 {
            panic!("main gives up");
        }
    });
    out.assert_failure();
    out.stderr_line(&[
        "mttl: rank 0, thread 'main' panicked at",
        file!(),
        "main gives up",
    ]);
    told_first_names_the_cause(&out, "main gives up");
}

/// A failing rank sends its abort to the others in rank order, then exits.
/// The first one told (rank 1 here) reads the abort before it can see anyone
/// leave, so it names the cause. A later one may notice that an earlier one
/// has left before the abort reaches it (nothing orders messages of
/// different senders) and then names that loss instead; either way it
/// stops.
#[track_caller]
fn told_first_names_the_cause(out: &JobOutput, cause: &str) {
    out.stderr_line(&["mttl: rank 1: stopping because rank 0", cause]);
}

fn panic_in_a_thread_spawned_by_a_remote_function_ends_the_job(t: Scenario) {
    let out = t.run(3, || {
        mttl::invoke(2, spawn_doomed_thread, ());
        // Nothing will wake main: the job must end because of rank 2.
        wait_forever();
    });
    out.assert_failure();
    out.stderr_line(&[
        "mttl: rank 2, thread 'doomed' panicked at",
        file!(),
        "the doomed thread gives up",
    ]);
    out.stderr_line(&["mttl: rank 0: stopping because rank 2", "doomed"]);
}

fn call_to_a_nonexistent_node_is_a_clear_error(t: Scenario) {
    t.run(2, || {
        let err = mttl::try_invoke(5, still_here, ()).expect_err("there is no node 5");
        assert_eq!(err.rank, 5);
        assert!(
            err.message.contains("rank 5 does not exist") && err.message.contains("2 ranks"),
            "{err}"
        );
        let err = mttl::ainvoke(usize::MAX, still_here, ())
            .try_wait()
            .expect_err("there is no such node");
        assert!(err.message.contains("does not exist"), "{err}");
        // Nothing was sent: the job goes on.
        assert_eq!(mttl::invoke(1, still_here, ()), 1);
    })
    .assert_success();
}

fn invoke_of_a_nonexistent_node_ends_the_job(t: Scenario) {
    let out = t.run(2, || {
        mttl::invoke(7, still_here, ());
    });
    out.assert_failure();
    out.stderr_line(&[
        "mttl: rank 0, thread 'main' panicked",
        "rank 7 does not exist (the job has 2 ranks)",
    ]);
}

/// The example whose remote functions differ from this file's.
const OTHER_PROGRAM: &str = "hello";

/// Builds (if needed) and finds the example [`OTHER_PROGRAM`], next to this
/// test binary (`target/PROFILE/deps/..` → `target/PROFILE/examples/`),
/// with this build's features so that it can join an MPI job too.
fn other_program() -> PathBuf {
    let deps = runtime_support::this_test_binary()
        .parent()
        .expect("the test binary is in a directory")
        .to_owned();
    let profile_dir = deps.parent().expect("deps is in the profile directory");
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .args(["build", "--quiet", "--example", OTHER_PROGRAM])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .arg("--target-dir")
        .arg(
            profile_dir
                .parent()
                .expect("the profile is in the target directory"),
        );
    if profile_dir.ends_with("release") {
        cargo.arg("--release");
    }
    if cfg!(feature = "mpi") {
        cargo.args(["--features", "mpi"]);
    }
    let status = cargo.status().expect("cargo runs");
    assert!(
        status.success(),
        "cargo build --example {OTHER_PROGRAM}: {status}"
    );
    let path = profile_dir.join("examples").join(OTHER_PROGRAM);
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// A free TCP port on the loopback interface.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("a bound address").port()
}

fn new_secret_hex() -> String {
    let secret = launch_env::new_secret().expect("random bytes");
    secret.iter().map(|b| format!("{b:02x}")).collect()
}

/// Rank 0 runs this test binary and rank 1 the example [`OTHER_PROGRAM`]:
/// both must stop with status 2 at start-up, naming the functions only one
/// of them has.
fn ranks_of_different_programs_are_refused_at_start_up(t: Scenario) {
    if t.in_job() {
        std::process::exit(mttl::start(|| {
            println!("rank 0's main ran although the ranks' programs differ");
        }));
    }
    let other = other_program();
    let all = refused_at_start_up(
        &t,
        Command::new(&other),
        &["rank 1 runs a different program than rank 0"],
    );
    let only_here = "only on rank 0: ";
    let only_there = format!("only on rank 1: {OTHER_PROGRAM}::{OTHER_PROGRAM} fn(");
    all.stderr_line(&[only_here, "runtime_failures::explode fn("]);
    all.stderr_line(&[&only_there]);
}

/// Rank 1 broadcasts by another algorithm than rank 0: it would wait for
/// messages rank 0 never sends, so both stop at start-up, naming the
/// settings.
fn ranks_with_different_broadcasts_are_refused_at_start_up(t: Scenario) {
    if t.in_job() {
        std::process::exit(mttl::start(|| {
            println!("rank 0's main ran although the ranks' broadcasts differ");
        }));
    }
    let mut rank1 = t.rank_command();
    rank1.env("MTTL_BCAST", "arrival");
    refused_at_start_up(
        &t,
        rank1,
        &[
            "rank 1 runs with MTTL_BCAST=arrival",
            "rank 0 with MTTL_BCAST=binomial",
            "every rank must have the same MTTL_BCAST",
        ],
    );
}

/// Runs this test binary as rank 0 and `rank1` as rank 1 and checks that
/// both stopped at start-up with code 2, before main, each saying why with
/// a line holding all of `why`; returns their output as one job's.
fn refused_at_start_up(t: &Scenario, rank1: Command, why: &[&str]) -> JobOutput {
    let outputs = run_pair(t, rank1);
    for out in &outputs {
        out.assert_ranks_code(t.backend, 2);
        assert!(!out.stdout.contains("main ran"), "{}", out.stdout);
    }
    let all = joined(&outputs);
    for rank in [
        "mttl: rank 0: refusing to start",
        "mttl: rank 1: refused at start-up",
    ] {
        all.stderr_line(&[&[rank], why].concat());
    }
    all
}

/// Runs this test binary as rank 0 and `rank1` as rank 1 of one job.
fn run_pair(t: &Scenario, rank1: Command) -> Vec<JobOutput> {
    match t.backend {
        Backend::Tcp => run_tcp_pair(t, rank1),
        Backend::Mpi => vec![run_mpi_pair(t, rank1)],
        Backend::Local => unreachable!("not run on local (see on_every_backend! above)"),
    }
}

/// The stderr of a pair's outputs as one job's.
fn joined(outputs: &[JobOutput]) -> JobOutput {
    JobOutput {
        what: "the two ranks".to_owned(),
        status: outputs[0].status,
        stdout: String::new(),
        stderr: outputs.iter().map(|o| o.stderr.as_str()).collect(),
        ended: outputs[0].ended,
        elapsed: outputs[0].elapsed,
    }
}

/// Starts the two ranks of a TCP job by hand, with the launch environment
/// of `mttl_comm::env`, and waits for both.
fn run_tcp_pair(t: &Scenario, rank1: Command) -> Vec<JobOutput> {
    let _turn = runtime_support::job_turn();
    let root = format!("127.0.0.1:{}", free_port());
    let secret = new_secret_hex();
    let with_launch_env = |mut cmd: Command, rank: usize| {
        cmd.env(launch_env::BACKEND, "tcp")
            .env(launch_env::RANK, rank.to_string())
            .env(launch_env::SIZE, "2")
            .env(launch_env::ROOT, &root)
            .env(launch_env::SECRET, &secret)
            .env_remove(launch_env::NP);
        cmd
    };
    let ranks = [
        ("rank 0 (this test)", with_launch_env(t.rank_command(), 0)),
        ("rank 1", with_launch_env(rank1, 1)),
    ];
    let started: Vec<_> = ranks
        .into_iter()
        .map(|(what, cmd)| (what, runtime_support::spawn_captured(what, cmd)))
        .collect();
    started
        .into_iter()
        .map(|(what, child)| runtime_support::finish_captured(what, child, Duration::from_secs(30)))
        .collect()
}

/// Runs the two commands as one MPI job (`mpirun ... -np 1 A : -np 1 env
/// VARS B`: rank 1's own environment goes through `env`).
fn run_mpi_pair(t: &Scenario, rank1: Command) -> JobOutput {
    let mut cmd = Command::new(runtime_support::mpirun());
    if runtime_support::mpirun_kind() == Mpirun::OpenMpi {
        cmd.args(["--oversubscribe", "-x", "MTTL_BACKEND=mpi"]);
        cmd.args([
            "-x",
            &format!("{}={}", runtime_support::SCENARIO_VAR, t.name),
        ]);
        // Open MPI refuses to run as root unless told.
        let as_root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
        if as_root {
            cmd.arg("--allow-run-as-root");
        }
    } else {
        cmd.args(["-genv", "MTTL_BACKEND", "mpi"]);
        cmd.args(["-genv", runtime_support::SCENARIO_VAR, t.name]);
    }
    let this = t.rank_command();
    cmd.args(["-np", "1"])
        .arg(this.get_program())
        .args(this.get_args())
        .args([":", "-np", "1", "env"])
        .args(rank1.get_envs().filter_map(|(k, v)| {
            let v = v?;
            Some(format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        }))
        .arg(rank1.get_program())
        .args(rank1.get_args())
        .env_remove(launch_env::NP)
        .env_remove(launch_env::RANK);
    runtime_support::run_captured("mpirun with two programs", cmd, Duration::from_secs(60))
}

#[mttl::remote]
fn byte_count(data: Vec<u8>) -> usize {
    data.len()
}

fn an_argument_above_the_message_limit_is_named_on_every_rank(t: Scenario) {
    let out = t.env("MTTL_MAX_MESSAGE", "1000000").run(2, || {
        // Below the limit, above the eager limit: fine.
        assert_eq!(mttl::invoke(1, byte_count, (vec![1u8; 900_000],)), 900_000);
        mttl::invoke(1, byte_count, (vec![1u8; 2_000_000],));
        println!("the call above the limit returned");
    });
    out.assert_failure();
    assert!(
        !out.stdout.contains("above the limit returned"),
        "{}",
        out.stdout
    );
    let too_large = "exceeds the maximum of 1000000 bytes (MTTL_MAX_MESSAGE)";
    out.stderr_line(&["mttl: rank 0:", "send to rank 1", too_large]);
    // Rank 1 got no header it would wait on forever, and names the cause.
    out.stderr_line(&["mttl: rank 1: stopping because rank 0", too_large]);
}
