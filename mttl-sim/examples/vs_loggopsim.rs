//! Benchmark: `mttl-sim` against LogGOPSim on large schedgen schedules.
//!
//! ```text
//! cargo build --release -p mttl-sim --examples
//! target/release/examples/vs_loggopsim [--lgs /tmp/lgs-build] [--work DIR]
//!     [--min-seconds 0.5] [--only PATTERN_RANKS]
//! ```
//!
//! For each schedule of the table below it makes the GOAL text with
//! LogGOPSim's `schedgen` and the binary with its `txt2bin` (once, kept in
//! `--work`), then runs `LogGOPSim -b -f FILE.bin` and `mttl-sim --summary
//! FILE.goal` with the same (default) parameters, each as a child process,
//! and prints: schedule, events, CPU seconds of each (user + system of the
//! child, from `getrusage`, so that other load on the machine counts less
//! than in wall-clock time), the ratio of events per second, and whether the
//! maximum finish time and its rank are identical. LogGOPSim's conversion is
//! not counted; mttl-sim's time includes parsing the text. A run shorter
//! than `--min-seconds` is repeated until the total reaches it, and the
//! mean is reported. `--only` keeps the rows whose `pattern_ranks`
//! (`linear_alltoall_1024`) contains the text. LogGOPSim, txt2bin and schedgen are built beside the
//! project as `mttl-sim/compare/run.sh`'s header says.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Schedgen pattern, ranks, message size (bytes), and the row's name.
const SCHEDULES: &[(&str, u32, u32, &str)] = &[
    ("binomialtreebcast", 262_144, 8, "binomial tree bcast"),
    ("binarytreebcast", 32_768, 8, "binary tree bcast"),
    ("dissemination", 32_768, 8, "dissemination"),
    ("dissemination", 131_072, 8, "dissemination"),
    // schedgen's recursive doubling deadlocks from 256 ranks on (both
    // simulators report it): the largest valid one, with rendezvous sizes.
    ("allreduce_recdoub", 128, 100_000, "recursive doubling"),
    // One root and n - 1 peers: LogGOPSim retries the root's queued
    // messages one by one, O(n²); 65,536 ranks take it minutes.
    ("gather", 8_192, 8, "gather"),
    ("scatter", 8_192, 8, "scatter"),
    ("linear_alltoall", 256, 8, "alltoall"),
    ("linear_alltoall", 1024, 8, "alltoall"),
];

struct Options {
    lgs: PathBuf,
    sim: PathBuf,
    work: PathBuf,
    min_seconds: f64,
    only: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate myself: {e}"))?;
    // target/release/examples/vs_loggopsim -> target/release/mttl-sim
    let sim = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("mttl-sim"))
        .ok_or("cannot locate target/release")?;
    let mut o = Options {
        lgs: PathBuf::from("/tmp/lgs-build"),
        sim,
        work: std::env::temp_dir().join("mttl-sim-vs-loggopsim"),
        min_seconds: 0.5,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--lgs" => o.lgs = value()?.into(),
            "--sim" => o.sim = value()?.into(),
            "--work" => o.work = value()?.into(),
            "--min-seconds" => {
                let v = value()?;
                o.min_seconds = v
                    .parse()
                    .map_err(|_| format!("--min-seconds: `{v}` is not a number"))?;
            }
            "--only" => o.only = Some(value()?),
            _ => return Err(format!("unknown argument `{a}` (see the file's header)")),
        }
    }
    for tool in ["schedgen", "txt2bin", "LogGOPSim"] {
        if !o.lgs.join(tool).is_file() {
            return Err(format!(
                "{} is missing: build LogGOPSim as mttl-sim/compare/run.sh's header says, or pass --lgs DIR",
                o.lgs.join(tool).display()
            ));
        }
    }
    if !o.sim.is_file() {
        return Err(format!(
            "{} is missing: cargo build --release -p mttl-sim",
            o.sim.display()
        ));
    }
    Ok(o)
}

/// CPU seconds (user + system) used so far by waited-for children.
fn children_cpu() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage; getrusage only writes it.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, ru.as_mut_ptr()) };
    assert_eq!(
        rc, 0,
        "getrusage(RUSAGE_CHILDREN) cannot fail with valid arguments"
    );
    // SAFETY: getrusage succeeded, so it filled `ru` (and zeroed is valid anyway).
    let ru = unsafe { ru.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

/// Runs `cmd` until at least `min` CPU seconds have passed; returns the mean
/// CPU seconds of one run and the last run's standard output.
fn timed(mut cmd: Command, min: f64) -> Result<(f64, String), String> {
    let (mut total, mut runs) = (0.0, 0u32);
    loop {
        let before = children_cpu();
        let out = cmd
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        total += children_cpu() - before;
        runs += 1;
        if total >= min || runs >= 50 {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            return Ok((total / f64::from(runs), text));
        }
    }
}

/// The first line of `text` starting with `prefix`, split in words.
fn line_words<'a>(text: &'a str, prefix: &str) -> Option<Vec<&'a str>> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .map(|l| l.split_whitespace().collect())
}

