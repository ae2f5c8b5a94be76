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
//! mttl-trace export DIR --perfetto FILE  the run for ui.perfetto.dev
//! mttl-trace export DIR --otf2 OUT       the run for Vampir (cargo feature `otf2`)
//!                                        (--reconstructed: the suspensions removed)
//! mttl-trace export DIR --ti OUT         the time-independent trace, one file per rank
//! mttl-trace scale --to N --skeleton cg|is|stencil [--class C] DIR OUT
//!                             pseudo TI traces of N ranks (docs/prediction.md)
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
    /// Writes the run for other tools: Perfetto (ui.perfetto.dev), OTF2
    /// (Vampir, Scalasca; needs the cargo feature `otf2`) and the
    /// time-independent trace `mttl-sim` reads.
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
        /// The time-independent trace (docs/prediction.md) into this
        /// directory, one `rank-NNNNN.ti` per rank, for `mttl-sim OUT`
        /// (suspensions always removed).
        #[arg(long, value_name = "OUT", group = "format")]
        ti: Option<PathBuf>,
        /// Remove the suspensions (as `reconstruct` does) instead of
        /// showing them (Perfetto and OTF2).
        #[arg(long)]
        reconstructed: bool,
    },
    /// Pseudo traces of a larger (or smaller) job: the messages from the
    /// kernel's skeleton, the computation from the mapped real rank.
    Scale {
        /// Ranks of the pseudo traces.
        #[arg(long, value_name = "N")]
        to: usize,
        /// The kernel: cg, is or stencil.
        #[arg(long)]
        skeleton: mttl_trace::scale::Kernel,
        /// NPB class of the traced run (cg, is).
        #[arg(long)]
        class: Option<char>,
        /// The real trace's directory.
        dir: PathBuf,
        /// Where the pseudo TI traces go (`rank-NNNNN.ti`, for `mttl-sim OUT`).
        out: PathBuf,
    },
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

/// What a command read block by block does with the files.
type Streamed = fn(&mut mttl_trace::TraceFiles, bool) -> Result<(String, bool), String>;

fn info(f: &mut mttl_trace::TraceFiles, _: bool) -> Result<(String, bool), String> {
    Ok((f.info(), true))
}

fn stats(f: &mut mttl_trace::TraceFiles, _: bool) -> Result<(String, bool), String> {
    Ok((f.stats().map_err(|e| e.to_string())?, true))
}

fn reconstruct(f: &mut mttl_trace::TraceFiles, json: bool) -> Result<(String, bool), String> {
    let rec = f.reconstruct().map_err(|e| e.to_string())?;
    let text = if json {
        mttl_trace::reconstruction_json(&rec)
    } else {
        mttl_trace::reconstruction_text(&rec)
    };
    Ok((text, true))
}

fn check(f: &mut mttl_trace::TraceFiles, json: bool) -> Result<(String, bool), String> {
    let c = f.check().map_err(|e| e.to_string())?;
    let text = if json {
        mttl_trace::check_json(&c)
    } else {
        mttl_trace::check_report(&c)
    };
    Ok((text, !c.failed()))
}

/// `timeline`, written as it is merged (its text is the trace's size).
fn timeline(f: &mut mttl_trace::TraceFiles, _: bool) -> Result<(String, bool), String> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let done = f
        .timeline(&std::env::temp_dir(), &mut out)
        .and_then(|()| std::io::Write::flush(&mut out).map_err(mttl_trace::TimelineError::Output));
    match done {
        // A reader that stops early (`| head`) is no error of ours.
        Ok(()) | Err(mttl_trace::TimelineError::Output(_)) => Ok((String::new(), true)),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs a command that reads the files block by block
/// ([`mttl_trace::TraceFiles`]).
fn streamed(dir: &Path, json: bool, command: Streamed) -> ExitCode {
    let done = mttl_trace::TraceFiles::open(dir)
        .map_err(|e| e.to_string())
        .and_then(|mut f| command(&mut f, json));
    match done {
        Ok((text, ok)) => {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Export {
            dir,
            perfetto,
            otf2,
            ti,
            reconstructed,
        } => {
            if let Some(ti) = ti {
                let done = export_ti(&dir, &ti);
                if done != ExitCode::SUCCESS || (perfetto.is_none() && otf2.is_none()) {
                    return done;
                }
            }
            // Refuse an unusable OTF2 directory before writing anything.
            if let Some(Err(e)) = otf2.as_deref().map(mttl_trace::otf2_dir_usable) {
                eprintln!("mttl-trace: {e}");
                return ExitCode::FAILURE;
            }
            let opts = mttl_trace::ExportOptions { reconstructed };
            let done = mttl_trace::read_dir(&dir)
                .map_err(|e| e.to_string())
                .and_then(|t| export(&t, perfetto, otf2, opts).map_err(|e| e.to_string()));
            match done {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("mttl-trace: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Scale {
            to,
            skeleton,
            class,
            dir,
            out,
        } => {
            let opts = mttl_trace::scale::ScaleOptions {
                kernel: skeleton,
                class,
                to,
            };
            scale(&dir, &out, &opts)
        }
        Command::Info { dir } => streamed(&dir, false, info),
        Command::Stats { dir } => streamed(&dir, false, stats),
        Command::Timeline { dir } => streamed(&dir, false, timeline),
        Command::Reconstruct { dir, json } => streamed(&dir, json, reconstruct),
        Command::Check { dir, json } => streamed(&dir, json, check),
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

/// `scale --to N --skeleton K DIR OUT`.
fn scale(
    dir: &std::path::Path,
    out: &std::path::Path,
    opts: &mttl_trace::scale::ScaleOptions,
) -> ExitCode {
    let trace = match mttl_trace::read_dir(dir) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mttl-trace: {e}");
            return ExitCode::FAILURE;
        }
    };
    let real = mttl_trace::TiTrace::from_trace(&trace);
    let mut writer = match mttl_trace::ti::TiWriter::new(out, opts.to) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("mttl-trace: cannot write {}: {e}", out.display());
            return ExitCode::FAILURE;
        }
    };
    let mut ops = 0usize;
    let done = mttl_trace::scale::scale(&real, opts, |rank, list| {
        ops += list.len();
        writer
            .write_rank(rank, list)
            .map_err(|e| format!("cannot write {}: {e}", out.display()))
    });
    match done {
        Ok(()) => {
            println!(
                "{} ranks, {ops} operations written to {} (from {} real ranks)",
                opts.to,
                out.display(),
                real.ranks.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mttl-trace: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
