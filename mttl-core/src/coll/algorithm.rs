//! The message patterns every collective is made of, walking the
//! [`schedule`](super::schedule)s with an [`Op`]: reduction up a binomial
//! tree, broadcast down one, recursive doubling, dissemination.
//!
//! What is combined is abstracted by [`Accumulator`]: a typed value and a
//! user operation (reduce, allreduce), plain-data slices combined element
//! by element, or concatenated byte frames (gather, allgather).

use mttl_comm::Rank;

use super::mailbox::Op;
use super::schedule::{
    absolute, doubling_dests, doubling_source, doubling_upper, relative, strides, tree_children,
    tree_parent,
};

/// The step of a message going up a tree (child to parent).
pub(super) const STEP_UP: u8 = 0;
/// The step of a message going down a tree (parent to child).
pub(super) const STEP_DOWN: u8 = 1;
/// The step of a reduction's result forwarded from rank 0 to its root.
pub(super) const STEP_RESULT: u8 = 2;

/// A partial result that travels between nodes and absorbs others.
pub(super) trait Accumulator {
    /// The partial result as a message body.
    fn bytes(&mut self, op: &Op) -> &[u8];

    /// Absorbs the partial result `other` (a body from `from`) covering the
    /// ranks just above this one's (`upper`) or just below.
    fn combine(&mut self, op: &Op, from: Rank, other: Vec<u8>, upper: bool);
}

/// Reduces up the binomial tree rooted at `root` (on ranks relative to
/// it): every node absorbs its children's results, smallest subtree
/// first, and sends its own to its parent. Returns whether this node is the
/// root, which then holds the result over all ranks (in relative order).
pub(super) fn reduce_up(op: &Op, root: Rank, acc: &mut dyn Accumulator) -> bool {
    let n = op.size;
    let v = relative(op.rank, root, n);
    for c in tree_children(v, n) {
        let from = absolute(c, root, n);
        let body = op.recv(from, STEP_UP);
        acc.combine(op, from, body, true);
    }
    if v == 0 {
        return true;
    }
    op.send(absolute(tree_parent(v), root, n), STEP_UP, acc.bytes(op));
    false
}

/// Broadcasts down the binomial tree rooted at `root`: the root sends
/// `bytes` to its children, largest subtree first; every other node
/// receives from its parent, forwards the same bytes and returns them.
pub(super) fn broadcast_down(op: &Op, root: Rank, bytes: Option<&[u8]>) -> Option<Vec<u8>> {
    let n = op.size;
    let v = relative(op.rank, root, n);
    let received = if v == 0 {
        None
    } else {
        Some(op.recv(absolute(tree_parent(v), root, n), STEP_DOWN))
    };
    let body = match (&received, bytes) {
        (Some(b), _) => b.as_slice(),
        (None, Some(b)) => b,
        (None, None) => &[],
    };
    for c in tree_children(v, n).rev() {
        op.send(absolute(c, root, n), STEP_DOWN, body);
    }
    received
}

/// Recursive doubling: after it every node holds the combination over all
/// ranks, bracketed as the binomial tree's (see [`super::schedule`]).
pub(super) fn recursive_doubling(op: &Op, acc: &mut dyn Accumulator) {
    let (me, n) = (op.rank, op.size);
    for (round, s) in strides(n).enumerate() {
        let step = round as u8;
        for d in doubling_dests(me, n, s) {
            op.send(d, step, acc.bytes(op));
        }
        if let Some(from) = doubling_source(me, n, s) {
            let body = op.recv(from, step);
            acc.combine(op, from, body, doubling_upper(me, s));
        }
    }
}

/// Dissemination: returns once every node has started it.
pub(super) fn dissemination(op: &Op) {
    let (me, n) = (op.rank, op.size);
    for (round, s) in strides(n).enumerate() {
        let step = round as u8;
        op.send((me + s) % n, step, &[]);
        op.recv((me + n - s) % n, step);
    }
}
