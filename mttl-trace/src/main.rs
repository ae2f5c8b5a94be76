//! `mttl-trace`: reads the traces of an mttl run (`MTTL_TRACE=DIR`).
//!
//! ```text
//! mttl-trace info DIR     the job, and per rank: events, blocks, time span, how it ends
//! mttl-trace stats DIR    per rank: comm primitives, calls, waits, collectives, regions
//! mttl-trace timeline DIR     every event of every rank on rank 0's clock
//! mttl-trace reconstruct DIR  suspensions removed: the run time and per-rank totals
//! mttl-trace check DIR        every receive after its send, every send received
//!                             (exits 1 when a violation remains after correction)
//! mttl-trace export DIR --perfetto FILE  the run for ui.perfetto.dev
//! mttl-trace export DIR --otf2 OUT       the run for Vampir (cargo feature `otf2`)
//!                                        (--reconstructed: the suspensions removed)
//! ```

use std::path::{Path, PathBuf};
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
    /// Writes the run for other tools: Perfetto (ui.perfetto.dev) and OTF2
    /// (Vampir, Scalasca; needs the cargo feature `otf2`).
    #[command(group(clap::ArgGroup::new("format").required(true).multiple(true)))]
    Export {
        /// The trace directory.
        dir: PathBuf,
        /// Write Perfetto's protobuf trace format to FILE.
        #[arg(long, value_name = "FILE", group = "format")]
        perfetto: Option<PathBuf>,
        /// Write an OTF2 archive into DIR (new or empty).
        #[arg(long, value_name = "DIR", group = "format")]
        otf2: Option<PathBuf>,
        /// Remove the suspensions (as `reconstruct` does) instead of
        /// showing them.
        #[arg(long)]
        reconstructed: bool,
    },
}

/// A command's text and whether it passed.
type Report = fn(&mttl_trace::Trace) -> (String, bool);

fn check(t: &mttl_trace::Trace) -> (String, bool) {
    let c = mttl_trace::check(t);
    (mttl_trace::check_report(&c), !c.failed())
}

/// `export`: each format asked for, each output said; fails on the
/// first that cannot be written.
fn export(
    trace: &mttl_trace::Trace,
    perfetto: Option<PathBuf>,
    otf2: Option<PathBuf>,
    opts: mttl_trace::ExportOptions,
) -> Result<(), mttl_trace::ExportError> {
    let mut noted = false;
    let mut done = |what: &str, path: &Path, s: mttl_trace::ExportSummary| {
        if !noted {
            for note in &s.notes {
                eprintln!("mttl-trace: {note}");
            }
            noted = true;
        }
        println!(
            "{what} {}: {} ranks, {} tracks, {} slices, {} instants, {} messages, {:.3} ms",
            path.display(),
            s.ranks,
            s.tracks,
            s.slices,
            s.instants,
            s.flows,
            s.span as f64 / 1e6
        );
    };
    if let Some(path) = perfetto {
        let s = mttl_trace::export_perfetto(trace, &path, opts)?;
        done("wrote Perfetto trace", &path, s);
    }
    if let Some(dir) = otf2 {
        let s = mttl_trace::export_otf2(trace, &dir, opts)?;
        done("wrote OTF2 archive", &dir.join("traces.otf2"), s);
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (dir, report): (_, Report) = match cli.command {
        Command::Export {
            dir,
            perfetto,
            otf2,
            reconstructed,
        } => {
            // Refuse an unusable OTF2 directory before writing anything.
            if let Some(Err(e)) = otf2.as_deref().map(mttl_trace::otf2_dir_usable) {
                eprintln!("mttl-trace: {e}");
                return ExitCode::FAILURE;
            }
            let opts = mttl_trace::ExportOptions { reconstructed };
            let done = mttl_trace::read_dir(&dir)
                .map_err(|e| e.to_string())
                .and_then(|t| export(&t, perfetto, otf2, opts).map_err(|e| e.to_string()));
            return match done {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("mttl-trace: {e}");
                    ExitCode::FAILURE
                }
            };
        }
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
