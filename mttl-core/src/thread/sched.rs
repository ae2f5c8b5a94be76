//! The scheduler of one OS thread: thread slots, the FIFO ready queue, the
//! run loop, and block/wake.
//!
//! Owns every mttl thread's [`Slot`] (state, generation, name, block reason,
//! coroutine) and the ready queue; see the [module docs](super) for the
//! protocol. Implementation invariants:
//!
//! - Slots are boxed once and never freed until the scheduler drops, so a
//!   `&Slot` stays valid across switches and while the slot table grows.
//! - All slot fields but the coroutine are `Cell`s. The coroutine cell is
//!   touched only on the native stack: by `spawn` while the slot is `Free`,
//!   by `run_ready` for the duration of one resume, and by `finish` and
//!   `unwind_all` when it is not running.
//! - The table, the free list and the ready queue sit in `UnsafeCell`s and are
//!   reached only through [`Scheduler::table`], whose closures are a few lines
//!   of container code: they call no user code, never switch and never nest,
//!   so each `&mut` is unique while it lives. Nothing else of the scheduler
//!   is borrowed across a resume or a suspend.
//! - A thread is in the ready queue at most once with its current
//!   generation; the queue may also hold stale ids (of threads unwound by
//!   [`unwind_all`](super::unwind_all)), which `run_ready` skips by checking
//!   generation and state.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::id::ThreadId;
use super::overflow::{self, AltStack};
use super::panic::{self, ThreadPanic};
use super::reason::{BlockReason, BlockedThread};
use super::stack::{
    configured_stack_size, page_size, SizeText, StackPool, StackSizeError, StackStats,
};
use crate::trace::{self, format};

type ThreadCoroutine = Coroutine<(), (), (), DefaultStack>;
type ThreadYielder = Yielder<(), ()>;

/// Why a thread could not be spawned.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// `MTTL_STACK_SIZE` is invalid.
    #[error("cannot spawn thread '{name}': {source}")]
    StackSize {
        /// The thread's name.
        name: &'static str,
        /// The bad setting.
        #[source]
        source: StackSizeError,
    },
    /// The OS refused a new stack.
    #[error(
        "cannot map a {size} stack for thread '{name}' with {live} threads live: {source}; \
         lower MTTL_STACK_SIZE or the number of live threads (each stack takes 2 of the \
         vm.max_map_count memory maps)",
        size = SizeText(*bytes)
    )]
    Stack {
        /// The thread's name.
        name: &'static str,
        /// The stack size asked for.
        bytes: usize,
        /// Threads alive at the time.
        live: usize,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The stack-overflow handler or signal stack could not be set up.
    #[error("cannot set up stack-overflow detection for thread '{name}': {source}")]
    Signal {
        /// The thread's name.
        name: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// No thread; the slot is on the free list.
    Free,
    /// In the ready queue.
    Ready,
    /// Resumed by `run_ready` (or being unwound by `unwind_all`).
    Running,
    /// Suspended in `block`, waiting for `wake`.
    Blocked,
}

/// One thread's control block.
pub(super) struct Slot {
    index: u32,
    /// Bumped when the thread finishes, so ids of finished threads go stale.
    generation: Cell<u32>,
    state: Cell<State>,
    /// Set by a wake that found the thread not blocked; consumed by `block`.
    permit: Cell<bool>,
    /// Set while `unwind_all` unwinds this thread.
    unwinding: Cell<bool>,
    /// Nonzero while the thread is in a `thread::scope` (`pin`): the
    /// scheduler's order number of its outermost scope, so that
    /// `unwind_all` unwinds it after every unpinned thread and after the
    /// threads pinned later (the scoped threads that borrow from its stack,
    /// and their own scopes).
    pinned: Cell<u64>,
    /// Nested scopes of the thread.
    pin_depth: Cell<u32>,
    name: Cell<&'static str>,
    reason: Cell<Option<BlockReason>>,
    /// Set by the thread's root on its first resume.
    yielder: Cell<*const ThreadYielder>,
    /// The guard page of the thread's stack, `[low, high)`.
    guard: Cell<(usize, usize)>,
    coroutine: UnsafeCell<Option<ThreadCoroutine>>,
}

impl Slot {
    #[inline]
    fn id(&self) -> ThreadId {
        ThreadId::new(self.index, self.generation.get())
    }
}

thread_local! {
    /// The running thread's slot; null on the native stack. No destructor,
    /// so the overflow handler may read it.
    static CURRENT: Cell<*const Slot> = const { Cell::new(ptr::null()) };
    static SCHEDULER: Scheduler = const { Scheduler::new() };
}

/// The slot of the running mttl thread.
#[inline]
fn current_slot() -> Option<&'static Slot> {
    let slot = CURRENT.with(Cell::get);
    // SAFETY: CURRENT is non-null only while `run_ready` or `unwind_all`
    // runs that slot's coroutine on this OS thread; slots live until the
    // scheduler drops, which cannot happen while one of its threads runs.
    // The `'static` never outlives that: callers use it within the thread.
    unsafe { slot.as_ref() }
}

