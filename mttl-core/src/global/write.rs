//! Writes through a [`GlobalPtr`]: waited for (`write`), counted for the
//! next fence (`nwrite`), from a borrowed slice or an owned body, with
//! bodies split off behind their headers where the backend sends them
//! cheaper that way (the caller's side of the write protocols in the
//! [module docs](super)).

use std::rc::Rc;

use bytemuck::Pod;
use mttl_comm::{Comm, CommTuning, Rank, SendHandle};

use super::completion::Request;
use super::error::GlobalError;
use super::ptr::{piece_len, wait_all, GlobalPtr};
use super::region::elem_size;
use super::with_cx;
use super::{or_panic, pack_addr};
use crate::context::{self, Context, OwnedSend};
use crate::thread;
use crate::trace::{self, Kind};
use crate::wire::{self, HeaderBuf};

/// Whether a write body of `len` bytes goes as a second message, straight
/// from the caller's slice ([`Context::post_split`]), rather than copied
/// behind its header: above the backend's
/// [`combine_len`](mttl_comm::CommTuning::combine_len). On TCP every message
/// costs a system call and a pass through the loopback stack, which
/// outweighs the copies up to the eager limit, so there write bodies split
/// only where every body does.
fn splits_write(cx: &Context, len: usize) -> bool {
    len > cx.comm.combine_len()
}

/// Whether a write body of `len` bytes, from a thread, leaves by a
/// non-blocking send while the thread yields (see [`wait_for_send`]).
///
/// A blocking send of a large body stops this rank's loop until the owner
/// has taken it. When two ranks write large bodies to each other (an
/// all-to-all), each takes the other's while it waits, into memory of its
/// own (fresh pages), and copies it into the region afterwards. Sent while
/// the thread yields, the body leaves the same way, and this rank's loop
/// meanwhile receives the other's straight into its region.
fn leaves_while_yielding(cx: &Context, len: usize) -> bool {
    len > YIELDING_WRITE && splits_write(cx, len)
}

/// See [`leaves_while_yielding`]: smaller bodies leave within a few
/// microseconds, less than a yield per poll would add.
const YIELDING_WRITE: usize = 64 << 10;

/// Yields until the non-blocking send `handle` to `node` is over, so the
/// caller's borrowed body outlives it. A thread still waiting here when the
/// job ends is unwound only after the runtime has waited for the send
/// (`Context::finish_borrowed_sends`).
fn wait_for_send(node: Rank, handle: SendHandle) {
    loop {
        let done = context::with(|cx| {
            cx.stats.test += 1;
            // The runtime's loop, which runs at every yield, takes what
            // arrives meanwhile: a body written to this rank is left in the
            // network for it to place.
            let done = cx.comm.send_finished(handle);
            context::test_event(node, &done);
            let done = done
                .unwrap_or_else(|e| cx.send_failed(&format!("sending a write to rank {node}"), &e));
            if done {
                cx.borrowed_sends.retain(|&h| h != handle);
            }
            done
        });
        if done {
            return;
        }
        thread::yield_now();
    }
}

/// How many [`nwrite_owned`](GlobalPtr::nwrite_owned) sends may be in
/// flight from one rank; more would only hold more requests in the comm
/// layer, since a few already keep the owner busy.
pub const MAX_OWNED_SENDS: usize = 64;

/// How many bytes of [`nwrite_owned`](GlobalPtr::nwrite_owned) bodies may
/// be in flight from one rank (but one body always may): bodies handed
/// over as `Vec`s are held until sent, so a loop writing fresh ones holds
/// at most this much more memory.
pub const MAX_OWNED_BYTES: usize = 64 << 20;

/// Waits until at most `max_sends` [`nwrite_owned`](GlobalPtr::nwrite_owned)
/// sends, and `max_bytes` of their bodies (or a single send), are in
/// flight, dropping the bodies of those that are over; a thread yields
/// meanwhile.
pub(crate) fn reap_owned_sends(max_sends: usize, max_bytes: usize) {
    // A thread leaves what arrives meanwhile to the loop, which runs at
    // every yield (as in `wait_for_send`).
    let yields = thread::in_thread();
    loop {
        let done = context::with(|cx| {
            while let Some(send) = cx.owned_sends.front() {
                cx.stats.test += 1;
                let node = send.handle.dest;
                let over = if yields {
                    cx.comm.send_finished(send.handle)
                } else {
                    cx.comm.send_done(send.handle)
                };
                context::test_event(node, &over);
                match over {
                    Ok(true) => {
                        if let Some(send) = cx.owned_sends.pop_front() {
                            cx.owned_bytes -= send.len;
                        }
                    }
                    Ok(false) => break,
                    Err(e) => cx.send_failed(&format!("sending a write to rank {node}"), &e),
                }
            }
            let sends = cx.owned_sends.len();
            sends <= max_sends && (cx.owned_bytes <= max_bytes || sends <= 1)
        });
        if done {
            return;
        }
        if yields {
            thread::yield_now();
        }
    }
}

