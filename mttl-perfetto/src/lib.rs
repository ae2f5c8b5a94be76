//! Perfetto's trace format, the part mttl writes: a `Trace` of
//! `TracePacket`s holding `TrackDescriptor`s (processes, threads, named
//! tracks) and `TrackEvent`s (slices, instants, flows), which
//! ui.perfetto.dev and Perfetto's trace processor open.
//!
//! [`proto`] holds the messages, with the field numbers of Perfetto's
//! published schema; [`Writer`] appends packets to a file one at a time, so
//! that a writer never holds the whole trace. Both `mttl-trace export
//! --perfetto` (a recorded run) and `mttl-sim --perfetto` (a simulated one)
//! write through them; how each lays out its tracks is its own module's
//! business.

use std::io::{self, Write};

use prost::Message;

/// Perfetto's trace messages, the few fields mttl writes, with
/// the field numbers of Perfetto's published schema
/// (`protos/perfetto/trace/trace.proto`, `trace_packet.proto`,
/// `track_event/track_event.proto`, `track_descriptor.proto`,
/// `process_descriptor.proto`, `thread_descriptor.proto`,
/// `debug_annotation.proto`). Decoding a file with them ignores the
/// fields they leave out.
pub mod proto {
    /// A whole trace file.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Trace {
        /// The packets.
        #[prost(message, repeated, tag = "1")]
        pub packet: Vec<TracePacket>,
    }

    /// One packet: a track's description or an event on a track.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        /// ns, on the trace's clock.
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        /// The writer's sequence.
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        /// `SEQ_INCREMENTAL_STATE_CLEARED` (1) on a sequence's first packet.
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        /// An event.
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<TrackEvent>,
        /// A track.
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
    }

    /// A track: a process, a thread, or a named child track.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        /// The id events refer to.
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        /// The track this one is under.
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        /// The name of a track that is neither process nor thread.
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        /// Set for a process track.
        #[prost(message, optional, tag = "3")]
        pub process: Option<ProcessDescriptor>,
        /// Set for a thread track.
        #[prost(message, optional, tag = "4")]
        pub thread: Option<ThreadDescriptor>,
    }

    /// A process.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessDescriptor {
        /// Its pid.
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        /// Its name.
        #[prost(string, optional, tag = "6")]
        pub process_name: Option<String>,
    }

    /// A thread.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ThreadDescriptor {
        /// Its process's pid.
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        /// Its tid.
        #[prost(int64, optional, tag = "2")]
        pub tid: Option<i64>,
        /// Its name.
        #[prost(string, optional, tag = "5")]
        pub thread_name: Option<String>,
    }

    /// An event on a track.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEvent {
        /// One of the `TYPE_*` constants.
        #[prost(int32, optional, tag = "9")]
        pub r#type: Option<i32>,
        /// The track.
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
        /// The name (of a begin or an instant).
        #[prost(string, optional, tag = "23")]
        pub name: Option<String>,
        /// Categories.
        #[prost(string, repeated, tag = "22")]
        pub categories: Vec<String>,
        /// Arguments.
        #[prost(message, repeated, tag = "4")]
        pub debug_annotations: Vec<DebugAnnotation>,
        /// Flows that leave this event.
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub flow_ids: Vec<u64>,
        /// Flows that end at this event.
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub terminating_flow_ids: Vec<u64>,
    }

    /// `TrackEvent.type`: a slice begins.
    pub const TYPE_SLICE_BEGIN: i32 = 1;
    /// `TrackEvent.type`: the innermost open slice ends.
    pub const TYPE_SLICE_END: i32 = 2;
    /// `TrackEvent.type`: an instant.
    pub const TYPE_INSTANT: i32 = 3;

    /// A named argument.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DebugAnnotation {
        /// Its name.
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
        /// An unsigned value.
        #[prost(uint64, optional, tag = "3")]
        pub uint_value: Option<u64>,
        /// A signed value.
        #[prost(int64, optional, tag = "4")]
        pub int_value: Option<i64>,
        /// A text value.
        #[prost(string, optional, tag = "6")]
        pub string_value: Option<String>,
    }
}

use proto::{TracePacket, TrackDescriptor};

/// `TracePacket.sequence_flags` on a sequence's first packet: the reader
/// starts the sequence's incremental state afresh.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

/// Writes a `Trace` packet by packet: each [`Writer::packet`] appends the
/// bytes of one `Trace.packet` entry (field 1, length-delimited), so that
/// the file, whenever it is closed, is one `Trace` message.
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> Writer<W> {
    /// A writer that appends to `out` (buffer it: packets are small).
    pub fn new(out: W) -> Self {
        Writer {
            out,
            buf: Vec::new(),
        }
    }

    /// Appends one packet.
    pub fn packet(&mut self, p: &TracePacket) -> io::Result<()> {
        self.buf.clear();
        self.buf.push(0x0a);
        p.encode_length_delimited(&mut self.buf)
            .map_err(|e| io::Error::other(e.to_string()))?;
        self.out.write_all(&self.buf)
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The packet of a track's descriptor on packet sequence `sequence`,
/// timestamped `ts`: at or before every event on the track, as Perfetto's
/// guide to synthetic traces recommends.
pub fn descriptor_packet(d: TrackDescriptor, ts: u64, sequence: u32) -> TracePacket {
    TracePacket {
        timestamp: Some(ts),
        trusted_packet_sequence_id: Some(sequence),
        track_descriptor: Some(d),
        ..TracePacket::default()
    }
}

#[cfg(test)]
mod tests {
    use super::proto::*;
    use super::*;

    #[test]
    fn packets_written_one_by_one_decode_as_one_trace() {
        let mut w = Writer::new(Vec::new());
        let d = TrackDescriptor {
            uuid: Some(7),
            name: Some("t".into()),
            ..TrackDescriptor::default()
        };
        w.packet(&descriptor_packet(d.clone(), 5, 1)).unwrap();
        let ev = TracePacket {
            timestamp: Some(9),
            trusted_packet_sequence_id: Some(2),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            track_event: Some(TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                track_uuid: Some(7),
                flow_ids: vec![3],
                ..TrackEvent::default()
            }),
            ..TracePacket::default()
        };
        w.packet(&ev).unwrap();
        let bytes = w.finish().unwrap();
        let t = Trace::decode(&bytes[..]).unwrap();
        assert_eq!(t.packet.len(), 2);
        assert_eq!(t.packet[0].track_descriptor, Some(d));
        assert_eq!(t.packet[0].timestamp, Some(5));
        assert_eq!(t.packet[1], ev);
    }
}
