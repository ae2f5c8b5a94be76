//! `gather` and `allgather`: every node's value, in rank order. Values
//! travel as frames (length u32, then the encoded value) concatenated in
//! rank order: `gather` up a binomial tree rooted at the receiver (each
//! subtree is a contiguous range of ranks relative to it), `allgather` by
//! recursive doubling (each block a contiguous range of ranks). Inner nodes
//! concatenate frames without decoding them.

use mttl_comm::Rank;

use super::algorithm::{self, Accumulator};
use super::check_root;
use super::mailbox::{Kind, Op};
use super::schedule::absolute;
use crate::codec::{self, Decode, Encode};
use crate::thread::BlockReason;

/// Encoded values, one frame per rank of a contiguous range.
struct Frames {
    bytes: Vec<u8>,
}

impl Frames {
    /// One frame holding `value`.
    fn of<T: Encode>(op: &Op, value: &T) -> Frames {
        let mut bytes = vec![0; 4];
        if let Err(e) = codec::encode_into(value, &mut bytes) {
            panic!("{} #{}: {e}", op.kind, op.seq);
        }
        let len = u32::try_from(bytes.len() - 4).unwrap_or_else(|_| {
            panic!(
                "{} #{}: a value of {} bytes is too large (at most 4 GiB per node)",
                op.kind,
                op.seq,
                bytes.len() - 4
            )
        });
        bytes[..4].copy_from_slice(&len.to_le_bytes());
        Frames { bytes }
    }

    /// One empty frame, standing for a value that stays here.
    fn placeholder() -> Frames {
        Frames { bytes: vec![0; 4] }
    }

    /// The `n` frames' contents, in order.
    fn split(&self, op: &Op, n: usize) -> Vec<&[u8]> {
        let mut frames = Vec::with_capacity(n);
        let mut rest = self.bytes.as_slice();
        while rest.len() >= 4 {
            let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            if rest.len() - 4 < len {
                break;
            }
            frames.push(&rest[4..4 + len]);
            rest = &rest[4 + len..];
        }
        if frames.len() != n || !rest.is_empty() {
            op.fail(&format!(
                "the gathered values are malformed: {} whole values and {} stray bytes for {n} \
                 ranks",
                frames.len(),
                rest.len()
            ));
        }
        frames
    }
}

impl Accumulator for Frames {
    fn bytes(&mut self, _op: &Op) -> &[u8] {
        &self.bytes
    }

    fn combine(&mut self, _op: &Op, _from: Rank, mut other: Vec<u8>, upper: bool) {
        if upper {
            self.bytes.extend_from_slice(&other);
        } else {
            other.extend_from_slice(&self.bytes);
            self.bytes = other;
        }
    }
}

/// Decodes the value that came from `rank`.
fn decode_from<T: Decode<()>>(op: &Op, rank: Rank, frame: &[u8]) -> T {
    codec::decode(frame).unwrap_or_else(|e| {
        op.fail(&format!(
            "the value from rank {rank} does not decode here ({e}): do all nodes pass the same \
             type?"
        ))
    })
}

/// Collects every node's `value` at `root`: `Some(values)` there, indexed
/// by rank (the root's own value moved in, not copied), `None` elsewhere.
/// Every node must call it with the same root.
///
/// # Panics
///
/// Panics if `root` is not a rank, or (stopping the job) if the nodes call
/// different collectives or pass different types.
#[track_caller]
pub fn gather<T: Encode + Decode<()>>(root: Rank, value: T) -> Option<Vec<T>> {
    let reason = BlockReason::new(Kind::Gather.name());
    check_root("gather", root);
    let op = Op::begin(Kind::Gather, Some(root), reason);
    let n = op.size;
    let mut acc = if op.rank == root {
        Frames::placeholder()
    } else {
        Frames::of(&op, &value)
    };
    if !algorithm::reduce_up(&op, root, &mut acc) {
        return None;
    }
    let frames = acc.split(&op, n);
    let mut values = Vec::with_capacity(n);
    values.push(value);
    for (v, frame) in frames.iter().enumerate().skip(1) {
        values.push(decode_from(&op, absolute(v, root, n), frame));
    }
    values.rotate_right(root);
    Some(values)
}

/// Every node's `value`, indexed by rank, on every node (this node's own
/// value moved in, not copied). Every node must call it.
///
/// # Panics
///
/// Panics (stopping the job) if the nodes call different collectives or
/// pass different types.
#[track_caller]
pub fn allgather<T: Encode + Decode<()>>(value: T) -> Vec<T> {
    let reason = BlockReason::new(Kind::Allgather.name());
    let op = Op::begin(Kind::Allgather, None, reason);
    let (me, n) = (op.rank, op.size);
    let mut acc = Frames::of(&op, &value);
    algorithm::recursive_doubling(&op, &mut acc);
    let frames = acc.split(&op, n);
    let mut own = Some(value);
    frames
        .iter()
        .enumerate()
        .map(|(rank, frame)| match own.take_if(|_| rank == me) {
            Some(v) => v,
            None => decode_from(&op, rank, frame),
        })
        .collect()
}