/// Resets CURRENT when a resume returns or unwinds.
struct ClearCurrent;

impl Drop for ClearCurrent {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|current| current.set(ptr::null()));
    }
}

/// The containers behind [`Scheduler::table`].
struct Table {
    slots: Vec<NonNull<Slot>>,
    free: Vec<u32>,
    ready: VecDeque<ThreadId>,
}

pub(super) struct Scheduler {
    table: UnsafeCell<Table>,
    live: Cell<usize>,
    /// Stack size; 0 until `start` ran.
    stack_bytes: Cell<usize>,
    page: Cell<usize>,
    stacks: StackPool,
    panics: RefCell<Vec<ThreadPanic>>,
    alt_stack: RefCell<Option<AltStack>>,
    /// Set by [`yield_to_loop`]: `run_ready` returns after the running
    /// thread switches out.
    loop_wanted: Cell<bool>,
    /// Set by [`yield_to_loop`], taken by the runtime's loop
    /// ([`take_look_request`]): look at the network now.
    look_wanted: Cell<bool>,
    /// The last order number given to a pinned thread.
    pins: Cell<u64>,
}

impl Scheduler {
    const fn new() -> Self {
        Self {
            table: UnsafeCell::new(Table {
                slots: Vec::new(),
                free: Vec::new(),
                ready: VecDeque::new(),
            }),
            live: Cell::new(0),
            stack_bytes: Cell::new(0),
            page: Cell::new(0),
            stacks: StackPool::new(),
            panics: RefCell::new(Vec::new()),
            alt_stack: RefCell::new(None),
            loop_wanted: Cell::new(false),
            look_wanted: Cell::new(false),
            pins: Cell::new(0),
        }
    }

