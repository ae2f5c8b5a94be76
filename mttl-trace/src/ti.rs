//! The time-independent (TI) export: each rank's run as a sequence of
//! computations (ns) and messages (peer, bytes, tag), with no timestamps, for
//! a trace-driven simulator (`mttl-sim DIR`) or for scaling
//! ([`crate::scale`]). The format is specified in `docs/prediction.md`.
//!
//! How a trace becomes TI, per rank:
//! 1. the suspensions are removed and the tracing protocol's own events and
//!    messages dropped, as [`reconstruct`] does;
//! 2. every message is paired with its receive ([`crate::pairing`]);
//! 3. walking the comm primitives in order, the time between the end of one
//!    and the beginning of the next (and from the rank's first event to the
//!    first primitive, and from the last primitive to its last event) is a
//!    `calc`, less the time the rank spent in polling waits
//!    ([`Kind::Wait`], `mttl::trace::waiting`: a thread yielding until a
//!    flag in memory changes, whose polls are not traced), so that a `calc`
//!    is computation and the simulator, not the recording, decides how
//!    long a rank waits; `send` becomes `send`, `nsend` becomes `isend`, a receive that
//!    returned a message becomes `recv` from its source; a `send_headed_bulk`
//!    becomes two `send`s (header, body) and an `nsend_headed` two `isend`s,
//!    the header's bytes taken from the receive that took it (the trace
//!    records only the sum); completion tests are left out.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use mttl_core::trace::format::{Event, Kind};

use crate::analysis::reconstruct;
use crate::pairing::{pair, wire_tags};
use crate::read::Trace;

/// The first line of every TI file.
pub const TI_MAGIC: &str = "mttl-ti 1";

/// One operation of a TI trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TiOp {
    /// Local computation of this many ns.
    Calc(u64),
    /// A blocking send: the next operation waits until it is done.
    Send {
        /// The destination.
        peer: u32,
        /// Bytes.
        bytes: u64,
        /// The message's tag (mttl's message kind).
        tag: u64,
    },
    /// A non-blocking send: the next operation waits only until it started.
    Isend {
        /// The destination.
        peer: u32,
        /// Bytes.
        bytes: u64,
        /// The message's tag.
        tag: u64,
    },
    /// A blocking receive from one source.
    Recv {
        /// The source.
        peer: u32,
        /// Bytes.
        bytes: u64,
        /// The message's tag.
        tag: u64,
    },
}

impl TiOp {
    /// Whether this is a message operation (not a computation).
    pub fn is_comm(&self) -> bool {
        !matches!(self, TiOp::Calc(_))
    }
}

impl std::fmt::Display for TiOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            TiOp::Calc(ns) => write!(f, "calc {ns}"),
            TiOp::Send { peer, bytes, tag } => write!(f, "send {bytes} to {peer} tag {tag}"),
            TiOp::Isend { peer, bytes, tag } => write!(f, "isend {bytes} to {peer} tag {tag}"),
            TiOp::Recv { peer, bytes, tag } => write!(f, "recv {bytes} from {peer} tag {tag}"),
        }
    }
}

/// A TI trace: per rank, its operations in program order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TiTrace {
    /// `ranks[r]` is rank r's sequence.
    pub ranks: Vec<Vec<TiOp>>,
}

/// The file of rank `rank` in a TI directory.
pub fn ti_file(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank:05}.ti"))
}

impl TiTrace {
    /// The TI form of a recorded run (the module docs say how).
    pub fn from_trace(t: &Trace) -> TiTrace {
        let rec = reconstruct(t);
        let events: Vec<_> = rec.ranks.iter().map(|r| &r.events[..]).collect();
        let p = pair(events.iter().copied());
        // (send event, part) -> bytes its receive took.
        let mut received: HashMap<((usize, usize), u8), u64> = HashMap::new();
        for m in &p.messages {
            if let Some((r, i)) = m.recv {
                received.insert((m.send, m.part), events[r][i].b);
            }
        }
        let mut ranks = Vec::with_capacity(events.len());
        for (rank, evs) in events.iter().enumerate() {
            let mut ops = Vec::new();
            let Some(first) = evs.iter().map(|e| e.begin).min() else {
                ranks.push(ops);
                continue;
            };
            let last_end = evs.iter().map(|e| e.end).max().unwrap_or(first);
            let mut waits = Waits::of(evs);
            let mut at = first;
            for (i, e) in evs.iter().enumerate() {
                if !e.kind.is_comm() || e.kind == Kind::Test {
                    continue;
                }
                let Some(peer) = e.peer else { continue };
                let busy = waits.busy(at, e.begin);
                if busy > 0 {
                    ops.push(TiOp::Calc(busy));
                }
                at = at.max(e.end);
                match e.kind {
                    Kind::Send | Kind::Nsend | Kind::SendHeadedBulk | Kind::NsendHeaded => {
                        let blocking = matches!(e.kind, Kind::Send | Kind::SendHeadedBulk);
                        let parts = wire_tags(e);
                        let sizes = part_sizes(e.b, parts.len(), |part| {
                            received.get(&((rank, i), part)).copied()
                        });
                        for (&(_, of), bytes) in parts.iter().zip(sizes) {
                            let tag = of.tag(e.a);
                            ops.push(if blocking {
                                TiOp::Send { peer, bytes, tag }
                            } else {
                                TiOp::Isend { peer, bytes, tag }
                            });
                        }
                    }
                    _ => ops.push(TiOp::Recv {
                        peer,
                        bytes: e.b,
                        tag: e.a,
                    }),
                }
            }
            let busy = waits.busy(at, last_end);
            if busy > 0 {
                ops.push(TiOp::Calc(busy));
            }
            ranks.push(ops);
        }
        TiTrace { ranks }
    }

