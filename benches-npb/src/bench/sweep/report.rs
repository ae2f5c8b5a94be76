//! What every report is made of: the median of a run's samples,
//! right-aligned tables, targets and their verdicts, the "How measured"
//! block with the notes about disturbance and what was not measured, the
//! `--json` document's common keys, and the files (CSV and a figure as SVG
//! and PNG) written beside the output.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::jobs::{mpi_build_hint, BenchConfig, Measured};
use super::plot::{write_both, Picture};
use super::{JobLog, Swept, BUSY_WARNING};
use crate::bench::error::BenchError;

/// The median of the finite `values`, or `None` if there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// Renders columns separated by two spaces: the first left-aligned if
/// `labelled` (without trailing spaces), every other right-aligned; `gaps`
/// lists the columns after which a `|` separates groups.
pub fn render(headers: &[String], rows: &[Vec<String>], gaps: &[usize], labelled: bool) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for cells in std::iter::once(headers).chain(rows.iter().map(Vec::as_slice)) {
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str(if gaps.contains(&(i - 1)) { " | " } else { "  " });
            }
            if i == 0 && labelled {
                let _ = write!(line, "{cell:<w$}");
            } else {
                let _ = write!(line, "{cell:>w$}");
            }
        }
        if labelled {
            line.truncate(line.trim_end().len());
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A figure for a table: two decimals below 10, one below 1000, else
/// none.
pub fn short(v: f64) -> String {
    match v.abs() {
        a if a < 10.0 => format!("{v:.2}"),
        a if a < 1000.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// `v` formatted by `f`, or `-`.
pub fn cell(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "-".to_owned(), f)
}

/// Whether a target was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Met,
    Missed,
    /// The figures miss it, but by no more than the measurement strays
    /// from itself (its control), so this machine cannot tell.
    Unresolved,
    NotMeasured,
}

impl Verdict {
    /// The word the targets check prints.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Unresolved => "unresolved",
            Verdict::NotMeasured => "not measured",
        }
    }

    /// `Met` if `met`, else `Missed`.
    pub fn of(met: bool) -> Verdict {
        if met {
            Verdict::Met
        } else {
            Verdict::Missed
        }
    }

    /// The verdict on `ratio` against `limit` (at most it if `limit` is
    /// above 1, else at least it): a miss by no more than `strays` (how far
    /// the control strays from 1) is unresolved.
    pub fn on_ratio(ratio: f64, limit: f64, strays: Option<f64>) -> Verdict {
        let within = if limit > 1.0 {
            ratio <= limit
        } else {
            ratio >= limit
        };
        match strays {
            _ if within => Verdict::Met,
            Some(s) if s >= (ratio - 1.0).abs() => Verdict::Unresolved,
            _ => Verdict::Missed,
        }
    }
}

/// One performance target and how the figures compare with it.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

impl Target {
    /// The target `name` judged on `figure` (met if `met(figure)`), shown
    /// as `show(figure)`; not measured without it, for want of `needs`.
    pub fn judge<T>(
        name: impl Into<String>,
        figure: Option<T>,
        met: impl Fn(&T) -> bool,
        show: impl Fn(&T) -> String,
        needs: &str,
    ) -> Target {
        let (verdict, detail) = match figure {
            Some(f) => (Verdict::of(met(&f)), show(&f)),
            None => (Verdict::NotMeasured, format!("needs {needs}")),
        };
        Target {
            name: name.into(),
            verdict,
            detail,
        }
    }
}

/// The "Targets" block: one line per target.
pub fn targets_text(targets: &[Target]) -> String {
    let mut out = String::from("\nTargets\n");
    for t in targets {
        let _ = writeln!(out, "  [{}] {} ({})", t.verdict.word(), t.name, t.detail);
    }
    out
}

/// The targets in the `--json` document.
pub fn targets_json(targets: &[Target]) -> Value {
    targets
        .iter()
        .map(|t| json!({ "target": t.name, "status": t.verdict.word(), "detail": t.detail }))
        .collect()
}

/// `MTTL_SPIN_US` as the method lines state it.
pub fn spin_us_setting() -> String {
    std::env::var(mttl_comm::env::SPIN_US).unwrap_or_else(|_| "50 (default)".into())
}

/// The method line every sweep of two-rank jobs starts with; `hosts`:
/// the `--hosts` the jobs ran across, if any.
pub fn sweeps_line(reps: u32, settle: f64, hosts: Option<&str>) -> String {
    let place = match hosts {
        Some(hosts) => format!("across the hosts {hosts} (rank 0 on the first)"),
        None => "on this machine".to_owned(),
    };
    format!(
        "2 ranks {place}; {reps} sweep(s) per configuration, configurations \
         alternated (order rotated each sweep); every sweep is a fresh job, started after \
         waiting up to {settle} s for other processes to use less than {BUSY_WARNING} CPU."
    )
}

/// One method line per configuration: its column and what runs; with
/// `spin`, the TCP one also states `MTTL_SPIN_US`.
pub fn config_lines<C: BenchConfig>(configs: &[C], spin: bool) -> Vec<String> {
    configs
        .iter()
        .map(|c| {
            let mut line = format!("{}: {}", c.column(), c.description());
            if spin && c.name() == "tcp" {
                let _ = write!(line, "; MTTL_SPIN_US={}", spin_us_setting());
            }
            line
        })
        .collect()
}

