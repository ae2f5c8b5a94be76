//! `mttl-trace`: reads the traces of an mttl run (`MTTL_TRACE=DIR`).
//!
//! ```text
//! mttl-trace info DIR     the job, and per rank: events, blocks, time span, how it ends
//! mttl-trace stats DIR    per rank: comm primitives, calls, waits, collectives, regions
//! mttl-trace timeline DIR     every event of every rank on rank 0's clock
//! mttl-trace reconstruct DIR  suspensions removed: the run time and per-rank totals
//! mttl-trace check DIR        every receive after its send, every send received
//!                             (exits 1 when a violation remains after correction)
//! mttl-trace export --ti OUT DIR   the time-independent trace, one file per rank
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
    /// Every event of every rank on rank 0's clock, in time order.
    Timeline {
        /// The trace directory.
        dir: PathBuf,
    },
    /// The run with its suspensions removed: run time and per-rank totals.
    Reconstruct {
        /// The trace directory.
        dir: PathBuf,
    },
    /// Pairs sends and receives; fails when any receive precedes its send
    /// after correction or a message has no pair.
    Check {
        /// The trace directory.
        dir: PathBuf,
    },
    /// Writes the trace in another format.
    Export {
        /// The trace directory.
        dir: PathBuf,
        /// The time-independent trace (docs/prediction.md) into this
        /// directory, one `rank-NNNNN.ti` per rank, for `mttl-sim OUT`.
        #[arg(long, value_name = "OUT")]
        ti: PathBuf,
    },
}

/// A command's text and whether it passed.
type Report = fn(&mttl_trace::Trace) -> (String, bool);

fn check(t: &mttl_trace::Trace) -> (String, bool) {
    let c = mttl_trace::check(t);
    (mttl_trace::check_report(&c), !c.failed())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dir, report): (_, Report) = match cli.command {
        Command::Export { dir, ti } => return export_ti(&dir, &ti),
        Command::Info { dir } => (dir, |t| (mttl_trace::info(t), true)),
        Command::Stats { dir } => (dir, |t| (mttl_trace::stats(t), true)),
        Command::Timeline { dir } => (dir, |t| (mttl_trace::timeline(t), true)),
        Command::Reconstruct { dir } => (dir, |t| (mttl_trace::reconstruct_report(t), true)),
        Command::Check { dir } => (dir, check),
    };
    match mttl_trace::read_dir(&dir) {
        Ok(trace) => {
            let (text, ok) = report(&trace);
            print!("{text}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("mttl-trace: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `export --ti OUT DIR`.
fn export_ti(dir: &std::path::Path, out: &std::path::Path) -> ExitCode {
    let trace = match mttl_trace::read_dir(dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mttl-trace: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ti = mttl_trace::TiTrace::from_trace(&trace);
    if let Err(e) = ti.write_dir(out) {
        eprintln!("mttl-trace: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    let ops: usize = ti.ranks.iter().map(Vec::len).sum();
    println!(
        "{} ranks, {ops} operations written to {}",
        ti.ranks.len(),
        out.display()
    );
    ExitCode::SUCCESS
}
