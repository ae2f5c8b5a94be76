//! Joinable and scoped threads: [`JoinHandle`], [`scope`] and [`Scope`].
//!
//! A thread spawned through the API runs its closure under a wrapper that
//! catches a panic and leaves the outcome in a [`Packet`] it shares with
//! the handle:
//!
//! 1. The closure returns a value or panics; the wrapper stores
//!    `Ok(value)` or `Err(ThreadPanic)` in the packet, marks it done and
//!    wakes the joining thread, if any.
//! 2. [`JoinHandle::join`] blocks until the packet is done and takes the
//!    outcome.
//! 3. A panic nobody can claim is not lost: if the handle is already gone
//!    when the thread panics, or is dropped later without joining, the
//!    panic goes where an uncaught one goes: the scheduler's panic queue
//!    (the runtime stops the job) for a detached thread, the scope for a
//!    scoped one (the scope panics once every thread has ended).
//!
//! # Scoped threads: soundness
//!
//! A scoped thread may borrow from the stack of the thread that called
//! [`scope`] (the owner), so it must end before that stack frame does:
//!
//! - `scope` counts its threads; a guard owned by each thread's closure
//!   counts it out when it ends, however it ends (returns, panics, or is
//!   unwound at shut-down, started or not);
//! - `scope` waits until the count is zero before it returns, also when
//!   the closure it runs panicked (the panic is caught, waited past, and
//!   then resumed);
//! - at shut-down `unwind_all` unwinds pinned threads last, the latest
//!   pinned first: a scope's owner is pinned while in the scope, so its
//!   scoped threads (pinned later, if they open scopes themselves) are
//!   unwound before its stack is.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

use super::id::ThreadId;
use super::panic::{self, ThreadPanic};
use super::reason::BlockReason;
use super::sched::{self, SpawnError};
use super::shared::Shared;

/// Where a thread's outcome meets its handle.
struct Packet<T> {
    name: &'static str,
    /// A panic is boxed: rare, and large enough that a packet holding it
    /// inline would not fit a pooled block (see `shared`).
    outcome: RefCell<Option<Result<T, Box<ThreadPanic>>>>,
    done: Cell<bool>,
    joiner: Cell<Option<ThreadId>>,
    /// The scope of a scoped thread: where its unclaimed panic goes.
    scope: Option<Rc<ScopeState>>,
}

impl<T> Packet<T> {
    /// Step 3: a panic no handle will see.
    fn unclaimed(&self, report: ThreadPanic) {
        match &self.scope {
            Some(scope) => scope.panics.borrow_mut().push(report),
            None => sched::report_panic(report),
        }
    }
}

/// An owned permission to join a thread: [`join`](JoinHandle::join) waits
/// for it to end and gives its result, or its panic. Dropping the handle
/// detaches the thread: it runs on, and a panic of it then ends the job as
/// any uncaught panic does.
pub struct JoinHandle<T> {
    id: ThreadId,
    packet: Shared<Packet<T>>,
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinHandle({} '{}')", self.id, self.packet.name)
    }
}

impl<T> JoinHandle<T> {
    /// The thread's id (for [`wake`](super::wake)).
    pub fn id(&self) -> ThreadId {
        self.id
    }

    /// Whether the thread has ended (joining would not block).
    pub fn is_finished(&self) -> bool {
        self.packet.done.get()
    }

    /// Waits for the thread to end; returns what its closure returned, or
    /// the panic that ended it. Blocks only the calling thread.
    ///
    /// # Panics
    ///
    /// Panics outside an mttl thread (nothing could run the thread while it
    /// waits), or when a thread joins itself.
    #[track_caller]
    pub fn join(self) -> Result<T, ThreadPanic> {
        while !self.packet.done.get() {
            let Some(me) = sched::current() else {
                panic!(
                    "mttl: joining thread '{}' outside an mttl thread would wait forever",
                    self.packet.name
                );
            };
            if me == self.id {
                panic!("mttl: thread '{}' joins itself", self.packet.name);
            }
            self.packet.joiner.set(Some(me));
            sched::block(BlockReason::new("join of a thread"));
        }
        let outcome = self.packet.outcome.borrow_mut().take();
        outcome
            .unwrap_or_else(|| unreachable!("a finished thread's outcome is taken once"))
            .map_err(|report| *report)
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // Step 3: a panic that ended the thread before its handle went.
        let outcome = self.packet.outcome.borrow_mut().take();
        if let Some(Err(report)) = outcome {
            self.packet.unclaimed(*report);
        }
    }
}

/// Counts a scoped thread out when it ends, however it ends.
struct Ended(Option<Rc<ScopeState>>);

impl Drop for Ended {
    fn drop(&mut self) {
        if let Some(scope) = &self.0 {
            scope.running.set(scope.running.get() - 1);
            if scope.running.get() == 0 {
                if let Some(owner) = scope.owner.take() {
                    sched::wake(owner);
                }
            }
        }
    }
}

/// Step 1: the wrapper a thread runs.
fn run<F, T>(f: F, packet: Shared<Packet<T>>)
where
    F: FnOnce() -> T,
{
    let outcome = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Ok(value),
        // A forced unwind (shut-down) is not the program's panic.
        Err(payload) if sched::unwinding() => resume_unwind(payload),
        Err(payload) => Err(Box::new(report(packet.name, payload))),
    };
    let claimed = packet.is_shared();
    match outcome {
        Err(report) if !claimed => packet.unclaimed(*report),
        outcome => *packet.outcome.borrow_mut() = Some(outcome),
    }
    packet.done.set(true);
    if let Some(joiner) = packet.joiner.take() {
        sched::wake(joiner);
    }
}

