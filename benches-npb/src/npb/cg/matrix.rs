//! CG's matrix generation: one process's block of NPB's random sparse
//! symmetric matrix, built exactly as NPB-MPI's `makea` and `sparse` build
//! it, in compressed sparse row form ([`CsrBlock`]). [`super::block`] turns
//! it into the layout the mat-vec runs on.
//!
//! Construction, for a block owning rows `R` and columns `C`:
//!
//! 1. Every process draws the whole sequence of `na` random sparse vectors
//!    (`sprnvc`: each candidate costs two draws, a value then a position
//!    `⌊nn1 · draw⌋` with `nn1` the smallest power of two ≥ `na`; positions
//!    ≥ `na` or already chosen are skipped, until `nonzer` are chosen), sets
//!    element `i` of vector `i` to 0.5 (`vecset`), and forms the outer
//!    product scaled by `size`, which falls geometrically from 1 to `rcond`.
//! 2. It keeps the triples (row, column, value) that fall in `R × C`, in
//!    generation order (vector, then column, then row), and appends
//!    `rcond − shift` on the diagonal of its block.
//! 3. The triples are bucketed by row, stably, and each row's duplicates are
//!    summed in triple order; a column takes its place in the row the first
//!    time its running sum is nonzero, and entries whose sum is exactly zero
//!    are dropped.
//!
//! The sequence is generated twice (once to count the triples per row, once
//! to place them) so no per-triple row array is stored. The summation order
//! of step 3 and the column order it produces decide the last bits of every
//! mat-vec; they match NPB-MPI, whose results this reproduces.
//!
//! Invariant of [`CsrBlock`] as generated: `row_start` is non-decreasing
//! from 0 to `nnz`, and every column index is below `ncols`.

use std::ops::Range;

use super::grid::CgGrid;
use crate::npb::class::CgParams;
use crate::npb::randlc::Randlc;

/// One process's block of the matrix in compressed sparse row form, with
/// block-local row and column indices, each row in NPB's entry order.
#[derive(Clone, Debug, PartialEq)]
pub struct CsrBlock {
    /// Number of local columns.
    pub ncols: usize,
    /// Row `j` is entries `row_start[j] .. row_start[j + 1]`.
    pub row_start: Vec<usize>,
    /// Column of each entry.
    pub col: Vec<u32>,
    /// Value of each entry.
    pub val: Vec<f64>,
}

/// The random sparse vectors of `makea`, one per call, with the state
/// `sprnvc` and `vecset` need.
struct OuterProducts {
    rng: Randlc,
    n: usize,
    nonzer: usize,
    nn1: f64,
    chosen: Vec<bool>,
    v: Vec<f64>,
    iv: Vec<u32>,
}

impl OuterProducts {
    fn new(rng: Randlc, n: usize, nonzer: usize) -> Self {
        Self {
            rng,
            n,
            nonzer,
            nn1: n.next_power_of_two().max(2) as f64,
            chosen: vec![false; n],
            v: Vec::with_capacity(nonzer + 1),
            iv: Vec::with_capacity(nonzer + 1),
        }
    }

    /// Draws vector `i` (0-based): `nonzer` random entries, then element `i`
    /// set to 0.5.
    fn next(&mut self, i: usize) -> (&[f64], &[u32]) {
        self.v.clear();
        self.iv.clear();
        while self.v.len() < self.nonzer {
            let value = self.rng.next_f64();
            let pos = (self.nn1 * self.rng.next_f64()) as usize;
            if pos < self.n && !self.chosen[pos] {
                self.chosen[pos] = true;
                self.v.push(value);
                self.iv.push(pos as u32);
            }
        }
        for &pos in &self.iv {
            self.chosen[pos as usize] = false;
        }
        let mut set = false;
        for (v, &pos) in self.v.iter_mut().zip(&self.iv) {
            if pos as usize == i {
                *v = 0.5;
                set = true;
            }
        }
        if !set {
            self.v.push(0.5);
            self.iv.push(i as u32);
        }
        (&self.v, &self.iv)
    }
}

/// Calls `f(size, v, iv)` for each of the `na` scaled outer-product vectors,
/// drawing from `rng`.
fn for_each_vector(params: &CgParams, rng: Randlc, mut f: impl FnMut(f64, &[f64], &[u32])) {
    let n = params.na;
    let ratio = params.rcond.powf(1.0 / n as f64);
    let mut gen = OuterProducts::new(rng, n, params.nonzer);
    let mut size = 1.0;
    for i in 0..n {
        let (v, iv) = gen.next(i);
        f(size, v, iv);
        size *= ratio;
    }
}

fn contains(r: &Range<usize>, i: u32) -> bool {
    r.contains(&(i as usize))
}

