//! Signals sent to the launcher, seen by every job it is running.
//!
//! On the first job, handlers for SIGINT, SIGTERM and SIGHUP are installed
//! once for the whole process (through `signal-hook`, which chains to any
//! handler installed before). The handler only touches atomics:
//!
//! - while at least one job is running, it counts the signal and remembers
//!   its number; each job's supervisor polls the count ([`SignalWatch::poll`])
//!   and stops its ranks;
//! - while no job is running, it gives the signal its default action
//!   (terminating the process), so a program that launched a job and carries
//!   on behaves afterwards as if no handler had ever been installed.

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

fn install() -> io::Result<()> {
    let outcome = INSTALLED.get_or_init(|| {
        for signal in FORWARDED {
            let action = move || {
                if ACTIVE_JOBS.load(Ordering::SeqCst) == 0 {
                    // Nothing to forward to: act as if unhandled. An error
                    // here means an unknown signal, which FORWARDED excludes.
                    let _ = signal_hook::low_level::emulate_default_handler(signal);
                } else {
                    LAST_SIGNAL.store(signal, Ordering::SeqCst);
                    RECEIVED.fetch_add(1, Ordering::SeqCst);
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
