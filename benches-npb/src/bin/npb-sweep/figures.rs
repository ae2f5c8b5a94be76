//! The sweep's figures, one of each per kernel and class, drawn by the
//! engine's plot module and written as SVG and as PNG:
//!
//! - [`time`], like the paper's figs. 8-11: the best time against
//!   processes, both on log scales, one line per variant and backend;
//! - [`breakdown`], like figs. 12-13: one panel per configuration of more
//!   than one process, in each a group of bars per rank (its send, nsend,
//!   recv, probe and test calls, log scale) with the megabytes the rank
//!   sent written above it.

use benches_npb::bench::plot::{
    log_ticks, tick_label, Axis, BarPanel, BarPanels, LineChart, Panel, Series,
};
use benches_npb::npb::drivers::Kernel;
use benches_npb::npb::Class;
use plotters::prelude::SeriesLabelPosition;
use plotters::style::full_palette::{
    BLUE_700, GREEN_700, LIGHTBLUE_400, ORANGE_700, PURPLE_400, PURPLE_700, RED_700, TEAL_700,
};

use crate::Config;

/// The colours of the time figure's lines, in order.
const LINE_COLOURS: [plotters::style::RGBColor; 6] = [
    BLUE_700, RED_700, GREEN_700, ORANGE_700, PURPLE_700, TEAL_700,
];

/// Time against processes, one line per variant and backend (and network,
/// with `--net`: then `note` says what the hosts share).
pub(crate) fn time(
    kernel: Kernel,
    class: Class,
    group: &[&Config],
    note: Option<&str>,
) -> LineChart {
    let mut lines: Vec<Series> = Vec::new();
    for c in group {
        let label = c.label();
        let at = match lines.iter().position(|l| l.label == label) {
            Some(at) => at,
            None => {
                // Past the colours, the same colours dashed.
                let colour = LINE_COLOURS[lines.len() % LINE_COLOURS.len()];
                let dashed = (lines.len() / LINE_COLOURS.len()) % 2 == 1;
                let points = Vec::new();
                lines.push(Series {
                    label,
                    colour,
                    dashed,
                    points,
                });
                lines.len() - 1
            }
        };
        if let Some(t) = c.best() {
            lines[at].points.push((c.point.nprocs as f64, t));
        }
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let all = lines.iter().flat_map(|l| l.points.iter());
    let (x_max, y_max) = all
        .clone()
        .fold((1.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let y_min = all.map(|p| p.1).fold(y_max, f64::min);
    let y_range = y_min.max(1e-4) * 0.8..y_max.max(1e-4) * 1.25;
    LineChart {
        title: match note {
            Some(note) => format!(
                "NPB {} class {class}: time in seconds (best run); {note}",
                kernel.name()
            ),
            None => format!(
                "NPB {} class {class}: time in seconds (best run)",
                kernel.name()
            ),
        },
        size: (720, 480),
        panels: vec![Panel {
            x: Axis {
                desc: "processes".into(),
                range: 0.8..x_max * 1.25,
                log: true,
                ticks: (0..)
                    .map(|k| f64::from(1 << k))
                    .take_while(|&x| x <= x_max)
                    .collect(),
                label: |x| format!("{x:.0}"),
            },
            y: Axis {
                desc: "seconds".into(),
                ticks: log_ticks(y_range.start, y_range.end),
                range: y_range,
                log: true,
                label: tick_label,
            },
            series: lines,
            guides: Vec::new(),
            unity: false,
            legend: SeriesLabelPosition::UpperRight,
            height: 100,
        }],
    }
}

/// The per-rank breakdown of one kernel and class's configurations of more
/// than one process, or `None` if none of them has its stats.
pub(crate) fn breakdown(kernel: Kernel, class: Class, group: &[&Config]) -> Option<BarPanels> {
    let panels: Vec<BarPanel> = group
        .iter()
        .filter(|c| c.point.nprocs > 1)
        .filter_map(|c| {
            let ranks = c.stats.as_ref()?.as_ref().ok()?;
            Some(BarPanel {
                title: format!("{}, {} processes", c.label(), c.point.nprocs),
                groups: ranks
                    .iter()
                    .map(|r| {
                        let counts = r.counts().map(|(_, n)| n).to_vec();
                        (counts, format!("{:.2} MB", r.total_mb))
                    })
                    .collect(),
            })
        })
        .collect();
    let colours = [BLUE_700, LIGHTBLUE_400, GREEN_700, ORANGE_700, PURPLE_400];
    let names = ["send", "nsend", "recv", "probe", "test"];
    (!panels.is_empty()).then(|| BarPanels {
        title: format!(
            "NPB {} class {class}: calls per process of the best run (MTTL_STATS)",
            kernel.name()
        ),
        categories: names.into_iter().map(String::from).zip(colours).collect(),
        reading: "bars: calls of each rank (log scale; no bar: none); above them: the megabytes \
                  the rank sent"
            .into(),
        x_desc: "rank".into(),
        y_desc: "calls".into(),
        panels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breakdown::RankStats;
    use crate::Point;
    use benches_npb::npb::drivers::Variant;
    use mttl::comm::launch::BackendKind;

    fn config(nprocs: usize, stats: bool) -> Config {
        let mut c = Config::new(Point {
            kernel: Kernel::Cg,
            class: Class::S,
            nprocs,
            variant: Variant::Mttl,
            backend: BackendKind::Tcp,
            net: None,
        });
        c.times.push(0.5 / nprocs as f64);
        if stats {
            let rank = |rank| RankStats {
                rank,
                send: 10,
                nsend: 0,
                recv: 10,
                probe: 0,
                test: 3,
                msgs: 10,
                avg_kb: 1.0,
                total_mb: 0.01,
            };
            c.stats = Some(Ok((0..nprocs).map(rank).collect()));
        }
        c
    }

    #[test]
    fn figures_have_a_line_per_variant_and_a_panel_per_configuration_with_stats() {
        let (one, two, four) = (config(1, true), config(2, true), config(4, false));
        let figure = breakdown(Kernel::Cg, Class::S, &[&one, &two, &four])
            .expect("the 2-process configuration has stats");
        assert_eq!(figure.panels.len(), 1);
        assert_eq!(figure.panels[0].groups.len(), 2);
        assert_eq!(
            figure.panels[0].groups[0],
            (vec![10, 0, 10, 0, 3], "0.01 MB".into())
        );
        assert!(breakdown(Kernel::Cg, Class::S, &[&one, &four]).is_none());
        let time = time(Kernel::Cg, Class::S, &[&one, &two], None);
        let line = &time.panels[0].series;
        assert_eq!(line.len(), 1);
        assert_eq!(
            (line[0].label.as_str(), &line[0].points[..]),
            ("mttl on tcp", &[(1.0, 0.5), (2.0, 0.25)][..])
        );
    }
}
