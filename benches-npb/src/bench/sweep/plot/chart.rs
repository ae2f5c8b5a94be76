//! The two kinds of figure the benchmarks draw, as [`Picture`]s:
//!
//! - [`LineChart`]: panels stacked top to bottom, each with lines (solid or
//!   dashed, a dot at each point) against a log-scale x axis, a linear or
//!   log-scale y axis, grey dashed guides and a legend;
//! - [`BarPanels`]: a legend of categories above a grid of panels, each a
//!   group of bars per slot on a log-scale y axis, with a label above each
//!   group.

use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::Picture;

/// One axis of a panel.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The axis' description.
    pub desc: String,
    /// The range shown.
    pub range: std::ops::Range<f64>,
    /// Log scale (with `ticks` as its labels) or linear.
    pub log: bool,
    /// Where the labels go (log scales only).
    pub ticks: Vec<f64>,
    /// How a label reads.
    pub label: fn(f64) -> String,
}

/// One line of a panel.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub colour: RGBColor,
    pub dashed: bool,
    /// (x, y), by increasing x.
    pub points: Vec<(f64, f64)>,
}

/// One panel of a [`LineChart`]: x is always on a log scale.
#[derive(Debug, Clone)]
pub struct Panel {
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Heights drawn as grey dashed guides.
    pub guides: Vec<f64>,
    /// Draw a black line at 1 (a ratio's even).
    pub unity: bool,
    pub legend: SeriesLabelPosition,
    /// The share of the figure's height it takes, in percent.
    pub height: u32,
}

/// Lines against a log-scale x axis, in panels stacked top to bottom.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub size: (u32, u32),
    pub panels: Vec<Panel>,
}

impl Picture for LineChart {
    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        area.fill(&WHITE)?;
        let mut rest = area.titled(&self.title, ("sans-serif", 22))?;
        let height = rest.dim_in_pixel().1;
        for (i, panel) in self.panels.iter().enumerate() {
            let here = if i + 1 == self.panels.len() {
                rest.clone()
            } else {
                let (top, bottom) = rest.split_vertically(height * panel.height / 100);
                rest = bottom;
                top
            };
            let y = &panel.y;
            if y.log {
                let coord = y.range.clone().log_scale().with_key_points(y.ticks.clone());
                draw_panel(&here, panel, coord)?;
            } else {
                draw_panel(&here, panel, RangedCoordf64::from(y.range.clone()))?;
            }
        }
        Ok(())
    }
}

