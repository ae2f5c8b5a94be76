//! How a rank moves bytes and waits: one look at every link (reading what
//! arrived into messages, flushing what waits to leave), the reader of one
//! link, and the wait that spins, then parks, until a condition holds.
//! Failing a link (lost, malformed, its host gone silent) is recorded here,
//! and reported by the operations that need that peer.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::Events;

use super::frame::{Frame, FrameKind, ReadError};
use super::liveness::LinkSigns;
use super::{Peer, PeerState, TcpComm};
use crate::comm::{Message, Rank};
use crate::error::{CommError, ErrorKind, Op};

/// After how many polls that found nothing a rank that never parks
/// looks at its links' acknowledgements (at most once per liveness
/// interval; see [`TcpComm::check_links`]): a poll costs a system call, so
/// this adds a clock reading to one in a thousand.
const EMPTY_POLLS_PER_LOOK: u32 = 1024;

/// While a wait spins: how many looks at the network make a round, after
/// which it reads the clock, offers the core to other processes and, if it
/// reads one link directly, polls them all (see `TcpComm::wait_until`).
const POLLS_PER_ROUND: u32 = 8;

impl TcpComm {
    /// Polls the sockets once, waiting up to `wait` (`None`: until one is
    /// ready), reads every readable link and flushes every writable one.
    /// Returns how many links were ready: 0 means nothing happened.
    pub(super) fn progress(&mut self, wait: Option<Duration>) -> Result<usize, io::Error> {
        // Links stopped at a large payload go on: whoever wanted it in
        // place would have taken it before anything else. Unless a
        // blocking send waits and enough is held already: see
        // `sends::HELD_WHILE_SENDING`.
        let hold = self.sending && {
            let held: usize = self.incoming.iter().map(|m| m.data.len()).sum();
            held >= super::sends::HELD_WHILE_SENDING
        };
        self.hold_paused = hold && !std::mem::take(&mut self.stalled);
        let resumed = if self.hold_paused {
            0
        } else {
            self.resume_paused()
        };
        self.hold_paused = hold;
        let wait = if resumed > 0 {
            Some(Duration::ZERO)
        } else {
            wait
        };
        let Some(poll) = &mut self.poll else {
            if let Some(w) = wait {
                if !w.is_zero() {
                    std::thread::sleep(w);
                }
            }
            return Ok(0);
        };
        match poll.poll(&mut self.events, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        }
        // The events are moved out while their links are served (which
        // needs `self`), and back for the next poll: no copy, no allocation.
        let events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        let mut n = 0;
        for ev in events.iter() {
            if ev.token() == super::links::WAKE {
                n += 1;
                continue;
            }
            let r = ev.token().0;
            let closed = ev.is_read_closed() || ev.is_error();
            if ev.is_readable() || closed {
                self.read_peer(r, closed);
            }
            if ev.is_writable() {
                self.flush_peer(r);
            }
            n += 1;
        }
        self.events = events;
        // Links the link thread made (it wakes the poll for each, but one
        // wake-up may stand for several, and a look that missed it still
        // takes them).
        n += self.take_links();
        if n + resumed == 0 {
            // A caller polling without parking (a loop of `probe` or
            // `send_done`) looks at the links now and then too.
            self.empty_polls = self.empty_polls.wrapping_add(1);
            if self.empty_polls % EMPTY_POLLS_PER_LOOK == 0 {
                self.check_links();
            }
        }
        Ok(n + resumed)
    }

    /// Reads on, into vectors, every link stopped at a large payload but
    /// the one being placed, each to its next large payload (one look
    /// takes one payload per link: a look during a blocking send that
    /// reads on past the bound of `sends::HELD_WHILE_SENDING` must not
    /// take all that waits); returns how many there were.
    fn resume_paused(&mut self) -> usize {
        let links = std::mem::take(&mut self.paused);
        let mut resumed = 0;
        for r in links {
            if self.placing == Some(r) {
                if !self.paused.contains(&r) {
                    self.paused.push(r);
                }
                continue;
            }
            // Reading resumes it (and may stop at the next one, which
            // notes it again).
            self.read_peer(r, false);
            resumed += 1;
        }
        resumed
    }

