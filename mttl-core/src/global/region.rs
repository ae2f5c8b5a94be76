//! Registered memory: the region table, [`GlobalArray`], [`GlobalObject`]
//! and the borrow guards through which local code reaches them.
//!
//! A region is one heap block of plain data ([`RegionBuf`]) with a borrow
//! state like `RefCell`'s: free, shared by `n` readers, or held by one
//! writer. Every reference into the block, whoever makes it, is counted
//! there (see "Soundness" in the [module docs](super)).
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
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::rc::Rc;

use bytemuck::Pod;
use mttl_comm::Rank;

use super::error::GlobalErrorKind;
use super::ptr::GlobalPtr;
use super::MAX_REGION_BYTES;
use crate::runtime::{self, with_rt};

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
        }
    }

    #[cfg(test)]
    pub(crate) fn id(&self) -> u32 {
        self.id
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
    fn is_free(&self) -> bool {
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

    fn release_shared(&self) {
        let s = self.state.get();
        debug_assert!(s > FREE, "shared release of {self:?}");
        self.state.set(s - 1);
        self.released();
    }

    fn release_exclusive(&self) {
        debug_assert_eq!(self.state.get(), EXCLUSIVE, "exclusive release of {self:?}");
        self.state.set(FREE);
        self.released();
    }

    /// Applies what waited for this region, once it is free (step 4 of the
    /// deferral protocol in `owner`). A guard may be dropped where the
    /// runtime is busy or gone; then the flag stays set and the next
    /// message from the waiting source drains instead.
    fn released(&self) {
        if self.state.get() == FREE && self.waiters.get() {
            runtime::try_with_rt(|rt| {
                self.waiters.set(false);
                super::owner::drain(rt);
            });
        }
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

    /// A shared guard over the whole region as `[T]`.
    fn borrow_slice<T: Pod>(&self) -> Result<GlobalRef<'_, [T]>, BorrowError> {
        debug_assert_eq!(self.elem_size, elem_size::<T>());
        if !self.try_share() {
            return Err(self.conflict());
        }
        Ok(GlobalRef {
            value: NonNull::slice_from_raw_parts(self.base.cast::<T>(), self.count),
            buf: self,
            _life: PhantomData,
        })
    }

    /// An exclusive guard over the whole region as `[T]`.
    fn borrow_slice_mut<T: Pod>(&self) -> Result<GlobalRefMut<'_, [T]>, BorrowError> {
        debug_assert_eq!(self.elem_size, elem_size::<T>());
        if !self.try_exclude() {
            return Err(self.conflict());
        }
        Ok(GlobalRefMut {
            value: NonNull::slice_from_raw_parts(self.base.cast::<T>(), self.count),
            buf: self,
            _life: PhantomData,
        })
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
        // No drain here: the state goes back to what it was before the
        // access, which left nothing newly free.
        if self.exclusive {
            self.buf.state.set(FREE);
        } else {
            self.buf.state.set(self.buf.state.get() - 1);
        }
    }
}

/// The exclusive hold of a region by a member function that runs at the
/// owner: owns the region (so dropping its handle meanwhile frees nothing)
/// and releases it when dropped.
#[derive(Debug)]
pub(crate) struct Exclusive {
    buf: Rc<RegionBuf>,
}

impl Exclusive {
    /// Takes `buf` exclusively, or gives it back if any borrow is live.
    pub(crate) fn acquire(buf: Rc<RegionBuf>) -> Result<Exclusive, Rc<RegionBuf>> {
        if buf.try_exclude() {
            Ok(Exclusive { buf })
        } else {
            Err(buf)
        }
    }

    /// Bytes `off..off + len` of the region.
    ///
    /// # Panics
    ///
    /// Panics if the range is outside the region.
    pub(crate) fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        let b = &self.buf;
        assert!(off <= b.byte_len && len <= b.byte_len - off, "{b:?}: {off}+{len}");
        // SAFETY: the range lies in the live allocation (asserted; the `Rc`
        // keeps it alive); the state is EXCLUSIVE for as long as `self`
        // lives, so no other reference into the region exists, and the
        // returned borrow of `self` rules out a second one from here.
        unsafe { std::slice::from_raw_parts_mut(b.base.as_ptr().add(off), len) }
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        self.buf.release_exclusive();
    }
}

/// A local borrow of a region failed: it is borrowed in a conflicting way
/// (like `RefCell`'s `BorrowError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "region {region:#x} ({type_name}) on rank {rank} is already borrowed{}",
    if *held_mutably {
        " mutably (a GlobalRefMut, or a member function invoked through a GlobalPtr, is running on it)"
    } else {
        " (a GlobalRef is live)"
    }
)]
pub struct BorrowError {
    /// This rank.
    pub rank: Rank,
    /// The region.
    pub region: u32,
    /// Its element type.
    pub type_name: &'static str,
    /// Whether the live borrow is exclusive.
    pub held_mutably: bool,
}

