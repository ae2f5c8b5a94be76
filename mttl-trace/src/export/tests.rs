//! The scene and the Perfetto encoding on hand-made traces: lanes nest,
//! threads get tracks, clocks are aligned, suspensions removed on demand,
//! flows join each send to its receive, a torn file is exported with a
//! note, and bad outputs are refused with the path.

use std::collections::HashMap;
use std::path::PathBuf;

use mttl_core::trace::format::{zigzag, EndTotals, Event, FileHeader, Kind, VERSION};
use prost::Message;

use super::lanes::lay_out;
use super::perfetto::{proto, write};
use super::threads::{owners, ThreadMark};
use super::*;
use crate::read::{Ending, RankTrace, Trace};

fn ev(kind: Kind, peer: Option<u32>, a: u64, b: u64, begin: u64, end: u64) -> Event {
    Event {
        kind,
        peer,
        a,
        b,
        begin,
        end,
    }
}

fn rank(rank: u32, size: u32, events: Vec<Event>, names: &[(u64, &str)]) -> RankTrace {
    RankTrace {
        path: PathBuf::from(format!("rank-{rank:05}.mttltrace")),
        header: FileHeader {
            version: VERSION,
            status: 1,
            policy: 3,
            job_id: 7,
            rank,
            size,
            mono_start: 0,
            real_start: 0,
            buffer: 1 << 20,
        },
        events,
        names: names.iter().map(|&(i, n)| (i, n.to_owned())).collect(),
        blocks: 2,
        ending: Ending::Complete(EndTotals::default()),
    }
}

fn item(begin: u64, end: u64, name: &str) -> Item {
    Item {
        begin,
        end,
        instant: begin == end && name.starts_with('!'),
        name: name.to_owned(),
        category: Category::Comm,
        args: vec![],
        event: None,
        collective: None,
    }
}

/// Whether every two slices of a lane are disjoint or nested, and a walk
/// of it closes what it opened, in time order.
fn nests(lane: &[Item]) -> bool {
    let slices: Vec<&Item> = lane.iter().filter(|i| !i.instant).collect();
    let pairwise = slices.iter().enumerate().all(|(k, x)| {
        slices[k + 1..].iter().all(|y| {
            x.end <= y.begin
                || y.end <= x.begin
                || (x.begin <= y.begin && y.end <= x.end)
                || (y.begin <= x.begin && x.end <= y.end)
        })
    });
    let (mut open, mut now, mut ordered) = (Vec::new(), 0, true);
    walk(lane, |s| {
        let t = match s {
            Step::Begin(i) => {
                open.push(i.name.clone());
                i.begin
            }
            Step::End(i) => {
                ordered &= open.pop().as_deref() == Some(&i.name[..]);
                i.end
            }
            Step::Instant(i) => i.begin,
        };
        ordered &= t >= now;
        now = t;
    });
    pairwise && ordered && open.is_empty()
}

#[test]
fn overlapping_slices_go_to_further_lanes_and_every_lane_nests() {
    let items = vec![
        item(0, 10, "a"),
        item(5, 15, "b"),
        item(6, 8, "c"),
        item(12, 14, "d"),
        item(7, 7, "!i"),
        item(15, 15, "zero-length"),
    ];
    let lanes = lay_out(items);
    let names: Vec<Vec<&str>> = lanes
        .iter()
        .map(|l| l.iter().map(|i| &i.name[..]).collect())
        .collect();
    assert_eq!(names, [vec!["a", "c", "!i", "d", "zero-length"], vec!["b"]]);
    assert!(lanes.iter().all(|l| nests(l)));

    // Many random intervals: all placed, every lane nests.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let items: Vec<Item> = (0..500)
        .map(|k| {
            let b = next() % 10_000;
            let d = if k % 5 == 0 { 0 } else { next() % 500 };
            item(b, b + d, &format!("s{k}"))
        })
        .collect();
    let lanes = lay_out(items);
    assert_eq!(lanes.iter().map(Vec::len).sum::<usize>(), 500);
    assert!(lanes.iter().all(|l| nests(l)), "{} lanes", lanes.len());
}

