//! `--reference DIR`: NPB 3.4's own MPI programs (`cg.CLASS.x`,
//! `is.CLASS.x`, built by the user from the NPB 3.4 sources, see
//! `docs/benchmarks.md`) run in the same sweeps as `npb`, and the ratios of
//! each of our configurations to them.
//!
//! 1. Before any run, [`check_dir`] makes sure `DIR` holds the program of
//!    every kernel and class swept, and names the `make` command that builds
//!    a missing one.
//! 2. [`jobs`] adds one reference configuration per kernel, class and
//!    process count to the sweep's list, so the engine alternates it with
//!    ours and gives it the same idle checks and retries.
//! 3. [`run_once`] starts it as `mpirun -np N DIR/is.B.x` (Open MPI run as
//!    root gets `--allow-run-as-root`, and `--oversubscribe` as mttl's own
//!    launcher gives it, so both are bound alike), with
//!    `NPB_TIMER_FLAG=1` so the program prints its phase timers, and
//!    [`parse_output`] reads its report: verification, time, Mop/s and the
//!    timers. The time is the `total` timer's maximum over processes (four
//!    decimals) when printed, else `Time in seconds` (two decimals).
//! 4. [`ratios`] pairs each of our configurations with the reference of its
//!    kernel, class and process count: best of ours ÷ best of the
//!    reference, and the median over sweeps of each sweep's ratio.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use benches_npb::bench::sweep::report::{cell, render};
use benches_npb::bench::sweep::{paired, per_sweep, Run};
use benches_npb::npb::drivers::Kernel;
use benches_npb::npb::Class;

/// The environment variable naming the `mpirun` command (mttl's own).
const MPIRUN_VAR: &str = "MTTL_MPIRUN";

/// A kernel, class and process count: what a reference run is paired by.
pub(crate) type Key = (Kernel, Class, usize);

/// One of our configurations for [`ratios`]: its key, its CSV columns
/// (`kernel,class,nprocs,variant,backend`) and its runs.
pub(crate) type Ours<'a, R> = (Key, String, &'a [Run<R>]);

/// One reference configuration: a kernel, class and process count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RefPoint {
    pub(crate) kernel: Kernel,
    pub(crate) class: Class,
    pub(crate) nprocs: usize,
}

impl RefPoint {
    /// `IS B -n 2 NPB 3.4`.
    pub(crate) fn name(&self) -> String {
        format!(
            "{} {} -n {} NPB 3.4",
            self.kernel.name(),
            self.class,
            self.nprocs
        )
    }

    fn key(&self) -> Key {
        (self.kernel, self.class, self.nprocs)
    }
}

/// The program's file name for a kernel and class: `is.B.x`.
fn program_name(kernel: Kernel, class: Class) -> String {
    format!("{}.{class}.x", kernel.name().to_lowercase())
}

/// Step 1: `dir` holds the program of every kernel and class in `keys`.
pub(crate) fn check_dir(dir: &Path, keys: &[Key]) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!(
            "--reference {}: not a directory (give NPB3.4-MPI/bin, see docs/benchmarks.md)",
            dir.display()
        ));
    }
    for &(kernel, class, _) in keys {
        let program = dir.join(program_name(kernel, class));
        if !program.is_file() {
            return Err(format!(
                "--reference {}: no {} there; build it in NPB3.4-MPI with `make {} CLASS={class}` \
                 (see docs/benchmarks.md)",
                dir.display(),
                program_name(kernel, class),
                kernel.name().to_lowercase()
            ));
        }
    }
    Ok(())
}

/// Step 2: one reference configuration per kernel, class and process count
/// of `keys`, in their order.
pub(crate) fn jobs(keys: &[Key]) -> Vec<RefPoint> {
    let mut points: Vec<RefPoint> = Vec::new();
    for &(kernel, class, nprocs) in keys {
        let point = RefPoint {
            kernel,
            class,
            nprocs,
        };
        if !points.contains(&point) {
            points.push(point);
        }
    }
    points
}

