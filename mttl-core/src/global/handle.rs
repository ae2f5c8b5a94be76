//! The handles that register memory and own it: [`GlobalArray`] and
//! [`GlobalObject`]. Creating one registers a region at this rank (see
//! `region`); dropping it unregisters the region, after which accesses
//! through its pointers fail with
//! [`GlobalErrorKind::Freed`](super::GlobalErrorKind::Freed).
//!
//! This rank reaches the memory through borrow guards (see `guard`), like a
//! `RefCell`. The panicking `borrow`s wait for a member function that
//! another rank runs on the region (see `region`); the `try_` ones never
//! wait.

use std::fmt;
use std::marker::PhantomData;
use std::rc::Rc;

use bytemuck::Pod;

use super::guard::{BorrowError, GlobalRef, GlobalRefMut};
use super::ptr::GlobalPtr;
use super::region::{elem_size, RegionBuf};
use super::{or_panic, MAX_REGION_BYTES};
use super::{try_with_memory, with_cx};

/// Registers `data` at this rank.
fn register<T: Pod>(data: Box<[T]>) -> Rc<RegionBuf> {
    let bytes = data.len() as u128 * elem_size::<T>() as u128;
    if bytes > u128::from(MAX_REGION_BYTES) {
        panic!("a global region of {bytes} bytes is too large (at most {MAX_REGION_BYTES})");
    }
    with_cx(|cx| {
        let rank = cx.rank;
        match cx
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
    try_with_memory(|global| {
        // The table's `Rc` goes; guards and running member functions keep
        // theirs, so the memory lives until they end.
        drop(global.regions.remove(buf.id()));
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
        self.buf.count()
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.buf.count() == 0
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
        GlobalPtr::from_parts(
            self.buf.rank(),
            self.buf.id(),
            (i * elem_size::<T>()) as u64,
        )
    }

    /// A global pointer to the first element.
    pub fn global_ptr(&self) -> GlobalPtr<T> {
        self.ptr(0)
    }

    /// Borrows the elements for reading. While a member function invoked
    /// from another rank runs on the array, waits for it to return.
    ///
    /// While the guard lives, remote writes, atomics and member calls to
    /// the array are deferred: applied, in order, when it is dropped, and
    /// the writers' fences wait until then. Keep guards short, and never
    /// hold one across [`fence`](crate::fence) or
    /// [`barrier`](crate::barrier), which wait for those writes.
    ///
    /// # Panics
    ///
    /// Panics if a [`GlobalRefMut`] of the array is live (see
    /// [`try_borrow`](Self::try_borrow)).
    #[track_caller]
    pub fn borrow(&self) -> GlobalRef<'_, [T]> {
        or_panic(GlobalRef::whole(&self.buf, true))
    }

    /// Borrows the elements for reading, if they are not borrowed mutably;
    /// never waits.
    pub fn try_borrow(&self) -> Result<GlobalRef<'_, [T]>, BorrowError> {
        GlobalRef::whole(&self.buf, false)
    }

    /// Borrows the elements for writing. While a member function invoked
    /// from another rank runs on the array, waits for it to return.
    ///
    /// While the guard lives, every remote access to the array (reads
    /// too) is deferred until it is dropped; see [`borrow`](Self::borrow).
    ///
    /// # Panics
    ///
    /// Panics if a guard of the array is live (see
    /// [`try_borrow_mut`](Self::try_borrow_mut)).
    #[track_caller]
    pub fn borrow_mut(&self) -> GlobalRefMut<'_, [T]> {
        or_panic(GlobalRefMut::whole(&self.buf, true))
    }

    /// Borrows the elements for writing, if they are not borrowed at all;
    /// never waits.
    pub fn try_borrow_mut(&self) -> Result<GlobalRefMut<'_, [T]>, BorrowError> {
        GlobalRefMut::whole(&self.buf, false)
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
        GlobalPtr::from_parts(self.buf.rank(), self.buf.id(), 0)
    }

    /// Borrows the object for reading. While a member function invoked
    /// from another rank runs on it, waits for it to return.
    ///
    /// While the guard lives, remote writes, atomics and member calls to
    /// the object are deferred until it is dropped (see
    /// [`GlobalArray::borrow`]).
    ///
    /// # Panics
    ///
    /// Panics if a [`GlobalRefMut`] of the object is live (see
    /// [`try_borrow`](Self::try_borrow)).
    #[track_caller]
    pub fn borrow(&self) -> GlobalRef<'_, T> {
        let whole = or_panic(GlobalRef::<[T]>::whole(&self.buf, true));
        whole.map_index(0)
    }

    /// Borrows the object for reading, if it is not borrowed mutably;
    /// never waits.
    pub fn try_borrow(&self) -> Result<GlobalRef<'_, T>, BorrowError> {
        Ok(GlobalRef::<[T]>::whole(&self.buf, false)?.map_index(0))
    }

    /// Borrows the object for writing. While a member function invoked
    /// from another rank runs on it, waits for it to return.
    ///
    /// While the guard lives, every remote access to the object (reads
    /// too) is deferred until it is dropped (see [`GlobalArray::borrow`]).
    ///
    /// # Panics
    ///
    /// Panics if a guard of the object is live (see
    /// [`try_borrow_mut`](Self::try_borrow_mut)).
    #[track_caller]
    pub fn borrow_mut(&self) -> GlobalRefMut<'_, T> {
        let whole = or_panic(GlobalRefMut::<[T]>::whole(&self.buf, true));
        whole.map_index(0)
    }

    /// Borrows the object for writing, if it is not borrowed at all; never
    /// waits.
    pub fn try_borrow_mut(&self) -> Result<GlobalRefMut<'_, T>, BorrowError> {
        Ok(GlobalRefMut::<[T]>::whole(&self.buf, false)?.map_index(0))
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
