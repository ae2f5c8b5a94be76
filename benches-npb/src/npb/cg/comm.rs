//! The communication CG needs, as one trait a driver implements, and the two
//! composite steps (row reduction, transpose exchange) built on it.
//!
//! CG's communication is a single pattern, pairwise exchange: a process
//! sends a slice of `f64` to one partner and receives a slice of known
//! length from the same partner, who makes the mirror-image call. Three
//! steps of the algorithm use it (see [`super::grid`] for the schedule):
//!
//! 1. Row reduction of the mat-vec result `w`, [`row_reduce`]:
//!    `l2npcols` exchanges with `reduce_steps[s].partner`, each followed by
//!    `w[recv] += received` ([`CgComm::exchange_add`] when the rows sent
//!    and the rows added to are disjoint, as in a non-square grid).
//! 2. Transpose exchange, [`transpose`]: the finished rows of `w` go to
//!    `exch_proc`, the process's own column block comes back into `q`.
//! 3. Scalar sums (dot products), [`CgComm::row_sum`]: a butterfly over
//!    `sum_partners`; one or two values at a time.
//!
//! Every process of the job makes the same sequence of calls (the schedule
//! does not depend on data), so a driver may also synchronise globally
//! inside a call. With one process (`l2npcols = 0`) the solver makes no call
//! at all.

use std::ops::Range;

/// Which step of CG an exchange belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exchange {
    /// Step `step` (0-based, in execution order) of a row reduction of `w`;
    /// at most `nrows` values.
    RowReduce {
        /// 0-based step number.
        step: usize,
    },
    /// The exchange with the transpose processor; at most `ncols` values.
    Transpose,
    /// Step `step` (0-based) of a scalar sum; at most 2 values.
    RowSum {
        /// 0-based step number.
        step: usize,
    },
}

impl Exchange {
    /// A message tag unique to this kind and step (all below 300), for
    /// drivers that match messages by tag.
    pub fn tag(self) -> i32 {
        match self {
            Exchange::RowReduce { step } => 100 + step as i32,
            Exchange::Transpose => 200,
            Exchange::RowSum { step } => 250 + step as i32,
        }
    }
}

/// Largest number of values a [`CgComm::row_sum`] carries.
pub const MAX_ROW_SUM: usize = 2;

/// The communication a CG process needs, implemented once per transport.
///
/// What a driver must do:
///
/// * plain MPI (send/recv pairs): `exchange` is `MPI_Irecv(recv, partner,
///   kind.tag())`, `MPI_Send(send, partner, kind.tag())`, `MPI_Wait` — the
///   NPB code exactly; `partner` may be the process itself (1 × 2 grid), which
///   this order handles. `barrier` is `MPI_Barrier`.
/// * remote write (global pointers + barrier): register one landing array
///   per exchange kind (`RowReduce`: `nrows` values, `Transpose`: `ncols`,
///   `RowSum`: [`MAX_ROW_SUM`]; [`super::CgGrid::max_exchange_len`] bounds
///   them all); `exchange` writes `send` into the partner's landing array at
///   offset 0, waits until the partner's write into its own array is complete
///   (a barrier, or a per-pair flag written after the data), then copies
///   `recv.len()` values out. Before the partner's next write into the same
///   array it must know the copy is done: two barriers per exchange, or two
///   landing arrays used alternately.
///
/// Contract: on return `recv` holds exactly the `send` slice the partner
/// passed in its matching call (`recv.len()` equals that slice's length), and
/// `send` may be reused. Calls are matched in program order.
pub trait CgComm {
    /// Sends `send` to `partner` and receives `recv.len()` values from it.
    fn exchange(&mut self, partner: usize, kind: Exchange, send: &[f64], recv: &mut [f64]);

