//! The user guide: how an mttl program runs, the rules its parts follow,
//! and which tool fits which job. Read it once before writing a program;
//! the items' own pages have the details.
//!
//! The examples here are real programs and run as tests: `cargo test --doc
//! -p mttl` runs each as a job of one rank (`mttl::start(|| ...)`, what
//! [`macro@crate::main`] expands to, returns the job's exit code), and
//! `MTTL_NP=4 cargo test --doc -p mttl` as a job of four (add
//! `MTTL_BACKEND=local`, or `MTTL_BACKEND=mpi` with `--features mpi`, for
//! the other backends). The programs in `examples/` (`sample_sort`,
//! `word_count`, `task_farm`, `stencil`, `producer_consumer`, ...) are
//! larger complete jobs.
//!
//! # 1. The model
//!
//! - **SPMD.** Every process (*node*, *rank*) of a job runs the same
//!   program. Rank 0 runs the function marked [`macro@crate::main`] as
//!   its thread `main`; every other rank only *serves*: it runs what other
//!   ranks ask of it, until rank 0's main returns, which ends the job on
//!   every rank with main's exit code.
//! - **Threads.** Each rank runs cooperative user-level threads on one OS
//!   thread. A thread runs until it *blocks* (waiting for a reply, a
//!   [`SyncCell`](crate::SyncCell) value, a collective, a remote read or
//!   write, a fence), *yields* ([`yield_now`](crate::yield_now); sending a
//!   large `nwrite_slice` may yield too) or ends; then the rank's
//!   loop runs the next ready thread, and between threads it sends what
//!   they left to send and *handles* the messages that arrived. So the
//!   handler never runs in the middle of your code, only at those points:
//!   between two of them a thread sees no other thread's effects and no
//!   remote write, and a thread that computes for a long time without
//!   blocking keeps its whole rank from serving others (yield now and
//!   then, or [`flush`](crate::flush) first, see section 2).
//! - **Where remote work runs.** A remote call ([`invoke`](crate::invoke))
//!   runs its function in a new thread on the callee, as does a member
//!   function called through a [`GlobalPtr`](crate::GlobalPtr). Remote
//!   reads, writes and atomics, and [`GlobalSync`](crate::GlobalSync)
//!   writes, are applied by the callee's handler itself, without a thread.
//! - **Order.** Messages from one rank to another arrive, and are handled,
//!   in the order they were sent. There is no order between different
//!   senders.
//! - **Blocking needs a thread.** Anything that waits (a call, a read of an
//!   empty cell, a collective, [`fence`](crate::fence)) must run in an mttl
//!   thread: main, a remote function, or a thread you spawned. Outside one
//!   it panics rather than wait forever.
//!
//! A whole program (see the README for launching it on several ranks):
//!
//! ```
//! #[mttl::remote]
//! fn hello(from: usize) -> String {
//!     format!("rank {} greets rank {from}", mttl::rank())
//! }
//!
//! #[mttl::main]
//! fn main() {
//!     for node in 0..mttl::size() {
//!         println!("{}", mttl::invoke(node, hello, (mttl::rank(),)));
//!     }
//! }
//! ```
//!
//! # 2. Calling other ranks
//!
//! A function marked [`macro@crate::remote`] can be called on any rank;
//! its arguments and result are encoded ([`Encode`](crate::Encode),
//! [`Decode`](crate::Decode): the standard types, and your own with
//! `#[derive(mttl::Encode, mttl::Decode)]` and
//! `#[bincode(crate = "mttl::bincode")]`).
//!
//! - [`invoke`](crate::invoke)`(node, f, args)` waits for the result,
//!   blocking only the calling thread; [`try_invoke`](crate::try_invoke)
//!   returns a remote panic as a [`RemoteError`](crate::RemoteError).
//! - [`ainvoke`](crate::ainvoke) sends the call and returns a
//!   [`Pending`](crate::Pending) at once: start many, wait for each later.
//!   The call runs whether or not it is waited on; dropping the `Pending`
//!   discards its result (and a panic there is printed by the caller's
//!   rank, since nobody else sees it).
//! - [`spmd`](crate::spmd)`(f, args)` runs `f` on every rank and returns
//!   the results by rank: how rank 0's main starts the parallel part of a
//!   program.
//! - A call to the caller's own rank runs right there (`invoke`) or in a
//!   new local thread (`ainvoke`), with no message.
//! - Small messages to one rank leave together: the first at once, the
//!   rest when the thread blocks or yields. Call [`flush`](crate::flush)
//!   after a burst that is followed by a long computation.
//!
//! ```
//! #[mttl::remote]
//! fn square(x: u64) -> u64 {
//!     x * x
//! }
//!
//! #[mttl::remote]
//! fn boom() -> u64 {
//!     panic!("no")
//! }
//!
//! fn main() {
//!     let code = mttl::start(|| {
//!         let n = mttl::size();
//!         assert_eq!(mttl::invoke(n - 1, square, (7,)), 49);
//!         let calls: Vec<_> = (0..10).map(|i| mttl::ainvoke(i % n, square, (i as u64,))).collect();
//!         let sum: u64 = calls.into_iter().map(|c| c.wait()).sum();
//!         assert_eq!(sum, 285);
//!         assert_eq!(mttl::spmd(square, (3,)), vec![9; n]);
//!         let err = mttl::try_invoke(0, boom, ()).unwrap_err();
//!         assert!(err.message.contains("panicked"));
//!     });
//!     assert_eq!(code, 0);
//! }
//! ```
//!
//! A call whose result the caller does not need ("update the owner's
//! shard") is [`invoke_nowait`](crate::invoke_nowait)`(node, f, args)`: it
//! returns at once, and like an `nwrite` it has completed when this
//! thread's next [`fence`](crate::fence) or [`barrier`](crate::barrier)
//! returns; a panic of `f` is reported there (`fence` panics with it,
//! [`try_fence`](crate::try_fence) returns it).
//!
//! `#[mttl::remote]` makes the function's name a constant that calls like
//! the function and that only `invoke` and its kin accept, so passing a
//! function without the attribute to `invoke` does not compile (the error
//! says to add the attribute). One consequence: in a scope that
//! uses a remote function, no local variable may have its name.
//!
//! # 3. Threads, and waiting for them
//!
//! [`thread::spawn`](crate::thread::spawn)`(name, f)` starts a thread on
//! this rank; it runs once the current thread blocks or yields. It returns
//! a [`JoinHandle`](crate::thread::JoinHandle) whose `join` waits for the
//! thread and gives its value, or the panic that ended it; dropping the
//! handle detaches the thread. A thread still running when rank 0's main
//! returns is unwound at the job's end: join your threads before main
//! returns.
//!
//! ```
//! let code = mttl::start(|| {
//!     let workers: Vec<_> = (0..4u64)
//!         .map(|i| mttl::thread::spawn("worker", move || (0..=i * 1000).sum::<u64>()))
//!         .collect();
//!     let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
//!     assert_eq!(total, 500_500 + 2_001_000 + 4_501_500);
//! });
//! assert_eq!(code, 0);
//! ```
//!
//! [`thread::scope`](crate::thread::scope) runs threads that may borrow
//! from the caller, and returns only once every one of them has ended
//! (also when one panics):
//!
//! ```
//! let code = mttl::start(|| {
//!     let data = vec![1u64, 2, 3, 4];
//!     let sums = mttl::thread::scope(|s| {
//!         let halves: Vec<_> = data.chunks(2).map(|c| s.spawn("half", move || c.iter().sum::<u64>())).collect();
//!         halves.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
//!     });
//!     assert_eq!(sums, vec![3, 7]);
//! });
//! assert_eq!(code, 0);
//! ```
//!
//! Threads of one rank never run at the same time, so they share data
//! through `Rc`, `Cell` and `RefCell` (mttl's handles are `!Send`). One
//! rule: do not hold a `RefCell` borrow across a call that may block or
//! yield (an `invoke`, a cell read, a collective): another thread of the
//! rank may run meanwhile, try to borrow, and panic.
//!
//! # 4. Per-rank state: `thread_local!`
//!
//! State that a remote function needs on its rank (a table, a queue, the
//! rank's share of the data) lives in a `thread_local!`: each rank is one
//! OS thread, so each rank has its own. Do not use a `static` (a `Mutex`
//! or an atomic): with `MTTL_BACKEND=local` every rank is a thread of the
//! same process, and a `static` would be shared by all of them.
//!
//! ```
//! use std::cell::RefCell;
//!
//! thread_local! {
//!     static SEEN: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
//! }
//!
//! #[mttl::remote]
//! fn record(x: u64) -> usize {
//!     SEEN.with(|s| {
//!         let mut s = s.borrow_mut();
//!         s.push(x);
//!         s.len()
//!     })
//! }
//!
//! fn main() {
//!     let code = mttl::start(|| {
//!         for x in 0..3 {
//!             mttl::invoke(0, record, (x,));
//!         }
//!         assert_eq!(mttl::invoke(0, record, (3,)), 4);
//!     });
//!     assert_eq!(code, 0);
//! }
//! ```
//!
//! `examples/word_count.rs` keeps each rank's share of a word table this
//! way; `examples/stencil.rs` keeps its block of a global array.
//!
//! # 5. Synchronisation cells
//!
//! A [`SyncCell<T>`](crate::SyncCell) is MTTL's `Sync`: a FIFO queue whose
//! `read` takes the oldest value and blocks the calling thread while it is
//! empty; `write` appends and wakes the first waiting reader. Any number of
//! threads may read and write. [`SyncCell::global`](crate::SyncCell::global)
//! gives a [`GlobalSync`](crate::GlobalSync), plain data to pass to other
//! ranks, through which any rank appends to the cell. A `GlobalSync` write
//! returns at once; like an `nwrite`, it is in the cell once the writer's
//! next [`fence`](crate::fence) (or [`barrier`](crate::barrier)) returns.
//!
//! ```
//! use mttl::{GlobalSync, SyncCell};
//!
//! #[mttl::remote]
//! fn produce(to: GlobalSync<u32>, n: u32) {
//!     for i in 0..n {
//!         to.write(i);
//!     }
//!     mttl::fence(); // all n are in the cell now
//! }
//!
//! fn main() {
//!     let code = mttl::start(|| {
//!         let cell = SyncCell::new();
//!         mttl::spmd(produce, (cell.global(), 3));
//!         let got: Vec<u32> = (0..3 * mttl::size()).map(|_| cell.read()).collect();
//!         assert_eq!(got.len(), 3 * mttl::size());
//!     });
//!     assert_eq!(code, 0);
//! }
//! ```
//!
//! # 6. Global memory, `nwrite`, `fence` and `barrier`
//!
//! A rank registers plain data ([`Pod`](crate::Pod)) as a
//! [`GlobalArray`](crate::GlobalArray) or
//! [`GlobalObject`](crate::GlobalObject); a
//! [`GlobalPtr`](crate::GlobalPtr) into it (plain data: send it to other
//! ranks, e.g. gathered with [`allgather`](crate::allgather)) reads and
//! writes it from anywhere. The owner checks every access (region alive,
//! type, bounds) and refuses a bad one with a
//! [`GlobalError`](crate::GlobalError).
//!
//! | operation | returns when | the data is at its owner |
//! |---|---|---|
//! | `ptr.read()`, `read_slice` | the value is here | (a read) |
//! | `ptr.write(v)`, `write_slice(&d)` | the owner applied it | at once |
//! | `ptr.nwrite(v)`, `nwrite_slice(&d)` | at once (`nwrite_slice`: once `d` may be reused) | by the writer's next `fence` |
//! | `ptr.nwrite_owned(d)` | at once (`d` kept until sent) | by the writer's next `fence` |
//! | `GlobalSync::write(v)` | at once | by the writer's next `fence` |
//! | atomics (`fetch_add`, ...) | the owner applied it | at once |
//!
//! Completion, step by step:
//!
//! 1. [`fence`](crate::fence) waits until every `nwrite` (of any form) and
//!    every `GlobalSync` write *this rank* issued before it has been applied
//!    at its owner; with none outstanding it costs nothing.
//! 2. [`barrier`](crate::barrier) calls `fence` first, then waits for every
//!    rank to enter the barrier.
//! 3. So when a barrier returns anywhere, every such write issued anywhere
//!    before it is in place: write halos with `nwrite`, then `barrier`,
//!    then read them (`examples/stencil.rs`).
//!
//! A remote call (`invoke`, `ainvoke`) is not covered by `fence`: wait on
//! it to know it has run.
//!
//! **Borrowed regions defer remote writes.** The owning rank reads and
//! writes its array through guards ([`borrow`](crate::GlobalArray::borrow),
//! [`borrow_mut`](crate::GlobalArray::borrow_mut)), like a `RefCell`.
//! While a guard is live, remote writes, atomics and member calls to the
//! region are *deferred* (remote reads too, under a `borrow_mut` guard):
//! they are applied when the guard is dropped, and a fence waiting for them
//! waits until then. So keep guards short: a thread that holds one across
//! a blocking call sees the old values, and holding one across `fence` or
//! `barrier` (which wait for those very writes) deadlocks the job. An
//! access from the owning rank itself while it holds a conflicting guard
//! fails at once with [`GlobalErrorKind::Borrowed`](crate::GlobalErrorKind::Borrowed):
//!
//! ```
//! use mttl::{GlobalArray, GlobalErrorKind};
//!
//! let code = mttl::start(|| {
//!     let a = GlobalArray::<u64>::new(4);
//!     let p = a.ptr(0); // pointer to this rank's element 0
//!     {
//!         let guard = a.borrow(); // a live guard...
//!         let err = p.try_write(1).unwrap_err(); // ...refuses this rank's own write
//!         assert_eq!(err.kind, GlobalErrorKind::Borrowed);
//!         assert_eq!(guard[0], 0);
//!     }
//!     p.add(1).nwrite_slice(&[5, 6, 7]); // guard gone: fine
//!     mttl::fence();
//!     assert_eq!(a.to_vec(), vec![0, 5, 6, 7]);
//!     assert_eq!(p.add(3).fetch_add(1), 7);
//!     assert_eq!(p.read_vec(4), vec![0, 5, 6, 8]);
//! });
//! assert_eq!(code, 0);
//! ```
//!
//! # 7. Collectives: the rules of use
//!
//! [`barrier`](crate::barrier), [`broadcast`](crate::broadcast),
//! [`reduce`](crate::reduce), [`allreduce`](crate::allreduce),
//! [`gather`](crate::gather), [`allgather`](crate::allgather),
//! [`alltoall`](crate::alltoall), [`alltoallv`](crate::alltoallv) and their
//! slice forms involve every rank:
//!
//! 1. **Every rank calls them**, so they are called from code that runs on
//!    every rank: the task rank 0's main starts with
//!    [`spmd`](crate::spmd). A collective called by rank 0's main alone
//!    waits forever (the other ranks only serve).
//! 2. **In the same order**, with the same root and, for the slice forms,
//!    the same lengths. Collectives are numbered per rank; a rank that
//!    calls another kind at the same number stops the job with a message
//!    naming both, and a rank that skips one shows as a thread blocked in
//!    `barrier (number k)` in the deadlock report.
//! 3. **One at a time per rank**: from one thread per rank at a time (the
//!    SPMD task). Starting a second collective on a rank while one runs
//!    there stops the job.
//! 4. A collective blocks only its calling thread: the rank meanwhile
//!    serves calls and runs its other threads.
//! 5. `reduce` and `allreduce` combine in rank order with fixed brackets:
//!    `op` must be associative, need not be commutative, and the result is
//!    the same bits on every rank and every run.
//!
//! ```
//! #[mttl::remote]
//! fn phase(x: u64) -> u64 {
//!     let me = mttl::rank() as u64;
//!     let total = mttl::allreduce(x + me, |a, b| a + b);
//!     let from_root = mttl::broadcast(0, if me == 0 { 42 } else { 0 });
//!     let everyone = mttl::allgather(me);
//!     mttl::barrier();
//!     assert_eq!(from_root, 42);
//!     assert_eq!(everyone.len(), mttl::size());
//!     total
//! }
//!
//! fn main() {
//!     let code = mttl::start(|| {
//!         let n = mttl::size() as u64;
//!         let totals = mttl::spmd(phase, (10,));
//!         assert!(totals.iter().all(|&t| t == 10 * n + n * (n - 1) / 2));
//!     });
//!     assert_eq!(code, 0);
//! }
//! ```
//!
//! # 8. Which exchange for which job
//!
//! | the job | use | why |
//! |---|---|---|
//! | every rank sends every other a piece of plain data of varying size (sort by key range, redistribute) | [`alltoallv`](crate::alltoallv) (equal pieces: [`alltoall_slice`](crate::alltoall_slice)) | one collective, raw bytes, no encoding; see `examples/sample_sort.rs` |
//! | the same with encoded values (strings, maps) | [`alltoall`](crate::alltoall) of one `Vec` per rank | encodes each piece |
//! | send data to the rank that owns it and have the owner merge it into its state | [`ainvoke`](crate::ainvoke) of a remote function, one batch per owner, then wait | the owner's function runs with the data; see `examples/word_count.rs` |
//! | ask another rank for something (a task, a lookup) | [`invoke`](crate::invoke) | a round trip; the callee runs your function |
//! | write into a known place of another rank's array, many small or regular writes (halos) | [`GlobalPtr::nwrite`](crate::GlobalPtr::nwrite), [`nwrite_slice`](crate::GlobalPtr::nwrite_slice), then [`barrier`](crate::barrier) or [`fence`](crate::fence) | no reply per write; one fence for all |
//! | large writes from buffers you hand over, overlapped | [`nwrite_owned`](crate::GlobalPtr::nwrite_owned) | returns at once, no copy; keeps several in flight |
//! | one write whose completion this thread needs now | [`write`](crate::GlobalPtr::write), [`write_slice`](crate::GlobalPtr::write_slice) | waits for the owner's acknowledgement |
//! | values for a consumer thread, in order, from any rank | [`GlobalSync::write`](crate::GlobalSync::write) into a [`SyncCell`](crate::SyncCell) | a queue; the reader blocks until a value is there; see `examples/task_farm.rs` |
//! | a shared counter or flag | atomics on a `GlobalPtr` of an integer ([`AtomicInt`](crate::AtomicInt)) | applied at the owner, one round trip |
//! | one value from one rank to all, or combined from all | [`broadcast`](crate::broadcast), [`allreduce`](crate::allreduce), [`reduce`](crate::reduce), [`gather`](crate::gather), [`allgather`](crate::allgather) | logarithmic trees |
//!
//! # 9. Running and failing
//!
//! `./prog` is a job of one rank; `MTTL_NP=4 ./prog` launches four on this
//! machine over TCP; `MTTL_BACKEND=local MTTL_NP=4 ./prog` runs four ranks
//! as threads of one process; `mpirun`, `srun` and `mttlrun` start larger
//! jobs (the README's "Launching"). A panicking thread stops the job with
//! its rank, thread, place and message; a job in which nothing can move
//! any more is stopped by the deadlock watchdog (`MTTL_WATCHDOG`), which
//! prints what every thread waits for and where. The README's "When things
//! go wrong" lists every message.
