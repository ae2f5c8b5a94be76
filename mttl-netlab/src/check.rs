//! `check`: is the lab faithful to its profile? Measured with a small TCP
//! probe built in, between two hosts:
//!
//! 1. the round trip between the hosts, 1-byte ping-pong, and this
//!    machine's own round trip, the same probe over `lo` inside the first
//!    host (the stacks and wake-ups every message pays anyway), taken in
//!    alternating batches so that both see the same load; expected: twice
//!    the latency plus twice the serialization of the probe's frame, plus
//!    the own round trip;
//! 2. the bandwidth: one TCP stream for the given time, measured by the
//!    receiver; expected the profile's rate (TCP's goodput at MTU 1500 is
//!    94% of the line rate, inside the 10% allowed);
//! 3. with the user-space wire, its CPU time over (2), per Gb carried, and
//!    the latency it applies after calibration ([`crate::calibrate`]).
//!
//! Each figure passes within 10% of what is expected ([`TOLERANCE`]).
//! Medians are used for round trips: this machine is shared, and a run's
//! tail says more about the other processes than about the lab; the 10th
//! and 90th percentiles are printed beside them.
//!
//! The probe's server and client are threads of this process that entered
//! the hosts' namespaces; every socket has a 5 s timeout.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::calibrate;
use crate::error::LabError;
use crate::lab::{self, Lab, WireKind};
use crate::link::Port;
use crate::sys;

const PROBE_PORT: u16 = 47_231;
const IO_TIMEOUT: Duration = Duration::from_secs(5);
const ROUND_TRIPS: usize = 2000;
/// Batches the round trips are taken in, alternating `lo` and the lab.
const ROUNDS: usize = 5;
/// A 1-byte TCP segment's frame: Ethernet 14, IPv4 20, TCP 20 + 12 of
/// timestamps, 1 of data.
pub(crate) const PROBE_FRAME: u64 = 67;
/// How far a figure may be from what is expected, as a fraction.
pub const TOLERANCE: f64 = 0.10;

fn probe_error(what: &str) -> impl Fn(std::io::Error) -> LabError + '_ {
    move |e| LabError::Probe(format!("{what}: {e}"))
}

/// What `check` measured.
#[derive(Debug)]
pub struct Measured {
    pub own_rtt: Samples,
    pub rtt: Samples,
    pub goodput_bps: f64,
    pub wire_cpu_s: Option<f64>,
}

/// Whether `measured` is within `tolerance` (a fraction) of `expected`.
pub fn within(measured: f64, expected: f64, tolerance: f64) -> bool {
    (measured - expected).abs() <= tolerance * expected
}

/// Round-trip samples, sorted.
#[derive(Debug, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    fn new(mut samples: Vec<Duration>) -> Samples {
        samples.sort_unstable();
        Samples(samples)
    }

    /// The `p`-th percentile (0 to 100); zero if there are no samples.
    pub fn percentile(&self, p: usize) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        self.0[(self.0.len() - 1) * p.min(100) / 100]
    }

    pub fn median(&self) -> Duration {
        self.percentile(50)
    }
}

/// What a probe connection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// 1-byte ping-pong until the client closes.
    PingPong,
    /// The client streams until it shuts down its side; the server answers
    /// with the bytes and the nanoseconds it took.
    Bulk,
}

/// Answers one probe connection.
fn serve(listener: TcpListener, what: Probe) -> Result<(), LabError> {
    listener
        .set_nonblocking(true)
        .map_err(probe_error("listener"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let accept = || -> Result<TcpStream, LabError> {
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).map_err(probe_error("accept"))?;
                    s.set_read_timeout(Some(IO_TIMEOUT))
                        .map_err(probe_error("accept"))?;
                    s.set_write_timeout(Some(IO_TIMEOUT))
                        .map_err(probe_error("accept"))?;
                    s.set_nodelay(true).map_err(probe_error("accept"))?;
                    return Ok(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err(LabError::Probe("no connection came within 20 s".into()));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(probe_error("accept")(e)),
            }
        }
    };
    if what == Probe::PingPong {
        let mut pings = accept()?;
        let mut byte = [0u8; 1];
        while pings.read(&mut byte).map_err(probe_error("ping-pong"))? == 1 {
            pings.write_all(&byte).map_err(probe_error("ping-pong"))?;
        }
        return Ok(());
    }
    let mut bulk = accept()?;
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    let mut first = None;
    loop {
        let n = bulk.read(&mut buf).map_err(probe_error("bulk receive"))?;
        if n == 0 {
            break;
        }
        first.get_or_insert_with(Instant::now);
        total += n as u64;
    }
    let took = first.map(|t| t.elapsed()).unwrap_or_default();
    let mut reply = total.to_le_bytes().to_vec();
    reply.extend_from_slice(&(took.as_nanos() as u64).to_le_bytes());
    bulk.write_all(&reply).map_err(probe_error("bulk reply"))
}

