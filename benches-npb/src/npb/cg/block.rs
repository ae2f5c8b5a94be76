//! The storage CG's local mat-vec runs on: a process's matrix block with its
//! rows sorted by length and interleaved in chunks of [`LANES`] (a sliced
//! ELLPACK layout without padding).
//!
//! Layout, built from the [`CsrBlock`] by [`SparseBlock::from_csr`]:
//!
//! 1. `order[q]` is the block row at position `q` when rows are stably
//!    sorted by length, shortest first. Positions are cut into chunks of
//!    [`LANES`]; a last chunk of fewer rows is partial.
//! 2. For each full chunk `c`, entries `chunk_start[c] .. chunk_start[c + 1]`
//!    of `val`/`col` hold the first `common` entries of its rows interleaved:
//!    entry `k` of the row in lane `l` sits at `chunk_start[c] + k·LANES + l`,
//!    where `common` is the length of the chunk's shortest row.
//! 3. The rest of the row at position `q` (all of it in a partial chunk) is
//!    `tail_start[q] .. tail_start[q + 1]` of `tail_val`/`tail_col`. Sorting
//!    makes the rows of a chunk nearly always equally long, so tails are
//!    rare.
//!
//! [`SparseBlock::matvec`] advances the [`LANES`] sums of a chunk together
//! through the interleaved part, then finishes each row's tail. A row's own
//! additions keep NPB's order, so the result is bit-identical to NPB's
//! row-by-row loop; the interleaving only removes the latency of one long
//! chain of dependent additions and turns the matrix into one sequential
//! stream.
//!
//! Invariant: every column index is below `ncols`, and `order` is a
//! permutation of the block's rows.

use super::matrix::CsrBlock;
use crate::npb::prefetch::prefetch;

/// Rows whose sums [`SparseBlock::matvec`] advances together.
pub const LANES: usize = 8;

/// How many entries ahead the mat-vec asks for the matrix stream (2 KiB of
/// values).
const PREFETCH_AHEAD: usize = 256;

/// One process's matrix block in the mat-vec layout of the module doc.
#[derive(Clone, Debug)]
pub struct SparseBlock {
    nrows: usize,
    ncols: usize,
    order: Vec<u32>,
    chunk_start: Vec<usize>,
    val: Vec<f64>,
    col: Vec<u32>,
    tail_start: Vec<usize>,
    tail_val: Vec<f64>,
    tail_col: Vec<u32>,
}

impl SparseBlock {
    /// Lays out `csr` as the module doc says.
    ///
    /// # Panics
    ///
    /// If a column index is not below `csr.ncols`.
    pub fn from_csr(csr: CsrBlock) -> Self {
        let nrows = csr.nrows();
        assert!(
            csr.col.iter().all(|&c| (c as usize) < csr.ncols),
            "a column index lies outside the block's {} columns",
            csr.ncols
        );
        let row = |j: u32| csr.row_start[j as usize]..csr.row_start[j as usize + 1];
        let mut order: Vec<u32> = (0..nrows as u32).collect();
        order.sort_by_key(|&j| row(j).len());

        let mut chunk_start = Vec::with_capacity(nrows / LANES + 1);
        chunk_start.push(0);
        let mut val = Vec::with_capacity(csr.nnz());
        let mut col = Vec::with_capacity(csr.nnz());
        let mut tail_start = Vec::with_capacity(nrows + 1);
        tail_start.push(0);
        let (mut tail_val, mut tail_col) = (Vec::new(), Vec::new());
        for rows in order.chunks(LANES) {
            let common = if rows.len() == LANES {
                rows.iter().map(|&j| row(j).len()).min().unwrap_or(0)
            } else {
                0
            };
            for k in 0..common {
                for &j in rows {
                    let i = row(j).start + k;
                    val.push(csr.val[i]);
                    col.push(csr.col[i]);
                }
            }
            if rows.len() == LANES {
                chunk_start.push(val.len());
            }
            for &j in rows {
                let rest = row(j).start + common..row(j).end;
                tail_val.extend_from_slice(&csr.val[rest.clone()]);
                tail_col.extend_from_slice(&csr.col[rest]);
                tail_start.push(tail_val.len());
            }
        }
        Self {
            nrows,
            ncols: csr.ncols,
            order,
            chunk_start,
            val,
            col,
            tail_start,
            tail_val,
            tail_col,
        }
    }

