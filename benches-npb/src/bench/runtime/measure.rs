//! The measurement loops: what each metric times, and how samples are
//! taken.
//!
//! Every figure is a time per operation. For each metric:
//!
//! 1. **Calibrate**: run the loop with 1, then more operations (at least
//!    twice as many each time) until one run takes an eighth of the sample
//!    time; scale the count so that a run takes the sample time
//!    (`--sample-ms`, default 40 ms). This also warms up stacks, buffers and
//!    connections.
//! 2. **Sample**: [`SAMPLES`] runs of that count, each giving seconds per
//!    operation.
//!
//! The orchestrator keeps the median of a run's samples and the best (lowest)
//! median over the runs ([`super::report`]).
//!
//! What one operation is:
//!
//! | metric          | one operation                                                       |
//! |-----------------|---------------------------------------------------------------------|
//! | `switch`        | one switch: two threads `yield_now` in turn (n yields each = 2n)     |
//! | `spawn`         | spawning an empty thread and running it to its end, in batches of [`SPAWN_BATCH`] |
//! | `invoke_local`  | `invoke(0, echo, (i,))` from rank 0: a direct call                  |
//! | `invoke_remote` | `invoke(1, echo, (i,))` from rank 0: request and reply              |
//! | `ainvoke`       | one call of a window of [`AINVOKE_WINDOW`] `ainvoke(1, echo, ..)` started before the first is waited for |
//! | `invoke_nowait` | one call of a window of [`AINVOKE_WINDOW`] `invoke_nowait(1, echo, ..)` completed by one `fence()` |
//! | `barrier`       | one `barrier()` of a loop run on both ranks through `spmd`, timed on rank 0 |
//! | `round_trip`    | a 16-byte ping-pong without the runtime (comm layer or raw MPI)     |
//!
//! `switch` and `spawn` are measured twice: by the scheduler alone (the
//! orchestrator's process, threads run by `run_ready` on the native
//! stack), and inside a running program on rank 0, where the runtime's
//! loop also polls the network between batches of threads.

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mttl::SyncCell;
use mttl_core::thread;

use crate::bench::comm::endpoint::Endpoint;
use crate::bench::error::BenchError;

/// Timed samples per metric and run.
pub(super) const SAMPLES: usize = 7;

/// Calls started before the first is waited for, in the `ainvoke` metric.
pub(super) const AINVOKE_WINDOW: u64 = 1000;

/// Threads spawned before they run, in the `spawn` metric.
pub(super) const SPAWN_BATCH: u64 = 256;

/// The size of a ping-pong message: about an invoke's (12-byte header and
/// a small argument) or its reply's.
pub(super) const PING_LEN: usize = 16;

/// A run's samples: seconds per operation, by metric (its key in the
/// table above, in results files and in JSON).
pub(super) type Samples = Vec<(String, Vec<f64>)>;

/// Seconds per operation, [`SAMPLES`] times, of `run(n)`, which performs
/// `n` operations and returns how long they took (steps 1 and 2 of the
/// module docs).
pub(super) fn samples(sample_time: Duration, mut run: impl FnMut(u64) -> Duration) -> Vec<f64> {
    let target = sample_time.as_secs_f64();
    let mut n: u64 = 1;
    let per_op = loop {
        let took = run(n).as_secs_f64().max(1e-9);
        if took >= target / 8.0 || n >= 1 << 40 {
            break took / n as f64;
        }
        let grow = (target / 8.0 / took).clamp(2.0, 100.0);
        n = (n as f64 * grow).ceil() as u64;
    };
    let n = ((target / per_op).round() as u64).max(1);
    (0..SAMPLES)
        .map(|_| run(n).as_secs_f64() / n as f64)
        .collect()
}

/// Seconds per operation of each sample, divided by `ops_per_unit` (when
/// a loop's unit holds several operations).
fn per_op(samples: Vec<f64>, ops_per_unit: u64) -> Vec<f64> {
    samples
        .into_iter()
        .map(|s| s / ops_per_unit as f64)
        .collect()
}

/// `switch` and `spawn` by the scheduler alone, in this process (no runtime).
pub(super) fn scheduler_alone(sample_time: Duration) -> Samples {
    let switch = samples(sample_time, |n| {
        for _ in 0..2 {
            thread::spawn("bench:yield", move || {
                for _ in 0..n {
                    thread::yield_now();
                }
            });
        }
        let start = Instant::now();
        while thread::run_ready(usize::MAX) > 0 {}
        start.elapsed()
    });
    let spawn = samples(sample_time, |batches| {
        let start = Instant::now();
        for _ in 0..batches {
            for _ in 0..SPAWN_BATCH {
                thread::spawn("bench:empty", || {
                    black_box(());
                });
            }
            thread::run_ready(usize::MAX);
        }
        start.elapsed()
    });
    vec![
        ("switch".into(), per_op(switch, 2)),
        ("spawn".into(), per_op(spawn, SPAWN_BATCH)),
    ]
}

/// Returns its argument: the callee of every invoke measured.
#[mttl::remote]
fn echo(x: u64) -> u64 {
    x
}

