//! The reader of mttl traces and the `mttl-trace` tool's commands.
//!
//! A traced run (`MTTL_TRACE=DIR`) leaves one file per rank in `DIR`;
//! [`read_dir`] reads them all, checks that they are one run's (same job,
//! same format version, every rank once) and gives each rank's events in
//! the order they were recorded. A rank that was killed, or whose disk
//! filled, is read up to its last complete block and says where it ends;
//! corrupted bytes are an error naming the file and the offset. The byte
//! layout is `mttl_core::trace::format` (and `docs/trace-format.md`).
//!
//! [`TraceFiles`] does the same block by block, for traces larger than
//! memory (`info`, `stats`, `reconstruct`, `check`, `timeline`).
//!
//! Files: `read` (files and blocks), `stream` (the commands block by
//! block), `report` (`info` and `stats`),
//! `clock` (offsets and suspensions), `analysis` (`timeline`,
//! `reconstruct`, `check`), `export` (Perfetto and OTF2), [`pairing`]
//! (each message with its receive), [`ti`] (the time-independent export),
//! [`scale`] (pseudo traces of larger jobs from a kernel's skeleton).

mod analysis;
mod clock;
mod export;
pub mod pairing;
mod read;
mod report;
pub mod scale;
mod stream;
pub mod ti;

pub use analysis::{
    check, check_json, check_report, kept_in_reconstruction, pair_messages, reconstruct,
    reconstruct_json, reconstruct_report, reconstruction_json, reconstruction_text, timeline,
    Check, MessagePair, Messages, ReconstructedRank, Reconstruction, RegionTime,
};
pub use clock::{is_tracing, Clocks};
pub use export::otf2::{export_otf2, otf2_dir_usable, OTF2_BUILT};
pub use export::perfetto::{export_perfetto, proto as perfetto_proto};
pub use export::{ExportError, ExportOptions, ExportSummary};
pub use read::{
    open_dir, parse, read_dir, read_file, Ending, FileReader, RankReader, RankTrace, ReadError,
    Trace, MAX_PAYLOAD,
};
pub use report::{info, stats};
pub use stream::{TimelineError, TraceFiles, TIMELINE_RUN};
pub use ti::{TiOp, TiTrace};
