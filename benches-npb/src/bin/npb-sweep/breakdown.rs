//! The per-process communication breakdown, the paper's tables 5-8: what
//! each rank of a run counted, read from the lines `npb` prints on stderr
//! under `MTTL_STATS=1` (`mttl_core`'s `Stats`, and the `mpi` variant's
//! `mpi_counts`, which print the same format):
//!
//! ```text
//! mttl stats rank 1: send 120 nsend 40 recv 160 probe 0 test 52 | msgs 160 avg 4.10 KB total 0.66 MB
//! ```
//!
//! A line may carry a prefix (`mpirun --tag-output` adds one); lines without
//! `mttl stats rank ` are other output and are skipped. A run's breakdown is
//! complete only with exactly one well-formed line for each of its ranks;
//! anything else is a [`StatsError`] saying what is wrong, which the sweep
//! records as "no stats" for that configuration.

use std::fmt::Write as _;

/// What marks a stats line.
const MARK: &str = "mttl stats rank ";

/// The format a stats line must have, for error messages.
const FORMAT: &str =
    "mttl stats rank R: send S nsend N recv R probe P test T | msgs M avg A KB total B MB";

/// The header of `npb-sweep-breakdown.csv`; the configuration's columns
/// come first.
pub(crate) const CSV_HEADER: &str =
    "kernel,class,nprocs,variant,backend,net,rank,send,nsend,recv,probe,test,msgs,avg_kb,total_mb";

/// One rank's communication counts, as `npb` printed them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RankStats {
    pub(crate) rank: usize,
    /// Blocking sends.
    pub(crate) send: u64,
    /// Non-blocking sends.
    pub(crate) nsend: u64,
    /// Receives.
    pub(crate) recv: u64,
    /// Probes.
    pub(crate) probe: u64,
    /// Completion tests of non-blocking sends.
    pub(crate) test: u64,
    /// Messages sent (`send + nsend`).
    pub(crate) msgs: u64,
    /// Average message size, KiB.
    pub(crate) avg_kb: f64,
    /// Bytes sent, MiB.
    pub(crate) total_mb: f64,
}

impl RankStats {
    /// The five counts with their names, in the line's order.
    pub(crate) fn counts(&self) -> [(&'static str, u64); 5] {
        [
            ("send", self.send),
            ("nsend", self.nsend),
            ("recv", self.recv),
            ("probe", self.probe),
            ("test", self.test),
        ]
    }
}

/// Why a run's breakdown is missing or incomplete.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum StatsError {
    /// A line has the mark but not the format.
    #[error("malformed stats line ({reason}; expected `{FORMAT}`): {line:?}")]
    Malformed {
        /// The line as printed.
        line: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A rank printed no line.
    #[error("no stats line from rank {rank} of {nprocs} (was MTTL_STATS=1 passed on to it?)")]
    Missing { rank: usize, nprocs: usize },
    /// A rank printed two lines.
    #[error("two stats lines from rank {rank}")]
    Duplicate { rank: usize },
    /// A line names a rank the run does not have.
    #[error("a stats line from rank {rank}, but the run has {nprocs} ranks")]
    NoSuchRank { rank: usize, nprocs: usize },
}

/// Parses one line: `None` if it is not a stats line.
pub(crate) fn parse_line(line: &str) -> Option<Result<RankStats, StatsError>> {
    let at = line.find(MARK)?;
    let body = &line[at + MARK.len()..];
    let malformed = |reason: String| StatsError::Malformed {
        line: line.trim_end().to_owned(),
        reason,
    };
    let Some((rank, rest)) = body.split_once(':') else {
        return Some(Err(malformed("no `:` after the rank".into())));
    };
    Some(parse_counts(rank.trim(), rest).map_err(malformed))
}

/// The rank `rank` and the counts in `rest` (what follows `R:`), or what is
/// wrong with them.
fn parse_counts(rank: &str, rest: &str) -> Result<RankStats, String> {
    let rank = rank
        .parse()
        .map_err(|_| format!("the rank {rank:?} is not a number"))?;
    let mut words = Words {
        rest: rest.split_whitespace(),
    };
    let send = words.count("send")?;
    let nsend = words.count("nsend")?;
    let recv = words.count("recv")?;
    let probe = words.count("probe")?;
    let test = words.count("test")?;
    words.expect("|")?;
    let msgs = words.count("msgs")?;
    let avg_kb = words.amount("avg", "KB")?;
    let total_mb = words.amount("total", "MB")?;
    if let Some(extra) = words.rest.next() {
        return Err(format!("unexpected {extra:?} at the end"));
    }
    Ok(RankStats {
        rank,
        send,
        nsend,
        recv,
        probe,
        test,
        msgs,
        avg_kb,
        total_mb,
    })
}

/// The words of a stats line after `R:`, taken in order.
struct Words<'a> {
    rest: std::str::SplitWhitespace<'a>,
}

