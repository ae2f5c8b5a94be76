//! Dispatch: the list of services, and a message's way to the one that
//! owns its kind (step 3 of the loop): a message dispatched by its kind, a
//! batch of small messages unpacked, a large message's body received after
//! its header.
//!
//! # Adding a service
//!
//! Write its module, implement [`Service`] on a unit type there, and add
//! that type to the `services!` list below. Nothing else names it.

use std::borrow::Cow;

use mttl_comm::{Message, Rank, Tag};

use super::exit::Exit;
use crate::coll::Collectives;
use crate::context::{Context, Service, FAILURE_CODE};
use crate::global::GlobalMemory;
use crate::invoke::Invoke;
use crate::outbox;
use crate::sync::Cells;
use crate::watchdog::{self, Deadlocks};
use crate::wire;

/// Defines the router's calls into every service of the list, in its
/// order: `start_services`, `stop_services`, and `handle` and
/// `receive_large`, which give a message to the first service that owns
/// its kind. The list expands to inlined tests, not indirect calls.
macro_rules! services {
    ($($service:ty),+ $(,)?) => {
        /// Starts every service (start-up step 2).
        pub(super) fn start_services(cx: &Context) -> Result<(), String> {
            $(<$service as Service>::start(cx)?;)+
            Ok(())
        }

        /// Stops every service (shut-down step 2).
        pub(super) fn stop_services() {
            $(<$service as Service>::stop();)+
        }

        /// Handles one message of `kind` from `src`, its header and body
        /// apart.
        fn handle(cx: &mut Context, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
            $(
                if <$service as Service>::owns(kind) {
                    if <$service as Service>::PROGRESS {
                        watchdog::progressed(1);
                    }
                    return <$service as Service>::handle(cx, src, kind, header, body);
                }
            )+
            unexpected(cx, src, kind)
        }

        /// Step 3 of the large-message protocol: the body of a message of
        /// `kind` whose header just arrived, or `None` if its service
        /// handled the whole message.
        fn receive_large(cx: &mut Context, src: Rank, kind: Tag, header: &[u8]) -> Option<Vec<u8>> {
            $(
                if <$service as Service>::owns(kind) {
                    return <$service as Service>::receive_large(cx, src, kind, header);
                }
            )+
            unexpected(cx, src, kind)
        }
    };
}

// The services, most frequent messages first.
services![Cells, Invoke, GlobalMemory, Collectives, Deadlocks, Exit];

/// A message of a kind no service owns (`HELLO` after start-up, say).
fn unexpected(cx: &mut Context, src: Rank, kind: Tag) -> ! {
    cx.fail(
        &format!("malformed message from rank {src}: kind {kind} is not expected now"),
        FAILURE_CODE,
    )
}

/// Dispatches one message (step 3 of the loop).
pub(super) fn dispatch(cx: &mut Context, m: Message) {
    let src = m.source;
    if m.tag == wire::BATCH {
        return dispatch_batch(cx, src, &m.data);
    }
    let large = m.tag & wire::LARGE != 0;
    let kind = m.tag & !wire::LARGE;
    let Some(hlen) = wire::header_len(kind) else {
        cx.fail(
            &format!("malformed message from rank {src}: unknown kind {}", m.tag),
            FAILURE_CODE,
        );
    };
    let data = m.data;
    if data.len() < hlen || (large && data.len() != hlen) {
        cx.fail(
            &format!(
                "malformed message from rank {src}: kind {kind} needs a {hlen}-byte header, got {} bytes",
                data.len()
            ),
            FAILURE_CODE,
        );
    }
    let (header, body) = data.split_at(hlen);
    let body = if large {
        match receive_large(cx, src, kind, header) {
            Some(body) => Cow::Owned(body),
            None => return,
        }
    } else {
        Cow::Borrowed(body)
    };
    handle(cx, src, kind, header, body);
}

/// Dispatches the items of a `BATCH` (see [`outbox`]) in order.
fn dispatch_batch(cx: &mut Context, src: Rank, batch: &[u8]) {
    for item in outbox::items(batch) {
        let (kind, data) = match item {
            Ok(item) => item,
            Err(e) => cx.fail(
                &format!("malformed message from rank {src}: {e}"),
                FAILURE_CODE,
            ),
        };
        let hlen = match wire::header_len(kind) {
            Some(hlen) if kind != wire::BATCH && data.len() >= hlen => hlen,
            _ => cx.fail(
                &format!(
                    "malformed message from rank {src}: a batch holds kind {kind} with {} bytes",
                    data.len()
                ),
                FAILURE_CODE,
            ),
        };
        let (header, body) = data.split_at(hlen);
        handle(cx, src, kind, header, Cow::Borrowed(body));
    }
}
