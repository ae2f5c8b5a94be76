//! `export`: the run drawn as tracks of slices and instants joined by
//! message flows (a [`Scene`]), then written in Perfetto's protobuf trace
//! format ([`perfetto`]) or as an OTF2 archive ([`otf2`], cargo feature
//! `otf2`). Both formats are written from the same scene, so they show the
//! same slices.
//!
//! Building the scene:
//! 1. Times: every event's begin and end on rank 0's clock
//!    ([`Clocks::on_rank0`]: offsets interpolated between suspensions), or
//!    with `reconstructed` the suspensions removed as well
//!    ([`Clocks::corrected`]), dropping what `reconstruct` drops
//!    ([`kept_in_reconstruction`]).
//! 2. Threads: with thread records (`MTTL_TRACE_LEVEL=threads`, see
//!    [`thread_mark`]), an event belongs to the thread the last
//!    `thread_run` switched to; before the first one, and in a trace
//!    without thread records, to the rank's own track.
//! 3. Items: each event becomes a slice (it has a duration) or an instant;
//!    a collective's enter and exit, and a region's begin and end, are
//!    paired into one slice. The protocol's suspensions and the trace's
//!    writes are slices too, named as such.
//! 4. Lanes: a track shows properly nested slices only, so slices that
//!    overlap without nesting (a served call switched out while another
//!    runs) go to further lanes of their thread ([`lay_out`]).
//! 5. Messages: [`pair_messages`] (the pairing `check` uses) pairs every
//!    send with its receive; a pair whose two events are both in the scene
//!    becomes a [`Flow`].
//!
//! A rank whose file ends early (killed, or a write failed) is exported up
//! to its last complete block, with an instant saying where it ends and a
//! note for the user.

pub(crate) mod otf2;
pub(crate) mod perfetto;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;

use mttl_core::trace::format::{unzigzag, Event, Kind};

use crate::analysis::{kept_in_reconstruction, pair_messages};
use crate::clock::Clocks;
use crate::read::{Ending, RankTrace, Trace};

/// How to export.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExportOptions {
    /// Remove the suspensions (as `reconstruct` does) instead of showing
    /// them.
    pub reconstructed: bool,
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Ranks.
    pub ranks: usize,
    /// Tracks (one per rank and thread, and one per extra lane).
    pub tracks: usize,
    /// Slices.
    pub slices: usize,
    /// Instants.
    pub instants: usize,
    /// Messages linked send to receive.
    pub flows: usize,
    /// From the first item's begin to the last one's end, ns.
    pub span: u64,
    /// What the user should know: ranks whose files end early, records
    /// skipped.
    pub notes: Vec<String>,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The OTF2 directory holds files already.
    #[error("{0} exists and is not empty: name a new or empty directory for the OTF2 archive")]
    NotEmpty(PathBuf),
    /// The OTF2 library refused a call.
    #[error("writing the OTF2 archive in {path}: {call} failed: {what}")]
    Otf2 {
        /// The archive's directory.
        path: PathBuf,
        /// The library function.
        call: &'static str,
        /// The library's description of the error.
        what: String,
    },
    /// This build has no OTF2 support.
    #[error(
        "this mttl-trace was built without OTF2 support: rebuild it with \
         `cargo build --release -p mttl-trace --features otf2` (needs the OTF2 library, \
         Debian's libotf2-trace-dev)"
    )]
    Otf2NotBuilt,
}

/// What an item is about: Perfetto's category, OTF2's paradigm and role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Category {
    /// A comm primitive.
    Comm,
    /// Remote calls.
    Invoke,
    /// Global memory.
    Memory,
    /// `SyncCell` waits.
    Sync,
    /// Collectives.
    Collective,
    /// User regions.
    Region,
    /// The tracer's own doing: writes, suspensions, clocks.
    Trace,
    /// Thread spawn, run, block, exit.
    Thread,
}

impl Category {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Category::Comm => "comm",
            Category::Invoke => "invoke",
            Category::Memory => "memory",
            Category::Sync => "sync",
            Category::Collective => "collective",
            Category::Region => "region",
            Category::Trace => "trace",
            Category::Thread => "thread",
        }
    }
}

/// An argument shown with an item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arg {
    Uint(u64),
    Int(i64),
    Text(String),
}

/// A collective's identity, for OTF2's collective events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Collective {
    pub(crate) name: String,
    pub(crate) root: Option<u32>,
}

