//! `mttl-bench trace`: the trace method's Table 1 (Okita, Ino and
//! Hagihara's large-scale trace generation, restated in the tracing
//! issue): how long a program takes untraced, traced in memory, and traced
//! with each flush policy, and how close the reconstructed time (the
//! suspensions removed, `mttl-trace reconstruct`) comes to the in-memory
//! run.
//!
//! # Method
//!
//! 1. Each workload (NPB CG and IS through the `npb` binary; the ping-pong,
//!    the matrix product and the trace-heavy program of [`worker`] through
//!    this one) is run once per column and repetition, as a child process
//!    ([`run`]): T0 untraced; T with `MTTL_TRACE_FLUSH=memory` and a buffer
//!    that holds the whole trace; T1-T3 `equalized` at three thresholds;
//!    Ts `static`; Tl `local`; Ta `equalized` at the first threshold with
//!    `MTTL_TRACE_RESYNC=start`; and a second `memory` run, the control.
//!    The flushing columns' buffer is chosen per workload unless
//!    `--buffer` fixes it: a tenth of the largest rank's trace file in the
//!    workload's first in-memory run ([`auto_buffer`]), so that every
//!    workload writes its trace many times (a fixed 64 MiB would hold
//!    CG B's whole trace and test nothing); the table shows the buffer and
//!    the suspensions each T1-T3 run made.
//! 2. A run's time is the program's own time of its timed part (the slowest
//!    rank's); its reconstructed time R is that of the trace region around
//!    the same part, from `mttl-trace reconstruct --json` (this crate does
//!    not link the reader). Its peak memory is the kernel's count for the
//!    child's process tree. Every trace is checked (`mttl-trace check`).
//! 3. The columns run in one order in even repetitions and in the reverse
//!    order in odd ones, so that a drift of the machine hits them alike.
//!    Each error |R(X) − T| / T is taken within one repetition (a pair of
//!    runs close in time), and the table shows the median over the
//!    repetitions; the control |T' − T| / T is the noise floor: an error
//!    within it is what this machine can resolve.
//! 4. The targets (the issue's) are printed met or missed; an error target
//!    missed by no more than the control strays is `unresolved` (the
//!    machine's noise decides it, not the method).

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::bench::BenchError;

mod run;
mod size;
pub mod worker;

use run::{Job, Measured, Tools, Tracing, Workload};
use worker::Program;

/// `mttl-bench trace`'s arguments.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Workloads: cg, is, pingpong, matmul, heavy [default: all].
    #[arg(long, value_delimiter = ',')]
    workloads: Option<Vec<WorkloadName>>,
    /// NPB class of CG and IS [default: B; S with --quick].
    #[arg(long)]
    class: Option<char>,
    /// Ranks of CG, IS, matmul and heavy (pingpong runs on 2)
    /// [default: 2,4; 2 with --quick].
    #[arg(long, value_delimiter = ',')]
    ranks: Option<Vec<usize>>,
    /// Backends: tcp, mpi [default: both when built with MPI, else tcp].
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<String>>,
    /// Repetitions (pairs of runs per error) [default: 5; 1 with --quick].
    #[arg(long)]
    reps: Option<usize>,
    /// The trace buffer of the flushing policies (MTTL_TRACE_BUFFER)
    /// [default: per workload, a tenth of the largest rank's trace in its
    /// first in-memory run, so that T1-T3 write about 13, 20 and 40 times;
    /// 256K with --quick; 64M for --heavy-size].
    #[arg(long)]
    buffer: Option<String>,
    /// The buffer of the memory runs, which must hold the whole trace
    /// [default: 8G; 256M with --quick].
    #[arg(long)]
    memory_buffer: Option<String>,
    /// The three thresholds of T1-T3 (MTTL_TRACE_THRESHOLD)
    /// [default: 75%,50%,25%; 48K,32K,16K with --quick].
    #[arg(long, value_delimiter = ',')]
    thresholds: Option<Vec<String>>,
    /// The static policy of Ts, LONG,SHORT.
    #[arg(long = "static", value_name = "LONG,SHORT", default_value = "50ms,0")]
    static_z: String,
    /// Ping-pong round trips [default: 1000000; 20000 with --quick].
    #[arg(long)]
    pingpong_iters: Option<u64>,
    /// Matrix size and products of matmul [default: 768,20; 128,4 with --quick].
    #[arg(long, value_delimiter = ',')]
    matmul: Option<Vec<u64>>,
    /// Iterations and calls per iteration of heavy [default: 4000,256
    /// (about 80 MiB of trace per rank, 30 s a run on 2 TCP ranks here);
    /// 200,16 with --quick]; `--heavy-size` makes the GiB-sized traces.
    #[arg(long, value_delimiter = ',')]
    heavy: Option<Vec<u64>>,
    /// Regions opened and closed to measure the recording cost of one event
    /// (two events each; 0 skips it) [default: 2000000; 200000 with --quick].
    #[arg(long)]
    event_regions: Option<u64>,
    /// Append each workload's runs to FILE (JSON lines) as it completes,
    /// and skip the workloads FILE already holds: a table interrupted is
    /// resumed by running the same command again. FILE must be of the
    /// same settings (repetitions, buffers, thresholds, static).
    #[arg(long, value_name = "FILE")]
    results: Option<PathBuf>,
    /// Print the estimate of the table's duration (from one untraced run of
    /// each workload) and stop.
    #[arg(long)]
    estimate: bool,
    /// Skip the estimate (and its untraced run of each workload).
    #[arg(long, conflicts_with = "estimate")]
    no_estimate: bool,
    /// Instead of the table: the size targets. The trace-heavy program
    /// (`MTTL_TRACE_LEVEL=threads`, `equalized`, `--buffer`) run long
    /// enough to write SIZE of trace (K/M/G), untraced and traced; peak
    /// memory of both and of `mttl-trace` reading the trace, its
    /// violations; the trace is deleted afterwards. Ranks and backend: the
    /// first of `--ranks` and `--backends`; calls per iteration: `--heavy`'s
    /// second number.
    #[arg(long, value_name = "SIZE")]
    heavy_size: Option<String>,
    /// With --heavy-size, also time `mttl-trace timeline` (its output
    /// discarded; it spills about 60 bytes per event to TMPDIR).
    #[arg(long)]
    size_timeline: bool,
    /// Small sizes for a smoke run (class S, small traces, 1 repetition).
    #[arg(long)]
    quick: bool,
    /// Where the traces go (emptied per run) [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The directory of the `npb` and `mttl-trace` binaries [default: this
    /// program's].
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Print one JSON document instead of the tables.
    #[arg(long)]
    json: bool,
    /// Run one small program as an mttl job (used by the benchmark itself).
    #[arg(long, hide = true)]
    worker: Option<Program>,
    /// The worker's iterations.
    #[arg(long, hide = true, default_value_t = 1)]
    iters: u64,
    /// The worker's size.
    #[arg(long, hide = true, default_value_t = 1)]
    size: u64,
}

