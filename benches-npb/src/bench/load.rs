//! `mttl-bench load`: the runtime under load, checking that nothing is
//! lost and that memory stays bounded. Not a speed benchmark (its rates are
//! reported, not compared): a load test whose figures are checksums and
//! resident-set sizes.
//!
//! | scenario   | what runs (default size)                                                     |
//! |------------|------------------------------------------------------------------------------|
//! | `ainvoke`  | 1,000,000 ainvokes, every rank calling every other rank, 256 in flight per rank |
//! | `threads`  | 20,000 live threads on rank 1: spawned there, then made by ainvokes from rank 0 |
//! | `transfer` | 1 GiB from rank 0 to rank 1: written into a global array, read back, sent as invoke arguments |
//! | `soak`     | rounds of the three (50,000 calls, 2,000 threads, 32 MiB) for `--duration` (600 s) |
//!
//! What is sent is a function of a seed and an index (`pattern`), so the
//! orchestrator computes what every rank must have received and checks it
//! against what the ranks observed: the callees' call counts and sums, the
//! callers' reply checksum, the threads' result checksums, the receiver's
//! checksum of the data. Memory is every rank's `VmHWM` and `VmRSS`
//! (`memory`), checked against bounds stated in the output.
//!
//! # One invocation, step by step
//!
//! 1. The process the user started (the *orchestrator*) resolves the sizes
//!    (`Plan`) and makes a private temporary directory.
//! 2. For each scenario it starts its own executable as a job of `--np`
//!    ranks on `--backend`: `mttl-bench load --worker SCENARIO --out FILE`
//!    and the sizes, as a one-run sweep of the
//!    [engine](crate::bench::sweep), which meters how busy other processes
//!    kept the machine meanwhile.
//! 3. In the job, rank 0 drives the scenario (`worker`), gathers every
//!    rank's memory and writes FILE; a rank that is not done within
//!    `--timeout` stops the job, naming how far it got.
//! 4. The orchestrator reads FILE, recomputes the expected checksums
//!    itself and checks them and the memory bounds (`report`), prints a
//!    table (or one JSON document with `--json`) and exits non-zero if a
//!    job failed or a check did not pass.

mod memory;
mod pattern;
mod report;
mod worker;

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use mttl_comm::launch::{BackendKind, JobSpec};

use self::report::ScenarioReport;
pub use crate::bench::error::BenchError;
use crate::bench::sweep::jobs::{self, Workers};
use crate::bench::sweep::report::print;
use crate::bench::sweep::Sweeps;

/// The seed of every scenario's data unless `--seed` says otherwise.
const DEFAULT_SEED: u64 = 0x6d74_746c_6c6f_6164;

/// A load scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Scenario {
    /// Many ainvokes from every rank to every other.
    Ainvoke,
    /// Many live threads on one rank.
    Threads,
    /// A large transfer between two ranks.
    Transfer,
    /// The three, smaller, repeated for `--duration`.
    Soak,
}

impl Scenario {
    /// The name `--scenarios` takes.
    fn name(self) -> &'static str {
        match self {
            Scenario::Ainvoke => "ainvoke",
            Scenario::Threads => "threads",
            Scenario::Transfer => "transfer",
            Scenario::Soak => "soak",
        }
    }
}

/// A fault a worker injects on purpose, so that the tests can show that
/// the checks catch it (hidden option `--fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Fault {
    /// Rank 1's first ainvoke is answered but its value is not counted, as
    /// if the request had been lost and the reply made up.
    LoseCall,
    /// Rank 1's first ainvoke is never answered.
    DropReply,
    /// One bit of the transferred data is flipped where it lands.
    FlipBit,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::LoseCall => "lose-call",
            Fault::DropReply => "drop-reply",
            Fault::FlipBit => "flip-bit",
        }
    }
}

