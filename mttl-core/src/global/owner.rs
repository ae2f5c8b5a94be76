//! The owner's side: applying the remote-memory messages that arrive, and
//! deferring those that would touch a borrowed region.
//!
//! Messages are handled on the native stack by the router's dispatch,
//! which never blocks: a message is applied at once or queued, never
//! waited for.
//!
//! # Deferral protocol
//!
//! Each source rank has a FIFO of deferred messages.
//!
//! 1. A message from `src` arrives. If `src`'s FIFO is not empty, the
//!    handler first tries to drain it (step 4), then, if it is still not
//!    empty, appends the message: per-pair order holds, so nothing from
//!    `src` overtakes an earlier message from `src`.
//! 2. Otherwise the message is checked (region, liveness, element size,
//!    alignment, bounds). A bad one is answered with an error (or, for an
//!    `nwrite`, remembered for `src`'s next fence) and is done.
//! 3. It is applied if the region's borrow state allows: a read needs no
//!    exclusive borrow; a write, an atomic or a member function needs no
//!    borrow at all. If not, the region is marked as waited for and the
//!    message goes to `src`'s FIFO. A `FENCE` touches no region: it is
//!    answered as soon as it reaches the front, so its answer means that
//!    every earlier message from `src` has been applied.
//! 4. When a guard on a marked region is released and leaves it free, every
//!    FIFO is drained: messages are applied from the front (step 3) until
//!    one is blocked again, which stays at the front.
//!
//! Step 4 runs inside the guard's `Drop`, on the stack of the thread that
//! dropped it; it only copies bytes, sends replies and spawns threads, so it
//! never switches. Should the context or the global memory be busy there
//! (a guard dropped inside a handler, which mttl itself never does), step 1
//! drains instead.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use mttl_comm::{CommError, CommTuning, Rank, Received, Tag};

use super::atomic;
use super::error::{Fault, GlobalErrorKind};
use super::region::Exclusive;
use super::MemoryCx;
use crate::context::BODY_TIMEOUT;
use crate::registry::{Callable, Registry};
use crate::sync;
use crate::thread;
use crate::trace::{self, Kind};
use crate::wire::{self, Fields, HeaderBuf};

/// The longest header of a remote-memory message (`METHOD`).
const MAX_HEADER: usize = 24;

/// A message kept for later (step 3).
struct Held<'a> {
    kind: Tag,
    header: [u8; MAX_HEADER],
    /// Borrowed from the message while it is handled at once; owned once
    /// it waits in a FIFO.
    body: Cow<'a, [u8]>,
}

impl<'a> Held<'a> {
    fn new(kind: Tag, header: &[u8], body: Cow<'a, [u8]>) -> Held<'a> {
        let mut h = [0u8; MAX_HEADER];
        h[..header.len()].copy_from_slice(header);
        Held {
            kind,
            header: h,
            body,
        }
    }

    /// The same message, owning its body.
    fn into_owned(self) -> Held<'static> {
        Held {
            kind: self.kind,
            header: self.header,
            body: Cow::Owned(self.body.into_owned()),
        }
    }
}

/// The owner's state: the deferred FIFOs, and the first failed `nwrite` of
/// each source since its last fence.
#[derive(Default)]
pub(crate) struct Owner {
    queues: Vec<VecDeque<Held<'static>>>,
    queued: usize,
    nwrite_faults: Vec<Option<Fault>>,
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({} messages deferred)", self.queued)
    }
}

impl Owner {
    fn waiting_from(&self, src: Rank) -> bool {
        self.queues.get(src).is_some_and(|q| !q.is_empty())
    }

    fn push_back(&mut self, src: Rank, held: Held<'static>) {
        if self.queues.len() <= src {
            self.queues.resize_with(src + 1, VecDeque::new);
        }
        self.queues[src].push_back(held);
        self.queued += 1;
    }