/// The notes of a sweep that repeats disturbed runs up to `retries` times
/// and counts undisturbed ones first: whether the load could be read,
/// which runs were disturbed, which configurations had no undisturbed run,
/// and which of `all` were not measured (and why).
pub fn notes<C: BenchConfig>(
    bench: &str,
    all: &[C],
    configs: &[C],
    log: &[JobLog<C>],
    retries: usize,
) -> Vec<String> {
    let mut notes = Vec::new();
    let disturbed: Vec<String> = log
        .iter()
        .filter(|j| j.disturbed())
        .map(|j| {
            format!(
                "sweep {} {}: {:.1}",
                j.sweep,
                j.name,
                j.busy_during.unwrap_or(0.0)
            )
        })
        .collect();
    if log.iter().all(|j| j.busy_during.is_none()) {
        notes.push(
            "The load of other processes could not be read (no /proc): runs were not \
             checked for disturbance."
                .into(),
        );
    } else if disturbed.is_empty() {
        notes.push(format!(
            "No run was disturbed: other processes kept less than {BUSY_WARNING} CPU busy \
             during every run."
        ));
    } else {
        let repeated = if retries > 0 {
            format!("each was repeated up to {retries} times, and ")
        } else {
            String::new()
        };
        notes.push(format!(
            "Disturbed runs (other processes kept this many CPUs busy meanwhile; {repeated}only \
             undisturbed runs count where a configuration has any): {}.",
            disturbed.join(", ")
        ));
        for &config in configs {
            if log
                .iter()
                .filter(|j| j.config == config)
                .all(JobLog::disturbed)
            {
                notes.push(format!(
                    "Every run of {} was disturbed: its figures are suspect.",
                    config.name()
                ));
            }
        }
    }
    let missing: Vec<&str> = all
        .iter()
        .filter(|c| !configs.contains(c))
        .map(|c| c.name())
        .collect();
    if !cfg!(feature = "mpi") {
        notes.push(format!(
            "This mttl-bench was built without the `mpi` feature, so the MPI configurations \
             were not measured. For them run `{}`.",
            mpi_build_hint(bench)
        ));
    } else if !missing.is_empty() {
        notes.push(format!(
            "Not measured this time (see --backends): {}.",
            missing.join(", ")
        ));
    }
    notes
}

/// Appends the "How measured" block: the `method` lines, then the `notes`.
pub fn push_how_measured(text: &mut String, method: &[String], notes: &[String]) {
    text.push_str("\nHow measured\n");
    for line in method.iter().chain(notes) {
        let _ = writeln!(text, "  {line}");
    }
}

/// What a subcommand that sweeps worker jobs reports: its tables, how it
/// measured, the notes, the targets and its own part of the `--json`
/// document; [`Report::emit`] prints them in the order every subcommand
/// has and adds the keys every document has.
#[derive(Debug, Clone)]
pub struct Report {
    pub tables: String,
    pub method: Vec<String>,
    pub notes: Vec<String>,
    pub targets: Vec<Target>,
    /// Lines printed after the targets (the files written).
    pub trailer: String,
    /// The subcommand's keys of the `--json` document; they win over the
    /// common ones of the same name.
    pub doc: Value,
    /// The common keys: `benchmark`, `ranks`, `reps`, `configs` (each
    /// configuration with the backend its workers ran on and how many of
    /// its runs were (un)disturbed) and `jobs`.
    common: Value,
}

impl Report {
    /// The report of `mttl-bench BENCH`'s sweeps of `all` ([`notes`]: a
    /// disturbed run was repeated up to `retries` times); the subcommand
    /// fills in the rest.
    pub fn new<C: BenchConfig, R>(
        bench: &str,
        reps: u32,
        all: &[C],
        swept: &Swept<C, Measured<R>>,
        retries: usize,
    ) -> Report {
        let configs: Vec<Value> = swept
            .runs
            .iter()
            .map(|(c, runs)| {
                json!({
                    "name": c.name(),
                    "column": c.column(),
                    "description": c.description(),
                    "backend": runs.first().map_or("", |r| r.result.backend.as_str()),
                    "runs": runs.len(),
                    "undisturbed_runs": runs.iter().filter(|r| !r.disturbed()).count(),
                })
            })
            .collect();
        let jobs: Vec<Value> = swept.log.iter().map(JobLog::to_json).collect();
        Report {
            tables: String::new(),
            method: Vec::new(),
            notes: notes(bench, all, &swept.configs(), &swept.log, retries),
            targets: Vec::new(),
            trailer: String::new(),
            doc: json!({}),
            common: json!({
                "benchmark": bench, "ranks": 2, "reps": reps, "configs": configs, "jobs": jobs,
            }),
        }
    }

    /// The tables, "How measured" and the targets, as printed.
    pub fn text(&self) -> String {
        let mut text = self.tables.clone();
        push_how_measured(&mut text, &self.method, &self.notes);
        text.push_str(&targets_text(&self.targets));
        text.push_str(&self.trailer);
        text
    }

