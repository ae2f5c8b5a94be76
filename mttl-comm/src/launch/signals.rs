//! Signals sent to the launcher, seen by every job it is running.
//!
//! On the first job, handlers for SIGINT, SIGTERM and SIGHUP are installed
//! once for the whole process (through `signal-hook`, which runs any handler
//! installed before ours first). What a handler does depends on the
//! signal's disposition found at that moment:
//!
//! - ignored (e.g. SIGINT for a command started with `&` by a script): no
//!   handler is installed and the signal stays ignored, as shells expect;
//! - otherwise, while at least one job is running, the handler counts the
//!   signal and remembers its number; each job's supervisor polls the count
//!   ([`SignalWatch::poll`]) and stops its ranks;
//! - while no job is running, a signal whose disposition was the default
//!   gets its default action (terminating the process), so a program that
//!   launched a job and carries on behaves as if no handler had ever been
//!   installed; one that had a handler of its own keeps just that.
//!
//! The handler only touches atomics.

use std::io;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::OnceLock;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// Jobs currently running in this process.
static ACTIVE_JOBS: AtomicUsize = AtomicUsize::new(0);
/// Signals received while a job was running.
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
/// The last signal received while a job was running.
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The outcome of installing the handlers (once per process).
static INSTALLED: OnceLock<Result<(), (io::ErrorKind, String)>> = OnceLock::new();

/// The signals a launcher forwards to its ranks.
const FORWARDED: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// What a signal did before the launcher installed its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Disposition {
    Default,
    Ignored,
    Handled,
}

fn disposition(signal: i32) -> io::Result<Disposition> {
    // SAFETY: sigaction is a plain C struct for which all-zero bytes are a
    // valid value.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: a null new action only queries; `old` is a valid, writable
    // sigaction owned by this frame.
    if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match old.sa_sigaction {
        libc::SIG_DFL => Disposition::Default,
        libc::SIG_IGN => Disposition::Ignored,
        _ => Disposition::Handled,
    })
}

fn install() -> io::Result<()> {
    let outcome = INSTALLED.get_or_init(|| {
        for signal in FORWARDED {
            let before = disposition(signal).map_err(|e| (e.kind(), e.to_string()))?;
            if before == Disposition::Ignored {
                continue;
            }
            let terminate_when_idle = before == Disposition::Default;
            let action = move || {
                if ACTIVE_JOBS.load(Ordering::SeqCst) > 0 {
                    LAST_SIGNAL.store(signal, Ordering::SeqCst);
                    RECEIVED.fetch_add(1, Ordering::SeqCst);
                } else if terminate_when_idle {
                    // Nothing to forward to: act as if unhandled. An error
                    // here means an unknown signal, which FORWARDED excludes.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                }
            };
            // SAFETY: the action runs inside a signal handler; it only loads
            // and stores lock-free atomics and calls
            // `emulate_default_handler`, which signal-hook documents as
            // async-signal-safe. It neither allocates nor takes locks.
            let registered = unsafe { signal_hook::low_level::register(signal, action) };
            if let Err(e) = registered {
                return Err((e.kind(), e.to_string()));
            }
        }
        Ok(())
    });
    outcome
        .clone()
        .map_err(|(kind, msg)| io::Error::new(kind, msg))
}

/// One job's view of the signals sent to the launcher during its life.
#[derive(Debug)]
pub(crate) struct SignalWatch {
    seen: usize,
}

impl SignalWatch {
    /// Installs the handlers if needed and starts watching.
    pub(crate) fn start() -> io::Result<SignalWatch> {
        install()?;
        // Take the count before registering as active: a signal in between
        // then either terminates the process (no job was active) or is seen.
        let seen = RECEIVED.load(Ordering::SeqCst);
        ACTIVE_JOBS.fetch_add(1, Ordering::SeqCst);
        Ok(SignalWatch { seen })
    }

    /// The signal received since the last call, if any.
    pub(crate) fn poll(&mut self) -> Option<i32> {
        let now = RECEIVED.load(Ordering::SeqCst);
        if now == self.seen {
            return None;
        }
        self.seen = now;
        Some(LAST_SIGNAL.load(Ordering::SeqCst))
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        ACTIVE_JOBS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A signal's name, e.g. `SIGKILL`, or `signal N` if unknown.
pub(crate) fn signal_name(signal: i32) -> String {
    match signal_hook::low_level::signal_name(signal) {
        Some(name) => name.to_owned(),
        None => format!("signal {signal}"),
    }
}