    /// Sums `values` element-wise over the process row: exchanges with each
    /// of `partners` in order and adds the partner's values after its own, as
    /// NPB does. The result is bit-identical on every process of the row.
    ///
    /// A driver may override this with an allreduce over its process row;
    /// the sums then need not match NPB-MPI to the last bit.
    fn row_sum(&mut self, partners: &[usize], values: &mut [f64]) {
        assert!(
            values.len() <= MAX_ROW_SUM,
            "row_sum carries at most {MAX_ROW_SUM} values"
        );
        let mut theirs = [0.0; MAX_ROW_SUM];
        let theirs = &mut theirs[..values.len()];
        for (step, &partner) in partners.iter().enumerate() {
            self.exchange(partner, Exchange::RowSum { step }, values, theirs);
            for (v, t) in values.iter_mut().zip(theirs.iter()) {
                *v += *t;
            }
        }
    }

    /// Sums `x·z` and `z·z` over the process row once per outer iteration
    /// (step 2 of [`super::solver`]'s outer iteration); every process of
    /// the job calls it at the same point. By default a [`row_sum`](Self::row_sum).
    ///
    /// A driver may override this with an allreduce over the whole job
    /// divided by `nprows` (each column block of `x` and `z` is held by the
    /// `nprows` processes of a process column): the job then meets at a
    /// collective once per outer iteration, where a runtime can do work that
    /// needs every process (mttl's trace writes its buffers there). The sums
    /// then need not match NPB-MPI to the last bit.
    fn norm_sum(&mut self, grid: &super::CgGrid, values: &mut [f64]) {
        self.row_sum(&grid.sum_partners, values);
    }

    /// Like [`exchange`](Self::exchange), but adds the partner's values to
    /// `acc` (`acc[i] += theirs[i]`, in index order) instead of returning
    /// them; `scratch` (at least `acc.len()` long) may hold them meanwhile.
    ///
    /// A driver that holds the received values in a buffer of its own may
    /// override this to add straight out of it and save a copy.
    fn exchange_add(
        &mut self,
        partner: usize,
        kind: Exchange,
        send: &[f64],
        acc: &mut [f64],
        scratch: &mut [f64],
    ) {
        let theirs = &mut scratch[..acc.len()];
        self.exchange(partner, kind, send, theirs);
        super::kernels::add_assign(acc, theirs);
    }

    /// Waits until every process has called `barrier` (before timing starts).
    fn barrier(&mut self);
}

/// Sums the mat-vec result `w` across the process row (step 1 of the module
/// doc). On return the rows [`super::CgGrid::send_range`] of `w` hold full
/// sums; `scratch` (at least `w.len()` long) receives the partners' values.
pub fn row_reduce<C: CgComm + ?Sized>(
    comm: &mut C,
    grid: &super::CgGrid,
    w: &mut [f64],
    scratch: &mut [f64],
) {
    for (step, s) in grid.reduce_steps.iter().enumerate() {
        let kind = Exchange::RowReduce { step };
        if let Some((send, acc)) = disjoint(w, &s.send, &s.recv) {
            comm.exchange_add(s.partner, kind, send, acc, scratch);
        } else {
            // A square grid sends the rows it adds to.
            let theirs = &mut scratch[s.recv.clone()];
            comm.exchange(s.partner, kind, &w[s.send.clone()], theirs);
            super::kernels::add_assign(&mut w[s.recv.clone()], theirs);
        }
    }
}

/// `w[send]` and `w[acc]` at once, when the ranges do not overlap.
fn disjoint<'w>(
    w: &'w mut [f64],
    send: &Range<usize>,
    acc: &Range<usize>,
) -> Option<(&'w [f64], &'w mut [f64])> {
    if send.end <= acc.start {
        let (low, high) = w.split_at_mut(acc.start);
        Some((&low[send.clone()], &mut high[..acc.len()]))
    } else if acc.end <= send.start {
        let (low, high) = w.split_at_mut(send.start);
        Some((&high[..send.len()], &mut low[acc.clone()]))
    } else {
        None
    }
}

/// Sends the finished rows of `w` to the transpose processor and receives
/// this process's column block into `q` (step 2 of the module doc).
pub fn transpose<C: CgComm + ?Sized>(comm: &mut C, grid: &super::CgGrid, w: &[f64], q: &mut [f64]) {
    comm.exchange(
        grid.exch_proc,
        Exchange::Transpose,
        &w[grid.send_range()],
        &mut q[..grid.exch_recv_len],
    );
}
