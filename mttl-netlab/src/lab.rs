//! The lab's life cycle: `up`, `down`, `status`, and entering a host.
//!
//! Everything the lab makes is found by name, so that `down` can remove it
//! after a crash as well as after a clean run:
//!
//! - host `i` is the network namespace `mttl-h<i>`, with `lo` and `eth0` at
//!   `10.231.0.<i+1>/24` (MAC `02:6d:74:6c:00:<i>`), and its own
//!   `/etc/netns/mttl-h<i>/hosts` naming every host (which `ip netns exec`
//!   puts over `/etc/hosts`, so `mttl-h0` resolves inside the lab);
//! - the switch is the namespace `mttl-wire`, holding the other end of each
//!   host's veth pair (`port<i>`); nothing is made in this machine's own
//!   namespace, so its interfaces and routes are never touched;
//! - the state (`hosts=`, `profile=`, `wire=`), the wire's pid file and log
//!   are in `/run/mttl-netlab/`.
//!
//! `up` steps:
//!
//! 1. refuse bad input (profile, host count, root, `ip`/`tc`); if a lab is
//!    up with the same hosts and profile, reuse it (say so), with any other,
//!    or leftovers without state, refuse;
//! 2. make the namespaces and links (offloads off on both ends, so frames
//!    are real frames of at most the MTU);
//! 3. choose the wire: kernel netem if `tc` accepts it on `port0` (a bridge
//!    then joins the ports, netem delays and paces each port), else the
//!    user-space wire process ([`crate::wire`]), with TBF at the link rate
//!    on each host's `eth0`, as a NIC would pace its host;
//! 4. write the state. Any failure on the way removes what was made.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::LabError;
use crate::profile::Profile;
use crate::sys;

/// Host namespaces are this prefix and a number.
pub const HOST_PREFIX: &str = "mttl-h";
/// The switch's namespace.
pub const WIRE_NS: &str = "mttl-wire";
/// Where the lab keeps its state, the wire's pid file and its log.
pub const STATE_DIR: &str = "/run/mttl-netlab";
/// The file in [`STATE_DIR`] holding the latency the wire applies, ns.
pub const WIRE_LATENCY_FILE: &str = "wire.latency_ns";
/// The most hosts one /24 and the port naming allow comfortably.
pub const MAX_HOSTS: usize = 200;

/// What carries the frames between hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireKind {
    /// The user-space wire process.
    User,
    /// A bridge with the kernel's netem qdisc on each port.
    Netem,
}

/// What `up --wire` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WireChoice {
    /// Kernel netem if this kernel has it, else the user-space wire.
    Auto,
    User,
    Netem,
}

impl WireKind {
    fn as_str(self) -> &'static str {
        match self {
            WireKind::User => "user",
            WireKind::Netem => "netem",
        }
    }
}

/// A lab as its state file records it.
#[derive(Debug, Clone)]
pub struct Lab {
    pub hosts: usize,
    pub profile: Profile,
    pub wire: WireKind,
}

pub fn host_name(i: usize) -> String {
    format!("{HOST_PREFIX}{i}")
}

pub fn host_addr(i: usize) -> String {
    format!("10.231.0.{}", i + 1)
}

