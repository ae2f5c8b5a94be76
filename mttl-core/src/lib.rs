//! mttl's runtime: the MTTL programming model on top of `mttl-comm`.
//!
//! The map, one concept per module:
//!
//! - [`thread`]: cooperative user-level threads on pooled coroutine stacks;
//! - `runtime`: one per process: the main loop, message dispatch, start-up
//!   and exit protocols ([`start`], [`rank`], [`size`]);
//! - `invoke`: [`invoke`](fn@invoke), [`ainvoke`], [`try_invoke`], [`spmd`];
//! - `registry`: remote functions registered by `#[mttl::remote]`;
//! - `sync`: [`SyncCell`], MTTL's `Sync`, and its [`GlobalSync`] handle;
//! - `global`: [`GlobalPtr`] into registered global memory ([`GlobalArray`],
//!   [`GlobalObject`]), remote read/write/`nwrite`, atomics, [`fence`];
//! - `coll`: barrier, reduce, allreduce, broadcast, gather;
//! - `wire`: message kinds and header layouts;
//! - `codec`: argument and result serialisation;
//! - `stats`: per-primitive counts (`MTTL_STATS=1`).

mod codec;
mod coll;
mod global;
mod invoke;
mod outbox;
mod registry;
mod runtime;
mod stats;
mod sync;
pub mod thread;
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
    allgather, allreduce, allreduce_max, allreduce_max_slice, allreduce_min, allreduce_min_slice,
    allreduce_slice, allreduce_sum, allreduce_sum_slice, alltoall, alltoall_slice, alltoallv,
    barrier, broadcast, broadcast_slice, gather, reduce,
};
pub use global::{
    fence, try_fence, AtomicInt, BorrowError, GlobalArray, GlobalError, GlobalErrorKind,
    GlobalObject, GlobalPtr, GlobalRef, GlobalRefMut, MAX_OWNED_BYTES, MAX_OWNED_SENDS,
};
pub use invoke::{ainvoke, invoke, spmd, try_invoke, Pending, Remote, RemoteError, RemoteMethod};
pub use registry::{fnv1a, Callable, MethodTrampoline, RemoteFn, Trampoline};
pub use runtime::{backend_name, flush, rank, size, start, stats, MainResult};
pub use stats::Stats;
pub use sync::{GlobalSync, SyncCell};
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

    /// The `TypeId` of a function item, from a reference to it.
    pub fn type_id_of<F: 'static>(_: &F) -> std::any::TypeId {
        std::any::TypeId::of::<F>()
    }
}
