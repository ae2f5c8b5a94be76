//! `export --perfetto FILE`: the scene in Perfetto's protobuf trace format
//! (a `Trace` of `TracePacket`s holding `TrackDescriptor`s and
//! `TrackEvent`s), which ui.perfetto.dev and Perfetto's trace processor
//! open.
//!
//! Layout of the file:
//! 1. Per rank a process track (pid 1000 + rank, named `rank R`); per
//!    track of the scene a thread track under it (the rank's own track is
//!    its main thread, tid = pid; mttl threads get tids from 10,000,000
//!    up); per extra lane a child track of its thread's track, named
//!    `… (overlapping N)`.
//!    The descriptors are on packet sequence 1, timestamped at the run's
//!    first time.
//! 2. Per lane one packet sequence (its own `trusted_packet_sequence_id`,
//!    the first packet marking the sequence's state cleared): slices as
//!    `TYPE_SLICE_BEGIN` / `TYPE_SLICE_END`, instants as `TYPE_INSTANT`,
//!    each with a category and its arguments as debug annotations.
//! 3. Each message is a flow: its id in the send slice's `flow_ids` and in
//!    the receive slice's `terminating_flow_ids`.
//! 4. The descriptors come first, then the events of all lanes merged in
//!    timestamp order (ns on the scene's clock, rank 0's CLOCK_MONOTONIC),
//!    ties by sequence; the file is written packet by packet.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use mttl_perfetto::{descriptor_packet, Writer, SEQ_INCREMENTAL_STATE_CLEARED};

use super::{scene, walk, Arg, ExportError, ExportOptions, ExportSummary, Item, Scene, Step};
use crate::read::Trace;

/// Perfetto's trace messages (crate `mttl-perfetto`, shared with
/// `mttl-sim --perfetto`).
pub use mttl_perfetto::proto;

use proto::{
    DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
    TYPE_INSTANT, TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};

/// Writes `t` to `path` in Perfetto's format.
pub fn export_perfetto(
    t: &Trace,
    path: &Path,
    opts: ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let io = |source| ExportError::Io {
        path: path.to_owned(),
        source,
    };
    let s = scene(t, opts);
    let mut out = BufWriter::new(File::create(path).map_err(io)?);
    write(&s, &mut out).map_err(io)?;
    out.flush().map_err(io)?;
    Ok(s.summary())
}

/// The pid of a rank's process.
fn pid(rank: usize) -> i32 {
    i32::try_from(1000 + rank).unwrap_or(i32::MAX)
}

/// One lane to write: its track and sequence, its steps in time order.
struct Lane<'a> {
    track: u64,
    rank: usize,
    sequence: u32,
    steps: Vec<(u64, Step<'a>)>,
}

