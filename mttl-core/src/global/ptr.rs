//! [`GlobalPtr<T>`]: the address of plain data in registered memory of some
//! rank, and every access through it but writes (`write.rs`): arithmetic,
//! reads and remote method calls (the caller's side of the protocols in the
//! [module docs](super)).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::rc::Rc;

use bincode::de::{BorrowDecoder, Decoder};
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{BorrowDecode, Decode, Encode};
use bytemuck::{Pod, Zeroable};
use mttl_comm::Rank;

use super::completion::Request;
use super::error::{Fault, GlobalError, GlobalErrorKind};
use super::region::{elem_size, Exclusive, RegionBuf};
use super::with_memory;
use super::{or_panic, pack_addr, MAX_REQUEST};
use crate::codec;
use crate::context;
use crate::invoke::{self, RemoteMethod};
use crate::registry::Callable;
use crate::thread;
use crate::trace::{self, Kind};
use crate::wire::{self, HeaderBuf};

/// A pointer to a `T` in global memory: a rank, one of its registered
/// regions ([`GlobalArray`](super::GlobalArray),
/// [`GlobalObject`](super::GlobalObject)) and a byte offset in it.
///
/// It is plain data itself (16 bytes, `Pod`), so it can be stored in global
/// memory (`GlobalPtr<GlobalPtr<T>>`) and passed to `invoke` (it is
/// `Encode`/`Decode`). Any value is safe to use: the owner checks region,
/// liveness, element size and bounds of every access, and a bad one fails
/// with a [`GlobalError`] (the `try_` methods return it, the others panic
/// with it). The all-zero value is the null pointer.
///
/// Values travel as raw bytes, so every rank must share the byte order and
/// layout of `T`: true of a job running one build on one architecture.
///
/// Accesses to this rank's own memory happen right here. They wait only
/// for a member function that another rank (or another thread) runs on the
/// region; a conflicting local guard ([`GlobalRef`](super::GlobalRef)),
/// which may be the caller's own, makes them fail with
/// [`GlobalErrorKind::Borrowed`], as with `RefCell`. Remote accesses block
/// only the calling mttl thread.
///
/// ```
/// use mttl_core::{GlobalArray, GlobalErrorKind, GlobalPtr};
///
/// let code = mttl_core::start(|| {
///     let a = GlobalArray::<u64>::from_vec(vec![1, 2, 3]);
///     let p: GlobalPtr<u64> = a.ptr(1);
///     assert_eq!(p.read(), 2);
///     p.add(1).write(30);
///     p.nwrite(20);
///     mttl_core::fence();
///     assert_eq!(a.to_vec(), vec![1, 20, 30]);
///     assert_eq!(p.fetch_add(5), 20);
///     assert_eq!(p.add(2).try_read().unwrap_err().kind,
///                GlobalErrorKind::OutOfBounds { region_len: 24 });
/// });
/// assert_eq!(code, 0);
/// ```
#[repr(C)]
pub struct GlobalPtr<T> {
    node: u32,
    region: u32,
    offset: u64,
    _elem: PhantomData<fn() -> T>,
}

// SAFETY: every field is an integer or a zero-sized marker, and the all-zero
// value (the null pointer) is valid.
unsafe impl<T: 'static> Zeroable for GlobalPtr<T> {}

// SAFETY: `#[repr(C)]` with fields u32, u32, u64 (offsets 0, 4, 8; size 16,
// align 8) has no padding; `PhantomData` is zero-sized with alignment 1;
// every bit pattern is a valid value (no invariant is assumed: the owner
// checks each access); `Copy` and `'static` as required.
unsafe impl<T: 'static> Pod for GlobalPtr<T> {}

const _: () = assert!(std::mem::size_of::<GlobalPtr<u8>>() == 16);

impl<T> Clone for GlobalPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for GlobalPtr<T> {}

impl<T> PartialEq for GlobalPtr<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.node, self.region, self.offset) == (other.node, other.region, other.offset)
    }
}

