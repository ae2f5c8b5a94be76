//! The communication IS needs, as one trait a driver implements.
//!
//! Each ranking iteration makes, on every process and in this order:
//!
//! 1. [`IsComm::allreduce_sum`] of the bucket sizes (`num_buckets + 5`
//!    values: the histogram plus the five test keys, which only their owner
//!    contributes);
//! 2. [`IsComm::alltoall`] of the send counts (one value per process);
//! 3. [`IsComm::alltoallv`] of the bucketed keys, after which the ranking
//!    reads [`IsComm::received_keys`].
//!
//! Full verification, once after the timed loop, reads
//! [`IsComm::received_keys`] again (the last iteration's keys) and makes one
//! [`IsComm::shift_right`] to compare keys across process boundaries.
//!
//! Keys and counts are `i32`, as in NPB (MPI_INT) for classes S to C.

/// The collectives of an IS process, implemented once per transport.
///
/// What a driver must do:
///
/// * plain MPI: `MPI_Allreduce(SUM)`, `MPI_Alltoall`, `MPI_Alltoallv` into a
///   buffer the driver owns (grown to `Σ recv_counts`), returned by
///   `received_keys`; `shift_right` is `MPI_Irecv` from `me − 1`, `MPI_Send`
///   to `me + 1`, `MPI_Wait`.
/// * remote write (global pointers + barrier): the receive buffer is a
///   registered global array. `alltoall` writes `send[d]` into slot `me` of
///   process `d`'s count array and meets at a barrier; the receiver's offset
///   for each sender (`recv_displs[s]` at `d`) is not known to the sender,
///   so `alltoall` also sends each sender its offset back (a second remote
///   write and barrier), or the driver gives every sender a fixed region.
///   `alltoallv` then writes each segment at its offset in the partner's
///   array and meets at a barrier; `received_keys` returns that array.
///   `allreduce_sum` and `shift_right` map to the runtime's collective and
///   one remote write plus barrier.
///
/// Contract: every call returns only when its result is complete locally;
/// the slice from `received_keys` stays valid and unchanged until the next
/// `alltoallv`. The core reads it only between an `alltoallv` and the next
/// collective call, when no peer writes into it; a remote-write driver can
/// rely on that to hand out its landing buffer without a copy.
pub trait IsComm {
    /// Element-wise sum of `local` over all processes, into `total` (same
    /// length) on every process.
    fn allreduce_sum(&mut self, local: &[i32], total: &mut [i32]);

    /// Sends `send[d]` to process `d` and stores in `recv[s]` what process `s`
    /// sent to this one (one value per process each way).
    fn alltoall(&mut self, send: &[i32], recv: &mut [i32]);

    /// Sends `send[send_displs[d] ..][.. send_counts[d]]` to process `d`; the
    /// keys from process `s` land at `recv_displs[s]` of the buffer that
    /// [`IsComm::received_keys`] then returns. All counts and displacements
    /// are non-negative and, for the receive side, contiguous from 0.
    fn alltoallv(
        &mut self,
        send: &[i32],
        send_counts: &[i32],
        send_displs: &[i32],
        recv_counts: &[i32],
        recv_displs: &[i32],
    );

    /// The keys the last `alltoallv` delivered (`Σ recv_counts` of them,
    /// less this process's own if [`IsComm::keeps_own_keys`]).
    fn received_keys(&self) -> &[i32];

    /// Whether `alltoallv` leaves this process's own segment (`send_counts[me]`
    /// keys at `send_displs[me]`) where it is instead of copying it into the
    /// received keys. The ranking then reads it in the send buffer, which it
    /// keeps unchanged until the next ranking, and `recv_displs` leave no room
    /// for it: `recv_displs[me + 1] == recv_displs[me]`. Counting does not
    /// depend on the keys' order, so this only saves a copy of up to all the
    /// keys (at 1 process, the whole exchange). The default, `false`, is
    /// `MPI_Alltoallv`'s behaviour.
    fn keeps_own_keys(&self) -> bool {
        false
    }

    /// Sends `value` to process `me + 1` (if any) and returns what process
    /// `me − 1` sent (`None` on process 0).
    fn shift_right(&mut self, value: i32) -> Option<i32>;
}
