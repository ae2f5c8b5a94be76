//! `--net`: the sweep across `mttl-netlab`'s emulated cluster, one network
//! profile after another (this machine holds one lab at a time).
//!
//! For each profile, step by step:
//!
//! 1. Refuse unless root, unless `mttl-netlab`, `mttlrun` and `npb` lie
//!    beside this program, and unless no lab is up already (someone else's
//!    lab is not ours to take down).
//! 2. `mttl-netlab up --hosts H --profile P`, H the largest of `--hosts`
//!    (at least 2, the lab's least), with a [`LabGuard`] that runs
//!    `mttl-netlab down` when dropped (an error, a panic), and a signal
//!    thread ([`bring_down_on_signal`]) that does the same on Ctrl-C,
//!    `SIGTERM` or `SIGHUP` before exiting.
//! 3. `mttl-netlab check`, its output kept in `OUT/netlab-check-P.txt` and
//!    read for the round trip and bandwidth the lab gave ([`Measured`]).
//! 4. Count the wire's CPU time as the sweep's own
//!    ([`cpu_load::count_as_own`]): it is busy whenever ranks communicate,
//!    and the quiet-machine wait and the disturbed-run retry would else
//!    blame it.
//! 5. Run each point as `mttl-netlab exec mttl-h0 -- mttlrun -n N
//!    --backend B --hosts mttl-h0,...,mttl-h{N-1} -- npb KERNEL --class C
//!    --variant V --json` ([`Tools::command`]): one rank per host.
//!    `MTTL_STATS=1` is in its environment: `mttlrun` passes `MTTL_*`
//!    variables on over its remote shell, and Open MPI's orteds, started
//!    through the same shell, inherit it and hand it to their ranks.
//! 6. Unless `--no-rwrite`: the paper's figs. 5-7 on this network,
//!    `mttl-bench rwrite --hosts mttl-h0,mttl-h1` run from inside
//!    `mttl-h0` ([`rwrite`]): mttl's remote writes against MPI send/recv
//!    between two hosts, its CSV and figure as `OUT/rwrite-P.*`.
//! 7. Drop the guard: the lab goes down before the next profile's comes up.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use benches_npb::bench::cpu_load;
use mttl_netlab::lab::{host_name, pid_file};
use mttl_netlab::Profile;

use crate::{file_name, Point};

/// Whether this process has a lab up (read by the signal thread).
static LAB_UP: AtomicBool = AtomicBool::new(false);

/// Held by whoever brings the lab down (the guard or the signal thread), so
/// that one `mttl-netlab down` runs at a time and the other finds it done.
static TAKING_DOWN: Mutex<()> = Mutex::new(());

/// The signal that interrupted the sweep, 0 if none; set by the signal
/// handler itself, so that it is seen before a point killed by the same
/// Ctrl-C is reported as failed.
static INTERRUPTED: std::sync::LazyLock<Arc<AtomicUsize>> =
    std::sync::LazyLock::new(|| Arc::new(AtomicUsize::new(0)));

/// The exit status of an interrupted sweep (128 + the signal), if a signal
/// interrupted it; the lab is down by the time this returns.
pub(crate) fn interrupted() -> Option<u8> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        signal => {
            take_down_once();
            Some(128u8.saturating_add(signal as u8))
        }
    }
}

/// The `mttl-netlab` that brought the lab up.
static NETLAB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Brings the lab down unless nobody has it up (any more).
fn take_down_once() {
    let _one_at_a_time = TAKING_DOWN.lock().unwrap_or_else(|e| e.into_inner());
    if LAB_UP.swap(false, Ordering::SeqCst) {
        if let Some(netlab) = NETLAB.get() {
            bring_down(netlab);
        }
    }
}

/// The programs a point across the lab runs.
#[derive(Debug, Clone)]
pub(crate) struct Tools {
    pub(crate) netlab: PathBuf,
    pub(crate) mttlrun: PathBuf,
    pub(crate) npb: PathBuf,
    pub(crate) bench: PathBuf,
}

