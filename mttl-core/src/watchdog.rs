//! The deadlock watchdog: a job in which no thread on any rank can run and
//! no message is in flight will never move again; after `MTTL_WATCHDOG`
//! seconds of that (default [`DEFAULT_LIMIT`], `0` turns it off) every rank
//! prints what each of its threads waits for and the job ends with
//! [`WATCHDOG_CODE`].
//!
//! As a service ([`Deadlocks`]) it owns the `WATCH`, `WATCH_STATE` and
//! `WATCH_FIRE` messages and this rank's [`Watchdog`] state; the router
//! reports progress ([`progressed`]) and idleness ([`idle`]).
//!
//! # Protocol
//!
//! Each rank counts its *progress*: threads run and messages handled,
//! the watchdog's own messages left out. Each time its loop finds nothing
//! to do (no ready thread, no message within the idle tick) it notes when
//! the count last changed: that is how long it has been *still*.
//!
//! 1. Rank 0, still for the limit and with no round under way, starts a
//!    round: it sends `WATCH(round)` to every other rank.
//! 2. Each rank answers `WATCH_STATE(round, still ms, messages sent,
//!    messages received)`, counting every message but the watchdog's.
//! 3. When every answer is in, rank 0 decides. The job is deadlocked when
//!    every rank has been still for the limit, rank 0 has not moved since
//!    the round began, and as many messages were received as sent (none is
//!    in flight). The counts are consistent although taken at different
//!    times: a rank still for the limit sent and received nothing in that
//!    time, and a round takes far less.
//! 4. Deadlocked: rank 0 sends `WATCH_FIRE(code, still ms)` to every rank;
//!    each prints its blocked threads and exits with the code, but none
//!    before `ABORT_LINGER` (see `context`) has passed since it printed
//!    (rank 0 since it sent): `mpirun` kills the job once one rank exits,
//!    and every rank speaks first. Otherwise rank 0 starts the next round
//!    when it is next idle, at most one round per [`MIN_ROUND_GAP`].
//!
//! A rank that computes without yielding answers late, and then not still,
//! so a long computation is never mistaken for a deadlock; nor is a thread
//! blocked in the operating system (a `sleep`, a file read), which blocks
//! its whole rank in the same way.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use mttl_comm::{Rank, Tag};

use crate::context::{self, report_line, report_waits, Context, Service, Waiting};
use crate::wire::{self, Fields, HeaderBuf};

thread_local! {
    static WATCHDOG: RefCell<Option<Watchdog>> = const { RefCell::new(None) };
    /// Threads run plus messages handled (the watchdog's own excepted),
    /// apart from the rest, as the loop adds to it at every turn.
    static PROGRESS: Cell<u64> = const { Cell::new(0) };
}

/// Counts `n` units of progress (threads run, messages handled).
#[inline]
pub(crate) fn progressed(n: usize) {
    PROGRESS.with(|p| p.set(p.get() + n as u64));
}

fn progress() -> u64 {
    PROGRESS.with(Cell::get)
}

/// Runs `f` on the context with this rank's watchdog beside it; does
/// nothing when the watchdog is absent.
fn with_cx(cx: &mut Context, f: impl FnOnce(&mut WatchCx<'_>)) {
    WATCHDOG.with(|cell| {
        if let Some(watchdog) = cell.borrow_mut().as_mut() {
            f(&mut WatchCx { cx, watchdog });
        }
    });
}

/// The context with this rank's watchdog beside it. Derefs to the context.
struct WatchCx<'a> {
    cx: &'a mut Context,
    watchdog: &'a mut Watchdog,
}

impl Deref for WatchCx<'_> {
    type Target = Context;

    fn deref(&self) -> &Context {
        self.cx
    }
}

impl DerefMut for WatchCx<'_> {
    fn deref_mut(&mut self) -> &mut Context {
        self.cx
    }
}

/// The service of the watchdog: owns `WATCH`, `WATCH_STATE` and
/// `WATCH_FIRE`, which are no progress.
#[derive(Debug)]
pub(crate) struct Deadlocks;

