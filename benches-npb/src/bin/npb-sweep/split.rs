//! The paper's figs. 12-13 across the lab: each rank's time split into
//! computation and communication, per network.
//!
//! The ranks count their calls and bytes (`MTTL_STATS`), not the time they
//! spend in them, so the communication share is estimated from those counts
//! and what the lab's check measured between two hosts ([`Link`]):
//!
//! 1. a rank's communication time is what the network needs for what it
//!    sent: each message half the measured round trip (the one-way latency
//!    with both stacks), and its bytes at the measured TCP goodput:
//!    `msgs × rtt / 2 + 8 × bytes / goodput`;
//! 2. its computation is the rest of the run's time (the slowest rank's,
//!    as NPB reports it), at least 0.
//!
//! This is a lower bound of the time spent communicating: waiting for a
//! partner that is still computing, and contention for the switch when
//! several ranks send at once, are not in it and count as computation.

use std::fmt::Write as _;

use benches_npb::bench::plot::{BarPanel, BarPanels};
use benches_npb::bench::sweep::report::render;
use benches_npb::npb::drivers::Kernel;
use benches_npb::npb::Class;
use plotters::style::full_palette::{BLUE_700, ORANGE_700};

use crate::breakdown::RankStats;
use crate::{Config, NetInfo};

/// What a network gave between two hosts, as the lab's check measured it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Link {
    /// Median round trip of a 1-byte message, seconds.
    pub(crate) rtt: f64,
    /// TCP goodput of one stream, bits per second.
    pub(crate) goodput_bps: f64,
}

/// One rank's split, seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Split {
    pub(crate) rank: usize,
    pub(crate) compute: f64,
    pub(crate) comm: f64,
}

impl Split {
    /// Communication's share of the run, percent.
    pub(crate) fn comm_percent(&self) -> f64 {
        100.0 * self.comm / (self.compute + self.comm).max(1e-12)
    }
}

/// Steps 1-2 for a run of `seconds` whose ranks counted `ranks`.
pub(crate) fn split(seconds: f64, link: &Link, ranks: &[RankStats]) -> Vec<Split> {
    ranks
        .iter()
        .map(|r| {
            let bytes = r.total_mb * 1024.0 * 1024.0;
            let comm = r.msgs as f64 * link.rtt / 2.0 + 8.0 * bytes / link.goodput_bps.max(1.0);
            let comm = comm.min(seconds);
            Split {
                rank: r.rank,
                compute: seconds - comm,
                comm,
            }
        })
        .collect()
}

/// The configurations of more than one process with stats and a network,
/// each with its split.
fn splits<'a>(group: &[&'a Config], infos: &[NetInfo]) -> Vec<(&'a Config, Vec<Split>)> {
    group
        .iter()
        .filter(|c| c.point.nprocs > 1)
        .filter_map(|c| {
            let ranks = c.stats.as_ref()?.as_ref().ok()?;
            let info = infos.iter().find(|i| Some(i.name) == c.point.net)?;
            Some((*c, split(c.best()?, &info.measured, ranks)))
        })
        .collect()
}

/// The figure for one kernel and class: a panel per configuration, in it a
/// group of two bars per rank (milliseconds of computation and of
/// communication, log scale) with communication's share above; `None` if
/// no configuration has what it needs.
pub(crate) fn figure(
    kernel: Kernel,
    class: Class,
    group: &[&Config],
    infos: &[NetInfo],
    note: &str,
) -> Option<BarPanels> {
    let panels: Vec<BarPanel> = splits(group, infos)
        .into_iter()
        .map(|(c, ranks)| BarPanel {
            title: format!("{}, {} hosts", c.label(), c.point.nprocs),
            groups: ranks
                .iter()
                .map(|s| {
                    let ms = |t: f64| (t * 1e3).round() as u64;
                    (
                        vec![ms(s.compute), ms(s.comm)],
                        format!("{:.0}% comm", s.comm_percent()),
                    )
                })
                .collect(),
        })
        .collect();
    (!panels.is_empty()).then(|| BarPanels {
        title: format!(
            "NPB {} class {class}: computation and communication per host (figs. 12-13); {note}",
            kernel.name()
        ),
        categories: vec![
            ("compute".into(), BLUE_700),
            ("comm (est.)".into(), ORANGE_700),
        ],
        reading: "bars: milliseconds (log scale); communication estimated from the rank's \
                  messages and bytes at the lab's measured round trip and bandwidth"
            .into(),
        x_desc: "host (rank)".into(),
        y_desc: "ms".into(),
        panels,
    })
}

/// The summary's table of every split, per kernel and class.
pub(crate) fn table(configs: &[Config], infos: &[NetInfo]) -> String {
    let mut out = String::from(
        "\nComputation and communication per host (figs. 12-13; communication estimated \
         from each rank's counts at the lab's measured round trip and bandwidth)\n",
    );
    let group: Vec<&Config> = configs.iter().collect();
    let headers = [
        "kernel", "class", "hosts", "config", "rank", "time s", "comm s", "comm %",
    ]
    .map(String::from);
    let rows: Vec<Vec<String>> = splits(&group, infos)
        .into_iter()
        .flat_map(|(c, ranks)| {
            ranks.into_iter().map(move |s| {
                vec![
                    c.point.kernel.name().to_owned(),
                    c.point.class.to_string(),
                    c.point.nprocs.to_string(),
                    c.label(),
                    s.rank.to_string(),
                    format!("{:.3}", s.compute + s.comm),
                    format!("{:.3}", s.comm),
                    format!("{:.1}", s.comm_percent()),
                ]
            })
        })
        .collect();
    if rows.is_empty() {
        let _ = writeln!(out, "\n(no configuration of 2 hosts or more has its stats)");
    } else {
        out.push('\n');
        out.push_str(&render(&headers, &rows, &[], false));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(rank: usize, msgs: u64, total_mb: f64) -> RankStats {
        RankStats {
            rank,
            send: msgs,
            nsend: 0,
            recv: msgs,
            probe: 0,
            test: 0,
            msgs,
            avg_kb: 0.0,
            total_mb,
        }
    }

    #[test]
    fn communication_is_latency_per_message_plus_bytes_at_the_goodput() {
        let link = Link {
            rtt: 100e-6,
            goodput_bps: 8.0 * 1024.0 * 1024.0,
        };
        // 1000 messages: 50 ms of latency; 2 MiB at 1 MiB/s: 2 s.
        let s = split(10.0, &link, &[rank(0, 1000, 2.0), rank(1, 0, 0.0)]);
        assert_eq!(s.len(), 2);
        assert!((s[0].comm - 2.05).abs() < 1e-9, "{:?}", s[0]);
        assert!((s[0].compute - 7.95).abs() < 1e-9);
        assert!((s[0].comm_percent() - 20.5).abs() < 1e-9);
        assert_eq!((s[1].comm, s[1].compute), (0.0, 10.0));
    }

    #[test]
    fn communication_never_exceeds_the_run() {
        let link = Link {
            rtt: 1.0,
            goodput_bps: 1.0,
        };
        let s = split(3.0, &link, &[rank(0, 100, 1.0)]);
        assert_eq!((s[0].comm, s[0].compute), (3.0, 0.0));
        assert_eq!(s[0].comm_percent(), 100.0);
    }
}