    /// Reads everything `r`'s link has now (to its end if `closed`);
    /// returns whether it read anything or found the link ended.
    ///
    /// A reader stopped at a large payload goes on past it, unless
    /// `recv_from_into` is placing it; one that stops at a large payload is
    /// noted in `paused`.
    pub(super) fn read_peer(&mut self, r: Rank, closed: bool) -> bool {
        let TcpComm {
            peers,
            incoming,
            poll,
            lost,
            paused,
            placing,
            hold_paused,
            ..
        } = self;
        let Some(peer) = peers.get_mut(r).and_then(Option::as_mut) else {
            return false;
        };
        if matches!(
            peer.state,
            PeerState::Closed | PeerState::Lost(_) | PeerState::Malformed(_)
        ) || *placing == Some(r)
        {
            return false;
        }
        if *hold_paused && peer.reader.paused().is_some() {
            // Stays stopped; noted, so that a later look resumes it.
            if !paused.contains(&r) {
                paused.push(r);
            }
            return false;
        }
        let before = peer.reader.bytes_read();
        let mut goodbye = false;
        let result = peer.reader.resume().and_then(|()| {
            peer.reader
                .read_from_socket(
                    &mut peer.stream,
                    closed,
                    |Frame { header, payload }| match header.kind {
                        FrameKind::Data => incoming.push_back(Message {
                            source: r,
                            tag: header.tag,
                            data: payload,
                        }),
                        FrameKind::Goodbye => goodbye = true,
                    },
                )
        });
        if goodbye && peer.state == PeerState::Open {
            peer.state = PeerState::SaidGoodbye;
        }
        let end = match result {
            Ok(()) => {
                if peer.reader.paused().is_some() && !paused.contains(&r) {
                    paused.push(r);
                }
                let got = peer.reader.bytes_read() != before;
                if got {
                    peer.read_at_seq = peer.next_seq;
                }
                return got;
            }
            Err(ReadError::Closed { mid_frame: false }) if peer.state == PeerState::SaidGoodbye => {
                PeerState::Closed
            }
            Err(ReadError::Closed { mid_frame }) => PeerState::Lost(if mid_frame {
                "its connection closed in the middle of a message".into()
            } else {
                "its connection closed without a goodbye: the process exited or was killed".into()
            }),
            Err(ReadError::Io(e)) => PeerState::Lost(format!("connection error: {e}")),
            Err(ReadError::Malformed(m)) => PeerState::Malformed(m),
        };
        if let Some(poll) = poll {
            let _ = poll.registry().deregister(&mut peer.stream);
        }
        if end != PeerState::Closed && lost.is_none() {
            *lost = Some((r, end.clone()));
        }
        peer.state = end;
        true
    }

    /// Whether a wait for `r`'s messages may poll by reading `r`'s link
    /// alone: this rank has sent `r` something since the link last
    /// delivered (an answer is awaited: a round trip, which a read per look
    /// shortens), the link is open, has nothing waiting to be written (which
    /// only the poll's writable events would flush), nobody is placing its
    /// payload, and no link waits to be resumed.
    ///
    /// A stream's receiver, which sends nothing back, polls instead: reads
    /// that find nothing lock the socket, and the sender's segments that
    /// arrive meanwhile are then processed late, by the reader, which slows
    /// a stream of small messages.
    fn reads_directly(&self, r: Rank) -> bool {
        self.paused.is_empty()
            && self.placing != Some(r)
            && self
                .peers
                .get(r)
                .and_then(Option::as_ref)
                .is_some_and(|peer| {
                    peer.next_seq != peer.read_at_seq
                        && peer.state == PeerState::Open
                        && peer.out.is_empty()
                        && peer.reader.paused().is_none()
                })
    }

    pub(super) fn fail_peer(
        peer: &mut Peer,
        lost: &mut Option<(Rank, PeerState)>,
        r: Rank,
        why: String,
    ) {
        if matches!(peer.state, PeerState::Open | PeerState::SaidGoodbye) {
            peer.state = PeerState::Lost(why);
            if lost.is_none() {
                *lost = Some((r, peer.state.clone()));
            }
        }
    }

