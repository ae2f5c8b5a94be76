//! The callee's side of `invoke_nowait` (the caller's is in `global`,
//! beside `nwrite`, whose fence completes both): how many calls from each
//! rank are still running here, the first that failed, and the fences
//! that wait for them.
//!
//! # Completion protocol
//!
//! 1. The caller sends `INVOKE` with no reply cell and counts the call
//!    for its fence as it counts an `nwrite`.
//! 2. Dispatching it, this rank counts it as running for its source
//!    ([`started`]) and runs it in a new thread; a panic or an error is
//!    kept for the source, the first one only ([`finished`]).
//! 3. A `FENCE` from the source (after every earlier call, messages of one
//!    pair keep their order) is answered at once if none of its calls
//!    runs; otherwise it is parked ([`park_fence`]) and answered when the
//!    last one finishes, with the first failure (`STATUS_PANIC` and its
//!    message), if the fence has no failed `nwrite` to report first.
//! 4. Calls to the caller's own rank are counted the same way; its fence
//!    waits for them in [`wait_local`].

use std::cell::RefCell;

use mttl_comm::Rank;

use crate::sync;
use crate::thread::{self, BlockReason, ThreadId};
use crate::wire;

/// The calls of one source rank.
#[derive(Debug, Default)]
struct FromRank {
    running: usize,
    failure: Option<String>,
    fences: Vec<Parked>,
}

/// A fence waiting for calls to finish.
#[derive(Debug)]
enum Parked {
    /// A remote fence: its reply cell, and the encoded failed `nwrite` to
    /// answer with instead of a call's failure.
    Remote { cell: u32, fault: Option<Vec<u8>> },
    /// The fence of a thread of this rank.
    Local(ThreadId),
}

thread_local! {
    static CALLS: RefCell<Vec<FromRank>> = const { RefCell::new(Vec::new()) };
}

fn with<R>(src: Rank, f: impl FnOnce(&mut FromRank) -> R) -> R {
    CALLS.with(|calls| {
        let mut calls = calls.borrow_mut();
        if calls.len() <= src {
            calls.resize_with(src + 1, FromRank::default);
        }
        f(&mut calls[src])
    })
}

/// Forgets every call (the service's start and stop).
pub(super) fn reset() {
    CALLS.with(|calls| calls.borrow_mut().clear());
}

/// Step 2: a call from `src` starts.
pub(super) fn started(src: Rank) {
    with(src, |c| c.running += 1);
}

/// Step 2 and 3: a call from `src` finished, with `failure` if it failed;
/// the last one answers the parked fences.
pub(super) fn finished(src: Rank, failure: Option<String>) {
    let (fences, failure) = with(src, |c| {
        c.running -= 1;
        if c.failure.is_none() {
            c.failure = failure;
        }
        if c.running > 0 || c.fences.is_empty() {
            return (Vec::new(), None);
        }
        let fences = std::mem::take(&mut c.fences);
        // A remote fence reports the failure once; a local one takes it.
        let remote = fences.iter().any(|p| matches!(p, Parked::Remote { .. }));
        (fences, if remote { c.failure.take() } else { None })
    });
    for parked in fences {
        match parked {
            Parked::Local(id) => thread::wake(id),
            Parked::Remote { cell, fault } => answer(src, cell, fault, failure.as_deref()),
        }
    }
}

fn answer(src: Rank, cell: u32, fault: Option<Vec<u8>>, failure: Option<&str>) {
    match (fault, failure) {
        (Some(fault), _) => sync::write_cell(src, cell, wire::STATUS_ERROR, &fault),
        (None, Some(failure)) => {
            sync::write_cell(src, cell, wire::STATUS_PANIC, failure.as_bytes());
        }
        (None, None) => sync::write_cell(src, cell, wire::STATUS_OK, &[]),
    }
}

/// Step 3, for the owner's `FENCE` handler: if calls from `src` still run,
/// parks the fence and returns `None`; otherwise returns the first failure
/// since the last fence, `Some(None)` if none.
pub(crate) fn park_fence(src: Rank, cell: u32, fault: Option<Vec<u8>>) -> Option<Option<String>> {
    with(src, |c| {
        if c.running > 0 {
            c.fences.push(Parked::Remote { cell, fault });
            None
        } else {
            Some(c.failure.take())
        }
    })
}

/// Step 4: waits until the calls this rank made to itself have finished;
/// returns the first failure since the last fence.
pub(crate) fn wait_local(me: Rank) -> Option<String> {
    loop {
        let waiting = with(me, |c| {
            if c.running == 0 {
                return None;
            }
            let id = thread::current()?;
            c.fences.push(Parked::Local(id));
            Some(())
        });
        if waiting.is_none() {
            break;
        }
        thread::block(BlockReason::new("invoke_nowait calls to this rank"));
    }
    with(me, |c| c.failure.take())
}
