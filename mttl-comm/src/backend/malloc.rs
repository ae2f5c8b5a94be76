//! The allocator setting both backends share: every message received gets
//! a vector of its own, so how `malloc` recycles large blocks decides
//! whether a stream of large messages lands in warm pages or in fresh ones.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
use std::sync::atomic::{AtomicUsize, Ordering};

/// What `kept_free_bytes` reports.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
static KEPT_FREE: AtomicUsize = AtomicUsize::new(0);

/// How much freed memory at the top of the heap `malloc` keeps for reuse,
/// as far as this crate knows: the trim threshold [`keep_freed_memory`] set,
/// or 0 if it set none (`malloc` tuned by the user, another C library).
#[cfg(feature = "mpi")]
pub(crate) fn kept_free_bytes() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        KEPT_FREE.load(Ordering::Relaxed)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}

/// Has glibc's `malloc` keep the memory of freed large messages for the
/// next ones instead of handing it back to the kernel.
///
/// Every message received gets a vector of its own, which the program drops
/// once done with it. By default glibc serves blocks of 128 KiB and more
/// with `mmap`, raises that threshold to the largest such block freed so
/// far, and gives the top of the heap back to the kernel whenever more than
/// twice that threshold is free there. A rank receiving a stream of large
/// messages holds several at once (all those that arrived ahead of the
/// program), frees more than that, and the heap is trimmed: every next
/// message then faults in fresh pages, each zeroed by the kernel, which
/// cost more than receiving the bytes themselves (most of the CPU time of
/// receiving a stream of 1 MiB messages). Fixing
/// the two thresholds at the largest values glibc's own adjustment can reach
/// (32 MiB and twice that) keeps that memory for reuse. Nothing is changed
/// when the user tunes `malloc` through the environment, or with another
/// C library.
pub(crate) fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const MMAP_THRESHOLD: libc::c_int = 32 << 20;
        const TRIM_THRESHOLD: libc::c_int = 2 * MMAP_THRESHOLD;
        let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
            || [
                "MALLOC_MMAP_THRESHOLD_",
                "MALLOC_TRIM_THRESHOLD_",
                "MALLOC_TOP_PAD_",
                "MALLOC_MMAP_MAX_",
            ]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if !tuned {
            // SAFETY: `mallopt` only sets malloc's parameters, under its own
            // lock; no memory is passed. A value it refuses changes nothing.
            unsafe {
                if libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                    && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                {
                    KEPT_FREE.store(TRIM_THRESHOLD as usize, Ordering::Relaxed);
                }
            }
        }
    }
}
