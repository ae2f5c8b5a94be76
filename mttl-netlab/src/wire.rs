//! The user-space wire: the switch of a lab on a kernel without netem.
//!
//! It runs in the `mttl-wire` namespace (started by `up`, in a session of its
//! own, pid in `/run/mttl-netlab/wire.pid`) with one `AF_PACKET` socket on
//! each host's switch port (`port<i>`, the far end of the host's `eth0`).
//! Each socket has a receive ring shared with the kernel (`PACKET_RX_RING`,
//! `TPACKET_V2`): the kernel writes each frame there with the time it
//! received it, and the wire reads it without a system call. Its loop,
//! single-threaded:
//!
//! 1. hand over every frame whose release time has come, to the port of its
//!    destination, in release order (each destination's queue is FIFO and
//!    its release times never decrease, see [`crate::link`]); sends bypass
//!    the port's qdisc (`PACKET_QDISC_BYPASS`), as a NIC's ring would;
//! 2. take every frame waiting in every ring, with the kernel's receive
//!    time, so that the wire's own lateness in reading neither adds to the
//!    latency nor bunches frames up in the queues; send each where its
//!    destination MAC says (hosts' MACs are fixed by index; broadcast and
//!    multicast go to every other host, unknown unicast nowhere), with the
//!    release time [`Switch`] gives it, or drop it if a queue is full;
//! 3. if the next release is less than [`SPIN_NS`] away, go round again at
//!    once (spinning costs no system call: the rings are memory), since a
//!    sleeping thread wakes late by tens of µs; else sleep in `ppoll` until
//!    a frame comes or [`SPIN_NS`] before the next release, with a timer
//!    slack of 1 ns.
//!
//! Frames it sends are not read back (`PACKET_IGNORE_OUTGOING`). Frames
//! waiting for release are kept in buffers that are reused, so the loop
//! allocates nothing once warm. The link latency it applies is the
//! profile's less the wire's own cost, as measured by `up`'s calibration
//! ([`crate::calibrate`]): it reads it from `wire.latency_ns` at start and
//! again on `SIGHUP`. It asks for real-time scheduling (`SCHED_FIFO`, the
//! kernel's RT throttling still leaves 5% to others) so that a busy
//! machine delays its releases less, and runs without it if refused.
//! Counters go to `wire.stats` every second; SIGTERM ends it.

use std::collections::VecDeque;
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::LabError;
use crate::lab::{self, Lab};
use crate::link::Switch;
use crate::sys;

/// How long before a release the wire stops sleeping and spins.
pub const SPIN_NS: u64 = 15_000;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V2: libc::c_int = 1;
/// A ring slot's status: the kernel owns it / the wire may read it.
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
/// Largest frame: MTU 9000 plus the Ethernet header, with room to spare.
const MAX_FRAME: usize = 9216;
/// Bytes of receive ring per port (as the socket buffer it replaces).
const RING_BYTES: usize = 4 << 20;

/// `struct tpacket_req` (linux/if_packet.h).
#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// `struct tpacket2_hdr` (linux/if_packet.h): the head of each ring slot.
#[repr(C)]
struct Tpacket2Hdr {
    status: AtomicU32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    sec: u32,
    nsec: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
    padding: [u8; 4],
}

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
    truncated: u64,
}

