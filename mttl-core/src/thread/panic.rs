//! Panics inside mttl threads: capture and report.
//!
//! Owns [`ThreadPanic`] and the process-wide panic hook wrapper.
//!
//! How a panic is captured:
//! 1. The first scheduler in the process installs a hook that wraps the hook
//!    in place at that time (the default one, or the test harness's), and
//!    hands it its `current`, which names the running mttl thread.
//! 2. When a panic starts on an OS thread that is running an mttl thread, the
//!    hook copies the panic's source location into a thread-local
//!    `LAST_SITE`, tagged with the mttl thread's id, with a backtrace when
//!    `RUST_BACKTRACE` asks for one, and prints nothing: whoever the panic
//!    reaches decides whether it is reported (a remote function's panic
//!    returned to a `try_invoke` caller is not; one that ends the job is
//!    printed once, with the rank, by the runtime). A panic outside an mttl
//!    thread goes to the wrapped hook as usual.
//! 3. The panic unwinds to the `catch_unwind` at the root of the thread's
//!    coroutine. The root turns the payload into a message, takes the
//!    location from `LAST_SITE` if it carries the same id (a payload raised
//!    by `resume_unwind` passes no hook and has no location), and queues a
//!    [`ThreadPanic`] on the scheduler for [`take_panics`](super::take_panics).
//! 4. The coroutine then returns normally, so its stack goes back to the pool
//!    like any finished thread's.
//!
//! Forced unwinds (see [`unwind_all`](super::unwind_all)) are also caught at
//! the root but are not reported: they are not panics of the program.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Once, OnceLock};

use super::id::ThreadId;

/// A panic that ended an mttl thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPanic {
    /// The thread that panicked.
    pub thread: ThreadId,
    /// The name it was spawned with.
    pub name: &'static str,
    /// The panic message (`"Box<dyn Any>"` for a payload that is not a string).
    pub message: String,
    /// Where the panic was raised, when the panic hook saw it.
    pub location: Option<PanicLocation>,
    /// The stack where it was raised, when `RUST_BACKTRACE` asked for one.
    pub backtrace: Option<String>,
}

/// A source location of a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicLocation {
    /// Source file, as the compiler named it.
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for PanicLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

impl fmt::Display for ThreadPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread '{}' panicked", self.name)?;
        if let Some(location) = &self.location {
            write!(f, " at {location}")?;
        }
        write!(f, ": {}", self.message)
    }
}

thread_local! {
    /// Location of the latest panic seen by the hook in an mttl thread on
    /// this OS thread, with that thread's id.
    static LAST_SITE: RefCell<Option<(ThreadId, Site)>> = const { RefCell::new(None) };
}

/// Where a panic was raised: its location and, if asked for, its stack.
type Site = (PanicLocation, Option<String>);

/// The scheduler's `current`: the mttl thread running on this OS thread.
static CURRENT: OnceLock<fn() -> Option<ThreadId>> = OnceLock::new();

/// Installs the hook wrapper once per process (see the module docs, step
/// 1); `current` tells it which mttl thread runs.
pub(super) fn install_hook(current: fn() -> Option<ThreadId>) {
    let _ = CURRENT.set(current);
    static INSTALL: Once = Once::new();
    if std::thread::panicking() {
        // The hook cannot be changed while panicking; a later spawn will do it.
        return;
    }
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !note_site(info) {
                previous(info);
            }
        }));
    });
}

/// Step 2: remembers where the current mttl thread panicked. Returns
/// whether the panic is an mttl thread's (and so is not printed here).
fn note_site(info: &PanicHookInfo<'_>) -> bool {
    let current = CURRENT.get().and_then(|current| current());
    let (Some(id), Some(location)) = (current, info.location()) else {
        return false;
    };
    let backtrace = std::backtrace::Backtrace::capture();
    let backtrace = (backtrace.status() == std::backtrace::BacktraceStatus::Captured)
        .then(|| from_the_panic(&backtrace.to_string()));
    let site = (
        PanicLocation {
            file: location.file().to_owned(),
            line: location.line(),
            column: location.column(),
        },
        backtrace,
    );
    // `try_with`/`try_borrow_mut`: a panic during TLS teardown or inside this
    // very cell's use must not turn into a second panic.
    let _ = LAST_SITE.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            *slot = Some((id, site));
        }
    });
    true
}

/// A backtrace's text without its first frames, those of the hook and the
/// panic machinery: it starts at the frame that panicked.
fn from_the_panic(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let is_frame = |line: &str| {
        let t = line.trim_start();
        t.split_once(": ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let machinery = ["core::panicking::", "std::panicking::", "rust_begin_unwind"];
    let is_machinery = |line: &str| machinery.iter().any(|m| line.contains(m));
    // The first run of machinery frames from the top, and the frame after it.
    let Some(first) = lines.iter().position(|l| is_frame(l) && is_machinery(l)) else {
        return text.to_owned();
    };
    let start = lines[first..]
        .iter()
        .position(|l| is_frame(l) && !is_machinery(l))
        .map_or(lines.len(), |i| first + i);
    lines[start..].join("\n")
}

/// Step 3: builds the report for a payload caught at a thread's root.
pub(super) fn report(
    thread: ThreadId,
    name: &'static str,
    payload: Box<dyn Any + Send>,
) -> ThreadPanic {
    let message = if let Some(text) = payload.downcast_ref::<&'static str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "Box<dyn Any>".to_owned()
    };
    // A payload whose destructor panics must not escape the coroutine root.
    if let Err(nested) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(nested);
    }
    let (location, backtrace) = LAST_SITE
        .try_with(|cell| cell.try_borrow_mut().ok().and_then(|mut slot| slot.take()))
        .ok()
        .flatten()
        .and_then(|(id, site)| (id == thread).then_some(site))
        .map_or((None, None), |(location, backtrace)| {
            (Some(location), backtrace)
        });
    ThreadPanic {
        thread,
        name,
        message,
        location,
        backtrace,
    }
}

/// Drops a payload caught during a forced unwind.
pub(super) fn discard(payload: Box<dyn Any + Send>) {
    if let Err(nested) = panic::catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(nested);
    }
}

#[cfg(test)]
mod tests {
    use super::from_the_panic;

    #[test]
    fn a_backtrace_starts_at_the_frame_that_panicked() {
        let text = "   0: mttl_core::thread::panic::note_site\n             at panic.rs:1:1\n   \
                    1: std::panicking::panic_with_hook\n   \
                    2: core::panicking::panic_fmt\n             at panicking.rs:80:14\n   \
                    3: app::task\n             at src/main.rs:9:5\n   \
                    4: mttl_core::thread::sched::thread_root";
        assert_eq!(
            from_the_panic(text),
            "   3: app::task\n             at src/main.rs:9:5\n   4: mttl_core::thread::sched::thread_root"
        );
        assert_eq!(from_the_panic("no frames"), "no frames");
    }
}
