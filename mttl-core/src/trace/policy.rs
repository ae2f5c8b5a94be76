//! When a rank writes its buffer: the flush policies, and the seam after
//! every collective where the synchronized ones act.
//!
//! - `equalized` (the default): right after a collective, every rank
//!   decides with the others whether any buffer is past its threshold; if
//!   so all write together and then each is suspended for the same time Z,
//!   computed from the ranks' clocks (the protocol's steps are in
//!   `coll/suspension.rs`, which needs collectives this layer cannot
//!   import). The ranks' relative timing is kept, and the suspensions can
//!   be subtracted afterwards (`mttl-trace reconstruct`).
//! - `static:LONG,SHORT`: the same vote after every collective, then a
//!   fixed suspension, LONG when the ranks write and SHORT otherwise.
//! - `local`: each rank writes its buffer when it is full, on its own, as
//!   common tracers do. Simple and lossless, but a rank writing its trace
//!   delays the ranks waiting on it (indirect perturbation), which is what
//!   the synchronized policies avoid.
//! - `memory`: never before the end; a full buffer drops further events
//!   (counted, reported at exit, written in the end block).
//!
//! Under a synchronized policy a buffer that fills with no collective in
//! sight is written at once by its rank alone (a `Flush` of cause
//! `Fallback`), counted and reported at exit.

use std::time::Duration;

/// When buffers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Only at the end.
    Memory,
    /// By each rank, when its buffer is full.
    Local,
    /// By every rank together after a collective, then an equal
    /// suspension computed from the clocks.
    Equalized,
    /// By every rank together after a collective, then a fixed
    /// suspension: `long` (ns) after a write, `short` otherwise.
    Static {
        /// The suspension when the ranks wrote, ns.
        long: u64,
        /// The suspension after every other collective, ns.
        short: u64,
    },
}

impl Policy {
    /// The policy when `MTTL_TRACE_FLUSH` is unset.
    pub(crate) const DEFAULT: Policy = Policy::Equalized;

    /// The policy `MTTL_TRACE_FLUSH` names.
    pub(crate) fn parse(s: &str) -> Result<Policy, String> {
        const EXPECTED: &str = "expected equalized, static:LONG,SHORT (e.g. static:20ms,0), \
                                local or memory";
        match s {
            "memory" => Ok(Policy::Memory),
            "local" => Ok(Policy::Local),
            "equalized" => Ok(Policy::Equalized),
            _ => {
                let Some(times) = s.strip_prefix("static:") else {
                    return Err(EXPECTED.to_owned());
                };
                let Some((long, short)) = times.split_once(',') else {
                    return Err(format!("static needs two times, LONG,SHORT: {EXPECTED}"));
                };
                let long = parse_duration(long)?;
                let short = parse_duration(short)?;
                if short > long {
                    return Err(format!(
                        "static:{times}: SHORT (after a collective without a write) is longer \
                         than LONG (after one with a write)"
                    ));
                }
                Ok(Policy::Static {
                    long: long.as_nanos() as u64,
                    short: short.as_nanos() as u64,
                })
            }
        }
    }

    /// The code the file header stores.
    pub(crate) fn code(self) -> u8 {
        match self {
            Policy::Memory => 1,
            Policy::Local => 2,
            Policy::Equalized => 3,
            Policy::Static { .. } => 4,
        }
    }

    /// Whether the ranks write together after collectives.
    pub(crate) fn synchronized(self) -> bool {
        matches!(self, Policy::Equalized | Policy::Static { .. })
    }
}

/// A time such as `20ms`, `1.5s`, `300us`, `0` (ns without a unit), at
/// most an hour.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{t:?} is not a time such as 20ms, 1.5s, 300us or 0"))?;
    let scale = match unit {
        "" | "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        other => {
            return Err(format!(
                "unknown time unit {other:?} in {t:?}: use ns, us, ms or s"
            ))
        }
    };
    let secs = v * scale;
    if !(0.0..=3600.0).contains(&secs) {
        return Err(format!("{t:?}: a suspension must be between 0 and an hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// What a synchronized policy asks of the collectives' layer after a
/// collective (see [`after_collective`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// The policy in force (`Equalized` or `Static`).
    pub(crate) policy: Policy,
    /// Whether this rank's buffer is past its threshold.
    pub(crate) full: bool,
    /// Whether the clock offsets are re-measured at every suspension
    /// (`MTTL_TRACE_RESYNC=each`) or only at the first.
    pub(crate) resync_each: bool,
}

/// The seam called by every collective right after it returns, on every
/// rank: `Some` when a synchronized policy is in force and no suspension
/// is running already; the collectives' layer then runs the protocol.
/// A rank whose trace stopped (a failed write) still takes part: the
/// other ranks count on its messages.
/// `memory` and `local` never act here (they have no reason to wait for
/// the other ranks).
#[inline]
pub(crate) fn after_collective() -> Option<Due> {
    if super::suspended() {
        return None;
    }
    super::RECORDER.with(|r| {
        let g = r.try_borrow().ok()?;
        let rec = g.as_ref()?;
        rec.policy.synchronized().then(|| Due {
            policy: rec.policy,
            full: rec.past_threshold(),
            resync_each: rec.resync_each,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_are_named() {
        assert_eq!(Policy::parse("equalized"), Ok(Policy::Equalized));
        assert_eq!(
            Policy::parse("static:20ms,1ms"),
            Ok(Policy::Static {
                long: 20_000_000,
                short: 1_000_000
            })
        );
        assert_eq!(
            Policy::parse("static:1.5s,0"),
            Ok(Policy::Static {
                long: 1_500_000_000,
                short: 0
            })
        );
        assert!(Policy::parse("static:1ms,2ms")
            .unwrap_err()
            .contains("SHORT"));
        assert!(Policy::parse("static:1ms")
            .unwrap_err()
            .contains("two times"));
        assert!(Policy::parse("static:1h,0").unwrap_err().contains("unit"));
        assert!(Policy::parse("eq").unwrap_err().contains("expected"));
    }
}
