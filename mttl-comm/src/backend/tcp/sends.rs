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
        let total = HEADER_LEN + data.len();
        let mut written = 0;
        let mut active = Instant::now();
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
                }
                Err(e) if would_block(&e) => {
                    // Wait for space, reading all links meanwhile.
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