/// A shared borrow of global memory (`[T]` of a [`GlobalArray`], `T` of a
/// [`GlobalObject`]). While it lives, remote writes to the region wait at
/// this rank (they are deferred, never applied under the borrow).
pub struct GlobalRef<'a, U: ?Sized> {
    value: NonNull<U>,
    buf: &'a RegionBuf,
    _life: PhantomData<&'a U>,
}

/// An exclusive borrow of global memory. While it lives, every remote
/// access to the region waits at this rank.
pub struct GlobalRefMut<'a, U: ?Sized> {
    value: NonNull<U>,
    buf: &'a RegionBuf,
    _life: PhantomData<&'a mut U>,
}

impl<U: ?Sized> Deref for GlobalRef<'_, U> {
    type Target = U;
    fn deref(&self) -> &U {
        // SAFETY: `value` points into the region `buf` (alive for 'a), and
        // this guard's shared count keeps every `&mut` away while it lives.
        unsafe { self.value.as_ref() }
    }
}

impl<U: ?Sized> Deref for GlobalRefMut<'_, U> {
    type Target = U;
    fn deref(&self) -> &U {
        // SAFETY: as in `deref_mut`; a shared reborrow of the unique one.
        unsafe { self.value.as_ref() }
    }
}

impl<U: ?Sized> DerefMut for GlobalRefMut<'_, U> {
    fn deref_mut(&mut self) -> &mut U {
        // SAFETY: `value` points into the region `buf` (alive for 'a); the
        // state is EXCLUSIVE while this guard lives, so no other reference
        // into the region exists, and `&mut self` makes this one unique.
        unsafe { self.value.as_mut() }
    }
}

impl<U: ?Sized> Drop for GlobalRef<'_, U> {
    fn drop(&mut self) {
        self.buf.release_shared();
    }
}

impl<U: ?Sized> Drop for GlobalRefMut<'_, U> {
    fn drop(&mut self) {
        self.buf.release_exclusive();
    }
}

impl<U: ?Sized + fmt::Debug> fmt::Debug for GlobalRef<'_, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<U: ?Sized + fmt::Debug> fmt::Debug for GlobalRefMut<'_, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<'a, T> GlobalRef<'a, [T]> {
    /// The guard of element `i` alone.
    ///
    /// # Panics
    ///
    /// Panics if `i` is out of bounds.
    pub fn map_index(self, i: usize) -> GlobalRef<'a, T> {
        let elem = NonNull::from(&self[i]);
        let buf = self.buf;
        // The borrow moves to the new guard.
        std::mem::forget(self);
        GlobalRef {
            value: elem,
            buf,
            _life: PhantomData,
        }
    }
}

/// Registers `data` at this rank.
fn register<T: Pod>(data: Box<[T]>) -> Rc<RegionBuf> {
    let bytes = data.len() as u128 * elem_size::<T>() as u128;
    if bytes > u128::from(MAX_REGION_BYTES) {
        panic!("a global region of {bytes} bytes is too large (at most {MAX_REGION_BYTES})");
    }
    with_rt(|rt| {
        let rank = rt.rank;
        match rt
            .global
            .regions
            .insert(|id| RegionBuf::new(id, rank, data))
        {
            Ok(buf) => buf,
            Err(e) => panic!("cannot register global memory on rank {rank}: {e}"),
        }
    })
}

fn unregister(buf: &RegionBuf) {
    runtime::try_with_rt(|rt| {
        // The table's `Rc` goes; guards and running member functions keep
        // theirs, so the memory lives until they end.
        drop(rt.global.regions.remove(buf.id));
    });
}

/// An array of plain data registered as global memory: other ranks reach
/// its elements through [`GlobalPtr`]s (from [`ptr`](Self::ptr)); this
/// rank through borrow guards, like a `RefCell<[T]>`.
///
/// Dropping the array unregisters it: later accesses through its pointers
/// fail with [`GlobalErrorKind::Freed`](super::GlobalErrorKind::Freed).
///
/// ```compile_fail
/// fn assert_send<T: Send>() {}
/// assert_send::<mttl_core::GlobalArray<u64>>();
/// ```
pub struct GlobalArray<T: Pod> {
    buf: Rc<RegionBuf>,
    _elem: PhantomData<T>,
}

impl<T: Pod> fmt::Debug for GlobalArray<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GlobalArray({:?})", self.buf)
    }
}

