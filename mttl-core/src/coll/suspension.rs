//! The trace's suspension after a collective (`MTTL_TRACE_FLUSH=equalized`,
//! the default, and `static:LONG,SHORT`): the ranks write their trace
//! buffers together, right where they synchronize anyway, and each is then
//! held for the same time Z, so that their relative timing is what it
//! would have been without the writes and the suspensions can simply be
//! subtracted afterwards (`mttl-trace reconstruct`). The method is that of
//! Okita, Ino and Hagihara (large-scale trace generation for message
//! passing programs); the decision of when it runs lives in the recorder
//! (`trace::after_collective`, the seam every user collective calls on its
//! way out), the protocol here, since it needs collectives.
//!
//! # Protocol (`equalized`), on every rank, after each user collective
//!
//! 1. t := now. The suspension is marked running: its own collectives
//!    (`TraceVote`, `TraceSuspension`, numbered apart from the user's) are
//!    not recorded as collectives and start no suspension. Their messages
//!    are recorded as comm primitives, so that every message of the run
//!    has its pair (`mttl-trace check`); they fall inside the suspension
//!    and `reconstruct` removes them with it.
//! 2. f := this rank's buffer is past its threshold S
//!    (`MTTL_TRACE_THRESHOLD`); allreduce(f, OR) (`TraceVote`). If no rank
//!    is past it, the suspension ends here and nothing is recorded.
//! 3. Every rank writes its buffer (a `Flush` of cause `Suspension`). A
//!    rank whose write failed stops tracing but goes on with the protocol:
//!    the others count on its messages.
//! 4. Rank 0 measures the clock offsets C_i (rank i's clock minus rank
//!    0's), at every suspension (`MTTL_TRACE_RESYNC=each`, the default) or
//!    only at the first (`start`): [`PINGS`] ping-pongs with each rank, of
//!    which the fastest gives C_i = (its time in the reply) − (midpoint of
//!    the round trip), with the error bound half that round trip. A rank
//!    on rank 0's host (same kernel boot id) shares its CLOCK_MONOTONIC:
//!    its offset is exactly 0, error 0. m := the mean one-way time (half
//!    the round trip) over all ping-pongs; d := the largest error bound.
//!    Rank 0 records each C_i with its error (`ClockOffset`).
//! 5. Every rank sends its t to rank 0, which converts each t_i to its own
//!    clock (t_i − C_i) and computes w := now − min(t_i) and
//!    Z := w + m·⌈log2 P⌉ + d ([`suspension_time`]): the time the slowest
//!    rank has already been suspended, plus the broadcast of Z to come,
//!    plus the clocks' uncertainty.
//! 6. Rank 0 broadcasts (Z, w, m, d) down a binomial tree.
//! 7. Every rank busy-waits until now − t ≥ Z (its loop does not run:
//!    nothing of the program moves during it).
//! 8. Every rank records the suspension (`Suspension`: t to now, Z, w; and
//!    `SuspensionClock`: m, d).
//!
//! `static:LONG,SHORT` runs steps 1-3, then Z := LONG if the ranks wrote,
//! SHORT otherwise (applied after every collective, as the authors' first
//! paper did with its fixed suspension), then steps 7-8 with w, m and d 0;
//! a suspension of 0 without a write is not recorded. No clocks are
//! measured: a fixed Z is only equal if it covers the write.
//!
//! A rank that dies during a suspension is what it is in any collective:
//! the others' comm layer reports the lost peer and the runtime ends the
//! job. The only wait that is not on a message is step 7's, bounded by Z.

use std::cell::RefCell;

use mttl_comm::Rank;

use super::algorithm::{self, Accumulator};
use super::mailbox::{Kind, Op};
use crate::thread::BlockReason;
use crate::trace::{self, Due, Policy, SuspensionRecord};

/// Ping-pongs per rank and offset measurement.
pub(crate) const PINGS: u8 = 10;
/// The step of the k-th ping is `STEP_PING + 2k`, of its reply one more
/// (clear of the broadcast's steps).
const STEP_PING: u8 = 8;
const _: () = assert!(STEP_PING > algorithm::STEP_RESULT && STEP_PING > algorithm::STEP_DOWN);
/// The step of a rank's t sent to rank 0.
const STEP_T: u8 = STEP_PING + 2 * PINGS;

/// What rank 0 knows of the clocks (kept for `MTTL_TRACE_RESYNC=start`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Clocks {
    /// Per rank, its clock minus rank 0's, ns (0 for rank 0; empty on the
    /// other ranks).
    pub(crate) offsets: Vec<i64>,
    /// Per rank, the error bound of its offset, ns.
    pub(crate) errors: Vec<u64>,
    /// The mean one-way message time, ns.
    pub(crate) m: u64,
    /// The largest error bound, ns.
    pub(crate) d: u64,
}

thread_local! {
    /// The last measurement, `None` until the first suspension measures.
    static CLOCKS: RefCell<Option<Clocks>> = const { RefCell::new(None) };
}

