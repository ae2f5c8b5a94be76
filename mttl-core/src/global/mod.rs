//! Global memory: [`GlobalPtr<T>`] into memory a rank registered
//! ([`GlobalArray`], [`GlobalObject`]), remote read, write, `nwrite`,
//! atomics and member functions, [`fence`], and [`GlobalSync`].
//!
//! As a service ([`GlobalMemory`]) it owns the remote-memory messages and
//! this rank's [`Memory`] (regions, the owner's deferred messages, the
//! `nwrite`s awaiting a fence), kept in this module's thread-local.
//!
//! Files: `region` (a region's memory and borrow state, the region table),
//! `handle` ([`GlobalArray`], [`GlobalObject`]), `guard` (the borrow
//! guards), `ptr` (the pointer and the caller's side of every access but
//! writes), `write` (the caller's side of writes, waited for or not),
//! `owner` (the owner's side: checks, application, deferral), `completion`
//! (reply cells), `atomic` (the atomic operations and methods), `error`
//! ([`GlobalError`] and its wire form), `sync_handle` ([`GlobalSync`]).
//!
//! # Model
//!
//! `T` is plain data (`bytemuck::Pod`): any bytes are a valid `T`, so
//! memory can be copied in and out as bytes. A pointer is (rank, region,
//! byte offset); it points only into registered regions, never at an
//! address. The owner checks, on every access: that the region exists and
//! is live (ids are not reused quickly, see `region`), that the pointer's
//! element size is the region's, that offset and length are whole
//! elements, and that they lie inside the region. A bad access fails with
//! a [`GlobalError`] naming rank, region, offset and length; it never
//! touches memory.
//!
//! # Messages
//!
//! All headers are within the paper's 16 bytes for a write and 24 for a
//! read (the sender, kind and size ride in the comm layer's envelope):
//!
//! | kind        | header                                           | bytes |
//! |-------------|--------------------------------------------------|-------|
//! | `WRITE`     | region u32, addr u64                             | 12    |
//! | `WRITE_ACK` | region u32, addr u64, reply cell u32             | 16    |
//! | `READ`      | region u32, addr u64, len u32, reply cell u32    | 20    |
//! | `FENCE`     | reply cell u32                                   | 4     |
//! | `ATOMIC`    | region u32, addr u64, reply cell u32, op u8      | 17    |
//! | `METHOD`    | region u32, addr u64, function id u64, cell u32  | 24    |
//!
//! `addr` is the byte offset (below 2^48, the largest region) with the
//! pointer's element size (capped at 65535) in its top 16 bits, which is
//! how the owner checks the type. Replies are `CELL_WRITE`s into the
//! caller's reply cell: `STATUS_OK` with the bytes read, the atomic's
//! previous value or the member function's encoded result; `STATUS_ERROR`
//! with an encoded [`GlobalError`] (see `error`); `STATUS_PANIC` with a
//! member function's panic message. Bodies above the eager limit travel as
//! a separate `DATA` message (see `wire`); a blocking write sends it
//! straight from the caller's slice, and a read's reply straight from the
//! region. On MPI a write's body does so from 2 KiB on, below the eager
//! limit: neither side then copies it into or out of a combined message.
//! Requests larger than 1 GiB are split into several.
//!
//! # A remote access, step by step
//!
//! 1. The caller checks what it can: null pointer, rank in the job. For its
//!    own rank it performs the access right here, under the same checks.
//!    It waits only for a member function running on the region (see
//!    `region`); a conflicting guard of its own rank, which may be the
//!    caller's own, is an error (`Borrowed`), as with `RefCell`.
//! 2. Otherwise it registers a reply cell (not for `nwrite`), sends the
//!    request and blocks the calling thread on the cell.
//! 3. The owner's handler checks the request and applies it, or defers it
//!    while a local guard conflicts (the deferral protocol in `owner`).
//! 4. It replies (not to `nwrite`); the caller's handler copies the reply
//!    into the cell (for a read, straight into the caller's slice) and
//!    wakes the caller, which returns the value or the error.
//!
//! A member function (`#[mttl::remote] fn f(obj: &mut T, ...)`) runs in a
//! new thread at the owner, which holds the whole region exclusively from
//! the moment the request is applied until the function returns (later
//! messages from the same rank see its effects); the caller gets its
//! result, its error or its panic. Called on this rank's own memory, it
//! runs in the calling thread under the same exclusive hold.
//!
//! # `nwrite` and fence
//!
//! 1. `nwrite` sends a `WRITE` and counts it for its destination; it
//!    returns as soon as its data may be reused.
//! 2. [`fence`] sends `FENCE` to every rank with writes not yet confirmed
//!    by a fence (nothing at all when there are none, which costs one
//!    look at a counter) and waits for all the answers.
//! 3. Messages from one rank to another arrive and are applied in the order
//!    they were sent (deferral keeps that order), so the owner's answer to
//!    a `FENCE` means every earlier `nwrite` from that rank was applied.
//! 4. An owner cannot answer a bad `nwrite`, so it keeps the first one from
//!    each rank and answers that rank's next `FENCE` with it: [`try_fence`]
//!    returns it, [`fence`] panics with it.
//! 5. [`invoke_nowait`] is counted as an `nwrite`; the owner answers the
//!    `FENCE` only once the calls it started have returned, with the first
//!    failure if no `nwrite` failed (the protocol is in `invoke/nowait.rs`).
//!
//! The collectives call [`fence`] first in `barrier`, so when a barrier
//! returns anywhere, every `nwrite` issued anywhere before it is visible.
//!
//! # Soundness: no remote write aliases a Rust reference
//!
//! Every reference into a region is accounted for in the region's borrow
//! state (free, `n` shared, or exclusive), like a `RefCell`:
//!
//! - local code reaches a region only through guards ([`GlobalRef`],
//!   [`GlobalRefMut`]) that take the state and give it back when dropped;
//! - the runtime touches region bytes only inside `with_bytes` and
//!   `with_bytes_mut`, which take the state themselves for the duration of
//!   a copy that never switches threads; a member function holds the
//!   state exclusively for as long as it has its `&mut T`.
//!
//! A write (or atomic, or member function) is applied only when the state
//! is free, a read only when it is not exclusive. One OS thread runs every
//! mttl thread and the handler of a rank, and the handler runs only while
//! no thread is running (or, for deferred messages, inside a guard's drop,
//! after the state was given back): so when the handler finds the state
//! free, no `&` or `&mut` into the region exists anywhere, and while it
//! copies nobody can make one. If a guard is live, the message is deferred,
//! not applied; a thread holding a guard across a blocking call sees the
//! old value until it drops the guard, and then the deferred messages are
//! applied. The price: holding a guard across a blocking call stalls
//! remote accesses to that region from then on (and every later one from
//! the same ranks); never hold one across `fence` or a barrier, which wait
//! for those very writes.
//!
//! Memory outlives its registration when it must: the handle's drop only
//! unregisters the region (later accesses fail as freed); the allocation
//! goes when the last guard or member function using it is gone.