impl CsrBlock {
    /// Builds this process's block (steps 1-3 of the module doc). `rng` must
    /// be NPB's stream after its first draw.
    pub fn generate(params: &CgParams, grid: &CgGrid, rng: Randlc) -> Self {
        let rows = grid.rows.clone();
        let cols = grid.cols.clone();
        let nrows = rows.len();
        let diag = rows.start.max(cols.start)..rows.end.min(cols.end);

        // Pass 1: triples per local row.
        let mut row_start = vec![0usize; nrows + 1];
        for_each_vector(params, rng, |_, _, iv| {
            let hits = iv.iter().filter(|&&c| contains(&cols, c)).count();
            if hits > 0 {
                for &r in iv.iter().filter(|&&r| contains(&rows, r)) {
                    row_start[r as usize - rows.start + 1] += hits;
                }
            }
        });
        for i in diag.clone() {
            row_start[i - rows.start + 1] += 1;
        }
        for j in 0..nrows {
            row_start[j + 1] += row_start[j];
        }
        let ntriples = row_start[nrows];

        // Pass 2: place the triples, stably bucketed by row.
        let mut next = row_start.clone();
        let mut col = vec![0u32; ntriples];
        let mut val = vec![0.0f64; ntriples];
        for_each_vector(params, rng, |size, v, iv| {
            for (&vc, &c) in v.iter().zip(iv) {
                if !contains(&cols, c) {
                    continue;
                }
                let scale = size * vc;
                for (&vr, &r) in v.iter().zip(iv) {
                    if contains(&rows, r) {
                        let k = &mut next[r as usize - rows.start];
                        col[*k] = c - cols.start as u32;
                        val[*k] = vr * scale;
                        *k += 1;
                    }
                }
            }
        });
        for i in diag {
            let k = &mut next[i - rows.start];
            col[*k] = (i - cols.start) as u32;
            val[*k] = params.rcond - params.shift;
            *k += 1;
        }

        // Step 3: sum duplicates row by row, compacting in place; a row's
        // output never overtakes its input.
        let ncols = cols.len();
        let mut acc = vec![0.0f64; ncols];
        let mut marked = vec![false; ncols];
        let mut order: Vec<u32> = Vec::new();
        let mut nnz = 0;
        let mut start = 0;
        for j in 0..nrows {
            let end = row_start[j + 1];
            order.clear();
            for k in start..end {
                let c = col[k] as usize;
                acc[c] += val[k];
                if !marked[c] && acc[c] != 0.0 {
                    marked[c] = true;
                    order.push(c as u32);
                }
            }
            for &c in &order {
                let c = c as usize;
                marked[c] = false;
                let sum = std::mem::replace(&mut acc[c], 0.0);
                if sum != 0.0 {
                    col[nnz] = c as u32;
                    val[nnz] = sum;
                    nnz += 1;
                }
            }
            start = end;
            row_start[j + 1] = nnz;
        }
        assert!(
            col[..nnz].iter().all(|&c| (c as usize) < ncols),
            "column index out of the block"
        );
        col.truncate(nnz);
        col.shrink_to_fit();
        val.truncate(nnz);
        val.shrink_to_fit();
        Self {
            ncols,
            row_start,
            col,
            val,
        }
    }

    /// Number of local rows.
    pub fn nrows(&self) -> usize {
        self.row_start.len() - 1
    }

    /// Number of stored nonzeros.
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Row `j`: its column indices and values, in NPB's order.
    pub fn row(&self, j: usize) -> (&[u32], &[f64]) {
        let r = self.row_start[j]..self.row_start[j + 1];
        (&self.col[r.clone()], &self.val[r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npb::class::Class;
    use crate::npb::randlc::SEED;

    fn npb_stream() -> Randlc {
        let mut rng = Randlc::new(SEED);
        rng.next_f64();
        rng
    }

    fn dense(b: &CsrBlock) -> Vec<Vec<f64>> {
        let mut m = vec![vec![0.0; b.ncols]; b.nrows()];
        for (j, row) in m.iter_mut().enumerate() {
            let (c, v) = b.row(j);
            for (&c, &v) in c.iter().zip(v) {
                assert_eq!(row[c as usize], 0.0, "duplicate column");
                row[c as usize] = v;
            }
        }
        m
    }

    #[test]
    fn the_whole_matrix_is_symmetric_with_the_shifted_diagonal() {
        let p = Class::S.cg();
        let g = CgGrid::new(p.na, 1, 0).unwrap();
        let b = CsrBlock::generate(&p, &g, npb_stream());
        let m = dense(&b);
        for (i, row) in m.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                // v_i·(s·v_j) and v_j·(s·v_i) may differ in the last bit.
                assert!((v - m[j][i]).abs() <= 1e-15 * v.abs(), "({i}, {j})");
            }
            assert!(row[i] < 0.0, "diagonal dominated by rcond - shift");
        }
        assert!(b.nnz() > p.na * p.nonzer);
        assert!(b.nnz() < p.na * (p.nonzer + 1) * (p.nonzer + 1) + p.na);
    }

    #[test]
    fn blocks_are_the_pieces_of_the_whole_matrix() {
        let p = Class::S.cg();
        let whole = dense(&CsrBlock::generate(
            &p,
            &CgGrid::new(p.na, 1, 0).unwrap(),
            npb_stream(),
        ));
        for nprocs in [2, 4, 8] {
            for me in 0..nprocs {
                let g = CgGrid::new(p.na, nprocs, me).unwrap();
                let b = dense(&CsrBlock::generate(&p, &g, npb_stream()));
                for (j, row) in b.iter().enumerate() {
                    // The same entries; the summation order differs only where
                    // a column lies in another block, which never happens for
                    // one (row, column) pair, so values agree exactly.
                    assert_eq!(row[..], whole[g.rows.start + j][g.cols.clone()]);
                }
            }
        }
    }
}
