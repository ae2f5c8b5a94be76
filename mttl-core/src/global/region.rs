//! Registered memory: [`RegionBuf`], one block of plain data with its
//! borrow state, and [`Regions`], the table of a rank's regions by id.
//!
//! A region's borrow state is like a `RefCell`'s: free, shared by `n`
//! readers, or held by one writer. Every reference into the block, whoever
//! makes it, is counted there (see "Soundness" in the [module docs](super)):
//! the guards of `guard`, the byte accesses of the runtime
//! ([`RegionBuf::with_bytes`], [`RegionBuf::with_bytes_mut`]) and the hold
//! of a member function ([`Exclusive`]).
//!
//! # Waiting for a member function
//!
//! A member function invoked from another rank holds its region from the
//! moment its request is applied until it returns, on a thread of its own.
//! Local code of the owner that meets that hold waits for it (unless it is
//! that very function, which would wait for itself): it registers in the
//! region's local waiters and blocks; the release wakes every waiter, which
//! then tries again. A conflict with a local guard is never waited for
//! (it may be the caller's own): it is an error, as with `RefCell`.
//!
//! # Region ids
//!
//! An id is `generation << 20 | slot`. Generations start at 1 (so 0, the
//! null pointer's region, is never issued) and advance each time a slot is
//! reused; a slot is reused only once more than [`REUSE_RESERVE`] slots
//! are free, oldest first. A pointer to a freed region therefore names an
//! id that stays unissued until its slot has been reused 4095 times, and
//! that takes at least 4 million frees.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::ptr::NonNull;
use std::rc::Rc;

use bytemuck::Pod;
use mttl_comm::Rank;

use super::error::GlobalErrorKind;
use super::guard::BorrowError;
use crate::thread::{self, BlockReason, ThreadId};

/// Bits of a region id that name the slot.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// The largest generation; the next one after it is 1.
const MAX_GENERATION: u32 = u32::MAX >> SLOT_BITS;
/// Freed slots kept unused before the oldest is reused.
const REUSE_RESERVE: usize = 1024;

/// `size_of::<T>()`, refusing zero-sized types (an element must have an
/// address of its own) and elements a read cannot carry.
pub(crate) const fn elem_size<T>() -> usize {
    let size = std::mem::size_of::<T>();
    assert!(size > 0, "global memory cannot hold zero-sized types");
    assert!(
        size <= u32::MAX as usize,
        "a global element must be smaller than 4 GiB"
    );
    size
}

/// Borrow state values.
const FREE: isize = 0;
const EXCLUSIVE: isize = -1;

/// Who holds a region for a member function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MethodHold {
    None,
    /// Held; the function's thread has not started yet.
    Starting,
    /// Held by this thread.
    Running(ThreadId),
}

/// One registered block of memory: the heap allocation of a boxed slice of
/// plain data, and its borrow state.
pub(crate) struct RegionBuf {
    id: u32,
    rank: Rank,
    base: NonNull<u8>,
    /// Size in bytes.
    byte_len: usize,
    /// Number of elements.
    count: usize,
    elem_size: usize,
    type_name: &'static str,
    /// Frees the allocation (monomorphic for the element type).
    free: unsafe fn(NonNull<u8>, usize),
    /// `FREE`, the number of shared borrows, or `EXCLUSIVE`.
    state: Cell<isize>,
    /// A deferred remote-memory message waits for this region (see the
    /// module docs of `owner`): drain the queues when it becomes free.
    waiters: Cell<bool>,
    method: Cell<MethodHold>,
    /// Local threads waiting for the member function to return.
    local_waiters: Cell<Vec<ThreadId>>,
}

impl fmt::Debug for RegionBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "region {:#x} on rank {}: {} × {} ({} bytes, state {})",
            self.id,
            self.rank,
            self.count,
            self.type_name,
            self.byte_len,
            self.state.get()
        )
    }
}

/// Frees what `Box::<[T]>::into_raw` gave.
///
/// # Safety
///
/// `base` and `count` must come from `Box::<[T]>::into_raw` for this `T`,
/// and the allocation must not be used afterwards.
unsafe fn free_boxed<T>(base: NonNull<u8>, count: usize) {
    let slice = std::ptr::slice_from_raw_parts_mut(base.as_ptr().cast::<T>(), count);
    // SAFETY: per the contract, `slice` is exactly the pointer the box was
    // turned into; rebuilding the box gives the allocation back to it.
    drop(unsafe { Box::from_raw(slice) });
}

