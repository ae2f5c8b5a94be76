//! Outgoing frames: each link's FIFO of frames not yet fully written, the
//! gathering of several into one `writev`, and the sends that write
//! straight from the caller's memory.
//!
//! Order: `send` waits for its link's FIFO to drain before it writes, and
//! `nsend` queues behind what the FIFO holds, so a link's frames leave in
//! call order.

use std::io::{self, IoSlice, Write};
use std::time::{Duration, Instant};

use super::frame::{Header, HEADER_LEN};
use super::socket::would_block;
use super::{PeerState, TcpComm};
use crate::comm::{Message, Rank, SendHandle, Tag};
use crate::error::{CommError, Op};

/// How many frames one `writev` gathers at most.
const MAX_GATHER: usize = 32;

/// While a blocking send waits for socket space, it reads every link, so
/// that two ranks sending to each other both go on (the contract's
/// progress rule). What it reads is held in memory until the caller's own
/// loop takes it: a large payload that the loop would have placed where it
/// belongs (`recv_from_into`) is held in a vector of its own instead. Had
/// the destination stopped reading for long (a process descheduled on a
/// loaded machine), a rank writing large bodies in a loop to it while its
/// own predecessor does the same would hold every body sent to it meanwhile.
/// So once this many
/// bytes are held, links stopped at a large payload stay stopped. When the
/// send has written nothing for [`SEND_STALL`], they are read on to their
/// next large payload, which keeps a ring of such senders from waiting on
/// each other for ever; the stall allowed doubles after each such look (up
/// to [`MAX_SEND_STALL`]) until the send is over, so a destination that
/// merely reads late costs a few payloads, not one per stall.
pub(super) const HELD_WHILE_SENDING: usize = 16 << 20;

/// See [`HELD_WHILE_SENDING`].
const SEND_STALL: Duration = Duration::from_millis(20);

/// See [`HELD_WHILE_SENDING`].
const MAX_SEND_STALL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) struct OutFrame {
    header: [u8; HEADER_LEN],
    body: Vec<u8>,
    written: usize,
    seq: u64,
}

impl OutFrame {
    fn total(&self) -> usize {
        HEADER_LEN + self.body.len()
    }

    /// Pushes the unwritten parts of this frame onto `iov`.
    fn gather<'a>(&'a self, iov: &mut IoVecs<'a>) {
        push_unwritten(&self.header, &self.body, self.written, iov);
    }
}

/// The slices of one `writev`, on the stack: no allocation per send.
struct IoVecs<'a> {
    slices: [IoSlice<'a>; 2 * MAX_GATHER],
    len: usize,
}

impl<'a> IoVecs<'a> {
    fn new() -> Self {
        IoVecs {
            slices: [IoSlice::new(&[]); 2 * MAX_GATHER],
            len: 0,
        }
    }

    fn push(&mut self, slice: IoSlice<'a>) {
        self.slices[self.len] = slice;
        self.len += 1;
    }

    fn as_slice(&self) -> &[IoSlice<'a>] {
        &self.slices[..self.len]
    }
}

fn push_unwritten<'a>(
    header: &'a [u8; HEADER_LEN],
    body: &'a [u8],
    written: usize,
    iov: &mut IoVecs<'a>,
) {
    if written < HEADER_LEN {
        iov.push(IoSlice::new(&header[written..]));
        if !body.is_empty() {
            iov.push(IoSlice::new(body));
        }
    } else if written - HEADER_LEN < body.len() {
        iov.push(IoSlice::new(&body[written - HEADER_LEN..]));
    }
}