/// One timer line of the reference's report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Timer {
    /// Its name as printed: `total`, `rcomp`, `rcomm`, `conjg`, ...
    pub(crate) name: String,
    /// Seconds: minimum, maximum and average over the processes.
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) avg: f64,
}

/// What one verified reference run reported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RefRun {
    /// The `total` timer's maximum if printed, else `Time in seconds`.
    pub(crate) seconds: f64,
    pub(crate) mops: f64,
    /// The phase timers (empty if the program printed none).
    pub(crate) timers: Vec<Timer>,
}

/// Why a reference program's output could not be read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParseError {
    /// 1-based line, or `None` when something is missing altogether.
    pub(crate) line: Option<usize>,
    pub(crate) what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "its output, line {line}: {}", self.what),
            None => write!(f, "its output: {}", self.what),
        }
    }
}

/// The value after `Label =` on an NPB report line, if the line is one.
fn field<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(label)?;
    Some(rest.trim_start().strip_prefix('=')?.trim())
}

/// A number on line `line` (1-based), or an error saying what was expected.
fn number(text: &str, line: usize, what: &str) -> Result<f64, ParseError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| ParseError {
            line: Some(line),
            what: format!("expected a number for {what}, found {text:?}"),
        })
}

/// A timer line, C (`timer  1 (total   ):  0.1  0.2  0.15`) or Fortran
/// (`timer  1(total   ) :  0.1  0.2  0.15`) style.
fn timer_line(text: &str, line: usize) -> Result<Option<Timer>, ParseError> {
    let Some(rest) = text.trim_start().strip_prefix("timer") else {
        return Ok(None);
    };
    let bad = |what: &str| ParseError {
        line: Some(line),
        what: format!("expected `timer N (name): min max average`, {what}: {text:?}"),
    };
    let open = rest.find('(').ok_or_else(|| bad("no `(`"))?;
    let close = rest.find(')').ok_or_else(|| bad("no `)`"))?;
    if close < open {
        return Err(bad("`)` before `(`"));
    }
    let name = rest[open + 1..close].trim().to_owned();
    let values = rest[close + 1..]
        .trim_start()
        .strip_prefix(':')
        .ok_or_else(|| bad("no `:` after the name"))?;
    let values: Vec<&str> = values.split_whitespace().collect();
    let [min, max, avg] = values[..] else {
        return Err(bad(&format!("{} numbers", values.len())));
    };
    Ok(Some(Timer {
        min: number(min, line, "the minimum")?,
        max: number(max, line, "the maximum")?,
        avg: number(avg, line, "the average")?,
        name,
    }))
}

/// Step 3: reads an NPB 3.4 report; `point` says which class and process
/// count it must be for.
pub(crate) fn parse_output(text: &str, point: &RefPoint) -> Result<RefRun, ParseError> {
    let (mut seconds, mut mops, mut verified) = (None, None, None);
    let mut timers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let wrong = |what: String| ParseError {
            line: Some(n),
            what,
        };
        if let Some(v) = field(line, "Class") {
            if v != point.class.to_string() {
                return Err(wrong(format!(
                    "expected class {}, found {v:?}",
                    point.class
                )));
            }
        } else if let Some(v) = field(line, "Total processes") {
            if v.parse::<usize>().ok() != Some(point.nprocs) {
                return Err(wrong(format!(
                    "expected {} processes, found {v:?}",
                    point.nprocs
                )));
            }
        } else if let Some(v) = field(line, "Time in seconds") {
            seconds = Some(number(v, n, "`Time in seconds`")?);
        } else if let Some(v) = field(line, "Mop/s total") {
            mops = Some(number(v, n, "`Mop/s total`")?);
        } else if let Some(v) = field(line, "Verification") {
            verified = Some(match v {
                "SUCCESSFUL" => true,
                "UNSUCCESSFUL" => false,
                _ => {
                    return Err(wrong(format!(
                        "expected SUCCESSFUL or UNSUCCESSFUL, found {v:?}"
                    )))
                }
            });
        } else if let Some(timer) = timer_line(line, n)? {
            timers.push(timer);
        }
    }
    let missing = |label: &str| ParseError {
        line: None,
        what: format!(
            "no `{label} =` line in {} lines (is this an NPB 3.4 program?)",
            text.lines().count()
        ),
    };
    let verified = verified.ok_or_else(|| missing("Verification"))?;
    if !verified {
        return Err(ParseError {
            line: None,
            what: "the program reports Verification = UNSUCCESSFUL".into(),
        });
    }
    let printed = seconds.ok_or_else(|| missing("Time in seconds"))?;
    let seconds = timers
        .iter()
        .find(|t| t.name == "total")
        .map_or(printed, |t| t.max);
    Ok(RefRun {
        seconds,
        mops: mops.ok_or_else(|| missing("Mop/s total"))?,
        timers,
    })
}

