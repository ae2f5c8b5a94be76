//! The figure, like the paper's figs. 5 and 7: throughput (MB/s) against
//! transfer size on a log scale, one line per configuration (mttl solid,
//! raw MPI dashed), and below it each mttl configuration's ratio to its
//! reference with the targets as guides; written as SVG and as PNG.
//!
//! The SVG leaves text to the viewer. The PNG draws its text itself with
//! `ab_glyph` and DejaVu Sans embedded in the program ([`GlyphBitmap`]), so
//! neither needs a system font library: plotters' own `ttf` feature would
//! need fontconfig and freetype.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::full_palette::{BLUE_700, GREEN_700, ORANGE_700, RED_700};
use plotters_backend::text_anchor::{HPos, VPos};
// `BackendStyle` stays out of scope: its `stroke_width` would clash with
// `Color`'s.
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

use super::report;
use crate::bench::comm::Config;

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

/// Writes the figure as SVG at `path`.
pub(super) fn write_svg(path: &Path, figure: &Figure) -> Result<(), String> {
    let area = SVGBackend::new(path, SIZE).into_drawing_area();
    draw(&area, figure).map_err(|e| e.to_string())?;
    area.present().map_err(|e| e.to_string())
}

/// Writes the figure as PNG at `path`.
pub(super) fn write_png(path: &Path, figure: &Figure) -> Result<(), String> {
    let font = FontRef::try_from_slice(dejavu::sans::regular())
        .map_err(|e| format!("the embedded font cannot be read: {e}"))?;
    let mut pixels = vec![0u8; SIZE.0 as usize * SIZE.1 as usize * 3];
    {
        let backend = GlyphBitmap {
            inner: BitMapBackend::with_buffer(&mut pixels, SIZE),
            font,
        };
        let area = backend.into_drawing_area();
        draw(&area, figure).map_err(|e| e.to_string())?;
        area.present().map_err(|e| e.to_string())?;
    }
    let file = File::create(path).map_err(|e| e.to_string())?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), SIZE.0, SIZE.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())
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

/// plotters' bitmap backend, drawing text with `ab_glyph` instead of
/// plotters' font support. Everything but text goes to the bitmap backend.
struct GlyphBitmap<'a> {
    inner: BitMapBackend<'a>,
    font: FontRef<'static>,
}

impl GlyphBitmap<'_> {
    /// The font at `size` pixels.
    fn scale(size: f64) -> PxScale {
        PxScale::from(size as f32)
    }

    /// The width and height of `text` at `size`.
    fn measure(&self, text: &str, size: f64) -> (f32, f32) {
        let font = self.font.as_scaled(Self::scale(size));
        let mut width = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                width += font.kern(p, id);
            }
            width += font.h_advance(id);
            prev = Some(id);
        }
        (width, font.ascent() - font.descent())
    }
}

impl<'a> DrawingBackend for GlyphBitmap<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, h) = self.measure(text, style.size());
        Ok((w.ceil() as u32, h.ceil() as u32))
    }

    /// Lays `text` out on one line from its box's top left corner, moves
    /// the box to its anchor and rotates it about `pos`, as plotters' own
    /// text drawing does, and blends each glyph's coverage in.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let (width, height) = self.measure(text, style.size());
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -width / 2.0,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let scale = Self::scale(style.size());
        let font = self.font.as_scaled(scale);
        let inner = &mut self.inner;
        let mut failed = None;
        let mut caret = 0.0;
        let mut prev = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                caret += font.kern(p, id);
            }
            prev = Some(id);
            let glyph =
                id.with_scale_and_position(scale, ab_glyph::point(caret + dx, font.ascent() + dy));
            caret += font.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            outline.draw(|gx, gy, coverage| {
                let x = bounds.min.x as i32 + gx as i32;
                let y = bounds.min.y as i32 + gy as i32;
                let (x, y) = transform.transform(x, y);
                let shade = BackendColor {
                    alpha: color.alpha * f64::from(coverage.clamp(0.0, 1.0)),
                    rgb: color.rgb,
                };
                if let Err(e) = inner.draw_pixel((pos.0 + x, pos.1 + y), shade) {
                    failed.get_or_insert(e);
                }
            });
        }
        failed.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
