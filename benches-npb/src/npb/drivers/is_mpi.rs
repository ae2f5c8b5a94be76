//! NPB IS on plain MPI, the baseline ("C+MPI"): NPB 3.4-MPI's structure on
//! rsmpi. Every process runs the whole program: it generates its keys
//! (`is_init`), then runs the benchmark (`is_kernel`); each ranking makes
//! NPB's `MPI_Allreduce` of the bucket sizes, `MPI_Alltoall` of the send
//! counts and `MPI_Alltoallv` of the keys, and the full verification one
//! `MPI_Irecv` / `MPI_Send` / `MPI_Wait` to the right neighbour.
//!
//! `is_mttl.rs` is the same program in the paper's style; `npb --line-diff`
//! counts the lines that differ.

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::error::{check_size, DriverError};
use super::mpi_counts::MpiCounts;
use super::report::{report_failures, Kernel, Outcome, Variant};
use crate::npb::class::{IsParams, IS_ITERATIONS};
use crate::npb::is::{key_buffer_len, IsComm, IsRank};
use crate::npb::Class;

/// The tag of the full verification's boundary key.
const TAG_BOUNDARY: i32 = 1000;

/// IS's communication on MPI.
struct MpiIs {
    world: SimpleCommunicator,
    /// NPB's `key_buff2`: where the keys of this process's buckets arrive.
    keys: Vec<i32>,
    keys_len: usize,
    counts: MpiCounts,
}

impl IsComm for MpiIs {
    fn allreduce_sum(&mut self, local: &[i32], total: &mut [i32]) {
        self.world
            .all_reduce_into(local, total, SystemOperation::sum());
        let nprocs = self.world.size() as usize;
        self.counts.allreduce(nprocs, std::mem::size_of_val(local));
    }

    fn alltoall(&mut self, send: &[i32], recv: &mut [i32]) {
        self.world.all_to_all_into(send, recv);
        let nprocs = self.world.size() as usize;
        self.counts.alltoall(nprocs, 4 * (nprocs - 1));
    }

    fn alltoallv(
        &mut self,
        send: &[i32],
        send_counts: &[i32],
        send_displs: &[i32],
        recv_counts: &[i32],
        recv_displs: &[i32],
    ) {
        let me = self.world.rank() as usize;
        self.keys_len = recv_counts.iter().sum::<i32>() as usize;
        assert!(
            self.keys_len <= self.keys.len(),
            "process {me} receives {} keys, more than its buffer of {} (NPB's SIZE_OF_BUFFERS)",
            self.keys_len,
            self.keys.len()
        );
        let mut recv = PartitionMut::new(&mut self.keys[..], recv_counts, recv_displs);
        self.world
            .all_to_all_varcount_into(&Partition::new(send, send_counts, send_displs), &mut recv);
        let sent = send_counts.iter().sum::<i32>() - send_counts[me];
        self.counts.alltoall(send_counts.len(), 4 * sent as usize);
    }

    fn received_keys(&self) -> &[i32] {
        &self.keys[..self.keys_len]
    }

    /// NPB's boundary exchange: `MPI_Irecv` from the left, `MPI_Send` to
    /// the right, `MPI_Wait`.
    fn shift_right(&mut self, value: i32) -> Option<i32> {
        let (me, nprocs) = (self.world.rank(), self.world.size());
        let mut left = 0;
        mpi::request::scope(|scope| {
            let request = (me > 0).then(|| {
                self.world
                    .process_at_rank(me - 1)
                    .immediate_receive_into_with_tag(scope, &mut left, TAG_BOUNDARY)
            });
            if me + 1 < nprocs {
                self.world
                    .process_at_rank(me + 1)
                    .send_with_tag(&value, TAG_BOUNDARY);
                self.counts.send(4);
            }
            if let Some(request) = request {
                request.wait();
                self.counts.recv();
            }
        });
        (me > 0).then_some(left)
    }
}

/// Initialisation: this process's keys and receive buffer; returns them
/// with the time it took.
fn is_init(
    params: IsParams,
    nprocs: usize,
    me: usize,
) -> Result<(IsRank, Vec<i32>, f64), DriverError> {
    let t0 = Instant::now();
    let rank = IsRank::new(params, nprocs, me)?;
    let keys = vec![0; key_buffer_len(&params, nprocs)];
    Ok((rank, keys, t0.elapsed().as_secs_f64()))
}

/// The benchmark: one untimed ranking, ten timed ones, the full
/// verification; returns the tests this process passed and the time of the
/// timed loop.
fn is_kernel(rank: &mut IsRank, comm: &mut MpiIs, me: usize) -> (usize, f64) {
    rank.rank_keys(comm, 1);
    rank.clear_failures();
    let t0 = Instant::now();
    let mut passed = 0;
    for iteration in 1..=IS_ITERATIONS {
        passed += rank.rank_keys(comm, iteration);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let full = rank.full_verify(comm);
    report_failures(me, rank.failures());
    (passed + usize::from(full.passed()), seconds)
}

/// Runs IS as one process of this MPI job; rank 0 gets the outcome.
pub fn run(class: Class, np: Option<usize>) -> Result<Option<Outcome>, DriverError> {
    let params = class.is()?;
    let universe = mpi::initialize().ok_or(DriverError::MpiInit)?;
    let world = universe.world();
    let (me, nprocs) = (world.rank() as usize, world.size() as usize);
    check_size(Kernel::Is, class, np, nprocs)?;
    let (mut rank, keys, setup) = is_init(params, nprocs, me)?;
    let mut comm = MpiIs {
        world,
        keys,
        keys_len: 0,
        counts: MpiCounts::default(),
    };
    let (passed, seconds) = is_kernel(&mut rank, &mut comm, me);
    let mut passed_total = 0u64;
    comm.world
        .all_reduce_into(&(passed as u64), &mut passed_total, SystemOperation::sum());
    let mut times = [0.0; 2];
    comm.world.all_reduce_into(
        &[seconds, setup][..],
        &mut times[..],
        SystemOperation::max(),
    );
    comm.counts.allreduce(nprocs, 8);
    comm.counts.allreduce(nprocs, std::mem::size_of_val(&times));
    comm.counts.report(me);
    let (passed, seconds, setup) = (passed_total as usize, times[0], times[1]);
    let (variant, backend) = (Variant::Mpi, "mpi");
    Ok((me == 0).then(|| Outcome::is(class, variant, backend, nprocs, passed, seconds, setup)))
}