impl<T: Pod> GlobalArray<T> {
    /// `len` zeroed elements, registered at this rank.
    ///
    /// # Panics
    ///
    /// Panics outside a running mttl program, or if the array would be
    /// larger than 2^48 bytes.
    pub fn new(len: usize) -> Self {
        Self::from_vec(vec![T::zeroed(); len])
    }

    /// The elements of `data`, registered at this rank (no copy).
    ///
    /// # Panics
    ///
    /// As [`new`](Self::new).
    pub fn from_vec(data: Vec<T>) -> Self {
        GlobalArray {
            buf: register(data.into_boxed_slice()),
            _elem: PhantomData,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.buf.count
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.buf.count == 0
    }

    /// A global pointer to element `i` (`i == len` gives the one-past-the-end
    /// pointer, fine for arithmetic but not for access).
    ///
    /// # Panics
    ///
    /// Panics if `i > len`.
    pub fn ptr(&self, i: usize) -> GlobalPtr<T> {
        assert!(
            i <= self.len(),
            "GlobalArray::ptr({i}) on an array of {} elements",
            self.len()
        );
        GlobalPtr::from_parts(self.buf.rank, self.buf.id, (i * elem_size::<T>()) as u64)
    }

    /// A global pointer to the first element.
    pub fn global_ptr(&self) -> GlobalPtr<T> {
        self.ptr(0)
    }

    /// Borrows the elements for reading.
    ///
    /// # Panics
    ///
    /// Panics if they are borrowed mutably; see [`try_borrow`](Self::try_borrow).
    #[track_caller]
    pub fn borrow(&self) -> GlobalRef<'_, [T]> {
        self.try_borrow().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Borrows the elements for reading, if they are not borrowed mutably.
    pub fn try_borrow(&self) -> Result<GlobalRef<'_, [T]>, BorrowError> {
        self.buf.borrow_slice()
    }

    /// Borrows the elements for writing.
    ///
    /// # Panics
    ///
    /// Panics if they are borrowed; see [`try_borrow_mut`](Self::try_borrow_mut).
    #[track_caller]
    pub fn borrow_mut(&self) -> GlobalRefMut<'_, [T]> {
        self.try_borrow_mut().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Borrows the elements for writing, if they are not borrowed at all.
    pub fn try_borrow_mut(&self) -> Result<GlobalRefMut<'_, [T]>, BorrowError> {
        self.buf.borrow_slice_mut()
    }

    /// A copy of element `i`.
    ///
    /// # Panics
    ///
    /// Panics if `i` is out of bounds or the array is borrowed mutably.
    #[track_caller]
    pub fn get(&self, i: usize) -> T {
        self.borrow()[i]
    }

    /// Sets element `i`.
    ///
    /// # Panics
    ///
    /// Panics if `i` is out of bounds or the array is borrowed.
    #[track_caller]
    pub fn set(&self, i: usize, value: T) {
        self.borrow_mut()[i] = value;
    }

    /// A copy of every element.
    ///
    /// # Panics
    ///
    /// Panics if the array is borrowed mutably.
    #[track_caller]
    pub fn to_vec(&self) -> Vec<T> {
        self.borrow().to_vec()
    }
}

impl<T: Pod> Drop for GlobalArray<T> {
    fn drop(&mut self) {
        unregister(&self.buf);
    }
}

/// One value of plain data registered as global memory: other ranks reach
/// it through its [`GlobalPtr`] ([`global_ptr`](Self::global_ptr)), read and
/// write it, and invoke member functions on it; this rank borrows it like a
/// `RefCell<T>`.
///
/// Dropping the object unregisters it (see [`GlobalArray`]).
pub struct GlobalObject<T: Pod> {
    buf: Rc<RegionBuf>,
    _elem: PhantomData<T>,
}

impl<T: Pod> fmt::Debug for GlobalObject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GlobalObject({:?})", self.buf)
    }
}

impl<T: Pod> GlobalObject<T> {
    /// `value`, registered at this rank.
    ///
    /// # Panics
    ///
    /// Panics outside a running mttl program.
    pub fn new(value: T) -> Self {
        GlobalObject {
            buf: register(Box::new([value])),
            _elem: PhantomData,
        }
    }

    /// The object's global pointer.
    pub fn global_ptr(&self) -> GlobalPtr<T> {
        GlobalPtr::from_parts(self.buf.rank, self.buf.id, 0)
    }

