//! Stack-overflow detection for mttl threads.
//!
//! Owns the process's `SIGSEGV`/`SIGBUS` handler and, where the OS thread
//! has none, its alternate signal stack.
//!
//! Every coroutine stack has one inaccessible guard page at its low end, so
//! overflowing it faults. Without help the process would die of a bare
//! `SIGSEGV` on a stack the kernel knows nothing about. Instead:
//!
//! 1. Each scheduler, when it starts, makes sure the handler below is
//!    installed (installing it again if someone, e.g. an MPI library, replaced
//!    it since, and remembering whatever was there to chain to), and that its
//!    OS thread has an alternate signal stack (`sigaltstack`), because the
//!    faulting stack has no room left to run a handler on. It hands the
//!    handler its lookup of the running thread's guard page (so this module
//!    does not import the scheduler).
//! 2. The scheduler records the running mttl thread in a thread-local before
//!    each resume; the thread's slot holds its guard-page range and name.
//! 3. On a fault, the handler reads the faulting address (`si_addr`). If it
//!    lies in the guard page of the mttl thread running on this OS thread, it
//!    writes `mttl: thread 'NAME' overflowed its SIZE stack; raise
//!    MTTL_STACK_SIZE ...` to stderr with `write(2)` and calls `abort()`.
//! 4. Any other fault goes to the previous handler (Rust's own handler
//!    reports main-thread overflows), or, if there was none, the default
//!    action is restored and the faulting instruction re-runs and kills the
//!    process as it would have without us.
//!
//! Invariants: the handler only reads thread-locals without destructors,
//! `Cell`s of the current slot and atomics; it never allocates or locks. The
//! message is formatted into a fixed buffer on the signal stack.

use std::fmt::{self, Write as _};
use std::io;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use super::stack::{fmt_size, page_size, STACK_SIZE_VAR};

/// Size of the alternate signal stack we create where there is none.
const ALT_STACK_SIZE: usize = 64 * 1024;

/// Configured stack size, for the message.
static STACK_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The handler we displaced for one signal: `sa_sigaction` and `sa_flags`.
struct Previous {
    action: AtomicUsize,
    flags: AtomicUsize,
}

static PREVIOUS_SEGV: Previous = Previous {
    action: AtomicUsize::new(libc::SIG_DFL),
    flags: AtomicUsize::new(0),
};
static PREVIOUS_BUS: Previous = Previous {
    action: AtomicUsize::new(libc::SIG_DFL),
    flags: AtomicUsize::new(0),
};

fn previous(signal: libc::c_int) -> &'static Previous {
    if signal == libc::SIGBUS {
        &PREVIOUS_BUS
    } else {
        &PREVIOUS_SEGV
    }
}

/// The scheduler's lookup for step 3: the name of the mttl thread running
/// on this OS thread if `address` is in its guard page. Reading it is an
/// atomic load, which a signal handler may do.
static OVERFLOWED_THREAD: OnceLock<fn(usize) -> Option<&'static str>> = OnceLock::new();