    fn pop_front(&mut self, src: Rank) -> Option<Held<'static>> {
        let held = self.queues.get_mut(src)?.pop_front()?;
        self.queued -= 1;
        Some(held)
    }

    fn push_front(&mut self, src: Rank, held: Held<'static>) {
        self.queues[src].push_front(held);
        self.queued += 1;
    }

    fn record_nwrite_fault(&mut self, src: Rank, fault: Fault) {
        if self.nwrite_faults.len() <= src {
            self.nwrite_faults.resize(src + 1, None);
        }
        self.nwrite_faults[src].get_or_insert(fault);
    }

    fn take_nwrite_fault(&mut self, src: Rank) -> Option<Fault> {
        self.nwrite_faults.get_mut(src)?.take()
    }
}

/// Handles a remote-memory message (steps 1 to 3).
pub(crate) fn dispatch(
    cx: &mut MemoryCx<'_>,
    kind: Tag,
    src: Rank,
    header: &[u8],
    body: Cow<'_, [u8]>,
) {
    let held = Held::new(kind, header, body);
    if cx.global.owner.waiting_from(src) {
        drain_source(cx, src);
        if cx.global.owner.waiting_from(src) {
            cx.global.owner.push_back(src, held.into_owned());
            return;
        }
    }
    if let Err(held) = apply(cx, src, held) {
        cx.global.owner.push_back(src, held.into_owned());
    }
}

/// What [`receive_write_in_place`] did.
pub(crate) enum InPlace {
    /// The body landed in its region and the write is done.
    Done,
    /// The body did not fit where the header points and was received as
    /// usual: the ordinary path refuses or applies it.
    Received(Result<Option<Received>, CommError>),
    /// Nothing was received: the ordinary path receives the body.
    NotTried,
}

/// Step 3 of the large-message protocol for a remote write of `kind` from
/// `src` whose `header` just arrived: receives the body straight into the
/// region when the write could be applied at once (nothing from `src`
/// waits, the header is valid, the region is not borrowed), saving a copy
/// of what can be megabytes.
pub(crate) fn receive_write_in_place(
    cx: &mut MemoryCx<'_>,
    src: Rank,
    kind: Tag,
    header: &[u8],
) -> InPlace {
    if cx.global.owner.waiting_from(src) {
        return InPlace::NotTried;
    }
    let mut f = Fields(header);
    let (region, addr) = (f.u32(), f.u64());
    let cell = (kind == wire::WRITE_ACK).then(|| f.u32());
    // Checks all but the length, which the body tells.
    let Ok((buf, off, _)) = cx.global.locate(region, addr, None) else {
        return InPlace::NotTried;
    };
    let (room, elem) = (buf.byte_len() - off, buf.elem_size());
    let comm = &mut cx.comm;
    let begin = trace::begin();
    let got = buf.with_bytes_mut(off, room, |target| {
        comm.recv_from_into(src, Some(BODY_TIMEOUT), target, &|e| {
            e.tag == wire::DATA && e.len % elem == 0
        })
    });
    match &got {
        Some(Ok(Some(Received::Placed(e)))) => {
            trace::received(Kind::RecvInto, begin, e.source, e.tag, e.len);
        }
        Some(Ok(Some(Received::Owned(m)))) => {
            trace::received(Kind::RecvInto, begin, m.source, m.tag, m.data.len());
        }
        _ => {}
    }
    match got {
        None => InPlace::NotTried,
        Some(Ok(Some(placed @ Received::Placed(_)))) => {
            cx.check_body(src, Ok(Some(placed)));
            if let Some(cell) = cell {
                reply(cx, src, cell, wire::STATUS_OK, &[]);
            }
            InPlace::Done
        }
        Some(got) => InPlace::Received(got),
    }
}

/// Step 4: applies what can be applied of every FIFO.
pub(crate) fn drain(cx: &mut MemoryCx<'_>) {
    if cx.global.owner.queued == 0 {
        return;
    }
    for src in 0..cx.global.owner.queues.len() {
        drain_source(cx, src);
    }
}

