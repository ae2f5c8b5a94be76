//! What a service provides the router: its set-up and tear-down, the
//! message kinds it owns and its handler for them.
//!
//! A service is a module that owns its state (in a thread-local of its own,
//! installed by [`Service::start`]) and implements this trait on a unit
//! type. The router (`runtime::dispatch`) lists every service once; it
//! starts them in that order, asks each in turn whether it owns a message's
//! kind and hands the message to the first that does. Dispatch is static:
//! the list expands to a chain of inlined `owns` tests, so adding a service
//! costs a message no indirect call.

use std::borrow::Cow;

use mttl_comm::{Rank, Tag};

use super::{Context, FAILURE_CODE};

/// A runtime service: one concern (cells, invoke, global memory,
/// collectives, the watchdog, ...) with its own state and messages.
pub(crate) trait Service {
    /// Whether a message handled by this service counts as progress for the
    /// deadlock watchdog (the watchdog's own messages do not).
    const PROGRESS: bool = true;

    /// Sets up this rank's state of the service (start-up, after the
    /// context is installed). An error stops the rank before it joins in.
    fn start(_cx: &Context) -> Result<(), String> {
        Ok(())
    }

    /// Drops this rank's state of the service (the loop has ended; the
    /// context is gone).
    fn stop() {}

    /// Whether messages of `kind` are this service's (without the
    /// [`LARGE`](crate::wire::LARGE) flag). None, unless the service says
    /// otherwise.
    fn owns(_kind: Tag) -> bool {
        false
    }

    /// Handles one message of a kind it owns from `src`, its header (as
    /// long as [`wire::header_len`](crate::wire::header_len) says) and body
    /// apart. Runs on the native stack with the context borrowed: it may
    /// wake or spawn threads and send, never block or run user code. A
    /// service that owns kinds must implement it.
    fn handle(cx: &mut Context, src: Rank, kind: Tag, _header: &[u8], _body: Cow<'_, [u8]>) {
        cx.fail(
            &format!("malformed message from rank {src}: kind {kind} has no handler"),
            FAILURE_CODE,
        )
    }

    /// Step 3 of the large-message protocol for a message of a kind it
    /// owns whose `header` just arrived: receives the body and returns it,
    /// or handles the whole message (e.g. placing the body where it
    /// belongs) and returns `None`.
    fn receive_large(cx: &mut Context, src: Rank, _kind: Tag, _header: &[u8]) -> Option<Vec<u8>> {
        Some(cx.recv_body(src))
    }
}