/// Step 1 (process part): installs the handler for `SIGSEGV` and `SIGBUS`
/// unless it is already the installed one; `overflowed_thread` is the
/// scheduler's lookup for step 3.
pub(super) fn install_handler(
    stack_bytes: usize,
    overflowed_thread: fn(usize) -> Option<&'static str>,
) -> io::Result<()> {
    let _ = OVERFLOWED_THREAD.set(overflowed_thread);
    static INSTALL: Mutex<()> = Mutex::new(());
    STACK_BYTES.store(stack_bytes, Ordering::Relaxed);
    let _serialised = INSTALL.lock().unwrap_or_else(|poison| poison.into_inner());
    for signal in [libc::SIGSEGV, libc::SIGBUS] {
        let mut current = MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: querying only (null new action); `current` is a valid
        // out-pointer to a sigaction.
        if unsafe { libc::sigaction(signal, ptr::null(), current.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: sigaction succeeded and filled `current` (zeroed anyway).
        let current = unsafe { current.assume_init() };
        if current.sa_sigaction == on_fault as *const () as usize {
            continue;
        }
        let slot = previous(signal);
        // Flags first: the handler reads the action first, then the flags.
        slot.flags
            .store(current.sa_flags as usize, Ordering::SeqCst);
        slot.action.store(current.sa_sigaction, Ordering::SeqCst);

        let mut action = MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: zeroed sigaction is a valid starting value; we fill the
        // handler, flags and an empty mask before installing it.
        let action = unsafe {
            let raw = action.as_mut_ptr();
            (*raw).sa_sigaction = on_fault as *const () as usize;
            (*raw).sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut (*raw).sa_mask);
            action.assume_init()
        };
        // SAFETY: `action` is fully initialised; `on_fault` has the
        // SA_SIGINFO signature and is async-signal-safe (see module docs).
        if unsafe { libc::sigaction(signal, &action, ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// An alternate signal stack this module created for one OS thread.
#[derive(Debug)]
pub(super) struct AltStack {
    mapping: *mut libc::c_void,
    mapping_len: usize,
}

/// Step 1 (OS-thread part): gives this OS thread an alternate signal stack
/// if it has none. Returns the stack when one was created (keep it alive
/// for as long as the OS thread runs mttl threads).
pub(super) fn ensure_alt_stack() -> io::Result<Option<AltStack>> {
    let mut current = MaybeUninit::<libc::stack_t>::zeroed();
    // SAFETY: querying only (null new stack); `current` is a valid out-pointer.
    if unsafe { libc::sigaltstack(ptr::null(), current.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sigaltstack succeeded and filled `current`.
    let current = unsafe { current.assume_init() };
    if current.ss_flags & libc::SS_DISABLE == 0 {
        return Ok(None);
    }
    let page = page_size();
    let mapping_len = ALT_STACK_SIZE + page;
    // SAFETY: anonymous private mapping with no address hint: no existing
    // memory is affected.
    let mapping = unsafe {
        libc::mmap(
            ptr::null_mut(),
            mapping_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mapping == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let alt = AltStack {
        mapping,
        mapping_len,
    };
    // SAFETY: the first page lies inside the mapping we just made; making it
    // inaccessible turns an overflow of the signal stack into a fault.
    if unsafe { libc::mprotect(mapping, page, libc::PROT_NONE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let stack = libc::stack_t {
        // SAFETY: `page` < `mapping_len`, so the pointer stays in the mapping.
        ss_sp: unsafe { mapping.cast::<u8>().add(page).cast() },
        ss_flags: 0,
        ss_size: ALT_STACK_SIZE,
    };
    // SAFETY: `stack` describes writable memory owned by `alt`, which
    // disables it again before unmapping (see Drop).
    if unsafe { libc::sigaltstack(&stack, ptr::null_mut()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(alt))
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let signal_stack = self.mapping.cast::<u8>() as usize + page_size();
        let mut current = MaybeUninit::<libc::stack_t>::zeroed();
        // SAFETY: querying only; valid out-pointer.
        if unsafe { libc::sigaltstack(ptr::null(), current.as_mut_ptr()) } != 0 {
            // Cannot tell whether ours is still in use: leak it.
            return;
        }
        // SAFETY: sigaltstack succeeded and filled `current`.
        let current = unsafe { current.assume_init() };
        let ours_active = current.ss_sp.cast::<u8>() as usize == signal_stack
            && current.ss_flags & libc::SS_DISABLE == 0;
        if ours_active {
            let disable = libc::stack_t {
                ss_sp: ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disables this OS thread's signal stack, which is ours;
            // no handler runs on it now (we are in ordinary code).
            if unsafe { libc::sigaltstack(&disable, ptr::null_mut()) } != 0 {
                return;
            }
        }
        // SAFETY: the mapping is ours and is not the active signal stack.
        unsafe { libc::munmap(self.mapping, self.mapping_len) };
    }
}

/// A fixed buffer that `fmt::Write` can fill without allocating.
struct SignalMessage {
    bytes: [u8; 512],
    len: usize,
}

impl fmt::Write for SignalMessage {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let room = self.bytes.len() - self.len;
        let take = text.len().min(room);
        self.bytes[self.len..self.len + take].copy_from_slice(&text.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// Formats the overflow message for thread `name` with `stack_bytes` stacks.
fn overflow_message(name: &str, stack_bytes: usize) -> SignalMessage {
    let mut message = SignalMessage {
        bytes: [0; 512],
        len: 0,
    };
    let suggestion = stack_bytes.saturating_mul(2) >> 10;
    let _ = write!(message, "mttl: thread '{name}' overflowed its ");
    let _ = fmt_size(stack_bytes, &mut message);
    let _ = writeln!(
        message,
        " stack; raise {STACK_SIZE_VAR} (e.g. {STACK_SIZE_VAR}={suggestion}K)"
    );
    message
}

/// Steps 3 and 4.
extern "C" fn on_fault(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    context: *mut libc::c_void,
) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // si_addr is meaningful for SIGSEGV and SIGBUS.
    let address = unsafe { (*info).si_addr() } as usize;
    let name = OVERFLOWED_THREAD.get().and_then(|lookup| lookup(address));
    if let Some(name) = name {
        let message = overflow_message(name, STACK_BYTES.load(Ordering::Relaxed));
        let mut written = 0;
        while written < message.len {
            // SAFETY: write(2) is async-signal-safe; the range is inside
            // `message.bytes`.
            let n = unsafe {
                libc::write(
                    libc::STDERR_FILENO,
                    message.bytes[written..].as_ptr().cast(),
                    message.len - written,
                )
            };
            if n <= 0 {
                break;
            }
            written += n as usize;
        }
        // SAFETY: abort() is async-signal-safe and does not return.
        unsafe { libc::abort() };
    }
    chain(signal, info, context);
}

/// Step 4: hands a fault that is not ours to whoever handled it before us.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let slot = previous(signal);
    let action = slot.action.load(Ordering::SeqCst);
    let flags = slot.flags.load(Ordering::SeqCst) as libc::c_int;
    if action == libc::SIG_DFL || action == libc::SIG_IGN {
        let mut default = MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: a zeroed sigaction with SIG_DFL (0) and an empty mask is
        // valid; sigaction(2) is async-signal-safe. Returning re-runs the
        // faulting instruction, which now gets the default action.
        unsafe {
            let raw = default.as_mut_ptr();
            (*raw).sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut (*raw).sa_mask);
            libc::sigaction(signal, raw, ptr::null_mut());
        }
    } else if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so its
        // address is a function with this signature.
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(action) };
        handler(signal, info, context);
    } else {
        // SAFETY: installed without SA_SIGINFO, so it is a plain handler.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(action) };
        handler(signal);
    }
}

#[cfg(test)]
mod tests {
    use super::overflow_message;

    #[test]
    fn message_names_thread_size_and_variable() {
        let message = overflow_message("handler:invoke", 256 * 1024);
        let text = std::str::from_utf8(&message.bytes[..message.len]).unwrap();
        assert_eq!(
            text,
            "mttl: thread 'handler:invoke' overflowed its 256 KiB stack; \
             raise MTTL_STACK_SIZE (e.g. MTTL_STACK_SIZE=512K)\n"
        );
    }

    #[test]
    fn message_truncates_long_names_without_panicking() {
        let name = "x".repeat(2000);
        let message = overflow_message(&name, 1 << 20);
        assert_eq!(message.len, message.bytes.len());
    }
}
