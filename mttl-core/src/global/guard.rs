//! The borrow guards through which a rank's own code reaches its global
//! memory: [`GlobalRef`] and [`GlobalRefMut`], like `RefCell`'s `Ref` and
//! `RefMut`. A guard holds its region's borrow state (see `region`) from
//! its creation to its drop, and only then dereferences the block.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use bytemuck::Pod;
use mttl_comm::Rank;

use super::region::{elem_size, RegionBuf};

/// A local borrow of a region failed: it is borrowed in a conflicting way
/// (like `RefCell`'s `BorrowError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "region {region:#x} ({type_name}) on rank {rank} is already borrowed{}",
    if *held_mutably {
        " mutably (a GlobalRefMut is live, or a member function invoked through a GlobalPtr runs on it)"
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

/// A shared borrow of global memory (`[T]` of a [`GlobalArray`](super::GlobalArray), `T` of a
/// [`GlobalObject`](super::GlobalObject)). While it lives, remote writes to the region wait at
/// this rank (they are deferred, never applied under the borrow).
///
/// Guards stay on their OS thread, like the memory's borrow state:
///
/// ```compile_fail
/// fn assert_send<T: Send>() {}
/// assert_send::<mttl_core::GlobalRef<'static, [u64]>>();
/// ```
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

impl<'a, T: Pod> GlobalRef<'a, [T]> {
    /// A shared guard over the whole of `buf`, waiting for a member
    /// function if `wait` (see `region`).
    pub(super) fn whole(buf: &'a RegionBuf, wait: bool) -> Result<Self, BorrowError> {
        debug_assert_eq!(buf.elem_size(), elem_size::<T>());
        buf.share(wait)?;
        Ok(GlobalRef {
            value: NonNull::slice_from_raw_parts(buf.base().cast::<T>(), buf.count()),
            buf,
            _life: PhantomData,
        })
    }

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

impl<'a, T: Pod> GlobalRefMut<'a, [T]> {
    /// An exclusive guard over the whole of `buf`, waiting for a member
    /// function if `wait` (see `region`).
    pub(super) fn whole(buf: &'a RegionBuf, wait: bool) -> Result<Self, BorrowError> {
        debug_assert_eq!(buf.elem_size(), elem_size::<T>());
        buf.exclude(wait)?;
        Ok(GlobalRefMut {
            value: NonNull::slice_from_raw_parts(buf.base().cast::<T>(), buf.count()),
            buf,
            _life: PhantomData,
        })
    }

    /// The guard of element `i` alone.
    ///
    /// # Panics
    ///
    /// Panics if `i` is out of bounds.
    pub fn map_index(mut self, i: usize) -> GlobalRefMut<'a, T> {
        let elem = NonNull::from(&mut self[i]);
        let buf = self.buf;
        // The borrow moves to the new guard.
        std::mem::forget(self);
        GlobalRefMut {
            value: elem,
            buf,
            _life: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::global::region::tests::buf;

    #[test]
    fn guards_follow_refcell_rules() {
        let b = buf(1 << 20, vec![1, 2, 3]);
        let r1 = GlobalRef::<[u64]>::whole(&b, false).unwrap();
        let r2 = GlobalRef::<[u64]>::whole(&b, false).unwrap();
        assert_eq!(&*r1, &[1, 2, 3]);
        let e = GlobalRefMut::<[u64]>::whole(&b, false).unwrap_err();
        assert!(!e.held_mutably, "{e}");
        drop((r1, r2));
        let mut w = GlobalRefMut::<[u64]>::whole(&b, false).unwrap();
        w[1] = 20;
        let e = GlobalRef::<[u64]>::whole(&b, false).unwrap_err();
        assert!(e.held_mutably);
        assert!(e.to_string().contains("already borrowed mutably"), "{e}");
        drop(w);
        assert_eq!(&*GlobalRef::<[u64]>::whole(&b, false).unwrap(), &[1, 20, 3]);
        assert!(b.is_free());
    }

    #[test]
    fn guards_exclude_byte_access() {
        let b = buf(1 << 20, vec![7, 8]);
        {
            let _r = GlobalRef::<[u64]>::whole(&b, false).unwrap();
            assert!(b.with_bytes(0, 8, |_| ()).is_some());
            assert!(b.with_bytes_mut(0, 8, |_| ()).is_none());
        }
        {
            let _w = GlobalRefMut::<[u64]>::whole(&b, false).unwrap();
            assert!(b.with_bytes(0, 8, |_| ()).is_none());
        }
        assert!(b.is_free());
    }

    #[test]
    fn one_element_guards_keep_the_borrow() {
        let b = buf(1 << 20, vec![4, 5, 6]);
        let r = GlobalRef::<[u64]>::whole(&b, false).unwrap().map_index(2);
        assert_eq!(*r, 6);
        assert!(GlobalRefMut::<[u64]>::whole(&b, false).is_err());
        drop(r);
        let mut w = GlobalRefMut::<[u64]>::whole(&b, false)
            .unwrap()
            .map_index(0);
        *w = 40;
        assert!(GlobalRef::<[u64]>::whole(&b, false).is_err());
        drop(w);
        assert_eq!(&*GlobalRef::<[u64]>::whole(&b, false).unwrap(), &[40, 5, 6]);
        assert!(b.is_free());
    }
}
