//! How busy the machine is with work other than this benchmark, read from
//! `/proc`: this VM is shared, and a figure measured beside a busy
//! neighbour measures the neighbour.
//!
//! - Before a job, [`settle`] waits (a bounded time) for a quiet moment,
//!   sampling `/proc/stat` while the orchestrator sleeps.
//! - Around a job, a [`Meter`] compares the CPU time the whole machine spent
//!   busy (including time stolen by the hypervisor) with the CPU time this
//!   process and its reaped children (the ranks, `mpirun`) used: the
//!   difference is what others took while the job ran. Processes that are
//!   part of the measured system without being this process's children
//!   (the emulated network's forwarder, busy whenever ranks communicate)
//!   are named with [`count_as_own`], or by a parent benchmark in
//!   [`OWN_PIDS_VAR`], and count as own too.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The variable naming processes (pids, comma-separated) whose CPU time
/// counts as this benchmark's own: set by a benchmark that runs another
/// one beside the emulated network's wire (`npb-sweep --net` running
/// `mttl-bench rwrite`).
pub const OWN_PIDS_VAR: &str = "MTTL_BENCH_OWN_PIDS";

/// Processes whose CPU time counts as this process's ([`count_as_own`]).
static ALSO_OWN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Counts the CPU time of process `pid` as this benchmark's own from now
/// on: it is part of what is measured (the emulated network's wire), not
/// a neighbour disturbing it.
pub fn count_as_own(pid: u32) {
    let mut pids = ALSO_OWN.lock().unwrap_or_else(|e| e.into_inner());
    if !pids.contains(&pid) {
        pids.push(pid);
    }
}

/// Stops counting process `pid` as own ([`count_as_own`]).
pub fn stop_counting_as_own(pid: u32) {
    let mut pids = ALSO_OWN.lock().unwrap_or_else(|e| e.into_inner());
    pids.retain(|&p| p != pid);
}

/// How long one sample of [`foreign_busy_cpus`] watches the machine.
const WINDOW: Duration = Duration::from_millis(200);

/// The machine's CPU time from `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy)]
struct CpuTimes {
    busy: u64,
    total: u64,
    cpus: usize,
}

fn cpu_times() -> Option<CpuTimes> {
    parse_cpu_times(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Parses the text of `/proc/stat`.
fn parse_cpu_times(stat: &str) -> Option<CpuTimes> {
    let mut lines = stat.lines();
    let fields: Vec<u64> = lines
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already
    // inside user and nice).
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    let total: u64 = fields.iter().take(8).sum();
    let cpus = lines
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(CpuTimes {
        busy: total.checked_sub(idle)?,
        total,
        cpus: cpus.max(1),
    })
}

/// CPU time used by this process and its reaped children, in clock ticks
/// (`utime + stime + cutime + cstime` of `/proc/self/stat`), plus that of
/// the processes counted as own ([`count_as_own`]) that still run.
fn own_ticks() -> Option<u64> {
    let mine = parse_own_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
    let mut pids = ALSO_OWN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let Ok(list) = std::env::var(OWN_PIDS_VAR) {
        pids.extend(list.split(',').filter_map(|p| p.trim().parse::<u32>().ok()));
    }
    let others: u64 = pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| parse_own_ticks(&stat))
        .sum();
    Some(mine + others)
}

/// Parses the text of `/proc/PID/stat`.
fn parse_own_ticks(stat: &str) -> Option<u64> {
    // Fields after the command name, which ends with the last ')': the
    // first is field 3 (state), so fields 14 to 17 are at 11 to 14.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|f| f.parse().ok())
        .collect();
    (fields.len() == 4).then(|| fields.iter().sum())
}

/// The number of CPUs other processes kept busy during the last
/// [`WINDOW`] (this process sleeps meanwhile), or `None` where `/proc/stat`
/// cannot be read.
pub fn foreign_busy_cpus() -> Option<f64> {
    let meter = Meter::start()?;
    std::thread::sleep(WINDOW);
    meter.foreign_cpus()
}

/// Waits until other processes keep fewer than `threshold` CPUs busy, for
/// at most `limit`, and returns the last reading (`None` where `/proc`
/// cannot be read).
pub fn settle(threshold: f64, limit: Duration) -> Option<f64> {
    let start = Instant::now();
    loop {
        let busy = foreign_busy_cpus()?;
        if busy < threshold || start.elapsed() >= limit {
            return Some(busy);
        }
    }
}

/// Measures what other processes used while something ran.
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    machine: CpuTimes,
    own: u64,
}

impl Meter {
    /// Starts measuring; `None` where `/proc` cannot be read.
    pub fn start() -> Option<Meter> {
        Some(Meter {
            machine: cpu_times()?,
            own: own_ticks()?,
        })
    }

    /// The average number of CPUs others kept busy since [`start`]
    /// (children count as own once reaped).
    ///
    /// [`start`]: Meter::start
    pub fn foreign_cpus(&self) -> Option<f64> {
        let now = cpu_times()?;
        let own = own_ticks()?.saturating_sub(self.own);
        let total = now
            .total
            .checked_sub(self.machine.total)
            .filter(|&t| t > 0)?;
        let busy = now.busy.saturating_sub(self.machine.busy);
        let foreign = busy.saturating_sub(own);
        Some(foreign as f64 / total as f64 * now.cpus as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_times_count_steal_as_busy_and_iowait_as_idle() {
        let stat = "cpu  100 5 50 1000 20 1 4 30 0 0\n\
                    cpu0 50 2 25 500 10 1 2 15 0 0\n\
                    cpu1 50 3 25 500 10 0 2 15 0 0\n\
                    intr 12345\n";
        let t = parse_cpu_times(stat).expect("a valid /proc/stat");
        assert_eq!((t.busy, t.total, t.cpus), (190, 1210, 2));
        assert!(parse_cpu_times("intr 1\n").is_none());
    }

    #[test]
    fn own_ticks_sum_self_and_children_and_survive_odd_names() {
        let stat = "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    70 30 200 100 20 0 1 0 123 4096 100";
        assert_eq!(parse_own_ticks(stat), Some(400));
        assert_eq!(parse_own_ticks("4242 (x) S 1 2"), None);
    }

    #[test]
    fn a_process_counted_as_own_adds_its_cpu_time() {
        use std::io::BufRead as _;
        // A child that spins, says so, then sleeps, unreaped: its time is
        // not in this process's counts unless named.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo spun; exec sleep 30",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped");
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
        let childs = parse_own_ticks(&stat.expect("the child runs")).expect("a valid stat");
        let without = own_ticks().expect("/proc is readable");
        count_as_own(child.id());
        let with = own_ticks().expect("/proc is readable");
        stop_counting_as_own(child.id());
        let after = own_ticks().expect("/proc is readable");
        let _ = child.kill();
        let _ = child.wait();
        assert!(childs > 0, "the child spun for a tick at least");
        assert!(with >= without + childs, "{without} + {childs} <= {with}");
        // This process's own ticks may grow by a tick or two meanwhile.
        assert!(after + childs <= with + 2, "{after} after, {with} with");
    }
}