impl Tools {
    /// Step 1: the programs beside this one (`npb` as given), and root.
    pub(crate) fn find(npb: PathBuf) -> Result<Tools, String> {
        // SAFETY: geteuid only reads this process's credentials.
        if unsafe { libc::geteuid() } != 0 {
            return Err(
                "--net needs root: it brings up mttl-netlab's emulated cluster \
                        (network namespaces, veth links, tc qdiscs); run npb-sweep as root \
                        (e.g. with sudo), or leave --net out to sweep on this machine alone"
                    .into(),
            );
        }
        let here = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        let beside = |name: &str| {
            let path = here.with_file_name(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "--net needs `{name}` beside npb-sweep ({} not found): build the workspace \
                     (`cargo build --release --all-features`)",
                    path.display()
                ))
            }
        };
        let tools = Tools {
            netlab: beside("mttl-netlab")?,
            mttlrun: beside("mttlrun")?,
            npb,
            bench: beside("mttl-bench")?,
        };
        let status = tools.netlab_output(&["status"])?;
        if !status.starts_with("down (nothing") {
            return Err(format!(
                "a lab is up already (`mttl-netlab status`: {}); --net brings up its own: \
                 run `mttl-netlab down` first if no one is using it",
                status.lines().next().unwrap_or("").trim()
            ));
        }
        Ok(tools)
    }

    /// Runs `mttl-netlab ARGS` to its end; its stdout if it succeeded.
    fn netlab_output(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.netlab)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.netlab.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "`mttl-netlab {}` failed ({}): {}{}",
                args.join(" "),
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Step 5: the command running `p` across the lab's first hosts.
    pub(crate) fn command(&self, p: &Point) -> Command {
        let hosts: Vec<String> = (0..p.nprocs).map(host_name).collect();
        let mut command = Command::new(&self.netlab);
        command
            .args(["exec", &host_name(0), "--"])
            .arg(&self.mttlrun)
            .args(["-n", &p.nprocs.to_string()])
            .args(["--backend", &p.backend.to_string()])
            .args(["--hosts", &hosts.join(","), "--"])
            .arg(&self.npb)
            .arg(p.kernel.name().to_lowercase())
            .args(["--class", &p.class.to_string()])
            .args(["--variant", p.variant.name(), "--json"]);
        command
    }
}

/// The transfer sizes of [`rwrite`]: 8 B to 1 MiB by factors of 8.
const RWRITE_SIZES: &str = "8,64,512,4K,32K,256K,1M";

/// Step 6: `mttl-bench rwrite` between the first two hosts of the lab that
/// is up (`profile`), `reps` sweeps, its output in `OUT/rwrite-P.txt`, its
/// CSV and figure beside; returns whether it succeeded.
pub(crate) fn rwrite(tools: &Tools, profile: &str, reps: u32, settle: f64, out: &Path) -> bool {
    let stem = out.join(format!("rwrite-{}", file_name(profile)));
    let mut configs = vec!["tcp"];
    if cfg!(feature = "mpi") {
        configs.extend(["raw-mpi-tcp", "mpi"]);
    }
    eprintln!(
        "npb-sweep: mttl-bench rwrite across {} and {} on {profile}",
        host_name(0),
        host_name(1)
    );
    let mut command = Command::new(&tools.netlab);
    command
        .args(["exec", &host_name(0), "--"])
        .arg(&tools.bench)
        .args([
            "rwrite",
            "--hosts",
            &format!("{},{}", host_name(0), host_name(1)),
        ])
        .args(["--sizes", RWRITE_SIZES, "--window", "8"])
        .args(["--reps", &reps.to_string(), "--settle", &settle.to_string()])
        .args(["--backends", &configs.join(",")])
        .arg("--csv")
        .arg(stem.with_extension("csv"))
        .stdin(Stdio::null());
    if let Ok(pid) = std::fs::read_to_string(pid_file()) {
        command.env(cpu_load::OWN_PIDS_VAR, pid.trim());
    }
    let (ok, text) = match command.output() {
        Ok(o) => {
            let mut text = String::from_utf8_lossy(&o.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&o.stderr));
            if !o.status.success() {
                text.push_str(&format!("\nmttl-bench rwrite failed: {}\n", o.status));
            }
            (o.status.success(), text)
        }
        Err(e) => (
            false,
            format!("cannot run {}: {e}\n", tools.netlab.display()),
        ),
    };
    let file = stem.with_extension("txt");
    if let Err(e) = std::fs::write(&file, &text) {
        eprintln!("npb-sweep: cannot write {}: {e}", file.display());
    }
    if !ok {
        eprintln!(
            "npb-sweep: mttl-bench rwrite on {profile} FAILED (see {})",
            file.display()
        );
    }
    ok
}

