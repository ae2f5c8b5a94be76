//! Links made when first needed, on the rank's side: asking the link
//! thread ([`bootstrap`](super::bootstrap), which connects, accepts and
//! settles crossings) for a link, waiting for it, and taking the links it
//! makes into the rank's poll.
//!
//! The rules:
//!
//! 1. A send to a peer with no link asks for one and waits for it, under
//!    `MTTL_CONNECT_TIMEOUT`, reading every link meanwhile (a rank waiting
//!    for a link still takes what its other peers send, and the links they
//!    make to it), like any other wait ([`TcpComm::wait_until`]).
//! 2. A receive from a peer with no link asks for one too, without waiting
//!    for it: the peer's first message comes on whichever connection the
//!    pair settles on, and the link lets the receive see the peer end (a
//!    finished or dead peer refuses the connection, or closes the link)
//!    instead of waiting forever.
//! 3. A link the peer makes first is taken whenever the link thread wakes
//!    the poll, whatever the rank is doing: a link is one more readable
//!    socket.
//! 4. A failure to make a link is final for that peer: the peer has
//!    finished or is gone, and every operation addressed to it says why.
//! 5. While the rank finishes, a link made to it gets a goodbye at once
//!    (see `Comm::finish`), so the peer learns it has finished.

use std::io::Write;

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::frame::{FrameReader, Header};
use super::liveness;
use super::socket::set_send_buffer;
use super::{Peer, PeerState, TcpComm};
use crate::comm::Rank;
use crate::error::{CommError, ErrorKind, Op};

/// The poll token of the link thread's waker; a link's token is its rank.
pub(super) const WAKE: Token = Token(usize::MAX);

/// Where the rank stands on making a link to a peer it has none to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Dial {
    /// Nobody asked yet.
    Idle,
    /// Asked; the link is on its way (or the peer's is).
    Asked,
    /// The link could not be made: why.
    Failed(String),
}

impl TcpComm {
    /// Rule 2: asks for a link to `peer` unless it has one or one was asked
    /// for.
    pub(super) fn ask_link(&mut self, peer: Rank) {
        if peer == self.rank || self.peers[peer].is_some() || self.dials[peer] != Dial::Idle {
            return;
        }
        let asked = self.guard.as_ref().is_some_and(|g| g.ask(peer));
        self.dials[peer] = if asked {
            Dial::Asked
        } else {
            Dial::Failed("this rank has no link thread (it has finished)".into())
        };
    }

    /// Rule 1: makes sure `peer` has a link, asking for one and waiting
    /// for it if needed.
    pub(super) fn ensure_link(&mut self, op: Op, peer: Rank) -> Result<(), CommError> {
        if self.peers[peer].is_some() {
            return Ok(());
        }
        self.ask_link(peer);
        let limit = self.connect_timeout;
        let made = self.wait_until(op, Some(limit), None, |c| {
            if c.peers[peer].is_some() {
                return Ok(true);
            }
            c.dial_failure(op, peer)?;
            Ok(false)
        })?;
        if made {
            return Ok(());
        }
        Err(self.error(
            op,
            ErrorKind::PeerLost {
                peer,
                detail: format!(
                    "no link to it could be made within {} s (MTTL_CONNECT_TIMEOUT)",
                    limit.as_secs_f64()
                ),
            },
        ))
    }

    /// The error of a peer no link to could be made, if so.
    pub(super) fn dial_failure(&self, op: Op, peer: Rank) -> Result<(), CommError> {
        match &self.dials[peer] {
            Dial::Failed(why) if self.peers[peer].is_none() => Err(self.error(
                op,
                ErrorKind::PeerLost {
                    peer,
                    detail: format!("no link could be made: {why}"),
                },
            )),
            _ => Ok(()),
        }
    }

