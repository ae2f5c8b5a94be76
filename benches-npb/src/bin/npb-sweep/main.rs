//! `npb-sweep`: runs `npb` over kernels × classes × ranks × variants ×
//! backends, keeps the best of K runs of each, and writes CSV files, a
//! summary with the ratios between the variants and each rank's
//! communication, and two figures per kernel and class, as SVG and PNG.
//!
//! ```text
//! npb-sweep --kernels cg,is --classes A,B --ranks 1,2 --reps 3 --out sweep
//! ```
//!
//! One invocation, step by step:
//!
//! 1. Build the list of configurations, leaving out those that cannot run:
//!    the `mpi` variant on TCP, MPI in a build without the cargo feature
//!    `mpi`, and process counts NPB does not allow for the class.
//! 2. Run the sweeps of the engine ([`benches_npb::bench::sweep`]): for each
//!    of the K sweeps, every configuration once as
//!    `MTTL_STATS=1 npb KERNEL --class C -n N --variant V --backend B --json`
//!    (the `npb` beside this program), in an order rotated by one per sweep,
//!    each after waiting (at most `--settle` seconds) for a quiet machine;
//!    a disturbed run is run again, up to `--retries` times. A run that
//!    fails or does not verify is recorded as such and the sweep goes on. Its time and Mop/s
//!    come from the JSON on stdout; its ranks' communication counts from
//!    the `mttl stats rank R: ...` lines on stderr ([`breakdown`]). The
//!    counters run in every run, `MTTL_STATS` only has them printed at
//!    exit, after the timed part, so asking for them does not change the
//!    times. A run whose lines are missing or malformed keeps its time and
//!    is recorded as having no stats, with the reason.
//! 3. Keep, per configuration, the best (shortest) verified time and that
//!    run's stats; write `OUT/npb-sweep.csv` (one row per configuration)
//!    and `OUT/npb-sweep-breakdown.csv` (one row per rank of each
//!    configuration with stats), and print the summary: the times and the
//!    ratios mttl-on-MPI ÷ mpi-on-MPI and mttl-on-TCP ÷ mttl-on-MPI, then
//!    each rank's calls and bytes, like the paper's tables 5-8, and the
//!    configurations without stats.
//! 4. Draw, per kernel and class ([`figures`]), `OUT/KERNEL-CLASS.svg` and
//!    `.png`: time against processes, one line per variant and backend
//!    (the paper's figs. 8-11); and, if a configuration of more than one
//!    process has stats, `OUT/KERNEL-CLASS-breakdown.svg` and `.png`: one
//!    panel per such configuration, a group of bars per rank (figs. 12-13).
//!
//! With `--reference DIR`, NPB 3.4's own programs run in the same sweeps,
//! and a table and `OUT/npb-sweep-reference.csv` give each configuration's
//! ratio to them ([`reference`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use benches_npb::bench::plot::{write_both, PlotError};
use benches_npb::bench::sweep::report::{cell, render};
use benches_npb::bench::sweep::{per_sweep, Run as SweepRun, Sweeps, BUSY_WARNING};
use benches_npb::bench::BenchError;
use benches_npb::npb::cg::CgGrid;
use benches_npb::npb::drivers::{Kernel, Variant};
use benches_npb::npb::is::check_procs;
use benches_npb::npb::Class;
use clap::Parser;
use mttl::comm::launch::BackendKind;

use self::breakdown::{RankStats, StatsError};
use self::reference::{RefPoint, RefRun};

mod breakdown;
mod figures;
mod reference;