fn connect(addr: SocketAddr) -> Result<TcpStream, LabError> {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .map_err(|e| LabError::Probe(format!("cannot connect to {addr}: {e}")))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(probe_error("connect"))?;
    s.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(probe_error("connect"))?;
    s.set_nodelay(true).map_err(probe_error("connect"))?;
    Ok(s)
}

fn ping_pong(s: &mut TcpStream, count: usize) -> Result<Vec<Duration>, LabError> {
    let mut samples = Vec::with_capacity(count);
    let mut byte = [7u8; 1];
    for i in 0..count + count / 10 {
        let t = Instant::now();
        s.write_all(&byte).map_err(probe_error("ping"))?;
        s.read_exact(&mut byte).map_err(probe_error("pong"))?;
        if i >= count / 10 {
            samples.push(t.elapsed());
        }
    }
    Ok(samples)
}

/// This machine's own round trip: ping-pong over `lo` in namespace `ns`.
fn own_round_trip(ns: &str, count: usize) -> Result<Vec<Duration>, LabError> {
    sys::in_namespace(ns, move || {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(probe_error("bind"))?;
        let addr = listener.local_addr().map_err(probe_error("bind"))?;
        let server = std::thread::spawn(move || serve(listener, Probe::PingPong));
        let mut s = connect(addr)?;
        let rtt = ping_pong(&mut s, count)?;
        drop(s);
        server
            .join()
            .map_err(|_| LabError::Internal("probe server panicked".into()))??;
        Ok(rtt)
    })
}

/// Median round trips, this machine's own (over `lo` in host `from`) and
/// between hosts `from` and `to`, taken in `rounds` alternating batches of
/// `count`, so that both see the same load.
pub fn round_trips(
    from: usize,
    to: usize,
    rounds: usize,
    count: usize,
) -> Result<(Samples, Samples), LabError> {
    let mut own = Vec::with_capacity(rounds * count);
    let mut lab = Vec::with_capacity(rounds * count);
    for _ in 0..rounds {
        own.extend(own_round_trip(&lab::host_name(from), count)?);
        let listener = sys::in_namespace(&lab::host_name(to), || {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, PROBE_PORT))
                .map_err(probe_error("cannot listen on the probe port"))
        })?;
        let server = std::thread::spawn(move || serve(listener, Probe::PingPong));
        let addr = host_socket(to)?;
        lab.extend(sys::in_namespace(&lab::host_name(from), move || {
            let mut s = connect(addr)?;
            ping_pong(&mut s, count)
        })?);
        server
            .join()
            .map_err(|_| LabError::Internal("probe server panicked".into()))??;
    }
    Ok((Samples::new(own), Samples::new(lab)))
}

fn host_socket(host: usize) -> Result<SocketAddr, LabError> {
    let ip: Ipv4Addr = lab::host_addr(host)
        .parse()
        .map_err(|_| LabError::Internal("host address".into()))?;
    Ok(SocketAddr::V4(SocketAddrV4::new(ip, PROBE_PORT)))
}

/// Runs the probe from host `from` to host `to`.
pub fn measure(from: usize, to: usize, seconds: f64) -> Result<Measured, LabError> {
    let (own_rtt, rtt) = round_trips(from, to, ROUNDS, ROUND_TRIPS / ROUNDS)?;
    let listener = sys::in_namespace(&lab::host_name(to), || {
        TcpListener::bind((Ipv4Addr::UNSPECIFIED, PROBE_PORT))
            .map_err(probe_error("cannot listen on the probe port"))
    })?;
    let server = std::thread::spawn(move || serve(listener, Probe::Bulk));
    let addr = host_socket(to)?;
    let wire = Lab::wire_pid();
    let duration = Duration::from_secs_f64(seconds);
    let (goodput_bps, wire_cpu_s) = sys::in_namespace(&lab::host_name(from), move || {
        let mut s = connect(addr)?;
        let cpu_before = wire.and_then(sys::cpu_seconds);
        let chunk = vec![0x5au8; 1 << 16];
        let start = Instant::now();
        while start.elapsed() < duration {
            s.write_all(&chunk).map_err(probe_error("bulk send"))?;
        }
        s.shutdown(std::net::Shutdown::Write)
            .map_err(probe_error("bulk send"))?;
        let mut reply = [0u8; 16];
        s.read_exact(&mut reply)
            .map_err(probe_error("bulk reply"))?;
        let cpu = match (cpu_before, wire.and_then(sys::cpu_seconds)) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let total = u64::from_le_bytes(reply[..8].try_into().unwrap_or_default());
        let took = u64::from_le_bytes(reply[8..].try_into().unwrap_or_default());
        if took == 0 {
            return Err(LabError::Probe("the bulk stream carried nothing".into()));
        }
        Ok((total as f64 * 8.0 / (took as f64 / 1e9), cpu))
    })?;
    server
        .join()
        .map_err(|_| LabError::Internal("probe server panicked".into()))??;
    Ok(Measured {
        own_rtt,
        rtt,
        goodput_bps,
        wire_cpu_s,
    })
}

