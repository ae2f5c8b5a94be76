//! Software prefetch hints for the streaming loops of CG and IS.
//!
//! On small VMs the hardware prefetcher can run too little ahead of a
//! sequential stream (the IS key arrays, the CG matrix) and cannot follow
//! the ~1000 write streams of the IS bucket scatter; asking for the lines
//! explicitly keeps those loops fed. A hint never faults, never reads memory
//! architecturally and never changes a result; off x86-64 it is a no-op.

/// Hints that element `index` of `data` (which may lie past its end) will be
/// read or written soon.
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T], index: usize) {
    let p = data.as_ptr().wrapping_add(index);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; a
    // prefetch of any address, valid or not, has no architectural effect.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
