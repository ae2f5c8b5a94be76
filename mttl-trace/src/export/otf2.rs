//! `export --otf2 DIR`: the scene as an OTF2 archive (`DIR/traces.otf2`,
//! its definitions and one event file per location), the format of Vampir,
//! Scalasca and TAU, written through the OTF2 library (cargo feature
//! `otf2`; Debian's libotf2-trace-dev). Without the feature the export
//! fails saying how to build it.
//!
//! The library is reached through the few functions declared by hand in
//! `ffi` below rather than bindgen: about twenty calls with plain integer
//! typedefs, fixed by OTF2's versioned ABI (3.x), so a build needs no
//! libclang and no header scan.
//!
//! What the archive holds:
//! 1. A system tree of one node (the job); per rank a location group (a
//!    process, `rank R`); per lane of each of its tracks a location (a CPU
//!    thread). Rank R's own track's first lane is location R, so the ranks'
//!    locations are 0..N; the others follow.
//! 2. One communicator (`mttl world`) over the ranks' locations, rank R
//!    being R in it.
//! 3. Per slice an `Enter` and a `Leave` of a region named as the slice
//!    (paradigm MPI for comm primitives and collectives, USER for regions,
//!    MEASUREMENT_SYSTEM for the tracer's own writes and suspensions).
//!    Instants (a call issued or answered, a thread spawned, run, blocked
//!    or exited, a clock record, a file's end) are `ParameterString`
//!    events: a string parameter per category (`mttl invoke`, `mttl
//!    thread`, `mttl trace`...) set to the instant's name at its time.
//! 4. Per message an `MpiSend` (at its send slice's begin) and an
//!    `MpiRecv` (at its receive slice's end), with tag and bytes.
//! 5. Per collective an `MpiCollectiveBegin` and `MpiCollectiveEnd` inside
//!    its region, with the operation (barrier, broadcast, reduce,
//!    allreduce) and root.
//! 6. Clock properties: ns resolution, the scene's first time as the
//!    offset, its span as the length, and rank 0's wall-clock time there.

use std::path::Path;

use super::{ExportError, ExportOptions, ExportSummary};
use crate::read::Trace;

/// Writes `t` as an OTF2 archive in `dir` (new or empty).
pub fn export_otf2(
    t: &Trace,
    dir: &Path,
    opts: ExportOptions,
) -> Result<ExportSummary, ExportError> {
    let missing = otf2_dir_usable(dir)?;
    if missing {
        std::fs::create_dir_all(dir).map_err(|source| ExportError::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    write(t, dir, opts)
}

/// Checks, before anything is written, that this build writes OTF2 and
/// that `dir` can take an archive: it is an empty directory, or does not
/// exist (then `Ok(true)`).
pub fn otf2_dir_usable(dir: &Path) -> Result<bool, ExportError> {
    if !OTF2_BUILT {
        return Err(ExportError::Otf2NotBuilt);
    }
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            Some(_) => Err(ExportError::NotEmpty(dir.to_owned())),
            None => Ok(false),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(source) => Err(ExportError::Io {
            path: dir.to_owned(),
            source,
        }),
    }
}

/// Whether this build writes OTF2 (the cargo feature `otf2`).
pub const OTF2_BUILT: bool = cfg!(feature = "otf2");

#[cfg(not(feature = "otf2"))]
fn write(_: &Trace, _: &Path, _: ExportOptions) -> Result<ExportSummary, ExportError> {
    Err(ExportError::Otf2NotBuilt)
}

#[cfg(feature = "otf2")]
use archive::write;

#[cfg(feature = "otf2")]
mod archive;
#[cfg(feature = "otf2")]
mod ffi;
