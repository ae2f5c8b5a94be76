//! The arrival-order broadcast: a baseline that adapts within one call
//! instead of learning across calls, in the manner of STAR-MPI's
//! arrival-pattern-aware broadcast. The root serves the ranks in the order
//! they enter the broadcast, so an early rank gets the data (and forwards
//! it) without waiting behind a late one; the price is one small message
//! per rank and the root staying in the call until the last rank arrives.
//!
//! It runs when `MTTL_BCAST=arrival` (for every [`broadcast`] and
//! [`broadcast_slice`]), or for an [`ArrivalOrderBroadcast`].
//!
//! [`broadcast`]: crate::broadcast
//! [`broadcast_slice`]: crate::broadcast_slice
//!
//! # Protocol
//!
//! 1. Every rank but the root, on entering, sends the root an arrival
//!    notice (`STEP_UP`, 4 bytes: the mark), then waits for the data from
//!    whichever rank sends it.
//! 2. The root waits for a notice, then takes every notice already filed
//!    without waiting: that is a batch, in the order the notices were
//!    filed.
//! 3. The root serves the batch as a binomial tree on the list (root,
//!    batch...): it sends the second half of the list, with the data, to
//!    that half's first rank, then halves again, until the list is itself
//!    alone. Each message carries its receiver's list (the receiver
//!    first) in a trailer after the data.
//! 4. A rank that gets the data checks the trailer (the mark, and itself
//!    at the head of its list) and serves its list as in step 3, then
//!    returns the data.
//! 5. The root repeats steps 2 and 3 until every rank has arrived, then
//!    returns.

use mttl_comm::Rank;

use super::algorithm::{STEP_DOWN, STEP_UP};
use super::broadcast::{broadcast_slice_with, broadcast_with, How};
use super::mailbox::Op;
use crate::wire::Fields;

/// Marks a notice and a trailer, so that a rank reading another
/// algorithm's message says so instead of misreading it.
const MAGIC: u32 = 0x4152_5256;

/// The root's part (steps 2, 3, 5) and every other rank's (steps 1, 4):
/// the root passes its data and gets `None`; the others get the data.
pub(super) fn broadcast_down(op: &Op, root: Rank, data: Option<&[u8]>) -> Option<Vec<u8>> {
    let n = op.size;
    if op.rank == root {
        let data = data.unwrap_or_default();
        let mut arrived = vec![false; n];
        let mut served = 0;
        while served + 1 < n {
            let mut list = vec![root];
            let first = op.recv_any(STEP_UP);
            let later = std::iter::from_fn(|| op.try_recv_any(STEP_UP));
            for (src, notice) in std::iter::once(first).chain(later) {
                if notice != MAGIC.to_le_bytes() || src == root || arrived[src] {
                    op.fail(&format!(
                        "rank {src} sent the root a message that is not an arrival notice of the \
                         arrival-order broadcast: do all ranks set MTTL_BCAST alike?"
                    ));
                }
                arrived[src] = true;
                list.push(src);
            }
            served += list.len() - 1;
            serve(op, &list, data);
        }
        return None;
    }
    op.send(root, STEP_UP, &MAGIC.to_le_bytes());
    let (src, mut body) = op.recv_any(STEP_DOWN);
    let (data_len, list) = read_trailer(&body, n).unwrap_or_else(|why| {
        op.fail(&format!(
            "the message from rank {src} is not an arrival-order broadcast's ({why}): do all \
             ranks set MTTL_BCAST alike?"
        ))
    });
    if list.first() != Some(&op.rank) || list.contains(&root) {
        op.fail(&format!(
            "rank {src} sent this rank the list {list:?} to serve, which does not start with this \
             rank or holds the root {root}"
        ));
    }
    serve(op, &list, &body[..data_len]);
    body.truncate(data_len);
    Some(body)
}

/// Step 3: sends `data` down the binomial tree on `list` (this rank
/// first).
fn serve(op: &Op, list: &[Rank], data: &[u8]) {
    let mut end = list.len();
    while end > 1 {
        let half = end.div_ceil(2);
        let sub = &list[half..end];
        let mut msg = Vec::with_capacity(data.len() + 4 * sub.len() + 8);
        msg.extend_from_slice(data);
        push_trailer(&mut msg, sub);
        op.send_owned(sub[0], STEP_DOWN, msg);
        end = half;
    }
}

fn push_trailer(body: &mut Vec<u8>, list: &[Rank]) {
    for &r in list {
        body.extend_from_slice(&(r as u32).to_le_bytes());
    }
    body.extend_from_slice(&(list.len() as u32).to_le_bytes());
    body.extend_from_slice(&MAGIC.to_le_bytes());
}

/// The data's length and the list of a trailer, every rank checked to be
/// below `n`.
fn read_trailer(body: &[u8], n: usize) -> Result<(usize, Vec<Rank>), String> {
    let Some(fixed_at) = body.len().checked_sub(8) else {
        return Err(format!("{} bytes, shorter than a trailer", body.len()));
    };
    let mut f = Fields(&body[fixed_at..]);
    let (count, magic) = (f.u32() as usize, f.u32());
    if magic != MAGIC {
        return Err("no trailer mark".to_owned());
    }
    let Some(data_len) = count
        .checked_mul(4)
        .and_then(|list_len| fixed_at.checked_sub(list_len))
    else {
        return Err(format!("{count} ranks do not fit in {} bytes", body.len()));
    };
    let mut f = Fields(&body[data_len..fixed_at]);
    let list: Vec<Rank> = (0..count).map(|_| f.u32() as Rank).collect();
    if let Some(bad) = list.iter().find(|&&r| r >= n) {
        return Err(format!("rank {bad} in its list, in a job of {n}"));
    }
    Ok((data_len, list))
}

/// A broadcast that serves the ranks in the order they arrive, whatever
/// `MTTL_BCAST` says: the within-call baseline to compare an
/// [`AdaptiveBroadcast`](crate::AdaptiveBroadcast) with. Every rank must
/// use it for the same call.
///
/// ```
/// let code = mttl_core::start(|| {
///     let x = mttl_core::ArrivalOrderBroadcast.broadcast(0, 42u32);
///     assert_eq!(x, 42);
/// });
/// assert_eq!(code, 0);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ArrivalOrderBroadcast;

impl ArrivalOrderBroadcast {
    /// As [`broadcast`](crate::broadcast), in arrival order.
    pub fn broadcast<T: crate::codec::Encode + crate::codec::Decode<()>>(
        &self,
        root: Rank,
        value: T,
    ) -> T {
        broadcast_with(root, value, How::Arrival)
    }

    /// As [`broadcast_slice`](crate::broadcast_slice), in arrival order.
    pub fn broadcast_slice<T: bytemuck::Pod>(&self, root: Rank, values: &mut [T]) {
        broadcast_slice_with(root, values, How::Arrival);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_round_trip_and_reject_garbage() {
        let mut body = b"data".to_vec();
        push_trailer(&mut body, &[3, 1, 2]);
        assert_eq!(read_trailer(&body, 4), Ok((4, vec![3, 1, 2])));
        assert!(read_trailer(&body, 3).unwrap_err().contains("rank 3"));
        assert!(read_trailer(b"short", 4).is_err());
        assert!(read_trailer(&[0; 12], 4).unwrap_err().contains("mark"));
        let mut lying = Vec::new();
        push_trailer(&mut lying, &[1]);
        lying[4..8].copy_from_slice(&9u32.to_le_bytes());
        assert!(read_trailer(&lying, 4).unwrap_err().contains("do not fit"));
    }
}
