//! `mttl-sim FILE|DIR [-L ns] [-o ns] [-g ns] [-G ns/B] [-O ns/B] [-S bytes]
//! [--profile NAME | --params-from FILE [--params-config NAME]]
//! [--torus DIMS [--hop-latency ns]] [--json] [--summary] [--perfetto FILE]`
//!
//! Prints each rank's finish time with its computation, communication and
//! waiting time, then the maximum. Exit status: 0 when the schedule ran to
//! completion, 1 on bad input, 2 on a deadlock (with a report of the blocked
//! ranks and operations on standard error).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use mttl_sim::params::ns_to_ps;
use mttl_sim::{
    fit, input, simulate_on, simulate_traced, Blocked, Params, Profile, Report, Schedule, Torus,
};
use serde_json::json;

/// Simulates a GOAL schedule or a TI trace under LogGOPS (LogGOPSim's semantics).
#[derive(Debug, Parser)]
#[command(name = "mttl-sim", version)]
struct Args {
    /// The schedule: GOAL text (as LogGOPSim's txt2bin reads), or a
    /// directory of time-independent traces (`mttl-trace export --ti`).
    file: PathBuf,
    /// Latency L, ns [default: 2500, or the profile's].
    #[arg(short = 'L')]
    latency: Option<u64>,
    /// Overhead o per message, ns [default: 1500].
    #[arg(short = 'o')]
    overhead: Option<u64>,
    /// Gap g per message, ns [default: 1000].
    #[arg(short = 'g')]
    gap: Option<u64>,
    /// Gap G per byte, ns (fractions allowed, to the picosecond) [default: 6].
    #[arg(short = 'G')]
    gap_per_byte: Option<f64>,
    /// Overhead O per byte, ns (fractions allowed) [default: 0].
    #[arg(short = 'O')]
    overhead_per_byte: Option<f64>,
    /// Largest eager message, bytes; larger ones use rendezvous [default: 65535].
    #[arg(short = 'S')]
    eager_limit: Option<u64>,
    /// A named network: shm, tcp-loopback, 100base-t, gige, myrinet2000,
    /// k-torus (values and sources: docs/simulator.md). -L, -o, ... given
    /// as well override its values.
    #[arg(long, conflicts_with = "params_from")]
    profile: Option<String>,
    /// Fit L, o, g and G to a `mttl-bench comm --json` result (how:
    /// docs/simulator.md).
    #[arg(long, value_name = "FILE")]
    params_from: Option<PathBuf>,
    /// The configuration of the --params-from file to fit (tcp, mpi, ...),
    /// needed when it holds several.
    #[arg(long, value_name = "NAME", requires = "params_from")]
    params_config: Option<String>,
    /// Route messages on a torus of these dimensions (like 8x8x16), with
    /// per-hop latency and links shared by the messages on them.
    #[arg(long, value_name = "DIMS")]
    torus: Option<String>,
    /// Latency per torus hop, ns [default: the profile's, else 100].
    #[arg(long, value_name = "NS")]
    hop_latency: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print only the maximum (and the event rate), not every rank.
    #[arg(long)]
    summary: bool,
    /// Write the simulated run's timeline to FILE for ui.perfetto.dev: a
    /// track per rank's CPU with its calc, send and recv slices, its waits,
    /// and a flow per message (docs/simulator.md).
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
}

/// Latency per hop when neither the profile nor the command line gives one.
const DEFAULT_HOP_LATENCY: u64 = 100;

/// The parameters: the profile's or fitted ones (or the defaults), then
/// what the command line gives; and the profile's hop latency.
fn resolve_params(args: &Args) -> Result<(Params, Option<&'static Profile>), String> {
    let mut p = Params::default();
    let mut profile = None;
    if let Some(name) = &args.profile {
        let found = Profile::named(name).ok_or_else(|| {
            let names: Vec<&str> = Profile::ALL.iter().map(|p| p.name).collect();
            format!("no profile `{name}` (there are: {})", names.join(", "))
        })?;
        p = found.params;
        profile = Some(found);
    }
    if let Some(file) = &args.params_from {
        let f =
            fit::from_file(file, args.params_config.as_deref(), p).map_err(|e| e.to_string())?;
        p = f.params;
    }
    let per_byte = |flag: &str, v: f64| {
        ns_to_ps(v).ok_or(format!(
            "-{flag} {v}: expected a non-negative number of ns per byte"
        ))
    };
    p.l = args.latency.unwrap_or(p.l);
    p.o = args.overhead.unwrap_or(p.o);
    p.g = args.gap.unwrap_or(p.g);
    p.s = args.eager_limit.unwrap_or(p.s);
    if let Some(v) = args.gap_per_byte {
        p.big_g_ps = per_byte("G", v)?;
    }
    if let Some(v) = args.overhead_per_byte {
        p.big_o_ps = per_byte("O", v)?;
    }
    Ok((p, profile))
}

