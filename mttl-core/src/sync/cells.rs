//! The cell table: the cells of this rank that other ranks write into
//! (global `SyncCell`s, invoke replies, global-memory replies), and the
//! `CELL_WRITE` message that carries such a write.
//!
//! A write to cell `id` of rank `node`:
//!
//! 1. [`write_cell`] on the writer: to its own rank, delivered at once;
//!    otherwise sent as `CELL_WRITE(id, status)` with the encoded value.
//! 2. The owner's router hands it to [`Cells`], which finds the cell by id
//!    and calls the cell's [`Deliver`] function: it decodes the value into
//!    the cell and wakes a waiting reader.
//! 3. A cell dropped meanwhile is missing from the table: the write is lost
//!    and the owner says so on stderr. The exception is the reply to a
//!    call whose [`Pending`](crate::Pending) was dropped unwaited: its slot
//!    was kept for that reply, which frees it silently (a failed call's
//!    error is still reported, as nobody else will see it).

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Weak;

use mttl_comm::{Rank, Tag};
use rustc_hash::FxHashMap;

use crate::context::{self, report_line, Context, Service};
use crate::wire::{self, Fields, HeaderBuf};

thread_local! {
    static CELLS: RefCell<Option<CellTable>> = const { RefCell::new(None) };
}

/// Runs `f` on this rank's cell table.
///
/// # Panics
///
/// Panics outside a running mttl program, or when called re-entrantly.
fn with<R>(f: impl FnOnce(&mut CellTable) -> R) -> R {
    CELLS.with(|cell| {
        let mut guard = cell.borrow_mut();
        let table = guard.as_mut().expect(
            "the mttl runtime is not running: call mttl from #[mttl::main] and what it invokes",
        );
        f(table)
    })
}

/// Like [`with`], doing nothing when the table is absent or busy (for
/// destructors).
fn try_with(f: impl FnOnce(&mut CellTable)) {
    let _ = CELLS.try_with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut() {
            if let Some(table) = guard.as_mut() {
                f(table);
            }
        }
    });
}

/// Decodes a remote write into the cell it names.
pub(crate) type Deliver = fn(cell: &dyn Any, status: u8, body: &[u8]) -> Result<(), String>;

/// Cells reachable from other nodes.
///
/// A cell's id is never given to another cell while ids remain (they are
/// handed out in order and wrap after 2^32), so a handle kept past its
/// cell's end can only miss, never reach a newer cell.
#[derive(Default)]
pub(crate) struct CellTable {
    cells: FxHashMap<u32, (Weak<dyn Any>, Deliver)>,
    next: u32,
}

impl std::fmt::Debug for CellTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CellTable({} cells, next id {})",
            self.cells.len(),
            self.next
        )
    }
}

impl CellTable {
    /// Registers `cell`, written through `deliver`; returns its id.
    pub(crate) fn insert(&mut self, cell: Weak<dyn Any>, deliver: Deliver) -> u32 {
        // After a wrap, skip the ids of cells that still live.
        while self.cells.contains_key(&self.next) {
            self.next = self.next.wrapping_add(1);
        }
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.cells.insert(id, (cell, deliver));
        id
    }

    pub(crate) fn remove(&mut self, id: u32) {
        self.cells.remove(&id);
    }

    /// Hands a remote write to its cell (step 2).
    fn deliver(&mut self, id: u32, status: u8, body: &[u8]) -> Result<(), String> {
        let Some((weak, deliver)) = self.cells.get(&id) else {
            return Err(format!(
                "cell {id} does not exist (it was dropped, or never made global)"
            ));
        };
        let Some(cell) = weak.upgrade() else {
            // The one reply a dropped call's cell was kept for (see
            // `Pending`'s `Drop`): the id is done with from now on. Dropping
            // a `Pending` means "I don't want the result", so a result is
            // dropped silently; a failure is reported (step 3).
            self.remove(id);
            if status == wire::STATUS_OK {
                return Ok(());
            }
            return Err(format!(
                "the call it answers was dropped unwaited, and failed: {}",
                String::from_utf8_lossy(body)
            ));
        };
        deliver(&*cell, status, body)
    }
}

/// Registers `cell` in this rank's cell table; returns its id.
pub(crate) fn insert(cell: Weak<dyn Any>, deliver: Deliver) -> u32 {
    with(|t| t.insert(cell, deliver))
}

/// Unregisters cell `id`, if the table is there and free (for destructors).
pub(crate) fn remove(id: u32) {
    try_with(|t| t.remove(id));
}

/// Step 1: sends a cell write to `node` (or delivers it here).
pub(crate) fn write_cell(node: Rank, cell: u32, status: u8, body: &[u8]) {
    let here = context::with(|cx| {
        if node == cx.rank {
            return true;
        }
        let header = HeaderBuf::with_capacity(5).u32(cell).u8(status).bytes;
        if let Err(e) = cx.post(node, wire::CELL_WRITE, &header, body) {
            cx.comm_failed(&e);
        }
        false
    });
    if here {
        if let Err(e) = with(|t| t.deliver(cell, status, body)) {
            panic!("write to a local SyncCell failed: {e}");
        }
    }
}

/// The service of the cell table: owns `CELL_WRITE`.
#[derive(Debug)]
pub(crate) struct Cells;

impl Service for Cells {
    fn start(_cx: &Context) -> Result<(), String> {
        CELLS.with(|cell| *cell.borrow_mut() = Some(CellTable::default()));
        Ok(())
    }

    fn stop() {
        let table = CELLS.with(|cell| cell.borrow_mut().take());
        drop(table);
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        kind == wire::CELL_WRITE
    }

    fn handle(cx: &mut Context, src: Rank, _kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        let mut f = Fields(header);
        let (cell, status) = (f.u32(), f.u8());
        // Step 3: a write to a missing cell is reported, not fatal.
        if let Err(e) = with(|t| t.deliver(cell, status, &body)) {
            report_line(&format!(
                "mttl: rank {}: a write from rank {src} was lost: {e}",
                cx.rank
            ));
        }
    }
}
