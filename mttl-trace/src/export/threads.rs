//! Thread-level records (`MTTL_TRACE_LEVEL=threads`, kinds 80-83) and
//! which thread each of a rank's events belongs to: the one the last
//! `thread_run` switched to, or the rank's own track when that was the
//! runtime's loop ([`LOOP_THREAD`]) or before the first switch.

use mttl_core::trace::format::Event;

/// The id `thread_run` gives the runtime's own loop (message handling,
/// outside every thread): its events stay on the rank's own track.
pub(crate) const LOOP_THREAD: u64 = u64::MAX;

/// A thread-level record (`MTTL_TRACE_LEVEL=threads`): kinds 80
/// `thread_spawn` (`a` the new thread's name id, `b` its id), 81
/// `thread_run` (`b` the thread the scheduler switched to: every later
/// event of the rank is that thread's, until the next), 82 `thread_block`
/// (`a` the reason's name id, `b` the thread) and 83 `thread_exit` (`b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadMark {
    Spawn { name: u64, thread: u64 },
    Run { thread: u64 },
    Block { reason: u64, thread: u64 },
    Exit { thread: u64 },
}

/// The thread-level record `e` is, if it is one (by its kind's number, so
/// that this reads them whether or not this build's format names them).
pub(crate) fn thread_mark(e: &Event) -> Option<ThreadMark> {
    Some(match e.kind as u8 {
        80 => ThreadMark::Spawn {
            name: e.a,
            thread: e.b,
        },
        81 => ThreadMark::Run { thread: e.b },
        82 => ThreadMark::Block {
            reason: e.a,
            thread: e.b,
        },
        83 => ThreadMark::Exit { thread: e.b },
        _ => return None,
    })
}

/// Per record, the thread it belongs to (`None`: the rank's own track):
/// the thread of the last `thread_run` before it; a thread record itself
/// belongs to the thread it names, but a spawn to the spawning thread.
pub(crate) fn owners(marks: &[Option<ThreadMark>]) -> Vec<Option<u64>> {
    let mut current = None;
    marks
        .iter()
        .map(|m| match *m {
            Some(ThreadMark::Run { thread }) => {
                current = (thread != LOOP_THREAD).then_some(thread);
                current
            }
            Some(ThreadMark::Block { thread, .. } | ThreadMark::Exit { thread }) => Some(thread),
            Some(ThreadMark::Spawn { .. }) | None => current,
        })
        .collect()
}
