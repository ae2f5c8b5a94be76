//! NPB CG in the paper's style on mttl: node 0's main invokes the
//! initialisation (`cg_init`) and the benchmark (`cg_kernel`) as tasks on
//! every node ([`mttl::spmd`]); vectors move by remote writes into the
//! partner's landing buffer; the slowest node's time is the maximum of what
//! the tasks return.
//!
//! # An exchange, step by step
//!
//! 1. Each exchange kind (row-reduction step, transpose, row-sum step) has a
//!    slot in every node's landing array: a `ready` value and two buffers
//!    of `stride` values (a flag, then the data), used alternately by the
//!    slot's sequence number `seq` (1, 2, ...), which both partners count
//!    alike.
//! 2. The sender writes its values straight from the caller's slice into
//!    buffer `seq % 2` of the slot on the partner, then `seq` into the
//!    buffer's flag: writes from one node are applied in the order they
//!    were sent, so the flag lands after the data.
//! 3. On the MPI backend a vector exchange first writes `seq` into the
//!    partner's `ready` and waits for the partner's: MPI moves a large
//!    message only once the receiver takes it, and a sender blocked on an
//!    absent partner naps in the backend, while a node waiting here polls.
//! 4. The receiver yields to the runtime (which applies incoming writes)
//!    until the flag of its own buffer `seq % 2` is `seq`, then uses the
//!    values where they landed (copies them out, or adds them to the row
//!    sums). After `SPIN_POLLS` polls it also yields the processor now and
//!    then, for oversubscribed machines.
//! 5. The partner writes that buffer again only with `seq + 2`, after it
//!    has received this node's write `seq + 1`, which this node sends only
//!    after step 4 of exchange `seq`: no buffer is overwritten unread.
//!
//! An exchange with the node itself (the transpose of a 1 × 2 grid) is a
//! copy.
//!
//! The sums `x·z` and `z·z` of each outer iteration are an mttl allreduce
//! ([`CgComm::norm_sum`]): the job meets at a collective once per outer
//! iteration, where a trace's buffers are written together
//! (`MTTL_TRACE_FLUSH=equalized`).
//!
//! `cg_mpi.rs` is the same program on plain MPI; `npb --line-diff` counts
//! the lines that differ.

use std::cell::RefCell;
use std::time::Instant;

use mttl::{GlobalArray, GlobalPtr};

use super::error::{check_size, DriverError};
use super::report::{Kernel, Outcome, Variant};
use super::TIMED_REGION;
use crate::npb::cg::kernels::add_assign;
use crate::npb::cg::{CgComm, CgGrid, CgIteration, CgRank, Exchange, MAX_ROW_SUM};
use crate::npb::Class;

/// Polls of a landing buffer before a waiting node also gives the processor
/// to other processes between polls (which an oversubscribed machine needs).
const SPIN_POLLS: u32 = 4096;

/// What `cg_init` leaves on its node for `cg_kernel`: the process's share
/// of CG, its landing array and the array's stride.
type Node = (CgRank, GlobalArray<f64>, usize);

thread_local! {
    static NODE: RefCell<Option<Node>> = const { RefCell::new(None) };
}

/// CG's communication on mttl.
struct MttlCg<'a> {
    /// Every node's landing array.
    landings: Vec<GlobalPtr<f64>>,
    /// This node's.
    landing: &'a GlobalArray<f64>,
    /// Values per buffer: the flag and the longest exchange.
    stride: usize,
    /// Steps of a row reduction (and of a row sum).
    steps: usize,
    /// Whether long exchanges wait for the partner first (step 3).
    handshake: bool,
    /// The last sequence number of each slot.
    seq: Vec<u64>,
}

impl MttlCg<'_> {
    /// The landing slot of an exchange kind (step 1 of the module doc).
    fn slot(&self, kind: Exchange) -> usize {
        match kind {
            Exchange::RowReduce { step } => step,
            Exchange::Transpose => self.steps,
            Exchange::RowSum { step } => self.steps + 1 + step,
        }
    }

    /// Yields until element `at` of this node's landing array is `seq`
    /// (step 4 of the module doc).
    /// The wait is marked as one (`mttl::trace::waiting`): its polls are
    /// not computation.
    fn wait_for(&self, at: usize, seq: f64) {
        if self.landing.get(at) == seq {
            return;
        }
        let _waiting = mttl::trace::waiting("landing");
        let mut polls = 0u32;
        while self.landing.get(at) != seq {
            mttl::yield_now();
            polls = polls.wrapping_add(1);
            if polls > SPIN_POLLS && polls % 64 == 0 {
                std::thread::yield_now();
            }
        }
    }

    /// Sends `send` to `partner`, waits for the partner's values and hands
    /// them to `take` where they landed (steps 2-4 of the module doc).
    fn exchange_with(
        &mut self,
        partner: usize,
        kind: Exchange,
        send: &[f64],
        len: usize,
        take: impl FnOnce(&[f64]),
    ) {
        if partner == mttl::rank() {
            return take(send);
        }
        let slot = self.slot(kind);
        self.seq[slot] += 1;
        let seq = self.seq[slot];
        let ready = slot * (2 * self.stride + 1);
        let at = ready + 1 + (seq as usize % 2) * self.stride;
        let theirs = self.landings[partner];
        if self.handshake && send.len() > MAX_ROW_SUM {
            theirs.add(ready).nwrite(seq as f64);
            self.wait_for(ready, seq as f64);
        }
        theirs.add(at + 1).nwrite_slice(send);
        theirs.add(at).nwrite(seq as f64);
        self.wait_for(at, seq as f64);
        take(&self.landing.borrow()[at + 1..at + 1 + len]);
    }
}