    /// Rule 3: takes every link the link thread made, and every failure
    /// to make one. Returns how many links were taken.
    pub(super) fn take_links(&mut self) -> usize {
        let mut taken = 0;
        while let Some((r, made)) = self.guard.as_ref().and_then(|g| g.take()) {
            if r >= self.size || r == self.rank || self.peers[r].is_some() {
                // The link thread admits each peer once; nothing to take.
                continue;
            }
            match made.and_then(|link| self.install_link(r, link)) {
                Ok(()) => {
                    taken += 1;
                    if self.finishing {
                        self.say_goodbye_on_new_link(r);
                    }
                    // Bytes that came before the link was registered raise
                    // no readiness edge of their own.
                    self.read_peer(r, false);
                }
                Err(why) => self.dials[r] = Dial::Failed(why),
            }
        }
        taken
    }

    /// Makes `link` the rank's link to `r`: non-blocking, its send buffer
    /// sized, probed if the peer is on another host, registered with the
    /// poll.
    pub(super) fn install_link(
        &mut self,
        r: Rank,
        link: std::net::TcpStream,
    ) -> Result<(), String> {
        let fail = |what: &str, e: std::io::Error| format!("setting up its link: {what}: {e}");
        link.set_nonblocking(true)
            .map_err(|e| fail("non-blocking mode", e))?;
        if let Some(bytes) = self.send_buffer {
            set_send_buffer(&link, bytes).map_err(|e| fail("send buffer", e))?;
        }
        let watched = !liveness::same_host(&link);
        if watched {
            socket2::SockRef::from(&link)
                .set_tcp_keepalive(&self.liveness.keepalive(self.rank, r))
                .map_err(|e| fail("keepalive", e))?;
        }
        let mut stream = TcpStream::from_std(link);
        let Some(poll) = &self.poll else {
            return Err("this rank has no poll".into());
        };
        poll.registry()
            .register(
                &mut stream,
                Token(r),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| fail("registering it", e))?;
        let mut reader = FrameReader::new(self.max_len);
        reader.pause_large();
        self.peers[r] = Some(Peer {
            stream,
            reader,
            out: std::collections::VecDeque::new(),
            next_seq: 0,
            done_seq: 0,
            read_at_seq: 0,
            state: PeerState::Open,
            watched,
        });
        Ok(())
    }

    /// Rule 5: a goodbye and a half-close on a link made while this rank
    /// finishes. Its send buffer is empty, so the frame fits at once; a
    /// link that takes nothing is lost.
    fn say_goodbye_on_new_link(&mut self, r: Rank) {
        let bye = Header::goodbye().encode();
        let Some(peer) = self.peers[r].as_mut() else {
            return;
        };
        match peer.stream.write(&bye) {
            Ok(n) if n == bye.len() => {
                let _ = peer.stream.shutdown(std::net::Shutdown::Write);
            }
            Ok(_) => Self::fail_peer(
                peer,
                &mut self.lost,
                r,
                "its new link took only part of a goodbye".into(),
            ),
            Err(e) => Self::fail_peer(peer, &mut self.lost, r, format!("connection error: {e}")),
        }
    }

