//! The measurement loops both ranks of a worker job run, and how they agree
//! on iteration counts: fixed ones from the size ([`Plan::for_size`]), and
//! calibrated ones that rank 0 measures and sends to rank 1.
//!
//! For every size, in order:
//!
//! 1. **Round trip** (ping-pong): rank 0 sends `size` bytes with a blocking
//!    send, rank 1 receives them and sends the same message back.
//!    - `rtt_warmup` untimed round trips; rank 0 times the second half of
//!      them and picks `rtt_iters` so that a sample takes about
//!      [`SAMPLE_TIME`];
//!    - rank 0 sends `rtt_iters` to rank 1 (one 8-byte message);
//!    - each of [`SAMPLES`] samples times `rtt_iters` round trips together;
//!      a sample is their mean, in µs.
//! 2. **Bandwidth** (streaming): rank 0 starts `window` non-blocking sends of
//!    `size` bytes and waits until all have completed; rank 1 receives all
//!    `window` messages, then sends one [`ACK_LEN`]-byte acknowledgement,
//!    which rank 0 receives. A window is timed from the first send to the
//!    acknowledgement (filling the send buffers, one per message, happens
//!    before the timer starts).
//!    - [`WARMUP_WINDOWS`] untimed windows; rank 0 picks `windows` from the
//!      last one so that a sample takes about [`SAMPLE_TIME`];
//!    - rank 0 sends `windows` to rank 1 (one 8-byte message);
//!    - each of [`SAMPLES`] samples is `windows` windows; a sample is
//!      payload bytes over their summed time.
//!
//! Only rank 0 times; rank 1 answers.
//!
//! [`interleave`] runs two stacks in one job: at each size, both measure
//! in turns, first, second, second, first ([`TURNS`]), or the other way
//! round, and each keeps the samples of all its turns.

use std::time::{Duration, Instant};

use super::endpoint::Endpoint;
use crate::bench::error::BenchError;

/// Timed samples per size and metric.
pub(super) const SAMPLES: usize = 5;

/// What one sample should take, roughly.
pub(super) const SAMPLE_TIME: Duration = Duration::from_millis(20);

/// The length of the bandwidth acknowledgement.
pub(super) const ACK_LEN: usize = 8;

/// Untimed windows before the bandwidth samples.
pub(super) const WARMUP_WINDOWS: usize = 2;

/// Payload bytes one way of the round-trip warm-up, before clamping.
const WARMUP_BYTES: usize = 4 << 20;
/// Bytes in flight per bandwidth window, before clamping. Every endpoint
/// sends a distinct, freshly written buffer per message (see `endpoint.rs`);
/// a window this small keeps them in cache, and is still deep enough that
/// the acknowledgement costs little.
const WINDOW_BYTES: usize = 4 << 20;
/// Bounds of the calibrated round trips per sample.
const RTT_ITERS: (usize, usize) = (2, 1_000_000);
/// Bounds of the calibrated windows per sample.
const WINDOWS: (usize, usize) = (1, 100_000);

/// Which of two stacks measures, turn by turn, at each size of
/// [`interleave`]: `false` the first, `true` the second. Symmetric, so a
/// drift across the turns (a neighbour starting, caches or clocks warming
/// up) favours neither.
pub(super) const TURNS: [bool; 4] = [false, true, true, false];

/// How many operations of each kind a size gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, mttl::Encode, mttl::Decode)]
#[bincode(crate = "mttl::bincode")]
pub(super) struct Plan {
    /// The message size in bytes.
    pub(super) size: usize,
    /// Untimed round trips before the samples.
    pub(super) rtt_warmup: usize,
    /// Round trips per sample (calibrated).
    pub(super) rtt_iters: usize,
    /// Messages in flight per bandwidth window.
    pub(super) window: usize,
    /// Windows per bandwidth sample (calibrated).
    pub(super) windows: usize,
}

impl Plan {
    /// The fixed part of the plan for messages of `size` bytes (at least 1);
    /// the calibrated counts are 0 until rank 0 measures them.
    pub(super) fn for_size(size: usize) -> Plan {
        let size = size.max(1);
        Plan {
            size,
            rtt_warmup: (WARMUP_BYTES / size).clamp(4, 50),
            rtt_iters: 0,
            window: (WINDOW_BYTES / size).clamp(2, 64),
            windows: 0,
        }
    }
}

