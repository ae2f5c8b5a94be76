//! Cooperative user-level threads: one scheduler per OS thread, threads on
//! pooled corosensei coroutine stacks.
//!
//! This module owns thread creation, the FIFO ready queue, switching,
//! blocking and waking, panic capture and stack-overflow reporting. The
//! runtime above owns the main loop: it calls [`run_ready`] on the native
//! (OS) stack between polls of the network.
//!
//! Files: `sched` (slots, ready queue, run loop), `stack` (stack
//! size and pool), `reason` (why a thread blocks), `panic` (panic capture),
//! `overflow` (stack-overflow detection), `id` ([`ThreadId`]), `join`
//! ([`JoinHandle`], [`scope`]). They form layers: `id` and `stack` at the
//! bottom; `reason`, `panic` and `overflow` above them; `sched` above
//! those; `join` above `sched`; this file, the API, on top. `panic`
//! and `overflow` learn the running thread from a function `sched` hands
//! them when it installs them, so neither imports the scheduler.
//!
//! # Invariants
//!
//! - Threads never migrate: every type here is `!Send`, and a [`ThreadId`]
//!   means something only to the scheduler of the OS thread that made it.
//! - Threads are non-preemptive: between two calls of [`yield_now`],
//!   [`block`] (or the thread's end) no other thread and no message handler
//!   runs on this OS thread.
//! - No scheduler borrow or thread-local guard is held across a switch.
//!
//! # Switch protocol
//!
//! 1. [`spawn`] takes a stack from the pool (or maps one), builds a
//!    coroutine for the closure on it, puts the thread in a slot in state
//!    *Ready* and appends its id to the ready queue. Nothing runs yet.
//! 2. [`run_ready`] pops the front id, skips it if stale (generation or
//!    state mismatch), marks the slot *Running*, records it as the current
//!    thread (which also arms overflow detection for its stack) and resumes
//!    the coroutine.
//! 3. The thread runs until one of:
//!    - [`yield_now`]: state *Ready*, id appended to the ready queue, suspend;
//!    - [`block`]: see below;
//!    - it returns or panics: the root catches any panic and records it (see
//!      [`take_panics`]); the coroutine completes.
//! 4. Back on the native stack, `run_ready` clears the current thread. If the
//!    thread completed, its stack returns to the pool, its slot's
//!    generation is bumped (so its id goes stale) and the slot is freed.
//!    Then it continues with step 2 until `max` threads ran or the queue is
//!    empty.
//!
//! # Block/wake protocol (a permit, like `std::thread::park`)
//!
//! Each thread has one wake permit, initially absent.
//!
//! 1. [`wake(id)`](wake) ignores an id whose slot is gone or whose
//!    generation differs (finished thread, stale id): waking is always safe.
//! 2. If the thread is *Blocked*, `wake` clears its reason, marks it *Ready*
//!    and appends it to the ready queue.
//! 3. If it is *Ready* or *Running*, `wake` sets its permit (several wakes
//!    leave one permit).
//! 4. [`block(reason)`](block) first consumes the permit if set and then
//!    returns at once, without switching. Otherwise it stores `reason`, marks
//!    the thread *Blocked* and suspends until a `wake` (step 2) and a later
//!    `run_ready` resume it.
//!
//! So "register as a waiter, then block" never loses a wake, even if the
//! thread switches (yields, or blocks on something else) between the two
//! and is woken meanwhile. The price: `block` may return although the
//! event it waits for has not happened (a permit left by an earlier wake).
//! Callers therefore block in a loop that rechecks their condition:
//!
//! ```
//! use std::{cell::Cell, rc::Rc};
//! use mttl_core::thread::{self, BlockReason};
//!
//! let done = Rc::new(Cell::new(false));
//! let waiter = {
//!     let done = done.clone();
//!     thread::spawn("waiter", move || {
//!         while !done.get() {
//!             thread::block(BlockReason::new("done flag"));
//!         }
//!     })
//!     .id()
//! };
//! thread::spawn("setter", move || {
//!     done.set(true);
//!     thread::wake(waiter);
//! });
//! while thread::run_ready(64) > 0 {}
//! assert_eq!(thread::live_threads(), 0);
//! ```
//!
//! Thread ids cannot leave their OS thread:
//!
//! ```compile_fail
//! fn assert_send<T: Send>() {}
//! assert_send::<mttl_core::thread::ThreadId>();
//! ```
//!
//! ```compile_fail
//! fn assert_sync<T: Sync>() {}
//! assert_sync::<mttl_core::thread::ThreadId>();
//! ```

mod id;
mod join;
mod overflow;
mod panic;
mod reason;
mod sched;
mod shared;
mod stack;

#[cfg(test)]
mod tests;

pub use self::id::ThreadId;
pub use self::join::{scope, JoinHandle, Scope, ScopedJoinHandle};
pub use self::panic::{PanicLocation, ThreadPanic};
pub use self::reason::{BlockReason, BlockedThread};
pub use self::sched::SpawnError;
pub use self::stack::{
    configured_stack_size, parse_stack_size, stack_size, StackSizeError, StackStats,
    DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_STACK_SIZE, STACK_SIZE_VAR,
};

