//! `mttl-bench rwrite`: remote-write throughput between two ranks on this
//! machine, the paper's fig. 7: mttl's `nwrite` into the other rank's global
//! array against raw MPI send/receive, NetPIPE style, from 8 B to 1 MiB.
//!
//! | configuration | what runs                                                | launched by                            |
//! |---------------|----------------------------------------------------------|----------------------------------------|
//! | `tcp`         | an mttl program: `nwrite_slice` + `barrier`, TCP backend | [`launch::run`](mttl::comm::launch::run), TCP                   |
//! | `mpi`         | the same on the MPI backend                              | [`launch::run`](mttl::comm::launch::run), MPI (`mpirun`)        |
//! | `mpi-owned`   | the same with `nwrite_owned` of a shared buffer          | [`launch::run`](mttl::comm::launch::run), MPI (`mpirun`)        |
//! | `raw-mpi`     | plain rsmpi `Send` / `Recv` + `Barrier`, no mttl         | `mpirun`, Open MPI's default transport |
//! | `raw-mpi-tcp` | the same over Open MPI's TCP transport                   | `mpirun`, `pml ob1`, `btl tcp,self`    |
//!
//! The transports, their jobs, the size syntax, the wait for a quiet
//! machine and the errors are `mttl-bench comm`'s ([`super::comm`]); what
//! runs in a job is [`measure`] on a transfer of
//! [`worker`]. The MPI configurations exist only in builds
//! with the cargo feature `mpi`.
//!
//! # One invocation, step by step
//!
//! 1. The process the user started (the *orchestrator*) reads the sizes and
//!    configurations and makes a private temporary directory.
//! 2. For each of the K sweeps (`--reps`), and in each sweep for every
//!    configuration, in an order rotated by one per sweep (so no
//!    configuration always runs first on this shared, noisy machine), it
//!    waits up to `--settle` seconds for other processes to leave the CPUs
//!    idle (`common::cpu_load::settle`), then starts its own executable as a two-rank
//!    job: `mttl-bench rwrite --worker CONFIG --out FILE --sizes ...`.
//! 3. Both worker ranks run the sweep; rank 0 writes its samples to FILE
//!    ([`results`]).
//! 4. The orchestrator reads FILE. A job that fails stops the benchmark
//!    with the job's exit status. A job during which other processes kept
//!    more than [`BUSY_WARNING`] CPU busy (`common::cpu_load::Meter`) is *disturbed*: it
//!    is repeated, up to [`RETRIES`] times, and its figures count only if no
//!    undisturbed run of that configuration exists.
//! 5. After the last sweep it keeps, per configuration and size, the best
//!    undisturbed run ([`report`]), prints the tables, how it
//!    measured and the targets check (or one JSON document with `--json`),
//!    writes the CSV file and the figure ([`plot`]) beside it,
//!    and removes the temporary directory.

mod measure;
mod plot;
mod report;
mod results;
mod worker;

use std::path::{Path, PathBuf};
use std::time::Duration;

use self::report::{size_label, Summary};
use self::results::RunResult;
use self::worker::Task;
use clap::ValueEnum;

use super::comm::{self, BenchError};
use crate::bench::common::jobs::{self, BenchConfig, TempDir};
use crate::bench::common::plot::{write_png, write_svg};
use crate::bench::common::report::{print, push_how_measured, spin_us_setting};
use crate::bench::common::sweep::{
    disturbance_notes, not_measured_note, JobLog, Sweeps, Swept, BUSY_WARNING,
};
use crate::bench::results_file::ResultsFile;

/// The default sizes: every power of 2 from 8 B to 1 MiB.
const DEFAULT_SIZES: (u32, u32) = (3, 20);

/// How many times a disturbed run is repeated within one sweep.
const RETRIES: usize = 2;

/// The largest size accepted.
const MAX_SIZE: usize = 64 << 20;

/// Where the CSV file goes by default; the figure goes beside it.
const DEFAULT_CSV: &str = "target/mttl-bench/rwrite.csv";

/// The command that rebuilds this benchmark with the MPI configurations.
const MPI_BUILD_HINT: &str =
    "cargo run --release -p benches-npb --features mpi --bin mttl-bench -- rwrite";