/// How many repetitions of something that took `each` fill [`SAMPLE_TIME`].
fn calibrate(each: Duration, bounds: (usize, usize)) -> usize {
    crate::bench::sweep::calibrate(each, SAMPLE_TIME, bounds)
}

/// What rank 0 measured for one size in one run.
#[derive(Debug, Clone, PartialEq, mttl::Encode, mttl::Decode)]
#[bincode(crate = "mttl::bincode")]
pub(super) struct SizeSamples {
    /// The plan that was run, with its calibrated counts.
    pub(super) plan: Plan,
    /// Round-trip samples, µs per round trip.
    pub(super) rtt_us: Vec<f64>,
    /// Bandwidth samples, payload bytes per second.
    pub(super) bw_bytes_per_s: Vec<f64>,
}

/// What rank 0 measured in one run: a single stack's samples, or in a job
/// where two took turns, the first's and the second's (`reference`).
#[derive(Debug, Clone, PartialEq, mttl::Encode, mttl::Decode)]
#[bincode(crate = "mttl::bincode")]
pub(super) struct Samples {
    pub(super) sizes: Vec<SizeSamples>,
    pub(super) reference: Vec<SizeSamples>,
}

/// Runs every size's plan on `ep`. Rank 0 returns its samples; rank 1
/// returns an empty list.
pub(super) fn sweep(
    ep: &mut impl Endpoint,
    sizes: &[usize],
) -> Result<Vec<SizeSamples>, BenchError> {
    let mut results = Vec::new();
    for &size in sizes {
        let mut plan = Plan::for_size(size);
        if ep.rank() == 0 {
            let data = vec![0xA5; plan.size];
            let rtt_us = ping(ep, &mut plan, &data)?;
            let bw_bytes_per_s = stream(ep, &mut plan, &data)?;
            results.push(SizeSamples {
                plan,
                rtt_us,
                bw_bytes_per_s,
            });
        } else {
            pong(ep, &plan)?;
            sink(ep, &plan)?;
        }
    }
    Ok(results)
}

/// Runs every size's plan on `first` and `second`, two stacks joining the
/// same two ranks, in the turns of [`TURNS`], or, if `second_first`, the
/// other way round. Rank 0 returns each stack's samples (`first`'s, then
/// `second`'s), those of its turns together under the plan of its first
/// turn; rank 1 returns empty lists.
///
/// The stack that takes the first turn touches its buffers first, and
/// which memory a buffer gets decides much of a large message's speed, so
/// the orchestrator swaps the order every other sweep.
// Only `mpi-vs-raw` interleaves, and it needs the `mpi` feature.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(super) fn interleave(
    first: &mut impl Endpoint,
    second: &mut impl Endpoint,
    sizes: &[usize],
    second_first: bool,
) -> Result<(Vec<SizeSamples>, Vec<SizeSamples>), BenchError> {
    let (mut firsts, mut seconds) = (Vec::new(), Vec::new());
    for &size in sizes {
        let (mut a, mut b): (Option<SizeSamples>, Option<SizeSamples>) = (None, None);
        for turn in TURNS {
            let (samples, kept) = if turn != second_first {
                (sweep(second, &[size])?, &mut b)
            } else {
                (sweep(first, &[size])?, &mut a)
            };
            for turn in samples {
                match kept {
                    Some(kept) => {
                        kept.rtt_us.extend(turn.rtt_us);
                        kept.bw_bytes_per_s.extend(turn.bw_bytes_per_s);
                    }
                    None => *kept = Some(turn),
                }
            }
        }
        firsts.extend(a);
        seconds.extend(b);
    }
    Ok((firsts, seconds))
}

/// Checks that a received message has the expected length.
fn expect_len(ep: &impl Endpoint, got: usize, want: usize, what: &str) -> Result<(), BenchError> {
    if got == want {
        return Ok(());
    }
    Err(BenchError::Protocol {
        rank: ep.rank(),
        detail: format!("expected {what} of {want} bytes but received {got} bytes"),
    })
}

/// Sends a calibrated count to rank 1.
fn send_count(ep: &mut impl Endpoint, count: usize) -> Result<(), BenchError> {
    ep.send(&(count as u64).to_le_bytes())
}