#[test]
fn events_belong_to_the_thread_last_run() {
    use ThreadMark::*;
    let marks = [
        None,
        Some(Run { thread: 1 }),
        None,
        Some(Spawn { name: 9, thread: 2 }),
        Some(Block {
            reason: 8,
            thread: 1,
        }),
        Some(Run { thread: 2 }),
        None,
        Some(Exit { thread: 2 }),
        Some(Run { thread: 1 }),
        None,
        Some(Run {
            thread: u64::MAX, // the runtime's loop
        }),
        None,
    ];
    assert_eq!(
        owners(&marks),
        [
            None,
            Some(1),
            Some(1),
            Some(1),
            Some(1),
            Some(2),
            Some(2),
            Some(2),
            Some(1),
            Some(1),
            None,
            None
        ]
    );
}

#[test]
fn thread_records_give_each_thread_its_track() {
    use ThreadMark::*;
    // The worker's id: slot 5, generation 2.
    const W: u64 = 5 | (2 << 32);
    // Hand-made records: the thread records stand at indices 1, 3, 4, 6,
    // 8 (their events' own kinds are then not looked at).
    let events = vec![
        ev(Kind::Send, Some(1), 3, 8, 10, 12),
        ev(Kind::Test, None, 0, 0, 20, 20),
        ev(Kind::Send, Some(1), 3, 8, 30, 32),
        ev(Kind::Test, None, 0, 0, 40, 40),
        ev(Kind::Test, None, 0, 0, 50, 50),
        ev(Kind::RecvAny, Some(1), 3, 8, 55, 60),
        ev(Kind::Test, None, 0, 0, 70, 70),
        ev(Kind::Fence, None, 0, 0, 72, 75),
        ev(Kind::Test, None, 0, 0, 80, 80),
        ev(Kind::RecvAny, Some(1), 4, 8, 85, 90),
    ];
    let marks = [
        None,
        Some(Run { thread: 4 }),
        None,
        Some(Spawn { name: 1, thread: W }),
        Some(Run { thread: W }),
        None,
        Some(Exit { thread: W }),
        None,
        Some(Run {
            thread: u64::MAX, // the runtime's loop
        }),
        None,
    ];
    let r = rank(0, 2, events, &[(1, "worker")]);
    let keep = vec![true; marks.len()];
    let (tracks, notes) = rank_tracks(&r, &marks, &keep, &|x| x);
    assert!(notes.is_empty(), "{notes:?}");
    let shown: Vec<(String, Vec<String>)> = tracks
        .iter()
        .map(|t| {
            let names = t.lanes.iter().flatten().map(|i| i.name.clone()).collect();
            (t.name.clone(), names)
        })
        .collect();
    assert_eq!(
        shown,
        [
            (
                "rank 0".to_owned(),
                vec!["send".into(), "run".into(), "recv_any".into()]
            ),
            (
                "thread #4".to_owned(),
                vec!["run".into(), "send".into(), "spawn worker".into()]
            ),
            (
                "worker #5.2".to_owned(),
                vec![
                    "run".into(),
                    "recv_any".into(),
                    "exit".into(),
                    "fence".into()
                ]
            ),
        ]
    );
    // The fence after the exit stays with the thread last run: only a
    // thread_run switches threads.
    assert_eq!(tracks[2].thread, Some(W));
}