/// LogGOPSim's output: events, maximum finish time and its rank.
fn lgs_result(text: &str) -> Option<(u64, u64, u64)> {
    // "PERFORMANCE: Processes: N 	 Events: E 	 Time: ..."
    let perf = line_words(text, "PERFORMANCE")?;
    let events = perf.get(4)?.parse().ok()?;
    // "Maximum finishing time at host R: T (...)"
    let max = line_words(text, "Maximum finishing time")?;
    let rank = max.get(5)?.trim_end_matches(':').parse().ok()?;
    let time = max.get(6)?.parse().ok()?;
    Some((events, time, rank))
}

/// mttl-sim's `--summary` output: events, maximum and its rank.
fn sim_result(text: &str) -> Option<(u64, u64, u64)> {
    // "max: T ns (rank R)" and "events: E in S s (...)"
    let max = line_words(text, "max:")?;
    let time = max.get(1)?.parse().ok()?;
    let rank = max.get(4)?.trim_end_matches(')').parse().ok()?;
    let events = line_words(text, "events:")?.get(1)?.parse().ok()?;
    Some((events, time, rank))
}

fn prepare(
    o: &Options,
    pattern: &str,
    ranks: u32,
    size: u32,
) -> Result<(PathBuf, PathBuf), String> {
    let stem = o.work.join(format!("{pattern}_{ranks}_{size}"));
    let (goal, bin) = (stem.with_extension("goal"), stem.with_extension("bin"));
    let run = |cmd: &mut Command| -> Result<(), String> {
        let st = cmd
            .output()
            .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
        if st.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?} failed: {}",
                String::from_utf8_lossy(&st.stderr)
            ))
        }
    };
    if !goal.is_file() {
        run(Command::new(o.lgs.join("schedgen"))
            .args([
                "-p",
                pattern,
                "-s",
                &ranks.to_string(),
                "-d",
                &size.to_string(),
                "-o",
            ])
            .arg(&goal))?;
    }
    if !bin.is_file() {
        run(Command::new(o.lgs.join("txt2bin"))
            .arg("-i")
            .arg(&goal)
            .arg("-o")
            .arg(&bin))?;
    }
    Ok((goal, bin))
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("vs_loggopsim: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&o.work) {
        eprintln!("vs_loggopsim: cannot create {}: {e}", o.work.display());
        return ExitCode::from(2);
    }
    println!("| schedule | ranks | events | LogGOPSim s | mttl-sim s | ratio | identical |");
    println!("|---|---|---|---|---|---|---|");
    let mut all_identical = true;
    for &(pattern, ranks, size, name) in SCHEDULES {
        let key = format!("{pattern}_{ranks}");
        if o.only.as_deref().is_some_and(|only| !key.contains(only)) {
            continue;
        }
        let row = (|| -> Result<String, String> {
            let (goal, bin) = prepare(&o, pattern, ranks, size)?;
            let mut lgs = Command::new(o.lgs.join("LogGOPSim"));
            lgs.arg("-b").arg("-f").arg(&bin);
            let (t_lgs, out_lgs) = timed(lgs, o.min_seconds)?;
            let mut sim = Command::new(&o.sim);
            sim.arg("--summary").arg(&goal);
            let (t_sim, out_sim) = timed(sim, o.min_seconds)?;
            let a = lgs_result(&out_lgs).ok_or("no result in LogGOPSim's output")?;
            let b = sim_result(&out_sim).ok_or("no result in mttl-sim's output")?;
            let same = a.1 == b.1 && a.2 == b.2;
            all_identical &= same;
            // Events per second, ours over theirs, each with its own count.
            let ratio = (b.0 as f64 / t_sim) / (a.0 as f64 / t_lgs);
            Ok(format!(
                "| {name} | {ranks} | {} / {} | {t_lgs:.3} | {t_sim:.3} | {ratio:.1}x | {} |",
                a.0,
                b.0,
                if same { "yes" } else { "NO" }
            ))
        })();
        match row {
            Ok(line) => println!("{line}"),
            Err(e) => {
                all_identical = false;
                println!("| {name} | {ranks} | error: {e} | | | | |");
            }
        }
    }
    if all_identical {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_outputs() {
        let lgs = "size: 8\nPERFORMANCE: Processes: 4 \t Events: 12 \t Time: 0 s \t Speed: inf ev/s\nMaximum finishing time at host 3: 11542 (0.011542 s)\n";
        assert_eq!(lgs_result(lgs), Some((12, 11542, 3)));
        let sim = "max: 11542 ns (rank 3)\nevents: 12 in 0.000010 s (1200000 events/s)\n";
        assert_eq!(sim_result(sim), Some((12, 11542, 3)));
        assert_eq!(sim_result("max: x ns (rank 3)\n"), None);
    }
}
