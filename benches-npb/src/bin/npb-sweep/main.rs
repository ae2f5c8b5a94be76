//! `npb-sweep`: runs `npb` over kernels × classes × ranks × variants ×
//! backends, keeps the best of K runs of each, and writes CSV files, a
//! summary with the ratios between the variants and each rank's
//! communication, and two figures per kernel and class, as SVG and PNG.
//!
//! ```text
//! npb-sweep --kernels cg,is --classes A,B --ranks 1,2 --reps 3 --out sweep
//! npb-sweep --net 100base-t,myrinet2000 --hosts 1,2,4 --classes A --out study
//! ```
//!
//! With `--net`, each profile's points run across the hosts of
//! `mttl-netlab`'s emulated cluster, one rank per host, one profile after
//! another, each with the lab brought up, checked and brought down around
//! its sweeps ([`net`]); without it, on this machine's shared memory. The
//! steps below are per profile.
//!
//! One invocation, step by step:
//!
//! 1. Build the list of configurations, leaving out those that cannot run:
//!    the `mpi` variant on TCP, MPI in a build without the cargo feature
//!    `mpi`, and process counts NPB does not allow for the class.
//! 2. Run the sweeps of the engine ([`benches_npb::bench::sweep`]): for each
//!    of the K sweeps, every configuration once as
//!    `MTTL_STATS=1 npb KERNEL --class C -n N --variant V --backend B --json`
//!    (the `npb` beside this program; across the lab, under `mttlrun` as in
//!    [`net`]), in an order rotated by one per sweep,
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
//!    run's stats ([`tables`]); write `OUT/npb-sweep.csv` (one row per configuration)
//!    and `OUT/npb-sweep-breakdown.csv` (one row per rank of each
//!    configuration with stats; both with a `net` column, `local` without
//!    `--net`), and print the summary: the times and the
//!    ratios mttl-on-MPI ÷ mpi-on-MPI and mttl-on-TCP ÷ mttl-on-MPI, then
//!    each rank's calls and bytes, like the paper's tables 5-8, and the
//!    configurations without stats.
//! 4. Draw, per kernel and class ([`figures`]), `OUT/KERNEL-CLASS.svg` and
//!    `.png`: time against processes, one line per variant and backend
//!    (the paper's figs. 8-11); and, if a configuration of more than one
//!    process has stats, `OUT/KERNEL-CLASS-breakdown.svg` and `.png`: one
//!    panel per such configuration, a group of bars per rank; and, with
//!    `--net`, `OUT/KERNEL-CLASS-split.svg` and `.png`: each rank's time
//!    split into computation and communication, the latter estimated from
//!    its counts and the lab's measured round trip and bandwidth
//!    ([`split`], figs. 12-13).
//! 5. Print how long the whole sweep took.
//!
//! With `--reference DIR`, NPB 3.4's own programs run in the same sweeps,
//! and a table and `OUT/npb-sweep-reference.csv` give each configuration's
//! ratio to them ([`mod@reference`]).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use benches_npb::bench::plot::{write_both, PlotError};
use benches_npb::bench::sweep::{per_sweep, Run as SweepRun, Sweeps};
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
#[cfg(target_os = "linux")]
mod net;
mod reference;
mod split;
mod tables;

use self::tables::{file_name, groups, net_summary, sharing_note};

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
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2",
        conflicts_with = "hosts"
    )]
    ranks: Vec<usize>,
    /// Network profiles of mttl-netlab's emulated cluster, comma-separated
    /// (100base-t, gige, 10gige, myrinet2000 or RATE,LATENCY): run every
    /// point across lab hosts, one rank per host, profile after profile.
    /// Needs root.
    #[arg(long, value_delimiter = ',', requires = "hosts")]
    net: Vec<String>,
    /// With --net: host counts (one rank per host), comma-separated.
    #[arg(long, value_delimiter = ',', requires = "net")]
    hosts: Vec<usize>,
    /// With --net: skip `mttl-bench rwrite` (remote writes against MPI
    /// send/recv between two hosts, figs. 5-7) on each network.
    #[arg(long, requires = "net")]
    no_rwrite: bool,
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
    #[arg(long, value_name = "DIR", conflicts_with = "net")]
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
    /// The lab's network profile (`--net`), or `None` on this machine
    /// alone.
    net: Option<&'static str>,
}

impl Point {
    /// `CG S -n 2 mttl on tcp`, then `across 100base-t` with `--net`.
    fn name(&self) -> String {
        let mut name = format!(
            "{} {} -n {} {} on {}",
            self.kernel.name(),
            self.class,
            self.nprocs,
            self.variant,
            self.backend
        );
        if let Some(net) = self.net {
            name.push_str(&format!(" across {net}"));
        }
        name
    }

    /// The CSV's `net` column.
    fn net_column(&self) -> &'static str {
        self.net.unwrap_or("local")
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

    /// `mttl on tcp`, then `, 100base-t` with `--net`.
    fn label(&self) -> String {
        let mut label = format!("{} on {}", self.point.variant, self.point.backend);
        if let Some(net) = self.point.net {
            label.push_str(&format!(", {net}"));
        }
        label
    }