fn mono_ns(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

fn os_error(what: &str) -> LabError {
    LabError::Wire(format!("{what}: {}", std::io::Error::last_os_error()))
}

fn set_option(
    fd: libc::c_int,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
    device: &str,
) -> Result<(), LabError> {
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
    Ok(())
}

/// One switch port: a packet socket bound to the device, non-blocking, and
/// its receive ring.
struct Port {
    fd: libc::c_int,
    ring: *mut u8,
    ring_len: usize,
    slot_size: usize,
    slots: usize,
    /// The next slot to read.
    next: usize,
}

impl Port {
    fn open(device: &str, mtu: u32) -> Result<Port, LabError> {
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
        let mut port = Port {
            fd,
            ring: std::ptr::null_mut(),
            ring_len: 0,
            slot_size: 0,
            slots: 0,
            next: 0,
        };
        // The ring must be set up before binding, so that no frame is
        // received outside it.
        set_option(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V2, device)?;
        set_option(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, device)?;
        set_option(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1, device)?;
        set_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 4 << 20, device)?;
        // A slot holds the header, the link-layer address the kernel puts
        // before the frame, and the largest frame: a power of two >= 2 KiB.
        let slot_size = (mtu as usize + 14 + 128).next_power_of_two().max(2048);
        let slots_per_block = (64 * 1024 / slot_size).max(1);
        let block_size = slot_size * slots_per_block;
        let block_nr = (RING_BYTES / block_size).max(1);
        let req = TpacketReq {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: slot_size as u32,
            frame_nr: (slots_per_block * block_nr) as u32,
        };
        // SAFETY: `req` is a tpacket_req of the size given.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                SOL_PACKET,
                PACKET_RX_RING,
                (&req as *const TpacketReq).cast(),
                std::mem::size_of::<TpacketReq>() as u32,
            )
        };
        if rc != 0 {
            return Err(os_error(&format!("cannot make a receive ring on {device}")));
        }
        let ring_len = block_size * block_nr;
        // SAFETY: maps the ring the kernel just made for `fd`, whole.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(os_error(&format!(
                "cannot map the receive ring of {device}"
            )));
        }
        port.ring = ring.cast();
        port.ring_len = ring_len;
        port.slot_size = slot_size;
        port.slots = slots_per_block * block_nr;
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
        Ok(port)
    }

    /// Takes the next frame from the ring, if one waits: copies it into
    /// `out` (cleared first) and returns the kernel's receive time
    /// (`CLOCK_REALTIME`, ns) and whether it was cut short.
    fn take(&mut self, out: &mut Vec<u8>) -> Option<(u64, bool)> {
        // SAFETY: slot `next` lies inside the mapped ring (next < slots and
        // slots * slot_size <= ring_len), and each slot starts with a
        // tpacket2_hdr, aligned to 16 bytes.
        let header = unsafe { &*(self.ring.add(self.next * self.slot_size) as *const Tpacket2Hdr) };
        if header.status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return None;
        }
        let (mac, snaplen, len) = (header.mac as usize, header.snaplen as usize, header.len);
        let stamp = u64::from(header.sec) * 1_000_000_000 + u64::from(header.nsec);
        out.clear();
        if mac + snaplen <= self.slot_size {
            // SAFETY: the kernel wrote `snaplen` bytes at offset `mac` of
            // this slot (checked to lie inside it), and owns the slot no
            // more until its status is set back below.
            out.extend_from_slice(unsafe {
                std::slice::from_raw_parts(self.ring.add(self.next * self.slot_size + mac), snaplen)
            });
        }
        header.status.store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (self.next + 1) % self.slots;
        Some((stamp, out.len() as u32 != len))
    }

    /// Sends one frame; whether the kernel took it.
    fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: sending from a live buffer of the length given.
        unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) >= 0 }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: the ring was mapped by `open` with this length (if at
        // all) and the descriptor is this port's; both are released once.
        unsafe {
            if !self.ring.is_null() {
                libc::munmap(self.ring.cast(), self.ring_len);
            }
            libc::close(self.fd);
        }
    }
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

/// The one-way latency the wire applies, ns: what the calibration wrote,
/// else the profile's.
fn applied_latency(lab: &Lab) -> u64 {
    crate::calibrate::applied_ns().unwrap_or(lab.profile.latency.as_nanos() as u64)
}