/// The `mpirun` command and the arguments before `-np`.
fn mpirun() -> Result<Command, String> {
    let mpirun = std::env::var_os(MPIRUN_VAR)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "mpirun".into());
    let version = Command::new(&mpirun)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", mpirun.to_string_lossy()))?;
    let open_mpi = String::from_utf8_lossy(&version.stdout)
        .to_ascii_lowercase()
        .contains("open mpi");
    let mut command = Command::new(&mpirun);
    if open_mpi {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            command.arg("--allow-run-as-root");
        }
        command.arg("--oversubscribe");
    }
    Ok(command)
}

/// Step 3: runs the reference once for `point` from `dir`.
pub(crate) fn run_once(dir: &Path, point: &RefPoint) -> Result<RefRun, String> {
    let program: PathBuf = dir.join(program_name(point.kernel, point.class));
    let out = mpirun()?
        .args(["-np", &point.nprocs.to_string()])
        .arg(&program)
        .env("NPB_TIMER_FLAG", "1")
        .env_remove("MTTL_NP")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run mpirun for {}: {e}", program.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "{}: {}: {}",
            program.display(),
            out.status,
            last.unwrap_or("")
        ));
    }
    parse_output(&stdout, point).map_err(|e| format!("{}: {e}", program.display()))
}

/// One of our configurations beside the reference of its kernel, class and
/// process count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pairing {
    /// `kernel,class,nprocs,variant,backend` of ours.
    pub(crate) key: String,
    pub(crate) ours: Option<f64>,
    pub(crate) reference: Option<f64>,
    /// Best of ours ÷ best of the reference.
    pub(crate) ratio: Option<f64>,
    /// Median over sweeps of ours ÷ reference in the same sweep, and of how
    /// many sweeps.
    pub(crate) paired: Option<(f64, usize)>,
}

/// The best (shortest) time of `runs`.
fn best<R>(runs: &[Run<R>], seconds: &impl Fn(&R) -> Option<f64>) -> Option<f64> {
    per_sweep(runs)
        .into_iter()
        .filter_map(|r| seconds(&r.result))
        .reduce(f64::min)
}

/// Step 4: pairs each of `ours` (a key and its runs) with the reference runs
/// of the same kernel, class and process count; `seconds` reads a run's
/// time (`None` for the other side's kind).
pub(crate) fn ratios<R>(
    ours: &[Ours<'_, R>],
    references: &[(RefPoint, &[Run<R>])],
    seconds: impl Fn(&R) -> Option<f64>,
) -> Vec<Pairing> {
    let mut pairings = Vec::new();
    for (key, name, runs) in ours {
        let Some((_, theirs)) = references.iter().find(|(p, _)| p.key() == *key) else {
            continue;
        };
        let (mine, reference) = (best(runs, &seconds), best(theirs, &seconds));
        pairings.push(Pairing {
            key: name.clone(),
            ours: mine,
            reference,
            ratio: mine.zip(reference).map(|(a, b)| a / b),
            paired: paired(runs, theirs, &seconds).map(|r| (r.value, r.count)),
        });
    }
    pairings
}

/// The CSV header of `npb-sweep-reference.csv`.
pub(crate) const CSV_HEADER: &str =
    "kernel,class,nprocs,variant,backend,best_seconds,reference_seconds,ratio,paired_ratio,pairs";

/// `npb-sweep-reference.csv`: one row per pairing.
pub(crate) fn to_csv(pairings: &[Pairing]) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    let num = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    for p in pairings {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            p.key,
            num(p.ours, 4),
            num(p.reference, 4),
            num(p.ratio, 3),
            num(p.paired.map(|p| p.0), 3),
            p.paired.map_or(0, |p| p.1)
        );
    }
    out
}