/// A configuration of `mttl-bench rwrite`: a transport of `mttl-bench
/// comm` and, for mttl on MPI, which write it measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum)]
pub enum Config {
    /// mttl's TCP backend, launched by mttl's launcher: `nwrite_slice`.
    Tcp,
    /// mttl's MPI backend, launched by `mpirun`: `nwrite_slice`.
    Mpi,
    /// mttl's MPI backend: `nwrite_owned`, several writes in flight.
    MpiOwned,
    /// Plain rsmpi, Open MPI's default transport.
    RawMpi,
    /// Plain rsmpi over Open MPI's TCP transport.
    RawMpiTcp,
}

impl BenchConfig for Config {
    fn name(self) -> &'static str {
        match self {
            Config::MpiOwned => "mpi-owned",
            other => other.transport().name(),
        }
    }

    fn needs_mpi(self) -> bool {
        self.transport().needs_mpi()
    }
}

impl Config {
    /// Every configuration, in table order.
    const ALL: [Config; 5] = [
        Config::Tcp,
        Config::RawMpiTcp,
        Config::Mpi,
        Config::MpiOwned,
        Config::RawMpi,
    ];

    /// The communication stack and launch, as `mttl-bench comm` has it.
    fn transport(self) -> comm::Config {
        match self {
            Config::Tcp => comm::Config::Tcp,
            Config::Mpi | Config::MpiOwned => comm::Config::Mpi,
            Config::RawMpi => comm::Config::RawMpi,
            Config::RawMpiTcp => comm::Config::RawMpiTcp,
        }
    }

    /// The column header in the tables.
    pub(super) fn column(self) -> &'static str {
        match self {
            Config::MpiOwned => "mttl-owned",
            other => other.transport().column(),
        }
    }

    /// One line saying what runs.
    fn description(self) -> &'static str {
        match self {
            Config::Tcp => {
                "an mttl program on the TCP backend: rank 0 nwrite_slices into rank 1's \
                 GlobalArray<u8>, both call barrier (mttl_comm::launch::run)"
            }
            Config::Mpi => "the same mttl program on the MPI backend (mpirun)",
            Config::MpiOwned => {
                "the same on the MPI backend with nwrite_owned of one shared buffer (an Arc), \
                 which returns at once, so up to mttl::MAX_OWNED_SENDS writes are in flight"
            }
            Config::RawMpi => {
                "raw rsmpi: rank 0 MPI_Send, rank 1 MPI_Recv into one buffer, both MPI_Barrier; \
                 Open MPI's default transport (shared memory)"
            }
            Config::RawMpiTcp => {
                "the same raw rsmpi program over Open MPI's TCP transport \
                 (OMPI_MCA_pml=ob1, OMPI_MCA_btl=tcp,self)"
            }
        }
    }
}

/// Arguments of `mttl-bench rwrite`.
#[derive(Debug, Clone, clap::Args)]
pub struct RwriteArgs {
    /// Print one JSON document on stdout instead of the tables.
    #[arg(long)]
    json: bool,
    /// Transfer sizes in bytes, comma-separated; K and M (or KiB, MiB)
    /// multiply by 1024 and 1024². Default: every power of 2 from 8 to 1M.
    #[arg(long, value_delimiter = ',', value_parser = parse_size)]
    sizes: Option<Vec<usize>>,
    /// Sweeps per configuration; the best is kept.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Configurations to measure, comma-separated. Default: every one this
    /// build has (the MPI ones need the cargo feature `mpi`).
    #[arg(long, value_delimiter = ',')]
    backends: Option<Vec<Config>>,
    /// Transfers per window (between two barriers). Default: 16 MiB worth,
    /// 8 to 1024.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65536))]
    window: Option<u64>,
    /// About how long one timed sample takes, in milliseconds.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    sample_ms: u64,
    /// Before each job, wait up to this many seconds for other processes to
    /// leave the CPUs idle (this machine may be shared).
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = comm::parse_settle)]
    settle: f64,
    /// The CSV file to write, or a directory to write rwrite.csv into; the
    /// figure goes beside it (.svg and .png). Default:
    /// target/mttl-bench/rwrite.csv.
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
    /// Run as a worker rank of this configuration (used by the orchestrator).
    #[arg(long, hide = true, requires = "out")]
    worker: Option<Config>,
    /// Where a worker's rank 0 writes its results.
    #[arg(long, hide = true)]
    out: Option<PathBuf>,
}

