//! How mttl's runtime turns a program's calls into messages: the part of a
//! skeleton that is the same for every kernel.
//!
//! An [`Emitter`] writes one rank's side of each interaction, in program
//! order: for a call from rank 0 to every node, rank 0 sends and later
//! receives the replies while every other rank receives and later replies.
//! The sizes are the wire format's (`mttl-core/src/wire.rs`: each kind's
//! header, then the body); a message's tag is its kind.
//!
//! The runtime's handler serves incoming requests whenever a thread
//! blocks or yields, so in a real trace the serving (a write received, a
//! fence acknowledged) interleaves with the rank's own calls as the timing
//! falls. An emitter places it where a simulator can always run it: a rank
//! first sends everything a step sends, then takes what its peers sent
//! before they wait. Per peer and tag the order is the runtime's own (one
//! FIFO stream), which is what [`super::streams`] compares.

use super::Step;
use crate::ti::{TiOp, TiTrace};

/// Message kinds (tags) and header lengths of the runtime's wire format.
pub(crate) mod wire {
    /// A remote call; header bytes.
    pub(crate) const INVOKE: u64 = 1;
    pub(crate) const INVOKE_HEADER: u64 = 13;
    /// A reply (a write into the caller's reply cell); header bytes.
    pub(crate) const CELL_WRITE: u64 = 2;
    pub(crate) const CELL_WRITE_HEADER: u64 = 5;
    /// A remote write; header bytes.
    pub(crate) const WRITE: u64 = 3;
    pub(crate) const WRITE_HEADER: u64 = 12;
    /// A remote read; header bytes.
    pub(crate) const READ: u64 = 5;
    pub(crate) const READ_HEADER: u64 = 20;
    /// A fence; header bytes.
    pub(crate) const FENCE: u64 = 6;
    pub(crate) const FENCE_HEADER: u64 = 4;
    /// A collective's message; header bytes.
    pub(crate) const COLL: u64 = 9;
    pub(crate) const COLL_HEADER: u64 = 10;
    /// The end of the job and its acknowledgement; header bytes.
    pub(crate) const EXIT: u64 = 12;
    pub(crate) const EXIT_HEADER: u64 = 4;
    pub(crate) const EXIT_ACK: u64 = 13;
    /// A large message's body, and the bit its header's tag gets.
    pub(crate) const DATA: u64 = 15;
    pub(crate) const LARGE: u64 = 0x4000;
    /// Bodies above this go as a header and a separate body (the default
    /// `MTTL_EAGER_LIMIT`).
    pub(crate) const EAGER_LIMIT: u64 = 65536;
}

/// The bytes bincode's variable-length encoding gives an integer.
pub(crate) fn varint_len(v: u64) -> u64 {
    match v {
        0..=250 => 1,
        251..=0xFFFF => 3,
        0x1_0000..=0xFFFF_FFFF => 5,
        _ => 9,
    }
}

/// One rank's messages, in program order (see the module docs).
#[derive(Debug)]
pub(crate) struct Emitter {
    /// This rank.
    pub(crate) me: usize,
    /// The job's size.
    pub(crate) n: usize,
    /// What was emitted.
    pub(crate) steps: Vec<Step>,
    /// Ranks written to since the last fence, in first-write order.
    written: Vec<usize>,
}

impl Emitter {
    /// An emitter for rank `me` of `n`.
    pub(crate) fn new(me: usize, n: usize) -> Emitter {
        Emitter {
            me,
            n,
            steps: Vec::new(),
            written: Vec::new(),
        }
    }

    fn op(&mut self, op: TiOp) {
        self.steps.push(Step::Op(op));
    }

    pub(crate) fn send(&mut self, peer: usize, bytes: u64, tag: u64) {
        self.op(TiOp::Send {
            peer: peer as u32,
            bytes,
            tag,
        });
    }

    pub(crate) fn recv(&mut self, peer: usize, bytes: u64, tag: u64) {
        self.op(TiOp::Recv {
            peer: peer as u32,
            bytes,
            tag,
        });
    }

