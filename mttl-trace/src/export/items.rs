//! One rank's events as items on tracks (steps 2 to 4 of the module
//! `export`): slices and instants, collectives and regions paired, each
//! event on its thread's track, tracks laid out in lanes.

use std::collections::HashMap;

use mttl_core::trace::format::{unzigzag, Event, Kind};

use super::lanes::lay_out;
use super::threads::{owners, ThreadMark};
use super::{Arg, Category, Collective, Item, Track};
use crate::read::{Ending, RankTrace};

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
            let name = name.unwrap_or_else(|| "thread".to_owned());
            tracks.push((format!("{name} {}", thread_label(id)), Some(id), Vec::new()));
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
                ThreadMark::Run { .. } => {
                    let tr = track(owners[i], None, &mut tracks);
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
                            end: end.max(open.begin),
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
    let mut left: Vec<_> = colls.into_iter().collect();
    left.sort_by_key(|(_, (open, _))| open.event);
    for ((a, seq), (open, _)) in left {
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

/// A thread id as shown: `#INDEX`, or `#INDEX.GENERATION` when the id
/// carries a slot generation in its high 32 bits.
fn thread_label(id: u64) -> String {
    match id >> 32 {
        0 => format!("#{id}"),
        generation => format!("#{}.{generation}", id as u32),
    }
}
