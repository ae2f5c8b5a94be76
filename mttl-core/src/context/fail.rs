//! Stopping the job when something fails on this rank: a thread panic, a
//! comm error, a malformed message.
//!
//! # Failure protocol
//!
//! 1. The failing rank prints one line naming itself and the cause
//!    ([`Context::fail`], [`Context::fail_panic`], [`Context::comm_failed`]);
//!    when the cause is a rank that is gone, it first prints what its
//!    blocked threads gave up waiting for. The cause is its last line (a
//!    panic's backtrace, when asked for, comes before it).
//! 2. It sends `ABORT(code, why)` to every other rank, on its own, never in
//!    a batch (a rank waiting for the body of a large message takes it for
//!    what it is).
//! 3. It lingers [`ABORT_LINGER`], then exits with the code: a launcher
//!    kills every rank once one exits non-zero, and each rank should get to
//!    say why it stops.
//! 4. A rank receiving `ABORT` ([`Context::aborted`]) prints what its
//!    blocked threads gave up waiting for and, last, whose failure stopped
//!    it (the cause as the failing rank named it), waits as
//!    long as the failing rank lingers, so that one exits first, and exits
//!    with the same code.

use std::time::Duration;

use mttl_comm::{Comm, CommError, Rank};

use super::{Context, FAILURE_CODE};
use crate::thread::{self, ThreadPanic};
use crate::wire::{self, HeaderBuf};

/// The exit code of a job stopped by a panic, as Rust's for a panicking
/// process.
pub(crate) const PANIC_CODE: i32 = 101;

/// How long a failing rank waits after sending its aborts before exiting.
const ABORT_LINGER: Duration = Duration::from_millis(300);

impl Context {
    /// Stops the job because of `why` (steps 1 to 3). Never returns.
    pub(crate) fn fail(&mut self, why: &str, code: i32) -> ! {
        let cause = format!("rank {}: {why}", self.rank);
        report_line(&format!("mttl: {cause}"));
        self.abort_others(&cause, code)
    }

    /// Stops the job because a thread of this rank panicked and nothing
    /// caught it (steps 1 to 3): its backtrace if one was taken, then the
    /// line naming rank, thread, place and message, last.
    pub(crate) fn fail_panic(&mut self, p: &ThreadPanic) -> ! {
        let cause = format!("rank {}, {p}", self.rank);
        if let Some(backtrace) = &p.backtrace {
            report_line(&format!(
                "mttl: rank {}, thread '{}': stack backtrace:\n{}",
                self.rank,
                p.name,
                backtrace.trim_end()
            ));
        }
        report_line(&format!("mttl: {cause}"));
        self.abort_others(&cause, PANIC_CODE)
    }

    /// Stops the job because a comm primitive failed. When a peer is gone,
    /// says what each thread of this rank was waiting for: none of it will
    /// come.
    pub(crate) fn comm_failed(&mut self, e: &CommError) -> ! {
        // The error names this rank already; say it once.
        let cause = format!("rank {}: {}: {}", self.rank, e.op, e.kind);
        if e.lost_peer().is_some() {
            report_waits(self.rank, Waiting::GaveUp);
        }
        report_line(&format!("mttl: {cause}"));
        self.abort_others(&cause, FAILURE_CODE)
    }

    /// Stops the job because sending a message failed while this rank was
    /// `doing` something: as [`comm_failed`](Self::comm_failed), with what
    /// it was doing in the cause. A send is often where a rank first learns
    /// that a peer is gone, so its blocked threads are reported here too.
    pub(crate) fn send_failed(&mut self, doing: &str, e: &CommError) -> ! {
        let cause = format!("rank {}: {doing}: {}: {}", self.rank, e.op, e.kind);
        if e.lost_peer().is_some() {
            report_waits(self.rank, Waiting::GaveUp);
        }
        report_line(&format!("mttl: {cause}"));
        self.abort_others(&cause, FAILURE_CODE)
    }

    /// Steps 2 and 3: sends `ABORT` with `cause` (a sentence naming this
    /// rank) to every other rank, lingers and exits with `code`.
    fn abort_others(&mut self, cause: &str, code: i32) -> ! {
        let mut message = HeaderBuf::with_capacity(4).i32(code).bytes;
        message.extend_from_slice(cause.as_bytes());
        let me = self.rank;
        for r in (0..self.size).filter(|&r| r != me) {
            let _ = self.flush(r);
            let _ = self.comm.send(r, wire::ABORT, &message);
        }
        self.linger();
        std::process::exit(code);
    }

    /// Step 3, also before a rank stopping the job for another reason (the
    /// deadlock watchdog) exits: sends what it can and gives the other ranks
    /// a moment to read it and say why they stop.
    pub(crate) fn linger(&mut self) {
        // What could not be sent is lost with its rank anyway.
        let _ = self.flush_all();
        if self.size > 1 {
            std::thread::sleep(ABORT_LINGER);
        }
    }

