//! `mttl-trace`: reads the traces of an mttl run (`MTTL_TRACE=DIR`).
//!
//! ```text
//! mttl-trace info DIR     the job, and per rank: events, blocks, time span, how it ends
//! mttl-trace stats DIR    per rank: comm primitives, calls, waits, collectives, regions
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "mttl-trace",
    about = "Reads the traces of an mttl run (MTTL_TRACE=DIR)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The job, and per rank its events, blocks, time span and how it ends.
    Info {
        /// The trace directory.
        dir: PathBuf,
    },
    /// Per rank: time in comm primitives, calls, waits, collectives, regions.
    Stats {
        /// The trace directory.
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dir, report): (_, fn(&mttl_trace::Trace) -> String) = match cli.command {
        Command::Info { dir } => (dir, mttl_trace::info),
        Command::Stats { dir } => (dir, mttl_trace::stats),
    };
    match mttl_trace::read_dir(&dir) {
        Ok(trace) => {
            print!("{}", report(&trace));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mttl-trace: {e}");
            ExitCode::FAILURE
        }
    }
}
