//! [`Shared`]: the two owners of a joinable thread's packet (its handle and
//! the thread itself), in memory taken from a per-OS-thread pool.
//!
//! An `Rc` would do, but its allocation was most of what a joinable spawn
//! cost above a detached one: threads are spawned in bursts, and a burst
//! frees more blocks than the allocator's per-thread cache keeps. So a
//! packet small enough lives in a block of [`BLOCK`] bytes, which goes back
//! to the pool when both owners have let go; a larger one is boxed.
//!
//! A `Shared` is neither `Send` nor `Sync` (it holds a raw pointer): its
//! block goes back to the pool of the OS thread it came from, which is
//! the thread all mttl threads of a rank run on.

use std::alloc::{self, Layout};
use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::ptr::NonNull;

/// The size of a pooled block: a packet of a thread returning up to a few
/// words fits.
const BLOCK: usize = 128;

/// The alignment of a pooled block.
const ALIGN: usize = 16;

/// Blocks kept for reuse at most (512 KiB): a burst of joinable threads
/// larger than this frees the rest.
const POOL_CAPACITY: usize = 4096;

thread_local! {
    /// Free blocks of this OS thread.
    static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
}

/// Free blocks, given back to the allocator when their OS thread ends (a
/// rank of the `local` backend is an OS thread: a job of many would
/// otherwise leave every one's pool behind).
struct Pool(Vec<NonNull<u8>>);

impl Drop for Pool {
    fn drop(&mut self) {
        for block in self.0.drain(..) {
            // SAFETY: every pooled block was allocated with `block_layout`
            // and is free.
            unsafe { alloc::dealloc(block.as_ptr(), block_layout()) };
        }
    }
}

fn block_layout() -> Layout {
    Layout::from_size_align(BLOCK, ALIGN).expect("a valid block layout")
}

/// A value and how many [`Shared`] point at it.
struct Inner<T> {
    owners: Cell<usize>,
    value: T,
}

/// One owner of a value that has at most a few (a handle and its thread).
pub(super) struct Shared<T> {
    inner: NonNull<Inner<T>>,
}

impl<T> Shared<T> {
    /// Whether `Inner<T>` fits a pooled block.
    const POOLED: bool = {
        let layout = Layout::new::<Inner<T>>();
        layout.size() <= BLOCK && layout.align() <= ALIGN
    };

    /// `value`, with one owner.
    pub(super) fn new(value: T) -> Shared<T> {
        let inner = Inner {
            owners: Cell::new(1),
            value,
        };
        if !Self::POOLED {
            return Shared {
                inner: NonNull::from(Box::leak(Box::new(inner))),
            };
        }
        let block = POOL
            .try_with(|pool| pool.borrow_mut().0.pop())
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                // SAFETY: the block layout has a non-zero size.
                let fresh = unsafe { alloc::alloc(block_layout()) };
                NonNull::new(fresh).unwrap_or_else(|| alloc::handle_alloc_error(block_layout()))
            });
        let ptr = block.cast::<Inner<T>>();
        // SAFETY: a free block is big and aligned enough for an `Inner<T>`
        // (`POOLED`) and holds no value to drop.
        unsafe { ptr.as_ptr().write(inner) };
        Shared { inner: ptr }
    }

    /// Whether another owner still holds the value.
    pub(super) fn is_shared(&self) -> bool {
        self.inner().owners.get() > 1
    }

    fn inner(&self) -> &Inner<T> {
        // SAFETY: the value lives until its last owner drops (see `Drop`).
        unsafe { self.inner.as_ref() }
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Shared<T> {
        let owners = &self.inner().owners;
        owners.set(owners.get() + 1);
        Shared { inner: self.inner }
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let owners = &self.inner().owners;
        owners.set(owners.get() - 1);
        if owners.get() > 0 {
            return;
        }
        let ptr = self.inner.as_ptr();
        if !Self::POOLED {
            // SAFETY: boxed by `new`, and this was the last owner.
            drop(unsafe { Box::from_raw(ptr) });
            return;
        }
        // SAFETY: this was the last owner: nobody reads the value again.
        unsafe { ptr.drop_in_place() };
        let block = self.inner.cast::<u8>();
        let kept = POOL
            .try_with(|pool| {
                let mut pool = pool.borrow_mut();
                let room = pool.0.len() < POOL_CAPACITY;
                if room {
                    pool.0.push(block);
                }
                room
            })
            .unwrap_or(false);
        if !kept {
            // SAFETY: the block was allocated with `block_layout`.
            unsafe { alloc::dealloc(block.as_ptr(), block_layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    /// A value is dropped once, when its last owner goes, pooled or boxed.
    #[test]
    fn the_last_owner_drops_the_value_once() {
        let drops = Rc::new(Cell::new(0));
        struct Counted(Rc<Cell<u32>>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let small = Shared::new(Counted(drops.clone()));
        let other = small.clone();
        assert!(small.is_shared());
        drop(small);
        assert_eq!(drops.get(), 0);
        assert!(!other.is_shared());
        drop(other);
        assert_eq!(drops.get(), 1);

        let large = Shared::new((Counted(drops.clone()), [0u64; 64]));
        const { assert!(!Shared::<(Counted, [u64; 64])>::POOLED) };
        let twin = large.clone();
        drop(twin);
        assert_eq!(drops.get(), 1);
        drop(large);
        assert_eq!(drops.get(), 2);
    }

    /// A freed block is reused, and its old value never shows through.
    #[test]
    fn blocks_are_reused() {
        let first = Shared::new([7u64; 4]);
        let at = first.inner.cast::<u8>();
        drop(first);
        let second = Shared::new([9u64; 4]);
        assert_eq!(second.inner.cast::<u8>(), at);
        assert_eq!(*second, [9u64; 4]);
    }
}
