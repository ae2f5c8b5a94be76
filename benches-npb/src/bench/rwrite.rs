//! `mttl-bench rwrite`: remote-write throughput between two ranks on this
//! machine, the paper's fig. 7: mttl's `nwrite` into the other rank's global
//! array against raw MPI send/receive, NetPIPE style, from 8 B to 1 MiB.
//!
//! The configurations are the rows of [`Config`]: `nwrite_slice` +
//! `barrier` in an mttl program on either backend (`mpi-owned`:
//! `nwrite_owned`), and plain rsmpi `Send` / `Recv` + `Barrier`.
//!
//! What runs in a job is [`measure`] on a transfer of [`worker`]. The MPI
//! configurations exist only in builds with the cargo feature `mpi`.
//!
//! # One invocation, step by step
//!
//! 1. The orchestrator runs the sweeps of the [engine](crate::bench::sweep):
//!    each run is a two-rank job of this program,
//!    `mttl-bench rwrite --worker CONFIG --out FILE --sizes ...`.
//! 2. Both worker ranks run the sweep; rank 0 writes its samples to FILE.
//! 3. After the last sweep it keeps, per configuration and size, the best
//!    undisturbed run ([`report`]), prints the tables, how it measured and
//!    the targets check (or one JSON document with `--json`), and writes
//!    the CSV file and the figure beside it.

mod measure;
mod report;
mod worker;

use std::path::PathBuf;
use std::time::Duration;

use self::report::Summary;
use self::worker::Task;
use super::comm::BenchError;
use crate::bench::sweep::jobs::{self, bench_configs, SweepArgs, OMPI_TCP};
use crate::bench::sweep::report::{self as rep, OutputFiles, Report};

/// How many times a disturbed run is repeated within one sweep.
const RETRIES: usize = 2;

/// The largest size accepted.
const MAX_SIZE: u64 = 64 << 20;

/// Where the CSV file goes by default; the figure goes beside it.
const DEFAULT_CSV: &str = "target/mttl-bench/rwrite.csv";

bench_configs! {
    /// A configuration of `mttl-bench rwrite`: a transport of `mttl-bench
    /// comm` and, for mttl on MPI, which write it measures.
    pub enum Config {
        /// mttl's TCP backend, launched by mttl's launcher: `nwrite_slice`.
        Tcp => "tcp", "mttl-tcp", false, &[],
            "an mttl program on the TCP backend: rank 0 nwrite_slices into rank 1's \
             GlobalArray<u8>, both call barrier (mttl_comm::launch::run)";
        /// Plain rsmpi over Open MPI's TCP transport.
        RawMpiTcp => "raw-mpi-tcp", "ompi-tcp", true, OMPI_TCP,
            "the same raw rsmpi program over Open MPI's TCP transport \
             (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self)";
        /// mttl's MPI backend, launched by `mpirun`: `nwrite_slice`.
        Mpi => "mpi", "mttl-mpi", true, &[], "the same mttl program on the MPI backend (mpirun)";
        /// mttl's MPI backend: `nwrite_owned`, several writes in flight.
        MpiOwned => "mpi-owned", "mttl-owned", true, &[],
            "the same on the MPI backend with nwrite_owned of one shared buffer (an Arc), \
             which returns at once, so up to mttl::MAX_OWNED_SENDS writes are in flight";
        /// Plain rsmpi, Open MPI's default transport.
        RawMpi => "raw-mpi", "raw-mpi", true, &[],
            "raw rsmpi: rank 0 MPI_Send, rank 1 MPI_Recv into one buffer, both MPI_Barrier; \
             Open MPI's default transport (shared memory)";
    }
}

/// Arguments of `mttl-bench rwrite`.
#[derive(Debug, Clone, clap::Args)]
pub struct RwriteArgs {
    /// Transfer sizes in bytes, comma-separated; K and M (or KiB, MiB)
    /// multiply by 1024 and 1024². Default: every power of 2 from 8 to 1M.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Option<Vec<u64>>,
    /// Transfers per window (between two barriers). Default: 16 MiB worth,
    /// 8 to 1024.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65536))]
    window: Option<u64>,
    /// About how long one timed sample takes, in milliseconds.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    sample_ms: u64,
    /// The CSV file to write, or a directory to write rwrite.csv into; the
    /// figure goes beside it (.svg and .png). Default:
    /// target/mttl-bench/rwrite.csv.
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
    #[command(flatten)]
    sweep: SweepArgs<Config>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    jobs::parse_size(text, MAX_SIZE)
}