/// Arguments of `mttl-bench load`.
#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Scenarios to run, comma-separated: ainvoke, threads, transfer, soak.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ainvoke,threads,transfer"
    )]
    scenarios: Vec<Scenario>,
    /// Ranks per job (at least 2).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=256))]
    np: u32,
    /// The backend: tcp, or mpi (needs the cargo feature `mpi`).
    #[arg(long, default_value = "tcp", value_parser = parse_backend)]
    backend: BackendKind,
    /// ainvokes in all [default: 1000000; soak: 50000 per round].
    #[arg(long)]
    ainvokes: Option<u64>,
    /// ainvokes each rank keeps in flight.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    window: u64,
    /// Live threads on rank 1 [default: 20000; soak: 2000 per round].
    #[arg(long)]
    threads: Option<u64>,
    /// Bytes transferred, e.g. 64M, 1G [default: 1G; soak: 32M per round].
    #[arg(long, value_parser = parse_bytes)]
    bytes: Option<u64>,
    /// Bytes per write, read or invoke of the transfer.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    chunk: u64,
    /// Rounds of the ainvoke and threads scenarios (memory is compared
    /// between them).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=1000))]
    rounds: u64,
    /// How long the soak runs, in seconds.
    #[arg(long, default_value_t = 600.0, value_name = "SECS", value_parser = parse_secs)]
    duration: f64,
    /// How far a rank's resident set may grow between rounds, in MiB.
    #[arg(long, default_value_t = 64)]
    rss_tolerance_mib: u64,
    /// Seed of the data sent.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Seconds after which a job that is not done is stopped and its ranks
    /// say how far they got [default: 600; soak: duration + 600].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    timeout: Option<f64>,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Inject this fault (for the tests of the checks themselves).
    #[arg(long, hide = true)]
    fault: Option<Fault>,
    /// Run as a worker rank of this scenario (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    worker: Option<Scenario>,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    out: Option<PathBuf>,
}

fn parse_backend(text: &str) -> Result<BackendKind, String> {
    text.parse()
}

/// Parses a number of seconds, more than 0 and at most a week.
fn parse_secs(text: &str) -> Result<f64, String> {
    match jobs::parse_seconds(text, 7 * 86400)? {
        secs if secs > 0.0 => Ok(secs),
        _ => Err(format!("{text:?} is not a number of seconds above 0")),
    }
}

/// Parses a byte count such as `4096`, `64M`, `1GiB`: a positive multiple
/// of 8 (the transfer moves 64-bit words), at most 64 GiB.
fn parse_bytes(text: &str) -> Result<u64, String> {
    match jobs::parse_size(text, 64 << 30)? {
        bytes if bytes % 8 == 0 => Ok(bytes),
        _ => Err(format!("{text:?} is not a multiple of 8 bytes")),
    }
}

/// The sizes one scenario runs with, every default resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    ainvokes: u64,
    window: u64,
    rounds: u64,
    threads: u64,
    bytes: u64,
    chunk: u64,
    duration: f64,
    rss_tolerance_mib: u64,
    seed: u64,
    timeout: f64,
    fault: Option<Fault>,
}

impl Plan {
    fn new(args: &LoadArgs, scenario: Scenario) -> Plan {
        let soak = scenario == Scenario::Soak;
        let pick = |given: Option<u64>, full: u64, per_round: u64| {
            given.unwrap_or(if soak { per_round } else { full })
        };
        Plan {
            ainvokes: pick(args.ainvokes, 1_000_000, 50_000),
            window: args.window,
            rounds: args.rounds,
            threads: pick(args.threads, 20_000, 2_000),
            bytes: pick(args.bytes, 1 << 30, 32 << 20),
            chunk: args.chunk,
            duration: args.duration,
            rss_tolerance_mib: args.rss_tolerance_mib,
            seed: args.seed,
            timeout: args
                .timeout
                .unwrap_or(if soak { args.duration + 600.0 } else { 600.0 }),
            fault: args.fault,
        }
    }