    /// While parked, or polling and finding nothing, at most once per
    /// [`Liveness::interval`](super::liveness::Liveness::interval): fails every open link whose peer's
    /// host has shown no sign of life it owed for `MTTL_LINK_TIMEOUT` (see
    /// [`liveness`]).
    pub(super) fn check_links(&mut self) {
        if !self.liveness.due(Instant::now()) {
            return;
        }
        let limit = self.liveness.limit();
        for (r, slot) in self.peers.iter_mut().enumerate() {
            let Some(peer) = slot
                .as_mut()
                .filter(|p| p.watched && p.state == PeerState::Open)
            else {
                continue;
            };
            // A link the kernel cannot describe is left to fail by itself.
            let Ok(Some(signs)) = LinkSigns::of(peer.stream.as_raw_fd()) else {
                continue;
            };
            let Some(silent) = signs.silence() else {
                continue;
            };
            if silent >= limit {
                let owed = if signs.unacked {
                    "acknowledged nothing sent to it"
                } else {
                    "answered no keepalive probe and sent nothing"
                };
                let why = format!(
                    "its host has {owed} for {} s (MTTL_LINK_TIMEOUT is {} s): \
                     it is down or cut off from this one",
                    silent.as_secs(),
                    limit.as_secs()
                );
                Self::fail_peer(peer, &mut self.lost, r, why);
            }
        }
    }

    /// Spins, then parks, until `ready` says stop or `timeout` passes.
    /// Returns false on timeout.
    ///
    /// The spin lasts `MTTL_SPIN_US` from the last time a link was ready,
    /// not from the start of the wait: a message arriving in many pieces
    /// (a large one, or many small ones that are not the one awaited) keeps
    /// the rank spinning, so a stream never pays a wake-up per piece, while
    /// a rank with nothing arriving still parks after the spin.
    ///
    /// A wait for the messages of one link (`watch`) spins by reading that
    /// link alone, one system call per look, and polls every link only once
    /// per [`POLLS_PER_ROUND`] looks: a message then costs its read only, not
    /// a poll that reports it and then the read. Once per round too, the
    /// clock is read and other processes are offered the core.
    pub(super) fn wait_until(
        &mut self,
        op: Op,
        timeout: Option<Duration>,
        watch: Option<Rank>,
        mut ready: impl FnMut(&mut Self) -> Result<bool, CommError>,
    ) -> Result<bool, CommError> {
        if ready(self)? {
            return Ok(true);
        }
        let start = Instant::now();
        let mut active = start;
        let mut spinning = true;
        // Whether a link was ready since the clock was last read.
        let mut was_ready = false;
        let mut looks: u32 = 0;
        loop {
            let wait = if spinning {
                Some(Duration::ZERO)
            } else {
                timeout.map(|t| t.saturating_sub(start.elapsed()))
            };
            if self.poll.is_none() && wait.is_none() {
                return Err(self.error(
                    op,
                    ErrorKind::PeerLost {
                        peer: self.rank,
                        detail: "this job has one rank and nothing was sent to it: \
                                 the receive could never complete"
                            .into(),
                    },
                ));
            }
            looks = looks.wrapping_add(1);
            let round_done = looks % POLLS_PER_ROUND == 0;
            let ready_links = match watch {
                Some(r) if spinning && !round_done && self.reads_directly(r) => {
                    usize::from(self.read_peer(r, false))
                }
                _ if spinning => self.progress(wait).map_err(|e| self.io_error(op, e))?,
                _ => {
                    // Parked: wake for the next look at the links too.
                    let wait = self.liveness.cap(wait, Instant::now());
                    let ready_links = self
                        .progress(Some(wait))
                        .map_err(|e| self.io_error(op, e))?;
                    self.check_links();
                    ready_links
                }
            };
            if ready(self)? {
                return Ok(true);
            }
            was_ready |= ready_links > 0;
            // A timeout ends the wait, but only after one look at the
            // sockets; a zero one after exactly one.
            if spinning && !round_done && timeout != Some(Duration::ZERO) {
                continue;
            }
            let now = Instant::now();
            if timeout.is_some_and(|t| now - start >= t) {
                return Ok(false);
            }
            if was_ready {
                active = now;
                was_ready = false;
            }
            spinning = now - active < self.spin;
            // Spinning idly: let another process have the core if one wants
            // it (ranks oversubscribing the cores); returns at once when
            // none does.
            if spinning && ready_links == 0 {
                std::thread::yield_now();
            }
        }
    }

    pub(super) fn take_lost(&self, op: Op) -> Result<(), CommError> {
        match &self.lost {
            Some((r, state)) => Err(self.state_error(op, *r, state)),
            None => Ok(()),
        }
    }

