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
///
/// Files are read one at a time, straight into the schedule: memory is the
/// schedule's (a chain: 24 bytes per operation) plus one file.
pub fn load_dir(dir: &Path) -> Result<Schedule, SimError> {
    let files = rank_files(dir)?;
    if files.is_empty() {
        return Err(InputError::new(dir, 0, "holds no TI files (rank-NNNNN.ti)".into()).into());
    }
    let read = |file: &PathBuf| {
        std::fs::read(file).map_err(|source| SimError::Io {
            file: file.clone(),
            source,
        })
    };
    let mut text = read(&files[0])?;
    let n = parse_header(&files[0], &text)?.num_ranks;
    if files.len() != n as usize {
        let mut have = vec![false; n as usize];
        for f in &files {
            if let Some(h) = rank_of_name(f).and_then(|r| have.get_mut(r as usize)) {
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
    for (i, file) in files.iter().enumerate() {
        if i > 0 {
            text = read(file)?;
        }
        let header = parse_header(file, &text)?;
        if header.num_ranks != n {
            return Err(InputError::new(
                file,
                header.ranks_line,
                format!(
                    "states {} ranks, but {} states {n}",
                    header.num_ranks,
                    files[0].display()
                ),
            )
            .into());
        }
        if rank_of_name(file) != Some(header.rank) {
            return Err(InputError::new(
                file,
                header.rank_line,
                format!("states rank {}, which its file name does not", header.rank),
            )
            .into());
        }
        if i == 0 {
            // Room for every file's operations if they are like the first
            // one's (about 16 bytes a line), so that the array grows rarely.
            b.reserve(text.len() / 16 * files.len());
        }
        b.begin_rank(header.rank, header.rank_line)?;
        parse_ops(file, &text, &header, &mut b)?;
        b.end_rank();
    }
    Ok(b.finish()?)
}

/// `cpu` value by which [`parse_op`] marks an isend; [`parse_ops`] links
/// the chain by it and gives the builder CPU 0 (every TI operation runs on
/// CPU 0 and NIC 0).
const ISEND_MARK: u8 = u8::MAX;

/// A file's header, and where its operations begin.
#[derive(Debug)]
struct Header {
    num_ranks: u32,
    rank: u32,
    ranks_line: u32,
    rank_line: u32,
    /// Byte offset and line number of the line after the header.
    body: usize,
    body_line: u32,
}

/// The lines of `text` from byte `at`, numbered from `first`: (line
/// number, byte offset, the line without its end).
fn lines_from(text: &[u8], at: usize, first: u32) -> impl Iterator<Item = (u32, usize, &[u8])> {
    let mut pos = at;
    let mut line = first;
    std::iter::from_fn(move || {
        if pos >= text.len() {
            return None;
        }
        let rest = &text[pos..];
        let len = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        let mut l = &rest[..len];
        if let [head @ .., b'\r'] = l {
            l = head;
        }
        let item = (line, pos, l);
        pos += len + 1;
        line += 1;
        Some(item)
    })
}

/// The statement of a line: without its comment, trimmed.
fn statement<'a>(file: &Path, line: u32, raw: &'a [u8]) -> Result<&'a str, InputError> {
    let raw = std::str::from_utf8(raw)
        .map_err(|_| InputError::new(file, line, "is not UTF-8 text".into()))?;
    Ok(raw.split('#').next().unwrap_or("").trim())
}

fn parse_header(file: &Path, text: &[u8]) -> Result<Header, InputError> {
    let err = |line: u32, msg: String| InputError::new(file, line, msg);
    let mut seen = 0;
    let mut h = Header {
        num_ranks: 0,
        rank: 0,
        ranks_line: 0,
        rank_line: 0,
        body: text.len(),
        body_line: 0,
    };
    let mut last_line = 1;
    for (line, pos, raw) in lines_from(text, 0, 1) {
        last_line = line;
        let stmt = statement(file, line, raw)?;
        if stmt.is_empty() {
            continue;
        }
        seen += 1;
        match seen {
            1 if stmt != MAGIC => {
                return Err(err(
                    line,
                    format!("expected `{MAGIC}` (a TI trace file), found `{stmt}`"),
                ))
            }
            2 => {
                h.num_ranks = header_number(stmt, "ranks").map_err(|m| err(line, m))?;
                h.ranks_line = line;
            }
            3 => {
                h.rank = header_number(stmt, "rank").map_err(|m| err(line, m))?;
                h.rank_line = line;
                if h.rank >= h.num_ranks {
                    return Err(err(
                        line,
                        format!(
                            "rank {} is outside the trace's {} ranks",
                            h.rank, h.num_ranks
                        ),
                    ));
                }
                h.body = (pos + raw.len() + 1).min(text.len());
                h.body_line = line + 1;
                return Ok(h);
            }
            _ => {}
        }
    }
    let expected = ["`mttl-ti 1`", "`ranks N`", "`rank R`"][seen];
    Err(err(
        last_line,
        format!("the file ends before its header is complete: expected {expected}"),
    ))
}

/// Adds the operations of a file (after its header) to the current rank of
/// `b`, each linked to the one before.
fn parse_ops(
    file: &Path,
    text: &[u8],
    h: &Header,
    b: &mut ScheduleBuilder,
) -> Result<(), SimError> {
    let mut prev: Option<(u32, bool)> = None;
    for (line, _, raw) in lines_from(text, h.body, h.body_line) {
        let (op, isend) = match fast_op(raw) {
            Some(parsed) => parsed,
            None => {
                let stmt = statement(file, line, raw)?;
                if stmt.is_empty() {
                    continue;
                }
                let op = parse_op(stmt).map_err(|m| InputError::new(file, line, m))?;
                (NewOp { cpu: 0, ..op }, op.cpu == ISEND_MARK)
            }
        };
        if op.kind != OpKind::Calc && op.peer >= h.num_ranks {
            return Err(InputError::new(
                file,
                line,
                format!(
                    "peer {} is outside the trace's {} ranks",
                    op.peer, h.num_ranks
                ),
            )
            .into());
        }
        let at = b.add_op(op, line)?;
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
    Ok(())
}

/// The common spelling of an operation, read without allocating: one space
/// between words, nothing else on the line. `None` sends the line to
/// [`parse_op`], which reads any spacing and says what is wrong.
fn fast_op(line: &[u8]) -> Option<(NewOp, bool)> {
    let mut w = line.split(|&c| c == b' ');
    let verb = w.next()?;
    let number = |word: Option<&[u8]>| -> Option<u64> {
        let word = word?;
        if word.is_empty() || word.len() > 19 {
            return None;
        }
        word.iter().try_fold(0u64, |acc, &c| {
            c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
        })
    };
    if verb == b"calc" {
        let size = number(w.next())?;
        let op = NewOp {
            kind: OpKind::Calc,
            size,
            peer: 0,
            tag: 0,
            cpu: 0,
            nic: 0,
        };
        return w.next().is_none().then_some((op, false));
    }
    let (kind, isend, to_from): (_, _, &[u8]) = match verb {
        b"send" => (OpKind::Send, false, b"to"),
        b"isend" => (OpKind::Send, true, b"to"),
        b"recv" => (OpKind::Recv, false, b"from"),
        _ => return None,
    };
    let size = number(w.next())?;
    (w.next()? == to_from).then_some(())?;
    let peer = u32::try_from(number(w.next())?).ok()?;
    (w.next()? == b"tag").then_some(())?;
    let tag = u32::try_from(number(w.next())?).ok()?;
    if w.next().is_some() || peer == u32::MAX || tag == u32::MAX {
        return None;
    }
    let op = NewOp {
        kind,
        size,
        peer,
        tag,
        cpu: 0,
        nic: 0,
    };
    Some((op, isend))
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

    /// Reads one file as the loader does.
    fn parse_rank(f: &Path, text: &[u8]) -> Result<(), InputError> {
        let h = parse_header(f, text)?;
        let mut b = ScheduleBuilder::new(f, h.num_ranks);
        b.begin_rank(h.rank, h.rank_line)?;
        parse_ops(f, text, &h, &mut b).map_err(|e| match e {
            SimError::Input(e) => e,
            other => panic!("{other}"),
        })
    }

    #[test]
    fn the_fast_reader_agrees_with_the_general_one() {
        for l in [
            "calc 77",
            "send 8 to 3 tag 15",
            "isend 65536 to 0 tag 4294967294",
            "recv 9999999999999999999 from 2 tag 1",
        ] {
            let (fast, isend) = fast_op(l.as_bytes()).expect(l);
            let slow = op(l).unwrap();
            assert_eq!(fast, NewOp { cpu: 0, ..slow }, "{l}");
            assert_eq!(isend, slow.cpu == ISEND_MARK, "{l}");
        }
        // Anything unusual goes to the general reader.
        for l in [
            "calc  77",
            "calc 77 ",
            "send 8 to 3 tag -1",
            "send 8 to 3 tag 4294967295",
            "send 8 to 3 tag 15 # c",
            "recv 8 to 3 tag 1",
            "calc 99999999999999999999",
            "calc\t5",
        ] {
            assert!(fast_op(l.as_bytes()).is_none(), "{l}");
        }
        let e = parse_rank(Path::new("r"), b"mttl-ti 1\nranks 2\nrank 0\ncalc \xff\n").unwrap_err();
        assert!(e.line == 4 && e.message.contains("UTF-8"), "{e}");
        parse_rank(
            Path::new("r"),
            b"mttl-ti 1\r\nranks 2\nrank 0\n\n  calc\t5 # c\r\n",
        )
        .unwrap();
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
        // A chain: calc -> isend (requires), isend -> recv (irequires).
        assert!(s.is_chain());
        let next: Vec<_> = (0..5).map(|i| s.op(i).next).collect();
        use DepKind::*;
        assert_eq!(
            next,
            [Some(Requires), Some(IRequires), None, Some(Requires), None]
        );
        let ready: Vec<_> = (0..5).map(|i| s.initially_ready(i)).collect();
        assert_eq!(ready, [true, false, false, true, false]);
        assert_eq!((s.line(0), s.line(2), s.line(4)), (4, 6, 5));
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