impl<T: Pod> GlobalPtr<T> {
    /// Writes `value` and waits until the owner has applied it.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_write`](Self::try_write).
    #[track_caller]
    pub fn write(&self, value: T) {
        or_panic(self.try_write(value))
    }

    /// Writes `value` and waits until the owner has applied it.
    #[track_caller]
    pub fn try_write(&self, value: T) -> Result<(), GlobalError> {
        self.try_write_slice(std::slice::from_ref(&value))
    }

    /// Writes `data` to the elements starting here and waits until the
    /// owner has applied it.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_write_slice`](Self::try_write_slice).
    #[track_caller]
    pub fn write_slice(&self, data: &[T]) {
        or_panic(self.try_write_slice(data))
    }

    /// Writes `data` to the elements starting here and waits until the
    /// owner has applied it. Large data is sent straight from `data`.
    #[track_caller]
    pub fn try_write_slice(&self, data: &[T]) -> Result<(), GlobalError> {
        self.put(data, "write", true)
    }

    /// Writes `value` without waiting: it is applied at the owner by the
    /// time this rank's next [`fence`](super::fence) (or barrier) returns.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_nwrite`](Self::try_nwrite).
    #[track_caller]
    pub fn nwrite(&self, value: T) {
        or_panic(self.try_nwrite(value))
    }

    /// Writes `value` without waiting. Errors found here (null pointer, no
    /// such rank, and any error of a local write) come back at once; the
    /// owner's come back from the next [`try_fence`](super::try_fence).
    #[track_caller]
    pub fn try_nwrite(&self, value: T) -> Result<(), GlobalError> {
        self.try_nwrite_slice(std::slice::from_ref(&value))
    }

