//! Aggregation of small messages: many small messages to one rank leave as
//! one `BATCH` message, so a burst of `ainvoke`s (or their replies) costs
//! one send and one receive instead of one each.
//!
//! The rule, per destination, between two looks of the runtime's loop at
//! the network (see `runtime`):
//!
//! 1. the first small message goes at once, so a message
//!    followed by a long computation is not held back; so does every
//!    message of a collective, which its peers wait for: a thread may send
//!    one, find what it waits for already there and go on computing
//!    without the loop looking at the network, and a message held so
//!    would keep its peers waiting as long;
//! 2. the following ones are appended to the destination's batch, which
//!    leaves when it reaches the backend's
//!    [`batch_len`](mttl_comm::CommTuning::batch_len)
//!    (16 KiB; 4 KiB on MPICH), when a large message or a
//!    blocking receive needs the order kept, and in any case when the loop
//!    next looks at the network (after at most a batch of thread runs).
//!
//! Per-pair order is kept: every message to a rank either goes through its
//! batch or flushes it first. A batch's body is a sequence of items
//! `tag u16, length u32, message` (little-endian); the receiver dispatches
//! them in order as if they had come one by one.
//!
//! `MTTL_AGGREGATE=0` turns aggregation off (every message goes at once).

use mttl_comm::{Rank, Tag};

use crate::wire;

/// A message larger than this never goes into a batch.
pub(crate) const MAX_ITEM: usize = 4 * 1024;

/// Bytes before each item of a batch.
pub(crate) const ITEM_HEADER: usize = 6;

/// The variable that turns aggregation off.
const VAR: &str = "MTTL_AGGREGATE";

/// The batches of one rank.
#[derive(Debug)]
pub(crate) struct Outbox {
    enabled: bool,
    /// A batch leaves once it holds this many bytes.
    flush_bytes: usize,
    /// Per destination: the batch being filled.
    batches: Vec<Vec<u8>>,
    /// Per destination: whether a message went there since the last look.
    sent: Vec<bool>,
    /// The destinations with `sent` set, to reset them cheaply.
    touched: Vec<Rank>,
}

/// What [`Outbox::admit`] decided for a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Send it now, as its own message.
    Direct,
    /// It is in the batch.
    Batched,
    /// It is in the batch, which is now full: flush it.
    BatchedFull,
}

impl Outbox {
    /// The outbox of a job of `size` ranks whose batches leave from
    /// `flush_bytes` on.
    pub(crate) fn new(size: usize, flush_bytes: usize) -> Result<Outbox, String> {
        Ok(Outbox {
            enabled: enabled(std::env::var(VAR).ok().as_deref())?,
            flush_bytes,
            batches: vec![Vec::new(); size],
            sent: vec![false; size],
            touched: Vec::new(),
        })
    }

    /// Decides how a small message of `header` and `body` to `dest` leaves;
    /// a batched one is copied in.
    #[inline]
    pub(crate) fn admit(&mut self, dest: Rank, kind: Tag, header: &[u8], body: &[u8]) -> Route {
        let len = header.len() + body.len();
        if !self.enabled || len > MAX_ITEM || kind == wire::COLL {
            return Route::Direct;
        }
        if !self.sent[dest] {
            self.sent[dest] = true;
            self.touched.push(dest);
            return Route::Direct;
        }
        let batch = &mut self.batches[dest];
        batch.reserve(ITEM_HEADER + len);
        batch.extend_from_slice(&(kind as u16).to_le_bytes());
        batch.extend_from_slice(&(len as u32).to_le_bytes());
        batch.extend_from_slice(header);
        batch.extend_from_slice(body);
        if batch.len() >= self.flush_bytes {
            Route::BatchedFull
        } else {
            Route::Batched
        }
    }

    /// The batch to `dest`, if it holds anything; the caller sends it and
    /// gives it back with [`Outbox::sent_batch`].
    #[inline]
    pub(crate) fn take(&mut self, dest: Rank) -> Option<Vec<u8>> {
        let batch = &mut self.batches[dest];
        (!batch.is_empty()).then(|| std::mem::take(batch))
    }

    /// Returns a sent batch's buffer for reuse.
    #[inline]
    pub(crate) fn sent_batch(&mut self, dest: Rank, mut buf: Vec<u8>) {
        buf.clear();
        self.batches[dest] = buf;
    }

