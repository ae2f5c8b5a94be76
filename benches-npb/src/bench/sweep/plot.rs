//! Writing one figure as SVG and as PNG from a single drawing function.
//!
//! A figure is a [`Picture`]: its size and a `draw` generic over plotters'
//! backends. It is drawn once, as SVG; the PNG is that SVG rasterised by
//! `resvg`, with DejaVu Sans embedded in the program as its only font, so
//! the two files cannot drift apart and no system font library is needed.
//!
//! Every benchmark's figures are drawn by [`LineChart`] (lines against a
//! log-scale x axis, in one or more panels) or [`BarPanels`] (groups of
//! bars, one panel per configuration), in `chart.rs`.

mod chart;

pub use chart::{log_ticks, tick_label, Axis, BarPanel, BarPanels, LineChart, Panel, Series};

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;
use resvg::{tiny_skia, usvg};

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
    /// plotters failed while drawing, or the drawing could not be
    /// rasterised.
    #[error("could not draw {}: {detail}", path.display())]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// What plotters or resvg reported.
        detail: String,
    },
    /// The file could not be written.
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
    let text = svg_text(&svg, picture)?;
    write_file(&svg, text.as_bytes())?;
    write_file(&png, &rasterise(&png, &text, picture.size())?)?;
    Ok([svg, png])
}

/// Writes `picture` as SVG at `path`.
pub fn write_svg(path: &Path, picture: &impl Picture) -> Result<(), PlotError> {
    write_file(path, svg_text(path, picture)?.as_bytes())
}

/// Writes `picture` as PNG (8-bit RGBA) at `path`.
pub fn write_png(path: &Path, picture: &impl Picture) -> Result<(), PlotError> {
    let png = rasterise(path, &svg_text(path, picture)?, picture.size())?;
    write_file(path, &png)
}

/// `picture` drawn as an SVG document (for `path`, named in errors).
fn svg_text(path: &Path, picture: &impl Picture) -> Result<String, PlotError> {
    let drawing = |e: DrawingAreaErrorKind<_>| PlotError::Draw {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    let mut text = String::new();
    {
        let area = SVGBackend::with_string(&mut text, picture.size()).into_drawing_area();
        picture.draw(&area).map_err(drawing)?;
        area.present().map_err(drawing)?;
    }
    Ok(text)
}

/// The SVG document `svg` of `(width, height)` pixels as a PNG file's bytes.
fn rasterise(path: &Path, svg: &str, (width, height): (u32, u32)) -> Result<Vec<u8>, PlotError> {
    let failed = |detail: String| PlotError::Draw {
        path: path.to_owned(),
        detail,
    };
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_font_data(dejavu::sans::regular().to_vec());
    fonts.set_sans_serif_family("DejaVu Sans");
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| failed(e.to_string()))?;
    let mut pixmap = tiny_skia::Pixmap::new(width, height)
        .ok_or_else(|| failed(format!("a picture of {width} x {height} pixels")))?;
    resvg::render(
        &tree,
        tiny_skia::Transform::identity(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(|e| failed(e.to_string()))
}

/// Writes `bytes` to `path`.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    std::fs::write(path, bytes).map_err(|e| PlotError::Write {
        path: path.to_owned(),
        detail: e.to_string(),
    })
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

        let pixmap = tiny_skia::Pixmap::load_png(&png).unwrap();
        assert_eq!((pixmap.width(), pixmap.height()), (120, 80));
        let at = |x: usize, y: usize| &pixmap.data()[(y * 120 + x) * 4..][..3];
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