/// A workload by the name `--workloads` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum WorkloadName {
    Cg,
    Is,
    Pingpong,
    Matmul,
    Heavy,
}

/// The columns of Table 1, one run each per repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Untraced,
    Memory,
    Equalized(usize),
    Static,
    Local,
    NoResync,
    Control,
}

impl Column {
    fn all() -> [Column; 9] {
        use Column::*;
        [
            Untraced,
            Memory,
            Equalized(0),
            Equalized(1),
            Equalized(2),
            Static,
            Local,
            NoResync,
            Control,
        ]
    }

    /// Its name in the table (T0, T, T1..., T').
    fn name(self) -> String {
        match self {
            Column::Untraced => "T0".into(),
            Column::Memory => "T".into(),
            Column::Equalized(i) => format!("T{}", i + 1),
            Column::Static => "Ts".into(),
            Column::Local => "Tl".into(),
            Column::NoResync => "Ta".into(),
            Column::Control => "T'".into(),
        }
    }

    /// Whether its reconstructed time is a column of the table.
    fn reconstructs(self) -> bool {
        !matches!(self, Column::Untraced | Column::Memory | Column::Control)
    }
}

/// The settled options.
#[derive(Debug)]
struct Plan {
    jobs: Vec<Job>,
    reps: usize,
    /// `None`: chosen per workload ([`auto_buffer`]).
    buffer: Option<String>,
    memory_buffer: String,
    thresholds: Vec<String>,
    static_z: String,
    /// Regions of the event-cost measurement (0: not measured).
    event_iters: u64,
}

impl Plan {
    /// The tracing of `column` with the flushing policies' `buffer`, `None`
    /// for T0.
    fn tracing(&self, column: Column, buffer: &str) -> Option<Tracing> {
        let t = |flush: &str, buffer: &str, threshold: Option<&String>, resync| Tracing {
            flush: flush.to_owned(),
            buffer: buffer.to_owned(),
            threshold: threshold.cloned(),
            resync,
            level: None,
        };
        Some(match column {
            Column::Untraced => return None,
            Column::Memory | Column::Control => t("memory", &self.memory_buffer, None, "each"),
            Column::Equalized(i) => t("equalized", buffer, self.thresholds.get(i), "each"),
            Column::Static => t(
                &format!("static:{}", self.static_z),
                buffer,
                self.thresholds.first(),
                "each",
            ),
            Column::Local => t("local", buffer, None, "each"),
            Column::NoResync => t("equalized", buffer, self.thresholds.first(), "start"),
        })
    }
}