/// The round trip and bandwidth the lab's check measured (step 3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Measured {
    /// Median round trip of a 1-byte message, seconds.
    pub(crate) rtt: f64,
    /// TCP goodput of one stream, bits per second.
    pub(crate) goodput_bps: f64,
}

impl Measured {
    /// Reads `check`'s `round trip: X µs` and `bandwidth: Y Mb/s` lines.
    pub(crate) fn parse(check: &str) -> Option<Measured> {
        let number_after = |prefix: &str| -> Option<f64> {
            let line = check.lines().find(|l| l.starts_with(prefix))?;
            line[prefix.len()..].split_whitespace().next()?.parse().ok()
        };
        Some(Measured {
            rtt: number_after("round trip:")? * 1e-6,
            goodput_bps: number_after("bandwidth:")? * 1e6,
        })
    }

    /// What the profile promises, where the check gave nothing readable.
    pub(crate) fn nominal(profile: &Profile) -> Measured {
        Measured {
            rtt: 2.0 * profile.latency.as_secs_f64(),
            goodput_bps: profile.rate_bps as f64,
        }
    }
}

/// A lab this process brought up: dropping it brings it down (step 6).
#[derive(Debug)]
pub(crate) struct LabGuard {
    wire: Option<u32>,
    /// What `check` printed.
    pub(crate) check: String,
    /// What `check` measured, or the profile's figures.
    pub(crate) measured: Measured,
    /// Whether `check` passed.
    pub(crate) faithful: bool,
}

