//! Collectives built from point-to-point messages on trees.
//! (Being written; the runtime dispatches collective messages here.)

use mttl_comm::Rank;

use crate::runtime::Runtime;

/// Collective state of one node.
#[derive(Debug, Default)]
pub(crate) struct State {}

/// Handles a collective message.
pub(crate) fn dispatch(rt: &mut Runtime, src: Rank, _header: &[u8], _body: Vec<u8>) {
    let _ = &rt.coll;
    rt.fail(&format!("rank {src} sent a collective message, not supported yet"), 1);
}