/// Sweep `npb` over configurations and keep the best of K runs of each.
#[derive(Debug, Parser)]
#[command(
    name = "npb-sweep",
    version,
    about = "Sweep npb over configurations, keep the best of K runs of each"
)]
struct Cli {
    /// Kernels, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cg,is")]
    kernels: Vec<Kernel>,
    /// Classes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "S,W")]
    classes: Vec<Class>,
    /// Process counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    ranks: Vec<usize>,
    /// Variants, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "mttl,mpi")]
    variants: Vec<Variant>,
    /// Backends, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "tcp,mpi")]
    backends: Vec<BackendKind>,
    /// Runs of each configuration; the best is kept.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Directory for the CSV files and the figures.
    #[arg(long, default_value = "npb-sweep")]
    out: PathBuf,
    /// The `npb` program [default: the one beside this program].
    #[arg(long)]
    npb: Option<PathBuf>,
    /// Before each run, wait up to this many seconds for other processes to
    /// leave the machine quiet (below a quarter of a CPU busy).
    #[arg(long, default_value_t = 30.0)]
    settle: f64,
    /// Runs again, up to this many times, a run during which other
    /// processes kept a quarter of a CPU or more busy.
    #[arg(long, default_value_t = 4)]
    retries: usize,
    /// NPB 3.4's `bin` directory: its `cg.CLASS.x` and `is.CLASS.x` run in
    /// the same sweeps (by `mpirun`), and the ratios to them are printed.
    #[arg(long, value_name = "DIR")]
    reference: Option<PathBuf>,
}

/// One configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    kernel: Kernel,
    class: Class,
    nprocs: usize,
    variant: Variant,
    backend: BackendKind,
}

impl Point {
    /// `CG S -n 2 mttl on tcp`.
    fn name(&self) -> String {
        format!(
            "{} {} -n {} {} on {}",
            self.kernel.name(),
            self.class,
            self.nprocs,
            self.variant,
            self.backend
        )
    }
}

/// One run of the sweep: ours, or the reference's (`--reference`).
#[derive(Debug, Clone, PartialEq)]
enum Job {
    Npb(Point),
    Reference(RefPoint),
}

/// What a run of a [`Job`] gave.
#[derive(Debug, Clone)]
enum Outcome {
    Npb(Run),
    Reference(RefRun),
}

impl Outcome {
    fn seconds(&self) -> f64 {
        match self {
            Outcome::Npb(r) => r.seconds,
            Outcome::Reference(r) => r.seconds,
        }
    }
}

/// One configuration and what its runs gave.
#[derive(Debug, Clone)]
struct Config {
    point: Point,
    /// Seconds of each verified run.
    times: Vec<f64>,
    /// Mop/s of the best run.
    mops: f64,
    /// Runs that failed or did not verify.
    failures: u32,
    /// The most CPUs other processes kept busy during a kept run.
    foreign_cpus: f64,
    /// The communication breakdown of the best run, or why it has none;
    /// `None` before a verified run.
    stats: Option<Result<Vec<RankStats>, StatsError>>,
}

impl Config {
    fn new(point: Point) -> Config {
        Config {
            point,
            times: Vec::new(),
            mops: 0.0,
            failures: 0,
            foreign_cpus: 0.0,
            stats: None,
        }
    }

    fn label(&self) -> String {
        format!("{} on {}", self.point.variant, self.point.backend)
    }

    fn best(&self) -> Option<f64> {
        self.times.iter().copied().reduce(f64::min)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match sweep(&cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("npb-sweep: {e}");
            ExitCode::from(2)
        }
    }
}

/// Step 1: the configurations that can run.
fn configurations(cli: &Cli) -> Vec<Point> {
    let mut configs = Vec::new();
    for &kernel in &cli.kernels {
        for &class in &cli.classes {
            for &nprocs in &cli.ranks {
                let allowed = match kernel {
                    Kernel::Cg => CgGrid::new(class.cg().na, nprocs, 0).is_ok(),
                    Kernel::Is => class.is().is_ok_and(|p| check_procs(&p, nprocs).is_ok()),
                };
                for &variant in &cli.variants {
                    for &backend in &cli.backends {
                        let runs = (variant, backend) != (Variant::Mpi, BackendKind::Tcp)
                            && (backend == BackendKind::Tcp || cfg!(feature = "mpi"));
                        if allowed && runs {
                            configs.push(Point {
                                kernel,
                                class,
                                nprocs,
                                variant,
                                backend,
                            });
                        }
                    }
                }
            }
        }
    }
    configs
}