    /// Whether any peer could still send us something: one with an open
    /// link, or one with no link that could still make one.
    pub(super) fn anyone_left(&self) -> bool {
        self.anyone_linked_left()
            || (0..self.size).any(|r| {
                r != self.rank
                    && self.peers[r].is_none()
                    && !matches!(self.dials[r], super::links::Dial::Failed(_))
            })
    }

    /// Whether any peer with a link could still send us something.
    pub(super) fn anyone_linked_left(&self) -> bool {
        self.peers
            .iter()
            .flatten()
            .any(|p| p.state == PeerState::Open)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::super::frame::Header;
    use super::super::test_deadline::within;
    use super::*;

    /// How long a link of these tests may take to deliver: loopback
    /// delivers at once, so running out means nothing will come.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// How long a whole test may take, joining ranks included: a read that
    /// never returns fails the test here (see `test_deadline`).
    const TEST_LIMIT: Duration = Duration::from_secs(60);

    /// Two ranks of a job, joined in this process.
    fn two_ranks() -> (TcpComm, TcpComm) {
        super::super::two_ranks_in_this_process()
    }

    /// Calls `look` until it returns true, failing with `what` after
    /// [`DEADLINE`].
    fn within_deadline(what: &str, mut look: impl FnMut() -> bool) {
        let start = Instant::now();
        while !look() {
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: nothing within {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Writes `bytes` raw on rank `from`'s link to rank `to`, as the frame
    /// writer would.
    fn write_raw(comm: &mut TcpComm, to: Rank, bytes: &[u8]) {
        let peer = comm.peers[to].as_mut().expect("a link");
        socket2::SockRef::from(&peer.stream)
            .set_nonblocking(false)
            .expect("a blocking link");
        peer.stream.write_all(bytes).expect("the bytes are written");
    }

    /// `read_peer` says whether it read anything: waits use it to tell a
    /// link that delivered from one that did not.
    #[test]
    fn reading_a_link_reports_whether_anything_came() {
        within(
            "reading_a_link_reports_whether_anything_came",
            TEST_LIMIT,
            || {
                let (mut comm, mut other) = two_ranks();
                assert!(!comm.read_peer(1, false), "nothing was sent yet");
                let mut frame = Header::data(7, 3, false).encode().to_vec();
                frame.extend_from_slice(b"abc");
                write_raw(&mut other, 0, &frame);
                within_deadline("the frame", || comm.read_peer(1, false));
                let m = comm.incoming.pop_front().expect("the message");
                assert_eq!((m.source, m.tag, &m.data[..]), (1, 7, &b"abc"[..]));
                assert!(!comm.read_peer(1, false), "nothing more came");
            },
        );
    }

    /// A connection reset in the middle of a frame fails the link, and the
    /// error names the peer and what the transport said.
    #[test]
    fn a_reset_mid_frame_is_a_lost_peer_named_in_the_error() {
        within(
            "a_reset_mid_frame_is_a_lost_peer_named_in_the_error",
            TEST_LIMIT,
            || {
                let mut large = Header::data(9, 1 << 20, false).encode().to_vec();
                large.extend_from_slice(&[1u8; 30_000]);
                let header = Header::data(9, 10, false).encode();
                for (what, bytes) in [("mid-header", &header[..10]), ("mid-payload", &large[..])] {
                    let (mut comm, mut other) = two_ranks();
                    write_raw(&mut other, 0, bytes);
                    let peer = other.peers[0].take().expect("a link");
                    // Closing with a zero linger resets the connection.
                    socket2::SockRef::from(&peer.stream)
                        .set_linger(Some(Duration::ZERO))
                        .expect("SO_LINGER");
                    drop(peer);
                    within_deadline(what, || {
                        comm.read_peer(1, false);
                        comm.lost.is_some()
                    });
                    let e = comm
                        .take_lost(Op::RecvFrom(1))
                        .expect_err("the link is lost");
                    assert_eq!(e.lost_peer(), Some(1), "{what}: {e}");
                    let text = e.to_string();
                    assert!(
                        text.starts_with(
                            "rank 0: recv_from rank 1: rank 1 is gone (connection error: "
                        ) && text.contains("reset"),
                        "{what}: {text}"
                    );
                }
            },
        );
    }
}
