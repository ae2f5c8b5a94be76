//! When a rank writes its buffer: the flush policies, and the seam after
//! every collective where the synchronized ones act.
//!
//! - `memory`: never before the end; a full buffer drops further events
//!   (counted, reported at exit, written in the end block).
//! - `local`: each rank writes its buffer when it is full, on its own, as
//!   common tracers do. Simple and lossless, but a rank writing its trace
//!   delays the ranks waiting on it (indirect perturbation), which is what
//!   the synchronized policies avoid.
//!
//! The next policy, `equalized` (issue 20), acts in [`after_collective`]:
//! every rank is there right after a collective, so all can decide
//! together (an allreduce of "my buffer is past its threshold") to write
//! and then each wait out the same suspension Z. Its steps will be listed
//! here; until it exists, asking for it is refused at start.

/// When buffers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Only at the end.
    Memory,
    /// By each rank, when its buffer is full.
    Local,
}

impl Policy {
    /// The policy when `MTTL_TRACE_FLUSH` is unset: `local`, the one that
    /// loses nothing, until `equalized` takes its place.
    pub(crate) const DEFAULT: Policy = Policy::Local;

    /// The policy `MTTL_TRACE_FLUSH` names.
    pub(crate) fn parse(s: &str) -> Result<Policy, String> {
        match s {
            "memory" => Ok(Policy::Memory),
            "local" => Ok(Policy::Local),
            "equalized" | "static" => Err(format!(
                "the {s} policy is not built yet; use memory or local"
            )),
            _ => Err("expected memory or local".to_owned()),
        }
    }

    /// The code the file header stores.
    pub(crate) fn code(self) -> u8 {
        match self {
            Policy::Memory => 1,
            Policy::Local => 2,
        }
    }
}

/// Called by every collective right after it returns, on every rank.
/// `memory` and `local` never write here (they have no reason to wait for
/// the other ranks); the synchronized policies will.
#[inline]
pub(crate) fn after_collective() {
    if !super::on() {
        return;
    }
    match super::policy() {
        Some(Policy::Memory | Policy::Local) | None => {}
    }
}
