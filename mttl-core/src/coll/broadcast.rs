//! `broadcast`: one node's value to every node, down a binomial tree
//! rooted at the sender, or (`MTTL_BCAST=adaptive`, or an
//! [`AdaptiveBroadcast`](super::adaptive::AdaptiveBroadcast)) down the
//! tree that the call site's table gives (see [`super::adaptive`]), or
//! (`MTTL_BCAST=arrival`, or an
//! [`ArrivalOrderBroadcast`](super::arrival::ArrivalOrderBroadcast)) down
//! trees made in the order the ranks arrive (see [`super::arrival`]).
//! Inner nodes forward the bytes they received without decoding them
//! again.

use mttl_comm::Rank;

use super::adaptive::{self, Mode, Site};
use super::mailbox::{Kind, Op};
use super::{algorithm, arrival};
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
/// With `MTTL_BCAST=adaptive` the tree is learned from the ranks' waits,
/// one table per call site (this call's location) and root, so every rank
/// must make a given broadcast from the same place (a wrapper function
/// should be `#[track_caller]` to keep its callers' sites apart); see
/// [`AdaptiveBroadcast`](crate::AdaptiveBroadcast) for a site a program
/// names itself.
///
/// # Panics
///
/// Panics if `root` is not a rank, or (stopping the job) if the nodes call
/// different collectives or pass different types.
#[track_caller]
pub fn broadcast<T: Encode + Decode<()>>(root: Rank, value: T) -> T {
    broadcast_with(root, value, How::here())
}

/// Which tree a broadcast goes down.
#[derive(Debug, Clone, Copy)]
pub(super) enum How {
    Binomial,
    /// The tree of this site's table.
    Adaptive(Site),
    /// Trees made within the call, in the ranks' order of arrival.
    Arrival,
}

impl How {
    /// What `MTTL_BCAST` asks for a broadcast called from the caller's
    /// location.
    #[track_caller]
    fn here() -> How {
        match adaptive::mode() {
            Mode::Binomial => How::Binomial,
            Mode::Adaptive => How::Adaptive(adaptive::call_site(std::panic::Location::caller())),
            Mode::Arrival => How::Arrival,
        }
    }
}

/// Sends `bytes` (the root) or receives them, down the tree `how` picks.
fn down(
    op: &Op,
    root: Rank,
    how: How,
    bytes: Option<std::borrow::Cow<'_, [u8]>>,
) -> Option<Vec<u8>> {
    match how {
        How::Binomial => algorithm::broadcast_down(op, root, bytes.as_deref()),
        How::Adaptive(site) => {
            adaptive::broadcast_down(op, root, site, bytes.map(std::borrow::Cow::into_owned))
        }
        How::Arrival => arrival::broadcast_down(op, root, bytes.as_deref()),
    }
}

/// [`broadcast`] down the tree `how` picks.
#[track_caller]
pub(super) fn broadcast_with<T: Encode + Decode<()>>(root: Rank, value: T, how: How) -> T {
    let reason = BlockReason::new(Kind::Broadcast.name());
    check_root("broadcast", root);
    let op = Op::begin(Kind::Broadcast, Some(root), reason);
    if op.rank == root {
        if op.size > 1 {
            let mut bytes = Vec::new();
            if let Err(e) = codec::encode_into(&value, &mut bytes) {
                panic!("broadcast #{}: {e}", op.seq);
            }
            down(&op, root, how, Some(bytes.into()));
        }
        return value;
    }
    drop(value);
    let bytes = down(&op, root, how, None).unwrap_or_default();
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
    broadcast_slice_with(root, values, How::here());
}

/// [`broadcast_slice`] down the tree `how` picks.
#[track_caller]
pub(super) fn broadcast_slice_with<T: bytemuck::Pod>(root: Rank, values: &mut [T], how: How) {
    let reason = BlockReason::new(Kind::Broadcast.name());
    check_root("broadcast_slice", root);
    check_element_size::<T>("broadcast_slice");
    let op = Op::begin(Kind::Broadcast, Some(root), reason);
    if op.rank == root {
        if op.size > 1 {
            down(&op, root, how, Some(bytemuck::cast_slice(values).into()));
        }
        return;
    }
    let bytes = down(&op, root, how, None).unwrap_or_default();
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