impl RegionBuf {
    /// Takes ownership of `data` as region `id` of `rank`.
    pub(crate) fn new<T: Pod>(id: u32, rank: Rank, data: Box<[T]>) -> RegionBuf {
        let count = data.len();
        let elem_size = elem_size::<T>();
        let raw: *mut [T] = Box::into_raw(data);
        // SAFETY: `Box::into_raw` never returns null (an empty box gives a
        // dangling, non-null, aligned pointer).
        let base = unsafe { NonNull::new_unchecked(raw.cast::<u8>()) };
        RegionBuf {
            id,
            rank,
            base,
            byte_len: count * elem_size,
            count,
            elem_size,
            type_name: std::any::type_name::<T>(),
            free: free_boxed::<T>,
            state: Cell::new(FREE),
            waiters: Cell::new(false),
            method: Cell::new(MethodHold::None),
            local_waiters: Cell::new(Vec::new()),
        }
    }

    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    pub(crate) fn rank(&self) -> Rank {
        self.rank
    }

    /// The start of the block, aligned for its element type.
    pub(super) fn base(&self) -> NonNull<u8> {
        self.base
    }

    /// Number of elements.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Size in bytes.
    pub(crate) fn byte_len(&self) -> usize {
        self.byte_len
    }

    pub(crate) fn elem_size(&self) -> usize {
        self.elem_size
    }

    /// Whether no borrow of any kind is live.
    #[cfg(test)]
    pub(super) fn is_free(&self) -> bool {
        self.state.get() == FREE
    }

    /// Marks that a deferred message waits for this region.
    pub(crate) fn set_waiters(&self) {
        self.waiters.set(true);
    }

    fn try_share(&self) -> bool {
        let s = self.state.get();
        if s < FREE || s == isize::MAX {
            return false;
        }
        self.state.set(s + 1);
        true
    }

    fn try_exclude(&self) -> bool {
        if self.state.get() != FREE {
            return false;
        }
        self.state.set(EXCLUSIVE);
        true
    }

    /// Takes a shared borrow; on a conflict, waits for a member function
    /// if `wait` (see the module docs), else fails.
    pub(super) fn share(&self, wait: bool) -> Result<(), BorrowError> {
        loop {
            if self.try_share() {
                return Ok(());
            }
            if !(wait && self.wait_for_method()) {
                return Err(self.conflict());
            }
        }
    }

    /// Takes the exclusive borrow, as [`share`](Self::share).
    pub(super) fn exclude(&self, wait: bool) -> Result<(), BorrowError> {
        loop {
            if self.try_exclude() {
                return Ok(());
            }
            if !(wait && self.wait_for_method()) {
                return Err(self.conflict());
            }
        }
    }

    pub(super) fn release_shared(&self) {
        let s = self.state.get();
        debug_assert!(s > FREE, "shared release of {self:?}");
        self.state.set(s - 1);
        self.released();
    }

    pub(super) fn release_exclusive(&self) {
        debug_assert_eq!(self.state.get(), EXCLUSIVE, "exclusive release of {self:?}");
        self.state.set(FREE);
        self.released();
    }

    /// Once the region is free: wakes the local threads waiting for it,
    /// then applies the messages that wait for it (step 4 of the deferral
    /// protocol in `owner`). A guard may be dropped where the context or
    /// the global memory is busy or gone; then the flag stays set and the next message from the
    /// waiting source drains instead.
    fn released(&self) {
        if self.state.get() != FREE {
            return;
        }
        for id in self.local_waiters.take() {
            thread::wake(id);
        }
        if self.waiters.get() {
            super::try_with_cx(|cx| {
                self.waiters.set(false);
                super::owner::drain(cx);
            });
        }
    }

    /// If a member function holds the region and the caller is another
    /// mttl thread, blocks until the region is released and returns true
    /// (the caller then tries again); else returns false at once.
    pub(crate) fn wait_for_method(&self) -> bool {
        let Some(me) = thread::current() else {
            return false;
        };
        match self.method.get() {
            MethodHold::None => return false,
            MethodHold::Running(holder) if holder == me => return false,
            MethodHold::Starting | MethodHold::Running(_) => {}
        }
        let mut waiting = self.local_waiters.take();
        waiting.push(me);
        self.local_waiters.set(waiting);
        thread::block(BlockReason::new(
            "a member function running on global memory",
        ));
        true
    }

    fn conflict(&self) -> BorrowError {
        BorrowError {
            rank: self.rank,
            region: self.id,
            type_name: self.type_name,
            held_mutably: self.state.get() == EXCLUSIVE,
        }
    }

