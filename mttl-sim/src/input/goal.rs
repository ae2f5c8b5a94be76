//! Reader of GOAL text schedules, the input of LogGOPSim's `txt2bin`.
//!
//! The grammar, as the reference accepts it (one statement per line):
//!
//! ```text
//! num_ranks N
//! rank R {
//!   [label:] send SIZE b to PEER [tag TAG] [cpu C] [nic N]
//!   [label:] recv SIZE b from PEER|-1 [tag TAG|-1] [cpu C] [nic N]
//!   [label:] calc NANOSECONDS [cpu C]
//!   label requires label        // run after the other is done
//!   label irequires label       // run after the other has started
//! }
//! ```
//!
//! `-1` is the wildcard (any source, any tag); `//` and `/* */` are
//! comments. Two small extensions, so that schedules can be written on one
//! line as in the issue: `;` ends a statement like a newline does, and
//! comments may follow a statement. Stricter than the reference (which
//! silently keeps the first): a label defined twice in a rank is an error,
//! and so is a rank without a block, since a missing rank would otherwise
//! shift every later one.

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::error::InputError;
use crate::schedule::{DepKind, NewOp, OpKind, Schedule, ScheduleBuilder, ANY_SOURCE, ANY_TAG};

/// Parses GOAL `text` read from `file` (the name is used in messages only).
pub fn parse(file: &Path, text: &[u8]) -> Result<Schedule, InputError> {
    Parser {
        lex: Lexer {
            file,
            text,
            pos: 0,
            line: 1,
        },
        builder: None,
    }
    .run()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    /// End of a statement: a newline or `;`.
    End,
    Int(u64),
    /// The wildcard `-1`.
    Wild,
    Word(&'a str),
    Colon,
    Open,
    Close,
    Eof,
}

impl Tok<'_> {
    fn describe(&self) -> String {
        match self {
            Tok::End => "the end of the statement".into(),
            Tok::Int(n) => format!("the number {n}"),
            Tok::Wild => "the wildcard -1".into(),
            Tok::Word(w) => format!("`{w}`"),
            Tok::Colon => "`:`".into(),
            Tok::Open => "`{`".into(),
            Tok::Close => "`}`".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

struct Lexer<'a> {
    file: &'a Path,
    text: &'a [u8],
    pos: usize,
    line: u32,
}

impl<'a> Lexer<'a> {
    fn err(&self, line: u32, msg: String) -> InputError {
        InputError::new(self.file, line, msg)
    }

    /// The next token and the line it starts on.
    fn next(&mut self) -> Result<(Tok<'a>, u32), InputError> {
        let t = self.text;
        loop {
            let Some(&c) = t.get(self.pos) else {
                return Ok((Tok::Eof, self.line));
            };
            let line = self.line;
            match c {
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    return Ok((Tok::End, line));
                }
                b';' => {
                    self.pos += 1;
                    return Ok((Tok::End, line));
                }
                b'/' if t.get(self.pos + 1) == Some(&b'/') => {
                    while self.pos < t.len() && t[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                b'/' if t.get(self.pos + 1) == Some(&b'*') => {
                    self.pos += 2;
                    loop {
                        match t.get(self.pos) {
                            None => {
                                return Err(self.err(line, "a `/*` comment is never closed".into()))
                            }
                            Some(b'*') if t.get(self.pos + 1) == Some(&b'/') => {
                                self.pos += 2;
                                break;
                            }
                            Some(b'\n') => self.line += 1,
                            Some(_) => {}
                        }
                        self.pos += 1;
                    }
                }
                b'0'..=b'9' => {
                    let mut n: u64 = 0;
                    while let Some(&d @ b'0'..=b'9') = t.get(self.pos) {
                        n = n
                            .checked_mul(10)
                            .and_then(|n| n.checked_add(u64::from(d - b'0')))
                            .ok_or_else(|| self.err(line, "number too large".into()))?;
                        self.pos += 1;
                    }
                    return Ok((Tok::Int(n), line));
                }
                b'-' => {
                    let wild = t.get(self.pos + 1) == Some(&b'1')
                        && !matches!(t.get(self.pos + 2), Some(b'0'..=b'9'));
                    if !wild {
                        return Err(self.err(
                            line,
                            "negative numbers are not allowed (only -1, the wildcard)".into(),
                        ));
                    }
                    self.pos += 2;
                    return Ok((Tok::Wild, line));
                }
                b'a'..=b'z' | b'A'..=b'Z' => {
                    let start = self.pos;
                    while let Some(b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_') = t.get(self.pos)
                    {
                        self.pos += 1;
                    }
                    // ASCII letters, digits and `_` only, so this is valid UTF-8.
                    let w = std::str::from_utf8(&t[start..self.pos]).unwrap_or("");
                    return Ok((Tok::Word(w), line));
                }
                b':' => {
                    self.pos += 1;
                    return Ok((Tok::Colon, line));
                }
                b'{' => {
                    self.pos += 1;
                    return Ok((Tok::Open, line));
                }
                b'}' => {
                    self.pos += 1;
                    return Ok((Tok::Close, line));
                }
                other => {
                    let shown = if other.is_ascii_graphic() {
                        format!("`{}`", other as char)
                    } else {
                        format!("byte 0x{other:02x}")
                    };
                    return Err(self.err(line, format!("unexpected {shown}")));
                }
            }
        }
    }
}

struct Parser<'a> {
    lex: Lexer<'a>,
    builder: Option<ScheduleBuilder>,
}

/// The labels of a rank block: per label, the operation's index in the rank
/// and the line that defined it.
///
/// schedgen names operations `l1`, `l2`, ...: a label `l` followed by a
/// decimal number (no leading zero, below 2^20) is kept in a table indexed
/// by its number, any other in a map. A label's text decides which, so
/// each label has one place.
#[derive(Debug, Default)]
struct Labels<'a> {
    numbered: Vec<Option<(u32, u32)>>,
    /// The numbers set in `numbered`, to empty it between blocks.
    used: Vec<u32>,
    named: FxHashMap<&'a str, (u32, u32)>,
}

impl<'a> Labels<'a> {
    /// The table slot of a label `lN`.
    fn slot(label: &str) -> Option<usize> {
        let digits = label.strip_prefix('l')?;
        let ok = !digits.is_empty()
            && digits.len() <= 6
            && digits.bytes().all(|c| c.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        ok.then(|| digits.parse().ok()).flatten()
    }

    fn get(&self, label: &str) -> Option<(u32, u32)> {
        match Self::slot(label) {
            Some(i) => self.numbered.get(i).copied().flatten(),
            None => self.named.get(label).copied(),
        }
    }

    fn insert(&mut self, label: &'a str, v: (u32, u32)) {
        match Self::slot(label) {
            Some(i) => {
                if self.numbered.len() <= i {
                    self.numbered.resize(i + 1, None);
                }
                self.numbered[i] = Some(v);
                self.used.push(i as u32);
            }
            None => {
                self.named.insert(label, v);
            }
        }
    }

    fn clear(&mut self) {
        for &i in &self.used {
            self.numbered[i as usize] = None;
        }
        self.used.clear();
        self.named.clear();
    }
}

/// The rank block being read: the labels defined so far in it.
struct Block<'a> {
    labels: Labels<'a>,
}

impl<'a> Parser<'a> {
    fn err(&self, line: u32, msg: String) -> InputError {
        self.lex.err(line, msg)
    }

    fn expected(&self, what: &str, got: Tok<'_>, line: u32) -> InputError {
        self.err(line, format!("expected {what}, found {}", got.describe()))
    }

    fn int(&mut self, what: &str) -> Result<u64, InputError> {
        match self.lex.next()? {
            (Tok::Int(n), _) => Ok(n),
            (t, line) => Err(self.expected(what, t, line)),
        }
    }

    fn int_in<T: TryFrom<u64>>(&mut self, what: &str) -> Result<T, InputError> {
        let line = self.lex.line;
        let n = self.int(what)?;
        T::try_from(n).map_err(|_| self.err(line, format!("{what} {n} is out of range")))
    }

    fn word(&mut self, want: &str) -> Result<(), InputError> {
        match self.lex.next()? {
            (Tok::Word(w), _) if w == want => Ok(()),
            (t, line) => Err(self.expected(&format!("`{want}`"), t, line)),
        }
    }

    fn end(&mut self) -> Result<(), InputError> {
        match self.lex.next()? {
            (Tok::End, _) => Ok(()),
            (t, line) => Err(self.expected("the end of the statement", t, line)),
        }
    }

    fn builder(&mut self, line: u32) -> Result<&mut ScheduleBuilder, InputError> {
        if self.builder.is_none() {
            return Err(self.err(line, "`num_ranks N` must come before the first rank".into()));
        }
        Ok(self.builder.as_mut().expect("checked above"))
    }

    fn run(mut self) -> Result<Schedule, InputError> {
        let mut block: Option<Block<'a>> = None;
        // One label table for all blocks, emptied between them, so that its
        // storage is allocated once rather than grown again for every rank.
        let mut spare_labels = Labels::default();
        loop {
            let (tok, line) = self.lex.next()?;
            match tok {
                Tok::End => {}
                Tok::Eof => {
                    if block.is_some() {
                        return Err(
                            self.err(line, "the last rank's block is not closed by `}`".into())
                        );
                    }
                    return match self.builder {
                        Some(b) => b.finish(),
                        None => Err(self.err(0, "no `num_ranks N` statement".into())),
                    };
                }
                Tok::Word("num_ranks") => {
                    let n: u32 = self.int_in("the number of ranks")?;
                    if n == 0 {
                        return Err(self.err(line, "a schedule needs at least one rank".into()));
                    }
                    if self.builder.is_some() {
                        return Err(self.err(line, "`num_ranks` is stated twice".into()));
                    }
                    self.builder = Some(ScheduleBuilder::new(self.lex.file, n));
                    self.end()?;
                }
                Tok::Word("rank") => {
                    if block.is_some() {
                        return Err(self.err(line, "a rank block opens inside another".into()));
                    }
                    let r: u32 = self.int_in("a rank number")?;
                    match self.lex.next()? {
                        (Tok::Open, _) => {}
                        (t, l) => return Err(self.expected("`{`", t, l)),
                    }
                    self.builder(line)?.begin_rank(r, line)?;
                    let mut labels = std::mem::take(&mut spare_labels);
                    labels.clear();
                    block = Some(Block { labels });
                }
                Tok::Close => {
                    let Some(b) = block.take() else {
                        return Err(self.err(line, "`}` without an open rank block".into()));
                    };
                    spare_labels = b.labels;
                    self.builder(line)?.end_rank();
                }
                Tok::Word(w @ ("send" | "recv" | "calc")) => {
                    if block.is_none() {
                        return Err(self.err(line, format!("`{w}` outside a rank block")));
                    }
                    self.op(w, line)?;
                }
                Tok::Word(label) => {
                    let Some(b) = block.as_mut() else {
                        return Err(self.err(line, format!("`{label}` outside a rank block")));
                    };
                    self.labelled(label, line, &mut b.labels)?;
                }
                other => {
                    return Err(self.expected(
                        "`num_ranks`, `rank`, `}`, an operation or a label",
                        other,
                        line,
                    ))
                }
            }
        }
    }

    /// A statement that starts with a label: `label: op` or a dependency.
    fn labelled(
        &mut self,
        label: &'a str,
        line: u32,
        labels: &mut Labels<'a>,
    ) -> Result<(), InputError> {
        match self.lex.next()? {
            (Tok::Colon, _) => {
                let kind = match self.lex.next()? {
                    (Tok::Word(w @ ("send" | "recv" | "calc")), _) => w,
                    (t, l) => return Err(self.expected("`send`, `recv` or `calc`", t, l)),
                };
                if let Some((_, first)) = labels.get(label) {
                    return Err(self.err(
                        line,
                        format!("label `{label}` is already defined on line {first}"),
                    ));
                }
                let idx = self.op(kind, line)?;
                labels.insert(label, (idx, line));
                Ok(())
            }
            (Tok::Word(dep @ ("requires" | "irequires")), _) => {
                let other = match self.lex.next()? {
                    (Tok::Word(w), _) => w,
                    (t, l) => return Err(self.expected("a label", t, l)),
                };
                self.end()?;
                let find = |name: &str| {
                    labels.get(name).map(|(i, _)| i).ok_or_else(|| {
                        self.err(
                            line,
                            format!("label `{name}` is not defined before this line in this rank"),
                        )
                    })
                };
                let (a, b) = (find(label)?, find(other)?);
                let kind = if dep == "requires" {
                    DepKind::Requires
                } else {
                    DepKind::IRequires
                };
                self.builder(line)?.add_dep(a, b, kind, line)
            }
            (t, l) => Err(self.expected("`:`, `requires` or `irequires`", t, l)),
        }
    }

    /// The rest of a send, recv or calc statement; returns the op's index in its rank.
    fn op(&mut self, kind: &str, line: u32) -> Result<u32, InputError> {
        if kind == "calc" {
            let size = self.int("a computation time")?;
            let mut cpu = 0u8;
            match self.lex.next()? {
                (Tok::End, _) => {}
                (Tok::Word("cpu"), _) => {
                    cpu = self.int_in("a cpu number")?;
                    self.end()?;
                }
                (t, l) => return Err(self.expected("`cpu` or the end of the statement", t, l)),
            }
            let op = NewOp {
                kind: OpKind::Calc,
                size,
                peer: 0,
                tag: 0,
                cpu,
                nic: 0,
            };
            return self.builder(line)?.add_op(op, line);
        }
        let (op_kind, dir) = if kind == "send" {
            (OpKind::Send, "to")
        } else {
            (OpKind::Recv, "from")
        };
        let size = self.int("a size in bytes")?;
        self.word("b")?;
        self.word(dir)?;
        let peer = match self.lex.next()? {
            (Tok::Int(n), l) => {
                u32::try_from(n).map_err(|_| self.err(l, format!("rank {n} is out of range")))?
            }
            (Tok::Wild, _) if op_kind == OpKind::Recv => ANY_SOURCE,
            (t, l) => return Err(self.expected("a rank", t, l)),
        };
        let (mut tag, mut cpu, mut nic) = (0u32, 0u8, 0u8);
        // Optional `tag`, `cpu`, `nic`, in this order.
        let mut stage = 0;
        loop {
            match self.lex.next()? {
                (Tok::End, _) => break,
                (Tok::Word("tag"), _) if stage < 1 => {
                    tag = match self.lex.next()? {
                        (Tok::Int(n), l) => u32::try_from(n)
                            .map_err(|_| self.err(l, format!("tag {n} is out of range")))?,
                        (Tok::Wild, _) => ANY_TAG,
                        (t, l) => return Err(self.expected("a tag", t, l)),
                    };
                    stage = 1;
                }
                (Tok::Word("cpu"), _) if stage < 2 => {
                    cpu = self.int_in("a cpu number")?;
                    stage = 2;
                }
                (Tok::Word("nic"), _) if stage < 3 => {
                    nic = self.int_in("a nic number")?;
                    stage = 3;
                }
                (t, l) => {
                    return Err(self.expected(
                        "`tag`, `cpu`, `nic` (in this order) or the end of the statement",
                        t,
                        l,
                    ))
                }
            }
        }
        let op = NewOp {
            kind: op_kind,
            size,
            peer,
            tag,
            cpu,
            nic,
        };
        self.builder(line)?.add_op(op, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_and_other_labels_each_have_one_place() {
        assert_eq!(Labels::slot("l7"), Some(7));
        assert_eq!(Labels::slot("l0"), Some(0));
        for other in ["l", "l07", "lx", "x1", "l1234567", "l-1"] {
            assert_eq!(Labels::slot(other), None, "{other}");
        }
        let mut l = Labels::default();
        l.insert("l7", (1, 10));
        l.insert("l07", (2, 11));
        l.insert("start", (3, 12));
        assert_eq!(
            (l.get("l7"), l.get("l07"), l.get("start"), l.get("l6")),
            (Some((1, 10)), Some((2, 11)), Some((3, 12)), None)
        );
        l.clear();
        assert_eq!((l.get("l7"), l.get("start")), (None, None));
    }

    #[test]
    fn labels_do_not_leak_between_blocks() {
        let text =
            b"num_ranks 2\nrank 0 {\nl1: calc 5\n}\nrank 1 {\nl2: calc 5\nl2 requires l1\n}\n";
        let e = parse("t.goal".as_ref(), text).unwrap_err();
        assert!(
            e.line == 7 && e.message.contains("`l1` is not defined"),
            "{e}"
        );
        let dup = b"num_ranks 1\nrank 0 {\nl3: calc 5\nl3: calc 6\n}\n";
        let e = parse("t.goal".as_ref(), dup).unwrap_err();
        assert!(e.message.contains("already defined on line 3"), "{e}");
    }
}
