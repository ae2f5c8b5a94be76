//! Reader of time-independent (TI) traces: a directory of per-rank files
//! `rank-NNNNN.ti`, as `mttl-trace export --ti` and `mttl-trace scale`
//! write them (the format: `docs/prediction.md`).
//!
//! ```text
//! mttl-ti 1
//! ranks N
//! rank R
//! calc NS
//! send BYTES to PEER tag TAG
//! isend BYTES to PEER tag TAG
//! recv BYTES from PEER tag TAG
//! ```
//!
//! Lines may be blank or comments (`#` to the end of the line). Semantics,
//! as LogGOPSim's GOAL traces give them: a rank's operations run in
//! program order, each `requires` the one before (starts when it is done),
//! except the operation after an `isend`, which `irequires` it (starts once
//! it has started): a non-blocking send overlaps what follows and must only
//! be done by the end of the run.
//!
//! Checked, with the file and line: the header, every operation, peers
//! within `N`; across files: every file states the same `N`, the file's
//! name and its `rank` agree, and the directory holds exactly ranks 0 to
//! N-1.

use std::path::{Path, PathBuf};

use crate::error::{InputError, SimError};
use crate::schedule::{DepKind, NewOp, OpKind, Schedule, ScheduleBuilder};

/// The first line of every TI file.
pub const MAGIC: &str = "mttl-ti 1";

/// Whether `dir` holds TI files (at least one `rank-*.ti`).
pub fn is_ti_dir(dir: &Path) -> bool {
    rank_files(dir).is_ok_and(|f| !f.is_empty())
}