impl CgComm for MttlCg<'_> {
    /// Remote writes into the partner's landing buffer, then a wait for the
    /// partner's into ours (see the module doc).
    fn exchange(&mut self, partner: usize, kind: Exchange, send: &[f64], recv: &mut [f64]) {
        self.exchange_with(partner, kind, send, recv.len(), |theirs| {
            recv.copy_from_slice(theirs);
        });
    }

    /// As `exchange`, adding the partner's values where they landed.
    fn exchange_add(
        &mut self,
        partner: usize,
        kind: Exchange,
        send: &[f64],
        acc: &mut [f64],
        _scratch: &mut [f64],
    ) {
        self.exchange_with(partner, kind, send, acc.len(), |theirs| {
            add_assign(acc, theirs);
        });
    }

    /// An mttl collective once per outer iteration, as the paper turns
    /// MPI's reductions into mttl's: the sum over the job counts each
    /// column block `nprows` times. Every node gets the same bits.
    fn norm_sum(&mut self, grid: &CgGrid, values: &mut [f64]) {
        mttl::allreduce_sum_slice(values);
        let copies = grid.nprows as f64;
        for v in values {
            *v /= copies;
        }
    }

    fn barrier(&mut self) {
        mttl::barrier();
    }
}

/// Slots of a landing array: the row-reduction steps, the transpose, the
/// row-sum steps.
fn slots(grid: &CgGrid) -> usize {
    2 * grid.l2npcols + 1
}

/// Initialisation task: this node's block of the matrix and its landing
/// array; returns the array's global pointer and the time it took.
#[mttl::remote]
fn cg_init(class: char) -> (GlobalPtr<f64>, f64) {
    let t0 = Instant::now();
    let class: Class = class.to_string().parse().expect("a class letter");
    let rank =
        CgRank::new(class.cg(), mttl::size(), mttl::rank()).expect("node 0 checked the grid");
    let stride = mttl::allreduce_max(rank.grid().max_exchange_len()) + 1;
    let landing = GlobalArray::new(slots(rank.grid()) * (2 * stride + 1));
    let ptr = landing.global_ptr();
    NODE.set(Some((rank, landing, stride)));
    (ptr, t0.elapsed().as_secs_f64())
}

/// Kernel task: one untimed outer iteration, `x` reset, a barrier, then
/// `niter` timed ones; returns ‖r‖ and zeta of each with the time of the
/// timed loop.
#[mttl::remote]
fn cg_kernel(landings: Vec<GlobalPtr<f64>>) -> (Vec<(f64, f64)>, f64) {
    let (mut rank, landing, stride) = NODE.take().expect("cg_init ran on this node");
    let steps = rank.grid().l2npcols;
    let mut comm = MttlCg {
        landings,
        landing: &landing,
        stride,
        steps,
        handshake: mttl::backend_name() == "mpi",
        seq: vec![0; slots(rank.grid())],
    };
    rank.power_step(&mut comm);
    rank.reset_x();
    comm.barrier();
    let timed = mttl::trace::region(TIMED_REGION);
    let t0 = Instant::now();
    let trace = (0..rank.params().niter)
        .map(|_| rank.power_step(&mut comm))
        .map(|it| (it.rnorm, it.zeta))
        .collect();
    let seconds = t0.elapsed().as_secs_f64();
    drop(timed);
    (trace, seconds)
}

/// Runs CG on this mttl job: node 0's main.
pub fn run(class: Class, np: Option<usize>) -> Result<Outcome, DriverError> {
    let nprocs = mttl::size();
    check_size(Kernel::Cg, class, np, nprocs)?;
    CgGrid::new(class.cg().na, nprocs, 0)?;
    let inits = mttl::spmd(cg_init, (class.letter(),));
    let landings = inits.iter().map(|&(ptr, _)| ptr).collect();
    let kernels = mttl::spmd(cg_kernel, (landings,));
    let trace = kernels[0]
        .0
        .iter()
        .map(|&(rnorm, zeta)| CgIteration { rnorm, zeta })
        .collect();
    let seconds = kernels.iter().map(|k| k.1).fold(0.0, f64::max);
    let setup = inits.iter().map(|i| i.1).fold(0.0, f64::max);
    let (variant, backend) = (Variant::Mttl, mttl::backend_name());
    Ok(Outcome::cg(
        class, variant, backend, nprocs, trace, seconds, setup,
    ))
}
