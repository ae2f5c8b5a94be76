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
//! Files: `read` (files and blocks), `report` (`info` and `stats`),
//! `clock` (offsets and suspensions), `analysis` (`timeline`,
//! `reconstruct`, `check`).

mod analysis;
mod clock;
mod read;
mod report;

pub use analysis::{
    check, check_json, check_report, reconstruct, reconstruct_json, reconstruct_report, timeline,
    Check, ReconstructedRank, Reconstruction, RegionTime,
};
pub use clock::{is_tracing, Clocks};
pub use read::{parse, read_dir, read_file, Ending, RankTrace, ReadError, Trace};
pub use report::{info, stats};