/// Receives a calibrated count from rank 0.
fn recv_count(ep: &mut impl Endpoint) -> Result<usize, BenchError> {
    let got = ep.recv()?;
    expect_len(ep, got, 8, "an iteration count")?;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&ep.last()[..8]);
    usize::try_from(u64::from_le_bytes(bytes)).map_err(|_| BenchError::Protocol {
        rank: ep.rank(),
        detail: "rank 0 sent an iteration count too large for this machine".into(),
    })
}

/// Rank 0's side of the round-trip measurement (step 1).
fn ping(ep: &mut impl Endpoint, plan: &mut Plan, data: &[u8]) -> Result<Vec<f64>, BenchError> {
    let untimed = plan.rtt_warmup / 2;
    for _ in 0..untimed {
        round_trip(ep, data)?;
    }
    let start = Instant::now();
    for _ in untimed..plan.rtt_warmup {
        round_trip(ep, data)?;
    }
    let timed = (plan.rtt_warmup - untimed) as u32;
    plan.rtt_iters = calibrate(start.elapsed() / timed, RTT_ITERS);
    send_count(ep, plan.rtt_iters)?;
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        for _ in 0..plan.rtt_iters {
            round_trip(ep, data)?;
        }
        samples.push(start.elapsed().as_secs_f64() * 1e6 / plan.rtt_iters as f64);
    }
    Ok(samples)
}

/// One round trip of `data`.
fn round_trip(ep: &mut impl Endpoint, data: &[u8]) -> Result<(), BenchError> {
    ep.send(data)?;
    let got = ep.recv()?;
    expect_len(ep, got, data.len(), "an echo")
}

/// Rank 1's side of the round-trip measurement.
fn pong(ep: &mut impl Endpoint, plan: &Plan) -> Result<(), BenchError> {
    for _ in 0..plan.rtt_warmup {
        echo_one(ep, plan.size)?;
    }
    let iters = recv_count(ep)?;
    for _ in 0..SAMPLES * iters {
        echo_one(ep, plan.size)?;
    }
    Ok(())
}

/// Receives one ping and sends it back.
fn echo_one(ep: &mut impl Endpoint, size: usize) -> Result<(), BenchError> {
    let got = ep.recv()?;
    expect_len(ep, got, size, "a ping")?;
    ep.reply()
}

/// Rank 0's side of the bandwidth measurement (step 2).
fn stream(ep: &mut impl Endpoint, plan: &mut Plan, data: &[u8]) -> Result<Vec<f64>, BenchError> {
    let mut last = Duration::ZERO;
    for _ in 0..WARMUP_WINDOWS {
        last = window(ep, data, plan.window)?;
    }
    plan.windows = calibrate(last, WINDOWS);
    send_count(ep, plan.windows)?;
    let bytes = (plan.size * plan.window * plan.windows) as f64;
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let mut busy = Duration::ZERO;
        for _ in 0..plan.windows {
            busy += window(ep, data, plan.window)?;
        }
        samples.push(bytes / busy.as_secs_f64());
    }
    Ok(samples)
}

/// One window of `count` sends of `data`, timed from the first send to the
/// acknowledgement; the buffers are readied before the timer starts.
fn window(ep: &mut impl Endpoint, data: &[u8], count: usize) -> Result<Duration, BenchError> {
    ep.prepare_window(data, count);
    let start = Instant::now();
    ep.send_window(data, count)?;
    let got = ep.recv()?;
    let elapsed = start.elapsed();
    expect_len(ep, got, ACK_LEN, "an acknowledgement")?;
    Ok(elapsed)
}

/// Rank 1's side of the bandwidth measurement.
fn sink(ep: &mut impl Endpoint, plan: &Plan) -> Result<(), BenchError> {
    let ack = [0u8; ACK_LEN];
    for _ in 0..WARMUP_WINDOWS {
        drain_window(ep, plan, &ack)?;
    }
    let windows = recv_count(ep)?;
    for _ in 0..SAMPLES * windows {
        drain_window(ep, plan, &ack)?;
    }
    Ok(())
}

