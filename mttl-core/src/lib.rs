//! mttl's runtime: the MTTL programming model on top of `mttl-comm`.
//!
//! The map, by layer (each module uses only those below it; the
//! `module_graph` test checks that no module reaches back up):
//!
//! ```text
//!  router     runtime   start-up, the loop, dispatch: the one list of services
//!  ──────────────────────────────────────────────────────────────────────────
//!  services   watchdog  the deadlock watchdog
//!             coll      barrier, reduce, allreduce, broadcast, gather, alltoall
//!             global    GlobalPtr, global memory, read/write/nwrite, fence,
//!                       GlobalSync
//!             invoke    invoke, ainvoke, spmd (invoke_nowait's callee side)
//!             sync      SyncCell, and the cell table other ranks write into
//!  ──────────────────────────────────────────────────────────────────────────
//!  context    context   comm backend, rank and size, sending and the outbox,
//!                       statistics, failure; the `Service` trait
//!  ──────────────────────────────────────────────────────────────────────────
//!  base       thread    cooperative threads on pooled coroutine stacks
//!             trace     the trace recorder (`MTTL_TRACE=DIR`)
//!             outbox · wire · codec · registry · stats
//! ```
//!
//! - [`thread`]: cooperative user-level threads on pooled coroutine stacks;
//! - `runtime`: [`start`], the loop, the start-up and exit protocols;
//! - `context`: [`rank`], [`size`], [`flush`], [`stats()`], and what every
//!   service uses to send and to stop the job;
//! - `invoke`: [`invoke`](fn@invoke), [`ainvoke`], [`try_invoke`], [`spmd`];
//! - `registry`: remote functions registered by `#[mttl::remote]`;
//! - `sync`: [`SyncCell`], MTTL's `Sync`;
//! - `global`: [`GlobalPtr`] into registered global memory ([`GlobalArray`],
//!   [`GlobalObject`]), remote read/write/`nwrite`, atomics, [`fence`],
//!   [`invoke_nowait`] (completed by the fence, like `nwrite`), and
//!   [`GlobalSync`], a `SyncCell` writable from other nodes;
//! - `coll`: barrier, reduce, allreduce, broadcast, gather;
//! - `watchdog`: the deadlock watchdog (`MTTL_WATCHDOG`);
//! - `outbox`: small messages to one rank batched into one;
//! - `wire`: message kinds and header layouts;
//! - `codec`: argument and result serialisation;
//! - `stats`: per-primitive counts (`MTTL_STATS=1`);
//! - [`trace`]: the trace recorder and its file format (`MTTL_TRACE=DIR`),
//!   user regions ([`trace::region`]).
//!
//! How a message travels through these layers, and how to add a service:
//! `docs/architecture.md`.

mod codec;
mod coll;
mod context;
mod global;
mod invoke;
mod outbox;
mod registry;
mod runtime;
mod stats;
mod sync;
pub mod thread;
pub mod trace;
mod watchdog;
mod wire;

pub use bytemuck::{Pod, Zeroable};

/// The plain-data crate, for `#[derive(mttl::Pod, mttl::Zeroable)]` with
/// `#[bytemuck(crate = "mttl::bytemuck")]` on types kept in global memory.
pub use bytemuck;
pub use codec::{Decode, Encode};

/// The serialisation crate, for `#[derive(mttl::Encode, mttl::Decode)]` with
/// `#[bincode(crate = "mttl::bincode")]`.
pub use bincode;
pub use coll::{
    adaptive_tables, allgather, allreduce, allreduce_max, allreduce_max_slice, allreduce_min,
    allreduce_min_slice, allreduce_slice, allreduce_sum, allreduce_sum_slice, alltoall,
    alltoall_slice, alltoallv, barrier, broadcast, broadcast_slice, gather, reduce,
    AdaptiveBroadcast, AdaptiveModel, ArrivalOrderBroadcast, LearningProgress,
};
pub use context::{backend_name, flush, rank, size, stats};
pub use global::{
    fence, invoke_nowait, try_fence, AtomicInt, BorrowError, GlobalArray, GlobalError,
    GlobalErrorKind, GlobalObject, GlobalPtr, GlobalRef, GlobalRefMut, GlobalSync, MAX_OWNED_BYTES,
    MAX_OWNED_SENDS,
};
pub use invoke::{
    ainvoke, invoke, spmd, try_invoke, Pending, Remote, RemoteError, RemoteFunction, RemoteMethod,
};
pub use registry::{fnv1a, Callable, MethodTrampoline, RemoteFn, Trampoline};
pub use runtime::{start, MainResult};
pub use stats::Stats;
pub use sync::SyncCell;
pub use thread::yield_now;

/// Items the macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::codec::{decode, encode_into};
    pub use inventory;

    /// The object a member function runs on, from its bytes.
    pub fn object_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> Result<&mut T, String> {
        let len = bytes.len();
        bytemuck::try_from_bytes_mut(bytes).map_err(|e| {
            format!(
                "the object is not a valid {} ({len} bytes): {e:?}",
                std::any::type_name::<T>()
            )
        })
    }

    /// The `TypeId` of a remote function's constant, from a reference to it.
    pub fn type_id_of<F: 'static>(_: &F) -> std::any::TypeId {
        std::any::TypeId::of::<F>()
    }
}
