//! `mttl-bench`: mttl's micro-benchmarks, one subcommand each.
//!
//! - `comm`: round-trip latency and streaming bandwidth between two ranks,
//!   mttl's TCP and MPI backends against raw MPI
//!   ([`benches_npb::bench::comm`]).
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Comm(args) => bench::comm::run(args).map_err(|e| format!("comm: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mttl-bench {message}");
            ExitCode::FAILURE
        }
    }
}
