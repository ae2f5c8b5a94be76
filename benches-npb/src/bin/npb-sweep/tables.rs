//! What the sweep writes and prints from its configurations: the two CSV
//! files and the summary's tables (step 3 of the [crate docs](crate)), and
//! with `--net` what each network's check measured and each host's split.

use std::fmt::Write as _;

use benches_npb::bench::sweep::report::{cell, render};
use benches_npb::bench::sweep::BUSY_WARNING;
use benches_npb::npb::drivers::{Kernel, Variant};
use benches_npb::npb::Class;
use mttl::comm::launch::BackendKind;

use crate::{breakdown, split, Config, NetInfo, Point};

/// `OUT/npb-sweep.csv`: one row per configuration.
pub(crate) fn to_csv(configs: &[Config]) -> String {
    let mut out = String::from(
        "kernel,class,nprocs,variant,backend,net,runs,failures,best_seconds,mops,foreign_cpus\n",
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

/// `kernel,class,nprocs,variant,backend,net`: the columns naming `c`.
pub(crate) fn csv_key(c: &Config) -> String {
    format!(
        "{},{},{},{},{},{}",
        c.point.kernel.name(),
        c.point.class,
        c.point.nprocs,
        c.point.variant,
        c.point.backend,
        c.point.net_column()
    )
}

/// `npb-sweep-breakdown.csv`: one row per rank of each configuration's
/// best run that has its stats.
pub(crate) fn to_breakdown_csv(configs: &[Config]) -> String {
    let mut out = format!("{}\n", breakdown::CSV_HEADER);
    for c in configs {
        if let Some(Ok(ranks)) = &c.stats {
            breakdown::csv_rows(&mut out, &csv_key(c), ranks);
        }
    }
    out
}

/// What the summary's rows are keyed by: network, kernel, class, processes.
pub(crate) type Key = (Option<&'static str>, Kernel, Class, usize);

pub(crate) fn key(p: &Point) -> Key {
    (p.net, p.kernel, p.class, p.nprocs)
}

/// The best time of one configuration, if it ran.
pub(crate) fn best_of(
    configs: &[Config],
    k: Key,
    variant: Variant,
    backend: BackendKind,
) -> Option<f64> {
    configs
        .iter()
        .find(|c| key(&c.point) == k && c.point.variant == variant && c.point.backend == backend)
        .and_then(Config::best)
}

/// Step 3's table: best times and the ratios between the variants.
pub(crate) fn summary(configs: &[Config]) -> String {
    let mut keys: Vec<Key> = Vec::new();
    for c in configs {
        if !keys.contains(&key(&c.point)) {
            keys.push(key(&c.point));
        }
    }
    let cell = |t: Option<f64>| cell(t, |t| format!("{t:.3}"));
    let ratio = |a: Option<f64>, b: Option<f64>| cell(a.zip(b).map(|(a, b)| a / b));
    let headers = [
        "net",
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
            let (kernel, class, procs) = (key.1.name().to_owned(), key.2.to_string(), key.3);
            vec![
                key.0.unwrap_or("local").to_owned(),
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
pub(crate) fn breakdown_summary(configs: &[Config]) -> String {
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
pub(crate) fn groups(configs: &[Config]) -> Vec<(Kernel, Class)> {
    let mut groups: Vec<(Kernel, Class)> = Vec::new();
    for c in configs {
        if !groups.contains(&(c.point.kernel, c.point.class)) {
            groups.push((c.point.kernel, c.point.class));
        }
    }
    groups
}

/// `name` with anything but letters, digits, `-` and `.` made `_`, for a
/// file name (a custom profile is `RATE,LATENCY`).
pub(crate) fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// What the lab's hosts share: `H hosts share this machine's C cores`.
pub(crate) fn sharing_note(nprocs: &[usize]) -> String {
    let hosts = nprocs.iter().copied().max().unwrap_or(1);
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    format!("up to {hosts} hosts share this machine's {cores} cores")
}

/// With `--net`: what each network's check measured, the hosts' shared
/// cores, and each rank's computation and communication.
pub(crate) fn net_summary(configs: &[Config], infos: &[NetInfo], nprocs: &[usize]) -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut out = format!(
        "\nThe lab: {} (compute is oversubscribed above {cores} hosts; communication is what \
         the study compares)\n",
        sharing_note(nprocs)
    );
    for info in infos {
        let _ = writeln!(
            out,
            "  {}: round trip {:.1} µs, TCP goodput {:.1} Mb/s between two hosts ({}; see \
             netlab-check-{}.txt)",
            info.name,
            info.measured.rtt * 1e6,
            info.measured.goodput_bps / 1e6,
            if info.faithful {
                "the check passed"
            } else {
                "the check FAILED: the lab did not reach this profile on this machine"
            },
            file_name(info.name)
        );
    }
    out.push_str(&split::table(configs, infos));
    out
}
