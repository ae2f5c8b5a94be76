//! The per-node communication breakdown of the MPI variant, counted by the
//! driver itself (the mttl runtime counts its own): the paper's tables 5-8,
//! printed at exit under `MTTL_STATS=1` in the runtime's line format.
//!
//! Point-to-point calls count as what they are (`MPI_Send` one send,
//! `MPI_Irecv` + `MPI_Wait` one receive), between processes only: as mttl
//! counts the messages it sends, not the copies a process makes to itself,
//! an exchange of a process with itself (CG's transpose exchange on 2
//! processes, and on the diagonal of a square grid) is not counted (it
//! once doubled CG's bytes on 2 processes). MPI's collectives hide their
//! messages, so each counts as the messages of the textbook algorithm, on
//! `p` processes: barrier (dissemination) and allreduce (recursive doubling)
//! `⌈log2 p⌉` sends and receives, alltoall and alltoallv (direct exchange)
//! `p − 1` non-blocking sends and `p − 1` receives. Bytes are the payload
//! the process sends under that algorithm.

use std::io::Write as _;

use mttl::Stats;

/// A tally of one process's MPI calls.
#[derive(Debug, Default)]
pub(crate) struct MpiCounts(Stats);

/// `⌈log2 p⌉`: the rounds of a dissemination or recursive-doubling
/// collective.
fn rounds(nprocs: usize) -> u64 {
    u64::from(nprocs.next_power_of_two().trailing_zeros())
}

impl MpiCounts {
    /// One `MPI_Send` of `bytes`.
    pub(crate) fn send(&mut self, bytes: usize) {
        self.0.send += 1;
        self.0.bytes_sent += bytes as u64;
    }

    /// One completed receive.
    pub(crate) fn recv(&mut self) {
        self.0.recv += 1;
    }

    /// One `MPI_Barrier` on `nprocs` processes.
    pub(crate) fn barrier(&mut self, nprocs: usize) {
        self.0.send += rounds(nprocs);
        self.0.recv += rounds(nprocs);
    }

    /// One `MPI_Allreduce` of `bytes` on `nprocs` processes.
    pub(crate) fn allreduce(&mut self, nprocs: usize, bytes: usize) {
        self.0.send += rounds(nprocs);
        self.0.recv += rounds(nprocs);
        self.0.bytes_sent += rounds(nprocs) * bytes as u64;
    }

    /// One `MPI_Alltoall(v)` on `nprocs` processes sending `bytes` to the
    /// others.
    pub(crate) fn alltoall(&mut self, nprocs: usize, bytes: usize) {
        self.0.nsend += nprocs as u64 - 1;
        self.0.recv += nprocs as u64 - 1;
        self.0.bytes_sent += bytes as u64;
    }

    /// Prints `mttl stats rank R: ...` on stderr if `MTTL_STATS` asks for
    /// it, in one write, so that ranks sharing a pipe keep their lines whole.
    pub(crate) fn report(&self, rank: usize) {
        let asked = std::env::var("MTTL_STATS").is_ok_and(|v| !v.is_empty() && v != "0");
        if asked {
            let line = format!("mttl stats rank {rank}: {}\n", self.0);
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }
}
