//! `mttl-bench bcast`: the adaptive broadcast (virtual-rank swapping)
//! against the binomial tree, the pattern's ideal table (found offline)
//! and the arrival-order baseline, under imbalance patterns
//! ([`pattern::Pattern`]): real jobs of 8 and 16 ranks on the TCP backend
//! (sleep-based work, so that oversubscribed cores do not distort it), and
//! `mttl-sim` at 64 to 1024 ranks.
//!
//! Per case it prints the broadcast time (first entry to last exit, on
//! clocks corrected to rank 0's), the mean time per rank in the broadcast,
//! the total wait, and the call and phase after which the learned table
//! settled; then the targets, each met or missed.
//!
//! # One invocation, step by step
//!
//! 1. For each job size and pattern, the orchestrator starts a TCP job of
//!    this program (`mttl-bench bcast --worker --out FILE ...`), which runs
//!    every algorithm's series, repetitions interleaved ([`job`]), and
//!    reads the spans its rank 0 wrote.
//! 2. For each simulated size and pattern it plays every algorithm's
//!    series on `mttl-sim` ([`sim`]), in this process.
//! 3. It prints the tables and the targets ([`report`]), or one JSON
//!    document with `--json`.

mod job;
mod pattern;
mod report;
mod sim;

use std::path::PathBuf;
use std::time::Instant;

use mttl_comm::launch::{self, BackendKind, JobSpec};
use serde_json::json;

use self::pattern::Algo;
use self::pattern::Pattern;
use self::report::{CallTimes, Case, Progress, Series};
pub use crate::bench::error::BenchError;

/// Arguments of `mttl-bench bcast`.
#[derive(Debug, Clone, clap::Args)]
pub struct BcastArgs {
    /// Sizes of the real jobs (TCP backend), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8,16")]
    ranks: Vec<usize>,
    /// Sizes of the simulated jobs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256,512,1024")]
    sim_ranks: Vec<usize>,
    /// Patterns, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    patterns: Option<Vec<Pattern>>,
    /// Broadcasts per series of a real job (`changing`: per stage).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(8..=100_000))]
    calls: u64,
    /// Broadcasts per simulated series (`changing`: per stage).
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u64).range(8..=100_000))]
    sim_calls: u64,
    /// Repetitions of every real job's series (interleaved).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    reps: u64,
    /// Units of work in the real jobs (the heavy rank's sleep), ms,
    /// comma-separated: the paper's growing matrix size.
    #[arg(long, value_delimiter = ',', default_value = "0.5,2,10")]
    work_ms: Vec<f64>,
    /// Units of work in the simulator, µs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000")]
    sim_work_us: Vec<f64>,
    /// Bytes broadcast.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u64).range(8..=(64 << 20)))]
    bytes: u64,
    /// The seed of the random pattern.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the real jobs.
    #[arg(long)]
    no_jobs: bool,
    /// Skip the simulator.
    #[arg(long)]
    no_sim: bool,
    /// Print one JSON document on stdout instead of the tables.
    #[arg(long)]
    json: bool,
    /// Run as a worker rank (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    worker: bool,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    out: Option<PathBuf>,
}

