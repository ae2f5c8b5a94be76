//! Receiving the body of a large message (step 3 of the large-message
//! protocol in [`wire`]): the very next message from the header's source,
//! checked to be a `DATA` message.

use mttl_comm::{Comm, CommError, Rank, Received};

use super::{Context, BODY_TIMEOUT, FAILURE_CODE};
use crate::trace::{self, Kind};
use crate::wire::{self, Fields};

impl Context {
    /// Receives the body of a large message from `src`.
    pub(crate) fn recv_body(&mut self, src: Rank) -> Vec<u8> {
        let begin = trace::begin();
        let got = self.comm.recv_from(src, Some(BODY_TIMEOUT));
        if let Ok(Some(m)) = &got {
            trace::received(Kind::RecvFrom, begin, m.source, m.tag, m.data.len());
        }
        self.check_body(src, got.map(|m| m.map(Received::Owned)))
    }

    /// The body of a large message from `src`, as received (empty when it
    /// was placed where the receiver asked), or the end of the job if it is
    /// not one.
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
}
