//! The skeleton of the 1-D stencil (`examples/stencil.rs`), from its
//! decomposition in `mttl_kernels::stencil`.
//!
//! Node 0's main calls `setup` on every node (each returns a global
//! pointer), then `run(blocks, STEPS)`; in each of the `STEPS` steps a node
//! writes one `f64` to each neighbour, then meets the others at a barrier
//! (a fence, then dissemination), then computes. At the end node 0 reads
//! every other node's block and the job exits.
//!
//! Learned from the real trace: the encoded size of a global pointer
//! (its region and offset, which the runtime assigns), from rank 1's
//! reply to `setup`; a node's id is a varint, so its size follows from it.

use mttl_kernels::stencil::{neighbours, CELLS, STEPS};

use super::runtime::{first_reply_to_rank0, varint_len, wire, Emitter};
use super::Step;
use crate::ti::TiTrace;

/// The stencil's skeleton, with what it learned.
#[derive(Debug, Clone)]
pub(crate) struct Stencil {
    /// Bytes of a global pointer's region and offset.
    ptr_rest: u64,
}

const F64: u64 = 8;

impl Stencil {
    /// Learns the size of a global pointer from rank 1's reply to `setup`
    /// (the first message it sends rank 0).
    pub(crate) fn learn(real: &TiTrace) -> Result<Stencil, String> {
        let reply = first_reply_to_rank0(real);
        let Some(bytes) = reply else {
            return Err(
                "needs a trace of at least 2 ranks in which rank 1 replies to rank 0 \
                        (a reply to `setup`)"
                    .into(),
            );
        };
        let ptr_rest = bytes
            .checked_sub(wire::CELL_WRITE_HEADER + varint_len(1))
            .ok_or_else(|| format!("rank 1's reply to `setup` has {bytes} bytes, too few"))?;
        Ok(Stencil { ptr_rest })
    }

    fn ptr(&self, node: usize) -> u64 {
        varint_len(node as u64) + self.ptr_rest
    }

    /// Rank `me` of `n` (see the module docs).
    pub(crate) fn steps(&self, me: usize, n: usize) -> Vec<Step> {
        let mut e = Emitter::new(me, n);
        e.compute();
        // setup(): a pointer back from every node.
        e.spmd_call(0);
        e.spmd_return(|d| self.ptr(d));
        // run(blocks, STEPS).
        let blocks: u64 = varint_len(n as u64) + (0..n).map(|d| self.ptr(d)).sum::<u64>();
        e.spmd_call(blocks + varint_len(STEPS as u64));
        for _ in 0..STEPS {
            for next in neighbours(me, n) {
                e.nwrite(next, F64);
            }
            for next in neighbours(me, n) {
                e.nwrite_in(next, F64);
            }
            let written = e.fence_out();
            for next in neighbours(me, n) {
                e.fence_in(next);
            }
            e.fence_wait(&written);
            e.dissemination();
            e.compute();
        }
        e.spmd_return(|_| 0);
        // Node 0 reads every block.
        let block = CELLS as u64 * F64;
        if me == 0 {
            for owner in 0..n {
                e.read_from(owner, block);
            }
        } else {
            e.serve_read(0, block);
        }
        e.exit();
        e.steps
    }
}
