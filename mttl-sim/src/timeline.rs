//! The timeline of a simulated run, and its Perfetto file (`--perfetto`).
//!
//! While it runs, the engine records (when asked: [`crate::simulate_traced`])
//! what each rank's CPUs did and what it waited for:
//! - `calc`: a computation, on its CPU, for its duration;
//! - `send`: the CPU overhead of a send (`o + (s-1)·O`), where the
//!   message's flow starts;
//! - `recv`: the CPU overhead of a message arriving at its receiver
//!   (`o + max((s-1)·O, (s-1)·G)`), where the flow ends;
//! - `wait`: a posted receive, from when it was posted to when a message
//!   matched it; `rendezvous`: a rendezvous send, from its start to when a
//!   receive took it.
//!
//! CPU slices never overlap on one CPU (each starts once the CPU is free and
//! keeps it busy to its end); waits may overlap each other, so they are laid
//! out on as many lanes as needed.
//!
//! The file (crate `mttl-perfetto`'s messages and writer): per rank a
//! process track (pid 1000 + rank, named `rank R`), under it a thread track
//! per CPU (`cpu C`, tid 1,000,000 + rank · 256 + C) and a child track per
//! lane of waits (`waits`, `waits N`); every lane is a packet sequence of
//! its own, the descriptors one more; events in time order, each slice a
//! begin and an end with the operation's size, peer, tag and input line as
//! arguments; each message a flow whose id is its send's operation id + 1.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use mttl_perfetto::proto::{
    DebugAnnotation, ProcessDescriptor, ThreadDescriptor, TracePacket, TrackDescriptor, TrackEvent,
    TYPE_SLICE_BEGIN, TYPE_SLICE_END,
};
use mttl_perfetto::{descriptor_packet, Writer, SEQ_INCREMENTAL_STATE_CLEARED};

use crate::schedule::{OpId, OpKind, Schedule, ANY_SOURCE, ANY_TAG};

/// What a slice shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SliceKind {
    /// A computation.
    Calc,
    /// A send's CPU overhead; a flow leaves it.
    Send,
    /// A message's CPU overhead at its receiver; its flow ends there.
    Recv,
    /// A posted receive waiting for its message.
    Wait,
    /// A rendezvous send waiting for its receive.
    Rendezvous,
}

impl SliceKind {
    /// The slice's name in the file.
    pub fn name(self) -> &'static str {
        match self {
            SliceKind::Calc => "calc",
            SliceKind::Send => "send",
            SliceKind::Recv => "recv",
            SliceKind::Wait => "wait",
            SliceKind::Rendezvous => "rendezvous",
        }
    }

    /// Whether the slice is on a CPU (otherwise on the waits' lanes).
    pub fn on_cpu(self) -> bool {
        matches!(self, SliceKind::Calc | SliceKind::Send | SliceKind::Recv)
    }
}

/// One interval of one rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    /// The rank it happened on.
    pub rank: u32,
    /// The CPU, for CPU slices.
    pub cpu: u8,
    /// What it shows.
    pub kind: SliceKind,
    /// Begin and end, ns.
    pub begin: u64,
    /// End, ns (equal to `begin` for a zero-length slice).
    pub end: u64,
    /// The operation (for `recv`, the send whose message it is).
    pub op: OpId,
}

/// What the engine recorded: every slice, in the order they were made.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    /// The slices.
    pub slices: Vec<Slice>,
}

impl Timeline {
    /// Number of messages: each is a flow from a `send` to a `recv` slice.
    pub fn flows(&self) -> usize {
        self.slices
            .iter()
            .filter(|s| s.kind == SliceKind::Send)
            .count()
    }

    /// Writes the Perfetto file of the run of `s` to `path` (the module docs).
    pub fn write_perfetto(&self, s: &Schedule, path: &Path) -> io::Result<()> {
        let file = BufWriter::new(File::create(path)?);
        self.write(s, file)?.flush()
    }