    /// Step 4: another rank failed and sent `ABORT` with `code` and `why`.
    /// Its waits come first, so that its last line names the cause.
    pub(crate) fn aborted(&self, code: i32, why: &[u8]) -> ! {
        report_waits(self.rank, Waiting::GaveUp);
        report_line(&format!(
            "mttl: rank {}: stopping because {}",
            self.rank,
            String::from_utf8_lossy(why)
        ));
        let_the_failing_rank_exit_first();
        std::process::exit(if code == 0 { FAILURE_CODE } else { code });
    }
}

/// Before a rank stopped by another one's failure exits, once it has said
/// why: waits as long as the failing rank lingers, so that the failing rank
/// exits first. A launcher kills every rank once one exits non-zero (MPICH's
/// Hydra within milliseconds), which would cut short the reports of the
/// ranks still writing theirs.
pub(crate) fn let_the_failing_rank_exit_first() {
    std::thread::sleep(ABORT_LINGER);
}

/// Prints `line` and a newline on stderr in one write, so that it stays
/// whole when ranks share a pipe or `mpirun --tag-output` tags each write.
pub(crate) fn report_line(line: &str) {
    use std::io::Write as _;
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// What a rank's blocked threads do about their reasons, in a report.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waiting {
    /// "waits for" (the deadlock watchdog).
    Waits,
    /// "gave up waiting for" (a failure stops the job).
    GaveUp,
}

impl Waiting {
    fn verb(self, threads: usize) -> &'static str {
        match (self, threads) {
            (Waiting::Waits, 1) => "waits for",
            (Waiting::Waits, _) => "wait for",
            (Waiting::GaveUp, _) => "gave up waiting for",
        }
    }
}

/// Prints what the blocked threads of this rank wait for, one line per
/// distinct reason (what, detail and place): a lone thread is named, a
/// group is counted with its names ("48 threads ('worker') wait for
/// SyncCell read at src/main.rs:48:7"). Returns how many threads there
/// were.
pub(crate) fn report_waits(rank: Rank, waiting: Waiting) -> usize {
    let blocked = thread::blocked_threads();
    let waits = blocked.iter().map(|b| (b.name, b.reason));
    for line in wait_lines(rank, waits, waiting) {
        report_line(&line);
    }
    blocked.len()
}

/// The lines of [`report_waits`], in the order each reason first appears.
fn wait_lines(
    rank: Rank,
    waits: impl IntoIterator<Item = (&'static str, thread::BlockReason)>,
    waiting: Waiting,
) -> Vec<String> {
    /// Threads blocked for one reason: how many, and their names.
    struct Group {
        reason: thread::BlockReason,
        count: usize,
        names: Vec<&'static str>,
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (name, r) in waits {
        let at = r.location();
        let key = (r.what(), r.detail(), at.file(), at.line(), at.column());
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                reason: r,
                count: 0,
                names: Vec::new(),
            });
            groups.len() - 1
        });
        let group = &mut groups[g];
        group.count += 1;
        if !group.names.contains(&name) {
            group.names.push(name);
        }
    }
    groups
        .iter()
        .map(|g| {
            let verb = waiting.verb(g.count);
            if g.count == 1 {
                return format!(
                    "mttl: rank {rank}: thread '{}' {verb} {}",
                    g.names[0], g.reason
                );
            }
            let names: Vec<String> = g.names.iter().map(|n| format!("'{n}'")).collect();
            format!(
                "mttl: rank {rank}: {} threads ({}) {verb} {}",
                g.count,
                names.join(", "),
                g.reason
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread::BlockReason;

    #[test]
    fn identical_waits_are_folded_into_one_line() {
        let read = BlockReason::new("SyncCell read");
        let reply = BlockReason::new("reply to invoke").with_rank(1);
        let mut threads: Vec<_> = (0..48).map(|_| ("worker", read)).collect();
        threads.insert(3, ("main", reply));
        threads.push(("helper", read));
        let lines = wait_lines(2, threads.clone(), Waiting::Waits);
        assert_eq!(
            lines,
            [
                format!("mttl: rank 2: 49 threads ('worker', 'helper') wait for {read}"),
                format!("mttl: rank 2: thread 'main' waits for {reply}"),
            ]
        );
        assert!(lines[0].contains(&format!("SyncCell read at {}:", file!())));
        let gave_up = wait_lines(0, threads[..2].to_vec(), Waiting::GaveUp);
        assert_eq!(
            gave_up,
            [format!(
                "mttl: rank 0: 2 threads ('worker') gave up waiting for {read}"
            )]
        );
    }

    #[test]
    fn the_same_wait_on_different_ranks_or_lines_is_not_folded() {
        let on_1 = BlockReason::new("reply to invoke").with_rank(1);
        let on_2 = BlockReason::new("reply to invoke").with_rank(2);
        let elsewhere = BlockReason::new("reply to invoke").with_rank(1);
        let threads = [("a", on_1), ("b", on_2), ("c", elsewhere)];
        assert_eq!(wait_lines(0, threads, Waiting::Waits).len(), 3);
    }
}
