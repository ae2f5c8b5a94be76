//! `mttl-bench comm`: round-trip latency and streaming bandwidth between two
//! ranks on this machine, for mttl's backends and for raw MPI, side by side.
//!
//! The configurations are the rows of [`Config`]: mttl's TCP and MPI
//! backends through `AnyComm`, plain rsmpi on Open MPI's default and TCP
//! transports, and two that take turns in one job.
//!
//! `mpi-vs-raw` compares the first two in the same processes, on the same
//! cores, minutes apart at most: separate jobs on a shared VM can run in
//! fast or slow modes that last a whole job, which a comparison of two jobs
//! cannot tell from a difference between the stacks; `raw-vs-raw` is its
//! control.
//!
//! The MPI configurations exist only in builds with the cargo feature `mpi`.
//!
//! # One invocation, step by step
//!
//! 1. The orchestrator runs the sweeps of the [engine](crate::bench::sweep):
//!    each run is a two-rank job of this program,
//!    `mttl-bench comm --worker CONFIG --out FILE --sizes ...`
//!    (`raw-mpi-tcp` also passes `OMPI_MCA_pml=ob1` and
//!    `OMPI_MCA_btl=tcp,self` to its ranks; `mpi-vs-raw` and `raw-vs-raw`
//!    let the second stack go first every other sweep, `--second-first`).
//! 2. Both worker ranks (`worker.rs`) join the job, refusing one of the
//!    wrong kind or size, run the loops of `measure.rs` for every size, and
//!    rank 0 writes its samples to FILE.
//! 3. After the last sweep `report.rs` keeps, per configuration and size,
//!    the best undisturbed run, and for mttl's backends against their
//!    references the paired figures and the one-job ratios, prints the
//!    tables, how it measured and the targets check (with `--json`: one
//!    JSON document on stdout, the tables on stderr).

pub(super) mod endpoint;
mod measure;
mod report;
mod worker;

use self::report::Summary;
pub use crate::bench::error::BenchError;
use crate::bench::sweep::jobs::{self, bench_configs, SweepArgs, OMPI_TCP};
use crate::bench::sweep::report::{self as rep, Report};

/// The default sizes: 8 B to 16 MiB.
const DEFAULT_SIZES: &[u64] = &[
    8,
    64,
    512,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
    16 << 20,
];

/// How many times a disturbed run is repeated within one sweep.
const RETRIES: usize = 2;

/// The largest size accepted (bandwidth windows hold several in memory).
const MAX_SIZE: u64 = 256 << 20;

bench_configs! {
    /// A communication stack to measure.
    pub enum Config {
        /// mttl's TCP backend, launched by mttl's launcher.
        Tcp => "tcp", "mttl-tcp", false, &[],
            "mttl TCP backend (AnyComm), launched by mttl_comm::launch::run";
        /// Plain rsmpi over Open MPI's TCP transport.
        RawMpiTcp => "raw-mpi-tcp", "ompi-tcp", true, OMPI_TCP,
            "raw rsmpi Send/Recv/Isend, no mttl, Open MPI's TCP transport \
             (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self)";
        /// mttl's MPI backend, launched by `mpirun`.
        Mpi => "mpi", "mttl-mpi", true, &[], "mttl MPI backend (AnyComm), launched by mpirun";
        /// Plain rsmpi, Open MPI's default transport.
        RawMpi => "raw-mpi", "raw-mpi", true, &[],
            "raw rsmpi Send/Recv/Isend, no mttl, Open MPI's default transport (shared memory)";
        /// mttl's MPI backend and plain rsmpi taking turns in one job.
        MpiVsRaw => "mpi-vs-raw", "1 job", true, &[],
            "mttl MPI backend and raw rsmpi in one mpirun job, taking turns at each size \
             (mpi, raw, raw, mpi, ...); the ratio is the job's median mpi sample over its \
             median raw sample";
        /// Plain rsmpi against itself, taking turns in one job: the control.
        RawVsRaw => "raw-vs-raw", "control", true, &[],
            "raw rsmpi against itself in one mpirun job (two endpoints with buffers of their \
             own), taking turns as mpi-vs-raw does: the control of the 1 job column";
    }
}

/// Arguments of `mttl-bench comm`.
#[derive(Debug, Clone, clap::Args)]
pub struct CommArgs {
    /// Message sizes in bytes, comma-separated; K, M and G (or KiB, MiB,
    /// GiB) multiply by 1024, 1024² and 1024³. Default: 8,64,512,4K,16K,64K,
    /// 256K,1M,4M,16M.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Option<Vec<u64>>,
    #[command(flatten)]
    sweep: SweepArgs<Config>,
    /// A worker of `mpi-vs-raw` or `raw-vs-raw` lets the second stack take
    /// the first turn (odd sweeps; see `measure::interleave`).
    #[arg(long, hide = true)]
    second_first: bool,
}