fn plan(args: &TraceArgs) -> Result<Plan, BenchError> {
    let q = args.quick;
    let class = args.class.unwrap_or(if q { 'S' } else { 'B' });
    let ranks = args
        .ranks
        .clone()
        .unwrap_or(if q { vec![2] } else { vec![2, 4] });
    let backends: Vec<&'static str> = match &args.backends {
        None if cfg!(feature = "mpi") && !q => vec!["tcp", "mpi"],
        None => vec!["tcp"],
        Some(b) => b
            .iter()
            .map(|b| match b.as_str() {
                "tcp" => Ok("tcp"),
                "mpi" if cfg!(feature = "mpi") => Ok("mpi"),
                "mpi" => Err(BenchError::Usage(
                    "--backends mpi needs an mttl-bench and npb built with the `mpi` feature"
                        .into(),
                )),
                other => Err(BenchError::Usage(format!(
                    "unknown backend {other:?} in --backends: expected tcp or mpi"
                ))),
            })
            .collect::<Result<_, _>>()?,
    };
    let pair =
        |v: &Option<Vec<u64>>, name: &str, full: [u64; 2], quick: [u64; 2]| match v.as_deref() {
            None => Ok(if q { quick } else { full }),
            Some([a, b]) => Ok([*a, *b]),
            Some(_) => Err(BenchError::Usage(format!(
                "--{name} takes two numbers, A,B"
            ))),
        };
    let [mm_n, mm_iters] = pair(&args.matmul, "matmul", [768, 20], [128, 4])?;
    let [heavy_iters, heavy_per] = pair(&args.heavy, "heavy", [4_000, 256], [200, 16])?;
    let pingpong_iters = args
        .pingpong_iters
        .unwrap_or(if q { 20_000 } else { 1_000_000 });
    let thresholds: Vec<String> = match &args.thresholds {
        Some(t) => t.clone(),
        None if q => vec!["48K".into(), "32K".into(), "16K".into()],
        None => vec!["75%".into(), "50%".into(), "25%".into()],
    };
    if thresholds.len() != 3 {
        return Err(BenchError::Usage(format!(
            "--thresholds takes three thresholds (T1-T3), not {}",
            thresholds.len()
        )));
    }
    let workloads = args.workloads.clone().unwrap_or(vec![
        WorkloadName::Cg,
        WorkloadName::Is,
        WorkloadName::Pingpong,
        WorkloadName::Matmul,
        WorkloadName::Heavy,
    ]);
    let mut jobs = Vec::new();
    for w in workloads {
        for &backend in &backends {
            let (what, rank_list) = match w {
                WorkloadName::Cg => (
                    Workload::Npb {
                        kernel: "cg",
                        class,
                    },
                    &ranks[..],
                ),
                WorkloadName::Is => (
                    Workload::Npb {
                        kernel: "is",
                        class,
                    },
                    &ranks[..],
                ),
                WorkloadName::Pingpong => (
                    Workload::Small {
                        program: Program::Pingpong,
                        iters: pingpong_iters,
                        size: 1,
                    },
                    &[2][..],
                ),
                WorkloadName::Matmul => (
                    Workload::Small {
                        program: Program::Matmul,
                        iters: mm_iters,
                        size: mm_n,
                    },
                    &ranks[..],
                ),
                WorkloadName::Heavy => (
                    Workload::Small {
                        program: Program::Heavy,
                        iters: heavy_iters,
                        size: heavy_per,
                    },
                    &ranks[..],
                ),
            };
            for &np in rank_list {
                jobs.push(Job { what, np, backend });
            }
        }
    }
    Ok(Plan {
        jobs,
        reps: args.reps.unwrap_or(if q { 1 } else { 5 }).max(1),
        buffer: args.buffer.clone().or_else(|| q.then(|| "256K".into())),
        memory_buffer: args
            .memory_buffer
            .clone()
            .unwrap_or_else(|| if q { "256M" } else { "8G" }.into()),
        thresholds,
        static_z: args.static_z.clone(),
        event_iters: args
            .event_regions
            .unwrap_or(if q { 200_000 } else { 2_000_000 }),
    })
}

/// One workload's runs: per column, one [`Measured`] per repetition.
#[derive(Debug)]
struct Row {
    job: Job,
    /// The flushing policies' buffer, bytes.
    buffer: u64,
    runs: Vec<(Column, Vec<Measured>)>,
}

/// The flushing buffer chosen for a workload whose largest rank wrote
/// `largest_file` bytes of trace in memory: a tenth of it, in whole KiB,
/// at least the runtime's least (4 KiB).
fn auto_buffer(largest_file: u64) -> u64 {
    (largest_file / 10).div_ceil(1024).max(4) * 1024
}

impl Row {
    fn of(&self, c: Column) -> &[Measured] {
        self.runs
            .iter()
            .find(|(k, _)| *k == c)
            .map_or(&[][..], |(_, m)| &m[..])
    }

