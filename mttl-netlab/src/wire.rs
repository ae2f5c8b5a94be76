//! The user-space wire: the switch of a lab on a kernel without netem.
//!
//! It runs in the `mttl-wire` namespace (started by `up`, in a session of its
//! own, pid in `/run/mttl-netlab/wire.pid`) with one `AF_PACKET` socket on
//! each host's switch port (`port<i>`, the far end of the host's `eth0`).
//! Its loop, single-threaded:
//!
//! 1. hand over every frame whose release time has come, to the port of its
//!    destination, in release order (each destination's queue is FIFO and
//!    its release times never decrease, see [`crate::link`]);
//! 2. wait for a frame or the next release, whichever is first: `ppoll`
//!    with a timer slack of 1 ns, waking [`SPIN_NS`] early and spinning
//!    for the rest, since a sleeping thread wakes late by tens of µs;
//! 3. read every frame waiting on every port, with the time the kernel
//!    received it (`SO_TIMESTAMPNS`), so that the wire's own lateness in
//!    reading neither adds to the latency nor bunches frames up in the
//!    queues; send each where its destination MAC says (hosts' MACs are fixed by index; broadcast and
//!    multicast go to every other host, unknown unicast nowhere), with the
//!    release time [`Switch`] gives it, or drop it if a queue is full.
//!
//! Frames it sends are not read back (`PACKET_IGNORE_OUTGOING`). It asks for
//! real-time scheduling (`SCHED_FIFO`, the kernel's RT throttling still
//! leaves 5% to others) so that a busy machine delays its releases less, and
//! runs without it if refused. Counters go to `wire.stats` every second;
//! SIGTERM ends it.

use std::collections::VecDeque;
use std::ffi::CString;
use std::time::{Duration, Instant};

use crate::error::LabError;
use crate::lab::{self, Lab};
use crate::link::Switch;
use crate::sys;

/// How long before a release the wire stops sleeping and spins.
pub const SPIN_NS: u64 = 15_000;
const SOL_PACKET: libc::c_int = 263;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Largest frame: MTU 9000 plus the Ethernet header, with room to spare.
const MAX_FRAME: usize = 9216;

struct Frame {
    release: u64,
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Counters {
    frames: u64,
    bytes: u64,
    dropped_queue: u64,
    dropped_send: u64,
    unknown: u64,
}

fn mono_ns(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

fn os_error(what: &str) -> LabError {
    LabError::Wire(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Opens a packet socket bound to `device`, non-blocking.
fn open_port(device: &str) -> Result<libc::c_int, LabError> {
    let protocol = (libc::ETH_P_ALL as u16).to_be();
    // SAFETY: plain socket creation; the result is checked.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            libc::c_int::from(protocol),
        )
    };
    if fd < 0 {
        return Err(os_error("cannot open a packet socket"));
    }
    let name = CString::new(device).map_err(|_| LabError::Internal("device name".into()))?;
    // SAFETY: `name` is a valid C string.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(os_error(&format!("no device {device}")));
    }
    // SAFETY: sockaddr_ll is plain data; zeroed is valid.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol;
    addr.sll_ifindex = index as i32;
    // SAFETY: `addr` is a sockaddr_ll of the size given.
    let rc = unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if rc != 0 {
        return Err(os_error(&format!("cannot bind to {device}")));
    }
    let one: libc::c_int = 1;
    let buffer: libc::c_int = 4 << 20;
    for (level, option, value) in [
        (SOL_PACKET, PACKET_IGNORE_OUTGOING, one),
        (libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buffer),
        (libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, one),
        (libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buffer),
    ] {
        // SAFETY: `value` is a c_int of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        if rc != 0 {
            return Err(os_error(&format!("setsockopt {option} on {device}")));
        }
    }
    Ok(fd)
}

/// Receives one frame into `buf`: its length and the kernel's receive time
/// (`CLOCK_REALTIME`, ns), or `None` when no frame waits.
fn receive(fd: libc::c_int, buf: &mut [u8]) -> Option<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: `msg` points at `iov` (over `buf`) and `control`, all live.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n <= 0 {
        return None;
    }
    let mut stamp = None;
    // SAFETY: walking the control messages the kernel wrote into `control`,
    // within `msg_controllen`, with the CMSG_* helpers made for it.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Some((n as usize, stamp))
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Asks for `SCHED_FIFO`; says whether it was granted.
fn real_time() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: changes this process's own scheduling; `param` is live.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 }
}

/// Where a frame goes: the hosts its destination MAC names.
fn destinations(frame: &[u8], src: usize, hosts: usize, out: &mut Vec<usize>) {
    out.clear();
    if frame.len() < 14 {
        return;
    }
    if frame[0] & 1 == 1 {
        out.extend((0..hosts).filter(|&d| d != src));
        return;
    }
    if let Some(d) = (0..hosts).find(|&d| frame[..6] == lab::host_mac(d)) {
        if d != src {
            out.push(d);
        }
    }
}