/// Two ranks: rank 0 sends to rank 1 inside a region, both barrier; rank
/// 1's clock is 1000 ns ahead of rank 0's (rank 0 measured it).
fn two_ranks() -> Trace {
    let r0 = rank(
        0,
        2,
        vec![
            ev(Kind::ClockOffset, Some(1), zigzag(1000), 5, 0, 0),
            ev(Kind::RegionBegin, None, 2, 0, 100, 100),
            ev(Kind::SendHeadedBulk, Some(1), 3, 5000, 110, 150),
            ev(Kind::CollEnter, None, 1, 0, 200, 200),
            ev(Kind::CollExit, None, 1, 0, 400, 400),
            ev(Kind::RegionEnd, None, 2, 0, 500, 500),
        ],
        &[(1, "barrier"), (2, "solve")],
    );
    let r1 = rank(
        1,
        2,
        vec![
            ev(Kind::RecvAny, Some(0), 3 | 0x4000, 40, 1100, 1180),
            ev(Kind::RecvFrom, Some(0), 15, 4960, 1185, 1190),
            ev(Kind::CollEnter, None, 1, 0, 1300, 1300),
            ev(Kind::CollExit, None, 1, 0, 1390, 1390),
            ev(Kind::Name, None, 0, 0, 1395, 1395),
        ],
        &[(1, "barrier")],
    );
    Trace {
        dir: PathBuf::from("tr"),
        ranks: vec![r0, r1],
    }
}

#[test]
fn perfetto_holds_tracks_slices_and_flows_on_rank_0s_clock() {
    let t = two_ranks();
    let s = scene(&t, ExportOptions::default());
    assert_eq!(s.flows.len(), 2, "a headed send is two messages");
    assert_eq!(s.notes.len(), 1, "{:?}", s.notes);
    assert!(s.notes[0].contains("1 records of kinds the exporter does not show"));
    let mut bytes = Vec::new();
    write(&s, &mut bytes).unwrap();
    let trace = proto::Trace::decode(&bytes[..]).unwrap();

    let processes: Vec<(i32, String)> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref()?.process.clone())
        .map(|p| (p.pid.unwrap(), p.process_name.unwrap()))
        .collect();
    assert_eq!(
        processes,
        [(1000, "rank 0".into()), (1001, "rank 1".into())]
    );
    let threads: HashMap<u64, String> = trace
        .packet
        .iter()
        .filter_map(|p| {
            let d = p.track_descriptor.as_ref()?;
            Some((d.uuid?, d.thread.as_ref()?.thread_name.clone()?))
        })
        .collect();
    assert_eq!(threads.len(), 2);

    // Per track: the slices (name, begin, end) rebuilt from begin/end
    // events, and the instants.
    let mut open: HashMap<u64, Vec<(String, u64, proto::TrackEvent)>> = HashMap::new();
    let mut slices: Vec<(String, String, u64, u64, proto::TrackEvent)> = Vec::new();
    let mut last_ts = 0;
    for p in &trace.packet {
        let Some(e) = &p.track_event else { continue };
        let ts = p.timestamp.unwrap();
        assert!(ts >= last_ts, "packets sorted by time");
        last_ts = ts;
        let track = e.track_uuid.unwrap();
        match e.r#type.unwrap() {
            proto::TYPE_SLICE_BEGIN => {
                open.entry(track)
                    .or_default()
                    .push((e.name.clone().unwrap(), ts, e.clone()))
            }
            proto::TYPE_SLICE_END => {
                let (name, b, begin) = open.get_mut(&track).unwrap().pop().unwrap();
                slices.push((threads[&track].clone(), name, b, ts, begin));
            }
            t => assert_eq!(t, proto::TYPE_INSTANT),
        }
    }
    assert!(open.values().all(Vec::is_empty));
    let find = |track: &str, name: &str| {
        slices
            .iter()
            .find(|s| s.0 == track && s.1 == name)
            .unwrap_or_else(|| panic!("no {name} on {track}: {slices:?}"))
    };
    assert_eq!(
        find("rank 0", "solve").2..find("rank 0", "solve").3,
        100..500
    );
    assert_eq!(
        find("rank 0", "barrier").2..find("rank 0", "barrier").3,
        200..400
    );
    // Rank 1's times moved onto rank 0's clock.
    assert_eq!(
        find("rank 1", "barrier").2..find("rank 1", "barrier").3,
        300..390
    );
    let send = find("rank 0", "send_headed_bulk");
    let header = find("rank 1", "recv_any");
    let body = find("rank 1", "recv_from");
    assert_eq!((send.2, header.2, body.3), (110, 100, 190));
    assert_eq!(send.4.flow_ids.len(), 2);
    assert_eq!(header.4.terminating_flow_ids, [send.4.flow_ids[0]]);
    assert_eq!(body.4.terminating_flow_ids, [send.4.flow_ids[1]]);
    let barrier = &find("rank 1", "barrier").4;
    assert_eq!(barrier.categories, ["collective"]);
    let arg = |e: &proto::TrackEvent, n: &str| {
        e.debug_annotations
            .iter()
            .find(|a| a.name.as_deref() == Some(n))
            .and_then(|a| a.uint_value)
    };
    assert_eq!(arg(&send.4, "bytes"), Some(5000));
    assert_eq!(arg(&send.4, "to"), Some(1));
    assert_eq!(arg(barrier, "seq"), Some(0));
}

