//! Telling a peer host that vanished from one that is merely slow.
//!
//! A peer whose process ends, even killed, has its kernel close the
//! connection, which this rank sees at once. A peer *host* that vanishes
//! (power loss, a cut network) sends nothing more, and TCP alone would let a
//! rank waiting for it wait very long: for ever on an idle link, and about
//! 15 minutes (Linux's `tcp_retries2`) on a link with data sent and not yet
//! acknowledged, during which keepalive probes are not sent. So every link
//! is watched two ways, both bounded by `MTTL_LINK_TIMEOUT` (`limit`,
//! 25 s by default):
//!
//! - **idle**: keepalive probes ([`Liveness::keepalive`]) after
//!   `limit - 3 × interval` of silence, one every `interval` (`limit / 5`),
//!   the link failing after three unanswered; the kernel reports that as a
//!   timed-out connection, which the next look at the link turns into a
//!   lost peer;
//! - **data outstanding**: while a rank waits parked, or polls without
//!   parking and finds nothing (every 1024th such poll), it looks at each
//!   link's `TCP_INFO` at most every `interval` ([`Liveness::due`]); a link
//!   with data sent and unacknowledged that has received no acknowledgement
//!   at all for `limit` fails ([`unanswered_for`]).
//!
//! A host that is alive always answers: its kernel acknowledges data and
//! probes whatever its program does, so a rank that is busy, stopped, or
//! not reading (its receive window full: then nothing is unacknowledged,
//! the window probes are answered) is never taken for gone. Staged here
//! with two network namespaces and a link cut between them
//! (`tests/vanished_host.rs`).

use std::time::{Duration, Instant};

/// When a rank last looked at its links' acknowledgements, and how long a
/// link may go unanswered.
#[derive(Debug)]
pub(super) struct Liveness {
    limit: Duration,
    last_look: Instant,
}

impl Liveness {
    /// Watches links against `limit` (`MTTL_LINK_TIMEOUT`).
    pub(super) fn new(limit: Duration) -> Liveness {
        Liveness {
            limit,
            last_look: Instant::now(),
        }
    }

    /// How long a link may go unanswered.
    pub(super) fn limit(&self) -> Duration {
        self.limit
    }

    /// The time between keepalive probes, and between looks at the links
    /// while parked: a fifth of the limit, at least a second.
    pub(super) fn interval(&self) -> Duration {
        Duration::from_secs((self.limit.as_secs() / 5).max(1))
    }

    /// The keepalive probes every link gets: the first after
    /// `limit - 3 × interval` of silence, then one every `interval`, and the
    /// link fails after three unanswered, `limit` after the silence began.
    pub(super) fn keepalive(&self) -> socket2::TcpKeepalive {
        let interval = self.interval();
        let idle = self
            .limit
            .saturating_sub(3 * interval)
            .max(Duration::from_secs(1));
        socket2::TcpKeepalive::new()
            .with_time(idle)
            .with_interval(interval)
            .with_retries(3)
    }

    /// The longest a parked wait may sleep in the kernel, `wait` (`None`:
    /// without limit) capped by the time left until the next look.
    pub(super) fn cap(&self, wait: Option<Duration>, now: Instant) -> Duration {
        let next_look = self.interval().saturating_sub(now - self.last_look);
        wait.map_or(next_look, |w| w.min(next_look))
    }

    /// Whether the links are due for a look at `now`; if so, the next one
    /// is due an interval later.
    pub(super) fn due(&mut self, now: Instant) -> bool {
        if now - self.last_look < self.interval() {
            return false;
        }
        self.last_look = now;
        true
    }
}

/// How long the link `fd` has had data sent and unacknowledged without
/// receiving any acknowledgement, if it has such data: `None` if every byte
/// sent is acknowledged (or this system does not say).
#[cfg(target_os = "linux")]
pub(super) fn unanswered_for(fd: std::os::fd::RawFd) -> std::io::Result<Option<Duration>> {
    // SAFETY: `tcp_info` is plain integers, valid when zeroed.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes, and the kernel writes at
    // most that many (fewer on an older kernel: the rest stays zero).
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((info.tcpi_unacked > 0).then(|| Duration::from_millis(u64::from(info.tcpi_last_ack_recv))))
}

/// Elsewhere, idle links only are watched (keepalive).
#[cfg(not(target_os = "linux"))]
pub(super) fn unanswered_for(_fd: std::os::fd::RawFd) -> std::io::Result<Option<Duration>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_fit_the_limit() {
        for (limit, idle, interval) in [(25, 10, 5), (5, 2, 1), (7, 4, 1), (60, 24, 12)] {
            let watch = Liveness::new(Duration::from_secs(limit));
            assert_eq!(watch.interval(), Duration::from_secs(interval), "{limit}");
            let probes = watch.keepalive();
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("a socket");
            socket.set_tcp_keepalive(&probes).expect("keepalive set");
            assert_eq!(
                socket.tcp_keepalive_time().unwrap(),
                Duration::from_secs(idle),
                "{limit}"
            );
            assert_eq!(
                socket.tcp_keepalive_interval().unwrap(),
                Duration::from_secs(interval)
            );
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), 3);
            assert_eq!(idle + 3 * interval, limit);
        }
    }

    #[test]
    fn looks_come_an_interval_apart() {
        let mut watch = Liveness::new(Duration::from_secs(10));
        let start = watch.last_look;
        assert!(!watch.due(start + Duration::from_millis(1999)));
        assert_eq!(
            watch.cap(None, start + Duration::from_millis(500)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            watch.cap(Some(Duration::from_millis(20)), start),
            Duration::from_millis(20)
        );
        assert!(watch.due(start + Duration::from_secs(2)));
        assert!(!watch.due(start + Duration::from_secs(3)));
        assert_eq!(
            watch.cap(None, start + Duration::from_secs(5)),
            Duration::ZERO
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_link_whose_data_is_acknowledged_is_not_unanswered() {
        use std::io::{Read, Write};
        use std::net::{TcpListener, TcpStream};
        use std::os::fd::AsRawFd;

        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
        let (mut server, _) = listener.accept().expect("accept");
        client.write_all(&[7; 1000]).expect("write");
        let mut got = [0; 1000];
        server.read_exact(&mut got).expect("read");
        // The peer's kernel acknowledged the bytes as they arrived; allow
        // for the acknowledgement to be on its way.
        let deadline = Instant::now() + Duration::from_secs(5);
        while unanswered_for(client.as_raw_fd())
            .expect("TCP_INFO")
            .is_some()
        {
            assert!(Instant::now() < deadline, "data never acknowledged");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(unanswered_for(server.as_raw_fd()).expect("TCP_INFO"), None);
    }
}