    /// Writes the Perfetto trace to `out`, and gives it back.
    pub fn write<W: Write>(&self, s: &Schedule, out: W) -> io::Result<W> {
        let mut w = Writer::new(out);
        let lanes = self.lanes(s);
        let first = self.slices.iter().map(|s| s.begin).min().unwrap_or(0);
        // Descriptors: a process per rank, its CPUs, its lanes of waits.
        let ncpus = s.ncpus();
        let mut waits_of = vec![0usize; s.num_ranks()];
        for l in &lanes {
            if !l.cpu {
                waits_of[l.rank as usize] += 1;
            }
        }
        for (rank, &waits) in waits_of.iter().enumerate() {
            let pid = 1000 + rank as i32;
            let d = TrackDescriptor {
                uuid: Some(process_uuid(rank as u32)),
                process: Some(ProcessDescriptor {
                    pid: Some(pid),
                    process_name: Some(format!("rank {rank}")),
                }),
                ..TrackDescriptor::default()
            };
            w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
            for cpu in 0..ncpus {
                let d = TrackDescriptor {
                    uuid: Some(lane_uuid(rank as u32, true, cpu)),
                    thread: Some(ThreadDescriptor {
                        pid: Some(pid),
                        tid: Some(1_000_000 + rank as i64 * 256 + cpu as i64),
                        thread_name: Some(format!("cpu {cpu}")),
                    }),
                    ..TrackDescriptor::default()
                };
                w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
            }
            for n in 0..waits {
                let d = TrackDescriptor {
                    uuid: Some(lane_uuid(rank as u32, false, n)),
                    parent_uuid: Some(process_uuid(rank as u32)),
                    name: Some(if n == 0 {
                        "waits".to_string()
                    } else {
                        format!("waits {n}")
                    }),
                    ..TrackDescriptor::default()
                };
                w.packet(&descriptor_packet(d, first, DESCRIPTORS))?;
            }
        }
        // Events: each lane's begins and ends in its order (its slices do
        // not overlap), the lanes merged by time.
        let mut steps: Vec<(u64, u32, u32)> = Vec::with_capacity(self.slices.len() * 2);
        for (li, l) in lanes.iter().enumerate() {
            for k in 0..2 * l.slices.len() {
                let sl = &self.slices[l.slices[k / 2] as usize];
                let t = if k % 2 == 0 { sl.begin } else { sl.end };
                steps.push((t, li as u32, k as u32));
            }
        }
        steps.sort_unstable();
        let mut started = vec![false; lanes.len()];
        for (t, li, k) in steps {
            let lane = &lanes[li as usize];
            let sl = &self.slices[lane.slices[k as usize / 2] as usize];
            let begin = k % 2 == 0;
            let uuid = lane_uuid(lane.rank, lane.cpu, lane.index);
            let ev = if begin {
                self.begin_event(s, sl, uuid)
            } else {
                TrackEvent {
                    r#type: Some(TYPE_SLICE_END),
                    track_uuid: Some(uuid),
                    ..TrackEvent::default()
                }
            };
            let first_of_lane = !std::mem::replace(&mut started[li as usize], true);
            w.packet(&TracePacket {
                timestamp: Some(t),
                trusted_packet_sequence_id: Some(DESCRIPTORS + 1 + li),
                sequence_flags: first_of_lane.then_some(SEQ_INCREMENTAL_STATE_CLEARED),
                track_event: Some(ev),
                track_descriptor: None,
            })?;
        }
        w.finish()
    }