mod atomic;
mod completion;
mod error;
mod guard;
mod handle;
mod nowait;
mod owner;
mod ptr;
mod region;
mod sync_handle;
mod write;

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::{Deref, DerefMut};
use std::rc::Rc;

use mttl_comm::{Rank, Tag};

pub use self::atomic::AtomicInt;
pub use self::error::{GlobalError, GlobalErrorKind};
pub use self::guard::{BorrowError, GlobalRef, GlobalRefMut};
pub use self::handle::{GlobalArray, GlobalObject};
pub use self::nowait::invoke_nowait;
pub use self::ptr::GlobalPtr;
pub use self::sync_handle::GlobalSync;
pub use self::write::{MAX_OWNED_BYTES, MAX_OWNED_SENDS};

use self::completion::Request;
use self::error::Fault;
use self::owner::{InPlace, Owner};
use self::region::{RegionBuf, Regions};
use crate::context::{self, Context, Service};
use crate::trace::{self, Kind};
use crate::wire::{self, HeaderBuf};

thread_local! {
    static MEMORY: RefCell<Option<Memory>> = const { RefCell::new(None) };
}

/// Runs `f` on this rank's global memory.
///
/// # Panics
///
/// Panics outside a running mttl program, or when called re-entrantly.
fn with_memory<R>(f: impl FnOnce(&mut Memory) -> R) -> R {
    MEMORY.with(|cell| {
        let mut guard = cell.borrow_mut();
        let memory = guard.as_mut().expect(
            "the mttl runtime is not running: call mttl from #[mttl::main] and what it invokes",
        );
        f(memory)
    })
}