/// Draws `panel` on `area` with `y` as its y coordinate.
fn draw_panel<DB, Y>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    y: Y,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x = panel
        .x
        .range
        .clone()
        .log_scale()
        .with_key_points(panel.x.ticks.clone());
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(x, y)?;
    let (xl, yl) = (panel.x.label, panel.y.label);
    chart
        .configure_mesh()
        .x_desc(panel.x.desc.as_str())
        .y_desc(panel.y.desc.as_str())
        .x_label_formatter(&|x| xl(*x))
        .y_label_formatter(&|y| yl(*y))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let (left, right) = (panel.x.range.start, panel.x.range.end);
    let top = panel.y.range.end;
    for &g in &panel.guides {
        let grey = RGBColor(120, 120, 120).stroke_width(1);
        chart.draw_series(DashedLineSeries::new([(left, g), (right, g)], 6, 6, grey))?;
    }
    if panel.unity {
        chart.draw_series(LineSeries::new([(left, 1.0), (right, 1.0)], BLACK))?;
    }
    for s in &panel.series {
        let colour = s.colour;
        let style = colour.stroke_width(2);
        let points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (x, y.min(top))).collect();
        let drawn = if s.dashed {
            chart.draw_series(DashedLineSeries::new(points.clone(), 10, 6, style))?
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style))?
        };
        drawn.label(s.label.as_str()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2))
        });
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(panel.legend.clone())
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Ticks for a log axis from `lo` to `hi`: the coarsest of 1, 1-2-5,
/// 1-9 and steps of 0.1 per decade that gives at least three (plotters'
/// own choice gives none on a range within one decade).
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    // k × 10^e, exactly rounded: 10^|e| is exact, and so is k.
    let at = |k: u32, e: i32| {
        let power = 10f64.powi(e.abs());
        if e >= 0 {
            f64::from(k) * power
        } else {
            f64::from(k) / power
        }
    };
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
pub fn tick_label(y: f64) -> String {
    let decimals = (2 - y.abs().log10().floor() as i32).max(0) as usize;
    let text = format!("{y:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// One panel of [`BarPanels`]: a group of bars per slot, one bar per
/// category (none where the value is 0), and a label above the group.
#[derive(Debug, Clone)]
pub struct BarPanel {
    pub title: String,
    /// Per slot: the values by category, and the label above them.
    pub groups: Vec<(Vec<u64>, String)>,
}

/// Panels of bar groups under one legend.
#[derive(Debug, Clone)]
pub struct BarPanels {
    pub title: String,
    /// The categories and their colours.
    pub categories: Vec<(String, RGBColor)>,
    /// The line under the legend saying how to read a bar.
    pub reading: String,
    pub x_desc: String,
    pub y_desc: String,
    pub panels: Vec<BarPanel>,
}

/// Panels per row of [`BarPanels`].
const COLUMNS: usize = 3;
/// The width of a slot on a panel's x axis; its bars take the middle
/// [`GROUP`] of it.
const SLOT: i32 = 100;
/// The width of a slot's group of bars.
const GROUP: i32 = 80;

impl BarPanels {
    /// Rows and columns of panels.
    pub fn grid(&self) -> (usize, usize) {
        let columns = self.panels.len().clamp(1, COLUMNS);
        (self.panels.len().div_ceil(columns), columns)
    }

    /// The y axis' top: room above the tallest bar for its label.
    fn y_top(&self) -> f64 {
        let most = self
            .panels
            .iter()
            .flat_map(|p| p.groups.iter().flat_map(|g| g.0.iter().copied()))
            .max()
            .unwrap_or(0)
            .max(1);
        most as f64 * 6.0
    }
}

impl Picture for BarPanels {
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
        let font = ("sans-serif", 15).into_font();
        let mut x = 20;
        for (name, colour) in &self.categories {
            legend.draw(&Rectangle::new([(x, 8), (x + 14, 22)], colour.filled()))?;
            legend.draw(&Text::new(name.as_str(), (x + 20, 7), font.clone()))?;
            x += 90;
        }
        legend.draw(&Text::new(self.reading.as_str(), (20, 32), font))?;
        let top = self.y_top();
        for (panel, cell) in self.panels.iter().zip(&panels.split_evenly(self.grid())) {
            self.draw_panel(cell, panel, top)?;
        }
        Ok(())
    }
}

impl BarPanels {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        cell: &DrawingArea<DB, Shift>,
        panel: &BarPanel,
        top: f64,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let n = panel.groups.len().max(1) as i32;
        let keys: Vec<i32> = (0..n).map(|r| r * SLOT + SLOT / 2).collect();
        let mut chart = ChartBuilder::on(cell)
            .caption(&panel.title, ("sans-serif", 16))
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
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&|x| (x / SLOT).to_string())
            .y_label_formatter(&|y| tick_label(*y))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        let width = GROUP / self.categories.len().max(1) as i32;
        for (r, (values, label)) in (0..).zip(&panel.groups) {
            let left = r * SLOT + (SLOT - GROUP) / 2;
            chart.draw_series(
                (0..)
                    .zip(values.iter().zip(&self.categories))
                    .filter(|(_, (&v, _))| v > 0)
                    .map(|(k, (&v, (_, colour)))| {
                        let x0 = left + k * width;
                        Rectangle::new([(x0 + 1, 0.5), (x0 + width - 1, v as f64)], colour.filled())
                    }),
            )?;
            let tallest = values.iter().copied().max().unwrap_or(0).max(1);
            chart.draw_series([Text::new(
                label.clone(),
                (r * SLOT + SLOT / 2, tallest as f64 * 1.3),
                ("sans-serif", 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{write_png, write_svg};
    use super::*;

    #[test]
    fn log_ticks_are_the_coarsest_giving_three() {
        assert_eq!(log_ticks(0.5, 20000.0), [1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert_eq!(log_ticks(1.0, 6.0), [1.0, 2.0, 5.0]);
        assert_eq!(log_ticks(0.5, 6.0), [0.5, 1.0, 2.0, 5.0]);
        assert_eq!(log_ticks(0.0011, 0.0044), [0.002, 0.003, 0.004]);
        assert_eq!(log_ticks(0.8, 1.25), [0.8, 0.9, 1.0]);
        let labels: Vec<String> = [0.002, 0.015, 0.1, 1.0, 1500.0, 0.0011]
            .map(tick_label)
            .into();
        assert_eq!(labels, ["0.002", "0.015", "0.1", "1", "1500", "0.0011"]);
    }

    #[test]
    fn both_kinds_are_written_both_ways() {
        let dir = std::env::temp_dir().join(format!("sweep-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let axis = |log: bool| Axis {
            desc: "x".into(),
            range: 1.0..100.0,
            log,
            ticks: log_ticks(1.0, 100.0),
            label: tick_label,
        };
        let series = |label: &str, dashed| Series {
            label: label.into(),
            colour: RED,
            dashed,
            points: vec![(1.0, 10.0), (100.0, 50.0)],
        };
        let panel = |log| Panel {
            x: axis(true),
            y: axis(log),
            series: vec![series("solid one", false), series("dashed one", true)],
            guides: vec![0.8],
            unity: true,
            legend: SeriesLabelPosition::UpperLeft,
            height: 60,
        };
        let lines = LineChart {
            title: "lines".into(),
            size: (400, 300),
            panels: vec![panel(false), panel(true)],
        };
        let bars = BarPanels {
            title: "bars".into(),
            categories: vec![("send".into(), BLUE), ("recv".into(), GREEN)],
            reading: "how to read".into(),
            x_desc: "rank".into(),
            y_desc: "calls".into(),
            panels: vec![BarPanel {
                title: "p".into(),
                groups: vec![(vec![10, 0], "0.01 MB".into()), (vec![3, 4], "x".into())],
            }],
        };
        assert_eq!(bars.grid(), (1, 1));
        for (stem, svg_text) in [("l", "dashed one"), ("b", "0.01 MB")] {
            let (svg, png) = (
                dir.join(format!("{stem}.svg")),
                dir.join(format!("{stem}.png")),
            );
            if stem == "l" {
                write_svg(&svg, &lines).unwrap();
                write_png(&png, &lines).unwrap();
            } else {
                write_svg(&svg, &bars).unwrap();
                write_png(&png, &bars).unwrap();
            }
            let text = std::fs::read_to_string(&svg).unwrap();
            assert!(text.contains(svg_text), "{text}");
            assert!(std::fs::read(&png)
                .unwrap()
                .starts_with(b"\x89PNG\r\n\x1a\n"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
