//! `reduce` and `allreduce`: of any encodable value with any associative
//! operation, and of plain-data slices element by element (the fast path:
//! raw bytes on the wire, no encoding).
//!
//! `reduce` goes up the binomial tree rooted at rank 0 (then rank 0 sends
//! the result to the root, if another); `allreduce` uses recursive doubling.
//! Both combine in the same order and with the same brackets (see
//! [`super::schedule`]), so for a given job size the result is the same
//! bits on every node and for both.

use std::mem::size_of;
use std::ops::Add;

use bytemuck::Pod;
use mttl_comm::Rank;

use super::algorithm::{self, Accumulator, STEP_RESULT};
use super::mailbox::{Kind, Op};
use super::{check_element_size, check_root};
use crate::codec::{self, Decode, Encode};
use crate::thread::BlockReason;

/// A typed partial result and the operation that combines two.
struct ValueAcc<T, F> {
    value: Option<T>,
    op: F,
    encoded: Option<Vec<u8>>,
}

impl<T, F> ValueAcc<T, F> {
    fn new(value: T, op: F) -> Self {
        ValueAcc {
            value: Some(value),
            op,
            encoded: None,
        }
    }

    fn into_value(self) -> T {
        self.value
            .expect("the value is only missing while the user's operation runs")
    }
}

impl<T, F> Accumulator for ValueAcc<T, F>
where
    T: Encode + Decode<()>,
    F: Fn(T, T) -> T,
{
    fn bytes(&mut self, op: &Op) -> &[u8] {
        if self.encoded.is_none() {
            let value = self
                .value
                .as_ref()
                .expect("the value is only missing while the user's operation runs");
            let mut buf = Vec::new();
            if let Err(e) = codec::encode_into(value, &mut buf) {
                panic!("{} #{}: {e}", op.kind, op.seq);
            }
            self.encoded = Some(buf);
        }
        self.encoded.as_deref().unwrap_or_default()
    }

    fn combine(&mut self, op: &Op, from: Rank, other: Vec<u8>, upper: bool) {
        let other: T = codec::decode(&other).unwrap_or_else(|e| {
            op.fail(&format!(
                "the value from rank {from} does not decode here ({e}): do all nodes pass the \
                 same type?"
            ))
        });
        let mine = self
            .value
            .take()
            .expect("the value is only missing while the user's operation runs");
        self.value = Some(if upper {
            (self.op)(mine, other)
        } else {
            (self.op)(other, mine)
        });
        self.encoded = None;
    }
}

/// A plain-data slice combined element by element, in place.
struct SliceAcc<'a, T, F> {
    values: &'a mut [T],
    op: F,
}

impl<T: Pod, F: Fn(T, T) -> T> Accumulator for SliceAcc<'_, T, F> {
    fn bytes(&mut self, _op: &Op) -> &[u8] {
        bytemuck::cast_slice(self.values)
    }

    fn combine(&mut self, op: &Op, from: Rank, other: Vec<u8>, upper: bool) {
        let width = size_of::<T>();
        if other.len() != std::mem::size_of_val(self.values) {
            op.fail(&format!(
                "rank {from} contributed {} values, this node {}: every node must pass a slice \
                 of the same length",
                other.len() / width,
                self.values.len()
            ));
        }
        for (mine, theirs) in self.values.iter_mut().zip(other.chunks_exact(width)) {
            let theirs: T = bytemuck::pod_read_unaligned(theirs);
            *mine = if upper {
                (self.op)(*mine, theirs)
            } else {
                (self.op)(theirs, *mine)
            };
        }
    }
}

/// Combines every node's `value` with `op` and returns the result at
/// `root` (`None` elsewhere). Every node must call it, with the same root.
///
/// `op` must be associative; it need not be commutative: the result is
/// `x0 ⊕ x1 ⊕ ... ⊕ x(n-1)` in rank order, `xi` the value of rank `i`,
/// bracketed as a binomial tree (fixed for a given number of ranks, and the
/// same as [`allreduce`]'s), so floating-point results are reproducible.
///
/// # Panics
///
/// Panics if `root` is not a rank, or (on every node, stopping the job) if
/// the nodes call different collectives or pass different types.
#[track_caller]
pub fn reduce<T, F>(root: Rank, value: T, op: F) -> Option<T>
where
    T: Encode + Decode<()>,
    F: Fn(T, T) -> T,
{
    let reason = BlockReason::new(Kind::Reduce.name());
    check_root("reduce", root);
    let ctx = Op::begin(Kind::Reduce, Some(root), reason);
    let mut acc = ValueAcc::new(value, op);
    let at_zero = algorithm::reduce_up(&ctx, 0, &mut acc);
    if root == 0 {
        return at_zero.then(|| acc.into_value());
    }
    if at_zero {
        ctx.send(root, STEP_RESULT, acc.bytes(&ctx));
        return None;
    }
    if ctx.rank != root {
        return None;
    }
    let body = ctx.recv(0, STEP_RESULT);
    Some(codec::decode(&body).unwrap_or_else(|e| {
        ctx.fail(&format!(
            "the result from rank 0 does not decode here ({e}): do all nodes pass the same type?"
        ))
    }))
}