/// Runs `mttl-bench rwrite`: the orchestrator, or a worker rank when
/// started with `--worker`.
pub fn run(args: RwriteArgs) -> Result<(), BenchError> {
    let sizes = args
        .sizes
        .clone()
        .unwrap_or_else(|| (3..=20).map(|k| 1 << k).collect());
    let task = Task {
        sizes: sizes.iter().map(|&s| s as usize).collect(),
        window: args.window.map(|w| w as usize),
        sample_time: Duration::from_millis(args.sample_ms),
    };
    if let Some((config, out)) = args.sweep.worker() {
        return worker::run(config, &task, out);
    }
    let files = OutputFiles::new(args.csv.as_deref(), DEFAULT_CSV, "rwrite");
    let size_list: Vec<String> = sizes.iter().map(u64::to_string).collect();
    let mut extra = vec![
        "--sizes".to_owned(),
        size_list.join(","),
        "--sample-ms".to_owned(),
        args.sample_ms.to_string(),
    ];
    if let Some(w) = args.window {
        extra.extend(["--window".to_owned(), w.to_string()]);
    }
    let swept = args.sweep.sweep(
        "rwrite",
        Config::ALL,
        RETRIES,
        |_, _| extra.clone(),
        |_| None,
    )?;
    let summary = Summary::new(&sizes, &swept.runs);
    let place = match &args.sweep.hosts {
        Some(hosts) => format!("across {hosts}"),
        None => "on this machine".to_owned(),
    };
    let title = format!(
        "Remote-write throughput, 2 ranks {place}, best of {} sweep(s)",
        args.sweep.reps
    );
    files.write(&summary.to_csv(), &summary.figure(title))?;
    let mut report = Report::new("rwrite", args.sweep.reps, Config::ALL, &swept, RETRIES);
    report.method = method_lines(&args, &swept.configs());
    report.tables = summary.tables(args.sweep.reps, &place);
    report.targets = summary.targets();
    let paths = [&files.csv, &files.svg, &files.png].map(|p| p.display().to_string());
    report.trailer = format!("\nFiles: {}\n", paths.join(", "));
    report.doc = summary.to_json();
    report.doc["files"] = files.to_json();
    report.emit(args.sweep.json, false)
}

/// How the figures were measured, one sentence per line.
fn method_lines(args: &RwriteArgs, configs: &[Config]) -> Vec<String> {
    let window = match args.window {
        Some(w) => format!("W = {w} transfers (--window)"),
        None => {
            "W = 16 MiB worth of transfers, 8 to 1024 (1024 up to 16 KiB, 16 at 1 MiB)".to_owned()
        }
    };
    let mut lines = vec![
        rep::sweeps_line(
            args.sweep.reps,
            args.sweep.settle(),
            args.sweep.hosts.as_deref(),
        ),
        format!(
            "A window is W transfers of S bytes from rank 0 to rank 1, then a barrier of both \
             ranks (mttl's barrier fences first, so every nwrite is applied when it returns); \
             {window}. Every transfer writes the same S bytes at the start of rank 1's buffer, \
             as NetPIPE reuses one buffer."
        ),
        format!(
            "{} untimed windows, then {} samples of as many windows as take about {} ms, \
             timed on rank 0 from its first transfer to the end of the window's barrier; a \
             sample is bytes moved over that time; figure = the highest over the sweeps of the \
             median of the samples, in MB/s (10^6 bytes/s).",
            measure::WARMUP_WINDOWS,
            measure::SAMPLES,
            args.sample_ms
        ),
        "Breakdown: rank 0's time inside the transfer calls (nwrite_slice returns once its \
         data is handed to the comm layer; nwrite_owned at once, unless MAX_OWNED_SENDS are \
         in flight; MPI_Send once its buffer may be reused), per transfer, and in the \
         barrier, per window."
            .to_owned(),
    ];
    lines.extend(rep::config_lines(configs, true));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded_and_configs_named_as_clap_does() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert!(parse_size("128M").is_err());
        jobs::assert_named_as_clap_does::<Config>();
    }
}
