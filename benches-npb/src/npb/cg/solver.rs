//! One CG process: its matrix block and vectors, the conjugate-gradient
//! solve, the outer inverse-power iteration, and the whole benchmark run.
//!
//! One outer iteration ([`CgRank::power_step`]), as NPB-MPI runs it:
//!
//! 1. `conj_grad`: 25 CG iterations on `A·z = x` from `z = 0`. Each one does
//!    `q = A·p` (local mat-vec, row reduction, transpose exchange),
//!    `d = p·q` (row sum), `alpha = rho / d`, `z += alpha·p`,
//!    `r −= alpha·q`, `rho = r·r` (row sum), `beta = rho / rho0`,
//!    `p = r + beta·p`. Then `‖x − A·z‖` (one more mat-vec and row sum).
//! 2. `x·z` and `z·z` (one sum of two values over the process row,
//!    [`CgComm::norm_sum`]), `zeta = shift + 1/(x·z)`, `x = z / ‖z‖`.
//!
//! The benchmark ([`run_benchmark`]) builds the matrix, runs one untimed
//! outer iteration, resets `x` to ones, meets at a barrier and times `niter`
//! outer iterations.
//!
//! With one process there is no communication and the mat-vec writes `q`
//! directly (NPB copies `w` into `q`; the values are the same).

use std::time::Instant;

use super::block::SparseBlock;
use super::comm::{row_reduce, transpose, CgComm};
use super::grid::{CgGrid, GridError};
use super::kernels;
use super::matrix::CsrBlock;
use crate::npb::class::{CgParams, CG_ITMAX};
use crate::npb::randlc::{Randlc, SEED};

/// What one outer iteration reports (NPB prints both).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CgIteration {
    /// `‖x − A·z‖` after the 25 CG iterations.
    pub rnorm: f64,
    /// `shift + 1 / (x·z)`.
    pub zeta: f64,
}

/// One process's share of CG: its matrix block and its vectors.
#[derive(Debug)]
pub struct CgRank {
    params: CgParams,
    grid: CgGrid,
    matrix: SparseBlock,
    /// Column-block vectors.
    x: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    r: Vec<f64>,
    /// Row-block mat-vec result, and the partner's partial sums during a
    /// row reduction.
    w: Vec<f64>,
    partial: Vec<f64>,
}

/// `dst = A·src` across the grid: local mat-vec into `w`, row reduction,
/// transpose exchange into `dst`; or, with one process column, straight into
/// `dst`.
fn distributed_matvec<C: CgComm + ?Sized>(
    comm: &mut C,
    grid: &CgGrid,
    matrix: &SparseBlock,
    src: &[f64],
    w: &mut [f64],
    partial: &mut [f64],
    dst: &mut [f64],
) {
    if grid.l2npcols == 0 {
        matrix.matvec(src, dst);
    } else {
        matrix.matvec(src, w);
        row_reduce(comm, grid, w, partial);
        transpose(comm, grid, w, dst);
    }
}

impl CgRank {
    /// Sets up rank `me` of `nprocs`: its grid position and its matrix block
    /// (NPB's initialisation, untimed), with `x` all ones.
    pub fn new(params: CgParams, nprocs: usize, me: usize) -> Result<Self, GridError> {
        let grid = CgGrid::new(params.na, nprocs, me)?;
        let mut rng = Randlc::new(SEED);
        rng.next_f64();
        let matrix = SparseBlock::from_csr(CsrBlock::generate(&params, &grid, rng));
        let (nrows, ncols) = (grid.nrows(), grid.ncols());
        Ok(Self {
            params,
            grid,
            matrix,
            x: vec![1.0; ncols],
            z: vec![0.0; ncols],
            p: vec![0.0; ncols],
            q: vec![0.0; ncols],
            r: vec![0.0; ncols],
            w: vec![0.0; nrows],
            partial: vec![0.0; nrows],
        })
    }

    /// The class parameters.
    pub fn params(&self) -> &CgParams {
        &self.params
    }

    /// This process's grid position and schedule.
    pub fn grid(&self) -> &CgGrid {
        &self.grid
    }