fn report(name: &'static str, payload: Box<dyn Any + Send>) -> ThreadPanic {
    let id = sched::current().unwrap_or_else(ThreadId::native);
    panic::report(id, name, payload)
}

/// Spawns `f` with its packet.
///
/// # Safety
///
/// Everything `f` and `T` borrow must outlive the thread: the caller
/// (`scope`) waits for the thread to end before any of it may end.
unsafe fn spawn_unchecked<'a, F, T>(
    name: &'static str,
    f: F,
    scope: Option<Rc<ScopeState>>,
) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + 'a,
    T: 'a,
{
    let packet = Shared::new(Packet {
        name,
        outcome: RefCell::new(None),
        done: Cell::new(false),
        joiner: Cell::new(None),
        scope,
    });
    let theirs = packet.clone();
    // Owned by the closure, so that it counts the thread out even if the
    // closure is dropped unstarted (a shut-down unwinding it).
    let ended = Ended(packet.scope.clone());
    let body: Box<dyn FnOnce() + 'a> = Box::new(move || {
        let _ended = ended;
        run(f, theirs);
    });
    // SAFETY: only the lifetime changes; the caller guarantees that what
    // the closure borrows outlives the thread that runs it.
    let body: Box<dyn FnOnce() + 'static> = unsafe { std::mem::transmute(body) };
    let id = sched::spawn(name, body)?;
    Ok(JoinHandle { id, packet })
}

/// Spawns a joinable thread (see [`spawn`](super::spawn)).
pub(super) fn spawn<F, T>(name: &'static str, f: F) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + 'static,
    T: 'static,
{
    let packet = Shared::new(Packet {
        name,
        outcome: RefCell::new(None),
        done: Cell::new(false),
        joiner: Cell::new(None),
        scope: None,
    });
    let theirs = packet.clone();
    let id = sched::spawn(name, move || run(f, theirs))?;
    Ok(JoinHandle { id, packet })
}

/// The shared state of a [`scope`].
#[derive(Default)]
struct ScopeState {
    running: Cell<usize>,
    owner: Cell<Option<ThreadId>>,
    panics: RefCell<Vec<ThreadPanic>>,
}

/// A scope to spawn threads that borrow from the caller's stack: see
/// [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    state: Rc<ScopeState>,
    /// Invariant in `'scope`, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({} threads running)", self.state.running.get())
    }
}

/// A [`JoinHandle`] of a scoped thread, valid within its scope.
pub struct ScopedJoinHandle<'scope, T> {
    handle: JoinHandle<T>,
    scope: PhantomData<&'scope ()>,
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.handle.fmt(f)
    }
}

impl<T> ScopedJoinHandle<'_, T> {
    /// The thread's id.
    pub fn id(&self) -> ThreadId {
        self.handle.id()
    }

    /// Whether the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the thread to end (see [`JoinHandle::join`]).
    #[track_caller]
    pub fn join(self) -> Result<T, ThreadPanic> {
        self.handle.join()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawns a thread that may borrow what outlives the scope; it is
    /// joined, at the latest, when [`scope`] returns.
    ///
    /// # Panics
    ///
    /// Panics if no stack can be had (see [`try_spawn`](super::try_spawn)).
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, name: &'static str, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + 'scope,
        T: 'scope,
    {
        // SAFETY: `scope` does not return (nor unwind past its frame, nor
        // let `unwind_all` free its owner's stack first) before this thread
        // has ended (the module docs), and `'scope` ends within it.
        let spawned = unsafe { spawn_unchecked(name, f, Some(self.state.clone())) };
        match spawned {
            Ok(handle) => {
                self.state.running.set(self.state.running.get() + 1);
                ScopedJoinHandle {
                    handle,
                    scope: PhantomData,
                }
            }
            Err(error) => panic!("mttl: {error}"),
        }
    }
}

/// Runs `f` with a [`Scope`] whose threads may borrow from the caller, and
/// returns once every one of them has ended (joined or not), with what `f`
/// returned. Blocks only the calling thread.
///
/// # Panics
///
/// Panics outside an mttl thread; with `f`'s panic if `f` panicked, or else
/// if a scoped thread that was not joined panicked (naming it) — in either
/// case only after every scoped thread has ended.
///
/// A scoped thread cannot outlive what it borrows:
///
/// ```compile_fail
/// mttl_core::thread::scope(|s| {
///     let local = vec![1, 2, 3];
///     s.spawn("sum", || local.iter().sum::<i32>());
/// });
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    if !sched::pin() {
        panic!("mttl: thread::scope called outside an mttl thread");
    }
    let scope = Scope {
        state: Rc::new(ScopeState::default()),
        scope: PhantomData,
        env: PhantomData,
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    wait_all(&scope.state);
    sched::unpin();
    let value = match outcome {
        Ok(value) => value,
        Err(payload) => resume_unwind(payload),
    };
    let first = scope.state.panics.borrow_mut().drain(..).next();
    if let Some(report) = first {
        panic!("a scoped thread panicked: {report}");
    }
    value
}

/// Blocks until every thread of the scope has ended.
fn wait_all(state: &ScopeState) {
    while state.running.get() > 0 {
        if sched::unwinding() {
            // `unwind_all` unwinds the scoped threads before their owner,
            // so this cannot happen; returning would free borrowed memory.
            eprintln!("mttl: a scope's owner unwound before its threads");
            std::process::abort();
        }
        state.owner.set(sched::current());
        sched::block(BlockReason::new("end of the scope's threads"));
    }
}