/// Like [`with_memory`], doing nothing when the memory is absent or busy
/// (for destructors).
fn try_with_memory(f: impl FnOnce(&mut Memory)) {
    let _ = MEMORY.try_with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut() {
            if let Some(memory) = guard.as_mut() {
                f(memory);
            }
        }
    });
}

/// Runs `f` on the context with this rank's global memory beside it.
fn with_cx<R>(f: impl FnOnce(&mut MemoryCx<'_>) -> R) -> R {
    context::with(|cx| with_memory(|global| f(&mut MemoryCx { cx, global })))
}

/// Like [`with_cx`], doing nothing when either is absent or busy.
fn try_with_cx(f: impl FnOnce(&mut MemoryCx<'_>)) {
    context::try_with(|cx| try_with_memory(|global| f(&mut MemoryCx { cx, global })));
}

/// The context with this rank's global memory beside it: what the owner's
/// side works on. Derefs to the context.
pub(crate) struct MemoryCx<'a> {
    cx: &'a mut Context,
    global: &'a mut Memory,
}

impl Deref for MemoryCx<'_> {
    type Target = Context;

    fn deref(&self) -> &Context {
        self.cx
    }
}

impl DerefMut for MemoryCx<'_> {
    fn deref_mut(&mut self) -> &mut Context {
        self.cx
    }
}

/// The service of global memory: owns the remote-memory messages.
#[derive(Debug)]
pub(crate) struct GlobalMemory;

impl Service for GlobalMemory {
    fn start(_cx: &Context) -> Result<(), String> {
        MEMORY.with(|cell| *cell.borrow_mut() = Some(Memory::default()));
        Ok(())
    }

    fn stop() {
        let memory = MEMORY.with(|cell| cell.borrow_mut().take());
        drop(memory);
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        matches!(
            kind,
            wire::WRITE | wire::WRITE_ACK | wire::READ | wire::FENCE | wire::ATOMIC | wire::METHOD
        )
    }

    fn handle(cx: &mut Context, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        with_memory(|global| {
            owner::dispatch(&mut MemoryCx { cx, global }, kind, src, header, body)
        });
    }

    /// A remote write's body lands in its region when it can.
    fn receive_large(cx: &mut Context, src: Rank, kind: Tag, header: &[u8]) -> Option<Vec<u8>> {
        if !matches!(kind, wire::WRITE | wire::WRITE_ACK) {
            return Some(cx.recv_body(src));
        }
        let got = with_memory(|global| {
            owner::receive_write_in_place(&mut MemoryCx { cx, global }, src, kind, header)
        });
        match got {
            InPlace::Done => None,
            InPlace::Received(body) => Some(cx.check_body(src, body)),
            InPlace::NotTried => Some(cx.recv_body(src)),
        }
    }
}

/// The largest region, in bytes (offsets must fit in 48 bits).
pub(crate) const MAX_REGION_BYTES: u64 = (1 << 48) - 1;

/// The largest part of one request: bigger ones are split.
pub(crate) const MAX_REQUEST: usize = 1 << 30;

const SIZE_SHIFT: u32 = 48;

/// The element-size tag of the `addr` field.
fn size_tag(elem: usize) -> u64 {
    elem.min(0xffff) as u64
}

/// The `addr` field: `offset` and the element size. An offset beyond any
/// region is sent as the largest one, which the owner refuses as out of
/// bounds (the caller reports its own offset).
pub(crate) fn pack_addr(offset: u64, elem: usize) -> u64 {
    size_tag(elem) << SIZE_SHIFT | offset.min(MAX_REGION_BYTES)
}

/// The offset and element-size tag of an `addr` field.
pub(crate) fn unpack_addr(addr: u64) -> (u64, u64) {
    (addr & MAX_REGION_BYTES, addr >> SIZE_SHIFT)
}

/// The value, or a panic with the error at the caller's caller (the
/// panicking variants of the `try_` methods are `#[track_caller]`).
#[track_caller]
fn or_panic<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}

/// The global memory of this rank: its regions, the owner's state, and the
/// `nwrite`s awaiting a fence.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    pub(crate) regions: Regions,
    pub(crate) owner: Owner,
    /// `nwrite` messages sent to each rank.
    written: Vec<u64>,
    /// How many of those a fence has confirmed.
    confirmed: Vec<u64>,
    /// Ranks with `written > confirmed`.
    unconfirmed: usize,
}

