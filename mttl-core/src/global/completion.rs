//! The caller's side of a global-memory request: a reply cell in this
//! rank's cell table (`sync`) that the owner's `CELL_WRITE` fills, and the
//! wait for it.
//!
//! A read gives the cell its destination buffer, so the reply's bytes are
//! copied once, from the message straight into the caller's slice, while
//! the caller is blocked. The cell is owned by the [`Request`], which
//! borrows that buffer for as long as it lives; the table holds only a
//! `Weak`, so once the request is gone (answered, or its thread unwound) a
//! late reply finds no cell and is dropped, never written anywhere.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::rc::Rc;

use mttl_comm::Rank;

use super::error::{Fault, GlobalErrorKind};
use crate::sync;
use crate::thread::{self, BlockReason, ThreadId};
use crate::wire;

/// A reply cell.
struct Completion {
    /// Where an OK reply's bytes go, and how many are expected.
    dest: Cell<Option<(NonNull<u8>, usize)>>,
    /// The status and body (empty when the bytes went to `dest`).
    result: RefCell<Option<(u8, Vec<u8>)>>,
    waiter: Cell<Option<ThreadId>>,
}

/// The cell table's delivery function for a [`Completion`].
fn deliver(cell: &dyn Any, status: u8, body: &[u8]) -> Result<(), String> {
    let c = cell
        .downcast_ref::<Completion>()
        .ok_or("the cell is not a global-memory reply cell")?;
    if c.result.borrow().is_some() {
        return Err("a global-memory request was answered twice".into());
    }
    let result = match (status, c.dest.take()) {
        (wire::STATUS_OK, Some((dest, len))) if body.len() == len => {
            // SAFETY: `dest` is the buffer the `Request` owning this cell
            // mutably borrows (for its lifetime 'a); the cell is alive (the
            // table upgraded its `Weak`), hence so is the request and the
            // borrow, and its thread is not touching the buffer: it is
            // blocked in `wait`, or has not reached it yet. `take` above
            // makes this the only write.
            unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), dest.as_ptr(), len) };
            (wire::STATUS_OK, Vec::new())
        }
        (wire::STATUS_OK, Some((_, len))) => (
            wire::STATUS_ERROR,
            Fault {
                region: 0,
                offset: 0,
                len: len as u64,
                kind: GlobalErrorKind::Protocol(format!(
                    "{} bytes came back for a read of {len}",
                    body.len()
                )),
            }
            .encode(),
        ),
        _ => (status, body.to_vec()),
    };
    *c.result.borrow_mut() = Some(result);
    if let Some(id) = c.waiter.take() {
        thread::wake(id);
    }
    Ok(())
}

/// A request in flight: its reply cell and the buffer the reply goes to.
pub(crate) struct Request<'a> {
    cell: Rc<Completion>,
    slot: u32,
    node: Rank,
    _dest: PhantomData<&'a mut [u8]>,
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Request(cell {} for rank {})", self.slot, self.node)
    }
}

impl<'a> Request<'a> {
    /// A reply cell for a request to `node`; an OK reply's bytes are
    /// copied into `dest` (which must then be exactly as long).
    pub(crate) fn new(node: Rank, dest: Option<&'a mut [u8]>) -> Request<'a> {
        let cell = Rc::new(Completion {
            dest: Cell::new(dest.map(|d| (NonNull::from(&mut *d).cast::<u8>(), d.len()))),
            result: RefCell::new(None),
            waiter: Cell::new(None),
        });
        let any: Rc<dyn Any> = cell.clone();
        let slot = sync::insert_cell(Rc::downgrade(&any), deliver);
        Request {
            cell,
            slot,
            node,
            _dest: PhantomData,
        }
    }

    /// The cell's number, for the request header.
    pub(crate) fn slot(&self) -> u32 {
        self.slot
    }

    /// Blocks the calling thread until the reply is in; returns its status
    /// and body.
    ///
    /// # Panics
    ///
    /// Panics outside an mttl thread (nothing could answer while it waits).
    #[track_caller]
    pub(crate) fn wait(self) -> (u8, Vec<u8>) {
        let reason = BlockReason::new("global memory reply").with_rank(self.node as u32);
        loop {
            if let Some(r) = self.cell.result.borrow_mut().take() {
                return r;
            }
            let Some(me) = thread::current() else {
                panic!(
                    "a global-memory access to rank {} outside an mttl thread would wait forever",
                    self.node
                );
            };
            self.cell.waiter.set(Some(me));
            thread::block(reason);
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        // From here on a reply finds no cell, so `dest` is never written
        // after the borrow ends.
        self.cell.dest.set(None);
        let slot = self.slot;
        sync::remove_cell(slot);
    }
}