fn drain_source(cx: &mut MemoryCx<'_>, src: Rank) {
    while let Some(held) = cx.global.owner.pop_front(src) {
        if let Err(held) = apply(cx, src, held) {
            cx.global.owner.push_front(src, held);
            return;
        }
    }
}

/// Sends a reply into cell `cell` of `dest`.
fn reply(cx: &mut MemoryCx<'_>, dest: Rank, cell: u32, status: u8, body: &[u8]) {
    let header = HeaderBuf::with_capacity(5).u32(cell).u8(status).bytes;
    if let Err(e) = cx.post(dest, wire::CELL_WRITE, &header, body) {
        cx.send_failed(
            &format!("replying to a global-memory request of rank {dest}"),
            &e,
        );
    }
}

/// Answers a bad request (step 2): to its reply cell, or, for an `nwrite`,
/// to the source's next fence.
fn refuse(cx: &mut MemoryCx<'_>, src: Rank, cell: Option<u32>, fault: Fault) {
    match cell {
        Some(cell) => reply(cx, src, cell, wire::STATUS_ERROR, &fault.encode()),
        None => {
            tracing::debug!(rank = cx.rank, src, "nwrite refused: {}", fault.kind);
            cx.global.owner.record_nwrite_fault(src, fault);
        }
    }
}

