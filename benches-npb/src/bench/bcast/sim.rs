//! The large-scale evaluation on `mttl-sim`: each broadcast of a series is
//! one GOAL schedule (each rank's work as a `calc`, then the algorithm's
//! messages) played under LogGOPS, and the ranks' simulated slacks feed the
//! adaptive learner (an [`AdaptiveModel`], the same code a job runs), whose
//! table the next broadcast's schedule follows.
//!
//! A rank's slack is the time from entering the receive (the end of its
//! `calc`) to the data's arrival; either way the rank then spends o +
//! (s−1)·max(O, G) of CPU on it before it forwards (mttl-sim's charge), a
//! cost the learner's hop includes. For a rank
//! that waited, the simulator's idle time less the idle time between its
//! own sends ((sends − 1)·(gap − o)) is the wait for the arrival. For a
//! late rank (the data was there first) the arrival is rebuilt with the
//! simulator's rules from its parent's start (its entry or its data's
//! arrival, whichever is later, plus that CPU time): the k-th send (from 0) starts k gaps
//! of max(o, g + (s−1)G) after it and arrives o + L after that. A job's
//! rank measures the same from the time the message was filed in its
//! mailbox. (These are the rules of eager messages, up to mttl-sim's S
//! bytes; larger ones add a rendezvous the rebuilding leaves out.)
//!
//! The arrival-order baseline decides its batches within the call from
//! when the root gets the notices; a GOAL schedule is fixed beforehand, so
//! its batches are computed from the notices' modelled arrival times
//! (work + 2o + L) and the root's modelled costs (o per notice received,
//! o + the message's bytes at G per send), then played by the simulator.

use std::fmt::Write as _;
use std::path::Path;

use mttl::AdaptiveModel;
use mttl_sim::{input, simulate, Params};

use super::pattern::{ideal_table, Algo, Pattern};
use super::report::{CallTimes, Progress, Series};
use crate::bench::error::BenchError;

/// The ideal table is improved by pairwise swaps up to this many ranks
/// (beyond, the sorted placement alone).
const IDEAL_SEARCH_MAX: usize = 64;

/// What every simulated series of a run shares.
#[derive(Debug, Clone, Copy)]
pub(super) struct SimPlan {
    /// Broadcasts per series (per stage of `changing`).
    pub(super) calls: usize,
    /// The unit of work, seconds.
    pub(super) work: f64,
    pub(super) bytes: u64,
    /// The seed of the random pattern.
    pub(super) seed: u64,
    pub(super) params: Params,
}