    /// The only way to the table: `f` gets it mutably for its duration.
    /// Every `f` in this file is container code that calls no user code,
    /// never switches and never calls `table` again.
    #[inline(always)]
    fn table<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        // SAFETY: the scheduler is thread-local, so only this OS thread
        // reaches it, and by the rule above no other `&mut` to the table is
        // live while `f` runs.
        f(unsafe { &mut *self.table.get() })
    }

    #[inline]
    fn slot(&self, index: u32) -> Option<&Slot> {
        let slot = self.table(|t| t.slots.get(index as usize).copied())?;
        // SAFETY: slots are boxed once and freed only in `drop`, which needs
        // `&mut self`; the returned borrow is tied to `&self`.
        Some(unsafe { slot.as_ref() })
    }

    /// One-time set-up of this OS thread, on its first spawn.
    #[cold]
    fn start(&self, name: &'static str) -> Result<(), SpawnError> {
        let bytes =
            configured_stack_size().map_err(|source| SpawnError::StackSize { name, source })?;
        panic::install_hook(current);
        let signal = |source| SpawnError::Signal { name, source };
        overflow::install_handler(bytes, overflowed_thread).map_err(signal)?;
        *self.alt_stack.borrow_mut() = overflow::ensure_alt_stack().map_err(signal)?;
        self.page.set(page_size());
        self.stack_bytes.set(bytes);
        Ok(())
    }

    fn spawn<F>(&self, name: &'static str, f: F) -> Result<ThreadId, SpawnError>
    where
        F: FnOnce() + 'static,
    {
        if self.stack_bytes.get() == 0 {
            self.start(name)?;
        }
        let bytes = self.stack_bytes.get();
        let stack = self
            .stacks
            .take(bytes)
            .map_err(|source| SpawnError::Stack {
                name,
                bytes,
                live: self.live.get(),
                source,
            })?;
        let guard_low = stack.limit().get();
        let coroutine =
            ThreadCoroutine::with_stack(stack, move |yielder, ()| thread_root(yielder, f));

        let slot = self.claim_slot();
        slot.name.set(name);
        slot.guard.set((guard_low, guard_low + self.page.get()));
        slot.permit.set(false);
        slot.state.set(State::Ready);
        // SAFETY: the slot was Free: it has no coroutine and nobody else
        // touches its coroutine cell (see the module invariants).
        unsafe { *slot.coroutine.get() = Some(coroutine) };
        let id = slot.id();
        self.table(|t| t.ready.push_back(id));
        self.live.set(self.live.get() + 1);
        if trace::threads_on() {
            trace::thread_spawn(name, traced_id(id));
        }
        Ok(id)
    }

    #[inline]
    fn claim_slot(&self) -> &Slot {
        let slot = self.table(|t| match t.free.pop() {
            Some(index) => t.slots[index as usize],
            None => {
                let index = u32::try_from(t.slots.len()).expect("more than 2^32 mttl thread slots");
                let slot = NonNull::from(Box::leak(Box::new(Slot {
                    index,
                    generation: Cell::new(0),
                    state: Cell::new(State::Free),
                    permit: Cell::new(false),
                    unwinding: Cell::new(false),
                    pinned: Cell::new(0),
                    pin_depth: Cell::new(0),
                    name: Cell::new(""),
                    reason: Cell::new(None),
                    yielder: Cell::new(ptr::null()),
                    guard: Cell::new((0, 0)),
                    coroutine: UnsafeCell::new(None),
                })));
                t.slots.push(slot);
                slot
            }
        });
        // SAFETY: as in `slot`: boxed, freed only in `drop`.
        unsafe { slot.as_ref() }
    }

    fn run_ready(&self, max: usize) -> usize {
        let mut ran = 0;
        while ran < max {
            let Some(id) = self.table(|t| t.ready.pop_front()) else {
                break;
            };
            let Some(slot) = self.slot(id.index()) else {
                continue;
            };
            if slot.generation.get() != id.generation() || slot.state.get() != State::Ready {
                continue;
            }
            slot.state.set(State::Running);
            let traced = trace::threads_on();
            if traced {
                trace::thread_run(traced_id(id));
            }
            CURRENT.with(|current| current.set(slot));
            let clear = ClearCurrent;
            // SAFETY: a Ready slot holds a coroutine that is not running; from
            // here until `resume` returns, this is the only reference to the
            // cell (module invariants), and the slot's box does not move.
            let coroutine = unsafe { (*slot.coroutine.get()).as_mut() };
            let result = coroutine.map(|coroutine| coroutine.resume(()));
            drop(clear);
            ran += 1;
            if !matches!(result, Some(CoroutineResult::Yield(()))) {
                if traced && trace::threads_on() {
                    trace::thread_exit(traced_id(id));
                }
                self.finish(slot);
            }
            if self.loop_wanted.replace(false) {
                break;
            }
        }
        if ran > 0 && trace::threads_on() {
            trace::thread_run(format::LOOP_THREAD);
        }
        ran
    }

    /// Retires a slot whose coroutine is done (or absent).
    fn finish(&self, slot: &Slot) {
        // SAFETY: called on the native stack after the coroutine returned or
        // was unwound, so it is not running and no other reference exists.
        let coroutine = unsafe { (*slot.coroutine.get()).take() };
        if let Some(coroutine) = coroutine {
            self.stacks.put(coroutine.into_stack());
        }
        slot.generation.set(slot.generation.get().wrapping_add(1));
        slot.state.set(State::Free);
        slot.permit.set(false);
        slot.pinned.set(0);
        slot.pin_depth.set(0);
        slot.reason.set(None);
        slot.yielder.set(ptr::null());
        self.table(|t| t.free.push(slot.index));
        self.live.set(self.live.get() - 1);
    }

    fn wake(&self, id: ThreadId) {
        let Some(slot) = self.slot(id.index()) else {
            return;
        };
        if slot.generation.get() != id.generation() {
            return;
        }
        match slot.state.get() {
            State::Blocked => {
                slot.reason.set(None);
                slot.state.set(State::Ready);
                self.table(|t| t.ready.push_back(id));
            }
            State::Ready | State::Running => slot.permit.set(true),
            State::Free => {}
        }
    }

    fn unwind_all(&self) -> usize {
        let mut unwound = 0;
        loop {
            let mut victims: Vec<&Slot> = (0..self.table(|t| t.slots.len()))
                .filter_map(|index| self.slot(index as u32))
                .filter(|slot| matches!(slot.state.get(), State::Ready | State::Blocked))
                .collect();
            if victims.is_empty() {
                break;
            }
            // Unpinned threads first, then pinned ones, latest pinned first:
            // a scope's owner goes after the scoped threads borrowing from it.
            if victims.iter().any(|slot| slot.pinned.get() == 0) {
                victims.retain(|slot| slot.pinned.get() == 0);
            } else {
                let last = victims.iter().map(|slot| slot.pinned.get()).max();
                victims.retain(|slot| Some(slot.pinned.get()) == last);
            }
            for slot in victims {
                if !matches!(slot.state.get(), State::Ready | State::Blocked) {
                    continue;
                }
                slot.state.set(State::Running);
                slot.unwinding.set(true);
                CURRENT.with(|current| current.set(slot));
                let clear = ClearCurrent;
                // SAFETY: the coroutine is suspended or unstarted, not
                // running; this is the only reference to the cell while
                // the unwind runs (module invariants).
                if let Some(coroutine) = unsafe { (*slot.coroutine.get()).as_mut() } {
                    coroutine.force_unwind();
                }
                drop(clear);
                slot.unwinding.set(false);
                self.finish(slot);
                unwound += 1;
            }
        }
        self.table(|t| t.ready.clear());
        unwound
    }

    fn blocked_threads(&self) -> Vec<BlockedThread> {
        let count = self.table(|t| t.slots.len());
        (0..count)
            .filter_map(|index| self.slot(index as u32))
            .filter(|slot| slot.state.get() == State::Blocked)
            .filter_map(|slot| {
                Some(BlockedThread {
                    id: slot.id(),
                    name: slot.name.get(),
                    reason: slot.reason.get()?,
                })
            })
            .collect()
    }
}