/// Steps 2 and 3 for one message; gives it back if it must wait.
fn apply<'a>(cx: &mut MemoryCx<'_>, src: Rank, held: Held<'a>) -> Result<(), Held<'a>> {
    let mut f = Fields(&held.header);
    match held.kind {
        wire::WRITE | wire::WRITE_ACK => {
            let (region, addr) = (f.u32(), f.u64());
            let cell = (held.kind == wire::WRITE_ACK).then(|| f.u32());
            let (buf, off, len) = match cx.global.locate(region, addr, Some(held.body.len() as u64))
            {
                Ok(at) => at,
                Err(fault) => {
                    refuse(cx, src, cell, fault);
                    return Ok(());
                }
            };
            let body = &held.body;
            if buf
                .with_bytes_mut(off, len, |t| t.copy_from_slice(body))
                .is_none()
            {
                buf.set_waiters();
                return Err(held);
            }
            if let Some(cell) = cell {
                reply(cx, src, cell, wire::STATUS_OK, &[]);
            }
        }
        wire::READ => {
            let (region, addr, len, cell) = (f.u32(), f.u64(), f.u32(), f.u32());
            let (buf, off, len) = match cx.global.locate(region, addr, Some(u64::from(len))) {
                Ok(at) => at,
                Err(fault) => {
                    refuse(cx, src, Some(cell), fault);
                    return Ok(());
                }
            };
            // The reply is sent straight from the region's memory.
            let header = HeaderBuf::with_capacity(5)
                .u32(cell)
                .u8(wire::STATUS_OK)
                .bytes;
            match buf.with_bytes(off, len, |bytes| {
                cx.post(src, wire::CELL_WRITE, &header, bytes)
            }) {
                None => {
                    buf.set_waiters();
                    return Err(held);
                }
                Some(Err(e)) => cx.send_failed(&format!("answering a read of rank {src}"), &e),
                Some(Ok(())) => {}
            }
        }
        wire::FENCE => {
            let cell = f.u32();
            let fault = cx.global.owner.take_nwrite_fault(src).map(|f| f.encode());
            // Calls from `src` still running answer it when they end.
            let Some(failure) = crate::invoke::park_fence(src, cell, fault.clone()) else {
                return Ok(());
            };
            match (fault, failure) {
                (Some(fault), _) => reply(cx, src, cell, wire::STATUS_ERROR, &fault),
                (None, Some(failure)) => {
                    reply(cx, src, cell, wire::STATUS_PANIC, failure.as_bytes());
                }
                (None, None) => reply(cx, src, cell, wire::STATUS_OK, &[]),
            }
        }
        wire::ATOMIC => {
            let (region, addr, cell, op) = (f.u32(), f.u64(), f.u32(), f.u8());
            let Some(width) = atomic::width(op) else {
                let (offset, _) = super::unpack_addr(addr);
                let kind = GlobalErrorKind::Protocol(format!("unknown atomic type in op {op:#x}"));
                refuse(
                    cx,
                    src,
                    Some(cell),
                    Fault {
                        region,
                        offset,
                        len: 0,
                        kind,
                    },
                );
                return Ok(());
            };
            let (buf, off, len) = match cx.global.locate(region, addr, Some(width as u64)) {
                Ok(at) => at,
                Err(fault) => {
                    refuse(cx, src, Some(cell), fault);
                    return Ok(());
                }
            };
            let operands = &held.body;
            match buf.with_bytes_mut(off, len, |t| atomic::apply(op, t, operands)) {
                None => {
                    buf.set_waiters();
                    return Err(held);
                }
                Some(Ok(old)) => reply(cx, src, cell, wire::STATUS_OK, &old),
                Some(Err(kind)) => {
                    let fault = Fault {
                        region,
                        offset: off as u64,
                        len: len as u64,
                        kind,
                    };
                    refuse(cx, src, Some(cell), fault);
                }
            }
        }
        wire::METHOD => {
            let (region, addr, id, cell) = (f.u32(), f.u64(), f.u64(), f.u32());
            let (buf, off, len) = match cx.global.locate(region, addr, None) {
                Ok(at) => at,
                Err(fault) => {
                    refuse(cx, src, Some(cell), fault);
                    return Ok(());
                }
            };
            let fault = move |kind| Fault {
                region,
                offset: off as u64,
                len: len as u64,
                kind,
            };
            let me = cx.rank;
            let entry = match Registry::get().by_id(id) {
                Some(e) => e,
                None => {
                    let why = format!(
                        "rank {me} has no remote function with id {id:#018x} (are all ranks the same program?)"
                    );
                    refuse(cx, src, Some(cell), fault(GlobalErrorKind::Method(why)));
                    return Ok(());
                }
            };
            let call = match entry.callable {
                Callable::Method { call, object_size } if object_size == len => call,
                Callable::Method { object_size, .. } => {
                    let kind = GlobalErrorKind::WrongType {
                        region_elem: len as u64,
                        ptr_elem: object_size as u64,
                    };
                    refuse(cx, src, Some(cell), fault(kind));
                    return Ok(());
                }
                Callable::Free(_) => {
                    let why = format!(
                        "{} is a free function: call it with mttl::invoke",
                        entry.name
                    );
                    refuse(cx, src, Some(cell), fault(GlobalErrorKind::Method(why)));
                    return Ok(());
                }
            };
            let mut hold = match Exclusive::acquire(buf) {
                Ok(hold) => hold,
                Err(buf) => {
                    buf.set_waiters();
                    return Err(held);
                }
            };
            // The region is held from now on, so later messages from `src`
            // see the member function's effects.
            let args = held.body.into_owned();
            let name = entry.name;
            thread::spawn_detached(name, move || {
                hold.enter();
                let outcome = thread::catch_panic(|| call(hold.bytes_mut(off, len), &args));
                drop(hold);
                let (status, body) = match outcome {
                    Ok(Ok(result)) => (wire::STATUS_OK, result),
                    Ok(Err(e)) => {
                        let why = format!("{name} on rank {me}: {e}");
                        (
                            wire::STATUS_ERROR,
                            fault(GlobalErrorKind::Method(why)).encode(),
                        )
                    }
                    Err(p) => (
                        wire::STATUS_PANIC,
                        crate::invoke::panic_message(name, &p).into_bytes(),
                    ),
                };
                sync::write_cell(src, cell, status, &body);
            });
        }
        other => cx.fail(
            &format!(
                "malformed message from rank {src}: kind {other} is not a remote-memory message"
            ),
            1,
        ),
    }
    Ok(())
}
