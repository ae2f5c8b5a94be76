//! How much of a kernel the paper's port changes: the lines that differ
//! between the `mpi` and `mttl` variants, by a longest-common-subsequence
//! diff over their code lines (what `diff` would mark), set against the
//! whole program (shared core plus driver).
//!
//! Code lines are the lines of a file up to its unit tests
//! (`#[cfg(test)]`), trimmed, without blank and comment-only lines, so that
//! documentation and formatting do not count. The paper reports CG changing
//! about 60 of 800 lines from C++/MPI, IS about 50 of 1000.

use std::fmt::Write as _;

use super::report::Kernel;

/// The sources of one kernel: its two drivers and its shared core.
#[derive(Clone, Copy, Debug)]
pub struct KernelSources {
    /// The kernel.
    pub kernel: Kernel,
    /// The `mpi` variant's driver.
    pub mpi: &'static str,
    /// The `mttl` variant's driver.
    pub mttl: &'static str,
    /// The shared core the kernel uses (algorithm, classes, random numbers,
    /// report).
    pub core: &'static [&'static str],
}

/// Both kernels' sources, compiled in.
pub const SOURCES: [KernelSources; 2] = [
    KernelSources {
        kernel: Kernel::Cg,
        mpi: include_str!("cg_mpi.rs"),
        mttl: include_str!("cg_mttl.rs"),
        core: &[
            include_str!("../cg/block.rs"),
            include_str!("../cg/comm.rs"),
            include_str!("../cg/grid.rs"),
            include_str!("../cg/kernels.rs"),
            include_str!("../cg/matrix.rs"),
            include_str!("../cg/mod.rs"),
            include_str!("../cg/solver.rs"),
            include_str!("../class.rs"),
            include_str!("../prefetch.rs"),
            include_str!("../randlc.rs"),
            include_str!("report.rs"),
        ],
    },
    KernelSources {
        kernel: Kernel::Is,
        mpi: include_str!("is_mpi.rs"),
        mttl: include_str!("is_mttl.rs"),
        core: &[
            include_str!("../is/comm.rs"),
            include_str!("../is/mod.rs"),
            include_str!("../is/ranking.rs"),
            include_str!("../class.rs"),
            include_str!("../prefetch.rs"),
            include_str!("../randlc.rs"),
            include_str!("report.rs"),
        ],
    },
];

/// The code lines of a Rust source (see the module docs).
pub fn code_lines(source: &str) -> Vec<&str> {
    source
        .lines()
        .map(str::trim)
        .take_while(|l| *l != "#[cfg(test)]")
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect()
}

/// What a line diff of two files found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineDiff {
    /// Code lines of the first file.
    pub left: usize,
    /// Code lines of the second file.
    pub right: usize,
    /// Lines of a longest common subsequence.
    pub common: usize,
}

impl LineDiff {
    /// Lines of the first file the second does not keep.
    pub fn removed(&self) -> usize {
        self.left - self.common
    }

    /// Lines of the second file that are new.
    pub fn added(&self) -> usize {
        self.right - self.common
    }

    /// Lines changed, counting a removed line replaced by an added one once:
    /// the larger of the two.
    pub fn changed(&self) -> usize {
        self.removed().max(self.added())
    }
}

/// Diffs the code lines of `left` and `right`.
pub fn diff(left: &str, right: &str) -> LineDiff {
    let (a, b) = (code_lines(left), code_lines(right));
    // lcs[j] holds the LCS length of a[..i] and b[..j], row by row.
    let mut lcs = vec![0usize; b.len() + 1];
    for x in &a {
        let mut diagonal = 0;
        for (j, y) in b.iter().enumerate() {
            let above = lcs[j + 1];
            lcs[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(lcs[j])
            };
            diagonal = above;
        }
    }
    LineDiff {
        left: a.len(),
        right: b.len(),
        common: lcs[b.len()],
    }
}

/// One kernel's comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDiff {
    /// The kernel.
    pub kernel: Kernel,
    /// The drivers' diff (`mpi` left, `mttl` right).
    pub drivers: LineDiff,
    /// Code lines of the shared core.
    pub core: usize,
}

impl KernelDiff {
    /// Code lines of the whole `mttl` program: core plus driver.
    pub fn program(&self) -> usize {
        self.core + self.drivers.right
    }
}

/// Compares the two variants of `sources`.
pub fn compare(sources: &KernelSources) -> KernelDiff {
    KernelDiff {
        kernel: sources.kernel,
        drivers: diff(sources.mpi, sources.mttl),
        core: sources.core.iter().map(|s| code_lines(s).len()).sum(),
    }
}

/// The comparison of both kernels as a table, with how it was counted.
pub fn report() -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Lines changed from the mpi variant to the mttl variant (code lines: no blank, \
         comment or test lines; LCS diff)\n"
    );
    let _ = writeln!(
        out,
        "kernel  core  mpi driver  mttl driver  removed  added  changed  of program"
    );
    for s in &SOURCES {
        let d = compare(s);
        let _ = writeln!(
            out,
            "{:<6} {:>5} {:>11} {:>12} {:>8} {:>6} {:>8} {:>7} ({:.1}%)",
            d.kernel.name(),
            d.core,
            d.drivers.left,
            d.drivers.right,
            d.drivers.removed(),
            d.drivers.added(),
            d.drivers.changed(),
            d.program(),
            100.0 * d.drivers.changed() as f64 / d.program() as f64
        );
    }
    let _ = writeln!(
        out,
        "\n(changed = max(removed, added); program = core + mttl driver. The paper: \
         CG about 60 of 800 lines, IS about 50 of 1000.)"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_lines_skip_blanks_comments_and_tests() {
        let src = "//! doc\nfn a() {\n\n    // note\n    b();\n}\n#[cfg(test)]\nmod tests {}\n";
        assert_eq!(code_lines(src), ["fn a() {", "b();", "}"]);
    }

    #[test]
    fn diff_counts_what_diff_marks() {
        let a = "a\nb\nc\nd\n";
        let b = "a\nx\nc\nd\ny\n";
        let d = diff(a, b);
        assert_eq!(
            d,
            LineDiff {
                left: 4,
                right: 5,
                common: 3
            }
        );
        assert_eq!((d.removed(), d.added(), d.changed()), (1, 2, 2));
        assert_eq!(diff(a, a).changed(), 0);
        assert_eq!(diff("", a).added(), 4);
    }

    #[test]
    fn the_variants_share_most_of_their_program() {
        for s in &SOURCES {
            let d = compare(s);
            assert!(d.drivers.common > 0, "{:?}", d);
            assert!(d.drivers.changed() < d.program() / 2, "{:?}", d);
        }
    }
}
