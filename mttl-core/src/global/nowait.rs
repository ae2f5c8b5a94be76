//! [`invoke_nowait`]: a remote call that wants no reply and completes, like
//! an `nwrite`, at the caller's next [`fence`](super::fence) or barrier.
//! The caller counts it for its fence here; the callee's side, which holds
//! the fence back until the calls it started have finished, is in
//! `invoke` (`invoke/nowait.rs`, with the protocol).

use mttl_comm::Rank;

use super::{with_memory, GlobalError, GlobalErrorKind};
use crate::codec::Encode;
use crate::context;
use crate::invoke::{self, Remote};

/// Starts `f(args)` on `node` and returns at once, with no result: the
/// fire-and-forget call ("update the owner's shard"). It has completed
/// when this thread's next [`fence`](crate::fence) or
/// [`barrier`](crate::barrier) returns; a panic of `f` is reported there
/// ([`fence`](crate::fence) panics, [`try_fence`](crate::try_fence) returns
/// the error, naming the rank, the function and the message). To this
/// node, `f` runs in a new local thread.
///
/// Calls leave in batches, like [`ainvoke`](crate::ainvoke)'s.
///
/// # Panics
///
/// Panics if `f` is not `#[mttl::remote]`, or `node` does not exist.
#[track_caller]
pub fn invoke_nowait<F, A>(node: Rank, f: F, args: A)
where
    F: Remote<A>,
    A: Encode + 'static,
{
    let size = context::size();
    if node >= size {
        panic!("invoke_nowait to rank {node}, which does not exist (the job has {size} ranks)");
    }
    invoke::start_nowait(node, f, args);
    if node != context::rank() {
        with_memory(|global| global.note_nwrite(node));
    }
}

/// The error a fence reports for a failed call on `rank`.
pub(super) fn call_failed(rank: Rank, message: String) -> GlobalError {
    GlobalError {
        rank,
        region: 0,
        offset: 0,
        len: 0,
        op: "invoke_nowait",
        kind: GlobalErrorKind::Panicked(message),
    }
}