    /// The median of `f` over the repetitions of `c`.
    fn median(&self, c: Column, f: impl Fn(&Measured) -> Option<f64>) -> Option<f64> {
        median(self.of(c).iter().filter_map(f).collect())
    }

    /// The median over repetitions of |x(c) − T| / T, x the reconstructed
    /// time (or, for the control, the time).
    fn error(&self, c: Column) -> Option<f64> {
        let mem = self.of(Column::Memory);
        let errs = self
            .of(c)
            .iter()
            .zip(mem)
            .filter_map(|(x, t)| {
                let x = if c == Column::Control {
                    Some(x.seconds)
                } else {
                    x.reconstructed
                };
                x.map(|x| (x - t.seconds).abs() / t.seconds)
            })
            .collect();
        median(errs)
    }

    /// The median over repetitions of T / T0 − 1.
    fn overhead(&self) -> Option<f64> {
        let r = self
            .of(Column::Memory)
            .iter()
            .zip(self.of(Column::Untraced))
            .map(|(t, t0)| t.seconds / t0.seconds - 1.0)
            .collect();
        median(r)
    }

    /// The median over repetitions of the block products' slowdown under
    /// T1 against T (matmul).
    fn compute_slowdown(&self) -> Option<f64> {
        let r = self
            .of(Column::Equalized(0))
            .iter()
            .zip(self.of(Column::Memory))
            .filter_map(|(a, t)| Some(a.compute? / t.compute? - 1.0))
            .collect();
        median(r)
    }

    /// The median over the T1 repetitions of the mean block product right
    /// after a trace write against the mean of the others, minus 1
    /// (matmul): what a flush costs the computation after it.
    fn flush_slowdown(&self) -> Option<f64> {
        let r = self
            .of(Column::Equalized(0))
            .iter()
            .filter_map(|m| Some(m.block_after_flush? / m.block_other? - 1.0))
            .collect();
        median(r)
    }

    /// The most violations any trace had.
    fn violations(&self) -> Option<u64> {
        self.runs
            .iter()
            .flat_map(|(_, m)| m.iter().filter_map(|m| m.violations))
            .max()
    }

    fn largest(&self, c: Column, f: impl Fn(&Measured) -> u64) -> u64 {
        self.of(c).iter().map(f).max().unwrap_or(0)
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The recording cost of one event, ns: one rank opening and closing
/// `plan.event_iters` empty regions, traced (`memory`, a buffer that holds
/// them all) and untraced, alternated; the median over at least 5 pairs of
/// (traced − untraced) / events, in the loop's CPU time.
fn measure_event_cost(
    tools: &Tools,
    plan: &Plan,
    dir: &std::path::Path,
) -> Result<Option<f64>, BenchError> {
    if plan.event_iters == 0 {
        return Ok(None);
    }
    let job = Job {
        what: Workload::Small {
            program: Program::Events,
            iters: plan.event_iters,
            size: 1,
        },
        np: 1,
        backend: "tcp",
    };
    // Two events of at most a few bytes each, with room to spare.
    let buffer = format!("{}K", (plan.event_iters * 2 * 8 / 1024).max(64) + 1024);
    let tracing = Tracing {
        flush: "memory".into(),
        buffer,
        threshold: None,
        resync: "each",
        level: None,
    };
    let mut costs = Vec::new();
    for rep in 0..plan.reps.max(5) {
        let (off, on) = if rep % 2 == 0 {
            let off = job.measure(tools, None, false)?;
            (off, job.measure(tools, Some((dir, &tracing)), false)?)
        } else {
            let on = job.measure(tools, Some((dir, &tracing)), false)?;
            (job.measure(tools, None, false)?, on)
        };
        costs.push((on.seconds - off.seconds) * 1e9 / (2 * plan.event_iters) as f64);
    }
    Ok(median(costs))
}

/// A byte count as `mttl_core::trace::parse_bytes` reads it.
fn bytes(text: &str) -> Result<u64, BenchError> {
    mttl_core::trace::parse_bytes(text)
        .map(|b| b as u64)
        .map_err(|e| BenchError::Usage(format!("{text}: {e}")))
}

/// The settings a `--results` file's runs were taken with.
fn fingerprint(plan: &Plan) -> Value {
    json!({
        "repetitions": plan.reps,
        "buffer": plan.buffer.as_deref().unwrap_or("auto"),
        "memory_buffer": plan.memory_buffer,
        "thresholds": plan.thresholds,
        "static": plan.static_z,
    })
}

type Runs = Vec<(Column, Vec<Measured>)>;

/// A workload's runs from a `--results` file, with the buffer they used.
type Done = (u64, Runs);

/// The workloads a `--results` file holds, by [`Job::key`]; an error if it
/// is of other settings or does not parse (naming the file and line).
fn load_results(
    path: &std::path::Path,
    plan: &Plan,
) -> Result<std::collections::HashMap<String, Done>, BenchError> {
    let mut done = std::collections::HashMap::new();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(done),
        Err(source) => {
            return Err(BenchError::Io {
                what: "read",
                path: path.to_owned(),
                source,
            })
        }
    };
    let bad = |line: usize, what: String| {
        BenchError::Usage(format!("{}:{}: {what}", path.display(), line + 1))
    };
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| {
            bad(
                i,
                format!("not a JSON line ({e}); a torn last line can be deleted"),
            )
        })?;
        if let Some(p) = v.get("plan") {
            if *p != fingerprint(plan) {
                return Err(bad(
                    i,
                    format!(
                        "results of other settings ({p}, this run's {}): name another --results \
                         file, or the same settings",
                        fingerprint(plan)
                    ),
                ));
            }
            continue;
        }
        let key = v["job"]
            .as_str()
            .ok_or_else(|| bad(i, "expected a \"plan\" or a \"job\" line".into()))?;
        let buffer = v["buffer_bytes"]
            .as_u64()
            .ok_or_else(|| bad(i, format!("{key}: no buffer_bytes")))?;
        let mut runs: Runs = Column::all().iter().map(|&c| (c, Vec::new())).collect();
        for (c, ms) in &mut runs {
            for m in v["columns"][c.name()].as_array().into_iter().flatten() {
                ms.push(
                    Measured::from_json(m).ok_or_else(|| {
                        bad(i, format!("a run of {} that does not parse", c.name()))
                    })?,
                );
            }
            if ms.len() != plan.reps {
                return Err(bad(
                    i,
                    format!(
                        "{key} {}: {} runs, expected {}",
                        c.name(),
                        ms.len(),
                        plan.reps
                    ),
                ));
            }
        }
        done.insert(key.to_owned(), (buffer, runs));
    }
    Ok(done)
}