impl TcpComm {
    /// Writes as much of `r`'s outgoing FIFO as the socket takes.
    pub(super) fn flush_peer(&mut self, r: Rank) {
        let Some(peer) = self.peers.get_mut(r).and_then(Option::as_mut) else {
            return;
        };
        while !peer.out.is_empty() {
            let mut iov = IoVecs::new();
            for f in peer.out.iter().take(MAX_GATHER) {
                f.gather(&mut iov);
            }
            let n = match peer.stream.write_vectored(iov.as_slice()) {
                Ok(n) => n,
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    Self::fail_peer(peer, &mut self.lost, r, format!("connection error: {e}"));
                    return;
                }
            };
            let mut n = n;
            while n > 0 {
                let Some(front) = peer.out.front_mut() else {
                    break;
                };
                let left = front.total() - front.written;
                if n >= left {
                    n -= left;
                    peer.done_seq = front.seq + 1;
                    peer.out.pop_front();
                } else {
                    front.written += n;
                    n = 0;
                }
            }
        }
    }

    /// Writes `data` to `dest` directly from the caller's buffer, waiting
    /// (and reading meanwhile) for socket space: spinning while the socket
    /// takes bytes or a link was ready within `MTTL_SPIN_US`, as
    /// [`wait_until`](Self::wait_until) does, then parked in the kernel.
    pub(super) fn write_direct(
        &mut self,
        op: Op,
        dest: Rank,
        header: &[u8; HEADER_LEN],
        data: &[u8],
    ) -> Result<(), CommError> {
        let sent = self.write_direct_holding(op, dest, header, data);
        self.sending = false;
        self.stalled = false;
        self.hold_paused = false;
        sent
    }

    /// [`write_direct`](Self::write_direct), which clears `sending`,
    /// `stalled` and `hold_paused` after.
    fn write_direct_holding(
        &mut self,
        op: Op,
        dest: Rank,
        header: &[u8; HEADER_LEN],
        data: &[u8],
    ) -> Result<(), CommError> {
        let total = HEADER_LEN + data.len();
        let mut written = 0;
        let mut active = Instant::now();
        let mut wrote = active;
        let mut stall = SEND_STALL;
        loop {
            let peer = self.open_peer(op, dest)?;
            let mut iov = IoVecs::new();
            push_unwritten(header, data, written, &mut iov);
            match peer.stream.write_vectored(iov.as_slice()) {
                Ok(n) => {
                    written += n;
                    if written == total {
                        peer.next_seq += 1;
                        peer.done_seq = peer.next_seq;
                        return Ok(());
                    }
                    active = Instant::now();
                    wrote = active;
                }
                Err(e) if would_block(&e) => {
                    // Wait for space, reading all links meanwhile.
                    // Held links are read on once per stall (see
                    // `HELD_WHILE_SENDING`).
                    self.sending = true;
                    if wrote.elapsed() >= stall {
                        self.stalled = true;
                        wrote = Instant::now();
                        stall = (stall * 2).min(MAX_SEND_STALL);
                    }
                    let spinning = active.elapsed() < self.spin;
                    if !spinning {
                        self.check_links();
                    }
                    let wait = if spinning {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(100)
                    };
                    let ready_links = self
                        .progress(Some(wait))
                        .map_err(|e| self.io_error(op, e))?;
                    if ready_links > 0 {
                        active = Instant::now();
                    } else if spinning {
                        // As in `wait_until`.
                        std::thread::yield_now();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let peer = self.peers[dest]
                        .as_mut()
                        .expect("open_peer checked the link");
                    Self::fail_peer(peer, &mut self.lost, dest, format!("connection error: {e}"));
                    let state = self.peers[dest].as_ref().map(|p| p.state.clone());
                    return Err(self.state_error(op, dest, &state.unwrap_or(PeerState::Open)));
                }
            }
        }
    }

    /// `send`, of a bulk frame if `bulk` (see `frame`).
    pub(super) fn send_frame(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
        bulk: bool,
    ) -> Result<(), CommError> {
        let op = Op::Send(dest);
        self.check_rank(op, dest)?;
        self.check_len(op, data.len())?;
        if dest == self.rank {
            self.incoming.push_back(Message {
                source: dest,
                tag,
                data: data.to_vec(),
            });
            return Ok(());
        }
        self.ensure_link(op, dest)?;
        // Keep call order: earlier non-blocking sends go first.
        if !self.open_peer(op, dest)?.out.is_empty() {
            self.flush_peer(dest);
            self.wait_until(op, None, None, |c| {
                Ok(c.open_peer(op, dest)?.out.is_empty())
            })?;
        }
        let header = Header::data(tag, data.len(), bulk).encode();
        self.write_direct(op, dest, &header, data)
    }

    /// `nsend`, of a bulk frame if `bulk` (see `frame`).
    pub(super) fn nsend_frame(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: Vec<u8>,
        bulk: bool,
    ) -> Result<SendHandle, CommError> {
        let op = Op::Nsend(dest);
        self.check_rank(op, dest)?;
        self.check_len(op, data.len())?;
        if dest == self.rank {
            self.self_seq += 1;
            self.incoming.push_back(Message {
                source: dest,
                tag,
                data,
            });
            return Ok(SendHandle {
                dest,
                seq: self.self_seq,
            });
        }
        // A first send waits for its link (`links`, rule 1): queueing
        // frames for a link that may never come would turn a finished
        // peer into a hang at the next `send_done`.
        self.ensure_link(op, dest)?;
        let header = Header::data(tag, data.len(), bulk).encode();
        let peer = self.open_peer(op, dest)?;
        let seq = peer.next_seq;
        peer.next_seq += 1;
        let was_empty = peer.out.is_empty();
        peer.out.push_back(OutFrame {
            header,
            body: data,
            written: 0,
            seq,
        });
        if was_empty {
            self.flush_peer(dest);
        }
        Ok(SendHandle { dest, seq })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::tcp::{ranks_in_this_process, test_deadline};
    use crate::comm::Comm;
    use crate::tuning::CommTuning;

    const MIB: usize = 1 << 20;

    fn held(comm: &TcpComm) -> usize {
        comm.incoming.iter().map(|m| m.data.len()).sum()
    }

    fn finish_all(ranks: Vec<TcpComm>) {
        let finishing: Vec<_> = ranks
            .into_iter()
            .map(|c| std::thread::spawn(move || c.finish()))
            .collect();
        for f in finishing {
            f.join().expect("a rank ran").expect("a rank finishes");
        }
    }

    /// Rank 0 sends 32 MiB to rank 1, which reads only after a second,
    /// while rank 2 sends it 64 large payloads: what rank 0 holds when its
    /// send is over stays near `HELD_WHILE_SENDING` (it held all 64 before),
    /// and every payload is then received, in order.
    #[test]
    fn a_blocked_send_holds_what_arrives_to_a_bound() {
        test_deadline::within(
            "a_blocked_send_holds_what_arrives_to_a_bound",
            Duration::from_secs(60),
            || {
                let mut ranks = ranks_in_this_process(3);
                let (mut c, mut b, mut a) = (
                    ranks.pop().expect("rank 2"),
                    ranks.pop().expect("rank 1"),
                    ranks.pop().expect("rank 0"),
                );
                let flood = std::thread::spawn(move || {
                    for i in 0..64u8 {
                        c.send_bulk(0, 1, &vec![i; MIB]).expect("rank 2 sends");
                    }
                    c
                });
                let late = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(1));
                    let m = b.recv_from(0, None).expect("rank 1 receives");
                    assert_eq!(m.map(|m| m.data.len()), Some(32 * MIB));
                    b
                });
                a.send_bulk(1, 2, &vec![9; 32 * MIB]).expect("rank 0 sends");
                let held_after = held(&a);
                assert!(
                    held_after <= HELD_WHILE_SENDING + 8 * MIB,
                    "rank 0 held {} MiB when its send was over",
                    held_after / MIB
                );
                for i in 0..64u8 {
                    let m = a.recv_from(2, None).expect("rank 0 receives");
                    let m = m.expect("a payload");
                    assert_eq!((m.data.len(), m.data[0]), (MIB, i), "payload {i}");
                }
                let b = late.join().expect("rank 1 ran");
                let c = flood.join().expect("rank 2 ran");
                finish_all(vec![a, b, c]);
            },
        );
    }

    /// Three ranks each send 48 large payloads to the next before
    /// receiving any: each send waits for the next rank, which holds what
    /// arrives only up to the bound, so the ring goes on only by the stall
    /// rule. It must not wait for ever.
    #[test]
    fn a_ring_of_blocked_senders_goes_on() {
        test_deadline::within(
            "a_ring_of_blocked_senders_goes_on",
            Duration::from_secs(60),
            || {
                let ranks = ranks_in_this_process(3);
                let running: Vec<_> = ranks
                    .into_iter()
                    .enumerate()
                    .map(|(r, mut comm)| {
                        std::thread::spawn(move || {
                            for i in 0..48u8 {
                                comm.send_bulk((r + 1) % 3, 1, &vec![i; MIB])
                                    .expect("a rank sends");
                            }
                            for i in 0..48u8 {
                                let m = comm.recv_from((r + 2) % 3, None).expect("a rank receives");
                                let m = m.expect("a payload");
                                assert_eq!((m.data.len(), m.data[0]), (MIB, i), "payload {i}");
                            }
                            comm
                        })
                    })
                    .collect();
                let ranks = running
                    .into_iter()
                    .map(|t| t.join().expect("a rank ran"))
                    .collect();
                finish_all(ranks);
            },
        );
    }
}
