//! The deadlock watchdog: a job in which no thread on any rank can run and
//! no message is in flight will never move again; after `MTTL_WATCHDOG`
//! seconds of that (default [`DEFAULT_LIMIT`], `0` turns it off) every rank
//! prints what each of its threads waits for and the job ends with
//! [`WATCHDOG_CODE`].
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
//!    before [`ABORT_LINGER`](crate::runtime) has passed since it printed
//!    (rank 0 since it sent): `mpirun` kills the job once one rank exits,
//!    and every rank speaks first. Otherwise rank 0 starts the next round
//!    when it is next idle, at most one round per [`MIN_ROUND_GAP`].
//!
//! A rank that computes without yielding answers late, and then not still,
//! so a long computation is never mistaken for a deadlock; nor is a thread
//! blocked in the operating system (a `sleep`, a file read), which blocks
//! its whole rank in the same way.

use std::time::{Duration, Instant};

use mttl_comm::{Rank, Tag};

use crate::runtime::{self, report_line, Runtime};
use crate::thread;
use crate::wire::{self, Fields, HeaderBuf};

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
    /// Threads run plus messages handled (the watchdog's excepted).
    progress: u64,
    /// `progress` when last looked at, and when it was seen to change.
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
            progress: 0,
            seen: 0,
            still_since: Instant::now(),
            own_sent: 0,
            own_recv: 0,
            round: None,
            last_round: 0,
            last_start: None,
        })
    }

    /// Counts `n` units of progress (threads run, messages handled).
    #[inline]
    pub(crate) fn progressed(&mut self, n: usize) {
        self.progress += n as u64;
    }

    /// How long this rank has been still, as of now.
    fn still_for(&mut self, now: Instant) -> Duration {
        if self.progress != self.seen {
            self.seen = self.progress;
            self.still_since = now;
        }
        now - self.still_since
    }
}

/// Messages sent and received by `rt`, the watchdog's own left out.
fn counts(rt: &Runtime) -> (u64, u64) {
    let w = &rt.watchdog;
    (rt.stats.messages() - w.own_sent, rt.stats.recv - w.own_recv)
}

/// Called when the loop found nothing to do: rank 0 may start a round.
pub(crate) fn idle(rt: &mut Runtime) {
    let now = Instant::now();
    let still = rt.watchdog.still_for(now);
    let w = &rt.watchdog;
    let Some(limit) = w.limit else { return };
    if rt.rank != 0
        || w.round.is_some()
        || still < limit
        || w.last_start.is_some_and(|t| now - t < MIN_ROUND_GAP)
    {
        return;
    }
    let (sent, recv) = counts(rt);
    let id = w.last_round + 1;
    let progress_at_start = w.progress;
    let w = &mut rt.watchdog;
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
    for r in 1..rt.size {
        if let Err(e) = rt.post(r, wire::WATCH, &header, &[]) {
            rt.comm_failed(&e);
        }
        rt.watchdog.own_sent += 1;
    }
    if rt.size == 1 {
        decide(rt);
    }
}

/// Handles a watchdog message (step 2, 3 or 4).
pub(crate) fn dispatch(rt: &mut Runtime, src: Rank, kind: Tag, mut f: Fields<'_>) {
    rt.watchdog.own_recv += 1;
    match kind {
        wire::WATCH => {
            let id = f.u64();
            let still = rt.watchdog.still_for(Instant::now());
            let (sent, recv) = counts(rt);
            let header = HeaderBuf::with_capacity(32)
                .u64(id)
                .u64(still.as_millis() as u64)
                .u64(sent)
                .u64(recv)
                .bytes;
            if let Err(e) = rt.post(src, wire::WATCH_STATE, &header, &[]) {
                rt.comm_failed(&e);
            }
            rt.watchdog.own_sent += 1;
        }
        wire::WATCH_STATE => {
            let (id, still_ms, sent, recv) = (f.u64(), f.u64(), f.u64(), f.u64());
            let limit = rt.watchdog.limit.unwrap_or(DEFAULT_LIMIT);
            let Some(round) = rt.watchdog.round.as_mut().filter(|r| r.id == id) else {
                return;
            };
            round.answers += 1;
            round.all_still &= Duration::from_millis(still_ms) >= limit;
            round.sent += sent;
            round.recv += recv;
            if round.answers + 1 == rt.size {
                decide(rt);
            }
        }
        wire::WATCH_FIRE => {
            let code = f.i32();
            let still = Duration::from_millis(f.u64());
            report_line(&format!(
                "mttl: rank {}: stopped by the deadlock watchdog of rank {src}: no thread on any \
                 rank could run and no message was in flight for {:.1} s ({VAR})",
                rt.rank,
                still.as_secs_f64()
            ));
            report_deadlocked_threads(rt.rank);
            runtime::let_the_failing_rank_exit_first();
            std::process::exit(code);
        }
        _ => unreachable!("not a watchdog message: {kind}"),
    }
}

/// Step 3 on rank 0, once every answer is in.
fn decide(rt: &mut Runtime) {
    let Some(round) = rt.watchdog.round.take() else {
        return;
    };
    let now = Instant::now();
    let still = rt.watchdog.still_for(now);
    let deadlocked = round.all_still
        && rt.watchdog.progress == round.progress_at_start
        && round.sent == round.recv;
    if !deadlocked {
        return;
    }
    let header = HeaderBuf::with_capacity(12)
        .i32(WATCHDOG_CODE)
        .u64(still.as_millis() as u64)
        .bytes;
    for r in 1..rt.size {
        // A rank that cannot be told is gone, and the job ends anyway.
        let _ = rt.post(r, wire::WATCH_FIRE, &header, &[]);
    }
    report_line(&format!(
        "mttl: rank 0: deadlock: no thread on any rank could run and no message was in flight \
         for {:.1} s ({VAR}={}); stopping the job",
        still.as_secs_f64(),
        rt.watchdog.limit.map_or(0.0, |l| l.as_secs_f64()),
    ));
    report_deadlocked_threads(0);
    rt.linger();
    std::process::exit(WATCHDOG_CODE);
}

/// Step 4 on every rank: what each of its threads waits for, or that none
/// does (a rank without threads can be part of a deadlock too).
fn report_deadlocked_threads(rank: Rank) {
    if report_waits(rank, "waits for") == 0 {
        report_line(&format!("mttl: rank {rank}: no thread was waiting here"));
    }
}

/// Prints one line per blocked thread of this rank, `verb` saying what it
/// does about its reason ("waits for", "gave up waiting for"). Returns how
/// many there were.
pub(crate) fn report_waits(rank: Rank, verb: &str) -> usize {
    let blocked = thread::blocked_threads();
    for b in &blocked {
        report_line(&format!(
            "mttl: rank {rank}: thread '{}' {verb} {}",
            b.name, b.reason
        ));
    }
    blocked.len()
}