impl<T> Eq for GlobalPtr<T> {}

impl<T> Hash for GlobalPtr<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.node, self.region, self.offset).hash(state);
    }
}

impl<T> Default for GlobalPtr<T> {
    fn default() -> Self {
        Self::null()
    }
}

impl<T> fmt::Debug for GlobalPtr<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_null() {
            return write!(f, "GlobalPtr(null)");
        }
        write!(
            f,
            "GlobalPtr(rank {}, region {:#x}, byte {})",
            self.node, self.region, self.offset
        )
    }
}

impl<T> Encode for GlobalPtr<T> {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.node.encode(e)?;
        self.region.encode(e)?;
        self.offset.encode(e)
    }
}

impl<T, C> Decode<C> for GlobalPtr<T> {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        Ok(GlobalPtr {
            node: u32::decode(d)?,
            region: u32::decode(d)?,
            offset: u64::decode(d)?,
            _elem: PhantomData,
        })
    }
}

impl<'de, T, C> BorrowDecode<'de, C> for GlobalPtr<T> {
    fn borrow_decode<D: BorrowDecoder<'de, Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        Self::decode(d)
    }
}

impl<T> GlobalPtr<T> {
    /// The null pointer (every access fails with [`GlobalErrorKind::Null`]).
    pub const fn null() -> Self {
        Self::from_parts(0, 0, 0)
    }

    /// A pointer from its parts, e.g. to rebuild one sent by hand. Any
    /// value is safe: a wrong one fails at the owner.
    pub const fn from_parts(node: Rank, region: u32, byte_offset: u64) -> Self {
        GlobalPtr {
            node: node as u32,
            region,
            offset: byte_offset,
            _elem: PhantomData,
        }
    }

    /// Whether this is the null pointer (region 0 is never registered).
    pub const fn is_null(&self) -> bool {
        self.region == 0
    }

    /// The rank that owns the memory.
    pub const fn node(&self) -> Rank {
        self.node as Rank
    }

    /// The region's id at its owner.
    pub const fn region(&self) -> u32 {
        self.region
    }

    /// The offset in the region, in bytes.
    pub const fn byte_offset(&self) -> u64 {
        self.offset
    }

    /// The same address as a pointer to `U`. Accessing it checks at the
    /// owner that the region holds `U`-sized elements.
    pub const fn cast<U>(self) -> GlobalPtr<U> {
        GlobalPtr::from_parts(self.node as Rank, self.region, self.offset)
    }
}

/// The largest part of a request, rounded down to whole elements.
pub(super) fn piece_len(elem: usize) -> usize {
    (MAX_REQUEST / elem).max(1) * elem
}

/// What one access is about, for its error.
#[derive(Debug, Clone, Copy)]
pub(super) struct Access {
    pub(super) node: Rank,
    pub(super) region: u32,
    pub(super) offset: u64,
    pub(super) len: u64,
    op: &'static str,
    pub(super) local: bool,
}

impl Access {
    pub(super) fn error(&self, kind: GlobalErrorKind) -> GlobalError {
        GlobalError {
            rank: self.node,
            region: self.region,
            offset: self.offset,
            len: self.len,
            op: self.op,
            kind,
        }
    }

    /// The outcome of a request from its reply.
    pub(super) fn outcome(&self, (status, body): (u8, Vec<u8>)) -> Result<Vec<u8>, GlobalError> {
        match status {
            wire::STATUS_OK => Ok(body),
            wire::STATUS_ERROR => Err(self.error(Fault::decode(&body).kind)),
            wire::STATUS_PANIC => Err(self.error(GlobalErrorKind::Panicked(
                String::from_utf8_lossy(&body).into_owned(),
            ))),
            other => Err(self.error(GlobalErrorKind::Protocol(format!("reply status {other}")))),
        }
    }