/// Appends one workload's runs to the `--results` file (its settings
/// first when it is new).
fn append_result(
    path: &std::path::Path,
    plan: &Plan,
    job: &Job,
    buffer: u64,
    runs: &Runs,
) -> Result<(), BenchError> {
    use std::io::Write as _;
    let io = |source| BenchError::Io {
        what: "append to",
        path: path.to_owned(),
        source,
    };
    let new = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    let mut text = String::new();
    if new {
        text += &format!("{}\n", json!({ "plan": fingerprint(plan) }));
    }
    let columns: serde_json::Map<String, Value> = runs
        .iter()
        .map(|(c, ms)| (c.name(), ms.iter().map(Measured::to_json).collect()))
        .collect();
    text += &format!(
        "{}\n",
        json!({ "job": job.key(), "buffer_bytes": buffer, "columns": columns })
    );
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_data().map_err(io)
}

/// Runs `mttl-bench trace`.
pub fn run(args: TraceArgs) -> Result<(), BenchError> {
    if let Some(program) = args.worker {
        return match worker::run(program, args.iters, args.size) {
            0 => Ok(()),
            code => Err(BenchError::Usage(format!(
                "the {program:?} worker exited with status {code}"
            ))),
        };
    }
    let plan = plan(&args)?;
    let fixed = plan.buffer.as_deref().map(bytes).transpose()?;
    if let Some(size) = &args.heavy_size {
        let text = plan.buffer.clone().unwrap_or_else(|| "64M".into());
        let buffer = bytes(&text)?;
        return heavy_size(&args, &plan, size, (text, buffer));
    }
    bytes(&plan.memory_buffer)?;
    let tools = Tools::find(args.tools.as_deref())?;
    let temp = args.dir.is_none();
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mttl-bench-trace-{}", std::process::id()))
    });
    let load = uptime();
    let mut rows = Vec::new();
    let mut event_cost = None;
    let mut done = match &args.results {
        Some(path) => load_results(path, &plan)?,
        None => Default::default(),
    };
    let result = (|| {
        if !args.no_estimate {
            estimate(&tools, &plan, &done, args.results.as_deref())?;
        }
        if args.estimate {
            return Ok(());
        }
        for job in &plan.jobs {
            if let Some((buffer, runs)) = done.remove(&job.key()) {
                rows.push(Row {
                    job: job.clone(),
                    buffer,
                    runs,
                });
                continue;
            }
            // Without --buffer, the buffer comes from the first in-memory
            // run, which repetition 0 makes before any flushing one.
            let mut buffer = fixed;
            let mut runs: Vec<(Column, Vec<Measured>)> =
                Column::all().iter().map(|&c| (c, Vec::new())).collect();
            for rep in 0..plan.reps {
                let mut order = Column::all().to_vec();
                if rep % 2 == 1 {
                    order.reverse();
                }
                for c in order {
                    // The reconstructed columns are the flushing ones.
                    if buffer.is_none() && c.reconstructs() {
                        return Err(BenchError::Usage(format!(
                            "{}: no buffer chosen before {} (the in-memory run comes first)",
                            job.key(),
                            c.name()
                        )));
                    }
                    let buffer_text = buffer.map_or_else(String::new, |b| b.to_string());
                    let tracing = plan.tracing(c, &buffer_text);
                    let trace_dir = dir.join("trace");
                    let m = job.measure(
                        &tools,
                        tracing.as_ref().map(|t| (trace_dir.as_path(), t)),
                        true,
                    )?;
                    eprintln!(
                        "mttl-bench trace: {} on {} ranks ({}), repetition {}/{}, {}: {:.3} s{}",
                        job.label(),
                        job.np,
                        job.backend,
                        rep + 1,
                        plan.reps,
                        c.name(),
                        m.seconds,
                        m.reconstructed
                            .map_or(String::new(), |r| format!(", reconstructed {r:.3} s"))
                    );
                    if buffer.is_none() && c == Column::Memory {
                        buffer = Some(auto_buffer(m.largest_file));
                    }
                    if let Some(slot) = runs.iter_mut().find(|(k, _)| *k == c) {
                        slot.1.push(m);
                    }
                }
            }
            let buffer = buffer.unwrap_or(0);
            if let Some(path) = &args.results {
                append_result(path, &plan, job, buffer, &runs)?;
            }
            eprintln!(
                "mttl-bench trace: {} on {} ranks ({}) done (load {})",
                job.label(),
                job.np,
                job.backend,
                uptime()
            );
            rows.push(Row {
                job: job.clone(),
                buffer,
                runs,
            });
        }
        event_cost = measure_event_cost(&tools, &plan, &dir.join("trace"))?;
        Ok::<(), BenchError>(())
    })();
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result?;
    if args.estimate {
        return Ok(());
    }
    let mut targets = targets(&rows);
    if let Some(ns) = event_cost {
        targets.push(Target {
            what: "recording cost per event <= 50 ns".into(),
            met: ns <= 50.0,
            unresolved: false,
            detail: format!(
                "{ns:.1} ns of CPU (median over {} alternated pairs of {} regions opened and \
                 closed)",
                plan.reps.max(5),
                plan.event_iters
            ),
        });
    }
    if args.json {
        let mut doc = to_json(&plan, &rows, &targets, &load);
        doc["event_cost_ns"] = json!(event_cost);
        println!("{doc}");
    } else {
        print!("{}", tables(&plan, &rows, &targets, &load));
    }
    Ok(())
}

