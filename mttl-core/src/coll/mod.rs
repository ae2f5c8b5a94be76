//! Collectives: barrier, broadcast, reduce, allreduce, gather, allgather
//! and alltoall, built from point-to-point `COLL` messages on trees, so
//! they work on any backend. As a service ([`Collectives`]) it owns the
//! `COLL` message and this node's collective state (the sequence counter
//! and the mailbox, in `mailbox`).
//!
//! # Rules of use
//!
//! Every node calls the same collectives in the same order (with the same
//! root and, for slices, the same lengths), each from one thread at a time:
//! typically the task that node 0's main runs everywhere with
//! [`spmd`](crate::spmd). A collective blocks only its calling thread; the
//! node keeps serving messages and running its other threads meanwhile.
//! Detected misuse stops the job with a message naming both sides: a
//! message for a collective of another kind at the same sequence number, a
//! message for a collective this node has finished, a second collective
//! started on a node while one runs there. A misuse that sends no message
//! (e.g. one node skipping a barrier) shows as a thread blocked in
//! `barrier (number k)` (see [`blocked_threads`](crate::thread::blocked_threads)).
//!
//! # Protocol
//!
//! 1. Each node numbers its collectives `0, 1, 2, ...` (`State::next_seq`);
//!    by the rules above, the k-th collective has the same number on every
//!    node.
//! 2. A message of collective k carries (k, kind, step) in its `COLL`
//!    header; the source comes with the envelope. Step is the round, or the
//!    direction in a tree.
//! 3. The handler files every `COLL` message in this node's mailbox under
//!    (k, source, step), checking it against the running collective and
//!    what is already filed (kind, sequence not finished, no duplicate),
//!    and wakes the collective's thread if it waits for that very message.
//!    A node that is ahead (a root that sent and returned, a node that
//!    finished a round early) thus never confuses a later collective's
//!    messages with the current one's.
//! 4. The calling thread takes the messages it needs in the algorithm's
//!    fixed order, blocking (reason: the collective's name, detail its
//!    number) while the next one is missing.
//!
//! # Algorithms (n nodes; latency in message hops)
//!
//! | collective  | algorithm                                               | hops                |
//! |-------------|---------------------------------------------------------|---------------------|
//! | `barrier`   | `fence`, then dissemination                             | `ceil(log2 n)`      |
//! | `broadcast` | binomial tree rooted at the root (or learned: `adaptive`; or in arrival order: `arrival`) | `ceil(log2 n)` |
//! | `reduce`    | binomial tree rooted at 0, then 0 → root if another     | `ceil(log2 n)` (+1) |
//! | `allreduce` | recursive doubling on the next power of two             | `ceil(log2 n)`      |
//! | `gather`    | binomial tree rooted at the root, frames concatenated   | `ceil(log2 n)`      |
//! | `allgather` | recursive doubling, frames concatenated                 | `ceil(log2 n)`      |
//! | `alltoall`  | direct exchange                                         | 1                   |
//!
//! The schedules are in [`schedule`], the message patterns in
//! [`algorithm`].
//!
//! # Reduction order
//!
//! `reduce` and `allreduce` combine the nodes' values in rank order,
//! `x0 ⊕ x1 ⊕ ... ⊕ x(n-1)`, so `op` must be associative but need not be
//! commutative. The brackets are those of the binomial tree rooted at 0
//! (e.g. `((x0 ⊕ x1) ⊕ (x2 ⊕ x3)) ⊕ x4` for 5 nodes), the same for both
//! and fixed for a given n; `allreduce` therefore gives the same bits on
//! every node, and floating-point results are reproducible run to run.
//!
//! # Completion (barrier and remote writes)
//!
//! 1. Each node calls [`fence`](crate::fence): its own `nwrite`s are
//!    applied at their owners (acknowledged) when it returns.
//! 2. Then it enters the dissemination barrier, which returns on a node
//!    only after every node has entered it, hence finished step 1.
//! 3. So when `barrier` returns anywhere, every remote write issued
//!    anywhere before the barrier is visible: every `nwrite` (and
//!    `write`, which waits anyway) and every
//!    [`GlobalSync::write`](crate::GlobalSync::write), which `fence` counts
//!    like an `nwrite`. An `invoke` or `ainvoke` is not covered: the
//!    function's thread runs whenever the callee gets to it; wait on the
//!    call (its reply) to know it has run.

mod adaptive;
mod algorithm;
mod alltoall;
mod arrival;
mod barrier;
mod broadcast;
mod gather;
mod mailbox;
mod reduce;
mod schedule;
mod suspension;

use mttl_comm::Rank;

/// The collectives' settings every rank must share (the start-up check
/// compares them): a rank broadcasting by another algorithm would wait for
/// messages the others never send.
pub(crate) fn agreed_settings() -> String {
    format!("MTTL_BCAST={}", adaptive::mode().name())
}

pub use adaptive::{adaptive_tables, AdaptiveBroadcast, AdaptiveModel, LearningProgress};
pub use alltoall::{alltoall, alltoall_slice, alltoallv};
pub use arrival::ArrivalOrderBroadcast;
pub use barrier::barrier;
pub use broadcast::{broadcast, broadcast_slice};
pub use gather::{allgather, gather};
pub(crate) use mailbox::Collectives;
pub use reduce::{
    allreduce, allreduce_max, allreduce_max_slice, allreduce_min, allreduce_min_slice,
    allreduce_slice, allreduce_sum, allreduce_sum_slice, reduce,
};

/// Panics unless `root` is a rank of this job.
fn check_root(what: &str, root: Rank) {
    let size = crate::context::size();
    assert!(
        root < size,
        "{what} with root {root}: the job has {size} ranks"
    );
}

/// Panics on zero-sized element types, which a byte length cannot count.
fn check_element_size<T>(what: &str) {
    assert!(
        std::mem::size_of::<T>() > 0,
        "{what} of zero-sized {} is not supported",
        std::any::type_name::<T>()
    );
}