    /// Runs `attempt` on the region at this rank, at the bytes a local
    /// access of `len` bytes (`None`: one element) touches, until it
    /// succeeds. When it fails (the region is borrowed) and a member
    /// function holds the region, waits for it and tries again, checking
    /// the region anew (it may have been freed meanwhile); otherwise fails
    /// with `Borrowed`.
    pub(super) fn here<R>(
        &self,
        elem: usize,
        len: Option<u64>,
        mut attempt: impl FnMut(&Rc<RegionBuf>, usize, usize) -> Option<R>,
    ) -> Result<R, GlobalError> {
        loop {
            let (buf, off, len) = with_memory(|global| {
                global
                    .locate(self.region, pack_addr(self.offset, elem), len)
                    .map_err(|f| self.error(f.kind))
            })?;
            if let Some(r) = attempt(&buf, off, len) {
                return Ok(r);
            }
            if !buf.wait_for_method() {
                return Err(self.error(GlobalErrorKind::Borrowed));
            }
        }
    }
}

/// Waits for every request, returning the first failure.
pub(super) fn wait_all(at: &Access, requests: Vec<Request<'_>>) -> Result<(), GlobalError> {
    let mut first = Ok(());
    for r in requests {
        let outcome = at.outcome(r.wait());
        if let (Ok(()), Err(e)) = (&first, outcome) {
            first = Err(e);
        }
    }
    first
}

impl<T: Pod> GlobalPtr<T> {
    /// The pointer `n` elements further on (arithmetic wraps; the owner
    /// checks bounds when it is used).
    #[allow(clippy::should_implement_trait)] // named like `<*const T>::add`
    pub fn add(self, n: usize) -> Self {
        self.offset(n as isize)
    }

    /// The pointer `n` elements back.
    #[allow(clippy::should_implement_trait)] // named like `<*const T>::sub`
    pub fn sub(self, n: usize) -> Self {
        self.offset((n as isize).wrapping_neg())
    }

    /// The pointer `n` elements away (either way).
    pub fn offset(self, n: isize) -> Self {
        let bytes = (n as i64).wrapping_mul(elem_size::<T>() as i64);
        GlobalPtr {
            offset: self.offset.wrapping_add(bytes as u64),
            ..self
        }
    }

    /// How many elements `self` is past `origin`, if both point into the
    /// same region at element boundaries apart.
    pub fn offset_from(self, origin: Self) -> Option<isize> {
        if (self.node, self.region) != (origin.node, origin.region) {
            return None;
        }
        let diff = self.offset.wrapping_sub(origin.offset) as i64;
        let size = elem_size::<T>() as i64;
        (diff % size == 0).then(|| (diff / size) as isize)
    }

    /// Checks what can be checked here and says whether the memory is local.
    pub(super) fn access(&self, op: &'static str, len: usize) -> Result<Access, GlobalError> {
        let (me, size) = context::rank_and_size();
        let at = Access {
            node: self.node(),
            region: self.region,
            offset: self.offset,
            len: len as u64,
            op,
            local: self.node() == me,
        };
        if self.is_null() {
            return Err(at.error(GlobalErrorKind::Null));
        }
        if self.node() >= size {
            return Err(at.error(GlobalErrorKind::NoSuchRank { size }));
        }
        Ok(at)
    }

    /// Reads the pointed-to value, blocking the calling thread.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_read`](Self::try_read).
    #[track_caller]
    pub fn read(&self) -> T {
        or_panic(self.try_read())
    }

    /// Reads the pointed-to value, blocking the calling thread.
    #[track_caller]
    pub fn try_read(&self) -> Result<T, GlobalError> {
        let mut v = T::zeroed();
        self.try_read_slice(std::slice::from_mut(&mut v))?;
        Ok(v)
    }

    /// Fills `out` from the elements starting here.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_read_slice`](Self::try_read_slice).
    #[track_caller]
    pub fn read_slice(&self, out: &mut [T]) {
        or_panic(self.try_read_slice(out))
    }

