//! `SyncCell<T>`: MTTL's `Sync`, a FIFO synchronisation cell.
//!
//! (Named `SyncCell` so that it does not shadow Rust's `Sync` marker trait.)
//!
//! `write` appends a value and wakes the first waiting reader; `read` takes
//! the oldest value, blocking the calling mttl thread (never the process)
//! while the cell is empty. Any number of threads may read and write. A
//! cell made reachable with [`SyncCell::global`] can be written from any
//! node through the [`GlobalSync`](crate::GlobalSync) handle (in `global`,
//! as its writes are fenced like `nwrite`s); the runtime's own invoke
//! replies travel this way (each `invoke` waits on a reply cell that the
//! callee's node writes remotely).
//!
//! This module owns the cell table, the cells reachable from other nodes,
//! and the `CELL_WRITE` messages that reach them (see `cells`).
//!
//! Protocol of a blocking read:
//!
//! 1. take the front value if there is one: done;
//! 2. otherwise append this thread to the cell's readers and block;
//! 3. a `write` appends its value, pops the first reader and wakes it;
//! 4. the woken reader goes back to step 1 (another reader may have taken
//!    the value first; then it waits again, keeping FIFO order among values).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;

use crate::codec::{self, Decode};
use crate::thread::{self, BlockReason, ThreadId};
use crate::trace;
use crate::wire;

mod cells;

pub(crate) use self::cells::{insert as insert_cell, remove as remove_cell, write_cell, Cells};

/// MTTL's `Sync`: a FIFO cell whose reads block the calling thread while it
/// is empty. Cloning gives another handle to the same cell.
pub struct SyncCell<T> {
    inner: Rc<SyncInner<T>>,
}

pub(crate) struct SyncInner<T> {
    values: RefCell<VecDeque<T>>,
    readers: RefCell<VecDeque<ThreadId>>,
    /// The cell's slot in this rank's cell table, once made global.
    slot: Cell<Option<u32>>,
}

impl<T> Clone for SyncCell<T> {
    fn clone(&self) -> Self {
        SyncCell {
            inner: self.inner.clone(),
        }
    }
}

impl<T> Default for SyncCell<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for SyncCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncCell")
            .field("queue_len", &self.queue_len())
            .field("waiting_readers", &self.inner.readers.borrow().len())
            .finish()
    }
}

impl<T> SyncCell<T> {
    /// An empty cell.
    pub fn new() -> Self {
        SyncCell {
            inner: Rc::new(SyncInner {
                values: RefCell::new(VecDeque::new()),
                readers: RefCell::new(VecDeque::new()),
                slot: Cell::new(None),
            }),
        }
    }

    /// Appends `value` and wakes the first waiting reader.
    pub fn write(&self, value: T) {
        self.inner.values.borrow_mut().push_back(value);
        let reader = self.inner.readers.borrow_mut().pop_front();
        if let Some(id) = reader {
            thread::wake(id);
        }
    }

    /// Takes the oldest value, blocking the calling mttl thread while the
    /// cell is empty.
    ///
    /// # Panics
    ///
    /// Panics when called outside an mttl thread on an empty cell (nothing
    /// could ever fill it while the caller waits).
    #[track_caller]
    pub fn read(&self) -> T {
        self.read_for(BlockReason::new("SyncCell read"))
    }

    /// [`read`](Self::read), blocking for `reason` (what the watchdog and a
    /// failing rank report the thread waits for).
    #[track_caller]
    pub(crate) fn read_for(&self, reason: BlockReason) -> T {
        let mut blocked_at = None;
        loop {
            if let Some(v) = self.try_read() {
                if blocked_at.is_some() {
                    trace::named(trace::Kind::SyncWait, None, reason.what(), 0, blocked_at);
                }
                return v;
            }
            if blocked_at.is_none() {
                blocked_at = trace::begin();
            }
            let Some(me) = thread::current() else {
                panic!("SyncCell::read on an empty cell outside an mttl thread would wait forever");
            };
            self.inner.readers.borrow_mut().push_back(me);
            thread::block(reason);
        }
    }

    /// Takes the oldest value if there is one.
    pub fn try_read(&self) -> Option<T> {
        self.inner.values.borrow_mut().pop_front()
    }

    /// A copy of the oldest value, without taking it.
    pub fn peek(&self) -> Option<T>
    where
        T: Clone,
    {
        self.inner.values.borrow().front().cloned()
    }

    /// How many values are queued.
    pub fn queue_len(&self) -> usize {
        self.inner.values.borrow().len()
    }
}

impl<T: 'static> SyncCell<T> {
    /// A type-erased weak handle, for the cell table.
    pub(crate) fn weak_any(&self) -> std::rc::Weak<dyn Any> {
        let strong: Rc<dyn Any> = self.inner.clone();
        Rc::downgrade(&strong)
    }
}

/// Writes `value` into the cell behind a handle from the cell table.
pub(crate) fn write_any<T: 'static>(cell: &dyn Any, value: T) -> Result<(), String> {
    let inner = cell
        .downcast_ref::<SyncInner<T>>()
        .ok_or("the cell has another type")?;
    SyncCell {
        inner: clone_rc(inner),
    }
    .write(value);
    Ok(())
}

impl<T: Decode<()> + 'static> SyncCell<T> {
    /// The cell's slot in this rank's cell table, registering it the first
    /// time (what [`SyncCell::global`] hands out).
    pub(crate) fn global_slot(&self) -> u32 {
        match self.inner.slot.get() {
            Some(s) => s,
            None => {
                let s = cells::insert(self.weak_any(), deliver_decoded::<T>);
                self.inner.slot.set(Some(s));
                s
            }
        }
    }
}

impl<T> Drop for SyncInner<T> {
    fn drop(&mut self) {
        if let Some(s) = self.slot.get() {
            cells::remove(s);
        }
    }
}

/// Decodes a remote write into the `SyncCell<T>` behind `cell`.
fn deliver_decoded<T: Decode<()> + 'static>(
    cell: &dyn Any,
    status: u8,
    body: &[u8],
) -> Result<(), String> {
    if status != wire::STATUS_OK {
        return Err(format!(
            "an error was written to a SyncCell<{}>: {}",
            std::any::type_name::<T>(),
            String::from_utf8_lossy(body)
        ));
    }
    let value: T = codec::decode(body)?;
    write_any(cell, value)
}

/// A strong handle from a reference into a live `Rc` allocation.
fn clone_rc<T>(inner: &SyncInner<T>) -> Rc<SyncInner<T>> {
    let ptr: *const SyncInner<T> = inner;
    // SAFETY: `inner` was reached by upgrading the cell table's `Weak`, so
    // it lives in an `Rc` allocation whose strong count is at least one for
    // the duration of this call; incrementing it first makes `from_raw`
    // produce a new owned strong handle, leaving the upgrader's intact.
    unsafe {
        Rc::increment_strong_count(ptr);
        Rc::from_raw(ptr)
    }
}