    /// The begin event of slice `sl` on track `uuid`, with its arguments
    /// and flow.
    fn begin_event(&self, s: &Schedule, sl: &Slice, uuid: u64) -> TrackEvent {
        let op = s.op(sl.op);
        let mut args = vec![uint("line", u64::from(s.line(sl.op)))];
        match op.kind {
            OpKind::Calc => args.push(uint("ns", op.size)),
            OpKind::Send | OpKind::Recv => {
                args.push(uint("bytes", op.size));
                let (from, to) = match op.kind {
                    OpKind::Send => (op.rank, op.peer),
                    _ => (op.peer, op.rank),
                };
                if from != ANY_SOURCE {
                    args.push(uint("from", u64::from(from)));
                }
                args.push(uint("to", u64::from(to)));
                if op.tag != ANY_TAG {
                    args.push(uint("tag", u64::from(op.tag)));
                }
            }
        }
        let flow = u64::from(sl.op) + 1;
        TrackEvent {
            r#type: Some(TYPE_SLICE_BEGIN),
            track_uuid: Some(uuid),
            name: Some(sl.kind.name().to_string()),
            categories: vec![sl.kind.name().to_string()],
            debug_annotations: args,
            flow_ids: if sl.kind == SliceKind::Send {
                vec![flow]
            } else {
                Vec::new()
            },
            terminating_flow_ids: if sl.kind == SliceKind::Recv {
                vec![flow]
            } else {
                Vec::new()
            },
        }
    }

    /// The slices laid out on lanes: one per CPU of each rank, and for
    /// waits, each on the first of its rank's lanes that is free by its
    /// begin (in begin order).
    fn lanes(&self, s: &Schedule) -> Vec<Lane> {
        let ncpus = s.ncpus();
        let mut lanes: Vec<Lane> = (0..s.num_ranks() * ncpus)
            .map(|i| Lane {
                rank: (i / ncpus) as u32,
                cpu: true,
                index: i % ncpus,
                slices: Vec::new(),
            })
            .collect();
        let mut waits: Vec<u32> = Vec::new();
        for (i, sl) in self.slices.iter().enumerate() {
            if sl.kind.on_cpu() {
                lanes[sl.rank as usize * ncpus + sl.cpu as usize]
                    .slices
                    .push(i as u32);
            } else {
                waits.push(i as u32);
            }
        }
        for l in &mut lanes {
            l.slices.sort_by_key(|&i| self.slices[i as usize].begin);
        }
        waits.sort_by_key(|&i| {
            let sl = &self.slices[i as usize];
            (sl.rank, sl.begin, i)
        });
        // Per rank, the end of each of its wait lanes so far.
        let mut ends: Vec<(u64, usize)> = Vec::new();
        let mut rank = u32::MAX;
        for i in waits {
            let sl = self.slices[i as usize];
            if sl.rank != rank {
                rank = sl.rank;
                ends.clear();
            }
            let at = match ends.iter().position(|&(end, _)| end <= sl.begin) {
                Some(k) => k,
                None => {
                    lanes.push(Lane {
                        rank,
                        cpu: false,
                        index: ends.len(),
                        slices: Vec::new(),
                    });
                    ends.push((0, lanes.len() - 1));
                    ends.len() - 1
                }
            };
            ends[at].0 = sl.end;
            lanes[ends[at].1].slices.push(i);
        }
        lanes
    }
}

/// One track's slices, which do not overlap.
#[derive(Debug)]
struct Lane {
    rank: u32,
    /// A CPU's lane (`index` is the CPU) or a lane of waits.
    cpu: bool,
    index: usize,
    slices: Vec<u32>,
}

/// The packet sequence of the descriptors; lanes take the next ones.
const DESCRIPTORS: u32 = 1;

fn process_uuid(rank: u32) -> u64 {
    (u64::from(rank) + 1) << 32
}

/// A lane's track: under its rank's, CPUs below 2^16, waits above.
fn lane_uuid(rank: u32, cpu: bool, index: usize) -> u64 {
    process_uuid(rank) + 1 + index as u64 + if cpu { 0 } else { 1 << 16 }
}

fn uint(name: &str, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.to_string()),
        uint_value: Some(v),
        ..DebugAnnotation::default()
    }
}