/// A slice or an instant on one track.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    /// ns, on the scene's clock.
    pub(crate) begin: u64,
    /// ns; equal to `begin` for instants.
    pub(crate) end: u64,
    pub(crate) instant: bool,
    pub(crate) name: String,
    pub(crate) category: Category,
    pub(crate) args: Vec<(&'static str, Arg)>,
    /// The index of the event (the first one, for a pair) in its rank's
    /// events: how flows find their ends.
    pub(crate) event: Option<usize>,
    pub(crate) collective: Option<Collective>,
}

/// One thread's track (or the rank's own), as lanes of nested items.
#[derive(Debug, Clone)]
pub(crate) struct Track {
    pub(crate) name: String,
    /// The mttl thread's id; `None` for the rank's own track.
    pub(crate) thread: Option<u64>,
    /// Lane 0 is the track itself; each lane's items are properly nested
    /// and sorted by begin (then longest first).
    pub(crate) lanes: Vec<Vec<Item>>,
}

/// One rank's tracks: its own first, then one per thread.
#[derive(Debug, Clone)]
pub(crate) struct RankTracks {
    pub(crate) tracks: Vec<Track>,
}

/// A message: from a send event to a receive event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flow {
    /// Unique in the scene, from 1.
    pub(crate) id: u64,
    /// (rank, event index) of the send.
    pub(crate) send: (usize, usize),
    /// (rank, event index) of the receive.
    pub(crate) recv: (usize, usize),
    pub(crate) tag: u64,
    /// As received.
    pub(crate) bytes: u64,
}

/// The run, ready to write.
#[derive(Debug, Clone)]
pub(crate) struct Scene {
    pub(crate) ranks: Vec<RankTracks>,
    pub(crate) flows: Vec<Flow>,
    pub(crate) notes: Vec<String>,
}

impl Scene {
    /// The earliest begin and latest end of any item, ns.
    pub(crate) fn span(&self) -> (u64, u64) {
        let items = || {
            self.ranks
                .iter()
                .flat_map(|r| &r.tracks)
                .flat_map(|t| &t.lanes)
                .flatten()
        };
        let lo = items().map(|i| i.begin).min().unwrap_or(0);
        let hi = items().map(|i| i.end).max().unwrap_or(lo);
        (lo, hi)
    }

    /// The summary of writing this scene.
    pub(crate) fn summary(&self) -> ExportSummary {
        let mut s = ExportSummary {
            ranks: self.ranks.len(),
            flows: self.flows.len(),
            span: self.span().1 - self.span().0,
            notes: self.notes.clone(),
            ..ExportSummary::default()
        };
        for t in self.ranks.iter().flat_map(|r| &r.tracks) {
            s.tracks += t.lanes.len().max(1);
            for i in t.lanes.iter().flatten() {
                if i.instant {
                    s.instants += 1;
                } else {
                    s.slices += 1;
                }
            }
        }
        s
    }
}

/// A thread-level record (`MTTL_TRACE_LEVEL=threads`): kinds 80
/// `thread_spawn` (`a` the new thread's name id, `b` its id), 81
/// `thread_run` (`b` the thread the scheduler switched to: every later
/// event of the rank is that thread's, until the next), 82 `thread_block`
/// (`a` the reason's name id, `b` the thread) and 83 `thread_exit` (`b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadMark {
    Spawn { name: u64, thread: u64 },
    Run { thread: u64 },
    Block { reason: u64, thread: u64 },
    Exit { thread: u64 },
}

/// The thread-level record `e` is, if it is one (by its kind's number, so
/// that this reads them whether or not this build's format names them).
pub(crate) fn thread_mark(e: &Event) -> Option<ThreadMark> {
    Some(match e.kind as u8 {
        80 => ThreadMark::Spawn {
            name: e.a,
            thread: e.b,
        },
        81 => ThreadMark::Run { thread: e.b },
        82 => ThreadMark::Block {
            reason: e.a,
            thread: e.b,
        },
        83 => ThreadMark::Exit { thread: e.b },
        _ => return None,
    })
}

/// Per record, the thread it belongs to (`None`: the rank's own track):
/// the thread of the last `thread_run` before it; a thread record itself
/// belongs to the thread it names, but a spawn to the spawning thread.
pub(crate) fn owners(marks: &[Option<ThreadMark>]) -> Vec<Option<u64>> {
    let mut current = None;
    marks
        .iter()
        .map(|m| match *m {
            Some(ThreadMark::Run { thread }) => {
                current = Some(thread);
                current
            }
            Some(ThreadMark::Block { thread, .. } | ThreadMark::Exit { thread }) => Some(thread),
            Some(ThreadMark::Spawn { .. }) | None => current,
        })
        .collect()
}

