//! The sweep's figures, one of each per kernel and class, each written as
//! SVG and as PNG by `benches_npb::bench::plot` from one drawing function:
//!
//! - [`TimeFigure`], like the paper's figs. 8-11: the best time against
//!   processes, both on log scales, one line per variant and backend;
//! - [`BreakdownFigure`], like figs. 12-13: one panel per configuration of
//!   more than one process, in each a group of bars per rank (its send,
//!   nsend, recv, probe and test calls, log scale) with the megabytes the
//!   rank sent written above it.

use std::path::{Path, PathBuf};

use benches_npb::bench::plot::{write_png, write_svg, Picture, PlotError};
use benches_npb::npb::drivers::Kernel;
use benches_npb::npb::Class;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::full_palette::{
    BLUE_700, GREEN_700, LIGHTBLUE_400, ORANGE_700, PURPLE_400, PURPLE_700, RED_700, TEAL_700,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::breakdown::RankStats;
use crate::Config;

/// Writes `picture` as `DIR/STEM.svg` and `DIR/STEM.png`; returns both paths.
pub(crate) fn write_both(
    dir: &Path,
    stem: &str,
    picture: &impl Picture,
) -> Result<[PathBuf; 2], PlotError> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    write_svg(&svg, picture)?;
    write_png(&png, picture)?;
    Ok([svg, png])
}

/// The file name stem of a kernel and class's figures: `cg-S`.
pub(crate) fn stem(kernel: Kernel, class: Class) -> String {
    format!("{}-{class}", kernel.name().to_lowercase())
}

/// Ticks for a log axis from `lo` to `hi`: the coarsest of 1, 1-2-5,
/// 1-9 and steps of 0.1 per decade that gives at least three (plotters'
/// own choice gives none on a range within one decade).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    // k × 10^e, exactly rounded: 10^|e| is exact, and so is k.
    let at = |k: u32, e: i32| {
        let power = 10f64.powi(e.abs());
        if e >= 0 {
            f64::from(k) * power
        } else {
            f64::from(k) / power
        }
    };
    // (mantissas, their unit as a power of ten relative to the decade).
    let tenths: Vec<u32> = (10..100).collect();
    let sets: [(&[u32], i32); 4] = [
        (&[1], 0),
        (&[1, 2, 5], 0),
        (&[1, 2, 3, 4, 5, 6, 7, 8, 9], 0),
        (&tenths, -1),
    ];
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mut ticks = Vec::new();
    for (mantissas, unit) in sets {
        ticks = (first..=last)
            .flat_map(|e| mantissas.iter().map(move |&k| at(k, e + unit)))
            .filter(|&t| t >= lo && t <= hi)
            .collect();
        if ticks.len() >= 3 {
            break;
        }
    }
    ticks
}

