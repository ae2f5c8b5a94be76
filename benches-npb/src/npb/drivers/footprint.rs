//! What a job costs to start and to keep, for `npb --json`: the time from
//! launch until every rank answers, and each rank's peak memory.
//!
//! Start-up is timed from a wall-clock stamp that `npb` puts in its ranks'
//! environment ([`LAUNCHED_AT`]) when it launches the job itself; a job
//! started otherwise (`mttlrun`, `mpirun`) reports none. It ends when node
//! 0 has had an answer from every rank ([`all_ranks_answer`]), which needs
//! every rank's runtime up and a link to it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Variable holding when `npb` launched the job: nanoseconds since the Unix
/// epoch.
pub const LAUNCHED_AT: &str = "NPB_LAUNCHED_AT";

/// The value of [`LAUNCHED_AT`] for now.
pub fn launch_stamp() -> String {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
        .to_string()
}

/// The time since the stamp in [`LAUNCHED_AT`], if there is one.
pub fn since_launch() -> Option<Duration> {
    let nanos: u64 = std::env::var(LAUNCHED_AT).ok()?.parse().ok()?;
    SystemTime::now()
        .duration_since(UNIX_EPOCH + Duration::from_nanos(nanos))
        .ok()
}

#[mttl::remote]
fn rank_answers() -> u8 {
    0
}

/// On node 0: returns once every rank has answered an invocation.
pub fn all_ranks_answer() {
    mttl::spmd(rank_answers, ());
}

#[mttl::remote]
fn rank_peak_memory() -> u64 {
    peak_memory_kib().unwrap_or(0)
}

/// On node 0: every rank's peak resident memory in KiB (0 where the system
/// does not tell), by rank.
pub fn peak_memory_by_rank() -> Vec<u64> {
    mttl::spmd(rank_peak_memory, ())
}

/// This process's peak resident memory in KiB (`VmHWM`), on Linux.
fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_memory() {
        let kib = peak_memory_kib().expect("VmHWM on Linux");
        assert!(kib > 100, "{kib} KiB");
    }
}