impl Words<'_> {
    /// The next word, which must be `word`.
    fn expect(&mut self, word: &str) -> Result<(), String> {
        match self.rest.next() {
            Some(w) if w == word => Ok(()),
            Some(w) => Err(format!("{w:?} where {word:?} belongs")),
            None => Err(format!("it ends where {word:?} belongs")),
        }
    }

    /// The number after `name`.
    fn number<T: std::str::FromStr>(&mut self, name: &str) -> Result<T, String> {
        self.expect(name)?;
        match self.rest.next() {
            Some(w) => w
                .parse()
                .map_err(|_| format!("{name} is {w:?}, not a number")),
            None => Err(format!("it ends where the value of {name} belongs")),
        }
    }

    /// `name N`: a count.
    fn count(&mut self, name: &str) -> Result<u64, String> {
        self.number(name)
    }

    /// `name X unit`: a finite, non-negative amount.
    fn amount(&mut self, name: &str, unit: &str) -> Result<f64, String> {
        let x: f64 = self.number(name)?;
        if !(x.is_finite() && x >= 0.0) {
            return Err(format!("{name} is {x}"));
        }
        self.expect(unit)?;
        Ok(x)
    }
}

/// The breakdown of a run of `nprocs` ranks from everything it printed on
/// stderr: one entry per rank, by rank.
pub(crate) fn parse_run(stderr: &str, nprocs: usize) -> Result<Vec<RankStats>, StatsError> {
    let mut ranks: Vec<Option<RankStats>> = vec![None; nprocs];
    for line in stderr.lines() {
        let Some(stats) = parse_line(line) else {
            continue;
        };
        let stats = stats?;
        let rank = stats.rank;
        let slot = ranks
            .get_mut(rank)
            .ok_or(StatsError::NoSuchRank { rank, nprocs })?;
        if slot.replace(stats).is_some() {
            return Err(StatsError::Duplicate { rank });
        }
    }
    ranks
        .into_iter()
        .enumerate()
        .map(|(rank, s)| s.ok_or(StatsError::Missing { rank, nprocs }))
        .collect()
}

/// The CSV rows of one configuration, `key` being its first five columns
/// (`kernel,class,nprocs,variant,backend,net`): one row per rank.
pub(crate) fn csv_rows(out: &mut String, key: &str, ranks: &[RankStats]) {
    for r in ranks {
        let _ = writeln!(
            out,
            "{key},{},{},{},{},{},{},{},{:.2},{:.2}",
            r.rank, r.send, r.nsend, r.recv, r.probe, r.test, r.msgs, r.avg_kb, r.total_mb
        );
    }
}

/// The headers of the summary's breakdown table.
pub(crate) const TABLE_HEADERS: [&str; 11] = [
    "procs", "variant", "rank", "send", "nsend", "recv", "probe", "test", "msgs", "avg KB",
    "total MB",
];