impl Memory {
    /// The region, byte offset and length an access of `len` bytes (`None`:
    /// one element) at `addr` of `region` touches, after every check of the
    /// module docs (bounds before alignment, so a saturated offset is out
    /// of bounds).
    pub(crate) fn locate(
        &self,
        region: u32,
        addr: u64,
        len: Option<u64>,
    ) -> Result<(Rc<RegionBuf>, usize, usize), Fault> {
        let (offset, tag) = unpack_addr(addr);
        let fault = |len, kind| Fault {
            region,
            offset,
            len,
            kind,
        };
        let buf = self
            .regions
            .get(region)
            .map_err(|kind| fault(len.unwrap_or(0), kind))?;
        let elem = buf.elem_size() as u64;
        let len = len.unwrap_or(elem);
        if tag != size_tag(buf.elem_size()) {
            let kind = GlobalErrorKind::WrongType {
                region_elem: elem,
                ptr_elem: tag,
            };
            return Err(fault(len, kind));
        }
        let region_len = buf.byte_len() as u64;
        if offset > region_len || len > region_len - offset {
            return Err(fault(len, GlobalErrorKind::OutOfBounds { region_len }));
        }
        if offset % elem != 0 || len % elem != 0 {
            return Err(fault(len, GlobalErrorKind::Misaligned { elem }));
        }
        Ok((buf.clone(), offset as usize, len as usize))
    }

    /// Counts an `nwrite` message sent to `node` (step 1 of the fence).
    pub(crate) fn note_nwrite(&mut self, node: Rank) {
        if self.written.len() <= node {
            self.written.resize(node + 1, 0);
            self.confirmed.resize(node + 1, 0);
        }
        if self.written[node] == self.confirmed[node] {
            self.unconfirmed += 1;
        }
        self.written[node] += 1;
    }

    /// Records that the first `upto` writes to `node` were applied.
    fn confirm(&mut self, node: Rank, upto: u64) {
        let pending = self.written[node] > self.confirmed[node];
        if upto > self.confirmed[node] {
            self.confirmed[node] = upto;
            if pending && self.confirmed[node] == self.written[node] {
                self.unconfirmed -= 1;
            }
        }
    }

    /// Whether every `nwrite` sent so far was confirmed by a fence.
    pub(crate) fn all_confirmed(&self) -> bool {
        self.unconfirmed == 0
    }
}

/// Waits until every `nwrite` and every [`GlobalSync`]
/// write this rank issued before the call has been applied at its owner,
/// and every [`invoke_nowait`] call it made has returned (see the module
/// docs). Returns at once when there
/// are none. `barrier` calls it first.
///
/// # Panics
///
/// Panics with the [`GlobalError`] of [`try_fence`] if an `nwrite` failed
/// at its owner or an [`invoke_nowait`] call panicked.
#[track_caller]
pub fn fence() {
    or_panic(try_fence());
}

/// Like [`fence`], returning the first failed `nwrite` (as reported by its
/// owner: region, offset and length are the failed write's) or failed
/// [`invoke_nowait`] call (op `"invoke_nowait"`, the message naming the
/// function) instead of panicking. Every pending write and call is still
/// waited for.
#[track_caller]
pub fn try_fence() -> Result<(), GlobalError> {
    let begin = trace::begin();
    let r = fence_untraced();
    if begin.is_some() {
        trace::event(Kind::Fence, None, 0, 0, begin);
    }
    r
}