/// `check`: measures, prints, and returns whether every figure passed.
pub fn check(from: &str, to: &str, seconds: f64) -> Result<bool, LabError> {
    sys::require_root()?;
    let lab = Lab::load()?.ok_or(LabError::NotUp)?;
    let from_ns = lab::host_namespace(from)?;
    let to_ns = lab::host_namespace(to)?;
    if from_ns == to_ns {
        return Err(LabError::Usage(format!(
            "check: --from and --to are both {from_ns}; give two different hosts"
        )));
    }
    if lab.wire == WireKind::User && Lab::wire_pid().is_none() {
        return Err(LabError::Wire(
            "is not running (crashed or killed): run `mttl-netlab down`, then `up`".into(),
        ));
    }
    let (Some(a), Some(b)) = (lab::parse_host(&from_ns), lab::parse_host(&to_ns)) else {
        return Err(LabError::Internal("host names".into()));
    };
    let p = &lab.profile;
    let us = |s: f64| s * 1e6;
    println!("profile {p}; {from_ns} -> {to_ns}");
    let m = measure(a, b, seconds)?;
    let serialization = Port::new(p.rate_bps, p.queue_bytes).serialization_ns(PROBE_FRAME);
    let expected_rtt = 2.0 * (p.latency.as_secs_f64() + serialization as f64 / 1e9)
        + m.own_rtt.median().as_secs_f64();
    let rtt_ok = within(m.rtt.median().as_secs_f64(), expected_rtt, TOLERANCE);

    let bw_ok = within(m.goodput_bps, p.rate_bps as f64, TOLERANCE);
    println!(
        "round trip: {:.1} µs (median of {ROUND_TRIPS}); expected {:.1} µs = 2 x ({:.1} latency + {:.2} serialization) + {:.1} this machine's own (lo) -> {}",
        us(m.rtt.median().as_secs_f64()),
        us(expected_rtt),
        us(p.latency.as_secs_f64()),
        serialization as f64 / 1e3,
        us(m.own_rtt.median().as_secs_f64()),
        if rtt_ok { "ok (within 10%)" } else { "FAIL (off by more than 10%)" }
    );
    let spread = |s: &Samples| {
        format!(
            "{:.1}/{:.1}/{:.1}",
            us(s.percentile(10).as_secs_f64()),
            us(s.percentile(50).as_secs_f64()),
            us(s.percentile(90).as_secs_f64())
        )
    };
    println!(
        "round trip spread (p10/p50/p90 µs): between hosts {}, lo {}",
        spread(&m.rtt),
        spread(&m.own_rtt)
    );
    if lab.wire == WireKind::User {
        let applied = calibrate::applied_ns().unwrap_or(p.latency.as_nanos() as u64);
        println!(
            "calibration: the wire applies {:.1} µs of the profile's {:.1} µs one way; the rest is its own cost, measured by `up` (again: `mttl-netlab calibrate`)",
            applied as f64 / 1e3,
            us(p.latency.as_secs_f64())
        );
        let excess = (m.rtt.median().as_secs_f64() - expected_rtt) / 2.0;
        if !rtt_ok && applied == 0 && excess > 0.0 {
            println!(
                "calibration: the wire's own cost exceeds this profile's latency by {:.1} µs one way: on this machine the lab cannot be faster (a quieter machine helps; see docs/netlab.md)",
                us(excess)
            );
        }
    }
    println!(
        "bandwidth: {:.1} Mb/s TCP goodput over {seconds} s; rate {:.1} Mb/s -> {}",
        m.goodput_bps / 1e6,
        p.rate_bps as f64 / 1e6,
        if bw_ok {
            "ok (within 10%)"
        } else {
            "FAIL (off by more than 10%)"
        }
    );
    match (lab.wire, m.wire_cpu_s) {
        (WireKind::Netem, _) => println!("wire: kernel netem (its CPU cost is the kernel's)"),
        (WireKind::User, Some(cpu)) => {
            let gb = m.goodput_bps * seconds / 1e9;
            println!(
                "wire CPU: {cpu:.2} s over the bulk run, {:.2} CPU s per Gb carried ({:.0}% of a core at this rate)",
                cpu / gb.max(1e-9),
                100.0 * cpu / seconds
            );
        }
        (WireKind::User, None) => {
            println!("wire CPU: not measured (its /proc entry was unreadable)")
        }
    }
    Ok(rtt_ok && bw_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_is_symmetric_in_percent_of_expected() {
        assert!(within(95.0, 100.0, 0.10));
        assert!(within(110.0, 100.0, 0.10));
        assert!(!within(89.0, 100.0, 0.10));
        assert!(!within(111.0, 100.0, 0.10));
    }

    #[test]
    fn percentiles_come_from_the_sorted_samples() {
        let us = Duration::from_micros;
        let s = Samples::new((1..=11).rev().map(us).collect());
        assert_eq!(s.percentile(0), us(1));
        assert_eq!(s.median(), us(6));
        assert_eq!(s.percentile(10), us(2));
        assert_eq!(s.percentile(90), us(10));
        assert_eq!(s.percentile(100), us(11));
        assert_eq!(Samples::new(Vec::new()).median(), Duration::ZERO);
    }
}