/// Receives one window of messages and acknowledges it.
fn drain_window(ep: &mut impl Endpoint, plan: &Plan, ack: &[u8]) -> Result<(), BenchError> {
    for _ in 0..plan.window {
        let got = ep.recv()?;
        expect_len(ep, got, plan.size, "a streamed message")?;
    }
    ep.send(ack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_clamped() {
        let tiny = Plan::for_size(8);
        assert_eq!((tiny.rtt_warmup, tiny.window), (50, 64));
        let huge = Plan::for_size(16 << 20);
        assert_eq!((huge.rtt_warmup, huge.window), (4, 2));
        assert_eq!(Plan::for_size(64 << 10).window, 64);
        assert_eq!(Plan::for_size(1 << 20).window, 4);
        assert_eq!(Plan::for_size(0).size, 1);
    }

    /// Rank 0 of a two-rank job whose peer echoes at once: a round trip
    /// or a window "takes" `delay`, recorded by sleeping that long.
    struct Scripted {
        delay: Duration,
        /// The length of the reply the next `recv` returns.
        pending: usize,
        /// The sizes of the windows sent, in order.
        windows: Vec<usize>,
    }

    impl Scripted {
        fn new(delay: Duration) -> Scripted {
            Scripted {
                delay,
                pending: 0,
                windows: Vec::new(),
            }
        }
    }

    impl Endpoint for Scripted {
        fn rank(&self) -> usize {
            0
        }
        fn send(&mut self, data: &[u8]) -> Result<(), BenchError> {
            // A round trip's ping is echoed; a count is not answered.
            self.pending = data.len();
            std::thread::sleep(self.delay);
            Ok(())
        }
        fn recv(&mut self) -> Result<usize, BenchError> {
            Ok(std::mem::take(&mut self.pending))
        }
        fn last(&self) -> &[u8] {
            &[]
        }
        fn reply(&mut self) -> Result<(), BenchError> {
            unreachable!("rank 0 never replies")
        }
        fn prepare_window(&mut self, _data: &[u8], _count: usize) {}
        fn send_window(&mut self, data: &[u8], _count: usize) -> Result<(), BenchError> {
            self.windows.push(data.len());
            std::thread::sleep(self.delay);
            self.pending = ACK_LEN;
            Ok(())
        }
    }

    #[test]
    fn interleaving_keeps_each_stacks_samples_of_all_its_turns() {
        let mut fast = Scripted::new(Duration::from_micros(200));
        let mut slow = Scripted::new(Duration::from_micros(800));
        let (a, b) = interleave(&mut fast, &mut slow, &[8, 64 << 10], false).unwrap();
        let turns = |first: bool| TURNS.iter().filter(|&&t| t == first).count();
        for (samples, side) in [(&a, false), (&b, true)] {
            let sizes: Vec<usize> = samples.iter().map(|s| s.plan.size).collect();
            assert_eq!(sizes, [8, 64 << 10], "one entry per size, in order");
            for s in samples {
                assert_eq!(s.rtt_us.len(), SAMPLES * turns(side));
                assert_eq!(s.bw_bytes_per_s.len(), SAMPLES * turns(side));
            }
        }
        // Each stack measured only through its own endpoint.
        let median = |v: &[f64]| crate::bench::sweep::report::median(v).unwrap();
        for (fast, slow) in a.iter().zip(&b) {
            assert!(median(&fast.rtt_us) < median(&slow.rtt_us));
            assert!(median(&fast.bw_bytes_per_s) > median(&slow.bw_bytes_per_s));
        }
        for ep in [&fast, &slow] {
            assert!(ep.windows.contains(&8) && ep.windows.contains(&(64 << 10)));
            assert!(ep.windows.iter().all(|&len| len == 8 || len == 64 << 10));
        }
        // The other order: the same split of samples, the first's first.
        let (a, b) = interleave(&mut fast, &mut slow, &[8], true).unwrap();
        // Medians, not every sample: a loaded machine may stretch one sleep.
        assert!(median(&a[0].rtt_us) < median(&b[0].rtt_us));
        assert_eq!(a[0].rtt_us.len(), b[0].rtt_us.len());
    }

    #[test]
    fn turns_are_symmetric() {
        assert!(TURNS.iter().eq(TURNS.iter().rev()), "a palindrome");
        assert_eq!(
            TURNS.iter().filter(|&&t| t).count(),
            TURNS.iter().filter(|&&t| !t).count()
        );
    }
}
