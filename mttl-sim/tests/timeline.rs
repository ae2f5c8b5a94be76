//! `--perfetto`: the recorded timeline, written and decoded back with prost,
//! against what the schedule says it must hold.

use std::collections::HashMap;

use mttl_perfetto::proto::{Trace, TYPE_SLICE_BEGIN, TYPE_SLICE_END};
use mttl_sim::timeline::SliceKind;
use mttl_sim::{input, simulate, simulate_traced, Params, Schedule};
use prost::Message;

fn parse(text: &str) -> Schedule {
    input::goal::parse("test.goal".as_ref(), text.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
}

/// What a decoded file holds: per track (by name, with its rank's pid) the
/// slices as (name, begin, end), and the flows that leave and end.
#[derive(Debug, Default)]
struct Decoded {
    tracks: Vec<(i32, String, u64)>,
    slices: Vec<(u64, String, u64, u64)>,
    flows_out: Vec<u64>,
    flows_in: Vec<u64>,
}

fn decode(bytes: &[u8]) -> Decoded {
    let trace = Trace::decode(bytes).expect("a Trace");
    let mut d = Decoded::default();
    let mut pid_of: HashMap<u64, i32> = HashMap::new();
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut last_ts = 0;
    for p in &trace.packet {
        if let Some(t) = &p.track_descriptor {
            let uuid = t.uuid.expect("a track has a uuid");
            if let Some(proc_) = &t.process {
                pid_of.insert(uuid, proc_.pid.expect("a pid"));
                continue;
            }
            let (pid, name) = match (&t.thread, &t.name) {
                (Some(th), _) => (th.pid.expect("a pid"), th.thread_name.clone().unwrap()),
                (None, Some(n)) => (pid_of[&t.parent_uuid.expect("a parent")], n.clone()),
                _ => panic!("a track with neither thread nor name: {t:?}"),
            };
            d.tracks.push((pid, name, uuid));
            continue;
        }
        let ev = p.track_event.as_ref().expect("an event or a descriptor");
        let ts = p.timestamp.expect("events have a time");
        assert!(ts >= last_ts, "events in time order");
        last_ts = ts;
        let track = ev.track_uuid.expect("an event has a track");
        match ev.r#type {
            Some(TYPE_SLICE_BEGIN) => {
                open.entry(track)
                    .or_default()
                    .push((ev.name.clone().unwrap(), ts));
                d.flows_out.extend(&ev.flow_ids);
                d.flows_in.extend(&ev.terminating_flow_ids);
            }
            Some(TYPE_SLICE_END) => {
                let (name, begin) = open
                    .get_mut(&track)
                    .and_then(Vec::pop)
                    .expect("an end closes an open slice");
                d.slices.push((track, name, begin, ts));
            }
            t => panic!("unexpected event type {t:?}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "every slice ends");
    d
}

fn write(s: &Schedule, p: &Params) -> Decoded {
    let (report, timeline) = simulate_traced(s, p, None);
    // Recording does not change the run.
    let plain = simulate(s, p);
    assert_eq!(report.ranks, plain.ranks);
    assert_eq!(report.events, plain.events);
    decode(&timeline.write(s, Vec::new()).unwrap())
}

#[test]
fn a_hand_worked_run_gives_its_slices_waits_and_flows() {
    // LogGOPSim's defaults: L 2500, o 1500, g 1000, G 6, S 65535.
    // Rank 0 computes 0..100, sends 8 B at 100 (CPU to 1600; arrives 4100),
    // posts its receive at 1600. Rank 1's receive waits from 0 to 4100,
    // the message costs it 4100..5642 (1500 + 7 * 6), then it sends 100 kB
    // (rendezvous) at 5642, CPU to 7142, arriving at 9642: rank 0 takes it
    // (9642..9642 + 1500 + 99999 * 6 = 611136), ending its wait and rank
    // 1's rendezvous.
    let s = parse(
        "num_ranks 2\nrank 0 {\nl1: calc 100\nl2: send 8b to 1 tag 0\n\
         l3: recv 100000b from 1 tag 1\nl2 requires l1\nl3 requires l2\n}\n\
         rank 1 {\nl1: recv 8b from 0 tag 0\nl2: send 100000b to 0 tag 1\n\
         l2 requires l1\n}\n",
    );
    let d = write(&s, &Params::default());
    let names: Vec<(i32, &str)> = d.tracks.iter().map(|(p, n, _)| (*p, n.as_str())).collect();
    assert_eq!(
        names,
        [
            (1000, "cpu 0"),
            (1000, "waits"),
            (1001, "cpu 0"),
            (1001, "waits")
        ]
    );
    let track = |pid: i32, name: &str| {
        d.tracks
            .iter()
            .find(|(p, n, _)| *p == pid && n == name)
            .unwrap()
            .2
    };
    let mut got: Vec<(u64, &str, u64, u64)> = d
        .slices
        .iter()
        .map(|(t, n, b, e)| (*t, n.as_str(), *b, *e))
        .collect();
    got.sort_by_key(|&(t, _, b, _)| (t, b));
    let (c0, w0, c1, w1) = (
        track(1000, "cpu 0"),
        track(1000, "waits"),
        track(1001, "cpu 0"),
        track(1001, "waits"),
    );
    let mut want = vec![
        (c0, "calc", 0, 100),
        (c0, "send", 100, 1600),
        (c0, "recv", 9642, 611_136),
        (w0, "wait", 1600, 9642),
        (c1, "recv", 4100, 5642),
        (c1, "send", 5642, 7142),
        (w1, "wait", 0, 4100),
        (w1, "rendezvous", 5642, 9642),
    ];
    want.sort_by_key(|&(t, _, b, _)| (t, b));
    assert_eq!(got, want);
    // Two messages: each flow leaves a send and ends at a recv.
    let (mut out, mut inn) = (d.flows_out.clone(), d.flows_in.clone());
    out.sort_unstable();
    inn.sort_unstable();
    assert_eq!(out.len(), 2);
    assert_eq!(out, inn);
}

#[test]
fn a_ring_has_a_flow_per_message_and_overlapping_waits_get_lanes() {
    // Every rank posts two receives at once (no dependency between them),
    // then sends to both neighbours: the two waits overlap.
    let n = 6;
    let mut text = format!("num_ranks {n}\n");
    for r in 0..n {
        let (left, right) = ((r + n - 1) % n, (r + 1) % n);
        text += &format!(
            "rank {r} {{\nl1: recv 8b from {left} tag 0\nl2: recv 8b from {right} tag 1\n\
             l3: calc 1000\nl4: send 8b to {right} tag 0\nl5: send 8b to {left} tag 1\n\
             l4 requires l3\nl5 requires l3\n}}\n"
        );
    }
    let s = parse(&text);
    let d = write(&s, &Params::default());
    let count = |name: &str| d.slices.iter().filter(|x| x.1 == name).count();
    assert_eq!(
        (count("calc"), count("send"), count("recv"), count("wait")),
        (n, 2 * n, 2 * n, 2 * n)
    );
    assert_eq!(count("rendezvous"), 0);
    // Per rank: its CPU and two lanes of waits.
    assert_eq!(d.tracks.len(), 3 * n);
    assert_eq!(d.tracks.iter().filter(|t| t.1 == "waits 1").count(), n);
    let (mut out, mut inn) = (d.flows_out.clone(), d.flows_in.clone());
    out.sort_unstable();
    inn.sort_unstable();
    out.dedup();
    assert_eq!((out.len(), out), (2 * n, inn));
}

#[test]
fn the_timeline_counts_what_the_engine_did() {
    let s = parse(
        "num_ranks 2\nrank 0 {\nl1: send 8b to 1 tag 0\nl2: calc 10000\nl3: send 8b to 1 tag 0\n\
         l2 requires l1\nl3 requires l2\n}\n\
         rank 1 {\nl1: recv 8b from 0 tag 0\nl2: recv 8b from 0 tag 0\nl2 requires l1\n}\n",
    );
    let (_, t) = simulate_traced(&s, &Params::default(), None);
    assert_eq!(t.flows(), 2);
    let waits = t
        .slices
        .iter()
        .filter(|x| x.kind == SliceKind::Wait)
        .count();
    // Rank 1's first receive is posted at 0 and waits to 4000; its second
    // is issued when the first message's CPU time ends (5542), and waits
    // for the second message (sent at 11500, arriving at 15500).
    assert_eq!(waits, 2);
    let second = t
        .slices
        .iter()
        .filter(|x| x.kind == SliceKind::Wait)
        .nth(1)
        .unwrap();
    assert_eq!((second.begin, second.end), (5542, 15500));
}