    /// Reads `n` elements starting here.
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_read_slice`](Self::try_read_slice).
    #[track_caller]
    pub fn read_vec(&self, n: usize) -> Vec<T> {
        let mut v = vec![T::zeroed(); n];
        self.read_slice(&mut v);
        v
    }

    /// Fills `out` from the elements starting here, blocking the calling
    /// thread. The reply's bytes are copied once, into `out`. An empty
    /// `out` asks nothing of the owner.
    #[track_caller]
    pub fn try_read_slice(&self, out: &mut [T]) -> Result<(), GlobalError> {
        let begin = trace::begin();
        let bytes = std::mem::size_of_val(out) as u64;
        let r = self.read_slice_untraced(out);
        if begin.is_some() {
            trace::event(Kind::Read, Some(self.node()), 0, bytes, begin);
        }
        r
    }

    /// [`try_read_slice`](Self::try_read_slice) without its trace event.
    #[track_caller]
    fn read_slice_untraced(&self, out: &mut [T]) -> Result<(), GlobalError> {
        let out: &mut [u8] = bytemuck::cast_slice_mut(out);
        let at = self.access("read", out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        let elem = elem_size::<T>();
        if at.local {
            return at.here(elem, Some(at.len), |buf, off, len| {
                buf.with_bytes(off, len, |b| out.copy_from_slice(b))
            });
        }
        let requests = context::with(|cx| {
            let mut requests = Vec::new();
            let mut offset = at.offset;
            for piece in out.chunks_mut(piece_len(elem)) {
                let len = piece.len();
                let r = Request::new(at.node, Some(piece));
                let header = HeaderBuf::with_capacity(20)
                    .u32(at.region)
                    .u64(pack_addr(offset, elem))
                    .u32(len as u32)
                    .u32(r.slot())
                    .bytes;
                if let Err(e) = cx.post(at.node, wire::READ, &header, &[]) {
                    cx.send_failed(&format!("sending a read to rank {}", at.node), &e);
                }
                requests.push(r);
                offset = offset.wrapping_add(len as u64);
            }
            requests
        });
        wait_all(&at, requests)
    }

    /// Runs the member function `method` on the pointed-to object at its
    /// owner and returns its result (for this rank's own memory, right
    /// here). The owner holds the object's region exclusively while
    /// `method` runs, waiting first for local guards to go; a local call
    /// fails with [`GlobalErrorKind::Borrowed`] instead (see above).
    ///
    /// # Panics
    ///
    /// Panics with the [`GlobalError`] of [`try_invoke`](Self::try_invoke),
    /// and if `method` is not `#[mttl::remote]`.
    #[track_caller]
    pub fn invoke<F, A>(&self, method: F, args: A) -> F::Output
    where
        F: RemoteMethod<T, A>,
        A: Encode + 'static,
        F::Output: Encode + Decode<()>,
    {
        or_panic(self.try_invoke(method, args))
    }