impl Drop for Scheduler {
    /// Frees the slots and pooled stacks. Threads still alive are leaked
    /// with their stacks: unwinding them here would run their destructors
    /// while this OS thread's thread-locals are being torn down.
    fn drop(&mut self) {
        for slot in self.table.get_mut().slots.drain(..) {
            // SAFETY: every slot was made by `Box::leak` in `claim_slot` and
            // is freed only here, once; no thread runs during drop.
            let slot = unsafe { Box::from_raw(slot.as_ptr()) };
            if let Some(coroutine) = slot.coroutine.into_inner() {
                std::mem::forget(coroutine);
            }
        }
    }
}

/// The root function of every thread's coroutine.
fn thread_root<F: FnOnce()>(yielder: &ThreadYielder, f: F) {
    let Some(slot) = current_slot() else {
        unreachable!("mttl thread resumed without a current slot")
    };
    slot.yielder.set(yielder);
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        if slot.unwinding.get() {
            panic::discard(payload);
        } else {
            let report = panic::report(slot.id(), slot.name.get(), payload);
            SCHEDULER.with(|scheduler| scheduler.panics.borrow_mut().push(report));
        }
    }
}

/// Switches from the running thread back to `run_ready`.
#[inline]
fn suspend(slot: &Slot) {
    let yielder = slot.yielder.get();
    // SAFETY: `thread_root` stored this pointer on the thread's first
    // resume; the Yielder sits at the root of the coroutine's stack until the
    // coroutine finishes, and we are running inside that coroutine.
    unsafe { (*yielder).suspend(()) }
}

/// A thread's id as the trace records it.
#[inline]
fn traced_id(id: ThreadId) -> u64 {
    format::thread_id(id.index(), id.generation())
}

// ---- entry points used by `super` ----