    /// The worker's command line for `scenario`, writing to `out`.
    fn worker_args(&self, scenario: Scenario, out: &Path) -> Vec<String> {
        let mut args = vec![
            "load".to_owned(),
            "--worker".to_owned(),
            scenario.name().to_owned(),
        ];
        let mut arg = |name: &str, value: String| {
            args.push(format!("--{name}"));
            args.push(value);
        };
        arg("out", out.to_string_lossy().into_owned());
        arg("ainvokes", self.ainvokes.to_string());
        arg("window", self.window.to_string());
        arg("rounds", self.rounds.to_string());
        arg("threads", self.threads.to_string());
        arg("bytes", self.bytes.to_string());
        arg("chunk", self.chunk.to_string());
        arg("duration", self.duration.to_string());
        arg("rss-tolerance-mib", self.rss_tolerance_mib.to_string());
        arg("seed", self.seed.to_string());
        arg("timeout", self.timeout.to_string());
        if let Some(fault) = self.fault {
            arg("fault", fault.name().to_owned());
        }
        args
    }
}

/// Runs `mttl-bench load`: the orchestrator, or a worker rank when started
/// with `--worker`.
pub fn run(args: LoadArgs) -> Result<(), BenchError> {
    match (args.worker, &args.out) {
        (Some(scenario), Some(out)) => worker::run(scenario, &Plan::new(&args, scenario), out),
        _ => orchestrate(&args),
    }
}

/// Steps 1, 2 and 4 of the module docs.
fn orchestrate(args: &LoadArgs) -> Result<(), BenchError> {
    if args.backend == BackendKind::Mpi && !cfg!(feature = "mpi") {
        return Err(BenchError::Usage(
            "--backend mpi needs the cargo feature `mpi`; rebuild with `cargo run --release \
             -p benches-npb --features mpi --bin mttl-bench -- load --backend mpi`"
                .into(),
        ));
    }
    let mut scenarios: Vec<Scenario> = Vec::new();
    for &s in &args.scenarios {
        if !scenarios.contains(&s) {
            scenarios.push(s);
        }
    }
    let workers = Workers::new("load")?;
    let mut reports = Vec::new();
    let mut failed_job = None;
    for scenario in scenarios {
        let plan = Plan::new(args, scenario);
        let sweeps = Sweeps {
            bench: "mttl-bench load",
            configs: &[scenario],
            reps: 1,
            settle: 0.0,
            retries: 0,
            keep_going: false,
        };
        let swept = sweeps.run(
            |s| s.name().to_owned(),
            |&scenario, _, _| {
                let out = workers.out(scenario.name());
                let spec = JobSpec {
                    backend: args.backend,
                    ..JobSpec::new(args.np as usize, workers.program())
                        .args(plan.worker_args(scenario, &out))
                };
                let failed = match workers.launch(scenario.name(), false, &spec) {
                    Ok(()) => None,
                    Err(e @ BenchError::WorkerFailed { .. }) => Some(e),
                    Err(e) => return Err(e),
                };
                // A failed job may still have written what it saw.
                let results = match out.exists() {
                    true => Some(jobs::read_json(scenario.name(), &out)?),
                    false => None,
                };
                Ok((results, failed))
            },
        )?;
        for run in swept.runs.into_iter().flat_map(|(_, runs)| runs) {
            let (results, failed) = run.result;
            if let Some(results) = results {
                reports.push(ScenarioReport::new(scenario, &plan, results, run.busy));
            }
            failed_job = failed_job.or(failed);
        }
        if failed_job.is_some() {
            break;
        }
    }
    if args.json {
        print(&format!("{:#}\n", report::to_json(args, &reports)))?;
    } else {
        print(&report::text(args, &reports))?;
    }
    if let Some(e) = failed_job {
        return Err(e);
    }
    let failing: Vec<&str> = reports
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.scenario.name())
        .collect();
    if failing.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Check(format!(
            "checks failed in: {} (see the checks above)",
            failing.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_name_themselves_as_clap_does() {
        for s in [
            Scenario::Ainvoke,
            Scenario::Threads,
            Scenario::Transfer,
            Scenario::Soak,
        ] {
            assert_eq!(Scenario::from_str(s.name(), false), Ok(s));
        }
        for f in [Fault::LoseCall, Fault::DropReply, Fault::FlipBit] {
            assert_eq!(Fault::from_str(f.name(), false), Ok(f));
        }
    }

    #[test]
    fn byte_counts_parse_with_binary_units() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("12").is_err(), "not a multiple of 8");
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("1T").is_err());
    }
}
