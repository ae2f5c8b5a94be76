//! Receiving in the runtime's loop (step 3): one message dispatched by its
//! kind, a batch of small messages unpacked, a large body received after
//! its header and checked against what the header announced.

use std::borrow::Cow;

use mttl_comm::{Comm, CommError, Message, Rank, Received, Tag};

use super::{let_the_failing_rank_exit_first, report_line, Runtime, BODY_TIMEOUT, FAILURE_CODE};
use crate::global::InPlace;
use crate::outbox;
use crate::watchdog;
use crate::wire::{self, Fields};
use crate::{coll, global, invoke};

impl Runtime {
    /// Dispatches one message (step 3 of the loop).
    pub(super) fn dispatch(&mut self, m: Message) {
        let src = m.source;
        if m.tag == wire::BATCH {
            return self.dispatch_batch(src, &m.data);
        }
        let large = m.tag & wire::LARGE != 0;
        let kind = m.tag & !wire::LARGE;
        let Some(hlen) = wire::header_len(kind) else {
            self.fail(
                &format!("malformed message from rank {src}: unknown kind {}", m.tag),
                FAILURE_CODE,
            );
        };
        let data = m.data;
        if data.len() < hlen || (large && data.len() != hlen) {
            self.fail(
                &format!(
                    "malformed message from rank {src}: kind {kind} needs a {hlen}-byte header, got {} bytes",
                    data.len()
                ),
                FAILURE_CODE,
            );
        }
        let (header, body) = data.split_at(hlen);
        let body = if large {
            // Step 3 of the large-message protocol: the body comes next. A
            // remote write's lands in its region when it can.
            if matches!(kind, wire::WRITE | wire::WRITE_ACK) {
                match global::receive_write_in_place(self, src, kind, header) {
                    InPlace::Done => return,
                    InPlace::Received(body) => Cow::Owned(self.check_body(src, body)),
                    InPlace::NotTried => Cow::Owned(self.recv_body(src)),
                }
            } else {
                Cow::Owned(self.recv_body(src))
            }
        } else {
            Cow::Borrowed(body)
        };
        self.handle(src, kind, header, body);
    }

    /// Receives the body of a large message from `src` (step 3 of the
    /// large-message protocol).
    pub(super) fn recv_body(&mut self, src: Rank) -> Vec<u8> {
        let got = self.comm.recv_from(src, Some(BODY_TIMEOUT));
        self.check_body(src, got.map(|m| m.map(Received::Owned)))
    }

    /// The body of a large message from `src`, as received, or the end of
    /// the job if it is not one.
    pub(crate) fn check_body(
        &mut self,
        src: Rank,
        got: Result<Option<Received>, CommError>,
    ) -> Vec<u8> {
        let tag = match &got {
            Ok(Some(Received::Owned(m))) => m.tag,
            Ok(Some(Received::Placed(e))) => e.tag,
            Ok(None) => self.fail(
                &format!("rank {src} sent a large message's header but not its body within {BODY_TIMEOUT:?}"),
                FAILURE_CODE,
            ),
            Err(e) => self.comm_failed(e),
        };
        if tag != wire::DATA {
            if let Ok(Some(Received::Owned(m))) = got {
                if m.tag == wire::ABORT && m.data.len() >= 4 {
                    // The sender failed between header and body: say why.
                    let (code, why) = m.data.split_at(4);
                    self.aborted(Fields(code).i32(), why);
                }
            }
            self.fail(
                &format!("malformed message from rank {src}: a large message's body has tag {tag}"),
                FAILURE_CODE,
            );
        }
        self.stats.recv += 1;
        match got {
            Ok(Some(Received::Owned(m))) => m.data,
            _ => Vec::new(),
        }
    }

    /// Dispatches the items of a `BATCH` (see [`outbox`]) in order.
    pub(super) fn dispatch_batch(&mut self, src: Rank, batch: &[u8]) {
        for item in outbox::items(batch) {
            let (kind, data) = match item {
                Ok(item) => item,
                Err(e) => self.fail(
                    &format!("malformed message from rank {src}: {e}"),
                    FAILURE_CODE,
                ),
            };
            let hlen = match wire::header_len(kind) {
                Some(hlen) if kind != wire::BATCH && data.len() >= hlen => hlen,
                _ => self.fail(
                    &format!(
                        "malformed message from rank {src}: a batch holds kind {kind} with {} bytes",
                        data.len()
                    ),
                    FAILURE_CODE,
                ),
            };
            let (header, body) = data.split_at(hlen);
            self.handle(src, kind, header, Cow::Borrowed(body));
        }
    }

    /// Handles one message of `kind` from `src`, its header and body apart.
    pub(super) fn handle(&mut self, src: Rank, kind: Tag, header: &[u8], body: Cow<'_, [u8]>) {
        let mut f = Fields(header);
        if matches!(kind, wire::WATCH | wire::WATCH_STATE | wire::WATCH_FIRE) {
            return watchdog::dispatch(self, src, kind, f);
        }
        self.watchdog.progressed(1);
        match kind {
            wire::INVOKE => {
                let id = f.u64();
                let cell = f.u32();
                invoke::serve(src, id, cell, body.into_owned());
            }
            wire::CELL_WRITE => {
                let cell = f.u32();
                let status = f.u8();
                if let Err(e) = self.cells.deliver(cell, status, &body) {
                    report_line(&format!(
                        "mttl: rank {}: a write from rank {src} was lost: {e}",
                        self.rank
                    ));
                }
            }
            wire::WRITE
            | wire::WRITE_ACK
            | wire::READ
            | wire::FENCE
            | wire::ATOMIC
            | wire::METHOD => {
                global::dispatch(self, kind, src, header, body);
            }
            wire::COLL => coll::dispatch(self, src, header, body.into_owned()),
            wire::EXIT => {
                let code = f.i32();
                if let Err(e) = self.post(src, wire::EXIT_ACK, &[], &[]) {
                    self.comm_failed(&e);
                }
                self.exit_code = Some(code);
            }
            wire::EXIT_ACK => self.exit_acks += 1,
            wire::ABORT => self.aborted(f.i32(), &body),
            _ => self.fail(
                &format!("malformed message from rank {src}: kind {kind} is not expected now"),
                FAILURE_CODE,
            ),
        }
    }

    /// Another rank failed and sent `ABORT` with `code` and `why`.
    pub(super) fn aborted(&self, code: i32, why: &[u8]) -> ! {
        report_line(&format!(
            "mttl: rank {}: stopping because {}",
            self.rank,
            String::from_utf8_lossy(why)
        ));
        watchdog::report_waits(self.rank, "gave up waiting for");
        let_the_failing_rank_exit_first();
        std::process::exit(if code == 0 { FAILURE_CODE } else { code });
    }
}
