//! The skeleton of NPB CG's mttl driver (`benches-npb`'s `cg_mttl.rs`),
//! from CG's process grid in `mttl_kernels::cg_grid`.
//!
//! Node 0's main calls `cg_init(class)` on every node (each builds its
//! block of the matrix, takes part in an `allreduce_max` of the longest
//! exchange, and returns its landing array's pointer and a time), then
//! `cg_kernel(landings)`: one untimed power step, a barrier, `niter` timed
//! ones; a power step is the 25 CG iterations of `conj_grad` and the
//! allreduce of two norms. Every exchange with a partner (not the node itself)
//! writes the values into the partner's landing buffer and a flag after
//! them, and takes the partner's two writes. An exchange's lengths are the
//! grid's: the row reduction's steps, the transpose's `send_len` and
//! `exch_recv_len`, one value for a row sum. The outer iteration's two
//! norms are an allreduce of two values over the job. The TCP and local
//! backends are modelled (the MPI backend's extra handshake of long
//! exchanges is not).
//!
//! Work per rank, for scaling computation: the rows times the columns of
//! its block (the mat-vec's share, at the matrix's even density).

use mttl_kernels::cg_grid::CgGrid;
use mttl_kernels::class::{Class, CG_ITMAX};

use super::runtime::{first_reply_to_rank0, varint_len, wire, Emitter};
use super::Step;
use crate::ti::TiTrace;

/// CG's skeleton for one class, with what it learned.
#[derive(Debug, Clone)]
pub(crate) struct Cg {
    na: usize,
    niter: usize,
    /// Bytes of a global pointer's region and offset.
    ptr_rest: u64,
}

const F64: u64 = 8;

impl Cg {
    /// The skeleton of class `class` (a letter); learns the size of a
    /// global pointer from rank 1's reply to `cg_init`.
    pub(crate) fn new(class: char, real: &TiTrace) -> Result<Cg, String> {
        let class: Class = class
            .to_string()
            .parse()
            .map_err(|e| format!("--class: {e}"))?;
        let p = class.cg();
        let ptr_rest = if real.ranks.len() < 2 {
            0
        } else {
            let bytes = first_reply_to_rank0(real)
                .ok_or("rank 1 never replies to rank 0 (to `cg_init`)")?;
            bytes
                .checked_sub(wire::CELL_WRITE_HEADER + F64 + varint_len(1))
                .ok_or_else(|| format!("rank 1's reply to `cg_init` has {bytes} bytes, too few"))?
        };
        Ok(Cg {
            na: p.na,
            niter: p.niter,
            ptr_rest,
        })
    }

    fn ptr(&self, node: usize) -> u64 {
        varint_len(node as u64) + self.ptr_rest
    }

    fn grid(&self, me: usize, n: usize) -> Result<CgGrid, String> {
        CgGrid::new(self.na, n, me).map_err(|e| e.to_string())
    }

    /// The work of rank `me` of `n`.
    pub(crate) fn work(&self, me: usize, n: usize) -> f64 {
        self.grid(me, n)
            .map_or(1.0, |g| (g.nrows() * g.ncols()).max(1) as f64)
    }

    /// Rank `me` of `n` (see the module docs).
    pub(crate) fn steps(&self, me: usize, n: usize) -> Result<Vec<Step>, String> {
        let grid = self.grid(me, n)?;
        // The partners' grids: what they send this rank.
        let mut partners: Vec<usize> = grid.reduce_steps.iter().map(|s| s.partner).collect();
        partners.push(grid.exch_proc);
        let grids: Vec<(usize, CgGrid)> = partners
            .into_iter()
            .map(|r| Ok((r, self.grid(r, n)?)))
            .collect::<Result<_, String>>()?;
        let grids = Partners(grids);
        let mut e = Emitter::new(me, n);
        // cg_init(class): the matrix, then allreduce_max of one usize.
        e.spmd_call(1);
        e.compute();
        e.allreduce(8);
        e.spmd_return(|d| self.ptr(d) + F64);
        // cg_kernel(landings).
        let landings = varint_len(n as u64) + (0..n).map(|d| self.ptr(d)).sum::<u64>();
        e.spmd_call(landings);
        let mut written_any = Vec::new();
        for outer in 0..=self.niter {
            power_step(&mut e, &grid, &grids);
            if outer == 0 {
                // reset_x, then the barrier before the timed loop.
                e.compute();
                written_any = e.fence_out();
                for &w in &written_any {
                    e.fence_in(w);
                }
                e.fence_wait(&written_any);
                e.dissemination();
            }
        }
        let _ = written_any;
        e.compute();
        e.spmd_return(|_| varint_len(self.niter as u64) + 2 * F64 * self.niter as u64 + F64);
        e.exit();
        Ok(e.steps)
    }
}

/// The grids of a rank's partners.
struct Partners(Vec<(usize, CgGrid)>);

impl std::ops::Index<usize> for Partners {
    type Output = CgGrid;
    fn index(&self, rank: usize) -> &CgGrid {
        &self
            .0
            .iter()
            .find(|(r, _)| *r == rank)
            .expect("a partner's grid")
            .1
    }
}

/// One exchange with `partner`: `send` values out, `recv` values in.
fn exchange(e: &mut Emitter, partner: usize, send: usize, recv: usize) {
    if partner == e.me {
        return;
    }
    e.nwrite(partner, F64 * send as u64);
    e.nwrite(partner, F64);
    e.nwrite_in(partner, F64 * recv as u64);
    e.nwrite_in(partner, F64);
}

/// A row sum of `values` values: an exchange with each sum partner.
fn row_sum(e: &mut Emitter, grid: &CgGrid, values: usize) {
    e.compute();
    for &p in &grid.sum_partners {
        exchange(e, p, values, values);
    }
}

/// `A·p` across the grid: the mat-vec, the row reduction, the transpose.
fn matvec(e: &mut Emitter, grid: &CgGrid, grids: &Partners) {
    e.compute();
    if grid.l2npcols == 0 {
        return;
    }
    for (step, s) in grid.reduce_steps.iter().enumerate() {
        let theirs = grids[s.partner].reduce_steps[step].send.len();
        exchange(e, s.partner, s.send.len(), theirs);
    }
    let theirs = grids[grid.exch_proc].send_len;
    exchange(e, grid.exch_proc, grid.send_len, theirs);
}

/// One outer iteration: `conj_grad`, then x·z and z·z summed over the job
/// (`CgComm::norm_sum`: an allreduce of two values).
fn power_step(e: &mut Emitter, grid: &CgGrid, grids: &Partners) {
    row_sum(e, grid, 1);
    for _ in 0..CG_ITMAX {
        matvec(e, grid, grids);
        row_sum(e, grid, 1);
        row_sum(e, grid, 1);
    }
    matvec(e, grid, grids);
    row_sum(e, grid, 1);
    e.compute();
    e.allreduce(2 * F64);
}