impl Service for Deadlocks {
    const PROGRESS: bool = false;

    fn start(_cx: &Context) -> Result<(), String> {
        let watchdog = Watchdog::from_env()?;
        PROGRESS.with(|p| p.set(0));
        WATCHDOG.with(|cell| *cell.borrow_mut() = Some(watchdog));
        Ok(())
    }

    fn stop() {
        WATCHDOG.with(|cell| *cell.borrow_mut() = None);
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        matches!(kind, wire::WATCH | wire::WATCH_STATE | wire::WATCH_FIRE)
    }

    fn handle(cx: &mut Context, src: Rank, kind: Tag, header: &[u8], _body: Cow<'_, [u8]>) {
        with_cx(cx, |cx| dispatch(cx, src, kind, Fields(header)));
    }
}

/// The variable that sets the limit in seconds (`0`: no watchdog).
pub(crate) const VAR: &str = "MTTL_WATCHDOG";

/// The limit when `MTTL_WATCHDOG` is not set.
pub(crate) const DEFAULT_LIMIT: Duration = Duration::from_secs(30);

/// The exit code of a job the watchdog stopped.
pub(crate) const WATCHDOG_CODE: i32 = 3;

/// The least time between the starts of two rounds.
const MIN_ROUND_GAP: Duration = Duration::from_secs(1);

/// One rank's watchdog state.
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// `None`: turned off.
    limit: Option<Duration>,
    /// [`PROGRESS`] when last looked at, and when it was seen to change.
    seen: u64,
    still_since: Instant,
    /// Messages of the watchdog itself, left out of the counts compared.
    own_sent: u64,
    own_recv: u64,
    /// Rank 0: the round under way and when the last one started.
    round: Option<Round>,
    last_round: u64,
    last_start: Option<Instant>,
}

/// A round on rank 0: the answers so far.
#[derive(Debug)]
struct Round {
    id: u64,
    progress_at_start: u64,
    answers: usize,
    all_still: bool,
    sent: u64,
    recv: u64,
}

impl Watchdog {
    /// Reads `MTTL_WATCHDOG`.
    pub(crate) fn from_env() -> Result<Watchdog, String> {
        let limit = match std::env::var(VAR) {
            Err(_) => Some(DEFAULT_LIMIT),
            Ok(v) => {
                let secs: f64 = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s >= 0.0 && s.is_finite())
                    .ok_or_else(|| {
                        format!("{VAR}={v:?} is not a number of seconds (0 turns the watchdog off)")
                    })?;
                (secs > 0.0).then(|| Duration::from_secs_f64(secs))
            }
        };
        Ok(Watchdog {
            limit,
            seen: progress(),
            still_since: Instant::now(),
            own_sent: 0,
            own_recv: 0,
            round: None,
            last_round: 0,
            last_start: None,
        })
    }

    /// How long this rank has been still, as of now.
    fn still_for(&mut self, now: Instant) -> Duration {
        let progress = progress();
        if progress != self.seen {
            self.seen = progress;
            self.still_since = now;
        }
        now - self.still_since
    }
}

/// Messages sent and received by this rank, the watchdog's own left out.
fn counts(cx: &WatchCx<'_>) -> (u64, u64) {
    let w = &cx.watchdog;
    (cx.stats.messages() - w.own_sent, cx.stats.recv - w.own_recv)
}

/// Called when the loop found nothing to do: rank 0 may start a round.
pub(crate) fn idle() {
    context::with(|cx| with_cx(cx, start_round));
}

