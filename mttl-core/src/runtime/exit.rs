//! The exit protocol and the messages that end a job: `EXIT`, `EXIT_ACK`
//! and `ABORT` (the failure protocol itself is in `context`).
//!
//! # Exit protocol
//!
//! 1. Rank 0's main returns with an exit code.
//! 2. Rank 0 sends `EXIT(code)` to every other rank ([`begin`]).
//! 3. Each rank answers `EXIT_ACK` and leaves its loop.
//! 4. Rank 0 leaves its loop once every `EXIT_ACK` is in ([`done`]).
//! 5. Every rank shuts down (see the router's module docs) and exits with
//!    the code.

use std::borrow::Cow;
use std::cell::Cell;

use mttl_comm::{Rank, Tag};

use crate::context::{self, Context, Service};
use crate::wire::{self, Fields, HeaderBuf};

thread_local! {
    /// The job's exit code, once known.
    static CODE: Cell<Option<i32>> = const { Cell::new(None) };
    /// Rank 0: the `EXIT_ACK`s received.
    static ACKS: Cell<usize> = const { Cell::new(0) };
}

/// The job's exit code, once the protocol has begun.
pub(super) fn code() -> Option<i32> {
    CODE.with(Cell::get)
}

/// Sets the exit code without the protocol (a start-up refusal).
pub(super) fn set_code(code: i32) {
    CODE.with(|c| c.set(Some(code)));
}

/// Whether this rank's loop is over (step 3 or 4).
#[inline]
pub(super) fn done(cx: &Context) -> bool {
    match code() {
        None => false,
        Some(_) if cx.rank == 0 => ACKS.with(Cell::get) + 1 >= cx.size,
        Some(_) => true,
    }
}

/// Step 2, on rank 0.
pub(super) fn begin(code: i32) {
    set_code(code);
    context::with(|cx| {
        let header = HeaderBuf::with_capacity(4).i32(code).bytes;
        for r in 1..cx.size {
            if let Err(e) = cx.post(r, wire::EXIT, &header, &[]) {
                cx.comm_failed(&e);
            }
        }
    });
}

/// The service of the job's end: owns `EXIT`, `EXIT_ACK` and `ABORT`.
#[derive(Debug)]
pub(super) struct Exit;

impl Service for Exit {
    fn start(_cx: &Context) -> Result<(), String> {
        CODE.with(|c| c.set(None));
        ACKS.with(|a| a.set(0));
        Ok(())
    }

    #[inline]
    fn owns(kind: Tag) -> bool {
        matches!(kind, wire::EXIT | wire::EXIT_ACK | wire::ABORT)
    }

    fn handle(cx: &mut Context, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        let mut f = Fields(header);
        match kind {
            // Step 3.
            wire::EXIT => {
                let code = f.i32();
                if let Err(e) = cx.post(src, wire::EXIT_ACK, &[], &[]) {
                    cx.comm_failed(&e);
                }
                set_code(code);
            }
            wire::EXIT_ACK => ACKS.with(|a| a.set(a.get() + 1)),
            _ => cx.aborted(f.i32(), &body),
        }
    }
}