    /// Runs `f` on bytes `off..off + len` for reading, unless an exclusive
    /// borrow is live. The region counts as shared while `f` runs.
    ///
    /// # Panics
    ///
    /// Panics if the range is outside the region (callers check first).
    pub(crate) fn with_bytes<R>(
        &self,
        off: usize,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        assert!(
            off <= self.byte_len && len <= self.byte_len - off,
            "{self:?}: {off}+{len}"
        );
        if !self.try_share() {
            return None;
        }
        let _restore = Restore {
            buf: self,
            exclusive: false,
        };
        // SAFETY: the range lies in the live allocation (asserted above);
        // the shared count taken above keeps every `&mut` into the region
        // from being made until `_restore` gives it back after `f`.
        let bytes = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) };
        Some(f(bytes))
    }

    /// Runs `f` on bytes `off..off + len` for writing, if no borrow at all
    /// is live. The region counts as exclusively held while `f` runs.
    ///
    /// # Panics
    ///
    /// Panics if the range is outside the region (callers check first).
    pub(crate) fn with_bytes_mut<R>(
        &self,
        off: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        assert!(
            off <= self.byte_len && len <= self.byte_len - off,
            "{self:?}: {off}+{len}"
        );
        if !self.try_exclude() {
            return None;
        }
        let _restore = Restore {
            buf: self,
            exclusive: true,
        };
        // SAFETY: the range lies in the live allocation (asserted above);
        // no other reference into the region exists (state was FREE) and
        // none can be made while the state is EXCLUSIVE, until `_restore`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) };
        Some(f(bytes))
    }
}

impl Drop for RegionBuf {
    fn drop(&mut self) {
        debug_assert_eq!(self.state.get(), FREE, "{self:?} dropped while borrowed");
        // SAFETY: `base` and `count` came from `Box::<[T]>::into_raw` in
        // `new`, with `free` instantiated for that `T`; this is the last
        // use (every guard holds a borrow or an `Rc` of `self`).
        unsafe { (self.free)(self.base, self.count) };
    }
}

/// Puts a borrow state back when a `with_bytes*` call ends, even by panic.
struct Restore<'a> {
    buf: &'a RegionBuf,
    exclusive: bool,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        // No drain or wake here: the state goes back to what it was before
        // the access, which left nothing newly free.
        if self.exclusive {
            self.buf.state.set(FREE);
        } else {
            self.buf.state.set(self.buf.state.get() - 1);
        }
    }
}

/// The exclusive hold of a region by a member function: owns the region
/// (so dropping its handle meanwhile frees nothing) and releases it when
/// dropped.
#[derive(Debug)]
pub(crate) struct Exclusive {
    buf: Rc<RegionBuf>,
}

impl Exclusive {
    /// Takes `buf` exclusively for a member function that has not started,
    /// or gives it back if any borrow is live.
    pub(crate) fn acquire(buf: Rc<RegionBuf>) -> Result<Exclusive, Rc<RegionBuf>> {
        if buf.try_exclude() {
            buf.method.set(MethodHold::Starting);
            Ok(Exclusive { buf })
        } else {
            Err(buf)
        }
    }

    /// Records the calling thread as the member function's.
    pub(crate) fn enter(&self) {
        if let Some(me) = thread::current() {
            self.buf.method.set(MethodHold::Running(me));
        }
    }

    /// Bytes `off..off + len` of the region.
    ///
    /// # Panics
    ///
    /// Panics if the range is outside the region.
    pub(crate) fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        let b = &self.buf;
        assert!(
            off <= b.byte_len && len <= b.byte_len - off,
            "{b:?}: {off}+{len}"
        );
        // SAFETY: the range lies in the live allocation (asserted; the `Rc`
        // keeps it alive); the state is EXCLUSIVE for as long as `self`
        // lives, so no other reference into the region exists, and the
        // returned borrow of `self` rules out a second one from here.
        unsafe { std::slice::from_raw_parts_mut(b.base.as_ptr().add(off), len) }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        self.buf.method.set(MethodHold::None);
        self.buf.release_exclusive();
    }
}

/// The regions of this rank, by id.
#[derive(Debug, Default)]
pub(crate) struct Regions {
    slots: Vec<Slot>,
    /// Freed slots, oldest first.
    free: VecDeque<u32>,
}

#[derive(Debug)]
struct Slot {
    /// The generation of the last region placed here.
    generation: u32,
    region: Option<Rc<RegionBuf>>,
}

impl Regions {
    /// Registers the region `make` builds for the id it is given.
    pub(crate) fn insert(
        &mut self,
        make: impl FnOnce(u32) -> RegionBuf,
    ) -> Result<Rc<RegionBuf>, String> {
        let slot = if self.free.len() > REUSE_RESERVE || self.slots.len() > SLOT_MASK as usize {
            let Some(s) = self.free.pop_front() else {
                return Err(format!(
                    "{} regions are live, the most a rank can have",
                    self.slots.len()
                ));
            };
            let slot = &mut self.slots[s as usize];
            slot.generation = slot.generation % MAX_GENERATION + 1;
            s
        } else {
            self.slots.push(Slot {
                generation: 1,
                region: None,
            });
            (self.slots.len() - 1) as u32
        };
        let entry = &mut self.slots[slot as usize];
        let buf = Rc::new(make(entry.generation << SLOT_BITS | slot));
        entry.region = Some(buf.clone());
        Ok(buf)
    }