/// The wire's main: runs until killed.
pub fn run() -> Result<(), LabError> {
    let lab = Lab::load()?.ok_or(LabError::NotUp)?;
    sys::enter_namespace(lab::WIRE_NS)?;
    // SAFETY: prctl with an integer argument changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let hosts = lab.hosts;
    let fds: Vec<libc::c_int> = (0..hosts)
        .map(|i| open_port(&format!("port{i}")))
        .collect::<Result<_, _>>()?;
    let mut switch = Switch::new(
        hosts,
        lab.profile.rate_bps,
        lab.profile.queue_bytes,
        lab.profile.latency.as_nanos() as u64,
    );
    let mut queues: Vec<VecDeque<Frame>> = (0..hosts).map(|_| VecDeque::new()).collect();
    let mut pollfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut counters = Counters::default();
    let mut buf = vec![0u8; MAX_FRAME];
    let mut dsts = Vec::with_capacity(hosts);
    let origin = Instant::now();
    let mut next_stats = origin + Duration::from_secs(1);
    std::fs::write(lab::ready_file(), b"ready\n")
        .map_err(|e| LabError::Wire(format!("cannot write its ready file: {e}")))?;
    let rt = real_time();
    eprintln!(
        "wire: {hosts} hosts, {}; {}",
        lab.profile,
        if rt {
            "SCHED_FIFO"
        } else {
            "normal scheduling (SCHED_FIFO refused)"
        }
    );
    loop {
        // Step 1.
        let mut now = mono_ns(origin);
        for (d, queue) in queues.iter_mut().enumerate() {
            while queue.front().is_some_and(|f| f.release <= now) {
                let Some(frame) = queue.pop_front() else {
                    break;
                };
                // SAFETY: sending from a live buffer of the length given.
                let sent =
                    unsafe { libc::send(fds[d], frame.data.as_ptr().cast(), frame.data.len(), 0) };
                if sent < 0 {
                    counters.dropped_send += 1;
                } else {
                    counters.frames += 1;
                    counters.bytes += frame.data.len() as u64;
                }
            }
        }
        // Step 2.
        now = mono_ns(origin);
        let next = queues
            .iter()
            .filter_map(|q| q.front().map(|f| f.release))
            .min();
        let wait_ns = match next {
            Some(t) => t.saturating_sub(now).saturating_sub(SPIN_NS),
            None => 100_000_000,
        };
        let timeout = libc::timespec {
            tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `pollfds` and `timeout` are live for the call.
        let ready = unsafe {
            libc::ppoll(
                pollfds.as_mut_ptr(),
                pollfds.len() as libc::nfds_t,
                &timeout,
                std::ptr::null(),
            )
        };
        if ready < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(LabError::Wire(format!("poll failed: {err}")));
            }
            continue;
        }
        // Step 3.
        for src in 0..hosts {
            if pollfds[src].revents == 0 {
                continue;
            }
            let (mono_now, real_now) = (mono_ns(origin), realtime_ns());
            while let Some((n, stamp)) = receive(fds[src], &mut buf) {
                let frame = &buf[..n];
                let size = frame.len() as u64;
                destinations(frame, src, hosts, &mut dsts);
                if dsts.is_empty() {
                    counters.unknown += 1;
                    continue;
                }
                // The kernel's receive time on the monotonic clock; never
                // in the future (a clock step), never before the wire began.
                let age = stamp.map_or(0, |t| real_now.saturating_sub(t));
                let arrival = mono_now.saturating_sub(age);
                let Some(entered) = switch.enter(src, arrival, size) else {
                    counters.dropped_queue += 1;
                    continue;
                };
                for &d in &dsts {
                    match switch.leave(d, entered, size) {
                        Some(release) => queues[d].push_back(Frame {
                            release,
                            data: frame.to_vec(),
                        }),
                        None => counters.dropped_queue += 1,
                    }
                }
            }
        }
        if Instant::now() >= next_stats {
            next_stats += Duration::from_secs(1);
            let _ = std::fs::write(
                lab::state_file("wire.stats"),
                format!(
                    "frames={} bytes={} dropped_queue={} dropped_send={} unknown={}\n",
                    counters.frames,
                    counters.bytes,
                    counters.dropped_queue,
                    counters.dropped_send,
                    counters.unknown
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_to(mac: [u8; 6]) -> Vec<u8> {
        let mut f = mac.to_vec();
        f.extend_from_slice(&lab::host_mac(0));
        f.extend_from_slice(&[0x08, 0x00, 0, 0]);
        f
    }

    #[test]
    fn frames_go_where_their_mac_says() {
        let mut out = Vec::new();
        destinations(&frame_to(lab::host_mac(2)), 0, 4, &mut out);
        assert_eq!(out, [2]);
        destinations(&frame_to([0xff; 6]), 1, 4, &mut out);
        assert_eq!(out, [0, 2, 3]);
        destinations(&frame_to([0x33, 0x33, 0, 0, 0, 1]), 3, 4, &mut out);
        assert_eq!(out, [0, 1, 2]);
        destinations(&frame_to(lab::host_mac(7)), 0, 4, &mut out);
        assert!(out.is_empty());
        destinations(&frame_to(lab::host_mac(0)), 0, 4, &mut out);
        assert!(out.is_empty());
        destinations(&[0; 10], 0, 4, &mut out);
        assert!(out.is_empty());
    }
}