/// Step 1 on rank 0, if it has been still for the limit.
fn start_round(cx: &mut WatchCx<'_>) {
    let now = Instant::now();
    let still = cx.watchdog.still_for(now);
    let w = &cx.watchdog;
    let Some(limit) = w.limit else { return };
    if cx.rank != 0
        || w.round.is_some()
        || still < limit
        || w.last_start.is_some_and(|t| now - t < MIN_ROUND_GAP)
    {
        return;
    }
    let (sent, recv) = counts(cx);
    let id = w.last_round + 1;
    let progress_at_start = progress();
    let w = &mut cx.watchdog;
    w.last_round = id;
    w.last_start = Some(now);
    w.round = Some(Round {
        id,
        progress_at_start,
        answers: 0,
        all_still: true,
        sent,
        recv,
    });
    let header = HeaderBuf::with_capacity(8).u64(id).bytes;
    for r in 1..cx.size {
        if let Err(e) = cx.post(r, wire::WATCH, &header, &[]) {
            cx.comm_failed(&e);
        }
        cx.watchdog.own_sent += 1;
    }
    if cx.size == 1 {
        decide(cx);
    }
}

/// Handles a watchdog message (step 2, 3 or 4).
fn dispatch(cx: &mut WatchCx<'_>, src: Rank, kind: Tag, mut f: Fields<'_>) {
    cx.watchdog.own_recv += 1;
    match kind {
        wire::WATCH => {
            let id = f.u64();
            let still = cx.watchdog.still_for(Instant::now());
            let (sent, recv) = counts(cx);
            let header = HeaderBuf::with_capacity(32)
                .u64(id)
                .u64(still.as_millis() as u64)
                .u64(sent)
                .u64(recv)
                .bytes;
            if let Err(e) = cx.post(src, wire::WATCH_STATE, &header, &[]) {
                cx.comm_failed(&e);
            }
            cx.watchdog.own_sent += 1;
        }
        wire::WATCH_STATE => {
            let (id, still_ms, sent, recv) = (f.u64(), f.u64(), f.u64(), f.u64());
            let limit = cx.watchdog.limit.unwrap_or(DEFAULT_LIMIT);
            let Some(round) = cx.watchdog.round.as_mut().filter(|r| r.id == id) else {
                return;
            };
            round.answers += 1;
            round.all_still &= Duration::from_millis(still_ms) >= limit;
            round.sent += sent;
            round.recv += recv;
            if round.answers + 1 == cx.size {
                decide(cx);
            }
        }
        wire::WATCH_FIRE => {
            let code = f.i32();
            let still = Duration::from_millis(f.u64());
            report_line(&format!(
                "mttl: rank {}: stopped by the deadlock watchdog of rank {src}: no thread on any \
                 rank could run and no message was in flight for {:.1} s ({VAR})",
                cx.rank,
                still.as_secs_f64()
            ));
            report_deadlocked_threads(cx.rank);
            context::let_the_failing_rank_exit_first();
            std::process::exit(code);
        }
        _ => unreachable!("not a watchdog message: {kind}"),
    }
}

/// Step 3 on rank 0, once every answer is in.
fn decide(cx: &mut WatchCx<'_>) {
    let Some(round) = cx.watchdog.round.take() else {
        return;
    };
    let now = Instant::now();
    let still = cx.watchdog.still_for(now);
    let deadlocked =
        round.all_still && progress() == round.progress_at_start && round.sent == round.recv;
    if !deadlocked {
        return;
    }
    let header = HeaderBuf::with_capacity(12)
        .i32(WATCHDOG_CODE)
        .u64(still.as_millis() as u64)
        .bytes;
    for r in 1..cx.size {
        // A rank that cannot be told is gone, and the job ends anyway.
        let _ = cx.post(r, wire::WATCH_FIRE, &header, &[]);
    }
    report_line(&format!(
        "mttl: rank 0: deadlock: no thread on any rank could run and no message was in flight \
         for {:.1} s ({VAR}={}); stopping the job",
        still.as_secs_f64(),
        cx.watchdog.limit.map_or(0.0, |l| l.as_secs_f64()),
    ));
    report_deadlocked_threads(0);
    cx.linger();
    std::process::exit(WATCHDOG_CODE);
}

/// Step 4 on every rank: what each of its threads waits for, or that none
/// does (a rank without threads can be part of a deadlock too).
fn report_deadlocked_threads(rank: Rank) {
    if report_waits(rank, Waiting::Waits) == 0 {
        report_line(&format!("mttl: rank {rank}: no thread was waiting here"));
    }
}
