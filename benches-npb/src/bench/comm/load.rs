//! How busy the machine is with other work, sampled from `/proc/stat` while
//! the orchestrator idles between jobs: figures measured next to a busy
//! neighbour are suspect, and the report says so.

use std::time::Duration;

/// How long one sample watches the machine.
const WINDOW: Duration = Duration::from_millis(200);

/// Busy and total CPU time over all CPUs, in clock ticks, and the CPU count.
fn cpu_times() -> Option<(u64, u64, usize)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut lines = stat.lines();
    let total_line = lines.next()?;
    let fields: Vec<u64> = total_line
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    let total: u64 = fields.iter().take(8).sum();
    let cpus = lines
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some((total - idle, total, cpus.max(1)))
}

/// The number of CPUs other processes kept busy during the last
/// [`WINDOW`] (this process sleeps meanwhile), or `None` where `/proc/stat`
/// cannot be read.
pub(in crate::bench) fn foreign_busy_cpus() -> Option<f64> {
    let (busy0, total0, cpus) = cpu_times()?;
    std::thread::sleep(WINDOW);
    let (busy1, total1, _) = cpu_times()?;
    let total = total1.checked_sub(total0).filter(|&t| t > 0)?;
    let busy = busy1.saturating_sub(busy0);
    Some(busy as f64 / total as f64 * cpus as f64)
}
