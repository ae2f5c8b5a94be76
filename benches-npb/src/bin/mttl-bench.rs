//! `mttl-bench`: mttl's micro-benchmarks, one subcommand each.
//!
//! - `comm`: round-trip latency and streaming bandwidth between two ranks,
//!   mttl's TCP and MPI backends against raw MPI
//!   ([`benches_npb::bench::comm`]).
//! - `runtime`: thread switch and spawn, invoke round trip, ainvoke
//!   throughput and barrier latency of mttl programs on the TCP and MPI
//!   backends ([`benches_npb::bench::runtime`]).
//! - `rwrite`: remote-write throughput (`nwrite` + `barrier`) against raw
//!   MPI send/receive, 8 B to 1 MiB, the paper's fig. 7, with a CSV file
//!   and a figure ([`benches_npb::bench::rwrite`]).
//! - `bcast`: the adaptive broadcast against binomial, the ideal table and
//!   the arrival-order baseline under imbalance patterns, in real jobs and
//!   in the simulator ([`benches_npb::bench::bcast`]).
//! - `load`: 1 M ainvokes, 20 k live threads, a 1 GiB transfer and a soak,
//!   checking with checksums that nothing is lost and that memory stays
//!   bounded ([`benches_npb::bench::load`]).
//! - `trace`: the trace method's Table 1: NPB CG and IS, a ping-pong, a
//!   matrix product and a trace-heavy program untraced, traced in memory
//!   and under each flush policy, with reconstructed times and their errors
//!   ([`benches_npb::bench::trace`]).
//!
//! Every subcommand prints a table and how it measured, or one JSON document
//! with `--json`.

use std::process::ExitCode;

use benches_npb::bench;
use clap::{Parser, Subcommand};

/// mttl's micro-benchmarks.
#[derive(Debug, Parser)]
#[command(name = "mttl-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Round-trip latency and streaming bandwidth between two ranks: mttl's
    /// TCP backend, Open MPI's TCP transport, mttl's MPI backend and raw
    /// rsmpi, side by side (the MPI ones need the cargo feature `mpi`).
    Comm(bench::comm::CommArgs),
    /// The runtime's primitives: thread switch and spawn, invoke on the own
    /// node and round trip to another, ainvoke and invoke_nowait throughput, barrier latency;
    /// mttl programs on the TCP and MPI backends side by side, with the comm
    /// layer's and raw MPI's round trips (the MPI ones need the cargo
    /// feature `mpi`).
    Runtime(bench::runtime::RuntimeArgs),
    /// Remote-write throughput, NetPIPE style: mttl's nwrite into the other
    /// rank's global array and a barrier per window, on the TCP and MPI
    /// backends, against raw rsmpi send/receive, 8 B to 1 MiB; writes a CSV
    /// file and a figure (SVG, PNG). The MPI ones need the cargo feature
    /// `mpi`.
    Rwrite(bench::rwrite::RwriteArgs),
    /// Load: 1,000,000 ainvokes across the ranks, 20,000 live threads on
    /// one rank, a 1 GiB transfer, and a soak of all three for
    /// `--duration`; checks with checksums that nothing is lost and reports
    /// every rank's peak memory, checked against stated bounds.
    Load(bench::load::LoadArgs),
    /// Broadcast under imbalance: binomial, adaptive (virtual-rank
    /// swapping), the ideal table and the arrival-order baseline, in TCP
    /// jobs of 8 and 16 ranks and in mttl-sim at 64 to 1024; prints the
    /// issue's targets met or missed.
    Bcast(bench::bcast::BcastArgs),
    /// The trace method's Table 1: each workload untraced (T0), traced in
    /// memory (T), with equalized flushes at three thresholds, static,
    /// local and without clock re-sync, with reconstructed times, their
    /// errors against T, trace size and peak memory; needs the `npb` and
    /// `mttl-trace` binaries beside it.
    Trace(bench::trace::TraceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Comm(args) => bench::comm::run(args).map_err(|e| format!("comm: {e}")),
        Command::Runtime(args) => bench::runtime::run(args).map_err(|e| format!("runtime: {e}")),
        Command::Rwrite(args) => bench::rwrite::run(args).map_err(|e| format!("rwrite: {e}")),
        Command::Load(args) => bench::load::run(args).map_err(|e| format!("load: {e}")),
        Command::Bcast(args) => bench::bcast::run(args).map_err(|e| format!("bcast: {e}")),
        Command::Trace(args) => bench::trace::run(args).map_err(|e| format!("trace: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mttl-bench {message}");
            ExitCode::FAILURE
        }
    }
}
