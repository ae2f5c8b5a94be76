//! Sparse matrix products fed by broadcasts, the application of the
//! adaptive broadcast's paper: node 0 broadcasts vectors x_1 ... x_K, and
//! every node multiplies its block of rows of a sparse matrix A, stored in
//! compressed sparse columns (CCS), with each as it arrives (Y = A X, one
//! column of X per broadcast). The nonzeros are skewed: a dense band in
//! the middle of the matrix makes one node (the middle one, which forwards
//! most in the binomial tree) work longest, so the others wait for it in
//! the next broadcast. Run it with `MTTL_BCAST=binomial` (the default),
//! `adaptive` or `arrival` and compare the times it prints.
//!
//! Steps, run on every node by one SPMD task:
//!
//! 1. build this node's rows (block distribution) in CCS, each row's
//!    nonzeros from a deterministic generator: `BASE` per row, times up to
//!    `1 + SKEW` in the band around the middle row;
//! 2. K times: node 0 makes x_k, `broadcast_slice` gives it to everyone
//!    (timed), and each node computes its part of A x_k column by column;
//! 3. each node checks every x_k it received against node 0's generator,
//!    and the sum of its products against the same sum taken another way
//!    (its block's column sums dotted with each x_k), and reports; node
//!    0's main checks and prints the times.
//!
//! ```text
//! MTTL_NP=8 cargo run --release --example spmv_bcast                     # binomial
//! MTTL_NP=8 MTTL_BCAST=adaptive cargo run --release --example spmv_bcast  # learned
//! MTTL_NP=4 cargo run --release --example spmv_bcast 20000 40 20         # rows, K, skew
//! ```
//!
//! It prints one line ending in `check: OK` when every node's sums agree
//! (and panics, failing the job, otherwise).

use std::time::Instant;

use mttl::{Decode, Encode};

/// Rows (and columns) of A, K and the skew, unless the arguments say
/// otherwise.
const DEFAULTS: (usize, usize, f64) = (40_000, 60, 30.0);
/// Nonzeros of an ordinary row.
const BASE: usize = 8;
/// The dense band's half width, as a fraction of the rows.
const BAND: f64 = 0.04;

/// What a node reports.
#[derive(Debug, Clone, Copy, Encode, Decode)]
#[bincode(crate = "mttl::bincode")]
struct Report {
    nonzeros: u64,
    /// Seconds in the broadcasts and in the products.
    in_bcast: f64,
    in_products: f64,
    /// The sum of every product's entries, and the same by column sums.
    sum: f64,
    check: f64,
}

/// SplitMix64.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A number in [0, 1) from `x`.
fn unit(x: u64) -> f64 {
    (mix(x) >> 11) as f64 / (1u64 << 53) as f64
}

/// This node's rows in compressed sparse columns: for column j, its
/// entries are `rows[start[j]..start[j + 1]]` (local row numbers) with
/// `values` alike.
struct Ccs {
    local_rows: usize,
    start: Vec<usize>,
    rows: Vec<u32>,
    values: Vec<f64>,
}

impl Ccs {
    /// Step 1: rows `first..first + count` of the `n`-row matrix.
    fn build(n: usize, first: usize, count: usize, skew: f64) -> Ccs {
        let mut by_column: Vec<Vec<(u32, f64)>> = vec![Vec::new(); n];
        for local in 0..count {
            let i = first + local;
            let d = (i as f64 / n as f64 - 0.5) / BAND;
            let nnz = (BASE as f64 * (1.0 + skew * (-d * d).exp())) as usize;
            for k in 0..nnz.min(n) {
                let seed = (i as u64) << 20 | k as u64;
                let j = (mix(seed) % n as u64) as usize;
                by_column[j].push((local as u32, unit(seed ^ 0x5555) - 0.5));
            }
        }
        let mut start = Vec::with_capacity(n + 1);
        let (mut rows, mut values) = (Vec::new(), Vec::new());
        start.push(0);
        for column in by_column {
            for (r, v) in column {
                rows.push(r);
                values.push(v);
            }
            start.push(rows.len());
        }
        Ccs {
            local_rows: count,
            start,
            rows,
            values,
        }
    }

