//! NPB CG on plain MPI, the baseline ("C+MPI"): NPB 3.4-MPI's structure on
//! rsmpi. Every process runs the whole program: it builds its block of the
//! matrix (`cg_init`), then runs the benchmark (`cg_kernel`), exchanging
//! vectors with NPB's `MPI_Irecv` / `MPI_Send` / `MPI_Wait`; the slowest
//! process's time comes from an `MPI_Allreduce`.
//!
//! `cg_mttl.rs` is the same program in the paper's style; `npb --line-diff`
//! counts the lines that differ.

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::error::{check_size, DriverError};
use super::mpi_counts::MpiCounts;
use super::report::{Kernel, Outcome, Variant};
use crate::npb::cg::{CgComm, CgIteration, CgRank, Exchange};
use crate::npb::Class;

/// CG's communication on MPI.
struct MpiCg {
    world: SimpleCommunicator,
    counts: MpiCounts,
}

impl CgComm for MpiCg {
    /// NPB's exchange: `MPI_Irecv` from the partner, `MPI_Send` to it,
    /// `MPI_Wait`, with the tag of the kind.
    fn exchange(&mut self, partner: usize, kind: Exchange, send: &[f64], recv: &mut [f64]) {
        let peer = self.world.process_at_rank(partner as i32);
        mpi::request::scope(|scope| {
            let request = peer.immediate_receive_into_with_tag(scope, recv, kind.tag());
            peer.send_with_tag(send, kind.tag());
            request.wait();
        });
        // A send to itself (the transpose exchange of a 1 × 2 grid) is a
        // copy inside this process, which the mttl variant makes without a
        // message: only exchanges between processes count, in both.
        if partner != self.world.rank() as usize {
            self.counts.send(std::mem::size_of_val(send));
            self.counts.recv();
        }
    }

    fn barrier(&mut self) {
        self.world.barrier();
        self.counts.barrier(self.world.size() as usize);
    }
}

/// Initialisation: this process's block of the matrix; returns it with the
/// time it took.
fn cg_init(class: Class, nprocs: usize, me: usize) -> Result<(CgRank, f64), DriverError> {
    let t0 = Instant::now();
    let rank = CgRank::new(class.cg(), nprocs, me)?;
    Ok((rank, t0.elapsed().as_secs_f64()))
}

/// The benchmark: one untimed outer iteration, `x` reset, a barrier, then
/// `niter` timed ones; returns them with the time of the timed loop.
fn cg_kernel(rank: &mut CgRank, comm: &mut MpiCg) -> (Vec<CgIteration>, f64) {
    rank.power_step(comm);
    rank.reset_x();
    comm.barrier();
    let t0 = Instant::now();
    let trace = (0..rank.params().niter)
        .map(|_| rank.power_step(comm))
        .collect();
    (trace, t0.elapsed().as_secs_f64())
}

/// Runs CG as one process of this MPI job; rank 0 gets the outcome.
pub fn run(class: Class, np: Option<usize>) -> Result<Option<Outcome>, DriverError> {
    let universe = mpi::initialize().ok_or(DriverError::MpiInit)?;
    let world = universe.world();
    let (me, nprocs) = (world.rank() as usize, world.size() as usize);
    check_size(Kernel::Cg, class, np, nprocs)?;
    let (mut rank, setup) = cg_init(class, nprocs, me)?;
    let mut comm = MpiCg {
        world,
        counts: MpiCounts::default(),
    };
    let (trace, seconds) = cg_kernel(&mut rank, &mut comm);
    let mut times = [0.0; 2];
    comm.world.all_reduce_into(
        &[seconds, setup][..],
        &mut times[..],
        SystemOperation::max(),
    );
    comm.counts.allreduce(nprocs, std::mem::size_of_val(&times));
    comm.counts.report(me);
    let (seconds, setup) = (times[0], times[1]);
    let (variant, backend) = (Variant::Mpi, "mpi");
    Ok((me == 0).then(|| Outcome::cg(class, variant, backend, nprocs, trace, seconds, setup)))
}
