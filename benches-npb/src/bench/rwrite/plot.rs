//! The figure, like the paper's figs. 5 and 7: throughput (MB/s) against
//! transfer size on a log scale, one line per configuration (mttl solid,
//! raw MPI dashed), and below it each mttl configuration's ratio to its
//! reference with the targets as guides. [`Figure`] is a
//! [`Picture`], written as SVG and as PNG by [`crate::bench::common::plot`].

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::full_palette::{BLUE_700, GREEN_700, ORANGE_700, PURPLE_700, RED_700};

use super::report;
use super::Config;
use crate::bench::common::plot::Picture;

/// The picture's size in pixels.
const SIZE: (u32, u32) = (960, 800);

/// One line of the figure.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub(super) config: Config,
    /// (size in bytes, MB/s), by increasing size.
    pub(super) points: Vec<(f64, f64)>,
}

/// The colour of a configuration: one per transport, shared by mttl and
/// its reference.
fn colour(config: Config) -> RGBColor {
    match config {
        Config::Mpi => RED_700,
        Config::MpiOwned => PURPLE_700,
        Config::RawMpi => ORANGE_700,
        Config::Tcp => BLUE_700,
        Config::RawMpiTcp => GREEN_700,
    }
}

/// A size on the axis: `8`, `512`, `4K`, `1M`.
fn axis_label(size: f64) -> String {
    let size = size.round() as u64;
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        format!("{}M", size >> 20)
    } else if size >= 1 << 10 && size % (1 << 10) == 0 {
        format!("{}K", size >> 10)
    } else {
        size.to_string()
    }
}

/// What the figure shows.
#[derive(Debug, Clone)]
pub(super) struct Figure {
    pub(super) title: String,
    /// Throughput, one line per configuration.
    pub(super) lines: Vec<Line>,
    /// mttl over its reference, one line per mttl configuration, (size,
    /// ratio).
    pub(super) ratios: Vec<Line>,
    /// Ratios drawn as grey guides (the targets).
    pub(super) guides: Vec<f64>,
}

impl Picture for Figure {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(area, self)
    }
}

/// The x axis: from the smallest to the largest size, log scale, ticks at
/// every power of 8 and at both ends.
fn x_axis(figure: &Figure) -> (std::ops::Range<f64>, Vec<f64>) {
    let xs = figure
        .lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0));
    let x_min = xs.clone().fold(f64::INFINITY, f64::min);
    let x_max = xs.fold(0.0, f64::max);
    let (x_min, x_max) = if x_min.is_finite() && x_max > x_min {
        (x_min, x_max)
    } else {
        (8.0, f64::from(1 << 20))
    };
    let mut ticks: Vec<f64> = (1..=10)
        .map(|k| 8f64.powi(k))
        .filter(|&t| t >= x_min && t <= x_max)
        .collect();
    for end in [x_min, x_max] {
        if !ticks.iter().any(|&t| (t / end - 1.0).abs() < 1e-9) {
            ticks.push(end);
        }
    }
    ticks.sort_by(f64::total_cmp);
    (x_min..x_max, ticks)
}

/// The largest y of `lines`, or 1.
fn y_top(lines: &[Line]) -> f64 {
    let top = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    if top > 0.0 {
        top
    } else {
        1.0
    }
}

/// Draws the figure on `area`: throughput above, ratios below.
fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    figure: &Figure,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&WHITE)?;
    let area = area.titled(&figure.title, ("sans-serif", 22))?;
    let (upper, lower) = if figure.ratios.is_empty() {
        (area.clone(), None)
    } else {
        let (u, l) = area.split_vertically(area.dim_in_pixel().1 * 64 / 100);
        (u, Some(l))
    };
    let (x_range, ticks) = x_axis(figure);
    let mut chart = ChartBuilder::on(&upper)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(
            x_range.clone().log_scale().with_key_points(ticks.clone()),
            0.0..y_top(&figure.lines) * 1.08,
        )?;
    chart
        .configure_mesh()
        .x_desc("transfer size (bytes)")
        .y_desc("throughput (MB/s)")
        .x_label_formatter(&|x| axis_label(*x))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for line in &figure.lines {
        let colour = colour(line.config);
        let style = colour.stroke_width(2);
        let points = line.points.clone();
        let anno = if reference(line.config) {
            chart.draw_series(DashedLineSeries::new(points.clone(), 10, 6, style))?
        } else {
            chart.draw_series(LineSeries::new(points.clone(), style))?
        };
        anno.label(line.config.column()).legend(move |(x, y)| {
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
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    let Some(lower) = lower else {
        return Ok(());
    };
    // Ratios above 2 are off the chart: the targets are near 1.
    let top = y_top(&figure.ratios).clamp(1.2, 2.0) * 1.05;
    let mut chart = ChartBuilder::on(&lower)
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range.log_scale().with_key_points(ticks), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("transfer size (bytes)")
        .y_desc("mttl / raw MPI")
        .x_label_formatter(&|x| axis_label(*x))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let (left, right) = (chart.x_range().start, chart.x_range().end);
    for &g in &figure.guides {
        chart.draw_series(DashedLineSeries::new(
            [(left, g), (right, g)],
            6,
            6,
            RGBColor(120, 120, 120).stroke_width(1),
        ))?;
    }
    chart.draw_series(LineSeries::new([(left, 1.0), (right, 1.0)], BLACK))?;
    for line in &figure.ratios {
        let colour = colour(line.config);
        let points: Vec<(f64, f64)> = line.points.iter().map(|&(x, y)| (x, y.min(top))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(format!(
                "{} / {}",
                line.config.column(),
                report::reference_of(line.config).map_or("?", Config::column)
            ))
            .legend(move |(x, y)| {
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
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Whether `config` is a raw MPI reference (drawn dashed).
fn reference(config: Config) -> bool {
    matches!(config, Config::RawMpi | Config::RawMpiTcp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::common::plot::{write_png, write_svg};

    #[test]
    fn axis_labels_use_binary_units() {
        assert_eq!(axis_label(8.0), "8");
        assert_eq!(axis_label(512.0), "512");
        assert_eq!(axis_label(4096.0), "4K");
        assert_eq!(axis_label(1048576.0), "1M");
    }

    #[test]
    fn both_pictures_are_written() {
        let dir = std::env::temp_dir().join(format!("rwrite-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lines = vec![
            Line {
                config: Config::Mpi,
                points: vec![(8.0, 10.0), (4096.0, 900.0), (1048576.0, 3000.0)],
            },
            Line {
                config: Config::RawMpi,
                points: vec![(8.0, 12.0), (4096.0, 1000.0), (1048576.0, 3100.0)],
            },
        ];
        let figure = Figure {
            title: "test".into(),
            ratios: vec![Line {
                config: Config::Mpi,
                points: lines[0]
                    .points
                    .iter()
                    .zip(&lines[1].points)
                    .map(|(m, r)| (m.0, m.1 / r.1))
                    .collect(),
            }],
            lines,
            guides: vec![0.8],
        };
        let (svg, png) = (dir.join("t.svg"), dir.join("t.png"));
        write_svg(&svg, &figure).unwrap();
        write_png(&png, &figure).unwrap();
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(svg_text.contains("mttl-mpi") && svg_text.contains("mttl-mpi / raw-mpi"));
        let png_bytes = std::fs::read(&png).unwrap();
        assert_eq!(&png_bytes[1..4], b"PNG");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