pub fn host_mac(i: usize) -> [u8; 6] {
    [0x02, 0x6d, 0x74, 0x6c, (i >> 8) as u8, i as u8]
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The host index of `mttl-h<i>` or its address, if it is one.
pub fn parse_host(name: &str) -> Option<usize> {
    if let Some(n) = name.strip_prefix(HOST_PREFIX) {
        if n.is_empty()
            || !n.bytes().all(|b| b.is_ascii_digit())
            || (n.len() > 1 && n.starts_with('0'))
        {
            return None;
        }
        return n.parse().ok();
    }
    let last = name.strip_prefix("10.231.0.")?.parse::<usize>().ok()?;
    last.checked_sub(1)
}

/// Whether a namespace name is one the lab makes.
pub fn is_lab_namespace(name: &str) -> bool {
    name == WIRE_NS || parse_host(name).is_some() && name.starts_with(HOST_PREFIX)
}

fn state_dir() -> PathBuf {
    PathBuf::from(STATE_DIR)
}

pub fn pid_file() -> PathBuf {
    state_dir().join("wire.pid")
}

pub fn log_file() -> PathBuf {
    state_dir().join("wire.log")
}

pub fn ready_file() -> PathBuf {
    state_dir().join("wire.ready")
}

/// A file in the state directory.
pub fn state_file(name: &str) -> PathBuf {
    state_dir().join(name)
}

fn state_error(path: &Path, why: impl ToString) -> LabError {
    LabError::State {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

impl Lab {
    /// The lab that is up, if any.
    pub fn load() -> Result<Option<Lab>, LabError> {
        let path = state_dir().join("state");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(state_error(&path, e)),
        };
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .ok_or_else(|| state_error(&path, format!("no `{key}=` line")))
        };
        let hosts = field("hosts")?
            .parse()
            .map_err(|_| state_error(&path, "`hosts=` is not a number"))?;
        let profile = Profile::parse(field("profile")?)?;
        let wire = match field("wire")? {
            "user" => WireKind::User,
            "netem" => WireKind::Netem,
            other => return Err(state_error(&path, format!("unknown wire `{other}`"))),
        };
        Ok(Some(Lab {
            hosts,
            profile,
            wire,
        }))
    }

    fn save(&self) -> Result<(), LabError> {
        let path = state_dir().join("state");
        let text = format!(
            "hosts={}\nprofile={}\nwire={}\n",
            self.hosts,
            self.profile.name,
            self.wire.as_str()
        );
        std::fs::write(&path, text).map_err(|e| state_error(&path, e))
    }

    /// The wire process's pid, if it runs.
    pub fn wire_pid() -> Option<i32> {
        let pid = std::fs::read_to_string(pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        sys::is_netlab_process(pid).then_some(pid)
    }
}

/// `up`: see the module's steps.
pub fn up(hosts: usize, profile: &Profile, choice: WireChoice) -> Result<(), LabError> {
    if !(2..=MAX_HOSTS).contains(&hosts) {
        return Err(LabError::HostCount(hosts));
    }
    sys::require_root()?;
    sys::require_tools(&["ip", "tc"])?;
    if let Some(lab) = Lab::load()? {
        let same = lab.hosts == hosts && lab.profile == *profile;
        let wire_ok = lab.wire == WireKind::Netem || Lab::wire_pid().is_some();
        if same && wire_ok {
            println!(
                "reusing the lab that is up: {hosts} hosts on {} ({} wire)",
                lab.profile,
                lab.wire.as_str()
            );
            return Ok(());
        }
        if same {
            return Err(LabError::Wire(
                "of the lab that is up is gone (crashed or killed): run `mttl-netlab down`, then `up` again".into(),
            ));
        }
        return Err(LabError::AlreadyUp {
            hosts: lab.hosts,
            profile: lab.profile.name,
        });
    }
    let leftovers: Vec<String> = sys::namespaces()?
        .into_iter()
        .filter(|n| is_lab_namespace(n))
        .collect();
    if !leftovers.is_empty() || Lab::wire_pid().is_some() {
        let mut what = leftovers.join(", ");
        if let Some(pid) = Lab::wire_pid() {
            what.push_str(&format!(" wire process {pid}"));
        }
        return Err(LabError::Leftovers(what));
    }
    std::fs::create_dir_all(state_dir()).map_err(|e| state_error(&state_dir(), e))?;
    let result = build(hosts, profile, choice);
    if result.is_err() {
        let _ = remove_everything();
    }
    let lab = result?;
    lab.save()?;
    println!(
        "up: {hosts} hosts (mttl-h0..mttl-h{}, 10.231.0.1..{}) on {}, {}",
        hosts - 1,
        host_addr(hosts - 1),
        lab.profile,
        match lab.wire {
            WireKind::User => format!("user-space wire, pid {}", Lab::wire_pid().unwrap_or(0)),
            WireKind::Netem => "kernel netem".into(),
        }
    );
    Ok(())
}

/// Step 2 and 3 of `up`.
fn build(hosts: usize, profile: &Profile, choice: WireChoice) -> Result<Lab, LabError> {
    sys::ip(&["netns", "add", WIRE_NS])?;
    sys::ip(&["-n", WIRE_NS, "link", "set", "lo", "up"])?;
    let mtu = profile.mtu.to_string();
    let mut hosts_file = String::from("127.0.0.1 localhost\n");
    for i in 0..hosts {
        hosts_file.push_str(&format!("{} {}\n", host_addr(i), host_name(i)));
    }
    for i in 0..hosts {
        let ns = host_name(i);
        let port = format!("port{i}");
        sys::ip(&["netns", "add", &ns])?;
        sys::ip(&[
            "link", "add", &port, "netns", WIRE_NS, "type", "veth", "peer", "name", "eth0",
            "netns", &ns,
        ])?;
        let mac = mac_text(host_mac(i));
        let addr = format!("{}/24", host_addr(i));
        let steps: [&[&str]; 6] = [
            &[
                "-n", &ns, "link", "set", "eth0", "address", &mac, "mtu", &mtu,
            ],
            &["-n", &ns, "addr", "add", &addr, "dev", "eth0"],
            &["-n", &ns, "link", "set", "lo", "up"],
            &["-n", &ns, "link", "set", "eth0", "up"],
            &["-n", WIRE_NS, "link", "set", &port, "mtu", &mtu],
            &["-n", WIRE_NS, "link", "set", &port, "up"],
        ];
        for step in steps {
            sys::ip(step)?;
        }
        sys::in_namespace(&ns, || sys::offloads_off("eth0"))?;
        let p = port.clone();
        sys::in_namespace(WIRE_NS, move || sys::offloads_off(&p))?;
        let dir = Path::new("/etc/netns").join(&ns);
        std::fs::create_dir_all(&dir).map_err(|e| state_error(&dir, e))?;
        std::fs::write(dir.join("hosts"), &hosts_file).map_err(|e| state_error(&dir, e))?;
    }
    let wire = match choice {
        WireChoice::User => WireKind::User,
        WireChoice::Netem | WireChoice::Auto => match netem_ports(hosts, profile) {
            Ok(()) => WireKind::Netem,
            Err(why) if choice == WireChoice::Netem => return Err(LabError::NoNetem(why)),
            Err(_) => WireKind::User,
        },
    };
    let lab = Lab {
        hosts,
        profile: profile.clone(),
        wire,
    };
    match wire {
        WireKind::Netem => {
            sys::ip(&["-n", WIRE_NS, "link", "add", "br0", "type", "bridge"])?;
            for i in 0..hosts {
                sys::ip(&[
                    "-n",
                    WIRE_NS,
                    "link",
                    "set",
                    &format!("port{i}"),
                    "master",
                    "br0",
                ])?;
            }
            sys::ip(&["-n", WIRE_NS, "link", "set", "br0", "up"])?;
        }
        WireKind::User => {
            for i in 0..hosts {
                host_pacing(i, profile)?;
            }
            // The wire reads the state to learn the hosts and the profile.
            lab.save()?;
            start_wire()?;
            report_calibration(&lab, crate::calibrate::calibrate(&lab)?);
        }
    }
    Ok(lab)
}

/// Says what the calibration found.
fn report_calibration(lab: &Lab, c: crate::calibrate::Calibration) {
    let latency = lab.profile.latency.as_secs_f64() * 1e6;
    let applied = c.applied_ns as f64 / 1e3;
    println!(
        "calibrated: the wire's own cost is {:.1} µs one way, so it applies {applied:.1} µs of the profile's {latency:.1} µs",
        latency - applied
    );
    if c.applied_ns == 0 && c.residual_ns > 0 {
        println!(
            "calibrated: this machine cannot reach the profile's latency: the wire's own cost exceeds it by {:.1} µs one way",
            c.residual_ns as f64 / 1e3
        );
    }
}

/// `calibrate`: measures the wire's own cost again (the machine's load
/// changed) and applies it.
pub fn recalibrate() -> Result<(), LabError> {
    sys::require_root()?;
    let lab = Lab::load()?.ok_or(LabError::NotUp)?;
    if lab.wire == WireKind::Netem {
        println!("calibrate: nothing to do: kernel netem delays frames in the sender's own path");
        return Ok(());
    }
    report_calibration(&lab, crate::calibrate::calibrate(&lab)?);
    Ok(())
}

/// Netem on each switch port (downlink: latency and rate) and each host's
/// `eth0` (uplink: rate); `Err` with `tc`'s answer if netem is missing.
fn netem_ports(hosts: usize, profile: &Profile) -> Result<(), String> {
    let rate = format!("{}bit", profile.rate_bps);
    let delay = format!("{}us", profile.latency.as_micros());
    let limit = (profile.queue_bytes / u64::from(profile.mtu))
        .max(2)
        .to_string();
    for i in 0..hosts {
        let port = format!("port{i}");
        let ns = host_name(i);
        let down = [
            "-n", WIRE_NS, "qdisc", "add", "dev", &port, "root", "netem", "delay", &delay, "rate",
            &rate, "limit", &limit,
        ];
        let up = [
            "-n", &ns, "qdisc", "add", "dev", "eth0", "root", "netem", "rate", &rate, "limit",
            &limit,
        ];
        for args in [&down[..], &up[..]] {
            sys::run("tc", args).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// TBF at the link rate on host `i`'s `eth0`, counting Ethernet's framing,
/// so that the host's stack is paced as by a NIC (TCP backs off on a full
/// device queue instead of losing frames in the wire's uplink queue).
fn host_pacing(i: usize, profile: &Profile) -> Result<(), LabError> {
    let mtu = u64::from(profile.mtu) + 14;
    let burst = (profile.rate_bps / 8 / 1000)
        .min(profile.queue_bytes / 2)
        .max(2 * mtu)
        .to_string();
    let rate = format!("{}bit", profile.rate_bps);
    let overhead = crate::link::FRAMING_BYTES.to_string();
    sys::run(
        "tc",
        &[
            "-n",
            &host_name(i),
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "stab",
            "overhead",
            &overhead,
            "tbf",
            "rate",
            &rate,
            "burst",
            &burst,
            "latency",
            "20ms",
        ],
    )
}

/// Starts the wire process in a session of its own and waits until it says
/// it is ready (10 s at most).
fn start_wire() -> Result<(), LabError> {
    let exe = std::env::current_exe()
        .map_err(|e| LabError::Wire(format!("cannot be started: no path to this program: {e}")))?;
    let _ = std::fs::remove_file(ready_file());
    let log = std::fs::File::create(log_file()).map_err(|e| state_error(&log_file(), e))?;
    let log2 = log.try_clone().map_err(|e| state_error(&log_file(), e))?;
    let mut command = Command::new(exe);
    command
        .arg("wire")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    // SAFETY: setsid is async-signal-safe and touches only the child.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| LabError::Wire(format!("cannot be started: {e}")))?;
    let pid = child.id();
    let mut file = std::fs::File::create(pid_file()).map_err(|e| state_error(&pid_file(), e))?;
    writeln!(file, "{pid}").map_err(|e| state_error(&pid_file(), e))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if ready_file().exists() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(log_file()).unwrap_or_default();
            return Err(LabError::Wire(format!(
                "exited at start ({status}): {}",
                log.trim()
            )));
        }
        if Instant::now() > deadline {
            return Err(LabError::Wire("did not get ready within 10 s".into()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `down`: removes everything the lab made, whether or not it is up.
pub fn down() -> Result<(), LabError> {
    sys::require_root()?;
    sys::require_tools(&["ip"])?;
    let removed = remove_everything()?;
    if removed.is_empty() {
        println!("down: nothing of the lab was left");
    } else {
        println!("down: removed {}", removed.join(", "));
    }
    Ok(())
}

/// Stops the wire and every process in the lab's namespaces, deletes the
/// namespaces (their links go with them), the hosts files and the state.
/// Returns what it removed.
fn remove_everything() -> Result<Vec<String>, LabError> {
    let mut removed = Vec::new();
    let mut wires: Vec<i32> = Lab::wire_pid().into_iter().collect();
    wires.extend(stray_wires());
    wires.sort_unstable();
    wires.dedup();
    for pid in wires {
        stop(pid);
        removed.push(format!("wire process {pid}"));
    }
    for ns in sys::namespaces()?
        .into_iter()
        .filter(|n| is_lab_namespace(n))
    {
        let pids = namespace_pids(&ns);
        for &pid in &pids {
            stop(pid);
        }
        if !pids.is_empty() {
            removed.push(format!("{} process(es) in {ns}", pids.len()));
        }
        if let Err(e) = sys::ip(&["netns", "del", &ns]) {
            // Another clean-up (a second `down` started by the same
            // Ctrl-C) may have deleted it meanwhile: only a namespace that
            // is still there is a failure.
            if sys::namespaces()?.contains(&ns) {
                return Err(e);
            }
            continue;
        }
        removed.push(ns.clone());
    }
    if let Ok(entries) = std::fs::read_dir("/etc/netns") {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if is_lab_namespace(&name) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    match std::fs::remove_dir_all(state_dir()) {
        Ok(()) => removed.push(STATE_DIR.into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(state_error(&state_dir(), e)),
    }
    Ok(removed)
}

/// Wire processes without a pid file (it was removed by hand).
fn stray_wires() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let mut words = cmdline.split(|b| *b == 0);
            let first = words.next().unwrap_or_default();
            String::from_utf8_lossy(first).ends_with("mttl-netlab")
                && words.next() == Some(b"wire".as_slice())
                && sys::is_netlab_process(pid)
        })
        .collect()
}

fn namespace_pids(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .stdin(Stdio::null())
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// SIGTERM, then SIGKILL if still there after 2 s.
fn stop(pid: i32) {
    // SAFETY: signalling a process the lab started (checked by the caller).
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if !sys::alive(pid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// `status`.
pub fn status() -> Result<(), LabError> {
    let lab = Lab::load()?;
    let present: Vec<String> = sys::namespaces()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| is_lab_namespace(n))
        .collect();
    let Some(lab) = lab else {
        if present.is_empty() {
            println!("down (nothing of the lab exists)");
        } else {
            println!(
                "down, with leftovers: {} (`mttl-netlab down` removes them)",
                present.join(", ")
            );
        }
        return Ok(());
    };
    println!("profile: {}", lab.profile);
    match lab.wire {
        WireKind::Netem => println!("wire: kernel netem (bridge br0 in {WIRE_NS})"),
        WireKind::User => match Lab::wire_pid() {
            Some(pid) => println!(
                "wire: user-space, pid {pid}, running, {:.2} CPU s so far, applying {:.1} µs of the profile's latency (the rest is its own cost; log {})",
                sys::cpu_seconds(pid).unwrap_or(0.0),
                crate::calibrate::applied_ns()
                    .unwrap_or(lab.profile.latency.as_nanos() as u64) as f64
                    / 1e3,
                log_file().display()
            ),
            None => println!(
                "wire: user-space, NOT RUNNING (crashed or killed): run `mttl-netlab down` (log {})",
                log_file().display()
            ),
        },
    }
    for i in 0..lab.hosts {
        let name = host_name(i);
        let state = if present.contains(&name) {
            ""
        } else {
            "  MISSING"
        };
        println!("{name}  {}  {}{state}", host_addr(i), mac_text(host_mac(i)));
    }
    Ok(())
}

/// The namespace of a host given by name or address, checked to exist.
pub fn host_namespace(host: &str) -> Result<String, LabError> {
    let i = parse_host(host).ok_or_else(|| LabError::UnknownHost(host.into()))?;
    let lab = Lab::load()?.ok_or(LabError::NotUp)?;
    if i >= lab.hosts {
        return Err(LabError::UnknownHost(host.into()));
    }
    Ok(host_name(i))
}

/// `exec HOST -- CMD`: replaces this process with CMD in the host.
///
/// Launchers started there reach the other lab hosts through `rsh`: CMD
/// gets `MTTL_RSH` (for `mttlrun`) and `OMPI_MCA_plm_rsh_agent` (for Open
/// MPI's `mpirun`) naming `mttl-netlab rsh`, unless they are set already.
pub fn exec(host: &str, command: &[String]) -> Result<(), LabError> {
    sys::require_root()?;
    let ns = host_namespace(host)?;
    if command.is_empty() {
        return Err(LabError::Usage(
            "exec: no command given (mttl-netlab exec HOST -- CMD ...)".into(),
        ));
    }
    let mut child = Command::new("ip");
    child.args(["netns", "exec", &ns]).args(command);
    if let Ok(me) = std::env::current_exe() {
        let agent = format!("{} rsh", me.display());
        for var in REMOTE_SHELL_VARS {
            if std::env::var_os(var).is_none() {
                child.env(var, &agent);
            }
        }
    }
    let err = child.exec();
    Err(LabError::Command {
        command: format!("ip netns exec {ns} {}", command.join(" ")),
        why: err.to_string(),
    })
}

/// The variables through which `mttlrun` and Open MPI's `mpirun` take their
/// remote shell.
pub const REMOTE_SHELL_VARS: [&str; 2] = ["MTTL_RSH", "OMPI_MCA_plm_rsh_agent"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_named_by_prefix_or_address() {
        assert_eq!(parse_host("mttl-h0"), Some(0));
        assert_eq!(parse_host("mttl-h12"), Some(12));
        assert_eq!(parse_host("10.231.0.2"), Some(1));
        assert_eq!(parse_host("mttl-h01"), None);
        assert_eq!(parse_host("mttl-h"), None);
        assert_eq!(parse_host("mttl-hx"), None);
        assert_eq!(parse_host("10.231.0.0"), None);
        assert_eq!(parse_host("localhost"), None);
        assert!(is_lab_namespace("mttl-wire"));
        assert!(is_lab_namespace("mttl-h3"));
        assert!(!is_lab_namespace("mttl-1234-idle-a"));
        assert!(!is_lab_namespace("10.231.0.2"));
    }
}