    /// Like [`invoke`](Self::invoke), returning failures (including a panic
    /// of `method`, as [`GlobalErrorKind::Panicked`]).
    ///
    /// # Panics
    ///
    /// Panics if `method` is not `#[mttl::remote]`.
    #[track_caller]
    pub fn try_invoke<F, A>(&self, method: F, args: A) -> Result<F::Output, GlobalError>
    where
        F: RemoteMethod<T, A>,
        A: Encode + 'static,
        F::Output: Encode + Decode<()>,
    {
        let entry = invoke::entry_of::<F>();
        let elem = elem_size::<T>();
        let at = self.access(entry.name, elem)?;
        if let Callable::Method { object_size, .. } = entry.callable {
            // `F: RemoteMethod<T, _>` makes this hold; a stale registry
            // (another build) would not.
            if object_size != elem {
                return Err(at.error(GlobalErrorKind::WrongType {
                    region_elem: object_size as u64,
                    ptr_elem: elem as u64,
                }));
            }
        }
        if at.local {
            let (mut hold, off, len) = at.here(elem, None, |buf, off, len| {
                Exclusive::acquire(buf.clone()).ok().map(|h| (h, off, len))
            })?;
            hold.enter();
            let object: &mut T =
                bytemuck::try_from_bytes_mut(hold.bytes_mut(off, len)).map_err(|e| {
                    at.error(GlobalErrorKind::Method(format!(
                        "the object is not a valid {}: {e:?}",
                        std::any::type_name::<T>()
                    )))
                })?;
            return thread::catch_panic(|| method.call_local(object, args)).map_err(|p| {
                at.error(GlobalErrorKind::Panicked(invoke::panic_message(
                    entry.name, &p,
                )))
            });
        }
        let mut body = Vec::new();
        codec::encode_into(&args, &mut body)
            .map_err(|e| at.error(GlobalErrorKind::Method(format!("{}: {e}", entry.name))))?;
        let request = context::with(|cx| {
            let r = Request::new(at.node, None);
            let header = HeaderBuf::with_capacity(24)
                .u32(at.region)
                .u64(pack_addr(at.offset, elem))
                .u64(entry.id)
                .u32(r.slot())
                .bytes;
            if let Err(e) = cx.post_owned(at.node, wire::METHOD, &header, body) {
                cx.send_failed(&format!("invoking {} on rank {}", entry.name, at.node), &e);
            }
            r
        });
        let result = at.outcome(request.wait())?;
        codec::decode(&result).map_err(|e| {
            at.error(GlobalErrorKind::Method(format!(
                "the result of {} could not be decoded: {e}",
                entry.name
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_is_sixteen_bytes_of_plain_data() {
        let p = GlobalPtr::<u64>::from_parts(3, 0x0010_0002, 24);
        let bytes = bytemuck::bytes_of(&p);
        assert_eq!(bytes.len(), 16);
        let back: GlobalPtr<u64> = bytemuck::pod_read_unaligned(bytes);
        assert_eq!(back, p);
        assert!(<GlobalPtr<u64> as Zeroable>::zeroed() == GlobalPtr::null());
        let pp: GlobalPtr<GlobalPtr<u64>> = GlobalPtr::from_parts(1, 7 << 20, 0);
        assert_eq!(std::mem::size_of_val(&pp), 16);
    }

    #[test]
    fn arithmetic_counts_elements() {
        let p = GlobalPtr::<u32>::from_parts(1, 1 << 20, 8);
        assert_eq!(p.add(3).byte_offset(), 20);
        assert_eq!(p.add(3).sub(3), p);
        assert_eq!(p.offset(-2).byte_offset(), 0);
        assert_eq!(p.add(5).offset_from(p), Some(5));
        assert_eq!(p.offset_from(p.add(5)), Some(-5));
        assert_eq!(p.cast::<u8>().add(1).cast::<u32>().offset_from(p), None);
        let other = GlobalPtr::<u32>::from_parts(2, 1 << 20, 8);
        assert_eq!(other.offset_from(p), None);
        assert_eq!(p.cast::<u64>().add(1).byte_offset(), 16);
    }

    #[test]
    fn null_and_debug() {
        let n = GlobalPtr::<u8>::null();
        assert!(n.is_null());
        assert_eq!(format!("{n:?}"), "GlobalPtr(null)");
        let p = GlobalPtr::<u8>::from_parts(2, 0x0010_0001, 5);
        assert_eq!(
            format!("{p:?}"),
            "GlobalPtr(rank 2, region 0x100001, byte 5)"
        );
        assert!(!p.is_null());
    }

    #[test]
    fn encode_decode_round_trip() {
        let p = GlobalPtr::<i64>::from_parts(5, 0x0030_0009, 4096);
        let mut v = Vec::new();
        codec::encode_into(&(p, vec![p, GlobalPtr::null()]), &mut v).unwrap();
        let back: (GlobalPtr<i64>, Vec<GlobalPtr<i64>>) = codec::decode(&v).unwrap();
        assert_eq!(back, (p, vec![p, GlobalPtr::null()]));
    }
}
