//! Remote atomics on integers: the operations, their one-byte code on the
//! wire, how the owner applies them to the bytes of a region, and the
//! [`GlobalPtr`] methods that request them.
//!
//! The owner applies an operation in its handler (or the caller, for its
//! own memory) in one step, between two thread switches; since one OS
//! thread runs every mttl thread and handler of a rank, that step is atomic
//! with respect to everything else that touches the memory through mttl.
//!
//! The `op` byte of an `ATOMIC` header is `operation << 4 | type`, with the
//! types `u32` 0, `u64` 1, `i32` 2, `i64` 3. The body holds the operands
//! (one, or two for compare-exchange: expected then new), little-endian;
//! the reply the previous value, behind a success byte for
//! compare-exchange.

use bytemuck::Pod;

use super::completion::Request;
use super::error::{GlobalError, GlobalErrorKind};
use super::ptr::{Access, GlobalPtr};
use super::region::elem_size;
use super::{or_panic, pack_addr};
use crate::context;
use crate::wire::{self, HeaderBuf};

mod sealed {
    pub trait Sealed {}
}

/// Integers that [`GlobalPtr`] atomics work on: `u32`,
/// `u64`, `i32` and `i64`.
pub trait AtomicInt: Pod + Eq + sealed::Sealed {
    /// The type's code in the `op` byte.
    #[doc(hidden)]
    const TYPE_CODE: u8;
}

macro_rules! atomic_int {
    ($($t:ty => $code:expr),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicInt for $t {
            const TYPE_CODE: u8 = $code;
        }
    )*};
}

atomic_int!(u32 => 0, u64 => 1, i32 => 2, i64 => 3);

/// An atomic operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    FetchAdd = 0,
    FetchSub = 1,
    Swap = 2,
    CompareExchange = 3,
    FetchMin = 4,
    FetchMax = 5,
    FetchAnd = 6,
    FetchOr = 7,
    FetchXor = 8,
}

impl Op {
    const ALL: [Op; 9] = [
        Op::FetchAdd,
        Op::FetchSub,
        Op::Swap,
        Op::CompareExchange,
        Op::FetchMin,
        Op::FetchMax,
        Op::FetchAnd,
        Op::FetchOr,
        Op::FetchXor,
    ];

    /// The name reported in errors.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::FetchAdd => "fetch_add",
            Op::FetchSub => "fetch_sub",
            Op::Swap => "swap",
            Op::CompareExchange => "compare_exchange",
            Op::FetchMin => "fetch_min",
            Op::FetchMax => "fetch_max",
            Op::FetchAnd => "fetch_and",
            Op::FetchOr => "fetch_or",
            Op::FetchXor => "fetch_xor",
        }
    }

    /// The `op` byte for this operation on `T`.
    pub(crate) fn code<T: AtomicInt>(self) -> u8 {
        (self as u8) << 4 | T::TYPE_CODE
    }

    /// How many operands it takes.
    fn operands(self) -> usize {
        if self == Op::CompareExchange {
            2
        } else {
            1
        }
    }
}

/// The integer operations, on the widest type of each signedness.
trait Int: Copy + Ord {
    const WIDTH: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn and(self, o: Self) -> Self { self & o }
            fn or(self, o: Self) -> Self { self | o }
            fn xor(self, o: Self) -> Self { self ^ o }
        }
    )*};
}

int!(u32, u64, i32, i64);

/// Applies the operation coded `code` to `target` with `operands`; returns
/// the reply body.
pub(crate) fn apply(
    code: u8,
    target: &mut [u8],
    operands: &[u8],
) -> Result<Vec<u8>, GlobalErrorKind> {
    match code & 0xf {
        0 => apply_int::<u32>(code, target, operands),
        1 => apply_int::<u64>(code, target, operands),
        2 => apply_int::<i32>(code, target, operands),
        3 => apply_int::<i64>(code, target, operands),
        t => Err(GlobalErrorKind::Protocol(format!(
            "unknown atomic type code {t}"
        ))),
    }
}

/// The width in bytes of the integer type in `code`, if known.
pub(crate) fn width(code: u8) -> Option<usize> {
    match code & 0xf {
        0 | 2 => Some(4),
        1 | 3 => Some(8),
        _ => None,
    }
}

