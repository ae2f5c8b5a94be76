//! `mttl-trace export` on a recorded run of three ranks, on every
//! backend: the
//! Perfetto file decodes with the exporter's messages and with an
//! independent decoder (`protoc --decode_raw`, Debian's
//! protobuf-compiler), with a process per rank, the program's slices at
//! the reader's times on rank 0's clock, and one flow per paired message;
//! the OTF2 archive (cargo feature `otf2` of mttl-trace, on in the
//! `--all-features` suite) reads back with `otf2-print`, with every
//! rank's regions, its collectives and its messages. Without the feature
//! the OTF2 export says how to build it.
//!
//! See `runtime_support` for how the job runs.

mod runtime_support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Command;

use mttl::GlobalArray;
use mttl_core::trace::format::Kind;
use mttl_trace::perfetto_proto as proto;
use mttl_trace::{Clocks, ExportOptions, Trace};
use prost::Message;
use runtime_support::{on_every_backend, Scenario};

on_every_backend!(exports_of_a_recorded_run_read_back);

const RANKS: usize = 3;
const ITERATIONS: u64 = 4;

#[mttl::remote]
fn checksum(data: Vec<u8>) -> u64 {
    data.iter().map(|&b| u64::from(b)).sum()
}

#[mttl::remote]
fn barrier_everywhere() {
    mttl::barrier();
}

#[mttl::remote]
fn sum_everywhere() -> u64 {
    mttl::allreduce_sum(1u64)
}

thread_local! {
    static MINE: std::cell::RefCell<Option<GlobalArray<u64>>> = const { std::cell::RefCell::new(None) };
}

#[mttl::remote]
fn share() -> mttl::GlobalPtr<u64> {
    let a = GlobalArray::<u64>::new(1);
    let p = a.global_ptr();
    MINE.with(|m| *m.borrow_mut() = Some(a));
    p
}

/// Per iteration, in a region: a call with a large argument (a headed
/// send, two messages) to every other rank, a remote write, an nwrite
/// and a fence, and a barrier everywhere; then an allreduce.
fn workload() {
    let n = mttl::size();
    let ptrs: Vec<_> = mttl::spmd(share, ());
    let data = vec![1u8; 200_000];
    for i in 0..ITERATIONS {
        let _step = mttl::trace::region("step");
        for node in 1..n {
            assert_eq!(mttl::invoke(node, checksum, (data.clone(),)), 200_000);
        }
        let target = ptrs[1 + (i as usize) % (n - 1)];
        target.write(i);
        target.nwrite(i + 1);
        mttl::fence();
        mttl::spmd(barrier_everywhere, ());
    }
    assert!(mttl::spmd(sum_everywhere, ())
        .iter()
        .all(|&s| s == n as u64));
}

