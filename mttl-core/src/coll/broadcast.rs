//! `broadcast`: one node's value to every node, down a binomial tree
//! rooted at the sender. Inner nodes forward the bytes they received
//! without decoding them again.

use mttl_comm::Rank;

use super::algorithm;
use super::mailbox::{Kind, Op};
use super::{check_element_size, check_root};
use crate::codec::{self, Decode, Encode};
use crate::thread::BlockReason;

/// Returns `root`'s `value` on every node. Every node must call it with
/// the same root; the values passed by the other nodes are dropped (pass
/// anything, e.g. `Default::default()`). The root gets its own value back
/// without a copy.
///
/// ```
/// // A job of one rank; in a larger one, call it from the task that every
/// // rank runs (see `spmd`).
/// let code = mttl_core::start(|| {
///     let me = mttl_core::rank();
///     let params = mttl_core::broadcast(0, if me == 0 { vec![0.5, 2.0] } else { Vec::new() });
///     assert_eq!(params, vec![0.5, 2.0]);
/// });
/// assert_eq!(code, 0);
/// ```
///
/// # Panics
///
/// Panics if `root` is not a rank, or (stopping the job) if the nodes call
/// different collectives or pass different types.
#[track_caller]
pub fn broadcast<T: Encode + Decode<()>>(root: Rank, value: T) -> T {
    let reason = BlockReason::new(Kind::Broadcast.name());
    check_root("broadcast", root);
    let op = Op::begin(Kind::Broadcast, Some(root), reason);
    if op.rank == root {
        if op.size > 1 {
            let mut bytes = Vec::new();
            if let Err(e) = codec::encode_into(&value, &mut bytes) {
                panic!("broadcast #{}: {e}", op.seq);
            }
            algorithm::broadcast_down(&op, root, Some(&bytes));
        }
        return value;
    }
    drop(value);
    let bytes = algorithm::broadcast_down(&op, root, None).unwrap_or_default();
    codec::decode(&bytes).unwrap_or_else(|e| {
        op.fail(&format!(
            "the value from rank {root} does not decode here ({e}): do all nodes pass the same \
             type?"
        ))
    })
}

/// Copies `root`'s `values` into `values` on every node: the plain-data
/// fast path of [`broadcast`] (raw bytes, no encoding). Every node must
/// pass a slice of the same length.
///
/// # Panics
///
/// As [`broadcast`]; also for zero-sized `T`.
#[track_caller]
pub fn broadcast_slice<T: bytemuck::Pod>(root: Rank, values: &mut [T]) {
    let reason = BlockReason::new(Kind::Broadcast.name());
    check_root("broadcast_slice", root);
    check_element_size::<T>("broadcast_slice");
    let op = Op::begin(Kind::Broadcast, Some(root), reason);
    if op.rank == root {
        algorithm::broadcast_down(&op, root, Some(bytemuck::cast_slice(values)));
        return;
    }
    let bytes = algorithm::broadcast_down(&op, root, None).unwrap_or_default();
    let mine: &mut [u8] = bytemuck::cast_slice_mut(values);
    if bytes.len() != mine.len() {
        op.fail(&format!(
            "rank {root} sent {} bytes, this node expects {}: every node must pass a slice of \
             the same length",
            bytes.len(),
            mine.len()
        ));
    }
    mine.copy_from_slice(&bytes);
}