/// The `rank-*.ti` files of `dir`, by name.
fn rank_files(dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    let io = |source| SimError::Io {
        file: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("rank-") && name.ends_with(".ti") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The rank a file's name gives (`rank-00012.ti`: 12).
fn rank_of_name(file: &Path) -> Option<u32> {
    let name = file.file_name()?.to_str()?;
    name.strip_prefix("rank-")?
        .strip_suffix(".ti")?
        .parse()
        .ok()
}

/// Reads the TI trace in `dir`.
pub fn load_dir(dir: &Path) -> Result<Schedule, SimError> {
    let files = rank_files(dir)?;
    if files.is_empty() {
        return Err(InputError::new(dir, 0, "holds no TI files (rank-NNNNN.ti)".into()).into());
    }
    let mut parsed = Vec::with_capacity(files.len());
    for file in &files {
        let bytes = std::fs::read(file).map_err(|source| SimError::Io {
            file: file.clone(),
            source,
        })?;
        parsed.push(parse_rank(file, &bytes)?);
    }
    let n = parsed[0].num_ranks;
    for (file, p) in files.iter().zip(&parsed) {
        if p.num_ranks != n {
            return Err(InputError::new(
                file,
                2,
                format!(
                    "states {} ranks, but {} states {n}",
                    p.num_ranks,
                    files[0].display()
                ),
            )
            .into());
        }
    }
    if files.len() != n as usize {
        let mut have = vec![false; n as usize];
        for p in &parsed {
            if let Some(h) = have.get_mut(p.rank as usize) {
                *h = true;
            }
        }
        let missing: Vec<String> = (0..n)
            .filter(|&r| !have[r as usize])
            .take(10)
            .map(|r| r.to_string())
            .collect();
        return Err(InputError::new(
            dir,
            0,
            format!(
                "the files state {n} ranks but the directory holds {} rank files{}",
                files.len(),
                if missing.is_empty() {
                    String::new()
                } else {
                    format!(" (missing: {})", missing.join(", "))
                }
            ),
        )
        .into());
    }
    let mut b = ScheduleBuilder::new(dir, n);
    for (file, p) in files.iter().zip(&parsed) {
        if rank_of_name(file) != Some(p.rank) {
            return Err(InputError::new(
                file,
                3,
                format!("states rank {}, which its file name does not", p.rank),
            )
            .into());
        }
        for &(op, line) in &p.ops {
            let peer_ok = op.kind == OpKind::Calc || op.peer < n;
            if !peer_ok {
                return Err(InputError::new(
                    file,
                    line,
                    format!("peer {} is outside the trace's {n} ranks", op.peer),
                )
                .into());
            }
        }
        b.begin_rank(p.rank, 3)?;
        let mut prev: Option<(u32, bool)> = None;
        for &(op, line) in &p.ops {
            let isend = op.cpu == ISEND_MARK;
            let at = b.add_op(NewOp { cpu: 0, ..op }, line)?;
            if let Some((before, nonblocking)) = prev {
                let kind = if nonblocking {
                    DepKind::IRequires
                } else {
                    DepKind::Requires
                };
                b.add_dep(at, before, kind, line)?;
            }
            prev = Some((at, isend));
        }
        b.end_rank();
    }
    Ok(b.finish()?)
}

/// `cpu` value that marks an isend while a file is parsed; [`load_dir`]
/// links the chain by it and gives the builder CPU 0 (every TI operation
/// runs on CPU 0 and NIC 0).
const ISEND_MARK: u8 = u8::MAX;

/// One file, parsed.
#[derive(Debug)]
struct RankFile {
    num_ranks: u32,
    rank: u32,
    /// Operations with their line; an isend carries `cpu == ISEND_MARK`.
    ops: Vec<(NewOp, u32)>,
}

fn parse_rank(file: &Path, text: &[u8]) -> Result<RankFile, InputError> {
    let err = |line: usize, msg: String| InputError::new(file, line as u32, msg);
    let text = std::str::from_utf8(text).map_err(|e| {
        let line = text[..e.valid_up_to()]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1;
        err(line, "is not UTF-8 text".into())
    })?;
    let mut header: Vec<(usize, &str)> = Vec::with_capacity(3);
    let mut num_ranks = 0;
    let mut rank = 0;
    let mut ops = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let stmt = raw.split('#').next().unwrap_or("").trim();
        if stmt.is_empty() {
            continue;
        }
        if header.len() < 3 {
            header.push((line, stmt));
            match header.len() {
                1 if stmt != MAGIC => {
                    return Err(err(
                        line,
                        format!("expected `{MAGIC}` (a TI trace file), found `{stmt}`"),
                    ))
                }
                2 => num_ranks = header_number(stmt, "ranks").map_err(|m| err(line, m))?,
                3 => rank = header_number(stmt, "rank").map_err(|m| err(line, m))?,
                _ => {}
            }
            if header.len() == 3 && rank >= num_ranks {
                return Err(err(
                    line,
                    format!("rank {rank} is outside the trace's {num_ranks} ranks"),
                ));
            }
            continue;
        }
        ops.push((parse_op(stmt).map_err(|m| err(line, m))?, line as u32));
    }
    if header.len() < 3 {
        let expected = ["`mttl-ti 1`", "`ranks N`", "`rank R`"][header.len()];
        return Err(err(
            text.lines().count().max(1),
            format!("the file ends before its header is complete: expected {expected}"),
        ));
    }
    Ok(RankFile {
        num_ranks,
        rank,
        ops,
    })
}

fn header_number(stmt: &str, word: &str) -> Result<u32, String> {
    let mut w = stmt.split_ascii_whitespace();
    match (w.next(), w.next().map(str::parse::<u32>), w.next()) {
        (Some(k), Some(Ok(v)), None) if k == word && (word == "rank" || v > 0) => Ok(v),
        _ => Err(format!(
            "expected `{word} N` (N a {}number), found `{stmt}`",
            if word == "rank" { "" } else { "positive " }
        )),
    }
}

fn parse_op(stmt: &str) -> Result<NewOp, String> {
    let w: Vec<&str> = stmt.split_ascii_whitespace().collect();
    let num = |i: usize, what: &str| -> Result<u64, String> {
        w.get(i)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| format!("expected {what} (a number) in `{stmt}`"))
    };
    let word = |i: usize, expected: &str| -> Result<(), String> {
        if w.get(i) == Some(&expected) {
            Ok(())
        } else {
            Err(format!("expected `{expected}` in `{stmt}`"))
        }
    };
    let small = |v: u64, what: &str| -> Result<u32, String> {
        u32::try_from(v)
            .ok()
            .filter(|&v| v != u32::MAX)
            .ok_or_else(|| format!("{what} {v} is too large in `{stmt}`"))
    };
    let (kind, cpu, to_from) = match w.first().copied() {
        Some("calc") => {
            if w.len() != 2 {
                return Err(format!("expected `calc NS`, found `{stmt}`"));
            }
            return Ok(NewOp {
                kind: OpKind::Calc,
                size: num(1, "nanoseconds")?,
                peer: 0,
                tag: 0,
                cpu: 0,
                nic: 0,
            });
        }
        Some("send") => (OpKind::Send, 0, "to"),
        Some("isend") => (OpKind::Send, ISEND_MARK, "to"),
        Some("recv") => (OpKind::Recv, 0, "from"),
        _ => {
            return Err(format!(
                "expected an operation (calc, send, isend, recv), found `{stmt}`"
            ))
        }
    };
    if w.len() != 6 {
        return Err(format!(
            "expected `{} BYTES {to_from} PEER tag TAG`, found `{stmt}`",
            w[0]
        ));
    }
    let size = num(1, "bytes")?;
    word(2, to_from)?;
    let peer = small(num(3, "the peer")?, "peer")?;
    word(4, "tag")?;
    let tag = small(num(5, "the tag")?, "tag")?;
    Ok(NewOp {
        kind,
        size,
        peer,
        tag,
        cpu,
        nic: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(s: &str) -> Result<NewOp, String> {
        parse_op(s)
    }

    #[test]
    fn operations_parse_and_bad_ones_say_what_was_expected() {
        let o = op("isend 8 to 3 tag 15").unwrap();
        assert_eq!(
            (o.kind, o.size, o.peer, o.tag, o.cpu),
            (OpKind::Send, 8, 3, 15, ISEND_MARK)
        );
        let o = op("recv 8 from 2 tag 1").unwrap();
        assert_eq!((o.kind, o.peer, o.cpu), (OpKind::Recv, 2, 0));
        assert_eq!(op("calc 77").unwrap().size, 77);
        assert!(op("calc").unwrap_err().contains("calc NS"));
        assert!(op("send 8 from 1 tag 2").unwrap_err().contains("`to`"));
        assert!(op("send x to 1 tag 2").unwrap_err().contains("bytes"));
        assert!(op("wait 3").unwrap_err().contains("expected an operation"));
        assert!(op("recv 8 from 1 tag -1").unwrap_err().contains("the tag"));
    }

    #[test]
    fn a_bad_header_names_its_line() {
        let f = Path::new("rank-00000.ti");
        let e = parse_rank(f, b"# c\nmttl-ti 1\nranks 0\n").unwrap_err();
        assert_eq!((e.line, e.message.contains("positive")), (3, true));
        let e = parse_rank(f, b"mttl-ti 2\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_rank(f, b"mttl-ti 1\nranks 2\nrank 2\n").unwrap_err();
        assert!(e.message.contains("outside"), "{e}");
        let e = parse_rank(f, b"mttl-ti 1\nranks 2\n").unwrap_err();
        assert!(e.message.contains("`rank R`"), "{e}");
        let e = parse_rank(f, b"mttl-ti 1\nranks 2\nrank 0\ncalc 5\nsend 1 to 1\n").unwrap_err();
        assert_eq!(e.line, 5);
    }

    /// A directory holding `files` (name, text), fresh for `what`.
    fn dir_of(what: &str, files: &[(&str, &str)]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mttl-sim-ti-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for (name, text) in files {
            std::fs::write(d.join(name), text).unwrap();
        }
        d
    }

    const R0: &str =
        "mttl-ti 1\nranks 2\nrank 0\ncalc 10\nisend 8 to 1 tag 3\nrecv 8 from 1 tag 4\n";
    const R1: &str = "mttl-ti 1\nranks 2\nrank 1\nrecv 8 from 0 tag 3\nsend 8 to 0 tag 4\n";

    #[test]
    fn a_directory_loads_with_the_chain_of_dependencies() {
        let d = dir_of("ok", &[("rank-00000.ti", R0), ("rank-00001.ti", R1)]);
        let s = load_dir(&d).unwrap();
        assert_eq!((s.num_ranks(), s.num_ops(), s.ncpus()), (2, 5, 1));
        // calc -> isend (requires), isend -> recv (irequires).
        assert_eq!(s.done_dependents(0), &[1]);
        assert_eq!(s.start_dependents(1), &[2]);
        assert_eq!(s.dep_counts(), &[0, 1, 1, 0, 1]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn directories_that_do_not_make_one_job_are_refused() {
        let msg = |what: &str, files: &[(&str, &str)]| {
            let d = dir_of(what, files);
            let e = load_dir(&d).unwrap_err().to_string();
            let _ = std::fs::remove_dir_all(&d);
            e
        };
        let e = msg("missing", &[("rank-00000.ti", R0)]);
        assert!(
            e.contains("state 2 ranks but the directory holds 1") && e.contains("missing: 1"),
            "{e}"
        );
        let e = msg("swapped", &[("rank-00000.ti", R1), ("rank-00001.ti", R0)]);
        assert!(
            e.contains("rank-00000.ti:3") && e.contains("file name"),
            "{e}"
        );
        let far = R1.replace("send 8 to 0", "send 8 to 5");
        let e = msg("far", &[("rank-00000.ti", R0), ("rank-00001.ti", &far)]);
        assert!(e.contains("rank-00001.ti:5") && e.contains("peer 5"), "{e}");
        let e = msg("empty", &[]);
        assert!(e.contains("holds no TI files"), "{e}");
    }
}