/// A fresh path for one test's `what`.
fn scratch(t: &str, what: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "mttl-export-{}-{what}-{}",
        t.replace("::", "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

fn exports_of_a_recorded_run_read_back(t: Scenario) {
    let name = t.name;
    let dir = scratch(name, "trace");
    t.env("MTTL_TRACE", dir.to_str().unwrap())
        .run(RANKS, workload)
        .assert_success();
    let trace = mttl_trace::read_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    let check = mttl_trace::check(&trace);
    assert!(check.pairs > 0 && !check.failed(), "{check:?}");

    perfetto(name, &trace, check.pairs);
    otf2(name, &trace, check.pairs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rank's slices as Perfetto shows them: (name, begin, end) per rank.
type Slices = BTreeMap<usize, Vec<(String, u64, u64)>>;

fn perfetto(name: &str, trace: &Trace, pairs: u64) {
    let file = scratch(name, "perfetto").with_extension("pftrace");
    let summary = mttl_trace::export_perfetto(trace, &file, ExportOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.ranks, RANKS);
    assert_eq!(summary.flows as u64, pairs);
    assert!(summary.notes.is_empty(), "{:?}", summary.notes);
    let bytes = std::fs::read(&file).unwrap();
    let decoded = proto::Trace::decode(&bytes[..]).unwrap_or_else(|e| panic!("{e}"));

    // Tracks: a process per rank, its threads under it.
    let mut rank_of_pid = HashMap::new();
    let mut rank_of_track = HashMap::new();
    for d in decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
    {
        if let Some(p) = &d.process {
            let name = p.process_name.clone().unwrap();
            let rank: usize = name.strip_prefix("rank ").unwrap().parse().unwrap();
            rank_of_pid.insert(p.pid.unwrap(), rank);
        }
    }
    assert_eq!(rank_of_pid.len(), RANKS);
    for d in decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
    {
        if let Some(th) = &d.thread {
            rank_of_track.insert(d.uuid.unwrap(), rank_of_pid[&th.pid.unwrap()]);
        }
    }
    for d in decoded
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref())
    {
        if let Some(parent) = d.parent_uuid {
            rank_of_track.insert(d.uuid.unwrap(), rank_of_track[&parent]);
        }
    }

    // Slices, rebuilt per track from begin and end; flows.
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut slices = Slices::new();
    let (mut starts, mut ends) = (HashMap::new(), HashMap::new());
    for p in &decoded.packet {
        let Some(e) = &p.track_event else { continue };
        let (ts, track) = (p.timestamp.unwrap(), e.track_uuid.unwrap());
        let rank = rank_of_track[&track];
        for &f in &e.flow_ids {
            assert!(starts.insert(f, rank).is_none(), "flow {f} starts twice");
        }
        for &f in &e.terminating_flow_ids {
            assert!(ends.insert(f, rank).is_none(), "flow {f} ends twice");
        }
        match e.r#type.unwrap() {
            proto::TYPE_SLICE_BEGIN => open
                .entry(track)
                .or_default()
                .push((e.name.clone().unwrap(), ts)),
            proto::TYPE_SLICE_END => {
                let (name, b) = open.get_mut(&track).unwrap().pop().unwrap();
                assert!(b <= ts, "{name} ends before it begins");
                slices.entry(rank).or_default().push((name, b, ts));
            }
            _ => {}
        }
    }
    assert!(open.values().all(Vec::is_empty), "slices left open");
    assert_eq!(starts.len() as u64, pairs);
    assert_eq!(
        starts.keys().collect::<std::collections::BTreeSet<_>>(),
        ends.keys().collect()
    );
    // Each flow joins two different ranks.
    assert!(starts.iter().all(|(f, r)| ends[f] != *r));

    // Timestamps: the reader's events moved to rank 0's clock.
    let clocks = Clocks::of(trace);
    for (rank, r) in trace.ranks.iter().enumerate() {
        let want = |kind: Kind| -> Vec<(u64, u64)> {
            let mut v: Vec<(u64, u64)> = r
                .events
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| (clocks.on_rank0(rank, e.begin), clocks.on_rank0(rank, e.end)))
                .map(|(b, e)| (b, e.max(b)))
                .collect();
            v.sort_unstable();
            v
        };
        let got = |name: &str| -> Vec<(u64, u64)> {
            let mut v: Vec<(u64, u64)> = slices[&rank]
                .iter()
                .filter(|s| s.0 == name)
                .map(|s| (s.1, s.2))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(got("fence"), want(Kind::Fence), "rank {rank}");
        assert_eq!(got("recv_any"), want(Kind::RecvAny), "rank {rank}");
        let barriers = got("barrier");
        assert_eq!(barriers.len() as u64, ITERATIONS, "rank {rank}");
        let enters: Vec<u64> = r
            .events
            .iter()
            .filter(|e| e.kind == Kind::CollEnter && r.name(e.a) == "barrier")
            .map(|e| clocks.on_rank0(rank, e.end))
            .collect();
        assert_eq!(barriers.iter().map(|b| b.0).collect::<Vec<_>>(), enters);
        if rank == 0 {
            assert_eq!(got("step").len() as u64, ITERATIONS);
        } else {
            let served = slices[&rank]
                .iter()
                .filter(|s| s.0.starts_with("serve ") && s.0.ends_with("checksum"))
                .count();
            assert_eq!(served as u64, ITERATIONS, "rank {rank}");
        }
    }

    // An independent decoder reads the same structure.
    let out = Command::new("protoc")
        .arg("--decode_raw")
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run protoc ({e}): install protobuf-compiler (scripts/lib/install-deps.sh does)")
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let fields = |n: &str| {
        text.lines()
            .filter(|l| l.trim_start().starts_with(n))
            .count()
    };
    assert_eq!(fields("47: ") as u64, pairs, "flow_ids");
    assert_eq!(fields("48: ") as u64, pairs, "terminating_flow_ids");
    assert_eq!(
        fields("60 {"),
        decoded
            .packet
            .iter()
            .filter(|p| p.track_descriptor.is_some())
            .count()
    );
    assert_eq!(
        fields("11 {"),
        decoded
            .packet
            .iter()
            .filter(|p| p.track_event.is_some())
            .count()
    );
    let _ = std::fs::remove_file(&file);
}

fn otf2(name: &str, trace: &Trace, pairs: u64) {
    let dir = scratch(name, "otf2");
    let result = mttl_trace::export_otf2(trace, &dir, ExportOptions::default());
    if !mttl_trace::OTF2_BUILT {
        let e = result.unwrap_err().to_string();
        assert!(e.contains("--features otf2"), "{e}");
        return;
    }
    result.unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("otf2-print")
        .arg(dir.join("traces.otf2"))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run otf2-print ({e}): install otf2-tools (scripts/lib/install-deps.sh does)")
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Event lines: EVENT LOCATION TIME ATTRIBUTES.
    let mut per_rank: BTreeMap<(u64, String), u64> = BTreeMap::new();
    let mut last_time: HashMap<u64, u64> = HashMap::new();
    // (tag, bytes) of every message sent and received.
    let (mut sent, mut received) = (Vec::new(), Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let attr = |name: &str| -> u64 {
            let at = line
                .find(name)
                .unwrap_or_else(|| panic!("no {name} in {line}"));
            let digits: String = line[at + name.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().unwrap()
        };
        if line.starts_with("MPI_SEND ") {
            sent.push((attr("Tag: "), attr("Length: ")));
        } else if line.starts_with("MPI_RECV ") {
            received.push((attr("Tag: "), attr("Length: ")));
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(event), Some(loc), Some(time)) = (w.first(), w.get(1), w.get(2)) else {
            continue;
        };
        let (Ok(loc), Ok(time)) = (loc.parse::<u64>(), time.parse::<u64>()) else {
            continue;
        };
        let prev = last_time.insert(loc, time).unwrap_or(0);
        assert!(prev <= time, "location {loc} goes back in time: {line}");
        *per_rank.entry((loc, (*event).to_owned())).or_default() += 1;
    }
    let count = |loc: u64, e: &str| per_rank.get(&(loc, e.to_owned())).copied().unwrap_or(0);
    let total = |e: &str| (0..RANKS as u64 + 64).map(|l| count(l, e)).sum::<u64>();
    assert_eq!(total("MPI_SEND"), pairs);
    assert_eq!(total("MPI_RECV"), pairs);
    let mut messages: Vec<(u64, u64)> = mttl_trace::pair_messages(trace)
        .pairs
        .iter()
        .map(|p| (p.tag, trace.ranks[p.recv.0].events[p.recv.1].b))
        .collect();
    for v in [&mut sent, &mut received, &mut messages] {
        v.sort_unstable();
    }
    assert_eq!(sent, messages, "MPI_SEND (tag, length)");
    assert_eq!(received, messages, "MPI_RECV (tag, length)");
    for (rank, r) in trace.ranks.iter().enumerate() {
        let loc = rank as u64;
        assert!(count(loc, "ENTER") > 0, "rank {rank}: {per_rank:?}");
        assert_eq!(count(loc, "ENTER"), count(loc, "LEAVE"), "rank {rank}");
        let colls = r.events.iter().filter(|e| e.kind == Kind::CollExit).count() as u64;
        assert_eq!(count(loc, "MPI_COLLECTIVE_BEGIN"), colls, "rank {rank}");
        assert_eq!(count(loc, "MPI_COLLECTIVE_END"), colls, "rank {rank}");
        assert!(
            count(loc, "MPI_SEND") > 0 && count(loc, "MPI_RECV") > 0,
            "rank {rank}"
        );
    }
    // The definitions: clock in ns, a location group per rank.
    let defs = Command::new("otf2-print")
        .args(["-G".as_ref(), dir.join("traces.otf2").as_os_str()])
        .output()
        .unwrap();
    let defs = String::from_utf8_lossy(&defs.stdout);
    assert!(defs.contains("Ticks per Seconds: 1000000000"), "{defs}");
    assert_eq!(
        defs.lines()
            .filter(|l| l.starts_with("LOCATION_GROUP"))
            .count(),
        RANKS
    );
    // A second export into the same directory is refused.
    let again = mttl_trace::export_otf2(trace, &dir, ExportOptions::default()).unwrap_err();
    assert!(again.to_string().contains("not empty"), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}