/// [`try_fence`] without its trace event.
#[track_caller]
fn fence_untraced() -> Result<(), GlobalError> {
    let requests = with_cx(|cx| {
        if cx.global.all_confirmed() {
            return Vec::new();
        }
        let mut requests = Vec::new();
        for node in 0..cx.global.written.len() {
            let upto = cx.global.written[node];
            if upto == cx.global.confirmed[node] {
                continue;
            }
            let r = Request::new(node, None);
            let header = HeaderBuf::with_capacity(4).u32(r.slot()).bytes;
            if let Err(e) = cx.post(node, wire::FENCE, &header, &[]) {
                cx.send_failed(&format!("sending a fence to rank {node}"), &e);
            }
            requests.push((node, upto, r));
        }
        requests
    });
    let mut first = Ok(());
    for (node, upto, r) in requests {
        let (status, body) = r.wait();
        with_memory(|global| global.confirm(node, upto));
        let failed = match status {
            wire::STATUS_OK => continue,
            wire::STATUS_ERROR => Fault::decode(&body),
            wire::STATUS_PANIC => {
                if first.is_ok() {
                    let message = String::from_utf8_lossy(&body).into_owned();
                    first = Err(nowait::call_failed(node, message));
                }
                continue;
            }
            other => Fault {
                region: 0,
                offset: 0,
                len: 0,
                kind: GlobalErrorKind::Protocol(format!("fence reply status {other}")),
            },
        };
        if first.is_ok() {
            first = Err(failed.at(node, "nwrite"));
        }
    }
    let me = context::rank();
    if let Some(message) = crate::invoke::wait_local(me) {
        if first.is_ok() {
            first = Err(nowait::call_failed(me, message));
        }
    }
    // The owners have applied every write; their sends are over too, or
    // about to be (the comm layer may not have seen the last one end).
    write::reap_owned_sends(0, 0);
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_carries_offset_and_element_size() {
        assert_eq!(unpack_addr(pack_addr(24, 8)), (24, 8));
        assert_eq!(
            unpack_addr(pack_addr(MAX_REGION_BYTES, 4)),
            (MAX_REGION_BYTES, 4)
        );
        assert_eq!(
            unpack_addr(pack_addr(u64::MAX, 4)),
            (MAX_REGION_BYTES, 4),
            "saturates"
        );
        assert_eq!(unpack_addr(pack_addr(0, 1 << 20)), (0, 0xffff), "capped");
    }

    fn memory_with(data: Vec<u32>) -> (Memory, u32) {
        let mut m = Memory::default();
        let id = m
            .regions
            .insert(|id| RegionBuf::new(id, 0, data.into_boxed_slice()))
            .unwrap()
            .id();
        (m, id)
    }

    #[test]
    fn locate_checks_every_access() {
        let (mut m, id) = memory_with(vec![1, 2, 3, 4]);
        let kind = |r: Result<_, Fault>| r.map(|(_, o, l)| (o, l)).map_err(|f| f.kind);
        assert_eq!(kind(m.locate(id, pack_addr(4, 4), Some(8))), Ok((4, 8)));
        assert_eq!(kind(m.locate(id, pack_addr(12, 4), None)), Ok((12, 4)));
        assert_eq!(
            kind(m.locate(id, pack_addr(12, 4), Some(8))),
            Err(GlobalErrorKind::OutOfBounds { region_len: 16 })
        );
        assert_eq!(
            kind(m.locate(id, pack_addr(u64::MAX, 4), Some(4))),
            Err(GlobalErrorKind::OutOfBounds { region_len: 16 })
        );
        assert_eq!(
            kind(m.locate(id, pack_addr(0, 8), Some(8))),
            Err(GlobalErrorKind::WrongType {
                region_elem: 4,
                ptr_elem: 8
            })
        );
        assert_eq!(
            kind(m.locate(id, pack_addr(2, 4), Some(4))),
            Err(GlobalErrorKind::Misaligned { elem: 4 })
        );
        assert_eq!(
            kind(m.locate(id + 1, pack_addr(0, 4), Some(4))),
            Err(GlobalErrorKind::UnknownRegion)
        );
        m.regions.remove(id);
        assert_eq!(
            kind(m.locate(id, pack_addr(0, 4), Some(4))),
            Err(GlobalErrorKind::Freed)
        );
    }

    #[test]
    fn fence_bookkeeping() {
        let mut m = Memory::default();
        assert!(m.all_confirmed());
        m.note_nwrite(2);
        m.note_nwrite(2);
        m.note_nwrite(1);
        assert_eq!(m.unconfirmed, 2);
        m.confirm(2, 1);
        assert_eq!(m.unconfirmed, 2, "one write to rank 2 is still unconfirmed");
        m.confirm(2, 2);
        m.confirm(1, 1);
        assert!(m.all_confirmed());
        // A late confirmation of an older fence changes nothing.
        m.note_nwrite(1);
        m.confirm(1, 1);
        assert_eq!(m.unconfirmed, 1);
    }
}