/// Writes the scene as Perfetto's `Trace` (the module's steps), packet
/// by packet: the descriptors, then the lanes' events merged in time
/// order, so that memory holds the steps' times, not the packets.
pub(crate) fn write(s: &Scene, out: &mut impl Write) -> io::Result<()> {
    let mut out_flows: HashMap<(usize, usize), Vec<u64>> = HashMap::new();
    let mut in_flows: HashMap<(usize, usize), Vec<u64>> = HashMap::new();
    for f in &s.flows {
        out_flows.entry(f.send).or_default().push(f.id);
        in_flows.entry(f.recv).or_default().push(f.id);
    }
    let (first, _) = s.span();
    let mut w = Writer::new(out);
    let mut lanes: Vec<Lane<'_>> = Vec::new();
    let mut next_tid: i64 = 10_000_000;
    let mut next_uuid: u64 = 1;
    let mut uuid = || {
        next_uuid += 1;
        next_uuid
    };
    for (rank, r) in s.ranks.iter().enumerate() {
        let process = uuid();
        let d = TrackDescriptor {
            uuid: Some(process),
            process: Some(ProcessDescriptor {
                pid: Some(pid(rank)),
                process_name: Some(format!("rank {rank}")),
            }),
            ..TrackDescriptor::default()
        };
        w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
        for track in &r.tracks {
            let tid = match track.thread {
                None => i64::from(pid(rank)),
                Some(_) => {
                    next_tid += 1;
                    next_tid
                }
            };
            let thread = uuid();
            let d = TrackDescriptor {
                uuid: Some(thread),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid(rank)),
                    tid: Some(tid),
                    thread_name: Some(track.name.clone()),
                }),
                ..TrackDescriptor::default()
            };
            w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
            for (n, lane) in track.lanes.iter().enumerate() {
                let on = if n == 0 {
                    thread
                } else {
                    let child = uuid();
                    let d = TrackDescriptor {
                        uuid: Some(child),
                        parent_uuid: Some(thread),
                        name: Some(format!("{} (overlapping {n})", track.name)),
                        ..TrackDescriptor::default()
                    };
                    w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
                    child
                };
                let mut steps = Vec::with_capacity(lane.len() * 2);
                walk(lane, |step| {
                    let ts = match step {
                        Step::Begin(it) | Step::Instant(it) => it.begin,
                        Step::End(it) => it.end,
                    };
                    steps.push((ts, step));
                });
                lanes.push(Lane {
                    track: on,
                    rank,
                    sequence: DESCRIPTORS + 1 + lanes.len() as u32,
                    steps,
                });
            }
        }
    }
    // Merge the lanes (each in time order) by time, then sequence.
    let mut next = vec![0usize; lanes.len()];
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = lanes
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.steps.first().map(|&(ts, _)| Reverse((ts, i))))
        .collect();
    while let Some(Reverse((ts, i))) = heap.pop() {
        let lane = &lanes[i];
        let k = next[i];
        let (_, ev) = track_event(
            lane.steps[k].1,
            lane.track,
            lane.rank,
            &out_flows,
            &in_flows,
        );
        let packet = TracePacket {
            timestamp: Some(ts),
            trusted_packet_sequence_id: Some(lane.sequence),
            sequence_flags: (k == 0).then_some(SEQ_INCREMENTAL_STATE_CLEARED),
            track_event: Some(ev),
            track_descriptor: None,
        };
        w.packet(&packet)?;
        next[i] += 1;
        if let Some(&(ts, _)) = lane.steps.get(k + 1) {
            heap.push(Reverse((ts, i)));
        }
    }
    Ok(())
}

/// The packet sequence of the descriptors; lanes take the next ones.
const DESCRIPTORS: u32 = 1;

/// The event of one step of a lane, and its time.
fn track_event(
    step: Step<'_>,
    track: u64,
    rank: usize,
    out_flows: &HashMap<(usize, usize), Vec<u64>>,
    in_flows: &HashMap<(usize, usize), Vec<u64>>,
) -> (u64, TrackEvent) {
    let described = |it: &Item, kind| {
        let flows = |m: &HashMap<(usize, usize), Vec<u64>>| {
            it.event
                .and_then(|e| m.get(&(rank, e)))
                .cloned()
                .unwrap_or_default()
        };
        TrackEvent {
            r#type: Some(kind),
            track_uuid: Some(track),
            name: Some(it.name.clone()),
            categories: vec![it.category.name().to_owned()],
            debug_annotations: it.args.iter().map(annotation).collect(),
            flow_ids: flows(out_flows),
            terminating_flow_ids: flows(in_flows),
        }
    };
    match step {
        Step::Begin(it) => (it.begin, described(it, TYPE_SLICE_BEGIN)),
        Step::Instant(it) => (it.begin, described(it, TYPE_INSTANT)),
        Step::End(it) => (
            it.end,
            TrackEvent {
                r#type: Some(TYPE_SLICE_END),
                track_uuid: Some(track),
                ..TrackEvent::default()
            },
        ),
    }
}

fn annotation((name, value): &(&'static str, Arg)) -> DebugAnnotation {
    let mut a = DebugAnnotation {
        name: Some((*name).to_owned()),
        ..DebugAnnotation::default()
    };
    match value {
        Arg::Uint(v) => a.uint_value = Some(*v),
        Arg::Int(v) => a.int_value = Some(*v),
        Arg::Text(v) => a.string_value = Some(v.clone()),
    }
    a
}
