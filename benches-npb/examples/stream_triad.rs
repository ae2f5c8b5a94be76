//! Memory bandwidth, STREAM-style: the triad `a[i] = b[i] + s · c[i]` and
//! the copy `a[i] = b[i]` over arrays much larger than the caches, on 1 and
//! 2 threads, each thread with arrays of its own (touched first by it), all
//! threads starting together. The figure to hold NPB IS and CG against:
//! what a kernel moves per second as a fraction of it.
//!
//! ```text
//! cargo run --release -p benches-npb --example stream_triad -- --mib 256 --reps 10
//! ```
//!
//! Bytes are counted as STREAM counts them: 24 per triad element, 16 per
//! copy element (the write's read for ownership, which the hardware also
//! moves unless the stores stream, is not counted). Each line printed is
//! the best and the median over `--reps` timed passes after one untimed
//! pass; with several threads a pass lasts from the common start to the
//! last thread's end.
//!
//! `--npb-bytes B,C` also prints what NPB IS and CG of those classes move
//! through memory in their timed part, counted the same way, so that a
//! kernel's time gives its fraction of the triad's bandwidth:
//!
//! - IS, per key and ranking: the histogram reads it (4 B), the bucket sort
//!   reads it and writes it (8 B), the count reads it (4 B): 16 B; the
//!   count's increments land in a table of `max_key` integers (8 MiB for
//!   class B), which the last-level cache holds. With keys exchanged
//!   between processes, each key sent is also read and written once more.
//! - CG, per mat-vec: each stored nonzero's value and column (12 B); the
//!   vectors (`na` values) stay in the caches. 26 mat-vecs per outer
//!   iteration (25 CG iterations and the residual's).

use std::sync::Barrier;
use std::time::Instant;

use benches_npb::npb::cg::{CgGrid, CsrBlock};
use benches_npb::npb::class::{CG_ITMAX, IS_ITERATIONS};
use benches_npb::npb::randlc::{Randlc, SEED};
use benches_npb::npb::Class;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(about = "STREAM-like memory bandwidth: triad and copy, 1 and 2 threads")]
struct Args {
    /// MiB per array per thread (three arrays of f64 each).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=65536))]
    mib: u64,
    /// Timed passes; best and median are printed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
    /// Also print the bytes NPB IS and CG of these classes move (CG's
    /// matrix is generated for it: seconds for class B).
    #[arg(long, value_delimiter = ',')]
    npb_bytes: Vec<Class>,
}

/// Prints the bytes the timed parts of IS and CG of `class` move.
fn npb_bytes(class: Class) {
    if let Ok(is) = class.is() {
        let keys = is.total_keys();
        let bytes = 16.0 * keys as f64 * IS_ITERATIONS as f64;
        println!(
            "IS {class}: {keys} keys x {IS_ITERATIONS} rankings x 16 B = {:.2} GB (+ 8 B per key sent to another process)",
            bytes / 1e9
        );
    }
    let cg = class.cg();
    match CgGrid::new(cg.na, 1, 0) {
        Ok(grid) => {
            let mut rng = Randlc::new(SEED);
            rng.next_f64();
            let nnz = CsrBlock::generate(&cg, &grid, rng).nnz();
            let matvecs = cg.niter * (CG_ITMAX + 1);
            println!(
                "CG {class}: {nnz} nonzeros x 12 B x {matvecs} mat-vecs = {:.2} GB",
                12.0 * nnz as f64 * matvecs as f64 / 1e9
            );
        }
        Err(e) => println!("CG {class}: {e}"),
    }
}

/// One thread's arrays.
struct Arrays {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Arrays {
    fn new(len: usize) -> Arrays {
        Arrays {
            a: vec![0.0; len],
            b: vec![1.0; len],
            c: vec![2.0; len],
        }
    }

    fn triad(&mut self, s: f64) {
        for ((a, b), c) in self.a.iter_mut().zip(&self.b).zip(&self.c) {
            *a = b + s * c;
        }
    }

    fn copy(&mut self) {
        self.a.copy_from_slice(&self.b);
    }
}

#[derive(Clone, Copy)]
enum Kernel {
    Triad,
    Copy,
}

impl Kernel {
    fn bytes_per_element(self) -> usize {
        match self {
            Kernel::Triad => 24,
            Kernel::Copy => 16,
        }
    }
}

/// Seconds of each timed pass of `kernel` on `threads` threads.
fn passes(kernel: Kernel, threads: usize, len: usize, reps: u32) -> Vec<f64> {
    let start = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut arrays = Arrays::new(len);
                for rep in 0..=reps {
                    start.wait();
                    match kernel {
                        Kernel::Triad => arrays.triad(3.0 + f64::from(rep)),
                        Kernel::Copy => arrays.copy(),
                    }
                    std::hint::black_box(&arrays.a);
                    end.wait();
                }
            });
        }
        let mut seconds = Vec::new();
        for rep in 0..=reps {
            start.wait();
            let t0 = Instant::now();
            end.wait();
            if rep > 0 {
                seconds.push(t0.elapsed().as_secs_f64());
            }
        }
        seconds
    })
}

fn main() {
    let args = Args::parse();
    let len = (args.mib << 20) as usize / std::mem::size_of::<f64>();
    println!(
        "STREAM-like bandwidth, {} MiB per array per thread, best / median of {} passes",
        args.mib, args.reps
    );
    println!(
        "{:<8} {:>7} {:>12} {:>12}",
        "kernel", "threads", "best GB/s", "median GB/s"
    );
    for &threads in &args.threads {
        for (name, kernel) in [("triad", Kernel::Triad), ("copy", Kernel::Copy)] {
            let mut seconds = passes(kernel, threads.max(1), len, args.reps);
            seconds.sort_by(f64::total_cmp);
            let bytes = (kernel.bytes_per_element() * len * threads.max(1)) as f64;
            let gbs = |s: f64| bytes / s / 1e9;
            println!(
                "{name:<8} {threads:>7} {:>12.2} {:>12.2}",
                gbs(seconds[0]),
                gbs(seconds[seconds.len() / 2])
            );
        }
    }
    for &class in &args.npb_bytes {
        npb_bytes(class);
    }
}
