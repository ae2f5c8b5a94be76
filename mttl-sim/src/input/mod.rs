//! Input formats, each a parser that fills a [`ScheduleBuilder`].
//!
//! Every format ends in the same [`Schedule`], so the engine never knows where
//! a schedule came from: [`goal`] reads LogGOPSim's GOAL text, [`ti`] a
//! directory of time-independent traces. To add one: write `input/<format>.rs` with a `parse(file, bytes)`
//! that calls `begin_rank`/`add_op`/`add_dep`/`end_rank` and reports errors
//! with file and line, then teach [`load`] to recognise it.
//!
//! [`ScheduleBuilder`]: crate::schedule::ScheduleBuilder

pub mod goal;
pub mod ti;

use std::path::Path;

use crate::error::SimError;
use crate::schedule::Schedule;

/// Reads the schedule in `path`: a directory of TI traces, or a GOAL file.
pub fn load(path: &Path) -> Result<Schedule, SimError> {
    if path.is_dir() {
        return ti::load_dir(path);
    }
    let bytes = std::fs::read(path).map_err(|source| SimError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    Ok(goal::parse(path, &bytes)?)
}