/// Runs `mttl-bench bcast`: the orchestrator, or a worker rank when
/// started with `--worker`.
pub fn run(args: BcastArgs) -> Result<(), BenchError> {
    let units = args.work_ms.iter().map(|ms| ms * 1e-3);
    if let Some(bad) = units
        .chain(args.sim_work_us.iter().map(|us| us * 1e-6))
        .find(|&s| !(s > 0.0 && s <= 10.0))
    {
        return Err(BenchError::Usage(format!(
            "a unit of work of {bad} s: --work-ms and --sim-work-us must be positive, at most 10 s"
        )));
    }
    if let Some(&n) = args
        .ranks
        .iter()
        .chain(&args.sim_ranks)
        .find(|&&n| !(2..=4096).contains(&n))
    {
        return Err(BenchError::Usage(format!(
            "{n} ranks: the sizes must be from 2 to 4096"
        )));
    }
    let patterns = args
        .patterns
        .clone()
        .unwrap_or_else(|| Pattern::ALL.to_vec());
    if args.worker {
        let (Some(out), [pattern], [work_ms]) =
            (&args.out, patterns.as_slice(), args.work_ms.as_slice())
        else {
            return Err(BenchError::Usage(
                "a worker takes --out, exactly one pattern and one unit of work".into(),
            ));
        };
        let plan = job::JobPlan {
            pattern: *pattern,
            calls: args.calls as usize,
            reps: args.reps as usize,
            work: work_ms * 1e-3,
            bytes: args.bytes as usize,
            seed: args.seed,
        };
        return job::run(plan, out);
    }
    let started = Instant::now();
    let load_before = load_average();
    let mut cases = Vec::new();
    if !args.no_jobs {
        let program = std::env::current_exe().map_err(|source| BenchError::Io {
            what: "find the path of",
            path: PathBuf::from("this program"),
            source,
        })?;
        let dir = std::env::temp_dir().join(format!("mttl-bench-bcast-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|source| BenchError::Io {
            what: "create the temporary directory",
            path: dir.clone(),
            source,
        })?;
        let result = (|| {
            for &n in &args.ranks {
                for &work_ms in &args.work_ms {
                    for &pattern in &patterns {
                        cases.push(job_case(&args, &program, &dir, n, pattern, work_ms)?);
                    }
                }
            }
            Ok::<(), BenchError>(())
        })();
        let _ = std::fs::remove_dir_all(&dir);
        result?;
    }
    if !args.no_sim {
        let params = mttl_sim::Params::default();
        for &n in &args.sim_ranks {
            for (&work_us, &pattern) in args
                .sim_work_us
                .iter()
                .flat_map(|w| patterns.iter().map(move |p| (w, p)))
            {
                let mut series = Vec::new();
                let plan = sim::SimPlan {
                    calls: args.sim_calls as usize,
                    work: work_us * 1e-6,
                    bytes: args.bytes,
                    seed: args.seed,
                    params,
                };
                for algo in Algo::ALL {
                    series.push(sim::series(n, pattern, algo, &plan)?);
                }
                cases.push(Case {
                    place: "simulated",
                    n,
                    pattern,
                    work: work_us * 1e-6,
                    note: format!(
                        "{} B, LogGOPS L={} o={} g={} ns, G={} ns/B",
                        args.bytes,
                        params.l,
                        params.o,
                        params.g,
                        params.big_g_ps as f64 / 1000.0
                    ),
                    series,
                });
            }
        }
    }
    let verdicts = report::targets(&cases);
    let load_after = load_average();
    if args.json {
        let doc = json!({
            "bench": "bcast",
            "load_before": load_before,
            "load_after": load_after,
            "seconds": started.elapsed().as_secs_f64(),
            "cases": cases.iter().map(Case::to_json).collect::<Vec<_>>(),
            "targets": verdicts.iter().map(|v| json!({
                "target": v.target, "measured": v.measured, "met": v.met})).collect::<Vec<_>>(),
        });
        println!("{doc}");
        return Ok(());
    }
    println!("mttl-bench bcast: broadcast from rank 0 under imbalance; steady = the second half of the (last) stage's calls\n");
    for c in &cases {
        println!("{}", c.table());
    }
    println!("How: {}", method(&args));
    println!(
        "Load average (1 min) before / after: {} / {}; {:.0} s in all.\n",
        load_before,
        load_after,
        started.elapsed().as_secs_f64()
    );
    println!("Targets (issue 23):");
    for v in &verdicts {
        println!(
            "  {:<6} {} — measured {}",
            if v.met { "met" } else { "MISSED" },
            v.target,
            v.measured
        );
    }
    Ok(())
}