/// Parses a size as `mttl-bench comm` does, up to [`MAX_SIZE`].
fn parse_size(text: &str) -> Result<usize, String> {
    let size = comm::parse_size(text)?;
    if size > MAX_SIZE {
        return Err(format!(
            "{text:?} is larger than the largest transfer measured, {}",
            size_label(MAX_SIZE)
        ));
    }
    Ok(size)
}

/// Runs `mttl-bench rwrite`: the orchestrator, or a worker rank when
/// started with `--worker`.
pub fn run(args: RwriteArgs) -> Result<(), BenchError> {
    let task = Task {
        sizes: args.sizes.clone().unwrap_or_else(|| {
            (DEFAULT_SIZES.0..=DEFAULT_SIZES.1)
                .map(|k| 1usize << k)
                .collect()
        }),
        window: args.window.map(|w| w as usize),
        sample_time: Duration::from_millis(args.sample_ms),
    };
    match (args.worker, &args.out) {
        (Some(config), Some(out)) => worker::run(config, &task, out),
        _ => orchestrate(&args, &task),
    }
}

/// The configurations asked for, checked against this build.
fn chosen_configs(args: &RwriteArgs) -> Result<Vec<Config>, BenchError> {
    jobs::chosen_configs(args.backends.as_deref(), &Config::ALL, MPI_BUILD_HINT)
}

/// Where the CSV file and the figure go.
#[derive(Debug, Clone, PartialEq)]
struct OutputFiles {
    csv: PathBuf,
    svg: PathBuf,
    png: PathBuf,
}

impl OutputFiles {
    /// From `--csv`: a file, or a directory (existing, or written with a
    /// trailing `/`) to hold `rwrite.csv`.
    fn new(csv: Option<&Path>) -> OutputFiles {
        let csv = match csv {
            None => PathBuf::from(DEFAULT_CSV),
            Some(p) if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') => {
                p.join("rwrite.csv")
            }
            Some(p) => p.to_owned(),
        };
        OutputFiles {
            svg: csv.with_extension("svg"),
            png: csv.with_extension("png"),
            csv,
        }
    }

    /// Writes the CSV text and both pictures.
    fn write(&self, csv_text: &str, figure: &plot::Figure) -> Result<(), BenchError> {
        if let Some(dir) = self.csv.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
                what: "create the output directory",
                path: dir.to_owned(),
                source,
            })?;
        }
        std::fs::write(&self.csv, csv_text).map_err(|source| BenchError::Io {
            what: "write the CSV file",
            path: self.csv.clone(),
            source,
        })?;
        write_svg(&self.svg, figure)?;
        write_png(&self.png, figure)?;
        Ok(())
    }
}

/// The figure: every configuration's throughput, every mttl
/// configuration's ratio to its reference, the targets as guides.
fn figure(summary: &Summary, title: String) -> plot::Figure {
    let line = |config: Config, y: &dyn Fn(usize) -> Option<f64>| plot::Line {
        config,
        points: summary
            .sizes
            .iter()
            .filter_map(|&s| Some((s as f64, y(s)?)))
            .collect(),
    };
    plot::Figure {
        title,
        lines: summary
            .configs
            .iter()
            .map(|&c| line(c, &|s| Some(summary.get(c, s)?.mb_per_s())))
            .collect(),
        ratios: summary
            .configs
            .iter()
            .map(|&c| line(c, &|s| summary.ratio(c, s)))
            .filter(|l| !l.points.is_empty())
            .collect(),
        guides: vec![report::TARGET_SMALL.1, report::TARGET_LARGE.1],
    }
}