    /// The destinations that may hold a batch, forgetting which had a
    /// message go at once (the loop is about to look at the network).
    pub(crate) fn take_touched(&mut self, into: &mut Vec<Rank>) {
        for &d in &self.touched {
            self.sent[d] = false;
        }
        into.clear();
        into.append(&mut self.touched);
    }
}

/// Whether aggregation is on, given the value of `MTTL_AGGREGATE` (on when
/// it is unset).
fn enabled(var: Option<&str>) -> Result<bool, String> {
    match var.map(str::trim) {
        None | Some("1" | "on" | "yes") => Ok(true),
        Some("0" | "off" | "no") => Ok(false),
        Some(_) => Err(format!("{VAR}={:?}: expected 0 or 1", var.unwrap_or(""))),
    }
}

/// The items of a batch's body, in order: `(tag, message)`, or the first
/// malformed part.
pub(crate) fn items(body: &[u8]) -> impl Iterator<Item = Result<(Tag, &[u8]), String>> {
    let mut rest = body;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() < ITEM_HEADER {
            let n = rest.len();
            rest = &[];
            return Some(Err(format!("a batch ends in a {n}-byte fragment")));
        }
        let tag = u16::from_le_bytes([rest[0], rest[1]]) as Tag;
        let len = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]) as usize;
        if rest.len() - ITEM_HEADER < len {
            let have = rest.len() - ITEM_HEADER;
            rest = &[];
            return Some(Err(format!(
                "a batch item claims {len} bytes but {have} are left"
            )));
        }
        let (item, tail) = rest[ITEM_HEADER..].split_at(len);
        rest = tail;
        Some(Ok((tag, item)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outbox(size: usize) -> Outbox {
        Outbox {
            enabled: true,
            flush_bytes: 16 << 10,
            batches: vec![Vec::new(); size],
            sent: vec![false; size],
            touched: Vec::new(),
        }
    }

    #[test]
    fn first_message_goes_at_once_the_rest_are_batched_in_order() {
        let mut o = outbox(2);
        assert_eq!(o.admit(1, 7, b"h1", b"b1"), Route::Direct);
        assert_eq!(o.admit(1, 8, b"h2", b"b2"), Route::Batched);
        assert_eq!(o.admit(1, 11, b"", b"x"), Route::Batched);
        assert_eq!(o.admit(0, 7, b"", b""), Route::Direct);
        let batch = o.take(1).expect("a batch");
        let got: Vec<_> = items(&batch).map(Result::unwrap).collect();
        assert_eq!(got, vec![(8, &b"h2b2"[..]), (11, &b"x"[..])]);
        assert!(o.take(0).is_none());
        let mut touched = Vec::new();
        o.take_touched(&mut touched);
        assert_eq!(touched, vec![1, 0]);
        // After the loop looked at the network, the first goes at once again.
        assert_eq!(o.admit(1, 7, b"", b""), Route::Direct);
    }

    #[test]
    fn collective_messages_are_never_batched() {
        let mut o = outbox(2);
        assert_eq!(o.admit(1, 7, b"h1", b"b1"), Route::Direct);
        assert_eq!(o.admit(1, 8, b"h2", b"b2"), Route::Batched);
        assert_eq!(o.admit(1, wire::COLL, b"c", b""), Route::Direct);
        assert_eq!(o.admit(1, wire::COLL, b"c", b""), Route::Direct);
        let batch = o.take(1).expect("the earlier message's batch");
        let got: Vec<_> = items(&batch).map(Result::unwrap).collect();
        assert_eq!(got, vec![(8, &b"h2b2"[..])]);
    }

    #[test]
    fn large_messages_and_full_batches() {
        let mut o = outbox(1);
        assert_eq!(o.admit(0, 1, b"", b""), Route::Direct);
        let big = vec![0u8; MAX_ITEM + 1];
        assert_eq!(o.admit(0, 1, b"", &big), Route::Direct);
        let item = vec![1u8; MAX_ITEM];
        let mut full = false;
        for _ in 0..o.flush_bytes / MAX_ITEM + 1 {
            if o.admit(0, 1, b"", &item) == Route::BatchedFull {
                full = true;
                break;
            }
        }
        assert!(full, "a batch reports when it is full");
    }

    #[test]
    fn malformed_batches_are_errors() {
        let got: Vec<_> = items(&[1, 0, 0]).collect();
        assert_eq!(
            got,
            vec![Err("a batch ends in a 3-byte fragment".to_string())]
        );
        let claims_more = [1u8, 0, 9, 0, 0, 0, 1, 2];
        let got: Vec<_> = items(&claims_more).collect();
        assert_eq!(
            got,
            vec![Err("a batch item claims 9 bytes but 2 are left".to_string())]
        );
        // After a good item, the error is the next and last.
        let fragment_after_an_item = [4u8, 0, 1, 0, 0, 0, 7, 2, 0];
        let got: Vec<_> = items(&fragment_after_an_item).collect();
        assert_eq!(
            got,
            vec![
                Ok((4, &[7u8][..])),
                Err("a batch ends in a 2-byte fragment".to_string())
            ]
        );
        assert_eq!(items(&[]).count(), 0);
    }

    /// An empty message is an item of a header only, wherever it is in the
    /// batch, the last place included; an item that fills the rest of the
    /// batch exactly is whole.
    #[test]
    fn empty_and_exactly_fitting_items_round_trip() {
        let mut o = outbox(2);
        assert_eq!(o.admit(1, 1, b"", b""), Route::Direct);
        assert_eq!(o.admit(1, 2, b"", b""), Route::Batched);
        assert_eq!(o.admit(1, 3, b"h", b"b"), Route::Batched);
        assert_eq!(o.admit(1, 4, b"", b""), Route::Batched);
        let batch = o.take(1).expect("a batch");
        assert_eq!(batch.len(), 3 * ITEM_HEADER + 2);
        let got: Vec<_> = items(&batch).collect();
        assert_eq!(
            got,
            vec![Ok((2, &b""[..])), Ok((3, &b"hb"[..])), Ok((4, &b""[..]))]
        );
        // Given back, the buffer is kept for the next batch, emptied.
        let capacity = batch.capacity();
        o.sent_batch(1, batch);
        assert!(o.take(1).is_none());
        assert_eq!(o.batches[1].capacity(), capacity, "the buffer is reused");
    }

    /// An item's tag and length are little-endian, and a batch leaves once
    /// it holds `flush_bytes` bytes, not before.
    #[test]
    fn items_are_laid_out_as_documented_and_flush_at_the_limit() {
        let mut o = outbox(1);
        o.flush_bytes = 2 * (ITEM_HEADER + 10);
        assert_eq!(o.admit(0, 0x0102, b"", &[0; 10]), Route::Direct);
        assert_eq!(o.admit(0, 0x0102, b"1234", b"567890"), Route::Batched);
        assert_eq!(
            o.batches[0][..ITEM_HEADER],
            [0x02, 0x01, 10, 0, 0, 0],
            "tag u16, length u32, little-endian"
        );
        assert_eq!(o.admit(0, 0x0102, b"", &[0; 10]), Route::BatchedFull);
        // A message of exactly MAX_ITEM bytes still goes into a batch.
        let mut o = outbox(1);
        assert_eq!(o.admit(0, 1, b"", b""), Route::Direct);
        assert_eq!(o.admit(0, 1, b"h", &[0; MAX_ITEM - 1]), Route::Batched);
    }

    #[test]
    fn the_variable_turns_aggregation_on_and_off() {
        assert_eq!(enabled(None), Ok(true));
        for on in ["1", "on", "yes", " 1 "] {
            assert_eq!(enabled(Some(on)), Ok(true), "{on:?}");
        }
        for off in ["0", "off", "no", "0\n"] {
            assert_eq!(enabled(Some(off)), Ok(false), "{off:?}");
        }
        assert_eq!(
            enabled(Some("maybe")),
            Err("MTTL_AGGREGATE=\"maybe\": expected 0 or 1".to_string())
        );
    }

    #[test]
    fn aggregation_off_sends_everything_at_once() {
        let mut o = outbox(1);
        o.enabled = false;
        assert_eq!(o.admit(0, 1, b"", b""), Route::Direct);
        assert_eq!(o.admit(0, 1, b"", b""), Route::Direct);
        assert!(o.take(0).is_none());
    }
}
