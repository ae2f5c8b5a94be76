//! Calibration: the user-space wire's own cost, taken out of the latency it
//! applies, so that a message's round trip is what the profile says.
//!
//! A frame that crosses the wire pays, besides the link's latency, what a
//! real switch does not: two more veth hops, the wire's wake-up and its
//! send. `up` measures that cost and applies `profile latency - cost`:
//!
//! 1. apply the profile's latency (write [`crate::lab::WIRE_LATENCY_FILE`],
//!    `SIGHUP` the wire);
//! 2. measure the round trip between hosts 0 and 1 and this machine's own
//!    (over `lo`) side by side ([`crate::check::round_trips`]); the excess,
//!    one way, is `(lab - own) / 2 - (latency + serialization)`;
//! 3. lower the applied latency by the excess (never below 0, never above
//!    the profile's) and measure again, up to [`ROUNDS`] times, until the
//!    excess is within a quarter of `check`'s tolerance.
//!
//! Measuring at the profile's latency rather than at 0 matters: the wire
//! sleeps until just before a release, so at a latency longer than its
//! wake-up it pays none, and at 0 it pays all of it. If the cost is more
//! than the profile's latency, the wire applies 0 and the lab is slower
//! than its profile by the difference; `check` says so. Only the
//! user-space wire is calibrated: netem runs in the kernel, in the sender's
//! own path.

use std::time::Duration;

use crate::check;
use crate::error::LabError;
use crate::lab::{self, Lab};
use crate::link::Port;

/// At most this many measurements.
pub const ROUNDS: usize = 4;
/// Round trips per measurement (in batches, alternating with `lo`).
const BATCHES: usize = 3;
const PER_BATCH: usize = 300;

/// What the calibration found.
#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    /// The latency the wire applies, ns.
    pub applied_ns: u64,
    /// What was left over in the last measurement, ns one way: positive if
    /// the lab is still slower than its profile.
    pub residual_ns: i64,
}

/// A 1-byte probe's serialization at the profile's rate, ns.
pub fn probe_serialization_ns(lab: &Lab) -> u64 {
    Port::new(lab.profile.rate_bps, lab.profile.queue_bytes).serialization_ns(check::PROBE_FRAME)
}

/// Makes the wire apply `latency_ns`.
fn apply(latency_ns: u64) -> Result<(), LabError> {
    let path = lab::state_file(lab::WIRE_LATENCY_FILE);
    std::fs::write(&path, format!("{latency_ns}\n")).map_err(|e| LabError::State {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    let pid = Lab::wire_pid().ok_or_else(|| {
        LabError::Wire(
            "is not running (crashed or killed): run `mttl-netlab down`, then `up`".into(),
        )
    })?;
    // SAFETY: signalling the lab's own wire process (checked by wire_pid).
    if unsafe { libc::kill(pid, libc::SIGHUP) } != 0 {
        return Err(LabError::Wire(format!(
            "cannot be told its new latency: {}",
            std::io::Error::last_os_error()
        )));
    }
    // The wire rereads the file at its next turn, within a poll's sleep.
    std::thread::sleep(Duration::from_millis(20));
    Ok(())
}

/// Runs the calibration's steps on the lab that is up (user-space wire).
pub fn calibrate(lab: &Lab) -> Result<Calibration, LabError> {
    let latency = lab.profile.latency.as_nanos() as i64;
    let one_way = latency + probe_serialization_ns(lab) as i64;
    let mut applied = latency;
    let mut residual = 0;
    apply(applied as u64)?;
    for _ in 0..ROUNDS {
        let (own, rtt) = check::round_trips(0, 1, BATCHES, PER_BATCH)?;
        let own = own.median().as_nanos() as i64;
        let expected = 2 * one_way + own;
        residual = (rtt.median().as_nanos() as i64 - expected) / 2;
        let good_enough = residual.abs() as f64 <= check::TOLERANCE / 4.0 * expected as f64;
        let next = next_applied(applied, residual, latency);
        if good_enough || next == applied {
            break;
        }
        applied = next;
        apply(applied as u64)?;
    }
    Ok(Calibration {
        applied_ns: applied as u64,
        residual_ns: residual,
    })
}

/// Step 3: the latency to apply next, from the one applied and the excess
/// measured with it (ns, one way).
fn next_applied(applied: i64, excess: i64, latency: i64) -> i64 {
    (applied - excess).clamp(0, latency)
}

/// The latency the wire applies now, ns, if it was calibrated.
pub fn applied_ns() -> Option<u64> {
    std::fs::read_to_string(lab::state_file(lab::WIRE_LATENCY_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_excess_comes_off_the_applied_latency_within_bounds() {
        // 20 µs profile, 12 µs too slow: apply 8.
        assert_eq!(next_applied(20_000, 12_000, 20_000), 8_000);
        // Overshot by 1 µs (too fast): give 1 back.
        assert_eq!(next_applied(8_000, -1_000, 20_000), 9_000);
        // The wire costs more than the whole latency: 0, not negative.
        assert_eq!(next_applied(3_000, 10_000, 3_000), 0);
        // Noise never makes the lab slower than its profile asks.
        assert_eq!(next_applied(20_000, -5_000, 20_000), 20_000);
    }
}