    /// The kernel computes here: the next phase's computation time goes
    /// here (see [`super`]).
    pub(crate) fn compute(&mut self) {
        self.steps.push(Step::Compute);
    }

    /// Rank 0 calls a function on every node (`spmd`), with arguments of
    /// `args` encoded bytes: the call's half (rank 0 runs its own share
    /// locally, sending nothing).
    pub(crate) fn spmd_call(&mut self, args: u64) {
        let bytes = wire::INVOKE_HEADER + args;
        if self.me == 0 {
            for d in 1..self.n {
                self.send(d, bytes, wire::INVOKE);
            }
        } else {
            self.recv(0, bytes, wire::INVOKE);
        }
    }

    /// The return of a [`spmd_call`](Self::spmd_call): every node replies
    /// with its result of `result(node)` encoded bytes.
    pub(crate) fn spmd_return(&mut self, result: impl Fn(usize) -> u64) {
        if self.me == 0 {
            for d in 1..self.n {
                self.recv(d, wire::CELL_WRITE_HEADER + result(d), wire::CELL_WRITE);
            }
        } else {
            self.send(
                0,
                wire::CELL_WRITE_HEADER + result(self.me),
                wire::CELL_WRITE,
            );
        }
    }

    /// A remote write of `bytes` bytes to `to` (`nwrite`, `nwrite_slice`),
    /// completed at the next fence. A write to the rank itself, or of
    /// nothing, sends nothing (and needs no fence).
    pub(crate) fn nwrite(&mut self, to: usize, bytes: u64) {
        if to == self.me || bytes == 0 {
            return;
        }
        if bytes > wire::EAGER_LIMIT {
            self.send(to, wire::WRITE_HEADER, wire::WRITE | wire::LARGE);
            self.send(to, bytes, wire::DATA);
        } else {
            self.send(to, wire::WRITE_HEADER + bytes, wire::WRITE);
        }
        if !self.written.contains(&to) {
            self.written.push(to);
        }
    }

    /// The handler takes a remote write of `bytes` bytes from `from`.
    pub(crate) fn nwrite_in(&mut self, from: usize, bytes: u64) {
        if from == self.me || bytes == 0 {
            return;
        }
        if bytes > wire::EAGER_LIMIT {
            self.recv(from, wire::WRITE_HEADER, wire::WRITE | wire::LARGE);
            self.recv(from, bytes, wire::DATA);
        } else {
            self.recv(from, wire::WRITE_HEADER + bytes, wire::WRITE);
        }
    }

    /// The first half of a fence: a fence message to every rank written to
    /// since the last one. Returns those ranks, whose acknowledgements
    /// [`fence_wait`](Self::fence_wait) takes.
    pub(crate) fn fence_out(&mut self) -> Vec<usize> {
        let written = std::mem::take(&mut self.written);
        for &w in &written {
            self.send(w, wire::FENCE_HEADER, wire::FENCE);
        }
        written
    }

    /// The handler takes `from`'s fence and acknowledges it.
    pub(crate) fn fence_in(&mut self, from: usize) {
        if from == self.me {
            return;
        }
        self.recv(from, wire::FENCE_HEADER, wire::FENCE);
        self.send(from, wire::CELL_WRITE_HEADER, wire::CELL_WRITE);
    }

    /// The second half of a fence: the acknowledgements of `written`.
    pub(crate) fn fence_wait(&mut self, written: &[usize]) {
        for &w in written {
            self.recv(w, wire::CELL_WRITE_HEADER, wire::CELL_WRITE);
        }
    }

    /// The barrier's signalling after its fence: dissemination, one
    /// message to `me + s` and one from `me - s` per stride `s = 1, 2, 4..`.
    pub(crate) fn dissemination(&mut self) {
        let (me, n) = (self.me, self.n);
        let mut s = 1;
        while s < n {
            self.send((me + s) % n, wire::COLL_HEADER, wire::COLL);
            self.recv((me + n - s) % n, wire::COLL_HEADER, wire::COLL);
            s *= 2;
        }
    }