#[test]
fn reconstructed_removes_the_suspensions_and_their_messages() {
    let mut t = two_ranks();
    // Rank 0: a suspension of Z = 1000 from 600, a write inside it, a
    // message of the protocol inside it, and a send after it.
    t.ranks[0].events.extend([
        ev(Kind::Flush, None, 2, 4096, 610, 700),
        ev(Kind::Send, Some(1), 9, 8, 800, 810),
        ev(Kind::Suspension, None, 1000, 10, 600, 1600),
        ev(Kind::Send, Some(1), 4, 8, 1700, 1710),
    ]);
    let shown = |s: &Scene| -> Vec<(String, u64)> {
        s.ranks[0].tracks[0]
            .lanes
            .iter()
            .flatten()
            .map(|i| (i.name.clone(), i.begin))
            .collect()
    };
    let as_traced = shown(&scene(&t, ExportOptions::default()));
    assert!(as_traced.contains(&("trace suspension".into(), 600)));
    assert!(as_traced.contains(&("trace write (suspension)".into(), 610)));
    assert!(as_traced.contains(&("send".into(), 1700)));
    let rec = shown(&scene(
        &t,
        ExportOptions {
            reconstructed: true,
        },
    ));
    assert!(!rec.iter().any(|(n, _)| n.starts_with("trace ")), "{rec:?}");
    assert_eq!(rec.iter().filter(|(n, _)| n == "send").count(), 1);
    assert!(rec.contains(&("send".into(), 700)), "{rec:?}");
}

#[test]
fn a_torn_file_is_exported_up_to_its_end_with_a_note() {
    let mut t = two_ranks();
    t.ranks[1].ending = Ending::Truncated { offset: 1234 };
    let s = scene(&t, ExportOptions::default());
    let summary = s.summary();
    assert!(
        summary
            .notes
            .iter()
            .any(|n| n.contains("rank 1") && n.contains("ends at byte 1234")),
        "{:?}",
        summary.notes
    );
    let last = s.ranks[1].tracks[0].lanes.iter().flatten().any(|i| {
        i.instant && i.name.contains("trace ends") && i.name.contains("1234") && i.begin == 395
    });
    assert!(last);
}