/// Steps 1-3; returns whether every run verified.
fn sweep(cli: &Cli) -> Result<bool, String> {
    let npb = match &cli.npb {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program: {e}"))?
            .with_file_name("npb"),
    };
    let points = configurations(cli);
    if points.is_empty() {
        return Err("no configuration can run (see --help)".into());
    }
    let keys: Vec<_> = points
        .iter()
        .map(|p| (p.kernel, p.class, p.nprocs))
        .collect();
    let references = match &cli.reference {
        Some(dir) => reference::check_dir(dir, &keys).map(|()| reference::jobs(&keys))?,
        None => Vec::new(),
    };
    std::fs::create_dir_all(&cli.out)
        .map_err(|e| format!("cannot create {}: {e}", cli.out.display()))?;
    let jobs: Vec<Job> = (points.iter().copied().map(Job::Npb))
        .chain(references.into_iter().map(Job::Reference))
        .collect();
    let sweeps = Sweeps {
        bench: "npb-sweep",
        configs: &jobs,
        reps: cli.reps,
        settle: cli.settle.max(0.0),
        retries: cli.retries,
        keep_going: true,
    };
    let swept = sweeps
        .run(
            |job| match job {
                Job::Npb(p) => p.name(),
                Job::Reference(r) => r.name(),
            },
            |job, _, _| {
                match job {
                    Job::Npb(p) => run_once(&npb, p).map(Outcome::Npb),
                    Job::Reference(r) => {
                        reference::run_once(cli.reference.as_deref().unwrap_or(Path::new(".")), r)
                            .map(Outcome::Reference)
                    }
                }
                .map_err(BenchError::Check)
            },
        )
        .map_err(|e| e.to_string())?;
    // Per configuration, the run each sweep kept: the best of them counts.
    let configs: Vec<Config> = swept
        .runs
        .iter()
        .filter_map(|(job, runs)| match job {
            Job::Npb(p) => Some((job, p, runs)),
            Job::Reference(_) => None,
        })
        .map(|(job, p, runs)| {
            let mut c = Config::new(*p);
            c.failures = swept.failures.iter().filter(|f| f.0 == *job).count() as u32;
            for run in per_sweep(runs) {
                let Outcome::Npb(result) = &run.result else {
                    continue;
                };
                if c.best().is_none_or(|b| result.seconds < b) {
                    c.mops = result.mops;
                    c.stats = Some(result.stats.clone());
                }
                c.times.push(result.seconds);
                c.foreign_cpus = c.foreign_cpus.max(run.busy.unwrap_or(0.0));
            }
            c
        })
        .collect();
    let csv = cli.out.join("npb-sweep.csv");
    let breakdown_csv = cli.out.join("npb-sweep-breakdown.csv");
    for (path, text) in [
        (&csv, to_csv(&configs)),
        (&breakdown_csv, to_breakdown_csv(&configs)),
    ] {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    print!("{}", summary(&configs));
    print!("{}", breakdown_summary(&configs));
    println!("\nCSV: {}", csv.display());
    println!("CSV: {}", breakdown_csv.display());
    if cli.reference.is_some() {
        let reference_csv = cli.out.join("npb-sweep-reference.csv");
        let (ours, theirs) = by_side(&swept.runs);
        let pairings = reference::ratios(&ours, &theirs, |o| Some(o.seconds()));
        std::fs::write(&reference_csv, reference::to_csv(&pairings))
            .map_err(|e| format!("cannot write {}: {e}", reference_csv.display()))?;
        print!("{}", reference::summary(&pairings));
        print!(
            "{}",
            reference::timers_summary(&theirs, |o| match o {
                Outcome::Reference(r) => Some(r),
                Outcome::Npb(_) => None,
            })
        );
        println!("\nCSV: {}", reference_csv.display());
    }
    for plot in plot_all(&configs, &cli.out).map_err(|e| e.to_string())? {
        println!("plot: {}", plot.display());
    }
    Ok(swept.failures.is_empty())
}

/// Ours and the reference's runs, apart.
type Sides<'a> = (
    Vec<reference::Ours<'a, Outcome>>,
    Vec<(RefPoint, &'a [SweepRun<Outcome>])>,
);

/// Our configurations' runs (with their key and CSV columns) and the
/// reference's, for [`reference::ratios`].
fn by_side(runs: &[(Job, Vec<SweepRun<Outcome>>)]) -> Sides<'_> {
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for (job, runs) in runs {
        match job {
            Job::Npb(p) => ours.push((
                (p.kernel, p.class, p.nprocs),
                csv_key(&Config::new(*p)),
                &runs[..],
            )),
            Job::Reference(r) => theirs.push((*r, &runs[..])),
        }
    }
    (ours, theirs)
}