/// Prints (to stderr) how long the table will take: one untraced run of
/// each workload still to run, its wall-clock time times the runs it will
/// make (9 columns per repetition), times 1.5 for the traced runs' writes
/// and the `mttl-trace` passes; plus the event-cost runs.
fn estimate(
    tools: &Tools,
    plan: &Plan,
    done: &std::collections::HashMap<String, Done>,
    results: Option<&std::path::Path>,
) -> Result<(), BenchError> {
    let runs = Column::all().len() * plan.reps;
    let mut total = 0.0;
    let mut lines = String::new();
    for job in &plan.jobs {
        if done.contains_key(&job.key()) {
            let _ = writeln!(lines, "  {:<24} already in the results file", job.key());
            continue;
        }
        let t0 = std::time::Instant::now();
        job.measure(tools, None, false)?;
        let one = t0.elapsed().as_secs_f64();
        eprintln!(
            "mttl-bench trace: estimating: {} took {one:.1} s untraced",
            job.key()
        );
        let all = one * runs as f64 * 1.5;
        total += all;
        let _ = writeln!(
            lines,
            "  {:<24} {one:>8.1} s a run untraced, about {:>8.0} s for its {runs} runs",
            job.key(),
            all
        );
    }
    // The event-cost pairs: two short single-rank runs each.
    total += plan.reps.max(5) as f64 * 2.0 * 2.0;
    eprint!(
        "mttl-bench trace: {} workloads, {} repetitions of {} columns; load {}\n{lines}\
         estimated duration: {:.0} min ({:.1} h){}\n",
        plan.jobs.len(),
        plan.reps,
        Column::all().len(),
        uptime(),
        total / 60.0,
        total / 3600.0,
        results.map_or(String::new(), |p| format!(
            "; each workload's runs appended to {} as it completes",
            p.display()
        ))
    );
    Ok(())
}