    /// This process's matrix block.
    pub fn matrix(&self) -> &SparseBlock {
        &self.matrix
    }

    /// The current iterate `x` (this process's column block).
    pub fn x(&self) -> &[f64] {
        &self.x
    }

    /// Resets `x` to all ones (before the timed loop).
    pub fn reset_x(&mut self) {
        self.x.fill(1.0);
    }

    /// 25 CG iterations on `A·z = x`, leaving the solution in `z`; returns
    /// `‖x − A·z‖` (step 1 of the module doc).
    pub fn conj_grad<C: CgComm + ?Sized>(&mut self, comm: &mut C) -> f64 {
        let Self {
            grid,
            matrix,
            x,
            z,
            p,
            q,
            r,
            w,
            partial,
            ..
        } = self;
        let partners = &grid.sum_partners;

        q.fill(0.0);
        z.fill(0.0);
        r.copy_from_slice(x);
        p.copy_from_slice(r);

        let mut rho = [kernels::dot(r, r)];
        comm.row_sum(partners, &mut rho);
        let mut rho = rho[0];

        for _ in 0..CG_ITMAX {
            distributed_matvec(comm, grid, matrix, p, w, partial, q);

            let mut d = [kernels::dot(p, q)];
            comm.row_sum(partners, &mut d);
            let alpha = rho / d[0];
            let rho0 = rho;

            let mut rr = [kernels::update_z_r(alpha, p, q, z, r)];
            comm.row_sum(partners, &mut rr);
            rho = rr[0];
            let beta = rho / rho0;

            kernels::update_p(beta, r, p);
        }

        // r = A·z, then ‖x − r‖.
        distributed_matvec(comm, grid, matrix, z, w, partial, r);
        let mut sum = [kernels::residual_sq(x, r)];
        comm.row_sum(partners, &mut sum);
        sum[0].sqrt()
    }

    /// One outer iteration (steps 1-2 of the module doc).
    pub fn power_step<C: CgComm + ?Sized>(&mut self, comm: &mut C) -> CgIteration {
        let rnorm = self.conj_grad(comm);
        let mut norms = kernels::dot2(&self.x, &self.z);
        comm.norm_sum(&self.grid, &mut norms);
        let zeta = self.params.shift + 1.0 / norms[0];
        let inv_norm = 1.0 / norms[1].sqrt();
        kernels::scale_into(&mut self.x, inv_norm, &self.z);
        CgIteration { rnorm, zeta }
    }
}

/// The outcome of a CG benchmark run on one process.
#[derive(Clone, Debug, PartialEq)]
pub struct CgRun {
    /// The timed iterations, in order.
    pub iterations: Vec<CgIteration>,
    /// Seconds spent setting up (matrix generation), untimed by NPB.
    pub setup_seconds: f64,
    /// Seconds of the timed loop on this process ("Time in seconds" is the
    /// maximum over processes).
    pub seconds: f64,
}

impl CgRun {
    /// The final zeta (0 if no iteration ran).
    pub fn zeta(&self) -> f64 {
        self.iterations.last().map_or(0.0, |it| it.zeta)
    }
}

/// Runs the whole CG benchmark as rank `me` of `nprocs`: set-up, one untimed
/// iteration, a barrier, then `niter` timed iterations.
pub fn run_benchmark<C: CgComm + ?Sized>(
    comm: &mut C,
    params: CgParams,
    nprocs: usize,
    me: usize,
) -> Result<CgRun, GridError> {
    let t0 = Instant::now();
    let mut rank = CgRank::new(params, nprocs, me)?;
    let setup_seconds = t0.elapsed().as_secs_f64();

    rank.power_step(comm);
    rank.reset_x();
    comm.barrier();

    let mut iterations = Vec::with_capacity(params.niter);
    let t0 = Instant::now();
    for _ in 0..params.niter {
        iterations.push(rank.power_step(comm));
    }
    let seconds = t0.elapsed().as_secs_f64();
    Ok(CgRun {
        iterations,
        setup_seconds,
        seconds,
    })
}
