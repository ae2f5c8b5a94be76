//! The pieces every subcommand's report is made of: the median of a run's
//! samples, right-aligned tables, the verdict on a target, the "How
//! measured" block, and printing the report on stdout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use crate::bench::error::BenchError;

/// The median of the finite `values`, or `None` if there are none.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
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

/// Renders right-aligned columns separated by two spaces; `gaps` lists the
/// columns after which a `|` separates groups.
pub(crate) fn render_columns(headers: &[String], rows: &[Vec<String>], gaps: &[usize]) -> String {
    render(headers, rows, gaps, false)
}

/// Renders a left-aligned first column (the row's label) and right-aligned
/// others, separated by two spaces, without trailing spaces.
pub(crate) fn render_labelled(headers: &[String], rows: &[Vec<String>]) -> String {
    render(headers, rows, &[], true)
}

fn render(headers: &[String], rows: &[Vec<String>], gaps: &[usize], labelled: bool) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                out.push_str(if gaps.contains(&(i - 1)) { " | " } else { "  " });
            }
            if i == 0 && labelled {
                let _ = write!(out, "{cell:<w$}");
            } else {
                let _ = write!(out, "{cell:>w$}");
            }
        }
        if labelled {
            out.truncate(out.trim_end().len());
        }
        out.push('\n');
        out
    };
    let mut out = line(headers);
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// Whether a target was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Met,
    Missed,
    /// The figures miss it, but by no more than the measurement strays
    /// from itself (its control), so this machine cannot tell.
    Unresolved,
    NotMeasured,
}

impl Verdict {
    /// The word the targets check prints.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::Unresolved => "unresolved",
            Verdict::NotMeasured => "not measured",
        }
    }

    /// `Met` if `met`, else `Missed`.
    pub(crate) fn of(met: bool) -> Verdict {
        if met {
            Verdict::Met
        } else {
            Verdict::Missed
        }
    }
}

/// One performance target and how the figures compare with it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) verdict: Verdict,
    pub(crate) detail: String,
}

/// The "Targets" block: one line per target.
pub(crate) fn targets_text(targets: &[Target]) -> String {
    let mut out = String::from("\nTargets\n");
    for t in targets {
        let _ = writeln!(out, "  [{}] {} ({})", t.verdict.word(), t.name, t.detail);
    }
    out
}

/// `MTTL_SPIN_US` as the method lines state it.
pub(crate) fn spin_us_setting() -> String {
    std::env::var(mttl_comm::env::SPIN_US).unwrap_or_else(|_| "50 (default)".into())
}

/// Appends the "How measured" block: the `method` lines, then the `notes`.
pub(crate) fn push_how_measured(text: &mut String, method: &[String], notes: &[String]) {
    text.push_str("\nHow measured\n");
    for line in method.iter().chain(notes) {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
}

/// Prints `text` on stdout.
pub(crate) fn print(text: &str) -> Result<(), BenchError> {
    write!(std::io::stdout().lock(), "{text}").map_err(|source| BenchError::Io {
        what: "write the results to",
        path: PathBuf::from("standard output"),
        source,
    })
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
        let headers = vec!["a".to_owned(), "bb".to_owned(), "c".to_owned()];
        let rows = vec![vec!["xyz".to_owned(), "1".to_owned(), String::new()]];
        assert_eq!(
            render_columns(&headers, &rows, &[0]),
            "  a | bb  c\nxyz |  1   \n"
        );
        assert_eq!(render_labelled(&headers, &rows), "a    bb  c\nxyz   1\n");
    }
}
