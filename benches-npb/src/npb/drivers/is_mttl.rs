//! NPB IS in the paper's style on mttl: node 0's main invokes the
//! initialisation (`is_init`) and the benchmark (`is_kernel`) as tasks on
//! every node ([`mttl::spmd`]); the bucket sizes and send counts go through
//! mttl's collectives, the keys by remote writes into the receiver's
//! landing array, the full verification's boundary key by one remote write.
//!
//! # The key exchange (NPB's `MPI_Alltoallv`), step by step
//!
//! 1. Each receiver hands every sender a global pointer to where that
//!    sender's keys go in its landing array (NPB's `key_buff2`), at the
//!    displacement it computed from the counts: one alltoall of pointers.
//! 2. Each sender `nwrite`s its keys for every other receiver through that
//!    pointer, the next node first (so that every node starts sending at
//!    once), then meets the others at a barrier, which completes every
//!    remote write issued before it. Its keys for itself stay where the
//!    bucket sort put them ([`IsComm::keeps_own_keys`]): the ranking counts
//!    them there, and the landing array has no room for them.
//! 3. The receiver borrows its landing array and hands it to the ranking
//!    without a copy, until the next exchange begins (no node writes into
//!    it in between: step 1 comes first).
//!
//! `is_mpi.rs` is the same program on plain MPI; `npb --line-diff` counts
//! the lines that differ.

use std::cell::RefCell;
use std::time::Instant;

use mttl::{GlobalArray, GlobalObject, GlobalPtr, GlobalRef};

use super::error::{check_size, DriverError};
use super::report::{report_failures, Kernel, Outcome, Variant};
use super::TIMED_REGION;
use crate::npb::class::IS_ITERATIONS;
use crate::npb::is::{check_procs, key_buffer_len, IsComm, IsRank};
use crate::npb::Class;

/// NPB 3.4's switch for its phase timers; set, each node prints its
/// [`IsPhases`](crate::npb::is::IsPhases) of the timed loop on stderr.
const PHASES_VAR: &str = "NPB_TIMER_FLAG";

/// What `is_init` leaves on its node for `is_kernel`: the process's share
/// of IS, its landing array and its boundary key's slot.
type Node = (IsRank, GlobalArray<i32>, GlobalObject<i32>);

thread_local! {
    static NODE: RefCell<Option<Node>> = const { RefCell::new(None) };
}

/// IS's communication on mttl.
struct MttlIs<'a> {
    /// NPB's `key_buff2`: where the other nodes write the keys of this
    /// node's buckets.
    landing: &'a GlobalArray<i32>,
    /// The landing array, borrowed from an exchange to the next (step 3).
    keys: Option<GlobalRef<'a, [i32]>>,
    keys_len: usize,
    /// Where the left neighbour writes its last key.
    boundary: &'a GlobalObject<i32>,
    /// Every node's boundary slot.
    boundaries: Vec<GlobalPtr<i32>>,
}

impl IsComm for MttlIs<'_> {
    fn allreduce_sum(&mut self, local: &[i32], total: &mut [i32]) {
        total.copy_from_slice(local);
        mttl::allreduce_sum_slice(total);
    }

    fn alltoall(&mut self, send: &[i32], recv: &mut [i32]) {
        mttl::alltoall_slice(send, recv);
    }

    /// Steps 1-3 of the module doc.
    fn alltoallv(
        &mut self,
        send: &[i32],
        send_counts: &[i32],
        send_displs: &[i32],
        recv_counts: &[i32],
        recv_displs: &[i32],
    ) {
        let me = mttl::rank();
        self.keys = None;
        self.keys_len = (recv_counts.iter().sum::<i32>() - recv_counts[me]) as usize;
        assert!(
            self.keys_len <= self.landing.len(),
            "process {me} receives {} keys, more than its buffer of {} (NPB's SIZE_OF_BUFFERS)",
            self.keys_len,
            self.landing.len()
        );
        let here: Vec<_> = recv_displs
            .iter()
            .map(|&d| self.landing.ptr(d as usize))
            .collect();
        let mut there = vec![GlobalPtr::null(); here.len()];
        mttl::alltoall_slice(&here, &mut there);
        for d in (1..there.len()).map(|k| (me + k) % there.len()) {
            let (displ, count) = (send_displs[d] as usize, send_counts[d] as usize);
            there[d].nwrite_slice(&send[displ..][..count]);
        }
        mttl::barrier();
        self.keys = Some(self.landing.borrow());
    }

    fn received_keys(&self) -> &[i32] {
        &self.keys.as_ref().expect("keys arrived by an alltoallv")[..self.keys_len]
    }

    /// Step 2: a node's keys for itself are not copied.
    fn keeps_own_keys(&self) -> bool {
        true
    }

    /// A remote write into the right neighbour's boundary slot, then a
    /// barrier.
    fn shift_right(&mut self, value: i32) -> Option<i32> {
        let me = mttl::rank();
        if let Some(right) = self.boundaries.get(me + 1) {
            right.nwrite(value);
        }
        mttl::barrier();
        (me > 0).then(|| self.boundary.get())
    }
}