/// One simulated series: `plan.calls` broadcasts of `plan.bytes` from rank
/// 0 among `n` ranks, each rank working `plan.work` seconds times its
/// pattern's share before each.
pub(super) fn series(
    n: usize,
    pattern: Pattern,
    algo: Algo,
    plan: &SimPlan,
) -> Result<Series, BenchError> {
    let SimPlan {
        calls,
        work,
        bytes,
        seed,
        ref params,
    } = *plan;
    let total = pattern.series_calls(calls);
    let ns = 1e-9;
    let send_cost = (2 * params.o + params.l + params.big_g_ps * bytes / 1000) as f64 * ns;
    let ideal = |stage: Pattern| -> Result<AdaptiveModel, BenchError> {
        let arrival: Vec<f64> = stage.works(n, seed).iter().map(|w| w * work).collect();
        AdaptiveModel::fixed(n, 0, &ideal_table(&arrival, send_cost, IDEAL_SEARCH_MAX))
            .map_err(BenchError::Check)
    };
    let mut learned = AdaptiveModel::new(n, 0);
    let ideals = if algo == Algo::Ideal {
        vec![
            ideal(pattern.stage(0, total))?,
            ideal(pattern.stage(total - 1, total))?,
        ]
    } else {
        Vec::new()
    };
    let binomial = AdaptiveModel::new(n, 0);
    let mut out = Series {
        algo,
        rep: 0,
        calls: Vec::with_capacity(total),
        progress: None,
        progress_half: None,
    };
    for i in 0..total {
        let entry: Vec<u64> = (0..n)
            .map(|r| (pattern.work(r, i, total, n, seed) * work * 1e9) as u64)
            .collect();
        let goal = match algo {
            Algo::Binomial => tree_goal(&binomial, &entry, bytes),
            Algo::Adaptive => tree_goal(&learned, &entry, bytes),
            Algo::Ideal => {
                let same = pattern.stage(i, total) == pattern.stage(0, total);
                tree_goal(&ideals[usize::from(!same)], &entry, bytes)
            }
            Algo::Arrival => arrival_goal(&entry, bytes, params),
        };
        let name = format!("bcast-{}-{}-{n}-{i}.goal", pattern.name(), algo.name());
        let sched = input::goal::parse(Path::new(&name), goal.as_bytes())
            .map_err(|e| BenchError::Check(format!("the generated schedule {name}: {e}")))?;
        let report = simulate(&sched, params);
        if let Some(d) = report.deadlock {
            return Err(BenchError::Check(format!(
                "the generated schedule {name} deadlocked ({} ranks blocked)",
                d.ranks.len()
            )));
        }
        let exits: Vec<u64> = report.ranks.iter().map(|t| t.finish).collect();
        out.calls.push(CallTimes::from_spans(
            entry
                .iter()
                .zip(&exits)
                .map(|(&a, &b)| (a as f64 * ns, b as f64 * ns)),
        ));
        if algo == Algo::Adaptive {
            let idle: Vec<u64> = report.ranks.iter().map(|t| t.wait).collect();
            let slacks = tree_slacks(&learned, &entry, &idle, bytes, params);
            // What a job's root measures: the data's one-way time to a
            // child, its CPU time to take it, and its own time per send.
            learned.hop_sample((one_way(params) + receive_cost(bytes, params)) as f64 * ns);
            learned.gap_sample(send_gap(bytes, params) as f64 * ns);
            learned
                .after_broadcast(&slacks)
                .map_err(BenchError::Check)?;
            if i + 1 == total / 2 {
                out.progress_half = Some(Progress::from(learned.progress()));
            }
        }
    }
    if algo == Algo::Adaptive {
        out.progress = Some(Progress::from(learned.progress()));
    }
    Ok(out)
}

/// The time (ns) from a send's start to its message's arrival: o + L
/// (the sender's NIC pays (s−1)G before its next message).
fn one_way(p: &Params) -> u64 {
    p.o + p.l
}

/// The receiver's CPU time (ns) for a message that arrived: o + (s−1)
/// times the larger of O and G.
fn receive_cost(bytes: u64, p: &Params) -> u64 {
    p.o + p.big_o_ps.max(p.big_g_ps) * bytes.saturating_sub(1) / 1000
}

/// The time (ns) between a rank's successive sends: its CPU's o or its
/// NIC's g + (s−1)G, whichever is longer.
fn send_gap(bytes: u64, p: &Params) -> u64 {
    p.o.max(p.g + p.big_g_ps * bytes.saturating_sub(1) / 1000)
}

/// Every rank's slack (seconds) in a broadcast down `table`'s tree, from
/// the ranks' entries and idle times (ns), as the module docs say.
fn tree_slacks(
    table: &AdaptiveModel,
    entry: &[u64],
    idle: &[u64],
    bytes: u64,
    p: &Params,
) -> Vec<f64> {
    data_arrivals(table, entry, idle, bytes, p)
        .iter()
        .zip(entry)
        .map(|(&(got, _), &e)| (got as f64 - e as f64) * 1e-9)
        .collect()
}