/// The printed table: each pairing's times and ratios.
pub(crate) fn summary(pairings: &[Pairing]) -> String {
    let headers = [
        "kernel,class,procs,variant,backend",
        "ours",
        "NPB 3.4",
        "ours÷NPB (best)",
        "ours÷NPB (paired)",
    ]
    .map(String::from);
    let time = |t: Option<f64>| cell(t, |t| format!("{t:.3}"));
    let rows: Vec<Vec<String>> = pairings
        .iter()
        .map(|p| {
            vec![
                p.key.clone(),
                time(p.ours),
                time(p.reference),
                time(p.ratio),
                p.paired.map_or_else(
                    || cell(None, |_| String::new()),
                    |(r, n)| format!("{r:.3} ({n})"),
                ),
            ]
        })
        .collect();
    format!(
        "\nAgainst the NPB 3.4 reference (seconds; paired: median over sweeps of each sweep's ratio)\n\n{}",
        render(&headers, &rows, &[], true)
    )
}

/// The reference's phase timers of its best run per configuration.
pub(crate) fn timers_summary<R>(
    references: &[(RefPoint, &[Run<R>])],
    run: impl Fn(&R) -> Option<&RefRun>,
) -> String {
    let mut out = String::new();
    for (point, runs) in references {
        let best = per_sweep(runs)
            .into_iter()
            .filter_map(|r| run(&r.result))
            .min_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let Some(best) = best.filter(|b| !b.timers.is_empty()) else {
            continue;
        };
        let phases: Vec<String> = best
            .timers
            .iter()
            .map(|t| format!("{} {:.4}/{:.4}", t.name, t.min, t.max))
            .collect();
        let _ = writeln!(
            out,
            "  {}: {} (min/max over processes, s)",
            point.name(),
            phases.join(", ")
        );
    }
    if out.is_empty() {
        out
    } else {
        format!("\nNPB 3.4's own timers in its best run:\n{out}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IS_B: &str = "\n\n NAS Parallel Benchmarks 3.4 -- IS Benchmark\n\n \
Size:  33554432  (class B)\n Iterations:   10\n Number of processes:     2\n\n\n \
IS Benchmark Completed\n Class           =                        B\n \
Size            =                 33554432\n Iterations      =                       10\n \
Time in seconds =                     0.66\n Total processes =                        2\n \
Active procs    =                        2\n Mop/s total     =                   508.40\n \
Mop/s/process   =                   254.20\n Operation type  =              keys ranked\n \
Verification    =               SUCCESSFUL\n Version         =                      3.4\n\n \
nprocs =      2          minimum     maximum     average\n \
timer  1 (total   ):      0.6581      0.6600      0.6590\n \
timer  2 (rcomp   ):      0.4100      0.4200      0.4150\n \
timer  3 (rcomm   ):      0.2400      0.2500      0.2450\n \
timer  4 (verify  ):      0.0100      0.0110      0.0105\n";

    fn is_b(nprocs: usize) -> RefPoint {
        RefPoint {
            kernel: Kernel::Is,
            class: Class::B,
            nprocs,
        }
    }

    #[test]
    fn reads_time_from_the_total_timer_and_keeps_the_phases() {
        let run = parse_output(IS_B, &is_b(2)).unwrap();
        assert_eq!(run.seconds, 0.66);
        assert_eq!(run.mops, 508.40);
        assert_eq!(run.timers.len(), 4);
        assert_eq!(run.timers[1].name, "rcomp");
        assert_eq!((run.timers[2].min, run.timers[2].max), (0.24, 0.25));
    }

    #[test]
    fn without_timers_the_printed_time_counts() {
        let text: String = IS_B
            .lines()
            .filter(|l| !l.contains("timer"))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("0.66\n", "0.71\n");
        let run = parse_output(&text, &is_b(2)).unwrap();
        assert_eq!(run.seconds, 0.71);
        assert!(run.timers.is_empty());
    }

    #[test]
    fn reads_fortran_timer_lines() {
        let t = timer_line(
            " timer  3(rcomm   ) :      1.2000      1.5000      1.3500",
            7,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (t.name.as_str(), t.min, t.max, t.avg),
            ("rcomm", 1.2, 1.5, 1.35)
        );
    }

    #[test]
    fn bad_output_names_the_line_and_what_was_expected() {
        let e = parse_output(IS_B, &is_b(4)).unwrap_err();
        assert_eq!(e.line, Some(15));
        assert!(e.what.contains("expected 4 processes"), "{e}");

        let e = parse_output(&IS_B.replace("508.40", "fast"), &is_b(2)).unwrap_err();
        assert_eq!(e.line, Some(17));
        assert!(
            e.to_string()
                .contains("expected a number for `Mop/s total`"),
            "{e}"
        );

        let e = parse_output(&IS_B.replace("0.6600 ", "x "), &is_b(2)).unwrap_err();
        assert!(e.what.contains("the maximum"), "{e}");

        let e =
            parse_output(&IS_B.replace("   SUCCESSFUL", " UNSUCCESSFUL"), &is_b(2)).unwrap_err();
        assert!(e.what.contains("UNSUCCESSFUL"), "{e}");

        let e = parse_output("hello\n", &is_b(2)).unwrap_err();
        assert_eq!(e.line, None);
        assert!(
            e.what.contains("no `Verification =` line in 1 lines"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_program_names_the_make_command() {
        let dir = std::env::temp_dir().join(format!("npb-ref-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("is.B.x"), "").unwrap();
        let keys = [(Kernel::Is, Class::B, 2), (Kernel::Cg, Class::C, 1)];
        let e = check_dir(&dir, &keys).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("no cg.C.x there"), "{e}");
        assert!(e.contains("`make cg CLASS=C`"), "{e}");
        let e = check_dir(&dir, &keys).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
    }

    #[test]
    fn ratios_pair_each_of_ours_with_its_reference() {
        let run = |sweep, seconds| Run {
            sweep,
            busy: Some(0.0),
            result: seconds,
        };
        let ours = [run(0, 1.0), run(1, 0.9)];
        let theirs = [run(0, 2.0), run(1, 1.5)];
        let other = [run(0, 3.0)];
        let key = (Kernel::Is, Class::B, 2);
        let pairings = ratios(
            &[
                (key, "IS,B,2,mttl,mpi".into(), &ours[..]),
                (
                    (Kernel::Is, Class::B, 1),
                    "IS,B,1,mttl,mpi".into(),
                    &other[..],
                ),
            ],
            &[(is_b(2), &theirs[..])],
            |s: &f64| Some(*s),
        );
        assert_eq!(pairings.len(), 1);
        let p = &pairings[0];
        assert_eq!((p.ours, p.reference), (Some(0.9), Some(1.5)));
        assert!((p.ratio.unwrap() - 0.6).abs() < 1e-12);
        let (paired, n) = p.paired.unwrap();
        assert_eq!(n, 2);
        assert!((paired - 0.55).abs() < 1e-12, "{paired}");
        assert!(to_csv(&pairings).contains("\nIS,B,2,mttl,mpi,0.9000,1.5000,0.600,0.550,2\n"));
    }
}