impl LabGuard {
    /// Steps 2-4 for `profile` with `hosts` hosts; the check's output goes
    /// to `OUT/netlab-check-NAME.txt`.
    pub(crate) fn up(
        tools: &Tools,
        hosts: usize,
        profile: &Profile,
        out: &Path,
    ) -> Result<LabGuard, String> {
        let hosts = hosts.max(2);
        let _ = NETLAB.set(tools.netlab.clone());
        LAB_UP.store(true, Ordering::SeqCst);
        let mut guard = LabGuard {
            wire: None,
            check: String::new(),
            measured: Measured::nominal(profile),
            faithful: false,
        };
        eprintln!(
            "npb-sweep: bringing up {hosts} lab hosts on {}",
            profile.name
        );
        let up = tools.netlab_output(&[
            "up",
            "--hosts",
            &hosts.to_string(),
            "--profile",
            &profile.name,
        ])?;
        eprint!("{up}");
        let check = Command::new(&tools.netlab)
            .args(["check", "--seconds", "3"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", tools.netlab.display()))?;
        guard.check = String::from_utf8_lossy(&check.stdout).into_owned();
        guard
            .check
            .push_str(&String::from_utf8_lossy(&check.stderr));
        // 0: faithful; 1: measured but not faithful; anything else: no lab.
        match check.status.code() {
            Some(0) => guard.faithful = true,
            Some(1) => {}
            _ => {
                return Err(format!(
                    "`mttl-netlab check` on {} failed ({}): {}",
                    profile.name,
                    check.status,
                    guard.check.trim()
                ))
            }
        }
        if let Some(m) = Measured::parse(&guard.check) {
            guard.measured = m;
        }
        let file = out.join(format!("netlab-check-{}.txt", file_name(&profile.name)));
        std::fs::write(&file, &guard.check)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        eprint!("{}", guard.check);
        guard.wire = std::fs::read_to_string(pid_file())
            .ok()
            .and_then(|p| p.trim().parse().ok());
        if let Some(pid) = guard.wire {
            cpu_load::count_as_own(pid);
        }
        Ok(guard)
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.wire {
            cpu_load::stop_counting_as_own(pid);
        }
        take_down_once();
    }
}

/// `mttl-netlab down`, saying so if it fails.
fn bring_down(netlab: &Path) {
    let down = Command::new(netlab)
        .arg("down")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output();
    match down {
        Ok(out) if out.status.success() => eprintln!("npb-sweep: the lab is down"),
        Ok(out) => eprintln!(
            "npb-sweep: `mttl-netlab down` failed ({}): {}; run it by hand",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("npb-sweep: cannot run `mttl-netlab down` ({e}); run it by hand"),
    }
}

/// Passes `signal` on to this process's children (a signal sent to the
/// sweep alone would else leave `mttl-netlab check` or a point's launcher
/// running); their own children in the lab's hosts end with the lab.
fn stop_children(signal: libc::c_int) {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
    {
        // /proc/PID/stat: "PID (COMM) STATE PPID ...", COMM may hold spaces.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(me) {
            // SAFETY: signalling a child of this process.
            unsafe { libc::kill(pid, signal) };
        }
    }
}

/// Step 2's signal thread: on `SIGINT`, `SIGTERM` or `SIGHUP`, brings the
/// lab down if this process has one up (which also ends the point running
/// in it, were the signal sent to this process alone), then exits with
/// 128 + the signal. The main thread, finding its point killed by the same
/// Ctrl-C, exits the same way ([`interrupted`]).
pub(crate) fn bring_down_on_signal(netlab: &Path) -> Result<(), String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(signal, Arc::clone(&INTERRUPTED), signal as usize)
            .map_err(|e| format!("cannot catch Ctrl-C: {e}"))?;
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot catch Ctrl-C: {e}"))?;
    let _ = NETLAB.set(netlab.to_path_buf());
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            eprintln!("\nnpb-sweep: interrupted (signal {signal})");
            stop_children(signal as libc::c_int);
            take_down_once();
            std::process::exit(128 + signal);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use benches_npb::npb::drivers::{Kernel, Variant};
    use benches_npb::npb::Class;
    use mttl::comm::launch::BackendKind;

    #[test]
    fn the_checks_round_trip_and_bandwidth_are_read() {
        let check = "profile 100base-t (100 Mb/s, 20 µs); mttl-h0 -> mttl-h1\n\
            round trip: 83.2 µs (median of 2000); expected 80.0 µs = ... -> ok (within 10%)\n\
            round trip spread (p10/p50/p90 µs): between hosts 70/83/99, lo 30/40/50\n\
            bandwidth: 93.9 Mb/s TCP goodput over 3 s; rate 100.0 Mb/s -> ok (within 10%)\n";
        let m = Measured::parse(check).expect("both lines are there");
        assert!((m.rtt - 83.2e-6).abs() < 1e-12);
        assert!((m.goodput_bps - 93.9e6).abs() < 1e-3);
        assert_eq!(Measured::parse("round trip: 83.2 µs\n"), None);
        assert_eq!(
            Measured::parse("round trip: fast\nbandwidth: 9 Mb/s\n"),
            None
        );
        let nominal = Measured::nominal(&Profile::parse("100base-t").expect("a preset"));
        assert_eq!(nominal.goodput_bps, 100e6);
        assert!((nominal.rtt - 40e-6).abs() < 1e-12);
    }

    #[test]
    fn a_point_runs_one_rank_per_host_from_the_first() {
        let tools = Tools {
            netlab: "/b/mttl-netlab".into(),
            mttlrun: "/b/mttlrun".into(),
            npb: "/b/npb".into(),
            bench: "/b/mttl-bench".into(),
        };
        let point = Point {
            kernel: Kernel::Cg,
            class: Class::A,
            nprocs: 3,
            variant: Variant::Mttl,
            backend: BackendKind::Mpi,
            net: Some("gige"),
        };
        let command = tools.command(&point);
        let args: Vec<String> = command
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(command.get_program(), "/b/mttl-netlab");
        assert_eq!(
            args.join(" "),
            "exec mttl-h0 -- /b/mttlrun -n 3 --backend mpi --hosts mttl-h0,mttl-h1,mttl-h2 \
             -- /b/npb cg --class A --variant mttl --json"
        );
    }
}
