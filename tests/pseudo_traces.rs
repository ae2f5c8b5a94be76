//! Pseudo traces against real ones (measure (b) of the prediction issue):
//! the stencil example and NPB CG class S are traced at 2, 4 and 8 ranks
//! (with `MTTL_AGGREGATE=0` and `MTTL_TRACE_FLUSH=local`, as
//! `docs/prediction.md` asks); the real traces of 2 and 4 ranks are scaled
//! to 4 and 8 with the kernel's skeleton, and every pseudo rank must hold
//! the real rank's messages, stream by stream (direction, peer, tag: the
//! order the runtime fixes), with the same sizes and blocking; both
//! simulate to the end. A trace scaled with the wrong skeleton or class is
//! refused with its first difference. The simulated times are compared by
//! the benchmark `mttl-trace/examples/pseudo_vs_real.rs` (they follow the
//! recorded computation times, so they are figures, not assertions).
//!
//! NPB IS class S is checked the same way: its all-to-all sizes depend on
//! the keys, and the IS skeleton generates them exactly (see
//! `mttl-trace/src/scale/is.rs`), so its pseudo traces too hold the real
//! runs' messages, sizes included.
//!
//! The stencil is the example binary cargo builds beside this test; CG and
//! IS are `benches-npb`'s `npb` binary, which `cargo test --workspace` builds (run
//! `cargo build -p benches-npb` first when running this test alone).

// This file runs binaries, not scenarios of its own.
#[allow(unused_macros, unused_imports)]
mod runtime_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mttl::comm::env as launch_env;
use mttl_trace::scale::{first_stream_difference, scale, Kernel, ScaleOptions};
use mttl_trace::{TiOp, TiTrace};

const DEADLINE: Duration = Duration::from_secs(300);

/// A binary built beside this test: `target/<profile>/<sub>/<name>`.
fn built(sub: &str, name: &str, how: &str) -> PathBuf {
    runtime_support::built_binary(sub, name, how)
}

/// A fresh directory for one trace.
fn dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mttl-pseudo-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs `cmd` traced into `trace`, as the method needs, and reads it.
fn record(mut cmd: Command, trace: &Path, what: &str) -> TiTrace {
    for var in [
        launch_env::RANK,
        launch_env::SIZE,
        launch_env::ROOT,
        launch_env::SECRET,
        launch_env::TAG_OUTPUT,
        launch_env::BACKEND,
    ] {
        cmd.env_remove(var);
    }
    cmd.env("MTTL_TRACE", trace)
        .env("MTTL_AGGREGATE", "0")
        .env("MTTL_TRACE_FLUSH", "local")
        .env("RUST_BACKTRACE", "0");
    runtime_support::run_captured(what, cmd, DEADLINE).assert_success();
    let t = mttl_trace::read_dir(trace).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(trace);
    TiTrace::from_trace(&t)
}