/// Forgets the clocks (a new job on this thread).
pub(super) fn reset() {
    CLOCKS.with(|c| *c.borrow_mut() = None);
}

/// One ping-pong as rank 0 saw it: when it sent, the peer's clock in the
/// reply, when the reply arrived (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PingPong {
    pub(crate) sent: u64,
    pub(crate) remote: u64,
    pub(crate) received: u64,
}

impl PingPong {
    fn round_trip(&self) -> u64 {
        self.received.saturating_sub(self.sent)
    }
}

/// A peer's clock offset to rank 0's (its clock minus rank 0's) and the
/// bound of its error, from the fastest of `pings` (step 4): the reply
/// was read somewhere in the round trip, so the offset is the reading
/// minus the round trip's midpoint, within half the round trip.
pub(crate) fn offset_estimate(pings: &[PingPong]) -> Option<(i64, u64)> {
    let best = pings.iter().min_by_key(|p| p.round_trip())?;
    let rtt = best.round_trip();
    let mid = i128::from(best.sent) + i128::from(rtt) / 2;
    let offset = (i128::from(best.remote) - mid) as i64;
    Some((offset, rtt.div_ceil(2)))
}

/// ⌈log2 p⌉: the rounds of a binomial broadcast over `p` ranks.
fn rounds(p: usize) -> u64 {
    u64::from(p.max(1).next_power_of_two().trailing_zeros())
}

/// Steps 5's computation at rank 0: `starts` are the ranks' t already on
/// rank 0's clock, `now` rank 0's clock; returns (Z, w).
pub(crate) fn suspension_time(starts: &[u64], now: u64, m: u64, d: u64, p: usize) -> (u64, u64) {
    let earliest = starts.iter().copied().min().unwrap_or(now);
    let w = now.saturating_sub(earliest);
    (w + m * rounds(p) + d, w)
}

/// Runs the suspension after a collective (see the module's steps).
pub(super) fn run(due: Due) {
    // Step 1.
    let t = trace::now();
    let _running = trace::suspend();
    // Step 2.
    let any = vote(due.full);
    if !any && due.policy == Policy::Equalized {
        return;
    }
    // Step 3.
    if any {
        trace::write_together();
    }
    let record = match due.policy {
        Policy::Static { long, short } => {
            let z = if any { long } else { short };
            if z == 0 {
                return;
            }
            SuspensionRecord {
                t,
                z,
                w: 0,
                m: 0,
                d: 0,
            }
        }
        _ => equalize(t, due.resync_each),
    };
    // Step 7.
    while trace::now().saturating_sub(t) < record.z {
        std::hint::spin_loop();
    }
    // Step 8.
    trace::suspension(&record);
}

/// An OR over the ranks' one-byte flags.
struct AnyFlag(u8);

impl Accumulator for AnyFlag {
    fn bytes(&mut self, _op: &Op) -> &[u8] {
        std::slice::from_ref(&self.0)
    }

    fn combine(&mut self, op: &Op, from: Rank, other: Vec<u8>, _upper: bool) {
        match other.as_slice() {
            [b] => self.0 |= *b,
            _ => op.fail(&format!("rank {from} voted with {} bytes", other.len())),
        }
    }
}

/// Step 2: whether any rank's buffer is past its threshold.
fn vote(full: bool) -> bool {
    let op = Op::begin(
        Kind::TraceVote,
        None,
        BlockReason::new(Kind::TraceVote.name()),
    );
    let mut flag = AnyFlag(u8::from(full));
    algorithm::recursive_doubling(&op, &mut flag);
    flag.0 != 0
}

