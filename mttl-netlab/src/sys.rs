//! What the lab asks of the system: root, `ip` and `tc`, entering a network
//! namespace, turning a device's offloads off, and reading a process's CPU
//! time. Every command it runs is named in the error when it fails.

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::error::LabError;

/// Fails unless this process runs as root (the lab creates namespaces).
pub(crate) fn require_root() -> Result<(), LabError> {
    // SAFETY: geteuid only reads this process's credentials.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::NotRoot);
    }
    Ok(())
}

/// Fails naming the first of `tools` not found on `PATH`.
pub(crate) fn require_tools(tools: &[&'static str]) -> Result<(), LabError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in tools {
        if !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()) {
            return Err(LabError::MissingTool(tool));
        }
    }
    Ok(())
}

/// Runs `program args`, failing with its standard error if it fails.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<(), LabError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Command {
            command: format!("{program} {}", args.join(" ")),
            why: e.to_string(),
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(LabError::Command {
        command: format!("{program} {}", args.join(" ")),
        why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// `ip args`.
pub(crate) fn ip(args: &[&str]) -> Result<(), LabError> {
    run("ip", args)
}

/// The network namespaces that exist (`ip netns list`), names only.
pub(crate) fn namespaces() -> Result<Vec<String>, LabError> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Command {
            command: "ip netns list".into(),
            why: e.to_string(),
        })?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Moves the calling thread into the named network namespace (sockets it
/// opens afterwards belong there). Other threads are not affected.
pub(crate) fn enter_namespace(name: &str) -> Result<(), LabError> {
    let path = Path::new("/var/run/netns").join(name);
    let file = File::open(&path).map_err(|e| LabError::Namespace {
        name: name.into(),
        why: e.to_string(),
    })?;
    // SAFETY: the descriptor is open for the duration of the call.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(LabError::Namespace {
            name: name.into(),
            why: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

/// The legacy ethtool "set" commands for checksum, scatter-gather, TSO, GSO
/// and GRO (linux/ethtool.h).
const ETHTOOL_SET_OFFLOADS: [u32; 5] = [0x17, 0x19, 0x1f, 0x24, 0x2c];
const SIOCETHTOOL: libc::c_ulong = 0x8946;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Turns off checksum and segmentation offloads of `device` in the calling
/// thread's namespace, so that every frame is a whole, checksummed frame of
/// at most the MTU (what the wire forwards is then what a NIC would send).
pub(crate) fn offloads_off(device: &str) -> Result<(), LabError> {
    let fail = |why: String| LabError::Offloads {
        device: device.into(),
        why,
    };
    // SAFETY: plain socket creation; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(fail(std::io::Error::last_os_error().to_string()));
    }
    let name = CString::new(device).map_err(|_| fail("bad device name".into()))?;
    let mut result = Ok(());
    for cmd in ETHTOOL_SET_OFFLOADS {
        let mut value = EthtoolValue { cmd, data: 0 };
        // SAFETY: ifreq is plain data; zeroed is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.as_bytes_with_nul()) {
            *dst = *src as libc::c_char;
        }
        req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
        // SAFETY: `req` names the device and points at `value`, both alive
        // for the call, as SIOCETHTOOL expects.
        let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
        // A device may not support one of them (EOPNOTSUPP): the others
        // still count.
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
                result = Err(fail(format!("ethtool command {cmd:#x}: {err}")));
            }
        }
    }
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    result
}

/// Runs `f` in a new thread that first entered namespace `name`.
pub(crate) fn in_namespace<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> Result<T, LabError> + Send + 'static,
) -> Result<T, LabError> {
    let name = name.to_string();
    std::thread::spawn(move || {
        enter_namespace(&name)?;
        f()
    })
    .join()
    .map_err(|_| LabError::Internal("a thread working in a namespace panicked".into()))?
}

/// A process's user plus system CPU time, in seconds, or `None` if it is gone.
pub(crate) fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some((utime + stime) / ticks)
}

/// Whether `pid` is alive and is this program (not a reused pid).
pub(crate) fn is_netlab_process(pid: i32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    alive(pid) && String::from_utf8_lossy(first).ends_with("mttl-netlab")
}

/// Whether `pid` is alive and not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}
