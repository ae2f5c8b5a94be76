//! `mttl-bench trace --heavy-size SIZE`: the size targets, which
//! the machine's load does not move (memory, sizes, violations).
//!
//! 1. Calibration: the trace-heavy program ([`Program::Heavy`], with
//!    `MTTL_TRACE_LEVEL=threads`) runs [`CALIBRATION_ITERS`] iterations
//!    traced; its trace's bytes per iteration give the iterations that
//!    write SIZE (all ranks together).
//! 2. The program runs untraced for a tenth of that (its state does not
//!    grow with the iterations; a smaller baseline only makes the target
//!    stricter): its peak resident set is the program's own.
//! 3. It runs traced under `equalized` with the flushing buffer
//!    (`--buffer`, default 64 MiB): peak resident set, trace size.
//! 4. `mttl-trace info`, `stats`, `check --json`, `reconstruct --json`
//!    (and `timeline`, output discarded, with `--size-timeline`) read the
//!    trace, each with its peak resident set and wall-clock time.
//! 5. The targets: peak ≤ program + buffer + 16 MiB (per rank: the peak is
//!    the largest process's), trace ≥ 10× the buffer, no clock-condition
//!    violation or unpaired message after correction. The trace is
//!    deleted afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use super::run::{run_measured, status_ok, Job, Measured, Tools, Tracing, Workload};
use super::worker::Program;
use crate::bench::BenchError;

/// Iterations of the calibration run.
pub(crate) const CALIBRATION_ITERS: u64 = 100;

/// The slack the issue allows beside the program and its buffer, bytes.
const SLACK: u64 = 16 << 20;

/// What `--heavy-size` measures.
#[derive(Debug, Clone)]
pub(crate) struct SizePlan {
    /// The trace size to reach, bytes.
    pub(crate) target: u64,
    /// Ranks.
    pub(crate) np: usize,
    /// `tcp` or `mpi`.
    pub(crate) backend: &'static str,
    /// Invokes and nwrites per iteration.
    pub(crate) per: u64,
    /// `MTTL_TRACE_BUFFER`, and its bytes.
    pub(crate) buffer: (String, u64),
    /// Also run `mttl-trace timeline` (its output discarded).
    pub(crate) timeline: bool,
}

/// The iterations of the untraced run: a tenth of the traced one's, at
/// least the calibration's.
fn untraced_iters(iters: u64) -> u64 {
    (iters / 10).max(CALIBRATION_ITERS).min(iters)
}

