//! Input formats, each a parser that fills a [`ScheduleBuilder`].
//!
//! Every format ends in the same [`Schedule`], so the engine never knows where
//! a schedule came from. To add one (the trace tool's time-independent
//! export is next): write `input/<format>.rs` with a `parse(file, bytes)`
//! that calls `begin_rank`/`add_op`/`add_dep`/`end_rank` and reports errors
//! with file and line, then teach [`load`] to recognise it.
//!
//! [`ScheduleBuilder`]: crate::schedule::ScheduleBuilder

pub mod goal;

use std::path::Path;

use crate::error::SimError;
use crate::schedule::Schedule;

/// Reads the schedule in `path`. GOAL text is the only format so far.
pub fn load(path: &Path) -> Result<Schedule, SimError> {
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    Ok(goal::parse(path, &bytes)?)
}
