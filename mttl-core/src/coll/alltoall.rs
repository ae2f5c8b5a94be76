//! `alltoall` and `alltoallv`: every node sends a (possibly different)
//! piece to every node. Direct exchange: each node sends its `n - 1`
//! pieces, to `me + 1, me + 2, ...` (mod `n`, so that not everyone sends to
//! rank 0 first), then takes the pieces addressed to it in rank order. The
//! comm layer's progress rule keeps these crossing sends from deadlocking.

use std::mem::size_of;

use bytemuck::Pod;
use mttl_comm::Rank;

use super::check_element_size;
use super::mailbox::{Kind, Op};
use crate::codec::{self, Decode, Encode};
use crate::thread::BlockReason;

/// The only step of an exchange.
const STEP: u8 = 0;

/// Sends `values[d]` to node `d`; returns what each node sent this one,
/// indexed by rank (this node's own piece moved, not copied). Every node
/// must call it with one value per node.
///
/// # Panics
///
/// Panics if `values.len()` is not the number of nodes, or (stopping the
/// job) if the nodes call different collectives or pass different types.
#[track_caller]
pub fn alltoall<T: Encode + Decode<()>>(mut values: Vec<T>) -> Vec<T> {
    let reason = BlockReason::new(Kind::Alltoall.name());
    let n = crate::context::size();
    assert_eq!(
        values.len(),
        n,
        "alltoall needs one value per node ({n}), got {}",
        values.len()
    );
    let op = Op::begin(Kind::Alltoall, None, reason);
    let me = op.rank;
    for k in 1..n {
        let dest = (me + k) % n;
        let mut bytes = Vec::new();
        if let Err(e) = codec::encode_into(&values[dest], &mut bytes) {
            panic!("alltoall #{}: {e}", op.seq);
        }
        op.send_owned(dest, STEP, bytes);
    }
    let mut own = Some(values.swap_remove(me));
    drop(values);
    (0..n)
        .map(|src| match own.take_if(|_| src == me) {
            Some(v) => v,
            None => codec::decode(&op.recv(src, STEP)).unwrap_or_else(|e| {
                op.fail(&format!(
                    "the value from rank {src} does not decode here ({e}): do all nodes pass \
                     the same type?"
                ))
            }),
        })
        .collect()
}

/// The plain-data [`alltoall`] of equal blocks: `send` and `recv` hold one
/// block of `len / n` elements per node, in rank order; block `d` of `send`
/// goes to node `d` and block `s` of `recv` receives node `s`'s. Raw bytes,
/// no encoding.
///
/// # Panics
///
/// Panics if the slices differ in length or are not a whole number of
/// blocks, for zero-sized `T`, or (stopping the job) if the nodes disagree.
#[track_caller]
pub fn alltoall_slice<T: Pod>(send: &[T], recv: &mut [T]) {
    let reason = BlockReason::new(Kind::Alltoall.name());
    check_element_size::<T>("alltoall_slice");
    let n = crate::context::size();
    assert!(
        send.len() == recv.len() && send.len() % n == 0,
        "alltoall_slice needs send and recv of equal length, a multiple of the {n} nodes (got \
         {} and {})",
        send.len(),
        recv.len()
    );
    let block = send.len() / n;
    let op = Op::begin(Kind::Alltoall, None, reason);
    let me = op.rank;
    for k in 1..n {
        let dest = (me + k) % n;
        op.send(
            dest,
            STEP,
            bytemuck::cast_slice(&send[dest * block..(dest + 1) * block]),
        );
    }
    recv[me * block..(me + 1) * block].copy_from_slice(&send[me * block..(me + 1) * block]);
    for src in (0..n).filter(|&s| s != me) {
        let bytes = op.recv(src, STEP);
        let mine: &mut [u8] = bytemuck::cast_slice_mut(&mut recv[src * block..(src + 1) * block]);
        if bytes.len() != mine.len() {
            op.fail(&format!(
                "rank {src} sent {} bytes, this node expects {}: every node must pass slices of \
                 the same length",
                bytes.len(),
                mine.len()
            ));
        }
        mine.copy_from_slice(&bytes);
    }
}

/// The plain-data all-to-all of varying pieces (MPI's `Alltoallv` with
/// contiguous displacements): `send` holds the pieces for nodes `0, 1, ...`
/// back to back, `send_counts[d]` elements for node `d`. Afterwards `recv`
/// holds the pieces this node received, back to back in rank order
/// (replacing its contents, reusing its allocation); returns how many
/// elements came from each node.
///
/// # Panics
///
/// Panics if `send_counts` does not have one count per node summing to
/// `send.len()`, for zero-sized `T`, or (stopping the job) if the nodes
/// disagree.
#[track_caller]
pub fn alltoallv<T: Pod>(send: &[T], send_counts: &[usize], recv: &mut Vec<T>) -> Vec<usize> {
    let reason = BlockReason::new(Kind::Alltoall.name());
    check_element_size::<T>("alltoallv");
    let n = crate::context::size();
    assert!(
        send_counts.len() == n && send_counts.iter().sum::<usize>() == send.len(),
        "alltoallv needs one count per node ({n}) summing to send.len() ({}), got {send_counts:?}",
        send.len()
    );
    let mut starts = Vec::with_capacity(n + 1);
    starts.push(0);
    for c in send_counts {
        starts.push(starts[starts.len() - 1] + c);
    }
    let piece = |d: Rank| &send[starts[d]..starts[d + 1]];
    let op = Op::begin(Kind::Alltoall, None, reason);
    let me = op.rank;
    for k in 1..n {
        let dest = (me + k) % n;
        op.send(dest, STEP, bytemuck::cast_slice(piece(dest)));
    }
    recv.clear();
    let mut counts = Vec::with_capacity(n);
    for src in 0..n {
        if src == me {
            recv.extend_from_slice(piece(me));
            counts.push(send_counts[me]);
            continue;
        }
        let bytes = op.recv(src, STEP);
        if bytes.len() % size_of::<T>() != 0 {
            op.fail(&format!(
                "rank {src} sent {} bytes, not a whole number of {}: do all nodes pass the same \
                 type?",
                bytes.len(),
                std::any::type_name::<T>()
            ));
        }
        let count = bytes.len() / size_of::<T>();
        let start = recv.len();
        recv.resize(start + count, T::zeroed());
        bytemuck::cast_slice_mut::<T, u8>(&mut recv[start..]).copy_from_slice(&bytes);
        counts.push(count);
    }
    counts
}