/// The table's rows for one configuration, `label` naming its variant and
/// backend: one per rank.
pub(crate) fn table_rows(nprocs: usize, label: &str, ranks: &[RankStats]) -> Vec<Vec<String>> {
    let row = |r: &RankStats| {
        let counts = [
            r.rank as u64,
            r.send,
            r.nsend,
            r.recv,
            r.probe,
            r.test,
            r.msgs,
        ];
        let mut row = vec![nprocs.to_string(), label.to_owned()];
        row.extend(counts.iter().map(u64::to_string));
        row.extend([format!("{:.2}", r.avg_kb), format!("{:.2}", r.total_mb)]);
        row
    };
    ranks.iter().map(row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str =
        "mttl stats rank 1: send 120 nsend 40 recv 160 probe 0 test 52 | msgs 160 avg 4.10 KB total 0.66 MB";

    fn rank(rank: usize, send: u64) -> RankStats {
        RankStats {
            rank,
            send,
            nsend: 40,
            recv: 160,
            probe: 0,
            test: 52,
            msgs: send + 40,
            avg_kb: 4.1,
            total_mb: 0.66,
        }
    }

    fn line(rank: usize, send: u64) -> String {
        format!(
            "mttl stats rank {rank}: send {send} nsend 40 recv 160 probe 0 test 52 | msgs {} avg 4.10 KB total 0.66 MB",
            send + 40
        )
    }

    #[test]
    fn a_line_is_read_whole() {
        assert_eq!(parse_line(LINE), Some(Ok(rank(1, 120))));
    }

    #[test]
    fn the_runtime_and_the_mpi_counts_print_lines_it_reads() {
        let stats = mttl::Stats {
            send: 3,
            nsend: 4,
            recv: 5,
            probe: 6,
            test: 7,
            bytes_sent: 7 * 2048,
        };
        let parsed = parse_line(&format!("mttl stats rank 2: {stats}"))
            .expect("a stats line")
            .expect("well formed");
        assert_eq!(
            (parsed.rank, parsed.counts().map(|c| c.1), parsed.msgs),
            (2, [3, 4, 5, 6, 7], 7)
        );
        assert_eq!((parsed.avg_kb, parsed.total_mb), (2.0, 0.01));
    }

    #[test]
    fn a_prefix_is_skipped_and_other_lines_ignored() {
        let tagged = format!("[1,1]<stderr>:{LINE}\n");
        assert_eq!(parse_line(&tagged), Some(Ok(rank(1, 120))));
        assert_eq!(parse_line("mttl: rank 1 started"), None);
        assert_eq!(parse_line(""), None);
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        let cases = [
            ("mttl stats rank 1 send 1", "no `:`"),
            ("mttl stats rank x: send 1", "rank \"x\" is not a number"),
            ("mttl stats rank 1: send", "value of send"),
            ("mttl stats rank 1: send -3", "send is \"-3\""),
            ("mttl stats rank 1: nsend 3", "\"nsend\" where \"send\""),
            (&LINE.replace(" | ", " "), "\"msgs\" where \"|\""),
            (&LINE.replace("4.10 KB", "4.10 kB"), "\"kB\" where \"KB\""),
            (&LINE.replace("0.66", "NaN"), "total is NaN"),
            (&format!("{LINE} extra"), "unexpected \"extra\""),
            (&LINE[..LINE.len() - 3], "ends where \"MB\""),
        ];
        for (line, reason) in cases {
            let e = parse_line(line)
                .expect("has the mark")
                .expect_err("malformed");
            let text = e.to_string();
            assert!(text.contains(reason), "{line:?}: {text}");
            assert!(text.contains("expected `mttl stats rank R:"), "{text}");
        }
    }

    #[test]
    fn a_run_gives_one_entry_per_rank_in_rank_order() {
        let stderr = format!("noise\n{}\nmore noise\n{}\n", line(1, 7), line(0, 9));
        assert_eq!(parse_run(&stderr, 2), Ok(vec![rank(0, 9), rank(1, 7)]));
    }

    #[test]
    fn an_incomplete_run_is_an_error_not_a_panic() {
        assert_eq!(
            parse_run(&line(0, 1), 2),
            Err(StatsError::Missing { rank: 1, nprocs: 2 })
        );
        assert_eq!(
            parse_run("", 1),
            Err(StatsError::Missing { rank: 0, nprocs: 1 })
        );
        assert_eq!(
            parse_run(&format!("{}\n{}", line(0, 1), line(0, 2)), 2),
            Err(StatsError::Duplicate { rank: 0 })
        );
        assert_eq!(
            parse_run(&line(5, 1), 2),
            Err(StatsError::NoSuchRank { rank: 5, nprocs: 2 })
        );
        let broken = format!("{}\nmttl stats rank 1: send", line(0, 1));
        assert!(matches!(
            parse_run(&broken, 2),
            Err(StatsError::Malformed { .. })
        ));
    }

    #[test]
    fn csv_has_one_row_per_rank_under_the_header() {
        let mut csv = format!("{CSV_HEADER}\n");
        csv_rows(&mut csv, "CG,S,2,mttl,tcp,local", &[rank(0, 9), rank(1, 7)]);
        let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.len() == rows[0].len()));
        assert_eq!(
            rows[1],
            [
                "CG", "S", "2", "mttl", "tcp", "local", "0", "9", "40", "160", "0", "52", "49",
                "4.10", "0.66"
            ]
        );
        assert_eq!(rows[2][6..8], ["1", "7"]);
    }
}