/// Per rank (ns): when the data reached it (the root: its entry) as the
/// slack takes it, and as LogGOPS's rules alone give it. A rank's idle
/// time is its wait for the data plus, between its sends, the time the
/// NIC is busier than the CPU: `(sends - 1) · (gap - o)`.
fn data_arrivals(
    table: &AdaptiveModel,
    entry: &[u64],
    idle: &[u64],
    bytes: u64,
    p: &Params,
) -> Vec<(u64, u64)> {
    let n = entry.len();
    let gap = send_gap(bytes, p);
    let latency = one_way(p);
    let receive = receive_cost(bytes, p);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&r| table.virtual_ranks()[r]);
    let mut modelled = vec![0u64; n];
    let mut out = vec![(0, 0); n];
    // Virtual ranks in increasing order visit parents before children.
    for r in order {
        let children = table.children(r);
        let start = match table.parent(r) {
            None => {
                out[r] = (entry[r], entry[r]);
                entry[r]
            }
            Some(_) => {
                let between = children.len().saturating_sub(1) as u64 * (gap - p.o);
                let waited = idle[r].saturating_sub(between);
                let got = if waited > 0 {
                    entry[r] + waited
                } else {
                    modelled[r]
                };
                out[r] = (got, modelled[r]);
                entry[r].max(got) + receive
            }
        };
        for (k, &c) in children.iter().enumerate() {
            modelled[c] = start + k as u64 * gap + latency;
        }
    }
    out
}

/// A broadcast down `table`'s tree after each rank's `calc` of
/// `entry[r]` ns.
fn tree_goal(table: &AdaptiveModel, entry: &[u64], bytes: u64) -> String {
    let n = entry.len();
    let mut g = String::with_capacity(n * 96);
    let _ = writeln!(g, "num_ranks {n}");
    for (r, &w) in entry.iter().enumerate() {
        let _ = writeln!(g, "rank {r} {{\nc: calc {w}");
        let after = match table.parent(r) {
            Some(p) => {
                let _ = writeln!(g, "d: recv {bytes}b from {p} tag 0\nd requires c");
                "d"
            }
            None => "c",
        };
        for (k, c) in table.children(r).into_iter().enumerate() {
            let _ = writeln!(g, "s{k}: send {bytes}b to {c} tag 0\ns{k} requires {after}");
        }
        g.push_str("}\n");
    }
    g
}

