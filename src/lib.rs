//! mttl: MPC++ MTTL-style SPMD programming in Rust.
//!
//! Every process (*rank*, *node*) of a job runs the same program. Rank 0
//! runs the function marked [`macro@main`]; the other ranks serve until it
//! returns. Lightweight cooperative threads call functions on other ranks
//! ([`invoke`], [`ainvoke`], [`spmd`]), meet in FIFO cells ([`SyncCell`])
//! and reach other ranks' memory through global pointers ([`GlobalPtr`]);
//! collectives ([`barrier`], [`allreduce`], [`alltoallv`], ...) involve
//! every rank. Underneath, the eight-primitive [`Comm`](comm::Comm) trait
//! runs over TCP (the default), MPI or, for tests and debugging, threads of
//! one process.
//!
//! **Start with [the guide](guide)**: the model (which code runs where and
//! when), the rules of collectives, `nwrite` / `fence` / `barrier`
//! completion, per-rank state, waiting for threads, and which exchange to
//! use for which job.
//!
//! A program, run here as a job of one rank (`MTTL_NP=4 ./prog` runs a
//! `#[mttl::main]` program on four):
//!
//! ```
//! #[mttl::remote]
//! fn add(a: i32, b: i32) -> i32 {
//!     a + b
//! }
//!
//! // `#[mttl::main] fn main() { ... }` expands to this call of `start`.
//! fn main() {
//!     let code = mttl::start(|| {
//!         for node in 0..mttl::size() {
//!             assert_eq!(mttl::invoke(node, add, (1, 2)), 3);
//!         }
//!     });
//!     assert_eq!(code, 0);
//! }
//! ```
//!
//! The API, by concept:
//!
//! - the job: [`macro@main`], [`start`], [`rank`], [`size`],
//!   [`backend_name`], [`stats()`], [`flush`];
//! - remote calls: [`macro@remote`], [`invoke`], [`ainvoke`], [`try_invoke`],
//!   [`spmd`], [`Pending`], [`RemoteError`];
//! - threads: [`thread::spawn`], [`yield_now`] and the rest of [`thread`];
//! - synchronisation cells: [`SyncCell`], [`GlobalSync`];
//! - global memory: [`GlobalArray`], [`GlobalObject`], [`GlobalPtr`],
//!   [`AtomicInt`], [`fence`], [`try_fence`];
//! - collectives: [`barrier`], [`broadcast`], [`reduce`], [`allreduce`],
//!   [`gather`], [`allgather`], [`alltoall`], [`alltoallv`] and their slice
//!   and typed forms;
//! - plain data and encoding: [`Pod`], [`Zeroable`], [`Encode`], [`Decode`].
//!
//! The examples in `examples/` are complete programs: `hello`, `fig3`,
//! `producer_consumer`, `stencil`, `atomics`, `collectives`, `pingpong`,
//! `sample_sort`, `word_count` and `task_farm` (the README says what each
//! shows).

#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub mod guide;

/// The communication layer: the [`Comm`](comm::Comm) trait and its backends.
#[doc(no_inline)]
pub use mttl_comm as comm;
pub use mttl_core::{
    ainvoke, allgather, allreduce, allreduce_max, allreduce_max_slice, allreduce_min,
    allreduce_min_slice, allreduce_slice, allreduce_sum, allreduce_sum_slice, alltoall,
    alltoall_slice, alltoallv, backend_name, barrier, broadcast, broadcast_slice, fence, flush,
    gather, invoke, invoke_nowait, rank, reduce, size, spmd, start, stats, try_fence, try_invoke,
    yield_now, AdaptiveBroadcast, AdaptiveModel, ArrivalOrderBroadcast, AtomicInt, BorrowError,
    GlobalArray, GlobalError, GlobalErrorKind, GlobalObject, GlobalPtr, GlobalRef, GlobalRefMut,
    GlobalSync, LearningProgress, MainResult, Pending, Remote, RemoteError, RemoteFunction,
    RemoteMethod, Stats, SyncCell, MAX_OWNED_BYTES, MAX_OWNED_SENDS,
};
pub use mttl_macros::{main, remote};

/// Tracing (`MTTL_TRACE=DIR` records every rank's communication, calls,
/// collectives and waits into one file per rank; `mttl-trace` reads them):
/// user regions, named spans of a rank's time, and polling waits.
pub mod trace {
    pub use mttl_core::trace::{region, waiting, Region, Waiting};
}

/// The serialisation crate, for `#[derive(mttl::Encode, mttl::Decode)]` with
/// `#[bincode(crate = "mttl::bincode")]`.
#[doc(no_inline)]
pub use mttl_core::bincode;
/// The plain-data crate, for `#[derive(mttl::Pod, mttl::Zeroable)]` with
/// `#[bytemuck(crate = "mttl::bytemuck")]` on types kept in global memory.
#[doc(no_inline)]
pub use mttl_core::bytemuck;
#[doc(no_inline)]
pub use mttl_core::{Decode, Encode, Pod, Zeroable};

/// mttl threads: cooperative user-level threads of one process.
///
/// A thread runs until it blocks (on a [`SyncCell`], a reply, a
/// collective), yields, or ends; the process's message handler runs
/// whenever the current thread blocks or yields.
pub mod thread {
    pub use mttl_core::thread::{
        blocked_threads, catch_panic, current, current_name, in_thread, live_threads,
        ready_threads, scope, spawn, stack_size, stack_stats, try_spawn, yield_now, BlockReason,
        BlockedThread, JoinHandle, PanicLocation, Scope, ScopedJoinHandle, SpawnError, StackStats,
        ThreadId, ThreadPanic,
    };
}

/// This rank's adaptive broadcast tables, for tests and diagnostics.
#[doc(hidden)]
pub use mttl_core::adaptive_tables;

/// Items the macros expand to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use mttl_core::__private::*;
    pub use mttl_core::{fnv1a, Callable, MethodTrampoline, RemoteFn, Trampoline};
}
