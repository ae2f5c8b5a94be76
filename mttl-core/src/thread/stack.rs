//! Coroutine stacks: the configured size and the per-OS-thread pool.
//!
//! Owns the `MTTL_STACK_SIZE` setting (read once per process) and
//! [`StackPool`], which keeps finished threads' stacks for reuse: a fresh
//! guarded `mmap` stack costs microseconds, a pooled one nanoseconds.
//!
//! Invariants:
//! - every stack in a pool has the process-wide configured size, so any pooled
//!   stack fits any thread;
//! - a stack enters the pool only after its coroutine has finished
//!   (`Coroutine::into_stack`), so nothing on it is live any more;
//! - the pool holds at most [`POOL_CAPACITY`] stacks; the rest are unmapped,
//!   so a burst of many threads does not pin their memory forever.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::io;
use std::sync::OnceLock;

use corosensei::stack::DefaultStack;

/// The environment variable that sets the stack size of every mttl thread.
pub const STACK_SIZE_VAR: &str = "MTTL_STACK_SIZE";

/// Stack size used when `MTTL_STACK_SIZE` is not set: 256 KiB.
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Smallest accepted stack size: 16 KiB (the panic machinery alone needs a
/// few KiB).
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// Largest accepted stack size: 1 GiB (larger values are almost surely typos).
pub const MAX_STACK_SIZE: usize = 1024 * 1024 * 1024;

/// Most finished stacks one OS thread keeps for reuse.
pub(crate) const POOL_CAPACITY: usize = 1024;

/// A value of `MTTL_STACK_SIZE` that is not a usable stack size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{STACK_SIZE_VAR}={value:?} is not a usable stack size: {problem}; \
     give bytes or a K/M/G suffix between 16K and 1G, e.g. {STACK_SIZE_VAR}=512K"
)]
pub struct StackSizeError {
    /// The text that was given.
    pub value: String,
    /// What is wrong with it.
    pub problem: &'static str,
}

/// Parses a stack size: decimal bytes with an optional binary suffix `K`,
/// `M` or `G` (any case, optionally followed by `iB` or `B`), e.g. `262144`,
/// `256K`, `1M`, `2MiB`. Surrounding whitespace is ignored.
pub fn parse_stack_size(value: &str) -> Result<usize, StackSizeError> {
    let fail = |problem| StackSizeError {
        value: value.to_owned(),
        problem,
    };
    let text = value.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(fail("it does not start with a number"));
    }
    let unit: usize = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(fail("the suffix is not one of K, M, G")),
    };
    let bytes = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| fail("it is too large"))?;
    if bytes < MIN_STACK_SIZE {
        return Err(fail("it is below the 16 KiB minimum"));
    }
    if bytes > MAX_STACK_SIZE {
        return Err(fail("it is above the 1 GiB maximum"));
    }
    Ok(bytes)
}

/// The stack size for a given value of `MTTL_STACK_SIZE` (`None`: unset).
pub(crate) fn stack_size_from(value: Option<&str>) -> Result<usize, StackSizeError> {
    match value {
        None => Ok(DEFAULT_STACK_SIZE),
        Some(text) => parse_stack_size(text),
    }
}

/// The stack size of mttl threads in this process, from `MTTL_STACK_SIZE`
/// (read once, on first use), or the error that value gives.
pub fn configured_stack_size() -> Result<usize, StackSizeError> {
    static SIZE: OnceLock<Result<usize, StackSizeError>> = OnceLock::new();
    SIZE.get_or_init(|| match std::env::var(STACK_SIZE_VAR) {
        Ok(text) => stack_size_from(Some(&text)),
        Err(std::env::VarError::NotPresent) => stack_size_from(None),
        Err(std::env::VarError::NotUnicode(raw)) => Err(StackSizeError {
            value: raw.to_string_lossy().into_owned(),
            problem: "it is not valid UTF-8",
        }),
    })
    .clone()
}

/// The stack size of mttl threads in this process.
///
/// # Panics
///
/// Panics with a message naming `MTTL_STACK_SIZE` if its value is invalid.
pub fn stack_size() -> usize {
    match configured_stack_size() {
        Ok(size) => size,
        Err(error) => panic!("mttl: {error}"),
    }
}

/// Writes `bytes` as "N MiB", "N KiB" or "N bytes" (whichever is exact).
pub(crate) fn fmt_size(bytes: usize, out: &mut impl fmt::Write) -> fmt::Result {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        write!(out, "{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        write!(out, "{} KiB", bytes >> 10)
    } else {
        write!(out, "{bytes} bytes")
    }
}

/// Counters of one OS thread's stack pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StackStats {
    /// Stacks created with a fresh `mmap` since this OS thread started.
    pub fresh: u64,
    /// Spawns served from the pool.
    pub reused: u64,
    /// Stacks waiting in the pool now.
    pub pooled: usize,
}

/// Finished threads' stacks, kept for reuse on one OS thread.
pub(crate) struct StackPool {
    free: RefCell<Vec<DefaultStack>>,
    fresh: Cell<u64>,
    reused: Cell<u64>,
}

impl StackPool {
    pub(crate) const fn new() -> Self {
        Self {
            free: RefCell::new(Vec::new()),
            fresh: Cell::new(0),
            reused: Cell::new(0),
        }
    }

    /// A stack of `size` bytes: a pooled one if any, else a fresh mapping.
    #[inline]
    pub(crate) fn take(&self, size: usize) -> io::Result<DefaultStack> {
        let pooled = self.free.borrow_mut().pop();
        match pooled {
            Some(stack) => {
                self.reused.set(self.reused.get() + 1);
                Ok(stack)
            }
            None => self.take_fresh(size),
        }
    }

    #[cold]
    fn take_fresh(&self, size: usize) -> io::Result<DefaultStack> {
        let stack = DefaultStack::new(size)?;
        self.fresh.set(self.fresh.get() + 1);
        Ok(stack)
    }

    /// Returns the stack of a finished coroutine to the pool (or unmaps it
    /// when the pool is full).
    #[inline]
    pub(crate) fn put(&self, stack: DefaultStack) {
        let mut free = self.free.borrow_mut();
        if free.len() < POOL_CAPACITY {
            free.push(stack);
        } else {
            drop(free);
            drop(stack);
        }
    }

    pub(crate) fn stats(&self) -> StackStats {
        StackStats {
            fresh: self.fresh.get(),
            reused: self.reused.get(),
            pooled: self.free.borrow().len(),
        }
    }
}

/// The system page size (cached after the first call).
pub(crate) fn page_size() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let cached = PAGE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = usize::try_from(page)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096);
    PAGE.store(page, Ordering::Relaxed);
    page
}

/// Displays a byte count the way [`fmt_size`] writes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SizeText(pub(crate) usize);

impl fmt::Display for SizeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt_size(self.0, f)
    }
}