/// How the figures were measured.
fn method(args: &BcastArgs) -> String {
    format!(
        "real jobs: one TCP job per size and pattern; each repetition runs binomial, adaptive \
         (a fresh AdaptiveBroadcast), ideal (AdaptiveBroadcast::with_table) and arrival \
         (ArrivalOrderBroadcast) one after the other, order rotated; a call is a barrier, the \
         rank's work as a sleep (units of {:?} ms), then the broadcast of {} B, timed on every rank \
         with CLOCK_MONOTONIC corrected by offsets to rank 0 (fastest of 16 invoke round trips). \
         Simulated: one GOAL schedule per call on mttl-sim, the learner fed with the simulated \
         slacks (negative for a late rank) and the hop and gap mttl-sim charges. Ratios are per repetition, medians shown.",
        args.work_ms, args.bytes
    )
}

/// The 1-minute load average, as /proc/loadavg says (or `?`).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// Step 1 for one size and pattern.
fn job_case(
    args: &BcastArgs,
    program: &std::path::Path,
    dir: &std::path::Path,
    n: usize,
    pattern: Pattern,
    work_ms: f64,
) -> Result<Case, BenchError> {
    let out = dir.join(format!("{}-{n}-{work_ms}.json", pattern.name()));
    let worker_args: Vec<String> = vec![
        "bcast".into(),
        "--worker".into(),
        "--out".into(),
        out.to_string_lossy().into_owned(),
        "--patterns".into(),
        pattern.name().into(),
        "--calls".into(),
        args.calls.to_string(),
        "--reps".into(),
        args.reps.to_string(),
        "--work-ms".into(),
        work_ms.to_string(),
        "--bytes".into(),
        args.bytes.to_string(),
        "--seed".into(),
        args.seed.to_string(),
    ];
    let mut spec = JobSpec::new(n, program).args(worker_args);
    spec.backend = BackendKind::Tcp;
    spec.extra_env = vec![("MTTL_BCAST".into(), "binomial".into())];
    let outcome = launch::run(&spec).map_err(|source| BenchError::Launch {
        config: "bcast",
        source,
    })?;
    if !outcome.success() {
        return Err(BenchError::WorkerFailed {
            config: "bcast",
            code: outcome.exit_code,
            hint: "",
        });
    }
    let text = std::fs::read_to_string(&out).map_err(|source| BenchError::Io {
        what: "read the results file",
        path: out.clone(),
        source,
    })?;
    parse_job(&text, n, pattern, work_ms, args).map_err(|detail| BenchError::BadResults {
        config: "bcast",
        path: out,
        detail,
    })
}

/// A worker's results file as a [`Case`].
fn parse_job(
    text: &str,
    n: usize,
    pattern: Pattern,
    work_ms: f64,
    args: &BcastArgs,
) -> Result<Case, String> {
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let series = doc["series"]
        .as_array()
        .ok_or("no series")?
        .iter()
        .map(|s| {
            let algo = Algo::ALL
                .into_iter()
                .find(|a| Some(a.name()) == s["algo"].as_str())
                .ok_or("a series of an unknown algorithm")?;
            let calls = s["calls"]
                .as_array()
                .ok_or("a series without calls")?
                .iter()
                .map(|spans| {
                    let spans = spans.as_array().ok_or("a call without spans")?;
                    if spans.len() != n {
                        return Err(format!("a call with {} spans, not {n}", spans.len()));
                    }
                    let pairs = spans
                        .iter()
                        .map(|p| Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?)))
                        .collect::<Option<Vec<_>>>()
                        .ok_or("a span that is not two numbers")?;
                    Ok(CallTimes::from_spans(pairs.into_iter()))
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(Series {
                algo,
                rep: s["rep"].as_u64().unwrap_or(0) as usize,
                calls,
                progress: Progress::from_json(&s["progress"]),
                progress_half: Progress::from_json(&s["progress_half"]),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Case {
        place: "tcp job",
        n,
        pattern,
        work: work_ms * 1e-3,
        note: format!(
            "{} B, clocks within {} us",
            args.bytes,
            doc["clock_error_ns"].as_u64().unwrap_or(0) / 1000
        ),
        series,
    })
}