/// What one verified run of `npb` gave.
#[derive(Debug, Clone)]
struct Run {
    seconds: f64,
    mops: f64,
    /// Its ranks' `MTTL_STATS` lines, or why they are not all there.
    stats: Result<Vec<RankStats>, StatsError>,
}

/// Runs `npb` once for `c`, with `MTTL_STATS=1` (step 2).
fn run_once(npb: &Path, c: &Point) -> Result<Run, String> {
    let out = Command::new(npb)
        .args([
            c.kernel.name().to_lowercase().as_str(),
            "--class",
            &c.class.to_string(),
            "-n",
            &c.nprocs.to_string(),
            "--variant",
            c.variant.name(),
            "--backend",
            &c.backend.to_string(),
            "--json",
        ])
        .env_remove("MTTL_NP")
        .env("MTTL_STATS", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", npb.display()))?;
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| breakdown::parse_line(l).is_none());
        format!("{}: {}", out.status, last.unwrap_or(""))
    })?;
    if report["verified"] != true {
        return Err("verification failed".into());
    }
    let number = |key: &str| {
        report[key]
            .as_f64()
            .ok_or_else(|| format!("no {key} in npb's JSON"))
    };
    Ok(Run {
        seconds: number("seconds")?,
        mops: number("mops")?,
        stats: breakdown::parse_run(&String::from_utf8_lossy(&out.stderr), c.nprocs),
    })
}

fn to_csv(configs: &[Config]) -> String {
    let mut out = String::from(
        "kernel,class,nprocs,variant,backend,runs,failures,best_seconds,mops,foreign_cpus\n",
    );
    for c in configs {
        let _ = writeln!(
            out,
            "{},{},{},{},{:.2},{:.2}",
            csv_key(c),
            c.times.len(),
            c.failures,
            c.best().map_or(String::new(), |b| format!("{b:.4}")),
            c.mops,
            c.foreign_cpus
        );
    }
    out
}

/// `kernel,class,nprocs,variant,backend`: the columns naming `c`.
fn csv_key(c: &Config) -> String {
    format!(
        "{},{},{},{},{}",
        c.point.kernel.name(),
        c.point.class,
        c.point.nprocs,
        c.point.variant,
        c.point.backend
    )
}

/// `npb-sweep-breakdown.csv`: one row per rank of each configuration's
/// best run that has its stats.
fn to_breakdown_csv(configs: &[Config]) -> String {
    let mut out = format!("{}\n", breakdown::CSV_HEADER);
    for c in configs {
        if let Some(Ok(ranks)) = &c.stats {
            breakdown::csv_rows(&mut out, &csv_key(c), ranks);
        }
    }
    out
}

/// The best time of one configuration, if it ran.
fn best_of(
    configs: &[Config],
    key: (Kernel, Class, usize),
    variant: Variant,
    backend: BackendKind,
) -> Option<f64> {
    configs
        .iter()
        .find(|c| {
            (c.point.kernel, c.point.class, c.point.nprocs) == key
                && c.point.variant == variant
                && c.point.backend == backend
        })
        .and_then(Config::best)
}