    /// The whole `--json` document.
    pub fn document(&self) -> Value {
        let mut doc = self.common.clone();
        doc["method"] = self.method.clone().into();
        doc["notes"] = self.notes.clone().into();
        doc["targets"] = targets_json(&self.targets);
        if let (Some(all), Some(own)) = (doc.as_object_mut(), self.doc.as_object()) {
            all.extend(own.clone());
        }
        doc
    }

    /// Prints the report: with `json` the document on stdout (and then, if
    /// `tables_on_stderr`, the text on stderr for a person watching), else
    /// the text.
    pub fn emit(&self, json: bool, tables_on_stderr: bool) -> Result<(), BenchError> {
        if !json {
            return print(&self.text());
        }
        if tables_on_stderr {
            eprint!("{}", self.text());
        }
        print(&format!("{:#}\n", self.document()))
    }
}

/// Prints `text` on stdout.
pub fn print(text: &str) -> Result<(), BenchError> {
    write!(std::io::stdout().lock(), "{text}").map_err(|source| BenchError::Io {
        what: "write the results to",
        path: PathBuf::from("standard output"),
        source,
    })
}

/// Where a CSV file and its figure go: side by side, `NAME.csv`,
/// `NAME.svg`, `NAME.png`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputFiles {
    pub csv: PathBuf,
    pub svg: PathBuf,
    pub png: PathBuf,
}

impl OutputFiles {
    /// From a `--csv` option: a file, or a directory (existing, or written
    /// with a trailing `/`) to hold `NAME.csv`; by default `default`.
    pub fn new(csv: Option<&Path>, default: &str, name: &str) -> OutputFiles {
        let csv = match csv {
            None => PathBuf::from(default),
            Some(p) if p.is_dir() || p.as_os_str().to_string_lossy().ends_with('/') => {
                p.join(format!("{name}.csv"))
            }
            Some(p) => p.to_owned(),
        };
        OutputFiles {
            svg: csv.with_extension("svg"),
            png: csv.with_extension("png"),
            csv,
        }
    }

    /// Writes the CSV text and the picture both ways.
    pub fn write(&self, csv_text: &str, picture: &impl Picture) -> Result<(), BenchError> {
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
        write_both(&self.csv, picture)?;
        Ok(())
    }

    /// The three paths in the `--json` document.
    pub fn to_json(&self) -> Value {
        json!({ "csv": self.csv, "svg": self.svg, "png": self.png })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_skips_non_finite_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, f64::NAN, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[f64::INFINITY]), None);
    }

    #[test]
    fn tables_align_and_group() {
        assert_eq!(
            [short(9.0), short(12.34), short(-1234.5)],
            ["9.00", "12.3", "-1234"]
        );
        let headers = vec!["a".to_owned(), "bb".to_owned(), "c".to_owned()];
        let rows = vec![vec!["xyz".to_owned(), "1".to_owned(), String::new()]];
        assert_eq!(
            render(&headers, &rows, &[0], false),
            "  a | bb  c\nxyz |  1   \n"
        );
        assert_eq!(render(&headers, &rows, &[], true), "a    bb  c\nxyz   1\n");
    }

    #[test]
    fn a_miss_within_the_control_is_unresolved() {
        assert_eq!(Verdict::on_ratio(1.04, 1.05, None), Verdict::Met);
        assert_eq!(Verdict::on_ratio(0.93, 0.95, None), Verdict::Missed);
        assert_eq!(
            Verdict::on_ratio(0.93, 0.95, Some(0.08)),
            Verdict::Unresolved
        );
        assert_eq!(Verdict::on_ratio(0.93, 0.95, Some(0.01)), Verdict::Missed);
        assert_eq!(Verdict::on_ratio(1.2, 1.05, Some(0.1)), Verdict::Missed);
        let t = Target::judge("x", Some(9.0), |&v| v <= 10.0, |v| format!("{v}"), "tcp");
        assert_eq!((t.verdict, t.detail.as_str()), (Verdict::Met, "9"));
        let t = Target::judge("x", None::<f64>, |_| true, |_| String::new(), "tcp at 8");
        assert_eq!(
            (t.verdict, t.detail.as_str()),
            (Verdict::NotMeasured, "needs tcp at 8")
        );
    }

    #[test]
    fn output_files_sit_side_by_side() {
        let files = OutputFiles::new(Some(Path::new("out/x.csv")), "d/r.csv", "r");
        assert_eq!(files.svg, Path::new("out/x.svg"));
        assert_eq!(files.png, Path::new("out/x.png"));
        let dir = std::env::temp_dir();
        assert_eq!(
            OutputFiles::new(Some(&dir), "d/r.csv", "r").csv,
            dir.join("r.csv")
        );
        assert_eq!(
            OutputFiles::new(Some(Path::new("new-dir/")), "d/r.csv", "r").csv,
            Path::new("new-dir/r.csv")
        );
        assert_eq!(
            OutputFiles::new(None, "d/r.csv", "r").csv,
            Path::new("d/r.csv")
        );
    }
}