    /// Borrows the object for reading.
    ///
    /// # Panics
    ///
    /// Panics if it is borrowed mutably; see [`try_borrow`](Self::try_borrow).
    #[track_caller]
    pub fn borrow(&self) -> GlobalRef<'_, T> {
        self.try_borrow().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Borrows the object for reading, if it is not borrowed mutably.
    pub fn try_borrow(&self) -> Result<GlobalRef<'_, T>, BorrowError> {
        Ok(self.buf.borrow_slice::<T>()?.map_index(0))
    }

    /// Borrows the object for writing.
    ///
    /// # Panics
    ///
    /// Panics if it is borrowed; see [`try_borrow_mut`](Self::try_borrow_mut).
    #[track_caller]
    pub fn borrow_mut(&self) -> GlobalRefMut<'_, T> {
        self.try_borrow_mut().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Borrows the object for writing, if it is not borrowed at all.
    pub fn try_borrow_mut(&self) -> Result<GlobalRefMut<'_, T>, BorrowError> {
        let whole = self.buf.borrow_slice_mut::<T>()?;
        let value = whole.value.cast::<T>();
        let buf = whole.buf;
        // The borrow moves to the new guard.
        std::mem::forget(whole);
        Ok(GlobalRefMut {
            value,
            buf,
            _life: PhantomData,
        })
    }

    /// A copy of the value.
    ///
    /// # Panics
    ///
    /// Panics if the object is borrowed mutably.
    #[track_caller]
    pub fn get(&self) -> T {
        *self.borrow()
    }

    /// Replaces the value.
    ///
    /// # Panics
    ///
    /// Panics if the object is borrowed.
    #[track_caller]
    pub fn set(&self, value: T) {
        *self.borrow_mut() = value;
    }
}

impl<T: Pod> Drop for GlobalObject<T> {
    fn drop(&mut self) {
        unregister(&self.buf);
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
mod tests {
    use super::*;

    fn buf(id: u32, data: Vec<u64>) -> RegionBuf {
        RegionBuf::new(id, 0, data.into_boxed_slice())
    }

    #[test]
    fn guards_follow_refcell_rules() {
        let b = buf(1 << SLOT_BITS, vec![1, 2, 3]);
        let r1 = b.borrow_slice::<u64>().unwrap();
        let r2 = b.borrow_slice::<u64>().unwrap();
        assert_eq!(&*r1, &[1, 2, 3]);
        let e = b.borrow_slice_mut::<u64>().unwrap_err();
        assert!(!e.held_mutably, "{e}");
        drop((r1, r2));
        let mut w = b.borrow_slice_mut::<u64>().unwrap();
        w[1] = 20;
        let e = b.borrow_slice::<u64>().unwrap_err();
        assert!(e.held_mutably);
        assert!(e.to_string().contains("already borrowed mutably"), "{e}");
        drop(w);
        assert_eq!(&*b.borrow_slice::<u64>().unwrap(), &[1, 20, 3]);
        assert!(b.is_free());
    }

    #[test]
    fn byte_access_respects_live_guards() {
        let b = buf(1 << SLOT_BITS, vec![7, 8]);
        {
            let _r = b.borrow_slice::<u64>().unwrap();
            // Reads go on beside a shared guard; writes do not.
            assert_eq!(
                b.with_bytes(8, 8, |s| s.to_vec()),
                Some(8u64.to_le_bytes().to_vec())
            );
            assert!(b.with_bytes_mut(0, 8, |s| s.fill(0)).is_none());
        }
        {
            let _w = b.borrow_slice_mut::<u64>().unwrap();
            assert!(b.with_bytes(0, 8, |_| ()).is_none());
        }
        b.with_bytes_mut(0, 8, |s| s.copy_from_slice(&9u64.to_le_bytes()))
            .unwrap();
        assert_eq!(b.borrow_slice::<u64>().unwrap()[0], 9);
        // Inside a byte access, the guards see the region as taken.
        b.with_bytes_mut(0, 8, |_| assert!(b.borrow_slice::<u64>().is_err()));
        b.with_bytes(0, 8, |_| assert!(b.borrow_slice_mut::<u64>().is_err()));
        assert!(b.is_free());
    }

    #[test]
    fn exclusive_hold_keeps_the_memory_and_blocks_guards() {
        let b = Rc::new(buf(1 << SLOT_BITS, vec![5]));
        let mut x = Exclusive::acquire(b.clone()).unwrap();
        assert!(Exclusive::acquire(b.clone()).is_err());
        assert!(b.borrow_slice::<u64>().is_err());
        x.bytes_mut(0, 8).copy_from_slice(&6u64.to_le_bytes());
        drop(x);
        assert_eq!(b.borrow_slice::<u64>().unwrap()[0], 6);
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

    #[test]
    fn the_ref_of_one_element() {
        let b = buf(1 << SLOT_BITS, vec![4, 5, 6]);
        let r = b.borrow_slice::<u64>().unwrap().map_index(2);
        assert_eq!(*r, 6);
        assert!(b.borrow_slice_mut::<u64>().is_err());
        drop(r);
        assert!(b.is_free());
    }
}
