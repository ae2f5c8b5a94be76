//! The small programs `mttl-bench trace` traces besides NPB CG and IS, run
//! as `mttl-bench trace --worker NAME --iters N --size M` under a
//! self-launched mttl job (`MTTL_NP`, `MTTL_BACKEND`). Node 0's main
//! starts the same task on every node with [`mttl::spmd`]; each task times
//! its loop inside the trace region [`TIMED_REGION`], and node 0 prints one
//! result line ([`RESULT_PREFIX`] and a JSON object: the slowest node's
//! `seconds`, and for the matrix product its `compute_seconds`).
//!
//! - `pingpong` (2 nodes): `iters` round trips of one 8-byte remote write
//!   each way, every receive recorded; a barrier every [`PINGPONG_EVERY`]
//!   round trips (the authors' first paper suspended there).
//! - `matmul`: `iters` products `C = A·B` of `size × size` matrices, rows
//!   of A and C spread over the nodes, B broadcast block row by block row
//!   from its owner; the local block products are timed apart, to show
//!   how much a trace write costs the computation after it (caches): the
//!   products right after a broadcast during which the node wrote its
//!   trace (its file grew) against the others.
//! - `heavy`: `iters` iterations of `size` small invokes and `size` 8-byte
//!   nwrites to the next node each, then a barrier: a trace that grows
//!   fast with few collectives.
//! - `events` (1 node): `iters` user regions opened and closed at once, two
//!   recorded events each: traced against untraced, the recording cost of
//!   one event. Its `seconds` are the thread's CPU time, which time taken
//!   by other processes does not inflate.

use std::time::Instant;

use mttl::{GlobalArray, GlobalPtr};

use crate::npb::drivers::TIMED_REGION;

/// What starts node 0's result line on stdout.
pub const RESULT_PREFIX: &str = "mttl-bench-trace-result ";

/// Round trips between two barriers in `pingpong`.
pub const PINGPONG_EVERY: u64 = 4096;

/// The small programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Program {
    /// Ping-pong of 8-byte remote writes between two nodes.
    Pingpong,
    /// Blocked matrix product with broadcasts.
    Matmul,
    /// Many small invokes and nwrites, a barrier per iteration.
    Heavy,
    /// Empty user regions, for the cost of recording an event.
    Events,
}

/// Waits (yielding to the runtime, which applies incoming writes) until
/// element `at` of `landing` is `seq`.
fn wait_for(landing: &GlobalArray<u64>, at: usize, seq: u64) {
    let mut polls = 0u32;
    while landing.get(at) != seq {
        mttl::yield_now();
        polls = polls.wrapping_add(1);
        if polls % 4096 == 0 {
            std::thread::yield_now();
        }
    }
}

/// `pingpong` on one node: seconds of its loop.
#[mttl::remote]
fn pingpong_task(iters: u64) -> f64 {
    let landing = GlobalArray::<u64>::new(1);
    let ptrs = mttl::allgather(landing.global_ptr());
    let me = mttl::rank();
    let other = ptrs[1 - me];
    mttl::barrier();
    let timed = mttl::trace::region(TIMED_REGION);
    let t0 = Instant::now();
    for i in 1..=iters {
        if me == 0 {
            other.nwrite(i);
            wait_for(&landing, 0, i);
        } else {
            wait_for(&landing, 0, i);
            other.nwrite(i);
        }
        if i % PINGPONG_EVERY == 0 {
            mttl::barrier();
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    drop(timed);
    mttl::barrier();
    seconds
}

/// This rank's trace file, if the run is traced.
fn own_trace_file() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("MTTL_TRACE").filter(|d| !d.is_empty())?;
    Some(std::path::Path::new(&dir).join(format!("rank-{:05}.mttltrace", mttl::rank())))
}

/// What one node's `matmul` measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct MatmulTimes {
    /// Its loop, s.
    pub seconds: f64,
    /// Its block products, s.
    pub compute: f64,
    /// The sum of C (a check that the product ran).
    pub checksum: f64,
    /// Block products run right after a broadcast during which this node
    /// wrote its trace (its file grew): how many, and their time, s.
    pub after_flush: (u64, f64),
    /// The other block products: how many, and their time, s.
    pub other: (u64, f64),
}

/// `matmul` on one node: seconds of its loop and of its block products,
/// those right after a trace write apart (the file's size, read before
/// each block product, tells: a write happens only at a collective).
#[mttl::remote]
fn matmul_task(n: u64, iters: u64) -> MatmulWire {
    let (n, p, me) = (n as usize, mttl::size(), mttl::rank());
    let rows = n / p;
    // This node's rows of A, C and B (B's are broadcast to all).
    let a: Vec<f64> = (0..rows * n)
        .map(|i| ((i + me * rows * n) % 7) as f64 - 3.0)
        .collect();
    let mine_b: Vec<f64> = (0..rows * n)
        .map(|i| ((i + me * rows * n) % 5) as f64 - 2.0)
        .collect();
    let mut c = vec![0.0f64; rows * n];
    let mut block = vec![0.0f64; rows * n];
    let file = own_trace_file();
    let file_len = || {
        file.as_ref()
            .and_then(|f| std::fs::metadata(f).ok())
            .map_or(0, |m| m.len())
    };
    let mut out = MatmulTimes::default();
    mttl::barrier();
    let mut written = file_len();
    let timed = mttl::trace::region(TIMED_REGION);
    let t0 = Instant::now();
    for _ in 0..iters {
        c.fill(0.0);
        for root in 0..p {
            if root == me {
                block.copy_from_slice(&mine_b);
            }
            mttl::broadcast_slice(root, &mut block);
            let now_written = file_len();
            let t = Instant::now();
            // C[i, :] += A[i, root's columns] · B[root's rows, :]
            for i in 0..rows {
                let c_row = &mut c[i * n..(i + 1) * n];
                for k in 0..rows {
                    let aik = a[i * n + root * rows + k];
                    let b_row = &block[k * n..(k + 1) * n];
                    for (cij, bkj) in c_row.iter_mut().zip(b_row) {
                        *cij += aik * bkj;
                    }
                }
            }
            let dt = t.elapsed().as_secs_f64();
            out.compute += dt;
            let slot = if now_written > written {
                &mut out.after_flush
            } else {
                &mut out.other
            };
            slot.0 += 1;
            slot.1 += dt;
            written = now_written;
        }
    }
    out.seconds = t0.elapsed().as_secs_f64();
    drop(timed);
    out.checksum = c.iter().sum();
    (
        out.seconds,
        out.compute,
        out.checksum,
        out.after_flush,
        out.other,
    )
}