    fn best(&self) -> Option<f64> {
        self.times.iter().copied().reduce(f64::min)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = sweep(&cli);
    #[cfg(target_os = "linux")]
    if let Some(status) = net::interrupted() {
        return ExitCode::from(status);
    }
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("npb-sweep: {e}");
            ExitCode::from(2)
        }
    }
}

/// Step 1: the configurations that can run, `nets` the profiles of
/// `--net` (`[None]` without it), `nprocs` the process (or host) counts.
fn configurations(cli: &Cli, nets: &[Option<&'static str>], nprocs: &[usize]) -> Vec<Point> {
    let mut configs = Vec::new();
    for &net in nets {
        for &kernel in &cli.kernels {
            for &class in &cli.classes {
                for &nprocs in nprocs {
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
                                    net,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    configs
}

/// The profiles of `--net`, checked and named as `mttl-netlab` names them.
#[cfg(target_os = "linux")]
fn net_profiles(cli: &Cli) -> Result<Vec<(&'static str, mttl_netlab::Profile)>, String> {
    if cli
        .hosts
        .iter()
        .any(|&h| h == 0 || h > mttl_netlab::lab::MAX_HOSTS)
    {
        return Err(format!(
            "--hosts {:?}: give host counts from 1 to {}",
            cli.hosts,
            mttl_netlab::lab::MAX_HOSTS
        ));
    }
    cli.net
        .iter()
        .map(|given| {
            let profile =
                mttl_netlab::Profile::parse(given).map_err(|e| format!("--net {given}: {e}"))?;
            // A handful of names for the whole run, shared by every point.
            let name: &'static str = Box::leak(profile.name.clone().into_boxed_str());
            Ok((name, profile))
        })
        .collect()
}

/// How a point is launched.
enum Launch<'a> {
    /// `npb -n N` on this machine.
    Local(&'a Path),
    /// Across the lab's hosts ([`net`]).
    #[cfg(target_os = "linux")]
    Net(&'a net::Tools),
}

/// What a network of `--net` gave besides the runs.
struct NetInfo {
    name: &'static str,
    measured: split::Link,
    faithful: bool,
}

/// Steps 1-5; returns whether every run verified.
fn sweep(cli: &Cli) -> Result<bool, String> {
    let started = Instant::now();
    let npb = match &cli.npb {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program: {e}"))?
            .with_file_name("npb"),
    };
    #[cfg(target_os = "linux")]
    let profiles = net_profiles(cli)?;
    #[cfg(not(target_os = "linux"))]
    if !cli.net.is_empty() {
        return Err("--net needs Linux (mttl-netlab's network namespaces)".into());
    }
    let (nets, nprocs): (Vec<Option<&'static str>>, &[usize]) = if cli.net.is_empty() {
        (vec![None], &cli.ranks)
    } else {
        #[cfg(target_os = "linux")]
        let nets = profiles.iter().map(|p| Some(p.0)).collect();
        #[cfg(not(target_os = "linux"))]
        let nets = Vec::new();
        (nets, &cli.hosts)
    };
    let points = configurations(cli, &nets, nprocs);
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
    let mut configs = Vec::new();
    let mut infos: Vec<NetInfo> = Vec::new();
    let mut rwrite_ok = true;
    let mut references_ok = true;
    if cli.net.is_empty() {
        let (swept, ok) = sweep_points(cli, &points, references, &Launch::Local(&npb))?;
        configs = swept;
        references_ok = ok;
    }
    #[cfg(target_os = "linux")]
    if !cli.net.is_empty() {
        let tools = net::Tools::find(npb)?;
        net::bring_down_on_signal(&tools.netlab)?;
        let hosts = nprocs.iter().copied().max().unwrap_or(2);
        for (name, profile) in &profiles {
            let mine: Vec<Point> = points
                .iter()
                .filter(|p| p.net == Some(*name))
                .copied()
                .collect();
            let lab = net::LabGuard::up(&tools, hosts, profile, &cli.out)?;
            infos.push(NetInfo {
                name,
                measured: split::Link {
                    rtt: lab.measured.rtt,
                    goodput_bps: lab.measured.goodput_bps,
                },
                faithful: lab.faithful,
            });
            configs.extend(sweep_points(cli, &mine, Vec::new(), &Launch::Net(&tools))?.0);
            if !cli.no_rwrite {
                rwrite_ok &= net::rwrite(&tools, name, cli.reps, cli.settle.max(0.0), &cli.out);
            }
            drop(lab);
        }
    }
    let csv = cli.out.join("npb-sweep.csv");
    let breakdown_csv = cli.out.join("npb-sweep-breakdown.csv");
    for (path, text) in [
        (&csv, tables::to_csv(&configs)),
        (&breakdown_csv, tables::to_breakdown_csv(&configs)),
    ] {
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    print!("{}", tables::summary(&configs));
    print!("{}", tables::breakdown_summary(&configs));
    if !infos.is_empty() {
        print!("{}", net_summary(&configs, &infos, nprocs));
    }
    println!("\nCSV: {}", csv.display());
    println!("CSV: {}", breakdown_csv.display());
    for plot in plot_all(&configs, &infos, &cli.out).map_err(|e| e.to_string())? {
        println!("plot: {}", plot.display());
    }
    let runs = configs
        .iter()
        .map(|c| c.times.len() as u32 + c.failures)
        .sum::<u32>();
    println!(
        "\nThe sweep took {:.1} min ({runs} runs).",
        started.elapsed().as_secs_f64() / 60.0
    );
    Ok(rwrite_ok && references_ok && configs.iter().all(|c| c.failures == 0))
}

/// Step 2 and the first half of step 3 for `points`, all launched the same
/// way, with NPB 3.4's `references` (`--reference`) in the same sweeps; the
/// ratios to them are written and printed here.
fn sweep_points(
    cli: &Cli,
    points: &[Point],
    references: Vec<RefPoint>,
    launch: &Launch,
) -> Result<(Vec<Config>, bool), String> {
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
                    Job::Npb(p) => run_once(launch, p).map(Outcome::Npb),
                    Job::Reference(r) => {
                        reference::run_once(cli.reference.as_deref().unwrap_or(Path::new(".")), r)
                            .map(Outcome::Reference)
                    }
                }
                .map_err(BenchError::Check)
            },
        )
        .map_err(|e| e.to_string())?;
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
    let references_ok = !swept
        .failures
        .iter()
        .any(|f| matches!(f.0, Job::Reference(_)));
    // Per configuration, the run each sweep kept: the best of them counts.
    let configs = swept
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
    Ok((configs, references_ok))
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
                format!(
                    "{},{},{},{},{}",
                    p.kernel.name(),
                    p.class,
                    p.nprocs,
                    p.variant,
                    p.backend
                ),
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
fn run_once(launch: &Launch, c: &Point) -> Result<Run, String> {
    let mut command = match launch {
        Launch::Local(npb) => {
            let mut command = Command::new(npb);
            command.args([
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
            ]);
            command
        }
        #[cfg(target_os = "linux")]
        Launch::Net(tools) => tools.command(c),
    };
    let out = command
        .env_remove("MTTL_NP")
        .env("MTTL_STATS", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", command.get_program()))?;
    // Across the lab, mttlrun's stdout carries rank 0's JSON, maybe beside
    // other lines: the JSON is the last line that parses.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .or_else(|| serde_json::from_str(&stdout).ok())
        .ok_or_else(|| {
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

/// Step 4: draws the figures of each kernel and class; returns their paths.
fn plot_all(configs: &[Config], infos: &[NetInfo], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let mut paths = Vec::new();
    let nprocs: Vec<usize> = configs.iter().map(|c| c.point.nprocs).collect();
    let note = (!infos.is_empty()).then(|| sharing_note(&nprocs));
    for (kernel, class) in groups(configs) {
        let group: Vec<&Config> = configs
            .iter()
            .filter(|c| c.point.kernel == kernel && c.point.class == class)
            .collect();
        let stem = format!("{}-{class}", kernel.name().to_lowercase());
        let time = figures::time(kernel, class, &group, note.as_deref());
        paths.extend(write_both(&dir.join(&stem), &time)?);
        if let Some(breakdown) = figures::breakdown(kernel, class, &group) {
            let stem = dir.join(format!("{stem}-breakdown"));
            paths.extend(write_both(&stem, &breakdown)?);
        }
        if let Some(note) = &note {
            if let Some(split) = split::figure(kernel, class, &group, infos, note) {
                paths.extend(write_both(&dir.join(format!("{stem}-split")), &split)?);
            }
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_names_become_file_names() {
        assert_eq!(file_name("100base-t"), "100base-t");
        assert_eq!(file_name("100mbit,50us"), "100mbit_50us");
    }

    #[test]
    fn points_across_the_lab_name_their_network_and_leave_out_what_cannot_run() {
        let cli = Cli::parse_from([
            "npb-sweep",
            "--net",
            "gige",
            "--hosts",
            "1,2",
            "--kernels",
            "is",
            "--classes",
            "S",
        ]);
        let points = configurations(&cli, &[Some("gige")], &cli.hosts);
        // mttl on TCP and, with MPI, mttl and mpi on MPI; at 1 and 2 hosts.
        let per_count = if cfg!(feature = "mpi") { 3 } else { 1 };
        assert_eq!(points.len(), 2 * per_count);
        assert!(points.iter().all(|p| p.net == Some("gige")));
        assert!(!points
            .iter()
            .any(|p| (p.variant, p.backend) == (Variant::Mpi, BackendKind::Tcp)));
        let c = Config::new(points[0]);
        assert_eq!(c.label(), "mttl on tcp, gige");
        assert_eq!(points[0].name(), "IS S -n 1 mttl on tcp across gige");
        assert_eq!(points[0].net_column(), "gige");
    }
}