/// The torus, if `--torus` or a profile with a hop latency asks for one.
fn resolve_torus(
    args: &Args,
    profile: Option<&Profile>,
    ranks: usize,
) -> Result<Option<Torus>, String> {
    let profile_hop = profile.and_then(|p| p.hop_latency);
    let dims = match (&args.torus, profile_hop) {
        (Some(text), _) => Torus::parse_dims(text).map_err(|e| e.to_string())?,
        (None, Some(_)) => Torus::cube_for(ranks),
        (None, None) => return Ok(None),
    };
    let hop = args
        .hop_latency
        .or(profile_hop)
        .unwrap_or(DEFAULT_HOP_LATENCY);
    Torus::new(dims, hop, ranks)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    // Usage errors exit 1 like other bad input (clap's own status, 2, is
    // the deadlock's).
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::from(e.use_stderr()));
        }
    };
    let (params, profile) = match resolve_params(&args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mttl-sim: {e}");
            return ExitCode::from(1);
        }
    };
    let sched = match input::load(&args.file) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mttl-sim: {e}");
            return ExitCode::from(1);
        }
    };
    let torus = match resolve_torus(&args, profile, sched.num_ranks()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mttl-sim: {e}");
            return ExitCode::from(1);
        }
    };
    let topology = torus.as_ref().map(|t| (t.dims().to_vec(), t.hop_latency()));
    let report = match &args.perfetto {
        None => simulate_on(&sched, &params, torus),
        Some(path) => {
            let (report, timeline) = simulate_traced(&sched, &params, torus);
            if let Err(e) = timeline.write_perfetto(&sched, path) {
                eprintln!("mttl-sim: cannot write {}: {e}", path.display());
                return ExitCode::from(1);
            }
            eprintln!(
                "perfetto: {} slices, {} flows written to {}",
                timeline.slices.len(),
                timeline.flows(),
                path.display()
            );
            report
        }
    };
    if args.json {
        let net = Network {
            params: &params,
            profile: args.profile.as_deref(),
            topology,
        };
        println!("{}", to_json(&sched, &net, &report, args.summary));
    } else {
        eprintln!("{}", describe_params(&params, &topology));
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
        Blocked::UnmatchedRecv(id) => {
            format!("{}: posted, no message matches it", s.describe(id))
        }
        Blocked::UnreceivedMessage(id) => {
            format!(
                "message of {}: arrived, no receive takes it",
                s.describe(id)
            )
        }
        Blocked::NotDone(id) => format!("{}: never completed", s.describe(id)),
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

/// The network a run was simulated on, for the outputs.
struct Network<'a> {
    params: &'a Params,
    profile: Option<&'a str>,
    topology: Option<(Vec<u32>, u64)>,
}

/// One line stating the parameters (and torus) used.
fn describe_params(p: &Params, topology: &Option<(Vec<u32>, u64)>) -> String {
    let mut line = format!(
        "params: L={} o={} g={} G={} O={} S={}",
        p.l,
        p.o,
        p.g,
        p.big_g_ps as f64 / 1000.0,
        p.big_o_ps as f64 / 1000.0,
        p.s
    );
    if let Some((dims, hop)) = topology {
        let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
        line.push_str(&format!("; torus {} with {hop} ns per hop", dims.join("x")));
    }
    line
}

fn to_json(s: &Schedule, net: &Network<'_>, r: &Report, summary: bool) -> serde_json::Value {
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
        "params": net.params,
        "profile": net.profile,
        "torus": net.topology.as_ref().map(|(dims, hop)| json!({"dims": dims, "hop_latency_ns": hop})),
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
