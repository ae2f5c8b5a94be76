//! Telling a peer host that vanished from one that is merely slow, or
//! quiet, or one of hundreds on the same machine.
//!
//! A peer whose process ends, even killed, has its kernel close the
//! connection, which this rank sees at once. A peer *host* that vanishes
//! (power loss, a cut network) sends nothing more, and TCP alone would let a
//! rank waiting for it wait very long: for ever on an idle link, and about
//! 15 minutes (Linux's `tcp_retries2`) on a link with data sent and not yet
//! acknowledged. So a rank judges each link by the *signs of life* its
//! kernel has seen from the peer's kernel ([`LinkSigns`], read from
//! `TCP_INFO`), and a link fails when it has shown none for
//! `MTTL_LINK_TIMEOUT` (`limit`, 25 s by default):
//!
//! 1. **Something to answer.** An idle link gets kernel keepalive probes
//!    ([`Liveness::keepalive`]): the first after an idle time drawn per link
//!    between a fifth and a half of the limit ([`Liveness::idle_time`]),
//!    then one every [`Liveness::probe_interval`] while unanswered. A live
//!    host's kernel answers each, whatever its program does. A link with
//!    data in flight needs no probe: the data's acknowledgements are the
//!    answers, and TCP retransmits what is lost.
//! 2. **The judgement is ours, not the kernel's.** The kernel is allowed
//!    127 unanswered probes (minutes), so it never closes a link on a few
//!    lost ones. Instead, while a rank waits parked, or polls without
//!    parking and finds nothing (every 1024th such poll), it looks at each
//!    link at most every [`Liveness::interval`] ([`Liveness::due`]) and
//!    fails one that has been silent for `limit` ([`LinkSigns::silence`]):
//!    - data unacknowledged: no acknowledgement for `limit`;
//!    - nothing to send: no acknowledgement (keepalive answers are
//!      acknowledgements) and no data received for `limit`;
//!    - data waiting for the peer's window to open: never (the peer is not
//!      reading, and its kernel answers the window probes: it is alive).
//! 3. **Why jitter and a count of silence, not three strikes.** Every link
//!    of a job goes idle at the same moment (the end of a phase). With one
//!    idle time for all, 256 ranks' 65,000 links would probe in the same
//!    instant, overflow the loopback queue (`netdev_max_backlog`), and the
//!    kernel, after three lost probes, would close healthy links. Drawn per
//!    link (and differing in each direction), the idle times spread the
//!    probes over seconds; and a link fails only after `limit` of silence,
//!    across at least six probes and TCP's retransmissions, not after three
//!    lost segments.
//!
//! A peer on this rank's own host ([`same_host`]) is not watched at all, and
//! its link gets no probes: its kernel is this rank's, which closes the
//! link at once if the peer's process ends, and cannot vanish without this
//! rank. So a job of hundreds of ranks on one machine sends no probes.
//!
//! A host that is alive always answers: its kernel acknowledges data and
//! probes whatever its program does, so a rank that is busy, stopped, or
//! not reading (its receive window full: then nothing is unacknowledged,
//! the window probes are answered) is never taken for gone. Staged here
//! with two network namespaces and a link cut between them
//! (`tests/vanished_host.rs`).

use std::time::{Duration, Instant};

use crate::comm::Rank;

/// How many unanswered keepalive probes the kernel allows before it closes
/// a link itself, on Linux: its maximum (`MAX_TCP_KEEPCNT`), so that the
/// judgement is [`LinkSigns::silence`]'s, minutes earlier.
const KERNEL_PROBES: u32 = 127;