/// Steps 1 to 5 of the module docs.
fn orchestrate(args: &RwriteArgs, task: &Task) -> Result<(), BenchError> {
    let configs = chosen_configs(args)?;
    let files = OutputFiles::new(args.csv.as_deref());
    let program = jobs::this_program()?;
    let dir = TempDir::new("rwrite")?;
    let sweeps = Sweeps {
        bench: "rwrite",
        configs: &configs,
        reps: args.reps,
        settle: args.settle,
        retries: RETRIES,
        name_width: 12,
    };
    let Swept { runs, log } = sweeps.run(
        |config, rep, attempt| {
            let out = dir
                .path()
                .join(format!("{}-{rep}-{attempt}.json", config.name()));
            run_job(config, &program, &out, task, args.sample_ms)
        },
        |result, disturbed| result.disturbed = disturbed,
    )?;
    let summary = Summary::new(&task.sizes, &runs);
    let title = format!(
        "Remote-write throughput, 2 ranks, best of {} sweep(s)",
        args.reps
    );
    files.write(&summary.to_csv(), &figure(&summary, title))?;
    let method = method_lines(args, &configs);
    let notes = notes(&configs, &log);
    if args.json {
        let mut doc = summary.to_json();
        doc["benchmark"] = "rwrite".into();
        doc["reps"] = args.reps.into();
        doc["method"] = method.clone().into();
        doc["notes"] = notes.clone().into();
        doc["files"] = serde_json::json!({
            "csv": files.csv, "svg": files.svg, "png": files.png,
        });
        doc["jobs"] = log.iter().map(|j| j.to_json()).collect();
        print(&format!("{doc:#}\n"))
    } else {
        let mut text = summary.tables(args.reps);
        push_how_measured(&mut text, &method, &notes);
        text.push_str(&summary.targets_text());
        text.push_str(&format!(
            "\nFiles: {}, {}, {}\n",
            files.csv.display(),
            files.svg.display(),
            files.png.display()
        ));
        print(&text)
    }
}

/// Step 2 for one job, and step 4's reading of its results.
fn run_job(
    config: Config,
    program: &Path,
    out: &Path,
    task: &Task,
    sample_ms: u64,
) -> Result<RunResult, BenchError> {
    let sizes = task
        .sizes
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut worker_args = vec![
        "rwrite".to_owned(),
        "--worker".to_owned(),
        config.name().to_owned(),
        "--out".to_owned(),
        out.to_string_lossy().into_owned(),
        "--sizes".to_owned(),
        sizes,
        "--sample-ms".to_owned(),
        sample_ms.to_string(),
    ];
    if let Some(w) = task.window {
        worker_args.extend(["--window".to_owned(), w.to_string()]);
    }
    jobs::run_worker_job(config, &config.transport().job(program, worker_args))?;
    RunResult::read(config.name(), out)
}

/// How the figures were measured, one sentence per line.
fn method_lines(args: &RwriteArgs, configs: &[Config]) -> Vec<String> {
    let spin = spin_us_setting();
    let window = match args.window {
        Some(w) => format!("W = {w} transfers (--window)"),
        None => {
            "W = 16 MiB worth of transfers, 8 to 1024 (1024 up to 16 KiB, 16 at 1 MiB)".to_owned()
        }
    };
    let mut lines = vec![
        format!(
            "2 ranks on this machine; {} sweep(s) per configuration, configurations \
             alternated (order rotated each sweep); every sweep is a fresh job, started after \
             waiting up to {} s for other processes to use less than {BUSY_WARNING} CPU.",
            args.reps, args.settle
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
    for &c in configs {
        let mut line = format!("{}: {}", c.column(), c.description());
        if c == Config::Tcp {
            line.push_str(&format!("; MTTL_SPIN_US={spin}"));
        }
        lines.push(line);
    }
    lines
}

/// Remarks about what was not measured, and about busy neighbours.
fn notes(configs: &[Config], log: &[JobLog<Config>]) -> Vec<String> {
    let mut notes = disturbance_notes(configs, log, RETRIES);
    if !cfg!(feature = "mpi") {
        notes.push(format!(
            "This mttl-bench was built without the `mpi` feature, so only mttl's TCP backend \
             was measured and the targets were not checked. For the MPI configurations run \
             `{MPI_BUILD_HINT}`."
        ));
    } else {
        notes.extend(not_measured_note(&Config::ALL, configs));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("128M").is_err());
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn output_files_sit_side_by_side() {
        let files = OutputFiles::new(Some(Path::new("out/x.csv")));
        assert_eq!(files.svg, Path::new("out/x.svg"));
        assert_eq!(files.png, Path::new("out/x.png"));
        let dir = std::env::temp_dir();
        assert_eq!(OutputFiles::new(Some(&dir)).csv, dir.join("rwrite.csv"));
        assert_eq!(
            OutputFiles::new(Some(Path::new("new-dir/"))).csv,
            Path::new("new-dir/rwrite.csv")
        );
        assert_eq!(OutputFiles::new(None).csv, Path::new(DEFAULT_CSV));
    }
}
