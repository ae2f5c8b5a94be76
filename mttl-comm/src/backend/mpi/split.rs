//! How a message's payload is announced, and a split message's head: the
//! types both the sending side (`sends.rs`) and the progress side
//! (`progress.rs`) use. A leaf: it imports no sibling module.

use std::ffi::c_int;

/// How a message goes on the wire ahead of its payload
/// (`MpiComm::announce`, in `progress.rs`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Lead<'a> {
    /// A plain marker if the message is larger than this many bytes (at
    /// most `SMALL_MAX`, what the small channel carries); otherwise the
    /// message travels whole on the small channel.
    MarkerAbove(usize),
    /// A headed marker carrying this message (MPI tag, bytes) first;
    /// the payload always goes on the large channel.
    Headed(c_int, &'a [u8]),
}

/// The head of a split message (see `mod.rs`, `split_head_for`): its first
/// `len` bytes, sent ahead of the rest under `tag` on the small channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Split {
    pub(super) len: usize,
    pub(super) tag: c_int,
}

/// The largest message a headed marker carries; a larger head goes as a
/// message of its own, before a plain marker.
pub(super) const HEAD_MAX: usize = 64;