/// When a rank last looked at its links' signs of life, and how long a
/// link may show none.
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

    /// How long a link may show no sign of life.
    pub(super) fn limit(&self) -> Duration {
        self.limit
    }

    /// The time between looks at the links while parked: a fifth of the
    /// limit, at least a second.
    pub(super) fn interval(&self) -> Duration {
        Duration::from_secs((self.limit.as_secs() / 5).max(1))
    }

    /// The time between keepalive probes on a link whose last probe went
    /// unanswered: a twelfth of the limit, at least a second, so that at
    /// least six fit between the longest idle time and the limit.
    pub(super) fn probe_interval(&self) -> Duration {
        Duration::from_secs((self.limit.as_secs() / 12).max(1))
    }

    /// How long the link from `me` to `peer` stays silent before its first
    /// keepalive probe: whole seconds (the kernel's unit) between a fifth
    /// and a half of the limit, drawn from the pair so that the links of a
    /// job, and the two directions of one link, spread their probes.
    pub(super) fn idle_time(&self, me: Rank, peer: Rank) -> Duration {
        let secs = self.limit.as_secs();
        let low = (secs / 5).max(1);
        let high = (secs / 2).max(low);
        let key = ((me as u64) << 32) ^ (peer as u64);
        Duration::from_secs(low + spread(key) % (high - low + 1))
    }

    /// The keepalive probes of the link from `me` to `peer` (see the module
    /// documentation, steps 1 and 2).
    pub(super) fn keepalive(&self, me: Rank, peer: Rank) -> socket2::TcpKeepalive {
        socket2::TcpKeepalive::new()
            .with_time(self.idle_time(me, peer))
            .with_interval(self.probe_interval())
            .with_retries(self.kernel_probes(me, peer))
    }

    /// How many unanswered probes the kernel allows: [`KERNEL_PROBES`] where
    /// `TCP_INFO` lets this rank judge; elsewhere as many as fit in the
    /// limit, the kernel judging.
    fn kernel_probes(&self, me: Rank, peer: Rank) -> u32 {
        if cfg!(target_os = "linux") {
            return KERNEL_PROBES;
        }
        let left = self.limit.saturating_sub(self.idle_time(me, peer));
        let fit = left.as_secs() / self.probe_interval().as_secs();
        u32::try_from(fit)
            .unwrap_or(KERNEL_PROBES)
            .clamp(1, KERNEL_PROBES)
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

/// Whether `link`'s peer is on this host: its address is this end's own,
/// or a loopback one. (Ranks on separate hosts, or in separate network
/// namespaces, have addresses of their own.)
pub(super) fn same_host(link: &std::net::TcpStream) -> bool {
    match (link.local_addr(), link.peer_addr()) {
        (Ok(local), Ok(peer)) => peer.ip() == local.ip() || peer.ip().is_loopback(),
        _ => false,
    }
}

/// A well-mixed 64-bit value from `key` (SplitMix64's finaliser): nearby
/// keys (rank pairs) give unrelated values.
fn spread(key: u64) -> u64 {
    let mut z = key.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What a link's kernel has seen of its peer's, from `TCP_INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LinkSigns {
    /// Data sent and not yet acknowledged.
    pub(super) unacked: bool,
    /// Data written and not yet sent (the peer's window is closed, or the
    /// congestion window full).
    pub(super) unsent: bool,
    /// Time since the last acknowledgement received (keepalive answers
    /// included).
    pub(super) since_ack: Duration,
    /// Time since the last data received.
    pub(super) since_data: Duration,
}

impl LinkSigns {
    /// How long the peer's host has shown no sign of life that it should
    /// have shown, if the link is in a state where it must (module
    /// documentation, step 2): `None` when nothing is owed.
    pub(super) fn silence(&self) -> Option<Duration> {
        if self.unacked {
            Some(self.since_ack)
        } else if self.unsent {
            None
        } else {
            Some(self.since_ack.min(self.since_data))
        }
    }

    /// The signs of the link `fd`, if this system tells them.
    #[cfg(target_os = "linux")]
    pub(super) fn of(fd: std::os::fd::RawFd) -> std::io::Result<Option<LinkSigns>> {
        // SAFETY: `tcp_info` is plain integers, valid when zeroed.
        let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        // SAFETY: `info` is writable for `len` bytes, and the kernel writes
        // at most that many (fewer on an older kernel: the rest stays zero,
        // so a kernel too old to count unsent bytes reports none).
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
        Ok(Some(LinkSigns {
            unacked: info.tcpi_unacked > 0,
            unsent: info.tcpi_notsent_bytes > 0,
            since_ack: Duration::from_millis(u64::from(info.tcpi_last_ack_recv)),
            since_data: Duration::from_millis(u64::from(info.tcpi_last_data_recv)),
        }))
    }

    /// Elsewhere, the kernel's keepalive alone watches the links.
    #[cfg(not(target_os = "linux"))]
    pub(super) fn of(_fd: std::os::fd::RawFd) -> std::io::Result<Option<LinkSigns>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_times_stay_in_their_range_and_leave_six_probes() {
        for limit in [5, 7, 12, 25, 60, 120] {
            let watch = Liveness::new(Duration::from_secs(limit));
            let low = Duration::from_secs((limit / 5).max(1));
            let high = Duration::from_secs((limit / 2).max(1));
            for me in 0..64 {
                for peer in (0..64).filter(|&p| p != me) {
                    let idle = watch.idle_time(me, peer);
                    assert!(low <= idle && idle <= high, "{limit}: {idle:?}");
                    // At least six probes between the first and the limit.
                    let probes = (Duration::from_secs(limit) - idle).as_secs()
                        / watch.probe_interval().as_secs();
                    assert!(probes >= 2, "{limit}: {probes}");
                    if limit >= 12 {
                        assert!(probes >= 6, "{limit}: {probes}");
                    }
                }
            }
        }
    }

    #[test]
    fn idle_times_spread_the_links_of_a_job() {
        let watch = Liveness::new(Duration::from_secs(25));
        // 5 s to 12 s: eight whole seconds, each drawn by about an eighth of
        // 256 ranks' 65,280 links, and the two directions of a link differ
        // about seven times in eight.
        let mut counts = [0usize; 13];
        let mut same_both_ways = 0;
        for me in 0..256 {
            for peer in (0..256).filter(|&p| p != me) {
                let idle = watch.idle_time(me, peer);
                assert_eq!(idle, watch.idle_time(me, peer), "deterministic");
                counts[idle.as_secs() as usize] += 1;
                same_both_ways += usize::from(idle == watch.idle_time(peer, me));
            }
        }
        let links = 256 * 255;
        for (secs, &n) in counts.iter().enumerate() {
            if (5..=12).contains(&secs) {
                assert!(
                    n > links / 8 * 9 / 10 && n < links / 8 * 11 / 10,
                    "{secs} s: {n} links"
                );
            } else {
                assert_eq!(n, 0, "{secs} s");
            }
        }
        assert!(same_both_ways < links / 8 * 11 / 10, "{same_both_ways}");
    }

    #[test]
    fn links_get_their_own_idle_time_and_many_kernel_probes() {
        let watch = Liveness::new(Duration::from_secs(25));
        assert_eq!(watch.probe_interval(), Duration::from_secs(2));
        assert_eq!(watch.interval(), Duration::from_secs(5));
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("a socket");
        socket
            .set_tcp_keepalive(&watch.keepalive(3, 9))
            .expect("keepalive set");
        assert_eq!(socket.tcp_keepalive_time().unwrap(), watch.idle_time(3, 9));
        assert_eq!(
            socket.tcp_keepalive_interval().unwrap(),
            Duration::from_secs(2)
        );
        #[cfg(target_os = "linux")]
        assert_eq!(socket.tcp_keepalive_retries().unwrap(), KERNEL_PROBES);
    }

    #[test]
    fn a_loopback_link_is_on_this_host() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        assert!(same_host(&client));
        assert!(same_host(&server));
    }

    #[test]
    fn silence_counts_only_what_the_peer_owes() {
        let s = Duration::from_secs;
        let signs = |unacked, unsent, ack, data| LinkSigns {
            unacked,
            unsent,
            since_ack: s(ack),
            since_data: s(data),
        };
        // Data in flight: only its acknowledgement answers.
        assert_eq!(signs(true, false, 30, 1).silence(), Some(s(30)));
        assert_eq!(signs(true, true, 2, 90).silence(), Some(s(2)));
        // Idle: keepalive answers or data from the peer both count.
        assert_eq!(signs(false, false, 40, 3).silence(), Some(s(3)));
        assert_eq!(signs(false, false, 4, 300).silence(), Some(s(4)));
        assert_eq!(signs(false, false, 26, 26).silence(), Some(s(26)));
        // Waiting for the peer's window: its kernel answers window probes.
        assert_eq!(signs(false, true, 600, 600).silence(), None);
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
    fn a_link_whose_data_is_acknowledged_has_just_shown_life() {
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
        let signs = loop {
            let signs = LinkSigns::of(client.as_raw_fd())
                .expect("TCP_INFO")
                .expect("Linux tells");
            if !signs.unacked {
                break signs;
            }
            assert!(Instant::now() < deadline, "data never acknowledged");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(!signs.unsent);
        assert!(signs.silence().expect("idle: owes answers") < Duration::from_secs(5));
        let server_signs = LinkSigns::of(server.as_raw_fd())
            .expect("TCP_INFO")
            .expect("Linux tells");
        assert!(server_signs.since_data < Duration::from_secs(5));
        assert!(server_signs.silence().expect("idle") < Duration::from_secs(5));
    }
}