/// Steps 4 to 6: the clocks, the t_i, and Z from rank 0.
fn equalize(t: u64, resync_each: bool) -> SuspensionRecord {
    let op = Op::begin(
        Kind::TraceSuspension,
        None,
        BlockReason::new(Kind::TraceSuspension.name()),
    );
    let measure = resync_each || CLOCKS.with(|c| c.borrow().is_none());
    if op.rank == 0 {
        if measure {
            let clocks = measure_clocks(&op);
            for (i, (&c, &e)) in clocks
                .offsets
                .iter()
                .zip(&clocks.errors)
                .enumerate()
                .skip(1)
            {
                trace::clock_offset(i, c, e);
            }
            CLOCKS.with(|slot| *slot.borrow_mut() = Some(clocks));
        }
        let clocks = CLOCKS.with(|c| c.borrow().clone()).unwrap_or_default();
        let mut starts = vec![t];
        for i in 1..op.size {
            let body = op.recv(i, STEP_T);
            let ti = read_u64(&op, i, &body, 0);
            let c = clocks.offsets.get(i).copied().unwrap_or(0);
            starts.push((i128::from(ti) - i128::from(c)).max(0) as u64);
        }
        let (z, w) = suspension_time(&starts, trace::now(), clocks.m, clocks.d, op.size);
        let mut msg = [0u8; 32];
        for (k, v) in [z, w, clocks.m, clocks.d].into_iter().enumerate() {
            msg[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        algorithm::broadcast_down(&op, 0, Some(&msg));
        SuspensionRecord {
            t,
            z,
            w,
            m: clocks.m,
            d: clocks.d,
        }
    } else {
        if measure {
            answer_pings(&op);
            CLOCKS.with(|c| *c.borrow_mut() = Some(Clocks::default()));
        }
        op.send(0, STEP_T, &t.to_le_bytes());
        let msg = algorithm::broadcast_down(&op, 0, None).unwrap_or_default();
        let from = op.rank;
        let at = |k| read_u64(&op, from, &msg, k);
        SuspensionRecord {
            t,
            z: at(0),
            w: at(1),
            m: at(2),
            d: at(3),
        }
    }
}

/// The `k`-th u64 of a protocol message from `from`, or the job stops.
fn read_u64(op: &Op, from: Rank, body: &[u8], k: usize) -> u64 {
    match body.get(8 * k..8 * k + 8) {
        Some(b) => u64::from_le_bytes(b.try_into().unwrap_or_default()),
        None => op.fail(&format!(
            "a message of {} bytes from rank {from} is too short for the suspension's field {k}",
            body.len()
        )),
    }
}

/// Step 4 at rank 0.
fn measure_clocks(op: &Op) -> Clocks {
    let mine = boot_id();
    let mut clocks = Clocks {
        offsets: vec![0; op.size],
        errors: vec![0; op.size],
        ..Clocks::default()
    };
    let (mut sum, mut count) = (0u64, 0u64);
    for i in 1..op.size {
        let mut pings = Vec::with_capacity(usize::from(PINGS));
        let mut same_clock = false;
        for k in 0..PINGS {
            let sent = trace::now();
            op.send(i, STEP_PING + 2 * k, &[]);
            let body = op.recv(i, STEP_PING + 2 * k + 1);
            let received = trace::now();
            let remote = read_u64(op, i, &body, 0);
            same_clock = mine != 0 && read_u64(op, i, &body, 1) == mine;
            let p = PingPong {
                sent,
                remote,
                received,
            };
            sum += p.round_trip() / 2;
            count += 1;
            pings.push(p);
        }
        if !same_clock {
            let (c, e) = offset_estimate(&pings).unwrap_or((0, 0));
            clocks.offsets[i] = c;
            clocks.errors[i] = e;
        }
    }
    clocks.m = sum.checked_div(count).unwrap_or(0);
    clocks.d = clocks.errors.iter().copied().max().unwrap_or(0);
    clocks
}

/// Step 4 at the other ranks: each ping answered with this rank's clock
/// and its host's boot id.
fn answer_pings(op: &Op) {
    let boot = boot_id();
    for k in 0..PINGS {
        op.recv(0, STEP_PING + 2 * k);
        let mut reply = [0u8; 16];
        reply[..8].copy_from_slice(&trace::now().to_le_bytes());
        reply[8..].copy_from_slice(&boot.to_le_bytes());
        op.send(0, STEP_PING + 2 * k + 1, &reply);
    }
}

/// This host's kernel boot id folded to 64 bits (0 when unknown): ranks
/// with the same one read the same CLOCK_MONOTONIC.
fn boot_id() -> u64 {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .and_then(|s| {
            let hex: String = s.trim().chars().filter(|c| *c != '-').collect();
            u128::from_str_radix(&hex, 16).ok()
        })
        .map_or(0, |v| (v as u64) ^ ((v >> 64) as u64) | 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_ping_pong_gives_the_offset_and_its_bound() {
        // Peer 1 ms ahead; round trips of 100, 40 and 70 us.
        let pings = [
            PingPong {
                sent: 0,
                remote: 1_000_080,
                received: 100_000,
            },
            PingPong {
                sent: 200_000,
                remote: 1_220_000,
                received: 240_000,
            },
            PingPong {
                sent: 300_000,
                remote: 1_330_000,
                received: 370_000,
            },
        ];
        assert_eq!(offset_estimate(&pings), Some((1_000_000, 20_000)));
        // A peer behind rank 0, read late in the round trip.
        let behind = [PingPong {
            sent: 5_000_000,
            remote: 4_000_009,
            received: 5_000_011,
        }];
        assert_eq!(offset_estimate(&behind), Some((-999_996, 6)));
        assert_eq!(offset_estimate(&[]), None);
    }

    #[test]
    fn z_is_w_plus_a_broadcast_plus_the_clock_error() {
        // Four ranks left the collective at 100, 130, 90 and 120 us;
        // rank 0 computes at 250 us; m = 10 us, d = 3 us; 2 rounds.
        let (z, w) = suspension_time(
            &[100_000, 130_000, 90_000, 120_000],
            250_000,
            10_000,
            3_000,
            4,
        );
        assert_eq!(w, 160_000);
        assert_eq!(z, 160_000 + 2 * 10_000 + 3_000);
        // Five ranks take three rounds; one rank none.
        assert_eq!(suspension_time(&[0; 5], 10, 1, 0, 5), (13, 10));
        assert_eq!(suspension_time(&[7], 10, 100, 0, 1), (3, 3));
    }
}