    /// Unregisters region `id`, returning it.
    pub(crate) fn remove(&mut self, id: u32) -> Option<Rc<RegionBuf>> {
        let s = id & SLOT_MASK;
        let slot = self.slots.get_mut(s as usize)?;
        if slot.generation != id >> SLOT_BITS {
            return None;
        }
        let buf = slot.region.take()?;
        self.free.push_back(s);
        Some(buf)
    }

    /// Region `id`, or why there is none.
    pub(crate) fn get(&self, id: u32) -> Result<&Rc<RegionBuf>, GlobalErrorKind> {
        let generation = id >> SLOT_BITS;
        let slot = match self.slots.get((id & SLOT_MASK) as usize) {
            Some(slot) if generation != 0 => slot,
            _ => return Err(GlobalErrorKind::UnknownRegion),
        };
        if slot.generation == generation {
            slot.region.as_ref().ok_or(GlobalErrorKind::Freed)
        } else if generation < slot.generation {
            Err(GlobalErrorKind::Freed)
        } else {
            Err(GlobalErrorKind::UnknownRegion)
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A region of `data`, outside any runtime.
    pub(in crate::global) fn buf(id: u32, data: Vec<u64>) -> RegionBuf {
        RegionBuf::new(id, 0, data.into_boxed_slice())
    }

    #[test]
    fn byte_access_respects_the_state() {
        let b = buf(1 << SLOT_BITS, vec![7, 8]);
        b.share(false).unwrap();
        // Reads go on beside a shared borrow; writes do not.
        assert_eq!(
            b.with_bytes(8, 8, |s| s.to_vec()),
            Some(8u64.to_le_bytes().to_vec())
        );
        assert!(b.with_bytes_mut(0, 8, |s| s.fill(0)).is_none());
        b.release_shared();
        b.exclude(false).unwrap();
        assert!(b.with_bytes(0, 8, |_| ()).is_none());
        b.release_exclusive();
        b.with_bytes_mut(0, 8, |s| s.copy_from_slice(&9u64.to_le_bytes()))
            .unwrap();
        assert_eq!(b.with_bytes(0, 8, |s| s[0]), Some(9));
        // Inside a byte access, the region is taken.
        b.with_bytes_mut(0, 8, |_| assert!(b.share(false).is_err()));
        b.with_bytes(0, 8, |_| assert!(b.exclude(false).is_err()));
        assert!(b.is_free());
    }

    #[test]
    fn exclusive_hold_keeps_the_memory_and_blocks_borrows() {
        let b = Rc::new(buf(1 << SLOT_BITS, vec![5]));
        let mut x = Exclusive::acquire(b.clone()).unwrap();
        assert!(Exclusive::acquire(b.clone()).is_err());
        let e = b.share(false).unwrap_err();
        assert!(e.held_mutably);
        // Outside an mttl thread there is nobody to block: no waiting.
        assert!(b.share(true).is_err());
        x.bytes_mut(0, 8).copy_from_slice(&6u64.to_le_bytes());
        drop(x);
        assert_eq!(b.with_bytes(0, 8, |s| s[0]), Some(6));
        assert!(b.is_free());
    }

    #[test]
    fn ids_are_not_reused_quickly() {
        let mut t = Regions::default();
        let first = t.insert(|id| buf(id, vec![0])).unwrap().id();
        assert_ne!(first, 0);
        assert!(t.remove(first).is_some());
        assert_eq!(t.get(first).unwrap_err(), GlobalErrorKind::Freed);
        assert!(t.remove(first).is_none());
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 * REUSE_RESERVE {
            let id = t.insert(|id| buf(id, vec![0])).unwrap().id();
            assert_ne!(id, first, "a freed id came back");
            assert!(seen.insert(id));
            t.remove(id);
        }
        // The first slot was reused meanwhile, under a new generation.
        assert_eq!(t.get(first).unwrap_err(), GlobalErrorKind::Freed);
        assert_eq!(t.get(0).unwrap_err(), GlobalErrorKind::UnknownRegion);
        assert_eq!(
            t.get(5 << SLOT_BITS | 999_999).unwrap_err(),
            GlobalErrorKind::UnknownRegion
        );
    }
}