    /// Writes `data` to the elements starting here without waiting (see
    /// [`nwrite`](Self::nwrite)); `data` may be reused at once.
    ///
    /// A large `data` (above `MTTL_EAGER_LIMIT`) leaves before this returns,
    /// and the calling thread may be switched out meanwhile, or just after
    /// if messages arrived, so that this rank's loop places what peers
    /// write to it (on MPI, bodies above 64 KiB leave while the thread
    /// yields).
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_nwrite_slice`](Self::try_nwrite_slice).
    #[track_caller]
    pub fn nwrite_slice(&self, data: &[T]) {
        or_panic(self.try_nwrite_slice(data))
    }

    /// Writes `data` without waiting (see [`try_nwrite`](Self::try_nwrite)).
    #[track_caller]
    pub fn try_nwrite_slice(&self, data: &[T]) -> Result<(), GlobalError> {
        self.put(data, "nwrite", false)
    }

    /// Writes `data` to the elements starting here without waiting and
    /// without copying it: the runtime keeps `data` (a `Vec<T>`, a
    /// `Box<[T]>`, an `Arc<[T]>` clone, anything owning its elements) until
    /// the write has left, and drops it by the time this rank's next
    /// [`fence`](super::fence) (or barrier) returns. Completion and errors
    /// are those of [`nwrite`](Self::nwrite).
    ///
    /// [`nwrite_slice`](Self::nwrite_slice) returns only once its large
    /// body has left, so that the caller may reuse it; this one returns at
    /// once, so a loop of large writes keeps several in flight and the
    /// owner copies one while the next is on its way (the MPI backend, with
    /// bodies above its [`combine_len`](mttl_comm::CommTuning::combine_len), 2
    /// KiB on Open MPI; on TCP, and for smaller bodies, it is
    /// `nwrite_slice`). To write one buffer again and again, or parts of
    /// it, share it: `Arc<[T]>`, or a type whose `AsRef` gives the part;
    /// after the fence, `Arc::get_mut` finds it unshared again. At most
    /// [`MAX_OWNED_SENDS`] writes, and [`MAX_OWNED_BYTES`] of bodies (or
    /// one body), are in flight: the next one first waits, yielding, for
    /// the oldest.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_nwrite_owned`](Self::try_nwrite_owned).
    #[track_caller]
    pub fn nwrite_owned<B: AsRef<[T]> + 'static>(&self, data: B) {
        or_panic(self.try_nwrite_owned(data))
    }

    /// Writes `data` without waiting or copying (see
    /// [`nwrite_owned`](Self::nwrite_owned); errors as for
    /// [`try_nwrite`](Self::try_nwrite)).
    #[track_caller]
    pub fn try_nwrite_owned<B: AsRef<[T]> + 'static>(&self, data: B) -> Result<(), GlobalError> {
        // On the heap first, so the elements' address is final even if `B`
        // holds them inline (an array); in an `Rc`, which (unlike a `Box`)
        // may move while pointers into what it holds are used.
        let data = Rc::new(data);
        let elems: &[T] = (*data).as_ref();
        let bytes: &[u8] = bytemuck::cast_slice(elems);
        let at = self.access("nwrite", bytes.len())?;
        if at.local || !context::with(|cx| splits_write(cx, bytes.len())) {
            return self.put(elems, "nwrite", false);
        }
        let begin = trace::begin();
        let elem = elem_size::<T>();
        let pieces = bytes.len().div_ceil(piece_len(elem));
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        let mut body = Some(data as Rc<dyn std::any::Any>);
        let mut offset = at.offset;
        for (i, start) in (0..len).step_by(piece_len(elem)).enumerate() {
            let n = piece_len(elem).min(len - start);
            // SAFETY: `ptr..ptr + len` are the bytes of `*body`, which the
            // runtime keeps, unchanged (`T` is plain data: nothing in it
            // can change behind a shared reference, and no one else holds
            // the `Rc`), until the last piece's send is over.
            let piece = unsafe { std::slice::from_raw_parts(ptr.add(start), n) };
            with_cx(|cx| {
                cx.global.note_nwrite(at.node);
                let header = HeaderBuf::with_capacity(16)
                    .u32(at.region)
                    .u64(pack_addr(offset, elem))
                    .bytes;
                // SAFETY: as above; the handle goes into `owned_sends`
                // with, for the last piece, the `Rc`.
                let sent =
                    unsafe { cx.post_split_nonblocking(at.node, wire::WRITE, &header, piece) };
                let handle = sent.unwrap_or_else(|e| {
                    cx.send_failed(&format!("sending a write to rank {}", at.node), &e)
                });
                let _body = if i + 1 == pieces { body.take() } else { None };
                cx.owned_bytes += n;
                cx.owned_sends.push_back(OwnedSend {
                    handle,
                    len: n,
                    _body,
                });
            });
            offset = offset.wrapping_add(n as u64);
        }
        reap_owned_sends(MAX_OWNED_SENDS, MAX_OWNED_BYTES);
        if begin.is_some() {
            trace::event(Kind::Nwrite, Some(at.node), 0, len as u64, begin);
        }
        Ok(())
    }

    /// The two writes: `WRITE_ACK`s waited for, or `WRITE`s counted for
    /// the next fence.
    pub(super) fn put(&self, data: &[T], op: &'static str, wait: bool) -> Result<(), GlobalError> {
        let begin = trace::begin();
        let r = self.put_untraced(data, op, wait);
        if begin.is_some() {
            let kind = if wait { Kind::Write } else { Kind::Nwrite };
            let bytes = std::mem::size_of_val(data) as u64;
            trace::event(kind, Some(self.node()), 0, bytes, begin);
        }
        r
    }

    /// [`put`](Self::put) without its trace event.
    fn put_untraced(&self, data: &[T], op: &'static str, wait: bool) -> Result<(), GlobalError> {
        let data: &[u8] = bytemuck::cast_slice(data);
        let at = self.access(op, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        let elem = elem_size::<T>();
        if at.local {
            return at.here(elem, Some(at.len), |buf, off, len| {
                buf.with_bytes_mut(off, len, |b| b.copy_from_slice(data))
            });
        }
        let yields = thread::in_thread();
        let mut requests = Vec::new();
        let mut offset = at.offset;
        for piece in data.chunks(piece_len(elem)) {
            let leaving = with_cx(|cx| {
                let header = HeaderBuf::with_capacity(16)
                    .u32(at.region)
                    .u64(pack_addr(offset, elem));
                let (kind, header) = if wait {
                    let r = Request::new(at.node, None);
                    let header = header.u32(r.slot()).bytes;
                    requests.push(r);
                    (wire::WRITE_ACK, header)
                } else {
                    cx.global.note_nwrite(at.node);
                    (wire::WRITE, header.bytes)
                };
                let large = piece.len() > cx.eager_limit;
                let sent = if yields && leaves_while_yielding(cx, piece.len()) {
                    // SAFETY: `piece` stays borrowed until this function
                    // returns, which is after `wait_for_send` saw the send
                    // over (or gave up on it while the job ends).
                    let sent = unsafe { cx.post_split_borrowed(at.node, kind, &header, piece) };
                    return Some(Some(sent.unwrap_or_else(|e| {
                        cx.send_failed(&format!("sending a write to rank {}", at.node), &e)
                    })));
                } else if splits_write(cx, piece.len()) {
                    cx.post_split(at.node, kind, &header, piece)
                } else {
                    cx.post(at.node, kind, &header, piece)
                };
                if let Err(e) = sent {
                    cx.send_failed(&format!("sending a write to rank {}", at.node), &e);
                }
                if yields && large && cx.comm.holds_received() {
                    // While the send blocked, the backend took what peers
                    // sent meanwhile (the contract's progress rule), but
                    // only the loop places it, when this thread yields. A
                    // thread writing large bodies in a loop to peers doing
                    // the same would otherwise pile up every body sent here
                    // until its loop ends, in ever fresh pages. Yielding to
                    // the loop keeps that to one body per peer, in memory
                    // reused at once.
                    return Some(None);
                }
                None
            });
            match leaving {
                Some(Some(handle)) => wait_for_send(at.node, handle),
                Some(None) => thread::yield_to_loop(),
                None => {}
            }
            offset = offset.wrapping_add(piece.len() as u64);
        }
        wait_all(&at, requests)
    }
}