/// The wire's main: runs until killed.
pub fn run() -> Result<(), LabError> {
    let lab = Lab::load()?.ok_or(LabError::NotUp)?;
    sys::enter_namespace(lab::WIRE_NS)?;
    // SAFETY: prctl with an integer argument changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let reload = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&reload))
        .map_err(|e| LabError::Wire(format!("cannot catch SIGHUP: {e}")))?;
    let hosts = lab.hosts;
    let mut ports: Vec<Port> = (0..hosts)
        .map(|i| Port::open(&format!("port{i}"), lab.profile.mtu))
        .collect::<Result<_, _>>()?;
    let mut latency_ns = applied_latency(&lab);
    let mut switch = Switch::new(
        hosts,
        lab.profile.rate_bps,
        lab.profile.queue_bytes,
        latency_ns,
    );
    let mut queues: Vec<VecDeque<Frame>> = (0..hosts).map(|_| VecDeque::new()).collect();
    let mut pollfds: Vec<libc::pollfd> = ports
        .iter()
        .map(|p| libc::pollfd {
            fd: p.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut counters = Counters::default();
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut buf = Vec::with_capacity(MAX_FRAME);
    let mut dsts = Vec::with_capacity(hosts);
    let origin = Instant::now();
    let mut next_stats = origin + Duration::from_secs(1);
    std::fs::write(lab::ready_file(), b"ready\n")
        .map_err(|e| LabError::Wire(format!("cannot write its ready file: {e}")))?;
    let rt = real_time();
    eprintln!(
        "wire: {hosts} hosts, {}; applied latency {:.1} µs; {}",
        lab.profile,
        latency_ns as f64 / 1e3,
        if rt {
            "SCHED_FIFO"
        } else {
            "normal scheduling (SCHED_FIFO refused)"
        }
    );
    loop {
        if reload.swap(false, Ordering::Relaxed) {
            latency_ns = applied_latency(&lab);
            switch.set_latency(latency_ns);
            eprintln!(
                "wire: applied latency now {:.1} µs",
                latency_ns as f64 / 1e3
            );
        }
        // Step 1.
        let mut now = mono_ns(origin);
        for (d, queue) in queues.iter_mut().enumerate() {
            while queue.front().is_some_and(|f| f.release <= now) {
                let Some(frame) = queue.pop_front() else {
                    break;
                };
                if ports[d].send(&frame.data) {
                    counters.frames += 1;
                    counters.bytes += frame.data.len() as u64;
                } else {
                    counters.dropped_send += 1;
                }
                spare.push(frame.data);
            }
        }
        // Step 2.
        let mut received = false;
        let (mono_now, real_now) = (mono_ns(origin), realtime_ns());
        for (src, port) in ports.iter_mut().enumerate() {
            while let Some((stamp, truncated)) = port.take(&mut buf) {
                received = true;
                if truncated {
                    counters.truncated += 1;
                    continue;
                }
                let size = buf.len() as u64;
                destinations(&buf, src, hosts, &mut dsts);
                if dsts.is_empty() {
                    counters.unknown += 1;
                    continue;
                }
                // The kernel's receive time on the monotonic clock; never
                // in the future (a clock step), never before the wire began.
                let arrival = mono_now.saturating_sub(real_now.saturating_sub(stamp));
                let Some(entered) = switch.enter(src, arrival, size) else {
                    counters.dropped_queue += 1;
                    continue;
                };
                for &d in &dsts {
                    match switch.leave(d, entered, size) {
                        Some(release) => {
                            let mut data = spare.pop().unwrap_or_default();
                            data.clear();
                            data.extend_from_slice(&buf);
                            queues[d].push_back(Frame { release, data });
                        }
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
                    "frames={} bytes={} dropped_queue={} dropped_send={} unknown={} truncated={}\n",
                    counters.frames,
                    counters.bytes,
                    counters.dropped_queue,
                    counters.dropped_send,
                    counters.unknown,
                    counters.truncated
                ),
            );
        }
        // Step 3.
        now = mono_ns(origin);
        let next = queues
            .iter()
            .filter_map(|q| q.front().map(|f| f.release))
            .min();
        let wait_ns = match next {
            Some(t) => t.saturating_sub(now).saturating_sub(SPIN_NS),
            None => 100_000_000,
        };
        if received || wait_ns == 0 {
            std::hint::spin_loop();
            continue;
        }
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