    /// The text of rank `rank`'s file.
    pub fn rank_text(&self, rank: usize) -> String {
        let mut out = format!("{TI_MAGIC}\nranks {}\nrank {rank}\n", self.ranks.len());
        for op in &self.ranks[rank] {
            let _ = writeln!(out, "{op}");
        }
        out
    }

    /// Writes one file per rank into `dir` (see [`TiWriter`]).
    pub fn write_dir(&self, dir: &Path) -> std::io::Result<()> {
        let mut w = TiWriter::new(dir, self.ranks.len())?;
        for (rank, ops) in self.ranks.iter().enumerate() {
            w.write_rank(rank, ops)?;
        }
        Ok(())
    }

    /// Per rank, (computations, sends and isends, receives).
    pub fn counts(&self) -> Vec<(usize, usize, usize)> {
        self.ranks
            .iter()
            .map(|ops| {
                let mut c = (0, 0, 0);
                for op in ops {
                    match op {
                        TiOp::Calc(_) => c.0 += 1,
                        TiOp::Send { .. } | TiOp::Isend { .. } => c.1 += 1,
                        TiOp::Recv { .. } => c.2 += 1,
                    }
                }
                c
            })
            .collect()
    }
}

/// Writes a TI trace rank by rank, so that a large one never has to be
/// held whole.
#[derive(Debug)]
pub struct TiWriter {
    dir: PathBuf,
    ranks: usize,
}

impl TiWriter {
    /// A writer of `ranks` ranks into `dir` (created if missing); the TI
    /// files already there are removed, so that the directory ends up
    /// holding exactly this trace.
    pub fn new(dir: &Path, ranks: usize) -> std::io::Result<TiWriter> {
        std::fs::create_dir_all(dir)?;
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("rank-") && name.ends_with(".ti") {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(TiWriter {
            dir: dir.to_path_buf(),
            ranks,
        })
    }

    /// Writes rank `rank`'s file.
    pub fn write_rank(&mut self, rank: usize, ops: &[TiOp]) -> std::io::Result<()> {
        let mut text = Vec::with_capacity(24 * ops.len() + 64);
        text.extend_from_slice(
            format!("{TI_MAGIC}\nranks {}\nrank {rank}\n", self.ranks).as_bytes(),
        );
        for op in ops {
            put_op(&mut text, op);
        }
        std::fs::write(ti_file(&self.dir, rank), text)
    }
}

/// Appends `op`'s line, as its `Display` writes it (without the formatting
/// machinery: pseudo traces of a thousand ranks are gigabytes of these).
fn put_op(out: &mut Vec<u8>, op: &TiOp) {
    fn num(out: &mut Vec<u8>, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        out.extend_from_slice(&digits[i..]);
    }
    let (word, bytes, dir, peer, tag) = match *op {
        TiOp::Calc(ns) => {
            out.extend_from_slice(b"calc ");
            num(out, ns);
            out.push(b'\n');
            return;
        }
        TiOp::Send { peer, bytes, tag } => ("send ", bytes, " to ", peer, tag),
        TiOp::Isend { peer, bytes, tag } => ("isend ", bytes, " to ", peer, tag),
        TiOp::Recv { peer, bytes, tag } => ("recv ", bytes, " from ", peer, tag),
    };
    out.extend_from_slice(word.as_bytes());
    num(out, bytes);
    out.extend_from_slice(dir.as_bytes());
    num(out, u64::from(peer));
    out.extend_from_slice(b" tag ");
    num(out, tag);
    out.push(b'\n');
}

/// The bytes of each of a send's `parts` messages, `total` in all: one
/// message takes all; a header and a body split `total` by what their
/// receives took (the header from its own receive, else `total` minus the
/// body's, else 0 when neither was received).
fn part_sizes(total: u64, parts: usize, received: impl Fn(u8) -> Option<u64>) -> Vec<u64> {
    if parts == 1 {
        return vec![total];
    }
    let header = received(0)
        .or_else(|| received(1).map(|body| total.saturating_sub(body)))
        .unwrap_or(0)
        .min(total);
    vec![header, total - header]
}

/// A rank's polling waits ([`Kind::Wait`]) as disjoint spans in time
/// order, for taking them out of the gaps between primitives.
struct Waits {
    spans: Vec<(u64, u64)>,
    /// The first span that may still overlap a gap (gaps come in order).
    next: usize,
}

impl Waits {
    fn of(events: &[Event]) -> Waits {
        let mut raw: Vec<(u64, u64)> = events
            .iter()
            .filter(|e| e.kind == Kind::Wait && e.end > e.begin)
            .map(|e| (e.begin, e.end))
            .collect();
        raw.sort_unstable();
        let mut spans: Vec<(u64, u64)> = Vec::with_capacity(raw.len());
        for (b, e) in raw {
            match spans.last_mut() {
                Some(last) if b <= last.1 => last.1 = last.1.max(e),
                _ => spans.push((b, e)),
            }
        }
        Waits { spans, next: 0 }
    }

