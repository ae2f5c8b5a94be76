//! `mttl-sim FILE|DIR [-L ns] [-o ns] [-g ns] [-G ns/B] [-O ns/B] [-S bytes] [--json]`
//!
//! Prints each rank's finish time with its computation, communication and
//! waiting time, then the maximum. Exit status: 0 when the schedule ran to
//! completion, 1 on bad input, 2 on a deadlock (with a report of the blocked
//! ranks and operations on standard error).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mttl_sim::{input, simulate, Blocked, Params, Report, Schedule};
use serde_json::json;

/// Simulates a GOAL schedule or a TI trace under LogGOPS (LogGOPSim's semantics).
#[derive(Debug, Parser)]
#[command(name = "mttl-sim", version)]
struct Args {
    /// The schedule: GOAL text (as LogGOPSim's txt2bin reads), or a
    /// directory of time-independent traces (`mttl-trace export --ti`).
    file: PathBuf,
    /// Latency L, ns.
    #[arg(short = 'L', default_value_t = Params::default().l)]
    latency: u64,
    /// Overhead o per message, ns.
    #[arg(short = 'o', default_value_t = Params::default().o)]
    overhead: u64,
    /// Gap g per message, ns.
    #[arg(short = 'g', default_value_t = Params::default().g)]
    gap: u64,
    /// Gap G per byte, ns.
    #[arg(short = 'G', default_value_t = Params::default().big_g)]
    gap_per_byte: u64,
    /// Overhead O per byte, ns.
    #[arg(short = 'O', default_value_t = Params::default().big_o)]
    overhead_per_byte: u64,
    /// Largest eager message, bytes; larger ones use rendezvous.
    #[arg(short = 'S', default_value_t = Params::default().s)]
    eager_limit: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print only the maximum (and the event rate), not every rank.
    #[arg(long)]
    summary: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let params = Params {
        l: args.latency,
        o: args.overhead,
        g: args.gap,
        big_g: args.gap_per_byte,
        big_o: args.overhead_per_byte,
        s: args.eager_limit,
    };
    let sched = match input::load(&args.file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mttl-sim: {e}");
            return ExitCode::from(1);
        }
    };
    let report = simulate(&sched, &params);
    if args.json {
        println!("{}", to_json(&sched, &params, &report, args.summary));
    } else {
        print_text(&report, args.summary);
    }
    match &report.deadlock {
        None => ExitCode::SUCCESS,
        Some(d) => {
            eprintln!(
                "mttl-sim: deadlock: {} rank(s) cannot complete their operations",
                d.ranks.len()
            );
            const RANKS: usize = 20;
            const OPS: usize = 8;
            for (r, list) in d.ranks.iter().take(RANKS) {
                eprintln!("  rank {r}:");
                for b in list.iter().take(OPS) {
                    eprintln!("    {}", describe(&sched, b));
                }
                if list.len() > OPS {
                    eprintln!("    ... and {} more", list.len() - OPS);
                }
            }
            if d.ranks.len() > RANKS {
                eprintln!("  ... and {} more ranks", d.ranks.len() - RANKS);
            }
            ExitCode::from(2)
        }
    }
}

fn describe(s: &Schedule, b: &Blocked) -> String {
    match *b {
        Blocked::UnmatchedRecv(id) => format!("{}: posted, no message matches it", s.op(id)),
        Blocked::UnreceivedMessage(id) => {
            format!("message of {}: arrived, no receive takes it", s.op(id))
        }
        Blocked::NotDone(id) => format!("{}: never completed", s.op(id)),
    }
}

fn rate(r: &Report) -> f64 {
    if r.seconds > 0.0 {
        r.events as f64 / r.seconds
    } else {
        0.0
    }
}

fn print_text(r: &Report, summary: bool) {
    if !summary {
        for (i, t) in r.ranks.iter().enumerate() {
            println!(
                "rank {i}: {} ns (compute {} ns, comm {} ns, wait {} ns)",
                t.finish, t.compute, t.comm, t.wait
            );
        }
    }
    println!("max: {} ns (rank {})", r.max.0, r.max.1);
    eprintln!(
        "events: {} in {:.6} s ({:.0} events/s)",
        r.events,
        r.seconds,
        rate(r)
    );
}

fn to_json(s: &Schedule, p: &Params, r: &Report, summary: bool) -> serde_json::Value {
    let ranks: Vec<_> = if summary {
        Vec::new()
    } else {
        r.ranks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                json!({"rank": i, "finish_ns": t.finish, "compute_ns": t.compute,
                       "comm_ns": t.comm, "wait_ns": t.wait})
            })
            .collect()
    };
    let deadlock = r.deadlock.as_ref().map(|d| {
        d.ranks
            .iter()
            .map(|(rank, list)| {
                json!({"rank": rank,
                       "blocked": list.iter().map(|b| describe(s, b)).collect::<Vec<_>>()})
            })
            .collect::<Vec<_>>()
    });
    json!({
        "file": s.source.display().to_string(),
        "params": p,
        "num_ranks": s.num_ranks(),
        "ranks": ranks,
        "max_ns": r.max.0,
        "max_rank": r.max.1,
        "events": r.events,
        "seconds": r.seconds,
        "events_per_second": rate(r),
        "deadlock": deadlock,
    })
}