/// Initialisation task: this node's keys, landing array and boundary slot;
/// returns the slot's global pointer and the time it took.
#[mttl::remote]
fn is_init(class: char) -> (GlobalPtr<i32>, f64) {
    let t0 = Instant::now();
    let class: Class = class.to_string().parse().expect("a class letter");
    let params = class.is().expect("node 0 checked the class");
    let rank = IsRank::new(params, mttl::size(), mttl::rank()).expect("node 0 checked the size");
    let landing = GlobalArray::new(key_buffer_len(&params, mttl::size()));
    let boundary = GlobalObject::new(0);
    let ptr = boundary.global_ptr();
    NODE.set(Some((rank, landing, boundary)));
    (ptr, t0.elapsed().as_secs_f64())
}

/// Kernel task: one untimed ranking, ten timed ones, the full verification;
/// returns the tests this node passed and the time of the timed loop.
#[mttl::remote]
fn is_kernel(boundaries: Vec<GlobalPtr<i32>>) -> (usize, f64) {
    let (mut rank, landing, boundary) = NODE.take().expect("is_init ran on this node");
    let mut comm = MttlIs {
        landing: &landing,
        keys: None,
        keys_len: 0,
        boundary: &boundary,
        boundaries,
    };
    rank.rank_keys(&mut comm, 1);
    rank.clear_failures();
    rank.clear_phases();
    let timed = mttl::trace::region(TIMED_REGION);
    let t0 = Instant::now();
    let mut passed = 0;
    for iteration in 1..=IS_ITERATIONS {
        passed += rank.rank_keys(&mut comm, iteration);
    }
    let seconds = t0.elapsed().as_secs_f64();
    drop(timed);
    let full = rank.full_verify(&mut comm);
    report_failures(mttl::rank(), rank.failures());
    if std::env::var_os(PHASES_VAR).is_some() {
        let p = rank.phases();
        eprintln!(
            "IS phases rank {}: bucket {:.4} exchange {:.4} count {:.4} s (NPB's rcomp {:.4}, rcomm {:.4})",
            mttl::rank(),
            p.bucket,
            p.exchange,
            p.count,
            p.bucket + p.count,
            p.exchange
        );
    }
    (passed + usize::from(full.passed()), seconds)
}

/// Runs IS on this mttl job: node 0's main.
pub fn run(class: Class, np: Option<usize>) -> Result<Outcome, DriverError> {
    let params = class.is()?;
    let nprocs = mttl::size();
    check_size(Kernel::Is, class, np, nprocs)?;
    check_procs(&params, nprocs)?;
    let inits = mttl::spmd(is_init, (class.letter(),));
    let boundaries = inits.iter().map(|&(ptr, _)| ptr).collect();
    let kernels = mttl::spmd(is_kernel, (boundaries,));
    let passed = kernels.iter().map(|k| k.0).sum();
    let seconds = kernels.iter().map(|k| k.1).fold(0.0, f64::max);
    let setup = inits.iter().map(|i| i.1).fold(0.0, f64::max);
    let (variant, backend) = (Variant::Mttl, mttl::backend_name());
    Ok(Outcome::is(
        class, variant, backend, nprocs, passed, seconds, setup,
    ))
}