/// Creates a thread running `f` and appends it to the ready queue; it runs
/// when [`run_ready`] reaches it. Callable on the native stack or from a
/// thread.
///
/// The handle's [`join`](JoinHandle::join) waits for the thread and gives
/// what `f` returned, or its panic. Dropping the handle detaches the
/// thread; a panic of a detached thread ends the job, as any panic that
/// nothing catches. For threads that borrow from the caller, see [`scope`].
///
/// # Panics
///
/// Panics if `MTTL_STACK_SIZE` is invalid or no stack can be mapped; see
/// [`try_spawn`].
#[inline]
#[track_caller]
pub fn spawn<F, T>(name: &'static str, f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    match join::spawn(name, f) {
        Ok(handle) => handle,
        Err(error) => spawn_failed(error),
    }
}

/// A thread nothing joins, for the runtime's own (a remote call, main):
/// [`spawn`] without the handle's allocation. Its panic is uncaught.
#[inline]
pub(crate) fn spawn_detached<F>(name: &'static str, f: F) -> ThreadId
where
    F: FnOnce() + 'static,
{
    match sched::spawn(name, f) {
        Ok(id) => id,
        Err(error) => spawn_failed(error),
    }
}

#[cold]
#[inline(never)]
#[track_caller]
fn spawn_failed(error: SpawnError) -> ! {
    panic!("mttl: {error}")
}

/// Like [`spawn`], returning the error instead of panicking.
pub fn try_spawn<F, T>(name: &'static str, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    join::spawn(name, f)
}

/// Moves the running thread to the back of the ready queue and switches
/// out, even when no other thread is ready. The runtime's loop looks at the
/// network every few microseconds while threads keep running, so a thread
/// that yields in a loop sees messages arrive within about that long.
/// Outside a thread it does nothing.
#[inline]
pub fn yield_now() {
    sched::yield_now();
}

/// [`yield_now`], and [`run_ready`] returns before it resumes any thread:
/// the runtime's loop takes what has arrived before this thread goes on.
/// Outside a thread it does nothing.
pub(crate) fn yield_to_loop() {
    sched::yield_to_loop();
}

/// Whether a thread has called [`yield_to_loop`] since the last call: the
/// runtime's loop then looks at the network whatever else it would do.
pub(crate) fn take_look_request() -> bool {
    sched::take_look_request()
}

/// Stops the running thread until [`wake`] is called for it, or returns at
/// once if a wake permit is pending (see the module docs). `reason` is kept
/// for [`blocked_threads`].
///
/// # Panics
///
/// Panics when called outside an mttl thread.
#[inline]
pub fn block(reason: BlockReason) {
    sched::block(reason);
}

/// Makes thread `id` ready if it is blocked, or gives it a wake permit if it
/// is ready or running. Does nothing for a finished or stale id. Callable
/// on the native stack or from a thread.
#[inline]
pub fn wake(id: ThreadId) {
    sched::wake(id);
}

/// The running thread, or `None` on the native stack.
#[inline]
pub fn current() -> Option<ThreadId> {
    sched::current()
}

/// The running thread's name, or `None` on the native stack.
pub fn current_name() -> Option<&'static str> {
    sched::current_name()
}

/// Whether the caller runs inside an mttl thread.
#[inline]
pub fn in_thread() -> bool {
    sched::current().is_some()
}

/// Resumes up to `max` ready threads in FIFO order, returning how many were
/// resumed. Threads made ready meanwhile (by yield, wake or spawn) join the
/// back of the queue and may run in the same call. Returns 0 when no thread
/// is ready.
///
/// # Panics
///
/// Panics when called inside an mttl thread.
pub fn run_ready(max: usize) -> usize {
    sched::run_ready(max)
}

/// Unwinds every thread of this OS thread that is not running (dropping the
/// values on their stacks) and frees their stacks; returns how many. For
/// shutdown: threads still alive when the OS thread exits are leaked with
/// their stacks instead. While a thread is being unwound, `block` and
/// `yield_now` return at once.
///
/// # Panics
///
/// Panics when called inside an mttl thread.
pub fn unwind_all() -> usize {
    sched::unwind_all()
}

/// Threads spawned and not finished.
pub fn live_threads() -> usize {
    sched::live_threads()
}

/// Threads in the ready queue.
pub fn ready_threads() -> usize {
    sched::ready_threads()
}

/// Every blocked thread with its reason (allocates; for watchdogs).
pub fn blocked_threads() -> Vec<BlockedThread> {
    sched::blocked_threads()
}

/// Takes the panics of threads that ended by panicking, oldest first.
pub fn take_panics() -> Vec<ThreadPanic> {
    sched::take_panics()
}

/// How many panics [`take_panics`] would return.
pub fn pending_panics() -> usize {
    sched::pending_panics()
}

/// Counters of this OS thread's stack pool.
pub fn stack_stats() -> StackStats {
    sched::stack_stats()
}

/// Runs `f` in the current thread, catching a panic and reporting it as a
/// [`ThreadPanic`] (message and location) instead of ending the thread: for
/// the runtime's wrappers around remote functions, whose panics go back to
/// the caller.
pub fn catch_panic<R>(f: impl FnOnce() -> R) -> Result<R, ThreadPanic> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => Ok(r),
        Err(payload) => {
            let id = current().unwrap_or_else(ThreadId::native);
            Err(panic::report(id, current_name().unwrap_or("main"), payload))
        }
    }
}