/// Step 3's table: best times and the ratios between the variants.
fn summary(configs: &[Config]) -> String {
    let mut keys: Vec<(Kernel, Class, usize)> = Vec::new();
    for c in configs {
        if !keys.contains(&(c.point.kernel, c.point.class, c.point.nprocs)) {
            keys.push((c.point.kernel, c.point.class, c.point.nprocs));
        }
    }
    let cell = |t: Option<f64>| cell(t, |t| format!("{t:.3}"));
    let ratio = |a: Option<f64>, b: Option<f64>| cell(a.zip(b).map(|(a, b)| a / b));
    let headers = [
        "kernel",
        "class",
        "procs",
        "mpi/mpi",
        "mttl/mpi",
        "mttl/tcp",
        "mttl÷mpi (MPI)",
        "tcp÷mpi (mttl)",
    ];
    let rows: Vec<Vec<String>> = keys
        .into_iter()
        .map(|key| {
            let mpi = best_of(configs, key, Variant::Mpi, BackendKind::Mpi);
            let mttl_mpi = best_of(configs, key, Variant::Mttl, BackendKind::Mpi);
            let mttl_tcp = best_of(configs, key, Variant::Mttl, BackendKind::Tcp);
            let (kernel, class, procs) = (key.0.name().to_owned(), key.1.to_string(), key.2);
            vec![
                kernel,
                class,
                procs.to_string(),
                cell(mpi),
                cell(mttl_mpi),
                cell(mttl_tcp),
                ratio(mttl_mpi, mpi),
                ratio(mttl_tcp, mttl_mpi),
            ]
        })
        .collect();
    let mut out = format!(
        "\nBest time in seconds (\"Time in seconds\", slowest process) of each configuration\n\n{}",
        render(&headers.map(String::from), &rows, &[], true)
    );
    let busy: Vec<String> = configs
        .iter()
        .filter(|c| c.foreign_cpus >= BUSY_WARNING)
        .map(|c| c.point.name())
        .collect();
    if !busy.is_empty() {
        let _ = writeln!(
            out,
            "\nOther processes kept the machine busy during some kept runs of: {}",
            busy.join("; ")
        );
    }
    let failed: u32 = configs.iter().map(|c| c.failures).sum();
    if failed > 0 {
        let _ = writeln!(out, "\n{failed} runs failed or did not verify (see above).");
    }
    out
}

/// Step 3's second table, like the paper's tables 5-8: each rank's calls
/// in the best run of each configuration, per kernel and class, and which
/// configurations have no stats, and why.
fn breakdown_summary(configs: &[Config]) -> String {
    let mut out = String::from(
        "\nCommunication per process of the best run (MTTL_STATS=1 counts; tables 5-8)\n",
    );
    for (kernel, class) in groups(configs) {
        let rows: Vec<Vec<String>> = configs
            .iter()
            .filter(|c| (c.point.kernel, c.point.class) == (kernel, class))
            .filter_map(|c| match &c.stats {
                Some(Ok(ranks)) => Some(breakdown::table_rows(c.point.nprocs, &c.label(), ranks)),
                _ => None,
            })
            .flatten()
            .collect();
        let headers = breakdown::TABLE_HEADERS.map(String::from);
        let table = render(&headers, &rows, &[], false);
        let _ = write!(out, "\n{} class {class}\n{table}", kernel.name());
    }
    let missing: Vec<String> = configs
        .iter()
        .filter_map(|c| {
            let why = c.stats.as_ref()?.as_ref().err()?;
            Some(format!("  {}: {why}", c.point.name()))
        })
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(out, "\nNo stats for:\n{}", missing.join("\n"));
    }
    out
}

/// The kernels and classes of `configs`, in their order.
fn groups(configs: &[Config]) -> Vec<(Kernel, Class)> {
    let mut groups: Vec<(Kernel, Class)> = Vec::new();
    for c in configs {
        if !groups.contains(&(c.point.kernel, c.point.class)) {
            groups.push((c.point.kernel, c.point.class));
        }
    }
    groups
}

/// Step 4: draws both figures of each kernel and class; returns their paths.
fn plot_all(configs: &[Config], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    for (kernel, class) in groups(configs) {
        let group: Vec<&Config> = configs
            .iter()
            .filter(|c| c.point.kernel == kernel && c.point.class == class)
            .collect();
        let stem = format!("{}-{class}", kernel.name().to_lowercase());
        let time = figures::time(kernel, class, &group);
        paths.extend(write_both(&dir.join(&stem), &time)?);
        if let Some(breakdown) = figures::breakdown(kernel, class, &group) {
            let stem = dir.join(format!("{stem}-breakdown"));
            paths.extend(write_both(&stem, &breakdown)?);
        }
    }
    Ok(paths)
}
