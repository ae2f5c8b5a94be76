//! `barrier`: the completion point of the program (see the protocol in
//! [`super`]).

use super::algorithm;
use super::mailbox::{Kind, Op};
use crate::thread::BlockReason;

/// Waits until every node has called `barrier`. When it returns on any
/// node, every remote write that any node issued before its call (every
/// `nwrite` and every [`GlobalSync`](crate::GlobalSync) write) is
/// visible at its owner: each node first completes its own writes
/// ([`fence`](crate::fence)), then signals the others (dissemination, no
/// root: `ceil(log2 n)` rounds of one message per node).
///
/// Like every collective, it is called on every node, in the same order
/// as the other collectives, by one thread per node at a time: typically
/// the task that node 0's main runs everywhere with [`spmd`](crate::spmd).
/// Do not hold a borrow guard of global memory across it: writes to that
/// memory wait for the guard, and the barrier for those writes.
///
/// # Panics
///
/// Panics (stopping the job) if the nodes call different collectives.
#[track_caller]
pub fn barrier() {
    let reason = BlockReason::new(Kind::Barrier.name());
    crate::global::fence();
    let op = Op::begin(Kind::Barrier, None, reason);
    algorithm::dissemination(&op);
}