/// [`MatmulTimes`] as a remote call returns it.
type MatmulWire = (f64, f64, f64, (u64, f64), (u64, f64));

impl From<MatmulWire> for MatmulTimes {
    fn from((seconds, compute, checksum, after_flush, other): MatmulWire) -> Self {
        MatmulTimes {
            seconds,
            compute,
            checksum,
            after_flush,
            other,
        }
    }
}

/// The function `heavy` invokes: as small as a call gets.
#[mttl::remote]
fn heavy_add(x: u64) -> u64 {
    x + 1
}

/// `heavy` on one node: seconds of its loop; fails if a call answered
/// wrong.
#[mttl::remote]
fn heavy_task(iters: u64, per: u64) -> Result<f64, String> {
    let landing = GlobalArray::<u64>::new(per.max(1) as usize);
    let ptrs: Vec<GlobalPtr<u64>> = mttl::allgather(landing.global_ptr());
    let (me, p) = (mttl::rank(), mttl::size());
    let next = (me + 1) % p;
    mttl::barrier();
    let timed = mttl::trace::region(TIMED_REGION);
    let t0 = Instant::now();
    for i in 0..iters {
        for k in 0..per {
            let x = i * per + k;
            let y = mttl::invoke(next, heavy_add, (x,));
            if y != x + 1 {
                return Err(format!("node {next} answered {y} to heavy_add({x})"));
            }
            ptrs[next].add(k as usize).nwrite(x);
        }
        mttl::barrier();
    }
    let seconds = t0.elapsed().as_secs_f64();
    drop(timed);
    Ok(seconds)
}

/// The CPU time of this OS thread, s: a loaded machine's descheduling does
/// not count (the event-cost loop neither blocks nor switches threads).
fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID
    // exists on Linux and macOS.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Runs `program` as node 0's main of this job and prints its result
/// line; the exit status of the job.
pub fn run(program: Program, iters: u64, size: u64) -> i32 {
    mttl::start(move || -> Result<(), String> {
        let p = mttl::size();
        let mut blocks = None;
        let (seconds, compute) = match program {
            Program::Pingpong => {
                if p != 2 {
                    return Err(format!("pingpong runs on 2 nodes, not {p}"));
                }
                let t = mttl::spmd(pingpong_task, (iters,));
                (t.into_iter().fold(0.0, f64::max), None)
            }
            Program::Matmul => {
                if size == 0 || size % p as u64 != 0 {
                    return Err(format!(
                        "matmul needs a matrix size that {p} nodes divide, not {size}"
                    ));
                }
                let t: Vec<MatmulTimes> = mttl::spmd(matmul_task, (size, iters))
                    .into_iter()
                    .map(MatmulTimes::from)
                    .collect();
                let total: f64 = t.iter().map(|r| r.checksum).sum();
                if !total.is_finite() {
                    return Err("matmul's product is not finite".to_owned());
                }
                let seconds = t.iter().map(|r| r.seconds).fold(0.0, f64::max);
                let compute = t.iter().map(|r| r.compute).fold(0.0, f64::max);
                // Mean block product after a trace write and otherwise,
                // over all nodes.
                let mean = |f: fn(&MatmulTimes) -> (u64, f64)| {
                    let (n, s) = t
                        .iter()
                        .map(f)
                        .fold((0, 0.0), |(n, s), (m, x)| (n + m, s + x));
                    (n > 0).then(|| s / n as f64)
                };
                blocks = Some(serde_json::json!({
                    "after_flush": t.iter().map(|r| r.after_flush.0).sum::<u64>(),
                    "after_flush_mean_seconds": mean(|r| r.after_flush),
                    "other_mean_seconds": mean(|r| r.other),
                }));
                (seconds, Some(compute))
            }
            Program::Events => {
                let t0 = thread_cpu_seconds();
                for _ in 0..iters {
                    let region = mttl::trace::region("event cost");
                    drop(std::hint::black_box(region));
                }
                (thread_cpu_seconds() - t0, None)
            }
            Program::Heavy => {
                let t = mttl::spmd(heavy_task, (iters, size));
                let mut worst = 0.0f64;
                for r in t {
                    worst = worst.max(r?);
                }
                (worst, None)
            }
        };
        let doc = serde_json::json!({
            "seconds": seconds,
            "compute_seconds": compute,
            "blocks": blocks,
        });
        println!("{RESULT_PREFIX}{doc}");
        Ok(())
    })
}