    /// The time in `[from, to)` outside every wait; `from` never goes back
    /// between calls.
    fn busy(&mut self, from: u64, to: u64) -> u64 {
        if to <= from {
            return 0;
        }
        while self.spans.get(self.next).is_some_and(|s| s.1 <= from) {
            self.next += 1;
        }
        let waited: u64 = self.spans[self.next..]
            .iter()
            .take_while(|s| s.0 < to)
            .map(|s| s.1.min(to) - s.0.max(from))
            .sum();
        to - from - waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polling_waits_are_taken_out_of_the_gaps_between_primitives() {
        let wait = |begin, end| Event {
            kind: Kind::Wait,
            peer: None,
            a: 0,
            b: 0,
            begin,
            end,
        };
        // Two overlapping waits (two threads) make one span, 10..40; one
        // more at 60..70.
        let mut w = Waits::of(&[wait(20, 40), wait(10, 30), wait(60, 70)]);
        assert_eq!(w.busy(0, 15), 10);
        assert_eq!(w.busy(15, 50), 10);
        assert_eq!(w.busy(50, 100), 40);
        assert_eq!(w.busy(100, 100), 0);
        let mut none = Waits::of(&[]);
        assert_eq!(none.busy(5, 9), 4);
    }

    #[test]
    fn a_header_and_body_split_the_total_by_what_was_received() {
        assert_eq!(part_sizes(100, 1, |_| Some(3)), vec![100]);
        assert_eq!(part_sizes(100, 2, |p| (p == 0).then_some(20)), vec![20, 80]);
        assert_eq!(part_sizes(100, 2, |p| (p == 1).then_some(70)), vec![30, 70]);
        assert_eq!(part_sizes(100, 2, |_| None), vec![0, 100]);
    }

    #[test]
    fn rank_files_state_the_rank_count_and_one_operation_a_line() {
        let t = TiTrace {
            ranks: vec![
                vec![
                    TiOp::Calc(5),
                    TiOp::Isend {
                        peer: 1,
                        bytes: 8,
                        tag: 3,
                    },
                ],
                vec![TiOp::Recv {
                    peer: 0,
                    bytes: 8,
                    tag: 3,
                }],
            ],
        };
        assert_eq!(
            t.rank_text(0),
            "mttl-ti 1\nranks 2\nrank 0\ncalc 5\nisend 8 to 1 tag 3\n"
        );
        assert_eq!(
            t.rank_text(1),
            "mttl-ti 1\nranks 2\nrank 1\nrecv 8 from 0 tag 3\n"
        );
        assert_eq!(t.counts(), vec![(1, 1, 0), (0, 0, 1)]);
        let mut fast = Vec::new();
        for op in t
            .ranks
            .iter()
            .flatten()
            .chain(&[TiOp::Calc(0), TiOp::Calc(u64::MAX)])
        {
            put_op(&mut fast, op);
        }
        let shown: String = t
            .ranks
            .iter()
            .flatten()
            .chain(&[TiOp::Calc(0), TiOp::Calc(u64::MAX)])
            .map(|op| format!("{op}\n"))
            .collect();
        assert_eq!(String::from_utf8(fast).unwrap(), shown);
    }
}
