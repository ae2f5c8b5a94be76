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
//!    runs) go to further lanes of their thread ([`lanes::lay_out`]).
//! 5. Messages: [`pair_messages`] (the pairing `check` uses) pairs every
//!    send with its receive; a pair whose two events are both in the scene
//!    becomes a [`Flow`].
//!
//! A rank whose file ends early (killed, or a write failed) is exported up
//! to its last complete block, with an instant saying where it ends and a
//! note for the user.

mod items;
mod lanes;
pub(crate) mod otf2;
pub(crate) mod perfetto;
#[cfg(test)]
mod tests;
mod threads;

use std::path::PathBuf;

use crate::analysis::{kept_in_reconstruction, pair_messages};
use crate::clock::Clocks;
use crate::read::Trace;

pub(crate) use items::rank_tracks;
pub(crate) use lanes::{walk, Step};
use threads::{thread_mark, ThreadMark};

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
        let (first, last) = self.span();
        let mut s = ExportSummary {
            ranks: self.ranks.len(),
            flows: self.flows.len(),
            span: last - first,
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