/// Combines every node's `value` with `op` and returns the result on every
/// node: the same value, bit for bit, everywhere. Every node must call it.
///
/// `op` must be associative; the order and brackets are [`reduce`]'s (rank
/// order, binomial tree), so e.g. string concatenation yields the ranks'
/// strings in rank order.
///
/// ```
/// // A job of one rank; in a larger one, call it from the task that every
/// // rank runs (see `spmd`).
/// let code = mttl_core::start(|| {
///     let local_count = 7u64;
///     let total = mttl_core::allreduce(local_count, |a, b| a + b);
///     let names = mttl_core::allreduce(format!("{} ", mttl_core::rank()), |a, b| a + &b);
///     assert_eq!(total, 7 * mttl_core::size() as u64);
///     assert!(names.starts_with("0 "));
/// });
/// assert_eq!(code, 0);
/// ```
///
/// # Panics
///
/// As [`reduce`].
#[track_caller]
pub fn allreduce<T, F>(value: T, op: F) -> T
where
    T: Encode + Decode<()>,
    F: Fn(T, T) -> T,
{
    let reason = BlockReason::new(Kind::Allreduce.name());
    let ctx = Op::begin(Kind::Allreduce, None, reason);
    let mut acc = ValueAcc::new(value, op);
    algorithm::recursive_doubling(&ctx, &mut acc);
    acc.into_value()
}

/// Element-wise [`allreduce`] of a plain-data slice, in place: afterwards
/// `values[i]` is `op` over every node's `values[i]`, on every node. Every
/// node must pass a slice of the same length. The bytes travel as they are
/// (no encoding), so the nodes must share one architecture.
///
/// # Panics
///
/// As [`reduce`]; also for zero-sized `T`.
#[track_caller]
pub fn allreduce_slice<T, F>(values: &mut [T], op: F)
where
    T: Pod,
    F: Fn(T, T) -> T,
{
    let reason = BlockReason::new(Kind::Allreduce.name());
    check_element_size::<T>("allreduce_slice");
    let ctx = Op::begin(Kind::Allreduce, None, reason);
    algorithm::recursive_doubling(&ctx, &mut SliceAcc { values, op });
}

fn min<T: PartialOrd>(a: T, b: T) -> T {
    if b < a {
        b
    } else {
        a
    }
}

fn max<T: PartialOrd>(a: T, b: T) -> T {
    if b > a {
        b
    } else {
        a
    }
}

/// Element-wise sum over all nodes, in place, on every node (see
/// [`allreduce_slice`]). Integer overflow behaves as `+` does in this
/// build.
#[track_caller]
pub fn allreduce_sum_slice<T: Pod + Add<Output = T>>(values: &mut [T]) {
    allreduce_slice(values, |a, b| a + b);
}

/// Element-wise minimum over all nodes, in place, on every node. For
/// values that do not compare (NaN), the lower rank's value wins.
#[track_caller]
pub fn allreduce_min_slice<T: Pod + PartialOrd>(values: &mut [T]) {
    allreduce_slice(values, min);
}

/// Element-wise maximum over all nodes, in place, on every node. For
/// values that do not compare (NaN), the lower rank's value wins.
#[track_caller]
pub fn allreduce_max_slice<T: Pod + PartialOrd>(values: &mut [T]) {
    allreduce_slice(values, max);
}

/// The sum of every node's `value`, on every node (plain data, no
/// encoding: the latency-critical path of e.g. a dot product).
#[track_caller]
pub fn allreduce_sum<T: Pod + Add<Output = T>>(value: T) -> T {
    let mut v = [value];
    allreduce_sum_slice(&mut v);
    v[0]
}

/// The minimum of every node's `value`, on every node.
#[track_caller]
pub fn allreduce_min<T: Pod + PartialOrd>(value: T) -> T {
    let mut v = [value];
    allreduce_min_slice(&mut v);
    v[0]
}

/// The maximum of every node's `value`, on every node.
#[track_caller]
pub fn allreduce_max<T: Pod + PartialOrd>(value: T) -> T {
    let mut v = [value];
    allreduce_max_slice(&mut v);
    v[0]
}