/// Runs `n` barriers and returns how long they took here, in seconds.
#[mttl::remote]
fn barrier_loop(n: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        mttl::barrier();
    }
    start.elapsed().as_secs_f64()
}

/// Every metric of an mttl program, on rank 0 of a two-rank job (rank 1
/// serves).
pub(super) fn in_program(sample_time: Duration) -> Samples {
    let switch = samples(sample_time, |n| {
        let done: SyncCell<()> = SyncCell::new();
        let start = Instant::now();
        for _ in 0..2 {
            let done = done.clone();
            thread::spawn("bench:yield", move || {
                for _ in 0..n {
                    thread::yield_now();
                }
                done.write(());
            });
        }
        done.read();
        done.read();
        start.elapsed()
    });
    let spawn = samples(sample_time, |batches| {
        let start = Instant::now();
        for _ in 0..batches {
            let left = Rc::new(Cell::new(SPAWN_BATCH));
            let done: SyncCell<()> = SyncCell::new();
            for _ in 0..SPAWN_BATCH {
                let (left, done) = (left.clone(), done.clone());
                thread::spawn("bench:empty", move || {
                    left.set(left.get() - 1);
                    if left.get() == 0 {
                        done.write(());
                    }
                });
            }
            done.read();
        }
        start.elapsed()
    });
    let invoke_on = |node: usize| {
        samples(sample_time, move |n| {
            let start = Instant::now();
            for i in 0..n {
                black_box(mttl::invoke(node, echo, (black_box(i),)));
            }
            start.elapsed()
        })
    };
    let invoke_local = invoke_on(0);
    let invoke_remote = invoke_on(1);
    let ainvoke = samples(sample_time, |windows| {
        let start = Instant::now();
        for _ in 0..windows {
            let calls: Vec<_> = (0..AINVOKE_WINDOW)
                .map(|i| mttl::ainvoke(1, echo, (i,)))
                .collect();
            for call in calls {
                black_box(call.wait());
            }
        }
        start.elapsed()
    });
    let invoke_nowait = samples(sample_time, |windows| {
        let start = Instant::now();
        for _ in 0..windows {
            for i in 0..AINVOKE_WINDOW {
                mttl::invoke_nowait(1, echo, (i,));
            }
            mttl::fence();
        }
        start.elapsed()
    });
    let barrier = samples(sample_time, |n| {
        let per_rank = mttl::spmd(barrier_loop, (n,));
        Duration::from_secs_f64(per_rank[0])
    });
    vec![
        ("switch".into(), per_op(switch, 2)),
        ("spawn".into(), per_op(spawn, SPAWN_BATCH)),
        ("invoke_local".into(), invoke_local),
        ("invoke_remote".into(), invoke_remote),
        ("ainvoke".into(), per_op(ainvoke, AINVOKE_WINDOW)),
        (
            "invoke_nowait".into(),
            per_op(invoke_nowait, AINVOKE_WINDOW),
        ),
        ("barrier".into(), barrier),
    ]
}

/// The `round_trip` metric on a comm-layer or raw MPI endpoint: rank 0
/// returns its samples, rank 1 (the echo) an empty list.
///
/// Before each run rank 0 sends the run's round-trip count as an 8-byte
/// message; a count of 0 ends the loop.
pub(super) fn ping_pong(
    ep: &mut impl Endpoint,
    sample_time: Duration,
) -> Result<Vec<f64>, BenchError> {
    let ping = [0x5a_u8; PING_LEN];
    if ep.rank() == 1 {
        loop {
            let len = ep.recv()?;
            let n = u64::from_le_bytes(ep.last().try_into().map_err(|_| BenchError::Protocol {
                rank: 1,
                detail: format!("expected an 8-byte round-trip count, got {len} bytes"),
            })?);
            if n == 0 {
                return Ok(Vec::new());
            }
            for _ in 0..n {
                ep.recv()?;
                ep.send(&ping)?;
            }
        }
    }
    let mut failure = None;
    let samples = samples(sample_time, |n| {
        if failure.is_none() {
            match round_trips(ep, n, &ping) {
                Ok(took) => return took,
                Err(e) => failure = Some(e),
            }
        }
        // After a failure the calibration ends at once; the error is
        // returned below.
        Duration::from_secs(1)
    });
    if let Some(e) = failure {
        return Err(e);
    }
    ep.send(&0u64.to_le_bytes())?;
    Ok(samples)
}

/// Rank 0's side of one run: announces `n`, then times `n` round trips.
fn round_trips(ep: &mut impl Endpoint, n: u64, ping: &[u8]) -> Result<Duration, BenchError> {
    ep.send(&n.to_le_bytes())?;
    let start = Instant::now();
    for _ in 0..n {
        ep.send(ping)?;
        let back = ep.recv()?;
        if back != ping.len() {
            return Err(BenchError::Protocol {
                rank: 0,
                detail: format!("the echo has {back} bytes instead of {}", ping.len()),
            });
        }
    }
    Ok(start.elapsed())
}