/// The arrival-order broadcast after each rank's `calc` of `entry[r]` ns,
/// its batches decided as the module docs say.
fn arrival_goal(entry: &[u64], bytes: u64, p: &Params) -> String {
    let n = entry.len();
    // When each notice reaches the root.
    let notice = |r: usize| entry[r] + 2 * p.o + p.l;
    let mut pending: Vec<usize> = (1..n).collect();
    pending.sort_by_key(|&r| (notice(r), r));
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut t = entry[0];
    let mut next = 0;
    while next < pending.len() {
        t = t.max(notice(pending[next]));
        let end = next + pending[next..].partition_point(|&r| notice(r) <= t);
        let batch = pending[next..end].to_vec();
        let sends = u64::from((batch.len() + 1).next_power_of_two().trailing_zeros());
        t += batch.len() as u64 * p.o + sends * (p.o + p.big_g_ps * bytes / 1000).max(p.g);
        batches.push(batch);
        next = end;
    }
    // Who sends to whom: the root serves each batch's list, every rank the
    // list it gets (protocol step 3 of the core's arrival module).
    let mut parent = vec![usize::MAX; n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut root_sends: Vec<Vec<usize>> = Vec::new();
    for batch in &batches {
        let mut list = vec![0];
        list.extend_from_slice(batch);
        let mut firsts = Vec::new();
        serve(&list, &mut |from, to| {
            parent[to] = from;
            if from == 0 {
                firsts.push(to);
            } else {
                children[from].push(to);
            }
        });
        root_sends.push(firsts);
    }
    let mut g = String::with_capacity(n * 128);
    let _ = writeln!(g, "num_ranks {n}");
    let _ = writeln!(g, "rank 0 {{\nc: calc {}", entry[0]);
    for (b, (batch, sends)) in batches.iter().zip(&root_sends).enumerate() {
        for &r in batch {
            let _ = writeln!(g, "a{r}: recv 4b from {r} tag 1\na{r} requires c");
        }
        let last = batch.last().copied().unwrap_or(0);
        for (k, &to) in sends.iter().enumerate() {
            let _ = writeln!(
                g,
                "s{b}x{k}: send {bytes}b to {to} tag 0\ns{b}x{k} requires a{last}"
            );
        }
    }
    g.push_str("}\n");
    for r in 1..n {
        let _ = writeln!(
            g,
            "rank {r} {{\nc: calc {}\nn: send 4b to 0 tag 1\nn requires c\nd: recv {bytes}b from {} tag 0\nd requires c",
            entry[r], parent[r]
        );
        for (k, &to) in children[r].iter().enumerate() {
            let _ = writeln!(g, "s{k}: send {bytes}b to {to} tag 0\ns{k} requires d");
        }
        g.push_str("}\n");
    }
    g
}

/// The binomial tree on `list` (its head first) as the arrival-order
/// broadcast serves it: `edge(from, to)` for every message, each sender's
/// in the order it sends.
fn serve(list: &[usize], edge: &mut impl FnMut(usize, usize)) {
    let mut end = list.len();
    while end > 1 {
        let half = end.div_ceil(2);
        edge(list[0], list[half]);
        serve(&list[half..end], edge);
        end = half;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_a_list_reaches_everyone_once() {
        for len in 1..40 {
            let list: Vec<usize> = (0..len).collect();
            let mut got = vec![0; len];
            serve(&list, &mut |_, to| got[to] += 1);
            assert_eq!(got[0], 0);
            assert!(got[1..].iter().all(|&c| c == 1), "{len}: {got:?}");
        }
    }

    #[test]
    fn modelled_arrivals_are_the_simulator_s_for_ranks_that_waited() {
        let p = Params::default();
        let n = 32;
        for (seed, bytes) in [(1, 4096), (2, 64), (3, 60_000)] {
            let entry: Vec<u64> = (0..n)
                .map(|r| (Pattern::Random.work(r, 0, 1, n, seed) * 200_000.0) as u64)
                .collect();
            let mut table = AdaptiveModel::new(n, 0);
            // A table other than the binomial one too.
            for round in 0..2 {
                let goal = tree_goal(&table, &entry, bytes);
                let sched = input::goal::parse(Path::new("t.goal"), goal.as_bytes()).unwrap();
                let report = simulate(&sched, &p);
                let idle: Vec<u64> = report.ranks.iter().map(|t| t.wait).collect();
                let got = data_arrivals(&table, &entry, &idle, bytes, &p);
                let mut waited = 0;
                for r in 1..n {
                    let (observed, modelled) = got[r];
                    if observed > entry[r] {
                        waited += 1;
                        assert!(
                            observed.abs_diff(modelled) <= 2,
                            "round {round}, {bytes} B, rank {r}: {observed} vs {modelled}"
                        );
                    }
                }
                assert!(waited > 3, "{waited}");
                // Then the same on the table that sorts the ranks by entry.
                let seconds: Vec<f64> = entry.iter().map(|&e| e as f64 * 1e-9).collect();
                table = AdaptiveModel::fixed(n, 0, &ideal_table(&seconds, 30e-6, 0)).unwrap();
            }
        }
    }

    #[test]
    fn simulated_series_learn_the_heavy_pattern() {
        let p = Params::default();
        let plan = SimPlan {
            calls: 40,
            work: 1e-3,
            bytes: 1024,
            seed: 1,
            params: p,
        };
        let run = |algo| series(32, Pattern::Heavy, algo, &plan).unwrap();
        let steady = |s: &Series| {
            let c = &s.calls[20..];
            c.iter().map(|c| c.bcast).sum::<f64>() / c.len() as f64
        };
        let (b, a, i, r) = (
            run(Algo::Binomial),
            run(Algo::Adaptive),
            run(Algo::Ideal),
            run(Algo::Arrival),
        );
        assert!(steady(&a) < steady(&b), "{} vs {}", steady(&a), steady(&b));
        assert!(steady(&i) <= steady(&a) * 1.0001);
        assert!(steady(&r) < steady(&b));
        assert!(a.progress.is_some_and(|p| p.changes > 0));
    }
}