    /// y = (this block) x, column by column.
    fn multiply(&self, x: &[f64], y: &mut [f64]) {
        y.iter_mut().for_each(|v| *v = 0.0);
        for (j, &xj) in x.iter().enumerate() {
            for k in self.start[j]..self.start[j + 1] {
                y[self.rows[k] as usize] += self.values[k] * xj;
            }
        }
    }

    /// The sum of each column's entries.
    fn column_sums(&self) -> Vec<f64> {
        (0..self.start.len() - 1)
            .map(|j| self.values[self.start[j]..self.start[j + 1]].iter().sum())
            .collect()
    }
}

#[mttl::remote]
fn spmv_task(n: u64, products: u64, skew: f64) -> Report {
    let (r, p, n) = (mttl::rank(), mttl::size(), n as usize);
    let first = n * r / p;
    let count = n * (r + 1) / p - first;
    let a = Ccs::build(n, first, count, skew);
    let sums = a.column_sums();
    let mut x = vec![0.0; n];
    let mut y = vec![0.0; a.local_rows];
    let (mut in_bcast, mut in_products, mut sum, mut check) = (0.0, 0.0, 0.0, 0.0);
    for k in 0..products {
        if r == 0 {
            for (j, v) in x.iter_mut().enumerate() {
                *v = unit(k << 32 | j as u64);
            }
        }
        let t = Instant::now();
        mttl::broadcast_slice(0, &mut x);
        in_bcast += t.elapsed().as_secs_f64();
        let wrong = (0..n).find(|&j| x[j] != unit(k << 32 | j as u64));
        assert!(
            wrong.is_none(),
            "rank {r}: entry {wrong:?} of x_{k} is not node 0's"
        );
        let t = Instant::now();
        a.multiply(&x, &mut y);
        in_products += t.elapsed().as_secs_f64();
        sum += y.iter().sum::<f64>();
        check += sums.iter().zip(&x).map(|(s, v)| s * v).sum::<f64>();
    }
    Report {
        nonzeros: a.values.len() as u64,
        in_bcast,
        in_products,
        sum,
        check,
    }
}

fn argument<T: std::str::FromStr>(k: usize, what: &str, default: T) -> T {
    match std::env::args().nth(k) {
        Some(arg) => arg
            .parse()
            .unwrap_or_else(|_| panic!("the {what} must be a number, not {arg:?}")),
        None => default,
    }
}

#[mttl::main]
fn main() {
    let rows: usize = argument(1, "number of rows", DEFAULTS.0);
    let products: usize = argument(2, "number of products", DEFAULTS.1);
    let skew: f64 = argument(3, "skew", DEFAULTS.2);
    assert!(
        rows >= mttl::size(),
        "{rows} rows for {} nodes",
        mttl::size()
    );
    let started = Instant::now();
    let reports = mttl::spmd(spmv_task, (rows as u64, products as u64, skew));
    let elapsed = started.elapsed().as_secs_f64();
    for (rank, rep) in reports.iter().enumerate() {
        // Rounding: each of the nonzeros' products and sums, in another order.
        let tolerance = 1e-12 * (rep.nonzeros * products as u64).max(1) as f64;
        assert!(
            (rep.sum - rep.check).abs() <= tolerance,
            "rank {rank}: the products sum to {} but the column sums give {}",
            rep.sum,
            rep.check
        );
    }
    let nodes = reports.len() as f64;
    let mean = |f: fn(&Report) -> f64| reports.iter().map(f).sum::<f64>() / nodes;
    let heaviest = reports
        .iter()
        .enumerate()
        .max_by_key(|(_, rep)| rep.nonzeros)
        .map_or(0, |(rank, _)| rank);
    let algorithm = std::env::var("MTTL_BCAST").unwrap_or_else(|_| "binomial".to_owned());
    println!(
        "spmv_bcast: {rows} rows, {} nonzeros (most on rank {heaviest}), {products} products on \
         {} nodes, MTTL_BCAST={algorithm}: {elapsed:.3} s end to end, per node {:.3} s in \
         broadcasts and {:.3} s in products (means), check: OK",
        reports.iter().map(|rep| rep.nonzeros).sum::<u64>(),
        reports.len(),
        mean(|rep| rep.in_bcast),
        mean(|rep| rep.in_products),
    );
}