fn parse_size(text: &str) -> Result<u64, String> {
    jobs::parse_size(text, MAX_SIZE)
}

/// Runs `mttl-bench comm`: the orchestrator, or a worker rank when started
/// with `--worker`.
pub fn run(args: CommArgs) -> Result<(), BenchError> {
    let sizes = args.sizes.clone().unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    if let Some((config, out)) = args.sweep.worker() {
        return worker::worker(config, &sizes, out, args.second_first);
    }
    let size_list: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let reps = args.sweep.reps;
    let swept = args.sweep.sweep(
        "comm",
        Config::ALL,
        RETRIES,
        |config, sweep| {
            let mut extra = vec!["--sizes".to_owned(), size_list.join(",")];
            if sweep % 2 == 1 && matches!(config, Config::MpiVsRaw | Config::RawVsRaw) {
                extra.push("--second-first".to_owned());
            }
            extra
        },
        |_| None,
    )?;
    let summary = Summary::new(&sizes, &swept.runs);
    let mut report = Report::new("comm", reps, Config::ALL, &swept, RETRIES);
    report.method = method_lines(
        reps,
        args.sweep.settle(),
        args.sweep.hosts.as_deref(),
        &swept.configs(),
    );
    report.tables = summary.tables();
    report.targets = summary.targets();
    report.doc = summary.to_json();
    report.emit(args.sweep.json, true)
}

/// How the figures were measured, one sentence per line.
fn method_lines(reps: u32, settle: f64, hosts: Option<&str>, configs: &[Config]) -> Vec<String> {
    let (ms, samples) = (measure::SAMPLE_TIME.as_millis(), measure::SAMPLES);
    let mut lines = vec![
        rep::sweeps_line(reps, settle, hosts),
        format!(
            "Round trip: ping-pong of blocking send and receive, the echo sent back as received; \
             a sample times N round trips together, N calibrated in the warm-up so that a sample \
             takes about {ms} ms; figure = the lowest over the sweeps of the median of {samples} \
             samples."
        ),
        format!(
            "Bandwidth: rank 0 starts a window of W non-blocking sends (mttl nsend / MPI_Isend; \
             W = 64 up to 64K, then 4 MiB / size, at least 2) and waits for them, rank 1 \
             receives all W and acknowledges with one 8-byte message; timed from first send to \
             acknowledgement; a sample is as many windows as take about {ms} ms; figure = the \
             highest over the sweeps of the median of {samples} samples. Every configuration \
             streams freshly written data: one buffer per message (mttl's nsend consumes owned \
             buffers; raw MPI rewrites reused ones), filled between windows, outside the timer."
        ),
    ];
    let has = |c: Config| configs.contains(&c);
    if (has(Config::Tcp) && has(Config::RawMpiTcp)) || (has(Config::Mpi) && has(Config::RawMpi)) {
        lines.insert(
            1,
            "Ratios (tcp/ompi, mpi/raw) divide the two best figures; paired is the median over \
             the sweeps of each sweep's ratio (the two jobs of a sweep ran one after the other), \
             which one lucky job of either side moves less."
                .to_owned(),
        );
    }
    if has(Config::MpiVsRaw) || has(Config::RawVsRaw) {
        let turns: Vec<&str> = measure::TURNS
            .iter()
            .map(|&second| if second { "second" } else { "first" })
            .collect();
        lines.push(format!(
            "1 job (mpi-vs-raw): mttl's MPI backend (first) and raw rsmpi (second) in the same \
             two processes, taking turns at each size ({}; the other way round every other \
             sweep, as the side that goes first touches its memory first), each turn a full \
             round-trip and bandwidth measurement as above; the job's ratio divides the median \
             of the first's samples by that of the second's, and the column is the median of \
             the sweeps' ratios. Separate jobs on a shared VM can run in faster or slower modes \
             for their whole life; in one job both stacks meet the same one.",
            turns.join(", ")
        ));
        lines.push(
            "control (raw-vs-raw): the same with raw rsmpi on both sides, two endpoints with \
             buffers of their own; how far it strays from 1.00 shows how far the 1 job column \
             can be trusted at that size (which memory a large message's buffers get decides \
             much of its speed)."
                .to_owned(),
        );
    }
    lines.extend(rep::config_lines(configs, true));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_name_themselves_as_clap_does() {
        jobs::assert_named_as_clap_does::<Config>();
        assert!(parse_size("1G").is_err() && parse_size("16M").is_ok());
    }
}