pub(super) fn spawn<F>(name: &'static str, f: F) -> Result<ThreadId, SpawnError>
where
    F: FnOnce() + 'static,
{
    SCHEDULER.with(|scheduler| scheduler.spawn(name, f))
}

#[inline]
pub(super) fn yield_now() {
    let Some(slot) = current_slot() else {
        return;
    };
    if slot.unwinding.get() {
        return;
    }
    slot.state.set(State::Ready);
    let id = slot.id();
    SCHEDULER.with(|scheduler| scheduler.table(|t| t.ready.push_back(id)));
    suspend(slot);
}

/// [`yield_now`], and `run_ready` returns to the runtime's loop before it
/// resumes any thread, this one included.
pub(super) fn yield_to_loop() {
    if current_slot().is_none() {
        return;
    }
    SCHEDULER.with(|scheduler| {
        scheduler.loop_wanted.set(true);
        scheduler.look_wanted.set(true);
    });
    yield_now();
}

/// Whether a thread called [`yield_to_loop`] since the last call.
pub(super) fn take_look_request() -> bool {
    SCHEDULER.with(|scheduler| scheduler.look_wanted.replace(false))
}

#[inline]
pub(super) fn block(reason: BlockReason) {
    let Some(slot) = current_slot() else {
        panic!("mttl: block() called outside an mttl thread, waiting for {reason}; only threads made by spawn() can block")
    };
    if slot.permit.replace(false) || slot.unwinding.get() {
        return;
    }
    slot.reason.set(Some(reason));
    slot.state.set(State::Blocked);
    if trace::threads_on() {
        trace::thread_block(reason.what(), traced_id(slot.id()));
    }
    suspend(slot);
}

#[inline]
pub(super) fn wake(id: ThreadId) {
    let _ = SCHEDULER.try_with(|scheduler| scheduler.wake(id));
}

/// Pins the running thread for a `thread::scope` (see [`Slot::pinned`]).
/// Returns false outside a thread.
pub(super) fn pin() -> bool {
    let Some(slot) = current_slot() else {
        return false;
    };
    if slot.pin_depth.get() == 0 {
        let order = SCHEDULER.with(|scheduler| {
            scheduler.pins.set(scheduler.pins.get() + 1);
            scheduler.pins.get()
        });
        slot.pinned.set(order);
    }
    slot.pin_depth.set(slot.pin_depth.get() + 1);
    true
}

/// Ends a [`pin`] of the running thread.
pub(super) fn unpin() {
    if let Some(slot) = current_slot() {
        let depth = slot.pin_depth.get().saturating_sub(1);
        slot.pin_depth.set(depth);
        if depth == 0 {
            slot.pinned.set(0);
        }
    }
}

/// Whether the running thread is being unwound by `unwind_all`.
pub(super) fn unwinding() -> bool {
    current_slot().is_some_and(|slot| slot.unwinding.get())
}

/// Queues the panic of a thread that nothing will join, as its root does
/// for a panic it catches (see `take_panics`).
pub(super) fn report_panic(report: ThreadPanic) {
    let _ = SCHEDULER.try_with(|scheduler| scheduler.panics.borrow_mut().push(report));
}

#[inline]
pub(super) fn current() -> Option<ThreadId> {
    current_slot().map(Slot::id)
}

pub(super) fn current_name() -> Option<&'static str> {
    current_slot().map(|slot| slot.name.get())
}

pub(super) fn run_ready(max: usize) -> usize {
    if let Some(slot) = current_slot() {
        panic!(
            "mttl: run_ready() called inside mttl thread '{}'; only the runtime's loop on the native stack may run threads",
            slot.name.get()
        );
    }
    SCHEDULER.with(|scheduler| scheduler.run_ready(max))
}

pub(super) fn unwind_all() -> usize {
    if let Some(slot) = current_slot() {
        panic!(
            "mttl: unwind_all() called inside mttl thread '{}'; call it from the native stack",
            slot.name.get()
        );
    }
    SCHEDULER.with(Scheduler::unwind_all)
}

pub(super) fn live_threads() -> usize {
    SCHEDULER.with(|scheduler| scheduler.live.get())
}

pub(super) fn ready_threads() -> usize {
    SCHEDULER.with(|scheduler| scheduler.table(|t| t.ready.len()))
}

pub(super) fn blocked_threads() -> Vec<BlockedThread> {
    SCHEDULER.with(Scheduler::blocked_threads)
}

pub(super) fn take_panics() -> Vec<ThreadPanic> {
    SCHEDULER.with(|scheduler| std::mem::take(&mut *scheduler.panics.borrow_mut()))
}

pub(super) fn pending_panics() -> usize {
    SCHEDULER.with(|scheduler| scheduler.panics.borrow().len())
}

pub(super) fn stack_stats() -> StackStats {
    SCHEDULER.with(|scheduler| scheduler.stacks.stats())
}

/// For the overflow handler: the name of the thread running on this OS
/// thread if `address` lies in its stack's guard page. Async-signal-safe:
/// reads a destructor-free thread-local and `Cell`s only.
fn overflowed_thread(address: usize) -> Option<&'static str> {
    let slot = current_slot()?;
    let (low, high) = slot.guard.get();
    (low <= address && address < high).then(|| slot.name.get())
}
