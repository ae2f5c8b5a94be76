//! Writing one figure both as SVG and as PNG from a single drawing function.
//!
//! A figure is a [`Picture`]: its size and a `draw` generic over plotters'
//! backends, called once per file, so the two files cannot drift apart.
//!
//! The SVG leaves text to the viewer. The PNG draws its text itself with
//! `ab_glyph` and DejaVu Sans embedded in the program ([`GlyphBitmap`]), so
//! neither needs a system font library: plotters' own `ttf` feature would
//! need fontconfig and freetype.
//!
//! Every benchmark's figures are drawn by [`LineChart`] (lines against a
//! log-scale x axis, in one or more panels) or [`BarPanels`] (groups of
//! bars, one panel per configuration), in `chart.rs`.

mod chart;

pub use chart::{log_ticks, tick_label, Axis, BarPanel, BarPanels, LineChart, Panel, Series};

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
// `BackendStyle` stays out of scope: its `stroke_width` would clash with
// `Color`'s.
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

/// A figure that can be drawn on any plotters backend.
pub trait Picture {
    /// The picture's size in pixels.
    fn size(&self) -> (u32, u32);

    /// Draws the whole picture, background included, on `area`.
    fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>;
}

/// Why a picture could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// plotters failed while drawing.
    #[error("could not draw {}: {detail}", path.display())]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// What plotters reported.
        detail: String,
    },
    /// The font embedded in the program is unusable (a build problem).
    #[error("could not draw {}: the embedded font cannot be read: {detail}", path.display())]
    Font {
        /// The file being drawn.
        path: PathBuf,
        /// What `ab_glyph` reported.
        detail: String,
    },
    /// The PNG file could not be created or encoded.
    #[error("could not write {}: {detail}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system or the encoder reported.
        detail: String,
    },
}

/// Writes `picture` as `STEM.svg` and `STEM.png` beside each other;
/// returns both paths.
pub fn write_both(stem: &Path, picture: &impl Picture) -> Result<[PathBuf; 2], PlotError> {
    let [svg, png] = ["svg", "png"].map(|ext| stem.with_extension(ext));
    write_svg(&svg, picture)?;
    write_png(&png, picture)?;
    Ok([svg, png])
}

/// Writes `picture` as SVG at `path`.
pub fn write_svg(path: &Path, picture: &impl Picture) -> Result<(), PlotError> {
    let drawing = |e: DrawingAreaErrorKind<_>| PlotError::Draw {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    let area = SVGBackend::new(path, picture.size()).into_drawing_area();
    picture.draw(&area).map_err(drawing)?;
    area.present().map_err(drawing)
}

/// Writes `picture` as PNG (8-bit RGB) at `path`.
pub fn write_png(path: &Path, picture: &impl Picture) -> Result<(), PlotError> {
    let (width, height) = picture.size();
    let font = FontRef::try_from_slice(dejavu::sans::regular()).map_err(|e| PlotError::Font {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    let mut pixels = vec![0u8; width as usize * height as usize * 3];
    {
        let drawing = |e: DrawingAreaErrorKind<_>| PlotError::Draw {
            path: path.to_owned(),
            detail: e.to_string(),
        };
        let backend = GlyphBitmap {
            inner: BitMapBackend::with_buffer(&mut pixels, (width, height)),
            font,
        };
        let area = backend.into_drawing_area();
        picture.draw(&area).map_err(drawing)?;
        area.present().map_err(drawing)?;
    }
    let writing = |detail: String| PlotError::Write {
        path: path.to_owned(),
        detail,
    };
    let file = File::create(path).map_err(|e| writing(e.to_string()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| writing(e.to_string()))?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| writing(e.to_string()))?;
    writer.finish().map_err(|e| writing(e.to_string()))
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

    /// A black title on white, and a red square.
    struct Square;

    impl Picture for Square {
        fn size(&self) -> (u32, u32) {
            (120, 80)
        }

        fn draw<DB: DrawingBackend>(
            &self,
            area: &DrawingArea<DB, Shift>,
        ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
            area.fill(&WHITE)?;
            area.draw(&Rectangle::new([(80, 40), (100, 60)], RED.filled()))?;
            area.draw(&Text::new("Hello", (10, 10), ("sans-serif", 20)))
        }
    }

    #[test]
    fn both_files_show_the_same_picture() {
        let dir = std::env::temp_dir().join(format!("common-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("t.svg"), dir.join("t.png"));
        write_svg(&svg, &Square).unwrap();
        write_png(&png, &Square).unwrap();
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(svg_text.contains("Hello"), "{svg_text}");

        let decoder = png::Decoder::new(File::open(&png).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (120, 80));
        let at = |x: usize, y: usize| &pixels[(y * 120 + x) * 3..][..3];
        assert_eq!(at(90, 50), [255, 0, 0], "the square");
        assert_eq!(at(5, 70), [255, 255, 255], "the background");
        let text_area = (10..60).flat_map(|x| (10..30).map(move |y| (x, y)));
        assert!(
            text_area.into_iter().any(|(x, y)| at(x, y)[0] < 100),
            "the title's glyphs are drawn"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_path_is_an_error_naming_it() {
        let path = Path::new("/nonexistent-dir/sub/t.png");
        let e = write_png(path, &Square).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/sub/t.png"), "{e}");
    }
}
