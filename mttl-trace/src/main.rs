//! `mttl-trace`: reads the traces of an mttl run (`MTTL_TRACE=DIR`).
//!
//! ```text
//! mttl-trace info DIR     the job, and per rank: events, blocks, time span, how it ends
//! mttl-trace stats DIR    per rank: comm primitives, calls, waits, collectives, regions
//! mttl-trace timeline DIR     every event of every rank on rank 0's clock
//! mttl-trace reconstruct DIR  suspensions removed: the run time, per-rank totals
//!                             and the time in each user region (`--json`: JSON)
//! mttl-trace check DIR        every receive after its send, every send received
//!                             (exits 1 when a violation remains after correction;
//!                             `--json`: the counts as JSON)
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
    /// The run with its suspensions removed: run time, per-rank totals and
    /// the time in each user region.
    Reconstruct {
        /// The trace directory.
        dir: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pairs sends and receives; fails when any receive precedes its send
    /// after correction or a message has no pair.
    Check {
        /// The trace directory.
        dir: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A command's text and whether it passed.
type Report = fn(&mttl_trace::Trace) -> (String, bool);

fn check(t: &mttl_trace::Trace) -> (String, bool) {
    let c = mttl_trace::check(t);
    (mttl_trace::check_report(&c), !c.failed())
}

fn check_json(t: &mttl_trace::Trace) -> (String, bool) {
    let c = mttl_trace::check(t);
    (mttl_trace::check_json(&c), !c.failed())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dir, report): (_, Report) = match cli.command {
        Command::Info { dir } => (dir, |t| (mttl_trace::info(t), true)),
        Command::Stats { dir } => (dir, |t| (mttl_trace::stats(t), true)),
        Command::Timeline { dir } => (dir, |t| (mttl_trace::timeline(t), true)),
        Command::Reconstruct { dir, json: false } => {
            (dir, |t| (mttl_trace::reconstruct_report(t), true))
        }
        Command::Reconstruct { dir, json: true } => {
            (dir, |t| (mttl_trace::reconstruct_json(t), true))
        }
        Command::Check { dir, json: false } => (dir, check),
        Command::Check { dir, json: true } => (dir, check_json),
    };
    match mttl_trace::read_dir(&dir) {
        Ok(trace) => {
            let (text, ok) = report(&trace);
            // A reader that stops early (`| head`) is no error of ours.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
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