#[test]
fn unwritable_outputs_are_refused_naming_them() {
    let t = two_ranks();
    let dir = std::env::temp_dir().join(format!("mttl-export-unit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("no-such-dir").join("x.pftrace");
    let err = crate::export_perfetto(&t, &file, ExportOptions::default()).unwrap_err();
    assert!(
        matches!(&err, ExportError::Io { path, .. } if *path == file),
        "{err}"
    );
    assert!(err.to_string().contains("no-such-dir"), "{err}");

    std::fs::write(dir.join("something"), b"x").unwrap();
    let err = crate::export_otf2(&t, &dir, ExportOptions::default()).unwrap_err();
    if crate::OTF2_BUILT {
        assert!(matches!(err, ExportError::NotEmpty(_)), "{err}");
        assert!(err.to_string().contains("not empty"));
    } else {
        assert!(err.to_string().contains("--features otf2"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn arbitrary_records_export_without_panics_and_lanes_stay_in_order() {
    // Random records of every kind, peers in and out of the job, clock
    // offsets that jump, unpaired enters, exits and region ends: the
    // export must never panic, every item must end after it begins, and
    // every lane must be written in time order.
    let kinds: Vec<Kind> = (0..=255u8).filter_map(Kind::from_u8).collect();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..50 {
        let size = 1 + (round % 4) as u32;
        let ranks = (0..size)
            .map(|r| {
                let mut t = 1_000u64;
                let events = (0..200)
                    .map(|_| {
                        t += next() % 1_000;
                        let kind = kinds[(next() % kinds.len() as u64) as usize];
                        let peer = match next() % 3 {
                            0 => None,
                            _ => Some((next() % u64::from(size + 1)) as u32),
                        };
                        let a = match kind {
                            Kind::ClockOffset => zigzag((next() % 2_000_000) as i64 - 1_000_000),
                            _ => next() % 4,
                        };
                        let dur = next() % 3_000;
                        ev(kind, peer, a, next() % 3, t.saturating_sub(dur), t)
                    })
                    .collect();
                rank(r, size, events, &[(1, "barrier"), (2, "r")])
            })
            .collect();
        let t = Trace {
            dir: PathBuf::from("random"),
            ranks,
        };
        for reconstructed in [false, true] {
            let s = scene(&t, ExportOptions { reconstructed });
            for lane in s
                .ranks
                .iter()
                .flat_map(|r| &r.tracks)
                .flat_map(|t| &t.lanes)
            {
                assert!(lane.iter().all(|i| i.begin <= i.end));
                assert!(nests(lane), "round {round}");
            }
            let mut bytes = Vec::new();
            write(&s, &mut bytes).unwrap();
            let decoded = proto::Trace::decode(&bytes[..]).unwrap();
            assert!(decoded.packet.iter().any(|p| p.track_event.is_some()));
            if crate::OTF2_BUILT && round % 10 == 0 {
                let dir = std::env::temp_dir().join(format!(
                    "mttl-export-random-{round}-{reconstructed}-{}",
                    std::process::id()
                ));
                let _ = std::fs::remove_dir_all(&dir);
                let opts = ExportOptions { reconstructed };
                crate::export_otf2(&t, &dir, opts).unwrap_or_else(|e| panic!("{e}"));
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

#[test]
fn crossing_slices_get_a_child_track_in_perfetto() {
    // Two served calls that cross (the first switched out while the
    // second ran): the second goes to a child track of the rank's.
    let r = rank(
        0,
        1,
        vec![
            ev(Kind::InvokeServed, Some(1), 1, 0, 10, 50),
            ev(Kind::InvokeServed, Some(1), 1, 0, 20, 80),
        ],
        &[(1, "f")],
    );
    let t = Trace {
        dir: PathBuf::from("tr"),
        ranks: vec![r],
    };
    let s = scene(&t, ExportOptions::default());
    assert_eq!(s.ranks[0].tracks[0].lanes.len(), 2);
    let mut bytes = Vec::new();
    write(&s, &mut bytes).unwrap();
    let decoded = proto::Trace::decode(&bytes[..]).unwrap();
    let tracks: Vec<&proto::TrackDescriptor> = decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
        .collect();
    let thread = tracks.iter().find(|d| d.thread.is_some()).unwrap();
    let child = tracks.iter().find(|d| d.parent_uuid.is_some()).unwrap();
    assert_eq!(child.parent_uuid, thread.uuid);
    assert_eq!(child.name.as_deref(), Some("rank 0 (overlapping 1)"));
    let begins: Vec<(u64, u64)> = decoded
        .packet
        .iter()
        .filter_map(|p| {
            let e = p.track_event.as_ref()?;
            let begin = e.r#type == Some(proto::TYPE_SLICE_BEGIN);
            begin.then(|| (p.timestamp.unwrap(), e.track_uuid.unwrap()))
        })
        .collect();
    assert_eq!(
        begins,
        [(10, thread.uuid.unwrap()), (20, child.uuid.unwrap())]
    );
}