/// The pseudo traces of `to` ranks made from `real`.
fn pseudo(real: &TiTrace, opts: &ScaleOptions) -> Result<TiTrace, String> {
    let mut out = TiTrace::default();
    scale(real, opts, |_, ops| {
        out.ranks.push(ops.to_vec());
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Both simulate to the end.
fn simulates(t: &TiTrace, what: &str) {
    let d = dir(what);
    t.write_dir(&d).unwrap();
    let sched = mttl_sim::input::load(&d).unwrap_or_else(|e| panic!("{e}"));
    let report = mttl_sim::simulate(&sched, &mttl_sim::Params::default());
    assert!(report.deadlock.is_none(), "{what}: {:?}", report.deadlock);
    let _ = std::fs::remove_dir_all(&d);
}

/// Real traces of 2, 4 and 8 ranks; pseudo 4 from 2 and 8 from 4 equal
/// the real ones stream by stream.
fn pseudo_equals_real(kernel: Kernel, class: Option<char>, run: impl Fn(usize, &Path) -> TiTrace) {
    let real: Vec<(usize, TiTrace)> = [2, 4, 8]
        .into_iter()
        .map(|n| (n, run(n, &dir(&format!("{kernel:?}-{n}")))))
        .collect();
    for (from, to) in [(0, 1), (1, 2)] {
        let (n, ref small) = real[from];
        let (n2, ref large) = real[to];
        let opts = ScaleOptions {
            kernel,
            class,
            to: n2,
        };
        let p = pseudo(small, &opts).unwrap_or_else(|e| panic!("{kernel:?} {n} -> {n2}: {e}"));
        assert_eq!(p.ranks.len(), n2);
        for (r, (a, b)) in p.ranks.iter().zip(&large.ranks).enumerate() {
            if let Some(d) = first_stream_difference(a, b) {
                panic!("{kernel:?} {n} -> {n2}, rank {r}: {d} (pseudo against real)");
            }
            let count = |ops: &[TiOp]| ops.iter().filter(|o| o.is_comm()).count();
            assert_eq!(count(a), count(b));
        }
        simulates(&p, &format!("{kernel:?}-pseudo-{n2}"));
        simulates(large, &format!("{kernel:?}-real-{n2}"));
    }
}

#[test]
fn stencil_pseudo_traces_hold_the_real_runs_messages() {
    let bin = built(
        "examples",
        "stencil",
        "run `cargo test` (which builds the examples) or `cargo build --examples` first",
    );
    pseudo_equals_real(Kernel::Stencil, None, |n, trace| {
        let mut cmd = Command::new(&bin);
        cmd.env(launch_env::NP, n.to_string());
        record(cmd, trace, &format!("stencil ({n} ranks)"))
    });
}

#[test]
fn cg_pseudo_traces_hold_the_real_runs_messages_and_a_wrong_skeleton_is_refused() {
    let bin = built(
        "",
        "npb",
        "build benches-npb (`cargo build -p benches-npb`, same profile) first",
    );
    let run = |n: usize, trace: &Path| {
        let mut cmd = Command::new(&bin);
        cmd.args(["cg", "--class", "S", "-n", &n.to_string()]);
        record(cmd, trace, &format!("npb cg S ({n} ranks)"))
    };
    pseudo_equals_real(Kernel::Cg, Some('S'), run);

    let real = run(2, &dir("cg-2-again"));
    let wrong = |kernel, class| {
        pseudo(
            &real,
            &ScaleOptions {
                kernel,
                class,
                to: 4,
            },
        )
        .unwrap_err()
    };
    let e = wrong(Kernel::Cg, Some('W'));
    assert!(
        e.contains("does not match the cg skeleton") && e.contains("rank 0 of 2"),
        "{e}"
    );
    let e = wrong(Kernel::Stencil, None);
    assert!(e.contains("does not match the stencil skeleton"), "{e}");
    let e = wrong(Kernel::Cg, None);
    assert!(e.contains("needs --class"), "{e}");
}

#[test]
fn is_pseudo_traces_hold_the_real_runs_messages_with_their_data_dependent_sizes() {
    let bin = built(
        "",
        "npb",
        "build benches-npb (`cargo build -p benches-npb`, same profile) first",
    );
    let run = |n: usize, trace: &Path| {
        let mut cmd = Command::new(&bin);
        cmd.args(["is", "--class", "S", "-n", &n.to_string()]);
        record(cmd, trace, &format!("npb is S ({n} ranks)"))
    };
    pseudo_equals_real(Kernel::Is, Some('S'), run);

    // Class W's keys give other sizes: refused at the trace's own size.
    let real = run(2, &dir("is-2-again"));
    let e = pseudo(
        &real,
        &ScaleOptions {
            kernel: Kernel::Is,
            class: Some('W'),
            to: 4,
        },
    )
    .unwrap_err();
    assert!(
        e.contains("does not match the is skeleton") && e.contains("rank 0 of 2"),
        "{e}"
    );
}