    /// Whether links asked for may still come (rank finishing waits for
    /// them, so that the peers it links to at the last moment hear its
    /// goodbye).
    pub(super) fn links_on_their_way(&self) -> bool {
        self.dials
            .iter()
            .zip(&self.peers)
            .any(|(d, p)| *d == Dial::Asked && p.is_none())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::backend::tcp::{ranks_in_this_process, test_deadline::within};
    use crate::comm::Comm;

    /// How long a whole test may take: loopback links are made in
    /// milliseconds, so running out means a wait that never ends.
    const TEST_LIMIT: Duration = Duration::from_secs(60);

    /// How long a receive of these tests waits: loopback delivers at once.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// Runs `body` for every rank, each on a thread of its own, and gives
    /// the ranks back in rank order.
    fn on_every_rank(ranks: Vec<TcpComm>, body: impl Fn(&mut TcpComm) + Sync) -> Vec<TcpComm> {
        std::thread::scope(|s| {
            let running: Vec<_> = ranks
                .into_iter()
                .map(|mut c| {
                    let body = &body;
                    s.spawn(move || {
                        body(&mut c);
                        c
                    })
                })
                .collect();
            running
                .into_iter()
                .map(|t| t.join().expect("a rank ran"))
                .collect()
        })
    }

    fn finish_all(ranks: Vec<TcpComm>) {
        on_every_rank_owned(ranks, |c| c.finish().expect("a rank finishes"));
    }

    fn on_every_rank_owned(ranks: Vec<TcpComm>, body: impl Fn(TcpComm) + Sync) {
        std::thread::scope(|s| {
            for c in ranks {
                let body = &body;
                s.spawn(move || body(c));
            }
        });
    }

    fn linked(c: &TcpComm) -> Vec<Rank> {
        (0..c.size).filter(|&r| c.peers[r].is_some()).collect()
    }

    /// The link of `a` to `b` and of `b` to `a` are one connection: each
    /// end's local address is the other's peer address.
    fn same_connection(a: &TcpComm, b: &TcpComm) -> bool {
        let (Some(ab), Some(ba)) = (&a.peers[b.rank], &b.peers[a.rank]) else {
            return false;
        };
        ab.stream.local_addr().ok() == ba.stream.peer_addr().ok()
            && ab.stream.peer_addr().ok() == ba.stream.local_addr().ok()
    }

    /// A ring where each rank sends to the next and receives from the one
    /// before opens only those links (and the rendezvous links to rank 0).
    #[test]
    fn a_ring_links_only_neighbours() {
        within("a_ring_links_only_neighbours", TEST_LIMIT, || {
            let n = 8;
            let ranks = ranks_in_this_process(n);
            for c in &ranks[1..] {
                assert_eq!(linked(c), vec![0], "rank {} before any send", c.rank);
            }
            let ranks = on_every_rank(ranks, |c| {
                let (next, prev) = ((c.rank + 1) % n, (c.rank + n - 1) % n);
                c.send(next, 7, &[c.rank as u8]).expect("a send");
                let m = c
                    .recv_from(prev, Some(DEADLINE))
                    .expect("a receive")
                    .expect("a message in time");
                assert_eq!(m.data, vec![prev as u8]);
            });
            assert_eq!(linked(&ranks[0]), (1..n).collect::<Vec<_>>());
            for c in &ranks[1..] {
                let mut want = vec![0, c.rank - 1, (c.rank + 1) % n];
                want.sort_unstable();
                want.dedup();
                assert_eq!(linked(c), want, "rank {}", c.rank);
            }
            finish_all(ranks);
        });
    }

    /// Every pair of ranks but rank 0 connects to each other at the same
    /// moment, each sending a numbered stream: every pair ends with one
    /// connection used by both ends, and every stream arrives whole and in
    /// order.
    #[test]
    fn ranks_linking_to_each_other_at_once_keep_one_link_and_fifo_order() {
        within(
            "ranks_linking_to_each_other_at_once_keep_one_link_and_fifo_order",
            TEST_LIMIT,
            || {
                let n = 10;
                let per_pair = 50u32;
                let start = Barrier::new(n);
                let ranks = on_every_rank(ranks_in_this_process(n), |c| {
                    start.wait();
                    let me = c.rank;
                    if me == 0 {
                        return;
                    }
                    for i in 0..per_pair {
                        for dest in (1..n).filter(|&d| d != me) {
                            let data = i.to_le_bytes().to_vec();
                            if i % 2 == 0 {
                                c.send(dest, 1, &data).expect("a send");
                            } else {
                                c.nsend(dest, 1, data).expect("an nsend");
                            }
                        }
                    }
                    for source in (1..n).filter(|&s| s != me) {
                        for i in 0..per_pair {
                            let m = c
                                .recv_from(source, Some(DEADLINE))
                                .expect("a receive")
                                .expect("a message in time");
                            assert_eq!(m.data, i.to_le_bytes(), "from {source} to {me}");
                        }
                    }
                });
                for a in &ranks {
                    for b in &ranks {
                        if a.rank < b.rank {
                            assert!(
                                same_connection(a, b),
                                "ranks {} and {} use one connection",
                                a.rank,
                                b.rank
                            );
                        }
                    }
                }
                finish_all(ranks);
            },
        );
    }

    /// A receive from a rank with no link yet, and a `recv_any` with links
    /// to rank 0 only, both get what a peer sends later over a link it
    /// makes then.
    #[test]
    fn receives_wait_for_links_made_later() {
        within("receives_wait_for_links_made_later", TEST_LIMIT, || {
            let ranks = ranks_in_this_process(4);
            let ranks = on_every_rank(ranks, |c| match c.rank {
                1 => {
                    std::thread::sleep(Duration::from_millis(200));
                    c.send(2, 5, b"late").expect("a send to rank 2");
                    c.send(3, 6, b"later").expect("a send to rank 3");
                }
                2 => {
                    let m = c.recv_from(1, Some(DEADLINE)).expect("a receive");
                    assert_eq!(m.expect("a message in time").data, b"late");
                }
                3 => {
                    let m = c.recv_any(Some(DEADLINE)).expect("a receive");
                    let m = m.expect("a message in time");
                    assert_eq!((m.source, &m.data[..]), (1, &b"later"[..]));
                }
                _ => {}
            });
            finish_all(ranks);
        });
    }

    /// A send to a rank that has finished fails at once, naming the rank
    /// and why, instead of waiting for a link.
    #[test]
    fn a_send_to_a_finished_rank_fails_with_the_reason() {
        within(
            "a_send_to_a_finished_rank_fails_with_the_reason",
            TEST_LIMIT,
            || {
                let mut ranks = ranks_in_this_process(3);
                let mut one = ranks.remove(1);
                // Ranks 0 and 2 finish; rank 0 waits for rank 1's goodbye,
                // so rank 1 sends while rank 0 is in `finish`.
                let finishing: Vec<_> = ranks
                    .into_iter()
                    .map(|c| std::thread::spawn(move || c.finish()))
                    .collect();
                let mut finishing = finishing.into_iter();
                let zero = finishing.next().expect("rank 0");
                let two = finishing.next().expect("rank 2");
                two.join().expect("rank 2 ran").expect("rank 2 finishes");
                let start = Instant::now();
                let e = one
                    .send(2, 1, b"too late")
                    .expect_err("rank 2 has finished");
                assert!(start.elapsed() < DEADLINE, "failed at once");
                assert_eq!(e.lost_peer(), Some(2), "{e}");
                let text = e.to_string();
                assert!(text.contains("no link could be made"), "{text}");
                one.finish().expect("rank 1 finishes");
                zero.join().expect("rank 0 ran").expect("rank 0 finishes");
            },
        );
    }

    /// A rank that makes a link to a rank in `finish` hears its goodbye
    /// on it (a send or receive fails rather than waits), and both finish.
    #[test]
    fn a_link_made_to_a_finishing_rank_hears_its_goodbye() {
        within(
            "a_link_made_to_a_finishing_rank_hears_its_goodbye",
            TEST_LIMIT,
            || {
                let mut ranks = ranks_in_this_process(3);
                let two = ranks.pop().expect("rank 2");
                let mut one = ranks.pop().expect("rank 1");
                let zero = ranks.pop().expect("rank 0");
                // Rank 2 waits in `finish` for rank 0's goodbye.
                let two = std::thread::spawn(move || two.finish());
                std::thread::sleep(Duration::from_millis(100));
                // The send fails if the goodbye came with the link (as a
                // send to a peer that said goodbye does), or else the
                // receive after it does.
                let e = match one.send(2, 1, b"late") {
                    Err(e) => e,
                    Ok(()) => one
                        .recv_from(2, Some(DEADLINE))
                        .expect_err("rank 2 said goodbye"),
                };
                assert_eq!(e.lost_peer(), Some(2), "{e}");
                assert!(e.to_string().contains("already finished"), "{e}");
                on_every_rank_owned(vec![zero, one], |c| c.finish().expect("a rank finishes"));
                two.join().expect("rank 2 ran").expect("rank 2 finishes");
            },
        );
    }
}
