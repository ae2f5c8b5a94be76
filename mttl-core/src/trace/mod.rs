//! Tracing: what this rank did and when, recorded into a bounded buffer
//! and written to one file per rank (`MTTL_TRACE=DIR`).
//!
//! This module sits in the base layer, beside `thread`: the context calls
//! it around every comm primitive, and the services (`invoke`, `global`,
//! `sync`, `coll`) call it for their own events; it imports nothing of
//! them. Its state is this rank's [`Recorder`], in a thread-local.
//!
//! The cost when tracing is off is one load of a thread-local flag and a
//! branch per site ([`on`]): no clock read, no allocation, no call. Sites
//! with a beginning and an end read the flag once and take the clock twice
//! only when it is set.
//!
//! Files: `format` (the bytes, shared with the `mttl-trace` tools),
//! `recorder` (the buffer and its steps), `policy` (when buffers are
//! written, and the seam after each collective), `sink` (the file),
//! `config` (the environment). The format is described for other readers
//! in `docs/trace-format.md`.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

mod config;
pub mod format;
mod policy;
mod recorder;
mod sink;

pub use config::{
    parse_bytes, BUFFER_VAR, DEFAULT_BUFFER, FLUSH_VAR, LEVEL_VAR, MIN_BUFFER, RESYNC_VAR,
    THRESHOLD_VAR, TRACE_VAR,
};
pub use format::Kind;
pub use policy::Policy;
pub use sink::file_name;

pub(crate) use policy::{after_collective, Due};

use config::Config;
use format::Event;
use recorder::Recorder;
use sink::FileSink;

thread_local! {
    /// Whether this rank records: the one flag every site tests.
    static ON: Cell<bool> = const { Cell::new(false) };
    /// Whether this rank records thread events too
    /// (`MTTL_TRACE_LEVEL=threads`); never set without [`ON`].
    static THREADS: Cell<bool> = const { Cell::new(false) };
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
    /// Whether a suspension runs on this rank (its own collectives then
    /// neither record enter and exit nor start another).
    static SUSPENDED: Cell<bool> = const { Cell::new(false) };
}

/// Whether a suspension runs on this rank.
pub(crate) fn suspended() -> bool {
    SUSPENDED.with(Cell::get)
}

/// Marks a suspension running until the guard is dropped.
pub(crate) fn suspend() -> Suspending {
    SUSPENDED.with(|s| s.set(true));
    Suspending(PhantomData)
}

/// The guard of [`suspend`].
#[derive(Debug)]
pub(crate) struct Suspending(PhantomData<*const ()>);

impl Drop for Suspending {
    fn drop(&mut self) {
        SUSPENDED.with(|s| s.set(false));
    }
}

/// Writes this rank's buffer now, in a suspension every rank makes
/// together, and records the write. `false` when tracing stopped (a write
/// failed).
pub(crate) fn write_together() -> bool {
    let mut ok = false;
    with_recorder(|rec| ok = rec.write_now(format::FlushCause::Suspension));
    ok
}

/// What a suspension records at its end on every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SuspensionRecord {
    /// The protocol's t: when the collective returned here.
    pub(crate) t: u64,
    /// The suspension time asked of every rank.
    pub(crate) z: u64,
    /// w, m and d of the protocol (0 under `static`).
    pub(crate) w: u64,
    pub(crate) m: u64,
    pub(crate) d: u64,
}

/// Records a suspension that ends now.
pub(crate) fn suspension(s: &SuspensionRecord) {
    let end = now();
    with_recorder(|rec| {
        rec.push(&Event {
            kind: Kind::Suspension,
            peer: None,
            a: s.z,
            b: s.w,
            begin: s.t,
            end,
        });
        rec.push(&Event {
            kind: Kind::SuspensionClock,
            peer: None,
            a: s.m,
            b: s.d,
            begin: end,
            end,
        });
    });
}

/// Records (on rank 0) `rank`'s clock offset to rank 0's and its error
/// bound, measured just now.
pub(crate) fn clock_offset(rank: usize, offset: i64, error: u64) {
    event(
        Kind::ClockOffset,
        Some(rank),
        format::zigzag(offset),
        error,
        None,
    );
}

/// Whether this rank records events.
#[inline(always)]
pub(crate) fn on() -> bool {
    ON.with(Cell::get)
}