fn apply_int<I: Int>(
    code: u8,
    target: &mut [u8],
    operands: &[u8],
) -> Result<Vec<u8>, GlobalErrorKind> {
    let op = Op::ALL
        .get(usize::from(code >> 4))
        .copied()
        .ok_or_else(|| {
            GlobalErrorKind::Protocol(format!("unknown atomic operation {}", code >> 4))
        })?;
    if operands.len() != op.operands() * I::WIDTH || target.len() != I::WIDTH {
        return Err(GlobalErrorKind::Protocol(format!(
            "{} on {} bytes with {} bytes of operands",
            op.name(),
            target.len(),
            operands.len()
        )));
    }
    let old = I::load(target);
    let a = I::load(&operands[..I::WIDTH]);
    let mut reply = Vec::with_capacity(1 + I::WIDTH);
    let new = match op {
        Op::FetchAdd => old.add(a),
        Op::FetchSub => old.sub(a),
        Op::Swap => a,
        Op::FetchMin => old.min(a),
        Op::FetchMax => old.max(a),
        Op::FetchAnd => old.and(a),
        Op::FetchOr => old.or(a),
        Op::FetchXor => old.xor(a),
        Op::CompareExchange => {
            let swapped = old == a;
            reply.push(u8::from(swapped));
            if swapped {
                I::load(&operands[I::WIDTH..])
            } else {
                old
            }
        }
    };
    new.store(target);
    let at = reply.len();
    reply.resize(at + I::WIDTH, 0);
    old.store(&mut reply[at..]);
    Ok(reply)
}

/// Atomic read-modify-write operations, applied at the owner in one step
/// (see `atomic`): exact under any contention from any number of ranks and
/// threads.
impl<T: AtomicInt> GlobalPtr<T> {
    fn atomic(&self, op: Op, operands: &[T]) -> Result<(Access, Vec<u8>), GlobalError> {
        let elem = elem_size::<T>();
        let at = self.access(op.name(), elem)?;
        let operands: &[u8] = bytemuck::cast_slice(operands);
        let code = op.code::<T>();
        if at.local {
            let applied = at.here(elem, Some(at.len), |buf, off, len| {
                buf.with_bytes_mut(off, len, |t| apply(code, t, operands))
            })?;
            return applied.map(|reply| (at, reply)).map_err(|k| at.error(k));
        }
        let request = context::with(|cx| {
            let r = Request::new(at.node, None);
            let header = HeaderBuf::with_capacity(17)
                .u32(at.region)
                .u64(pack_addr(at.offset, elem))
                .u32(r.slot())
                .u8(code)
                .bytes;
            if let Err(e) = cx.post(at.node, wire::ATOMIC, &header, operands) {
                cx.send_failed(&format!("sending an atomic to rank {}", at.node), &e);
            }
            r
        });
        Ok((at, at.outcome(request.wait())?))
    }

    /// The previous value, from an atomic's reply.
    fn previous(&self, op: Op, operand: T) -> Result<T, GlobalError> {
        let (at, reply) = self.atomic(op, &[operand])?;
        bytemuck::try_pod_read_unaligned(&reply).map_err(|_| {
            at.error(GlobalErrorKind::Protocol(format!(
                "{} reply bytes for {}",
                reply.len(),
                op.name()
            )))
        })
    }