/// Puts `items` on lanes so that each lane's slices nest properly: sorted
/// by begin (longest first), each slice goes to the first lane whose open
/// slice contains it (or that has none open); instants go to lane 0.
pub(crate) fn lay_out(mut items: Vec<Item>) -> Vec<Vec<Item>> {
    items.sort_by(|x, y| {
        (x.begin, std::cmp::Reverse(x.end), x.instant).cmp(&(
            y.begin,
            std::cmp::Reverse(y.end),
            y.instant,
        ))
    });
    let mut lanes: Vec<(Vec<Item>, Vec<u64>)> = Vec::new();
    for it in items {
        let mut chosen = None;
        for (i, (_, open)) in lanes.iter_mut().enumerate() {
            while open.last().is_some_and(|&end| end <= it.begin) {
                open.pop();
            }
            if it.instant || open.last().is_none_or(|&end| it.end <= end) {
                chosen = Some(i);
                break;
            }
        }
        let i = chosen.unwrap_or_else(|| {
            lanes.push((Vec::new(), Vec::new()));
            lanes.len() - 1
        });
        if !it.instant {
            lanes[i].1.push(it.end);
        }
        lanes[i].0.push(it);
    }
    lanes.into_iter().map(|(items, _)| items).collect()
}

/// One step of walking a lane in time order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step<'a> {
    Begin(&'a Item),
    End(&'a Item),
    Instant(&'a Item),
}

/// Walks a lane laid out by [`lay_out`], calling `f` for each slice's
/// begin and end and each instant, in time order and properly nested.
pub(crate) fn walk<'a>(lane: &'a [Item], mut f: impl FnMut(Step<'a>)) {
    let mut open: Vec<&Item> = Vec::new();
    for it in lane {
        while let Some(top) = open.last().filter(|top| top.end <= it.begin) {
            f(Step::End(top));
            open.pop();
        }
        if it.instant {
            f(Step::Instant(it));
        } else {
            f(Step::Begin(it));
            open.push(it);
        }
    }
    while let Some(top) = open.pop() {
        f(Step::End(top));
    }
}

/// Builds the scene of `t` (the module's steps).
pub(crate) fn scene(t: &Trace, opts: ExportOptions) -> Scene {
    let clocks = Clocks::of(t);
    let mut notes = Vec::new();
    let mut kept: Vec<Vec<bool>> = Vec::new();
    let mut ranks = Vec::new();
    for (rank, r) in t.ranks.iter().enumerate() {
        let keep: Vec<bool> = r
            .events
            .iter()
            .map(|e| !opts.reconstructed || kept_in_reconstruction(&clocks, rank, e))
            .collect();
        let at = |x: u64| {
            if opts.reconstructed {
                clocks.corrected(rank, x)
            } else {
                clocks.on_rank0(rank, x)
            }
        };
        let marks: Vec<Option<ThreadMark>> = r.events.iter().map(thread_mark).collect();
        let (tracks, rank_notes) = rank_tracks(r, &marks, &keep, &at);
        notes.extend(rank_notes);
        ranks.push(RankTracks { tracks });
        kept.push(keep);
    }
    let messages = pair_messages(t);
    let flows = messages
        .pairs
        .iter()
        .filter(|p| kept[p.send.0][p.send.1] && kept[p.recv.0][p.recv.1])
        .enumerate()
        .map(|(i, p)| Flow {
            id: i as u64 + 1,
            send: p.send,
            recv: p.recv,
            tag: p.tag,
            bytes: t.ranks[p.recv.0].events[p.recv.1].b,
        })
        .collect();
    Scene {
        ranks,
        flows,
        notes,
    }
}

/// An open pair (a collective entered, a region begun): where, since when.
#[derive(Debug, Clone, Copy)]
struct Open {
    track: usize,
    begin: u64,
    event: usize,
}

/// Steps 2 to 4 for one rank: its tracks, and notes for the user. `marks`
/// are the thread records among `r`'s events (by index), `keep` which
/// events to show, `at` an event time on the scene's clock.
pub(crate) fn rank_tracks(
    r: &RankTrace,
    marks: &[Option<ThreadMark>],
    keep: &[bool],
    at: &dyn Fn(u64) -> u64,
) -> (Vec<Track>, Vec<String>) {
    let rank = r.header.rank;
    let owners = owners(marks);
    let mut tracks = vec![(format!("rank {rank}"), None::<u64>, Vec::<Item>::new())];
    let mut track_of: HashMap<u64, usize> = HashMap::new();
    let mut track = |thread: Option<u64>, name: Option<String>, tracks: &mut Vec<_>| match thread {
        None => 0,
        Some(id) => *track_of.entry(id).or_insert_with(|| {
            let name = name.unwrap_or_else(|| format!("thread {id}"));
            tracks.push((format!("{name} #{id}"), Some(id), Vec::new()));
            tracks.len() - 1
        }),
    };
    let mut colls: HashMap<(u64, u64), (Open, Option<u32>)> = HashMap::new();
    let mut regions: Vec<(u64, Open)> = Vec::new();
    let mut skipped = 0u64;
    for (i, e) in r.events.iter().enumerate() {
        if !keep[i] {
            continue;
        }
        let (begin, end) = (at(e.begin), at(e.end));
        let end = end.max(begin);
        let slice = |name: String, category, args| Item {
            begin,
            end,
            instant: false,
            name,
            category,
            args,
            event: Some(i),
            collective: None,
        };
        let instant = |name: String, category, args| Item {
            instant: true,
            begin: end,
            ..slice(name, category, args)
        };
        if let Some(mark) = marks[i] {
            let (item, tr) = match mark {
                ThreadMark::Spawn { name, thread } => {
                    let owner = track(owners[i], None, &mut tracks);
                    track(Some(thread), Some(r.name(name)), &mut tracks);
                    let args = vec![("thread", Arg::Uint(thread))];
                    (
                        instant(format!("spawn {}", r.name(name)), Category::Thread, args),
                        owner,
                    )
                }
                ThreadMark::Run { thread } => {
                    let tr = track(Some(thread), None, &mut tracks);
                    (instant("run".into(), Category::Thread, vec![]), tr)
                }
                ThreadMark::Block { reason, thread } => {
                    let tr = track(Some(thread), None, &mut tracks);
                    let what = format!("block: {}", r.name(reason));
                    (instant(what, Category::Thread, vec![]), tr)
                }
                ThreadMark::Exit { thread } => {
                    let tr = track(Some(thread), None, &mut tracks);
                    (instant("exit".into(), Category::Thread, vec![]), tr)
                }
            };
            tracks[tr].2.push(item);
            continue;
        }
        let tr = track(owners[i], None, &mut tracks);
        let peer = |role| e.peer.map(|p| (role, Arg::Uint(u64::from(p))));
        let item = match e.kind {
            Kind::Send | Kind::Nsend | Kind::SendHeadedBulk | Kind::NsendHeaded => {
                let args = [peer("to"), Some(("tag", Arg::Uint(e.a))), bytes(e)];
                slice(
                    e.kind.name().into(),
                    Category::Comm,
                    args.into_iter().flatten().collect(),
                )
            }
            Kind::RecvAny | Kind::RecvFrom | Kind::RecvInto => {
                let args = [peer("from"), Some(("tag", Arg::Uint(e.a))), bytes(e)];
                slice(
                    e.kind.name().into(),
                    Category::Comm,
                    args.into_iter().flatten().collect(),
                )
            }
            Kind::Test => {
                let args = [peer("to"), Some(("done", Arg::Uint(e.b)))];
                instant(
                    "test".into(),
                    Category::Comm,
                    args.into_iter().flatten().collect(),
                )
            }
            Kind::InvokeIssued => {
                let args = [peer("callee"), Some(("nowait", Arg::Uint(e.b)))];
                let name = format!("invoke {}", r.name(e.a));
                instant(name, Category::Invoke, args.into_iter().flatten().collect())
            }
            Kind::InvokeServed => {
                let name = format!("serve {}", r.name(e.a));
                slice(name, Category::Invoke, peer("caller").into_iter().collect())
            }
            Kind::InvokeAnswered => {
                let name = format!("answer of {}", r.name(e.a));
                instant(name, Category::Invoke, peer("callee").into_iter().collect())
            }
            Kind::Read | Kind::Write | Kind::Nwrite => {
                let args = [peer("owner"), bytes(e)];
                slice(
                    e.kind.name().into(),
                    Category::Memory,
                    args.into_iter().flatten().collect(),
                )
            }
            Kind::Fence => slice("fence".into(), Category::Memory, vec![]),
            Kind::SyncWait => slice(format!("wait: {}", r.name(e.a)), Category::Sync, vec![]),
            Kind::CollEnter => {
                let open = Open {
                    track: tr,
                    begin: end,
                    event: i,
                };
                colls.insert((e.a, e.b), (open, e.peer));
                continue;
            }
            Kind::CollExit => match colls.remove(&(e.a, e.b)) {
                Some((open, root)) => {
                    tracks[open.track].2.push(collective(r, e, open, end, root));
                    continue;
                }
                None => {
                    let name = format!("{} #{} left (entry not in the trace)", r.name(e.a), e.b);
                    instant(name, Category::Collective, vec![])
                }
            },
            Kind::RegionBegin => {
                let open = Open {
                    track: tr,
                    begin: end,
                    event: i,
                };
                regions.push((e.a, open));
                continue;
            }
            Kind::RegionEnd => {
                match regions
                    .iter()
                    .rposition(|(a, o)| *a == e.a && o.track == tr)
                {
                    Some(k) => {
                        let (_, open) = regions.remove(k);
                        let item = Item {
                            begin: open.begin,
                            event: Some(open.event),
                            ..slice(r.name(e.a), Category::Region, vec![])
                        };
                        tracks[tr].2.push(item);
                        continue;
                    }
                    None => instant(format!("end of {}", r.name(e.a)), Category::Region, vec![]),
                }
            }
            Kind::Flush => {
                let cause = match e.a {
                    1 => "local",
                    2 => "suspension",
                    3 => "fallback",
                    _ => "unknown cause",
                };
                let args = [Some(("cause", Arg::Text(cause.into()))), bytes(e)];
                let name = format!("trace write ({cause})");
                slice(name, Category::Trace, args.into_iter().flatten().collect())
            }
            Kind::Suspension => {
                let args = vec![("z_ns", Arg::Uint(e.a)), ("w_ns", Arg::Uint(e.b))];
                slice("trace suspension".into(), Category::Trace, args)
            }
            Kind::SuspensionClock => {
                let args = vec![("m_ns", Arg::Uint(e.a)), ("d_ns", Arg::Uint(e.b))];
                instant("suspension clock".into(), Category::Trace, args)
            }
            Kind::ClockOffset => {
                let args = [
                    peer("rank"),
                    Some(("offset_ns", Arg::Int(unzigzag(e.a)))),
                    Some(("error_ns", Arg::Uint(e.b))),
                ];
                let name = "clock offset".into();
                instant(name, Category::Trace, args.into_iter().flatten().collect())
            }
            _ => {
                skipped += 1;
                continue;
            }
        };
        tracks[tr].2.push(item);
    }
    let mut notes = Vec::new();
    // Left open: a collective or region the file ends inside.
    for ((a, seq), (open, _)) in colls {
        let name = format!("{} #{seq} entered (exit not in the trace)", r.name(a));
        tracks[open.track].2.push(Item {
            begin: open.begin,
            end: open.begin,
            instant: true,
            name,
            category: Category::Collective,
            args: vec![],
            event: Some(open.event),
            collective: None,
        });
    }
    for (a, open) in regions {
        tracks[open.track].2.push(Item {
            begin: open.begin,
            end: open.begin,
            instant: true,
            name: format!("{} began (end not in the trace)", r.name(a)),
            category: Category::Region,
            args: vec![],
            event: Some(open.event),
            collective: None,
        });
    }
    if skipped > 0 {
        notes.push(format!(
            "rank {rank}: {skipped} records of kinds the exporter does not show were skipped"
        ));
    }
    let torn = match r.ending {
        Ending::Complete(_) => None,
        Ending::Truncated { offset } => Some((offset, "its file stops")),
        Ending::WriteFailed { offset } => Some((offset, "a write failed")),
    };
    if let Some((offset, why)) = torn {
        let last = r.events.iter().map(|e| at(e.end)).max().unwrap_or(0);
        notes.push(format!(
            "rank {rank}: {} ends at byte {offset} ({why}): exported up to there",
            r.path.display()
        ));
        tracks[0].2.push(Item {
            begin: last,
            end: last,
            instant: true,
            name: format!("trace ends: {why} at byte {offset}"),
            category: Category::Trace,
            args: vec![],
            event: None,
            collective: None,
        });
    }
    let tracks = tracks
        .into_iter()
        .map(|(name, thread, items)| Track {
            name,
            thread,
            lanes: lay_out(items),
        })
        .collect();
    (tracks, notes)
}

fn bytes(e: &Event) -> Option<(&'static str, Arg)> {
    Some(("bytes", Arg::Uint(e.b)))
}

/// The slice of a collective, from its enter to its exit `e`.
fn collective(r: &RankTrace, e: &Event, open: Open, end: u64, root: Option<u32>) -> Item {
    let name = r.name(e.a);
    let mut args = vec![("seq", Arg::Uint(e.b))];
    if let Some(root) = root {
        args.push(("root", Arg::Uint(u64::from(root))));
    }
    Item {
        begin: open.begin,
        end: end.max(open.begin),
        instant: false,
        name: name.clone(),
        category: Category::Collective,
        args,
        event: Some(open.event),
        collective: Some(Collective { name, root }),
    }
}