    /// An allreduce of `bytes` bytes of plain data (`allreduce_slice`):
    /// recursive doubling (the job's size is a power of two).
    pub(crate) fn allreduce(&mut self, bytes: u64) {
        let (me, n) = (self.me, self.n);
        let mut s = 1;
        while s < n {
            self.send(me ^ s, wire::COLL_HEADER + bytes, wire::COLL);
            self.recv(me ^ s, wire::COLL_HEADER + bytes, wire::COLL);
            s *= 2;
        }
    }

    /// An all-to-all of `bytes` bytes of plain data per rank
    /// (`alltoall_slice`): a send to `me + 1, me + 2, ...`, then a receive
    /// from every other rank.
    pub(crate) fn alltoall(&mut self, bytes: u64) {
        let (me, n) = (self.me, self.n);
        for k in 1..n {
            self.send((me + k) % n, wire::COLL_HEADER + bytes, wire::COLL);
        }
        for s in (0..n).filter(|&s| s != me) {
            self.recv(s, wire::COLL_HEADER + bytes, wire::COLL);
        }
    }

    /// Rank 0 reads `bytes` bytes from `owner` (a blocking remote read).
    pub(crate) fn read_from(&mut self, owner: usize, bytes: u64) {
        if owner == self.me {
            return;
        }
        self.send(owner, wire::READ_HEADER, wire::READ);
        self.recv(owner, wire::CELL_WRITE_HEADER + bytes, wire::CELL_WRITE);
    }

    /// The handler serves a read of `bytes` bytes by `reader`.
    pub(crate) fn serve_read(&mut self, reader: usize, bytes: u64) {
        if reader == self.me {
            return;
        }
        self.recv(reader, wire::READ_HEADER, wire::READ);
        self.send(reader, wire::CELL_WRITE_HEADER + bytes, wire::CELL_WRITE);
    }

    /// The end of the job: rank 0 tells every node to exit and waits for
    /// their acknowledgements.
    pub(crate) fn exit(&mut self) {
        if self.me == 0 {
            for d in 1..self.n {
                self.send(d, wire::EXIT_HEADER, wire::EXIT);
            }
            for d in 1..self.n {
                self.recv(d, 0, wire::EXIT_ACK);
            }
        } else {
            self.recv(0, wire::EXIT_HEADER, wire::EXIT);
            self.send(0, 0, wire::EXIT_ACK);
        }
    }
}

/// The bytes of rank 1's first reply to rank 0 (a `CELL_WRITE`: the reply
/// to the kernel's set-up call), from which a skeleton learns the size of a
/// global pointer; `None` when the trace has no rank 1 or it never replies.
pub(crate) fn first_reply_to_rank0(real: &TiTrace) -> Option<u64> {
    real.ranks.get(1)?.iter().find_map(|op| match *op {
        TiOp::Send {
            peer: 0,
            bytes,
            tag: wire::CELL_WRITE,
        } => Some(bytes),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_grow_where_bincode_grows_them() {
        assert_eq!(varint_len(250), 1);
        assert_eq!(varint_len(251), 3);
        assert_eq!(varint_len(65536), 5);
        assert_eq!(varint_len(1 << 32), 9);
    }

    #[test]
    fn dissemination_sends_to_me_plus_each_stride() {
        let mut e = Emitter::new(1, 5);
        e.dissemination();
        let peers: Vec<_> = e
            .steps
            .iter()
            .map(|s| match s {
                Step::Op(TiOp::Send { peer, .. }) => format!("s{peer}"),
                Step::Op(TiOp::Recv { peer, .. }) => format!("r{peer}"),
                _ => "?".into(),
            })
            .collect();
        assert_eq!(peers, ["s2", "r0", "s3", "r4", "s0", "r2"]);
    }
}