    /// Adds `v` (wrapping) and returns the previous value.
    #[track_caller]
    pub fn try_fetch_add(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchAdd, v)
    }

    /// Subtracts `v` (wrapping) and returns the previous value.
    #[track_caller]
    pub fn try_fetch_sub(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchSub, v)
    }

    /// Stores `v` and returns the previous value.
    #[track_caller]
    pub fn try_swap(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::Swap, v)
    }

    /// Stores the minimum of the value and `v`; returns the previous value.
    #[track_caller]
    pub fn try_fetch_min(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchMin, v)
    }

    /// Stores the maximum of the value and `v`; returns the previous value.
    #[track_caller]
    pub fn try_fetch_max(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchMax, v)
    }

    /// Bitwise-ands `v` in and returns the previous value.
    #[track_caller]
    pub fn try_fetch_and(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchAnd, v)
    }

    /// Bitwise-ors `v` in and returns the previous value.
    #[track_caller]
    pub fn try_fetch_or(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchOr, v)
    }

    /// Bitwise-xors `v` in and returns the previous value.
    #[track_caller]
    pub fn try_fetch_xor(&self, v: T) -> Result<T, GlobalError> {
        self.previous(Op::FetchXor, v)
    }

    /// Stores `new` if the value is `current`. Returns `Ok(previous)` if it
    /// did, `Err(actual value)` if not (like `AtomicU64::compare_exchange`).
    #[track_caller]
    pub fn try_compare_exchange(&self, current: T, new: T) -> Result<Result<T, T>, GlobalError> {
        let (at, reply) = self.atomic(Op::CompareExchange, &[current, new])?;
        match reply.split_first() {
            Some((&swapped, old)) if old.len() == elem_size::<T>() => {
                let old: T = bytemuck::pod_read_unaligned(old);
                Ok(if swapped == 1 { Ok(old) } else { Err(old) })
            }
            _ => Err(at.error(GlobalErrorKind::Protocol(format!(
                "{} reply bytes for compare_exchange",
                reply.len()
            )))),
        }
    }

    /// [`try_fetch_add`](Self::try_fetch_add), panicking on failure.
    #[track_caller]
    pub fn fetch_add(&self, v: T) -> T {
        or_panic(self.try_fetch_add(v))
    }

    /// [`try_fetch_sub`](Self::try_fetch_sub), panicking on failure.
    #[track_caller]
    pub fn fetch_sub(&self, v: T) -> T {
        or_panic(self.try_fetch_sub(v))
    }

    /// [`try_swap`](Self::try_swap), panicking on failure.
    #[track_caller]
    pub fn swap(&self, v: T) -> T {
        or_panic(self.try_swap(v))
    }

    /// [`try_fetch_min`](Self::try_fetch_min), panicking on failure.
    #[track_caller]
    pub fn fetch_min(&self, v: T) -> T {
        or_panic(self.try_fetch_min(v))
    }

    /// [`try_fetch_max`](Self::try_fetch_max), panicking on failure.
    #[track_caller]
    pub fn fetch_max(&self, v: T) -> T {
        or_panic(self.try_fetch_max(v))
    }

    /// [`try_fetch_and`](Self::try_fetch_and), panicking on failure.
    #[track_caller]
    pub fn fetch_and(&self, v: T) -> T {
        or_panic(self.try_fetch_and(v))
    }

    /// [`try_fetch_or`](Self::try_fetch_or), panicking on failure.
    #[track_caller]
    pub fn fetch_or(&self, v: T) -> T {
        or_panic(self.try_fetch_or(v))
    }

    /// [`try_fetch_xor`](Self::try_fetch_xor), panicking on failure.
    #[track_caller]
    pub fn fetch_xor(&self, v: T) -> T {
        or_panic(self.try_fetch_xor(v))
    }

    /// [`try_compare_exchange`](Self::try_compare_exchange), panicking on
    /// failure to reach the value.
    #[track_caller]
    pub fn compare_exchange(&self, current: T, new: T) -> Result<T, T> {
        or_panic(self.try_compare_exchange(current, new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<T: AtomicInt>(op: Op, target: T, operands: &[T]) -> (T, Vec<u8>) {
        let mut t = bytemuck::bytes_of(&target).to_vec();
        let reply = apply(op.code::<T>(), &mut t, bytemuck::cast_slice(operands)).unwrap();
        (bytemuck::pod_read_unaligned(&t), reply)
    }

    #[test]
    fn every_operation() {
        assert_eq!(
            run(Op::FetchAdd, 5u64, &[3]),
            (8, 5u64.to_le_bytes().to_vec())
        );
        assert_eq!(run(Op::FetchAdd, u32::MAX, &[2]).0, 1, "wraps");
        assert_eq!(run(Op::FetchSub, 5i32, &[7]).0, -2);
        assert_eq!(run(Op::Swap, 5i64, &[-9]).0, -9);
        assert_eq!(run(Op::FetchMin, -5i32, &[3]).0, -5, "signed");
        assert_eq!(run(Op::FetchMin, u32::MAX, &[3]).0, 3, "unsigned");
        assert_eq!(run(Op::FetchMax, -5i64, &[3]).0, 3);
        assert_eq!(run(Op::FetchAnd, 0b1100u32, &[0b1010]).0, 0b1000);
        assert_eq!(run(Op::FetchOr, 0b1100u32, &[0b1010]).0, 0b1110);
        assert_eq!(run(Op::FetchXor, 0b1100u32, &[0b1010]).0, 0b0110);
        let (v, r) = run(Op::CompareExchange, 4u64, &[4, 10]);
        assert_eq!((v, r[0], &r[1..]), (10, 1, &4u64.to_le_bytes()[..]));
        let (v, r) = run(Op::CompareExchange, 4u64, &[5, 10]);
        assert_eq!((v, r[0], &r[1..]), (4, 0, &4u64.to_le_bytes()[..]));
    }

    #[test]
    fn malformed_requests_are_errors() {
        let mut t = [0u8; 8];
        assert!(apply(0xf1, &mut t, &[0; 8]).is_err(), "unknown op");
        assert!(apply(0x0f, &mut t, &[0; 8]).is_err(), "unknown type");
        assert!(
            apply(Op::FetchAdd.code::<u64>(), &mut t, &[0; 4]).is_err(),
            "short operand"
        );
        assert!(
            apply(Op::FetchAdd.code::<u32>(), &mut t, &[0; 4]).is_err(),
            "wide target"
        );
    }
}