/// `y` with three significant digits at most, without trailing zeros:
/// `0.002`, `0.015`, `1500`.
fn tick_label(y: f64) -> String {
    let decimals = (2 - y.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{y:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The colours of the time figure's lines, in order.
const LINE_COLOURS: [RGBColor; 6] = [
    BLUE_700, RED_700, GREEN_700, ORANGE_700, PURPLE_700, TEAL_700,
];

/// Time against processes, one line per variant and backend.
#[derive(Debug)]
pub(crate) struct TimeFigure {
    title: String,
    /// (variant on backend, (processes, best seconds) by processes).
    lines: Vec<(String, Vec<(f64, f64)>)>,
}

impl TimeFigure {
    /// The figure of one kernel and class's configurations.
    pub(crate) fn new(kernel: Kernel, class: Class, group: &[&Config]) -> TimeFigure {
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for c in group {
            let label = c.label();
            let at = match lines.iter().position(|l| l.0 == label) {
                Some(at) => at,
                None => {
                    lines.push((label, Vec::new()));
                    lines.len() - 1
                }
            };
            if let Some(t) = c.best() {
                lines[at].1.push((c.nprocs as f64, t));
            }
        }
        for line in &mut lines {
            line.1.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        TimeFigure {
            title: format!(
                "NPB {} class {class}: time in seconds (best run)",
                kernel.name()
            ),
            lines,
        }
    }
}

impl Picture for TimeFigure {
    fn size(&self) -> (u32, u32) {
        (720, 480)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let all = self.lines.iter().flat_map(|l| l.1.iter());
        let (x_max, y_max) = all
            .clone()
            .fold((1.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
        let y_min = all.map(|p| p.1).fold(y_max, f64::min);
        let x_ticks: Vec<f64> = (0..)
            .map(|k| f64::from(1 << k))
            .take_while(|&x| x <= x_max)
            .collect();
        let y_range = y_min.max(1e-4) * 0.8..y_max.max(1e-4) * 1.25;
        let y_ticks = log_ticks(y_range.start, y_range.end);

        area.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (0.8f64..x_max * 1.25).log_scale().with_key_points(x_ticks),
                y_range.log_scale().with_key_points(y_ticks),
            )?;
        chart
            .configure_mesh()
            .x_desc("processes")
            .y_desc("seconds")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| tick_label(*y))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()?;
        for ((label, points), colour) in self.lines.iter().zip(LINE_COLOURS.iter().cycle()) {
            let colour = *colour;
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .label_font(("sans-serif", 14))
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    }
}

/// The calls counted per rank, in the stats line's order, and their colours.
const PRIMITIVES: [(&str, RGBColor); 5] = [
    ("send", BLUE_700),
    ("nsend", LIGHTBLUE_400),
    ("recv", GREEN_700),
    ("probe", ORANGE_700),
    ("test", PURPLE_400),
];

/// Panels per row of the breakdown figure.
const COLUMNS: usize = 3;

/// The per-rank breakdown of one kernel and class's configurations of more
/// than one process.
#[derive(Debug)]
pub(crate) struct BreakdownFigure {
    title: String,
    /// (panel title, the ranks' stats by rank).
    panels: Vec<(String, Vec<RankStats>)>,
}

impl BreakdownFigure {
    /// The figure of `group`, or `None` if no configuration of more than one
    /// process has its stats.
    pub(crate) fn new(kernel: Kernel, class: Class, group: &[&Config]) -> Option<BreakdownFigure> {
        let panels: Vec<(String, Vec<RankStats>)> = group
            .iter()
            .filter(|c| c.nprocs > 1)
            .filter_map(|c| {
                let ranks = c.stats.as_ref()?.as_ref().ok()?;
                Some((
                    format!("{}, {} processes", c.label(), c.nprocs),
                    ranks.clone(),
                ))
            })
            .collect();
        (!panels.is_empty()).then(|| BreakdownFigure {
            title: format!(
                "NPB {} class {class}: calls per process of the best run (MTTL_STATS)",
                kernel.name()
            ),
            panels,
        })
    }

    /// Rows and columns of panels.
    fn grid(&self) -> (usize, usize) {
        let columns = self.panels.len().min(COLUMNS);
        (self.panels.len().div_ceil(columns), columns)
    }

    /// The y axis' top: room above the tallest bar for its label.
    fn y_top(&self) -> f64 {
        let most = self
            .panels
            .iter()
            .flat_map(|p| p.1.iter().flat_map(|r| r.counts().map(|c| c.1)))
            .max()
            .unwrap_or(0)
            .max(1);
        most as f64 * 6.0
    }
}

impl Picture for BreakdownFigure {
    fn size(&self) -> (u32, u32) {
        let (rows, columns) = self.grid();
        ((columns as u32 * 420).max(720), 100 + rows as u32 * 340)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        area.fill(&WHITE)?;
        let area = area.titled(&self.title, ("sans-serif", 20))?;
        let (legend, panels) = area.split_vertically(56);
        draw_legend(&legend)?;
        let (rows, columns) = self.grid();
        let cells = panels.split_evenly((rows, columns));
        let top = self.y_top();
        for ((title, ranks), cell) in self.panels.iter().zip(&cells) {
            draw_panel(cell, title, ranks, top)?;
        }
        Ok(())
    }
}

/// The legend above the panels: each call's colour, and how to read a bar.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let font = ("sans-serif", 15).into_font();
    let mut x = 20;
    for (name, colour) in PRIMITIVES {
        area.draw(&Rectangle::new([(x, 8), (x + 14, 22)], colour.filled()))?;
        area.draw(&Text::new(name, (x + 20, 7), font.clone()))?;
        x += 90;
    }
    area.draw(&Text::new(
        "bars: calls of each rank (log scale; no bar: none); above them: the megabytes the rank sent",
        (20, 32),
        font,
    ))
}

/// The width of a rank's place on a panel's x axis; its bars take the
/// middle [`GROUP`] of it.
const SLOT: i32 = 100;

/// The width of a rank's group of bars.
const GROUP: i32 = 80;

/// One configuration's panel: a group of bars per rank.
fn draw_panel<DB: DrawingBackend>(
    cell: &DrawingArea<DB, Shift>,
    title: &str,
    ranks: &[RankStats],
    top: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let n = ranks.len().max(1) as i32;
    let keys: Vec<i32> = (0..n).map(|r| r * SLOT + SLOT / 2).collect();
    let mut chart = ChartBuilder::on(cell)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (0..n * SLOT).with_key_points(keys),
            (0.5..top).log_scale().with_key_points(log_ticks(1.0, top)),
        )?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("rank")
        .y_desc("calls")
        .x_label_formatter(&|x| (x / SLOT).to_string())
        .y_label_formatter(&|y| tick_label(*y))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    let width = GROUP / PRIMITIVES.len() as i32;
    for (r, stats) in (0..).zip(ranks) {
        let left = r * SLOT + (SLOT - GROUP) / 2;
        let counts = stats.counts();
        chart.draw_series(
            (0..)
                .zip(counts.iter().zip(PRIMITIVES))
                .filter(|(_, ((_, count), _))| *count > 0)
                .map(|(k, ((_, count), (_, colour)))| {
                    let x0 = left + k * width;
                    Rectangle::new(
                        [(x0 + 1, 0.5), (x0 + width - 1, *count as f64)],
                        colour.filled(),
                    )
                }),
        )?;
        let tallest = counts.iter().map(|c| c.1).max().unwrap_or(0).max(1);
        chart.draw_series([Text::new(
            format!("{:.2} MB", stats.total_mb),
            (r * SLOT + SLOT / 2, tallest as f64 * 1.3),
            ("sans-serif", 13)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom)),
        )])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use benches_npb::npb::drivers::Variant;
    use mttl::comm::launch::BackendKind;

    #[test]
    fn log_ticks_are_the_coarsest_giving_three() {
        assert_eq!(log_ticks(0.5, 20000.0), [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(log_ticks(1.0, 6.0), [1.0, 2.0, 5.0]);
        assert_eq!(log_ticks(0.5, 6.0), [0.5, 1.0, 2.0, 5.0]);
        assert_eq!(log_ticks(0.0011, 0.0044), [0.002, 0.003, 0.004]);
        assert_eq!(log_ticks(0.8, 1.25), [0.8, 0.9, 1.0]);
        assert_eq!(log_ticks(1.05, 1.35), [1.1, 1.2, 1.3]);
        let labels: Vec<String> = [0.002, 0.015, 0.1, 1.0, 1500.0, 0.0011]
            .map(tick_label)
            .into();
        assert_eq!(labels, ["0.002", "0.015", "0.1", "1", "1500", "0.0011"]);
    }

    fn config(nprocs: usize, stats: bool) -> Config {
        let mut c = Config::new(
            Kernel::Cg,
            Class::S,
            nprocs,
            Variant::Mttl,
            BackendKind::Tcp,
        );
        c.times.push(0.5 / nprocs as f64);
        if stats {
            c.stats = Some(Ok((0..nprocs)
                .map(|rank| RankStats {
                    rank,
                    send: 10,
                    nsend: 0,
                    recv: 10,
                    probe: 0,
                    test: 3,
                    msgs: 10,
                    avg_kb: 1.0,
                    total_mb: 0.01,
                })
                .collect()));
        }
        c
    }

    #[test]
    fn breakdown_has_a_panel_per_configuration_of_several_processes_with_stats() {
        let (one, two, four) = (config(1, true), config(2, true), config(4, false));
        let figure = BreakdownFigure::new(Kernel::Cg, Class::S, &[&one, &two, &four])
            .expect("the 2-process configuration has stats");
        assert_eq!(figure.panels.len(), 1);
        assert_eq!(figure.panels[0].1.len(), 2);
        assert_eq!(figure.grid(), (1, 1));
        assert!(BreakdownFigure::new(Kernel::Cg, Class::S, &[&one, &four]).is_none());
    }

    #[test]
    fn figures_are_written_as_svg_and_png() {
        let dir = std::env::temp_dir().join(format!("npb-sweep-figures-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let configs = [config(1, true), config(2, true)];
        let group: Vec<&Config> = configs.iter().collect();
        let time = TimeFigure::new(Kernel::Cg, Class::S, &group);
        assert_eq!(
            time.lines,
            [("mttl on tcp".into(), vec![(1.0, 0.5), (2.0, 0.25)])]
        );
        let breakdown = BreakdownFigure::new(Kernel::Cg, Class::S, &group).unwrap();
        for (stem, paths) in [
            ("t", write_both(&dir, "t", &time).unwrap()),
            ("b", write_both(&dir, "b", &breakdown).unwrap()),
        ] {
            assert_eq!(paths[0], dir.join(format!("{stem}.svg")));
            let svg = std::fs::read_to_string(&paths[0]).unwrap();
            assert!(svg.contains("NPB CG class S"), "{svg}");
            let png = std::fs::read(&paths[1]).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 5000);
        }
        let svg = std::fs::read_to_string(dir.join("b.svg")).unwrap();
        assert!(svg.contains("0.01 MB") && svg.contains("nsend"), "{svg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