/// `--heavy-size SIZE` ([`size`]).
fn heavy_size(
    args: &TraceArgs,
    plan: &Plan,
    size: &str,
    buffer: (String, u64),
) -> Result<(), BenchError> {
    let job = plan
        .jobs
        .first()
        .ok_or_else(|| BenchError::Usage("--heavy-size: no job to run".into()))?;
    let per = args
        .heavy
        .as_ref()
        .and_then(|h| h.get(1).copied())
        .unwrap_or(256);
    let size_plan = size::SizePlan {
        target: bytes(size)?,
        np: args
            .ranks
            .as_ref()
            .and_then(|r| r.first().copied())
            .unwrap_or(2),
        backend: job.backend,
        per,
        buffer,
        timeline: args.size_timeline,
    };
    let tools = Tools::find(args.tools.as_deref())?;
    let dir = args.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("mttl-bench-trace-{}", std::process::id()))
    });
    let load = uptime();
    let out = size::run(&tools, &size_plan, &dir, args.json, &load);
    if args.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    print!("{}", out?);
    eprintln!(
        "mttl-bench trace --heavy-size: load {} at the end",
        uptime()
    );
    Ok(())
}

/// The machine's load averages, as `uptime` words them.
fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// A target's verdict.
#[derive(Debug)]
struct Target {
    what: String,
    met: bool,
    /// Missed, but by no more than the control strays: the machine's
    /// noise, not the method, decides it (reported `unresolved`).
    unresolved: bool,
    detail: String,
}

impl Target {
    fn verdict(&self) -> &'static str {
        match (self.met, self.unresolved) {
            (true, _) => "met",
            (false, true) => "unresolved",
            (false, false) => "MISSED",
        }
    }
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.2}%", x * 100.0))
}

fn secs(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{x:.3}"))
}

fn mib(b: u64) -> String {
    format!("{:.1}M", b as f64 / (1u64 << 20) as f64)
}

/// A buffer's size: whole KiB below a MiB, else as [`mib`].
fn buffer_size(b: u64) -> String {
    if b < 1 << 20 {
        format!("{}K", b.div_ceil(1024))
    } else {
        mib(b)
    }
}

fn targets(rows: &[Row]) -> Vec<Target> {
    let mut out = Vec::new();
    for r in rows {
        let name = format!("{} {} np={}", r.job.label(), r.job.backend, r.job.np);
        let (e1, control, local) = (
            r.error(Column::Equalized(0)),
            r.error(Column::Control),
            r.error(Column::Local),
        );
        if let Some(e1) = e1 {
            let within_noise = control.is_some_and(|c| e1 <= c);
            out.push(Target {
                what: format!("{name}: |R(T1) - T| / T <= 1%"),
                met: e1 <= 0.01,
                unresolved: within_noise,
                detail: format!(
                    "{} (control {}, local {}){}",
                    pct(Some(e1)),
                    pct(control),
                    pct(local),
                    if e1 > 0.01 && within_noise {
                        ": within the noise floor, the method's limit on this machine"
                    } else {
                        ""
                    }
                ),
            });
        }
        if let Some(v) = r.violations() {
            out.push(Target {
                what: format!("{name}: no clock-condition violation after correction"),
                met: v == 0,
                unresolved: false,
                detail: format!("{v} at most in one trace"),
            });
        }
        let program = r.largest(Column::Untraced, |m| m.peak_rss);
        let bound = program + r.buffer + (16 << 20);
        let worst = [
            Column::Equalized(0),
            Column::Equalized(1),
            Column::Equalized(2),
            Column::Static,
            Column::Local,
            Column::NoResync,
        ]
        .iter()
        .map(|&c| r.largest(c, |m| m.peak_rss))
        .max()
        .unwrap_or(0);
        out.push(Target {
            what: format!("{name}: peak RSS <= program + buffer + 16 MiB"),
            met: worst <= bound,
            unresolved: false,
            detail: format!(
                "{} against {} + {} + 16M (largest trace {})",
                mib(worst),
                mib(program),
                buffer_size(r.buffer),
                mib(r.largest(Column::Equalized(2), |m| m.trace_bytes))
            ),
        });
        if matches!(
            r.job.what,
            Workload::Npb {
                kernel: "cg",
                class: 'B'
            }
        ) {
            let o = r.overhead();
            let met = o.is_some_and(|o| o <= 0.05);
            let within_noise = o.zip(control).is_some_and(|(o, c)| o <= c);
            out.push(Target {
                what: format!("{name}: recording overhead T/T0 - 1 <= 5%"),
                met,
                unresolved: !met && within_noise,
                detail: format!(
                    "{} (control {}){}",
                    pct(o),
                    pct(control),
                    if !met && within_noise {
                        ": within the noise floor"
                    } else {
                        ""
                    }
                ),
            });
        }
    }
    out
}

