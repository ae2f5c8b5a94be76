//! Test support: runs a test's body on a thread of its own and fails the
//! test, naming it, if the body is still running at its deadline.
//!
//! The frame reader and the links loop until a source would block; a
//! reader that took an error for "nothing yet", or a count that never
//! reaches its end, would spin there for ever. Run through [`within`], such
//! a test fails with a message instead of hanging the suite (the stuck
//! thread is left behind; the test binary exits without it).

use std::sync::mpsc;
use std::time::Duration;

/// Runs `body` on a new thread; returns what it returns, or panics with
/// `what` if it runs longer than `limit` (and with the body's own message
/// if it panics).
pub(super) fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    body: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::Builder::new()
        .name(what.to_owned())
        .spawn(move || {
            let _ = tx.send(body());
        })
        .expect("a thread for the test body");
    match rx.recv_timeout(limit) {
        Ok(value) => {
            let _ = thread.join();
            value
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still running after {limit:?} (stuck in a loop?)")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the body ended without sending its result"),
        },
    }
}