/// One `mttl-trace` command on the trace.
#[derive(Debug, Clone)]
struct ToolRun {
    command: &'static str,
    peak_rss: u64,
    seconds: f64,
    /// Its JSON output (`check`, `reconstruct`).
    doc: Option<Value>,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// Runs `mttl-trace ARGS DIR` measured; its stdout kept only for `--json`.
fn tool(tools: &Tools, args: &[&'static str], dir: &Path) -> Result<ToolRun, BenchError> {
    let json = args.contains(&"--json");
    let mut cmd = Command::new(&tools.mttl_trace);
    cmd.args(args)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(if json { Stdio::piped() } else { Stdio::null() })
        .stderr(Stdio::piped());
    let t0 = Instant::now();
    let (status, peak_rss, stdout, stderr) = run_measured(&mut cmd).map_err(|e| {
        BenchError::Usage(format!("cannot run {}: {e}", tools.mttl_trace.display()))
    })?;
    let seconds = t0.elapsed().as_secs_f64();
    // `check` exits 1 when violations remain: its JSON says how many.
    let check_said = args[0] == "check" && !stdout.is_empty();
    if !status_ok(status) && !check_said {
        return Err(BenchError::Usage(format!(
            "mttl-trace {} {} failed (wait status {status}): {stderr}",
            args.join(" "),
            dir.display()
        )));
    }
    let doc = if json {
        Some(serde_json::from_str(stdout.trim()).map_err(|e| {
            BenchError::Usage(format!(
                "mttl-trace {} gave no JSON ({e}): {stderr}",
                args.join(" ")
            ))
        })?)
    } else {
        None
    };
    Ok(ToolRun {
        command: args[0],
        peak_rss,
        seconds,
        doc,
    })
}

/// Runs the size measurement into `dir` (emptied, and removed at the
/// end); the report as text, or JSON.
pub(crate) fn run(
    tools: &Tools,
    plan: &SizePlan,
    dir: &Path,
    json_out: bool,
    load: &str,
) -> Result<String, BenchError> {
    let job = |iters| Job {
        what: Workload::Small {
            program: Program::Heavy,
            iters,
            size: plan.per,
        },
        np: plan.np,
        backend: plan.backend,
    };
    let tracing = Tracing {
        flush: "equalized".into(),
        buffer: plan.buffer.0.clone(),
        threshold: None,
        resync: "each",
        level: Some("threads"),
    };
    let trace_dir = dir.join("trace");
    let result = (|| {
        let calibration =
            job(CALIBRATION_ITERS).measure(tools, Some((&trace_dir, &tracing)), false)?;
        let per_iter = (calibration.trace_bytes / CALIBRATION_ITERS).max(1);
        // 10 % more: the calibration's fixed costs (headers, the first
        // iterations) make its bytes per iteration a little high.
        let iters = plan.target.div_ceil(per_iter) * 11 / 10 + 1;
        eprintln!(
            "mttl-bench trace --heavy-size: {} bytes of trace per iteration ({} ranks, {} calls); \
             {iters} iterations for {:.0} MiB, about {:.0} s traced (the calibration's pace)",
            per_iter,
            plan.np,
            plan.per,
            mib(plan.target),
            calibration.seconds * iters as f64 / CALIBRATION_ITERS as f64
        );
        // The program's own memory does not grow with its iterations (no
        // state is kept between them): a tenth of the run measures it, and
        // a smaller baseline only makes the target stricter.
        let untraced = job(untraced_iters(iters)).measure(tools, None, false)?;
        let traced = job(iters).measure(tools, Some((&trace_dir, &tracing)), false)?;
        let mut runs = Vec::new();
        let mut commands: Vec<&[&'static str]> = vec![
            &["info"],
            &["stats"],
            &["check", "--json"],
            &["reconstruct", "--json"],
        ];
        if plan.timeline {
            commands.push(&["timeline"]);
        }
        for args in commands {
            runs.push(tool(tools, args, &trace_dir)?);
        }
        Ok::<_, BenchError>((iters, untraced, traced, runs))
    })();
    let _ = std::fs::remove_dir_all(&trace_dir);
    let (iters, untraced, traced, runs) = result?;
    Ok(report(
        plan, iters, &untraced, &traced, &runs, json_out, load,
    ))
}

fn report(
    plan: &SizePlan,
    iters: u64,
    untraced: &Measured,
    traced: &Measured,
    runs: &[ToolRun],
    json_out: bool,
    load: &str,
) -> String {
    let limit = untraced.peak_rss + plan.buffer.1 + SLACK;
    let check = runs
        .iter()
        .find(|r| r.command == "check")
        .and_then(|r| r.doc.clone())
        .unwrap_or(Value::Null);
    let violations: Option<u64> = ["violations_after", "unmatched_sends", "unmatched_receives"]
        .iter()
        .map(|k| check[k].as_u64())
        .sum();
    let times_buffer = traced.trace_bytes as f64 / plan.buffer.1 as f64;
    let targets = [
        (
            "peak RSS <= program + buffer + 16 MiB",
            traced.peak_rss <= limit,
            format!(
                "{:.1} MiB traced, {:.1} MiB untraced + {:.1} MiB buffer + 16 MiB = {:.1} MiB",
                mib(traced.peak_rss),
                mib(untraced.peak_rss),
                mib(plan.buffer.1),
                mib(limit)
            ),
        ),
        (
            "trace >= 10x the buffer",
            times_buffer >= 10.0,
            format!("{times_buffer:.1}x"),
        ),
        (
            "trace >= the size asked",
            traced.trace_bytes >= plan.target,
            format!(
                "{:.1} MiB of {:.1} MiB",
                mib(traced.trace_bytes),
                mib(plan.target)
            ),
        ),
        (
            "0 clock-condition violations after correction",
            violations == Some(0),
            format!("{check}"),
        ),
    ];
    if json_out {
        let doc = json!({
            "mode": "heavy-size",
            "load": load,
            "ranks": plan.np,
            "backend": plan.backend,
            "calls_per_iteration": plan.per,
            "iterations": iters,
            "buffer_bytes": plan.buffer.1,
            "trace_bytes": traced.trace_bytes,
            "untraced": {
                "seconds": untraced.seconds,
                "iterations": untraced_iters(iters),
                "peak_rss": untraced.peak_rss,
            },
            "traced": { "seconds": traced.seconds, "peak_rss": traced.peak_rss },
            "rss_limit": limit,
            "check": check,
            "tools": runs.iter().map(|r| json!({
                "command": r.command,
                "peak_rss": r.peak_rss,
                "seconds": r.seconds,
            })).collect::<Vec<_>>(),
            "targets": targets.iter().map(|(what, met, detail)| json!({
                "target": what, "met": met, "detail": detail,
            })).collect::<Vec<_>>(),
        });
        return format!("{doc}\n");
    }
    let mut out = format!(
        "heavy, {} ranks ({}), {} iterations of {} invokes and nwrites, MTTL_TRACE_LEVEL=threads, \
         equalized, buffer {:.0} MiB; load {load}\n",
        plan.np,
        plan.backend,
        iters,
        plan.per,
        mib(plan.buffer.1)
    );
    out += &format!(
        "  untraced: {:.2} s ({} iterations), peak RSS {:.1} MiB\n  traced:   {:.2} s, peak RSS \
         {:.1} MiB, trace {:.1} MiB ({times_buffer:.1}x the buffer)\n",
        untraced.seconds,
        untraced_iters(iters),
        mib(untraced.peak_rss),
        traced.seconds,
        mib(traced.peak_rss),
        mib(traced.trace_bytes)
    );
    for r in runs {
        out += &format!(
            "  mttl-trace {:<12} {:>8.1} s, peak RSS {:>7.1} MiB\n",
            r.command,
            r.seconds,
            mib(r.peak_rss)
        );
    }
    for (what, met, detail) in targets {
        out += &format!(
            "  {}: {what} ({detail})\n",
            if met { "met" } else { "MISSED" }
        );
    }
    out
}