/// The text tables.
fn tables(plan: &Plan, rows: &[Row], targets: &[Target], load: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mttl-bench trace: Table 1, median of {} repetition(s), seconds of each program's \
         timed part; load average at start {load}",
        plan.reps
    );
    let _ = writeln!(
        out,
        "buffer {} (memory runs {}), thresholds T1-T3 {}, static {}; R(X) reconstructed \
         (mttl-trace reconstruct)",
        plan.buffer
            .as_deref()
            .unwrap_or("per workload (a tenth of its largest in-memory trace file)"),
        plan.memory_buffer,
        plan.thresholds.join(" "),
        plan.static_z
    );
    let mut head = format!("{:<10} {:>3} {:>2}", "workload", "be", "np");
    for c in Column::all() {
        let _ = write!(head, " {:>7}", c.name());
        if c.reconstructs() {
            let _ = write!(head, " {:>7}", format!("R({})", c.name()));
        }
    }
    let _ = write!(
        head,
        " {:>8} {:>8} {:>8} {:>8} {:>11}",
        "size", "buffer", "RSS T", "RSS T1", "susp T1-3"
    );
    let _ = writeln!(out, "{head}");
    for r in rows {
        let mut line = format!("{:<10} {:>3} {:>2}", r.job.label(), r.job.backend, r.job.np);
        for c in Column::all() {
            let _ = write!(line, " {:>7}", secs(r.median(c, |m| Some(m.seconds))));
            if c.reconstructs() {
                let _ = write!(line, " {:>7}", secs(r.median(c, |m| m.reconstructed)));
            }
        }
        let susp = |i| {
            r.median(Column::Equalized(i), |m| m.suspensions.map(|s| s as f64))
                .map_or("-".to_owned(), |s| format!("{s:.0}"))
        };
        let _ = write!(
            line,
            " {:>8} {:>8} {:>8} {:>8} {:>11}",
            mib(r.largest(Column::Memory, |m| m.trace_bytes)),
            buffer_size(r.buffer),
            mib(r.largest(Column::Memory, |m| m.peak_rss)),
            mib(r.largest(Column::Equalized(0), |m| m.peak_rss)),
            format!("{}/{}/{}", susp(0), susp(1), susp(2))
        );
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "\nErrors |R(X) - T| / T, median over the repetitions' pairs; control |T' - T| / T"
    );
    let _ = writeln!(
        out,
        "{:<10} {:>3} {:>2} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>5}",
        "workload",
        "be",
        "np",
        "R(T1)",
        "R(T2)",
        "R(T3)",
        "R(Ts)",
        "R(Tl)",
        "R(Ta)",
        "control",
        "T/T0-1",
        "compute",
        "flush",
        "viol"
    );
    for r in rows {
        let e = |c| pct(r.error(c));
        let _ = writeln!(
            out,
            "{:<10} {:>3} {:>2} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>5}",
            r.job.label(),
            r.job.backend,
            r.job.np,
            e(Column::Equalized(0)),
            e(Column::Equalized(1)),
            e(Column::Equalized(2)),
            e(Column::Static),
            e(Column::Local),
            e(Column::NoResync),
            e(Column::Control),
            pct(r.overhead()),
            pct(r.compute_slowdown()),
            pct(r.flush_slowdown()),
            r.violations().map_or("-".into(), |v| v.to_string())
        );
    }
    let _ = writeln!(
        out,
        "(compute: matmul's block products under T1 against T; flush: under T1, a block \
         product right after a broadcast during which its rank wrote its trace against the \
         others, mean against mean; viol: clock-condition violations after correction and \
         unpaired messages, the most in one trace)\n\nTargets:"
    );
    for t in targets {
        let _ = writeln!(out, "  {:<10} {}: {}", t.verdict(), t.what, t.detail);
    }
    out
}

fn to_json(plan: &Plan, rows: &[Row], targets: &[Target], load: &str) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let columns: serde_json::Map<String, Value> = r
                .runs
                .iter()
                .map(|(c, ms)| {
                    let runs: Vec<Value> = ms.iter().map(Measured::to_json).collect();
                    let v = json!({
                        "seconds": r.median(*c, |m| Some(m.seconds)),
                        "reconstructed_seconds": r.median(*c, |m| m.reconstructed),
                        "error": r.error(*c),
                        "runs": runs,
                    });
                    (c.name(), v)
                })
                .collect();
            json!({
                "workload": r.job.label(),
                "backend": r.job.backend,
                "ranks": r.job.np,
                "buffer_bytes": r.buffer,
                "columns": columns,
                "overhead": r.overhead(),
                "compute_slowdown": r.compute_slowdown(),
                "flush_slowdown": r.flush_slowdown(),
                "violations": r.violations(),
            })
        })
        .collect();
    let targets: Vec<Value> = targets
        .iter()
        .map(|t| {
            json!({
                "target": t.what,
                "met": t.met,
                "verdict": t.verdict(),
                "detail": t.detail,
            })
        })
        .collect();
    json!({
        "benchmark": "trace",
        "load": load,
        "repetitions": plan.reps,
        "buffer": plan.buffer.as_deref().unwrap_or("auto"),
        "memory_buffer": plan.memory_buffer,
        "thresholds": plan.thresholds,
        "static": plan.static_z,
        "rows": rows,
        "targets": targets,
    })
}