/// Writes `line` to stderr in one piece, so that launchers that tag each
/// piece of output with its rank (`mpirun`) keep it whole. (The context's
/// `report_line` does the same; this layer sits below it.)
fn say(line: &str) {
    use std::io::Write as _;
    let text = format!("{line}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Stops recording (a write failed); the recorder stays for [`finish`].
fn stop_recording() {
    ON.with(|on| on.set(false));
    THREADS.with(|t| t.set(false));
}

/// Whether this rank records thread events (`MTTL_TRACE_LEVEL=threads`):
/// the one flag the scheduler tests at a spawn, a switch, a block and an
/// exit.
#[inline(always)]
pub(crate) fn threads_on() -> bool {
    THREADS.with(Cell::get)
}

/// Records thread `id`'s spawn with its name. Call only when
/// [`threads_on`].
pub(crate) fn thread_spawn(name: &'static str, id: u64) {
    named(Kind::ThreadSpawn, None, name, id, None);
}

/// Records the scheduler's switch to thread `id` ([`format::LOOP_THREAD`]
/// for its own loop). Call only when [`threads_on`].
pub(crate) fn thread_run(id: u64) {
    event(Kind::ThreadRun, None, 0, id, None);
}

/// Records that thread `id` blocks, waiting for `what`. Call only when
/// [`threads_on`].
pub(crate) fn thread_block(what: &'static str, id: u64) {
    named(Kind::ThreadBlock, None, what, id, None);
}

/// Records that thread `id` finished. Call only when [`threads_on`].
pub(crate) fn thread_exit(id: u64) {
    event(Kind::ThreadExit, None, 0, id, None);
}

/// The monotonic clock, in ns (CLOCK_MONOTONIC, the clock of every rank on
/// one host).
#[inline]
pub(crate) fn now() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on
    // every Linux and macOS, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The tracing settings every rank must share (the start-up check
/// compares them): tracing on or off and how buffers are flushed change
/// the messages that follow each collective. The directory, buffer and
/// threshold may differ.
pub(crate) fn agreed_settings() -> String {
    match config::Config::from_env() {
        Ok(None) => format!("{TRACE_VAR} unset"),
        Ok(Some(c)) => format!(
            "{TRACE_VAR} set with {FLUSH_VAR} {:?} and {RESYNC_VAR}={}",
            c.policy,
            if c.resync_each { "each" } else { "start" }
        ),
        // Reported with the variable and value when tracing starts.
        Err(_) => format!("{TRACE_VAR} set, with a bad setting"),
    }
}

/// Starts tracing on this rank if `MTTL_TRACE` asks for it: checks the
/// settings, creates the directory and this rank's file, writes its header.
/// An error (a bad setting, an unwritable directory) is a sentence for the
/// user; the job should stop.
pub(crate) fn start(job_id: u64, rank: u32, size: u32) -> Result<(), String> {
    let Some(config) = Config::from_env()? else {
        return Ok(());
    };
    let sink = FileSink::create(&config.dir, rank)?;
    let header = recorder::header(job_id, rank, size, config.buffer, config.policy);
    let mut rec = Recorder::new(Box::new(sink), header, config.buffer, config.policy)?;
    rec.threshold = config.threshold;
    rec.resync_each = config.resync_each;
    install(rec, config.threads);
    Ok(())
}

fn install(recorder: Recorder, threads: bool) {
    RECORDER.with(|r| *r.borrow_mut() = Some(recorder));
    ON.with(|on| on.set(true));
    THREADS.with(|t| t.set(threads));
}

/// Ends tracing on this rank: writes what is left and the end block, and
/// says on stderr what was lost, if anything.
pub(crate) fn finish() {
    ON.with(|on| on.set(false));
    THREADS.with(|t| t.set(false));
    let Some(mut rec) = RECORDER.with(|r| r.borrow_mut().take()) else {
        return;
    };
    let totals = rec.finish();
    if rec.fallbacks() > 0 && !rec.failed() {
        say(&format!(
            "mttl: rank {}: the trace buffer filled {} times with no collective in sight; this \
             rank wrote it alone each time (recorded as fallback flushes), which may have \
             delayed the others (call a collective more often or raise {BUFFER_VAR})",
            rec.rank(),
            rec.fallbacks()
        ));
    }
    if totals.dropped > 0 && !rec.failed() {
        say(&format!(
            "mttl: rank {}: {} trace events were dropped: the buffer was full and \
             MTTL_TRACE_FLUSH=memory never writes before the end (raise {BUFFER_VAR} or use local)",
            rec.rank(),
            totals.dropped
        ));
    }
}

#[inline]
fn with_recorder(f: impl FnOnce(&mut Recorder)) {
    RECORDER.with(|r| {
        if let Ok(mut g) = r.try_borrow_mut() {
            if let Some(rec) = g.as_mut() {
                f(rec);
            }
        }
    });
}

/// Records an event that began at `begin` and ends now, or an instant
/// (`begin` `None`). Call only when [`on`].
#[inline]
pub(crate) fn event(kind: Kind, peer: Option<usize>, a: u64, b: u64, begin: Option<u64>) {
    let end = now();
    let begin = begin.unwrap_or(end);
    with_recorder(|rec| {
        rec.push(&Event {
            kind,
            peer: peer.map(|p| p as u32),
            a,
            b,
            begin,
            end,
        })
    });
}

/// [`event`] whose first argument is a name.
#[inline]
pub(crate) fn named(
    kind: Kind,
    peer: Option<usize>,
    name: &'static str,
    b: u64,
    begin: Option<u64>,
) {
    let end = now();
    let begin = begin.unwrap_or(end);
    with_recorder(|rec| {
        if let Some(a) = rec.name(name) {
            rec.push(&Event {
                kind,
                peer: peer.map(|p| p as u32),
                a,
                b,
                begin,
                end,
            });
        }
    });
}

/// Runs `$call`, a comm primitive to or from `$peer`, recording it as an
/// event of `$kind` (with the message's tag and bytes) when tracing. The
/// flag is tested once; when off, `$call` runs alone.
macro_rules! traced {
    ($kind:expr, $peer:expr, $tag:expr, $bytes:expr, $call:expr) => {
        if $crate::trace::on() {
            let begin = $crate::trace::now();
            let r = $call;
            $crate::trace::event(
                $kind,
                Some($peer),
                u64::from($tag),
                $bytes as u64,
                Some(begin),
            );
            r
        } else {
            $call
        }
    };
}
pub(crate) use traced;

/// Records a receive that returned `got` and began at `begin` (`None` when
/// tracing is off): its source, tag and bytes.
#[inline]
pub(crate) fn received(kind: Kind, begin: Option<u64>, source: usize, tag: u32, len: usize) {
    if begin.is_some() {
        event(kind, Some(source), u64::from(tag), len as u64, begin);
    }
}

/// The clock if tracing, for a site whose end decides what to record.
#[inline(always)]
pub(crate) fn begin() -> Option<u64> {
    on().then(now)
}

/// A user region, from [`region`] to the guard's drop.
#[derive(Debug)]
#[must_use = "the region ends when this guard is dropped"]
pub struct Region {
    name: Option<&'static str>,
    /// A region belongs to the thread and rank that opened it.
    _not_send: PhantomData<*const ()>,
}

/// Opens a region named `name` in this rank's trace, closed when the guard
/// is dropped; `mttl-trace stats` sums the time in each. Costs nothing but
/// a test of a flag when tracing is off.
///
/// ```
/// let code = mttl_core::start(|| {
///     let _solve = mttl_core::trace::region("solve");
///     let x: u64 = (1..=10).sum();
///     assert_eq!(x, 55);
/// });
/// assert_eq!(code, 0);
/// ```
#[inline]
pub fn region(name: &'static str) -> Region {
    let name = on().then(|| {
        named(Kind::RegionBegin, None, name, 0, None);
        name
    });
    Region {
        name,
        _not_send: PhantomData,
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let (Some(name), true) = (self.name, on()) {
            named(Kind::RegionEnd, None, name, 0, None);
        }
    }
}

/// A wait by polling, from [`waiting`] to the guard's drop.
#[derive(Debug)]
#[must_use = "the wait ends when this guard is dropped"]
pub struct Waiting {
    /// What is waited for, and when the wait began (`None` untraced).
    what: &'static str,
    begin: Option<u64>,
    /// A wait belongs to the thread and rank that began it.
    _not_send: PhantomData<*const ()>,
}

/// Marks a wait by polling (a thread yielding until a flag in memory
/// changes), until the guard is dropped: its time is waiting, not
/// computation, which the time-independent export (`mttl-trace export
/// --ti`) needs to know, since a poll that finds nothing is not traced.
/// One event per wait; costs nothing but a test of a flag when tracing is
/// off.
///
/// ```
/// let code = mttl_core::start(|| {
///     let ready = std::cell::Cell::new(true);
///     let _w = mttl_core::trace::waiting("landing");
///     while !ready.get() {
///         mttl_core::yield_now();
///     }
/// });
/// assert_eq!(code, 0);
/// ```
#[inline]
pub fn waiting(what: &'static str) -> Waiting {
    Waiting {
        what,
        begin: begin(),
        _not_send: PhantomData,
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let (Some(begin), true) = (self.begin, on()) {
            named(Kind::Wait, None, self.what, 0, Some(begin));
        }
    }
}

#[cfg(test)]
mod tests;