    /// Number of local rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of local columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.val.len() + self.tail_val.len()
    }

    /// Rebuilds the compressed-sparse-row form, rows in NPB's entry order.
    pub fn to_csr(&self) -> CsrBlock {
        let mut rows: Vec<Vec<(u32, f64)>> = vec![Vec::new(); self.nrows];
        for (c, bounds) in self.chunk_start.windows(2).enumerate() {
            for (k, i) in (bounds[0]..bounds[1]).enumerate() {
                let q = c * LANES + k % LANES;
                rows[self.order[q] as usize].push((self.col[i], self.val[i]));
            }
        }
        for (q, &j) in self.order.iter().enumerate() {
            let tail = self.tail_start[q]..self.tail_start[q + 1];
            rows[j as usize].extend(
                self.tail_col[tail.clone()]
                    .iter()
                    .copied()
                    .zip(self.tail_val[tail].iter().copied()),
            );
        }
        let mut csr = CsrBlock {
            ncols: self.ncols,
            row_start: vec![0],
            col: Vec::with_capacity(self.nnz()),
            val: Vec::with_capacity(self.nnz()),
        };
        for r in rows {
            for (c, v) in r {
                csr.col.push(c);
                csr.val.push(v);
            }
            csr.row_start.push(csr.col.len());
        }
        csr
    }

    /// `y = A·x` on the block: `x` has `ncols` entries, `y` `nrows`. Each
    /// row sums its entries in NPB's order from 0.0.
    pub fn matvec(&self, x: &[f64], y: &mut [f64]) {
        assert_eq!(x.len(), self.ncols, "mat-vec input length");
        assert_eq!(y.len(), self.nrows, "mat-vec output length");
        let full_chunks = self.chunk_start.len() - 1;
        for (c, bounds) in self.chunk_start.windows(2).enumerate() {
            let part = bounds[0]..bounds[1];
            let vals = self.val[part.clone()].chunks_exact(LANES);
            let cols = self.col[part].chunks_exact(LANES);
            let mut sum = [0.0f64; LANES];
            for (step, (v, k)) in vals.zip(cols).enumerate() {
                let i = bounds[0] + step * LANES;
                prefetch(&self.val, i + PREFETCH_AHEAD);
                prefetch(&self.col, i + PREFETCH_AHEAD);
                for l in 0..LANES {
                    // SAFETY: every column index is below `ncols` (checked in
                    // `from_csr`, never changed after) and `x.len() == ncols`
                    // (asserted above).
                    sum[l] += v[l] * unsafe { *x.get_unchecked(k[l] as usize) };
                }
            }
            for (l, s) in sum.into_iter().enumerate() {
                let q = c * LANES + l;
                y[self.order[q] as usize] = self.finish_row(q, s, x);
            }
        }
        for q in full_chunks * LANES..self.nrows {
            y[self.order[q] as usize] = self.finish_row(q, 0.0, x);
        }
    }

    /// `sum` plus the tail entries of the row at position `q`, in order.
    #[inline(always)]
    fn finish_row(&self, q: usize, mut sum: f64, x: &[f64]) -> f64 {
        let tail = self.tail_start[q]..self.tail_start[q + 1];
        for (a, &c) in self.tail_val[tail.clone()].iter().zip(&self.tail_col[tail]) {
            sum += a * x[c as usize];
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npb::cg::grid::CgGrid;
    use crate::npb::class::Class;
    use crate::npb::randlc::{Randlc, SEED};

    fn npb_block(class: Class, nprocs: usize, me: usize) -> CsrBlock {
        let p = class.cg();
        let mut rng = Randlc::new(SEED);
        rng.next_f64();
        CsrBlock::generate(&p, &CgGrid::new(p.na, nprocs, me).unwrap(), rng)
    }

    /// NPB's loop: each row from 0.0, entries in order.
    fn csr_matvec(m: &CsrBlock, x: &[f64]) -> Vec<f64> {
        (0..m.nrows())
            .map(|j| {
                let (c, v) = m.row(j);
                c.iter()
                    .zip(v)
                    .fold(0.0, |s, (&c, &v)| s + v * x[c as usize])
            })
            .collect()
    }

    fn check(csr: CsrBlock) {
        let x: Vec<f64> = (0..csr.ncols)
            .map(|i| 0.5 + (i % 13) as f64 * 0.37)
            .collect();
        let expected = csr_matvec(&csr, &x);
        let block = SparseBlock::from_csr(csr.clone());
        assert_eq!(block.nnz(), csr.nnz());
        let mut y = vec![0.0; csr.nrows()];
        block.matvec(&x, &mut y);
        for (j, (a, b)) in y.iter().zip(&expected).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "row {j}");
        }
        assert_eq!(block.to_csr(), csr);
    }

    #[test]
    fn matvec_is_bit_identical_to_the_row_by_row_loop() {
        check(npb_block(Class::S, 1, 0));
        // Blocks of a 2 × 4 grid: 700 rows, not a multiple of LANES.
        for me in [0, 5] {
            check(npb_block(Class::S, 8, me));
        }
    }

    #[test]
    fn ragged_and_tiny_blocks_keep_every_entry() {
        // Rows of lengths 0..=20, so chunks mix lengths and need tails.
        let mut csr = CsrBlock {
            ncols: 7,
            row_start: vec![0],
            col: Vec::new(),
            val: Vec::new(),
        };
        for j in 0..21usize {
            for k in 0..(j * 7) % 21 {
                csr.col.push(((j + 3 * k) % 7) as u32);
                csr.val.push(1.0 / (1 + j + k) as f64);
            }
            csr.row_start.push(csr.col.len());
        }
        check(csr.clone());
        csr.row_start.truncate(4);
        let nnz = csr.row_start[3];
        csr.col.truncate(nnz);
        csr.val.truncate(nnz);
        check(csr);
    }
}
