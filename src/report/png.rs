//! The report's charts as PNG files: plotters' bitmap backend with the
//! embedded font (no system fonts needed), encoded with the `png` crate.
//!
//! Text is drawn by [`EvenText`], not by plotters: plotters' bitmap text
//! places each glyph at its advance without its left side bearing, so
//! glyphs with a wide bearing look detached ("th e", "51 6.0 MiB").
//! [`EvenText`] lays text out with the same advances and kerning and draws
//! each glyph where the font puts it. It also records every text box it
//! draws, which the tests use to check that no two labels of a chart overlap.

use super::charts::{Chart, draw_glyphs};
use super::model::ReportModel;
use super::renderer::{Renderer, ReportError};
use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters::prelude::*;
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
    text_anchor::{HPos, VPos},
};
use std::cell::RefCell;
use std::io::Write;
use std::rc::Rc;

/// A piece of text as drawn: what it says and the pixels it covers
/// (inclusive-exclusive, in the image).
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    pub text: String,
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl TextBox {
    /// Whether two boxes share any pixel.
    pub fn overlaps(&self, o: &TextBox) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
}

/// A drawing backend that draws text itself (evenly spaced glyphs) and
/// records where; everything else goes to `inner`.
pub struct EvenText<B> {
    inner: B,
    font: FontRef<'static>,
    /// Where every text drawn is recorded, in order (tests).
    record: Option<Rc<RefCell<Vec<TextBox>>>>,
}

impl<B: DrawingBackend> EvenText<B> {
    /// Wraps `inner`.
    pub fn new(inner: B) -> EvenText<B> {
        EvenText {
            inner,
            font: FontRef::try_from_slice(super::charts::FONT).expect("the embedded font parses"),
            record: None,
        }
    }

    /// Wraps `inner` and records every text box into `record`.
    pub fn recording(inner: B, record: Rc<RefCell<Vec<TextBox>>>) -> EvenText<B> {
        EvenText {
            record: Some(record),
            ..EvenText::new(inner)
        }
    }

    /// Width and height of `text` at `size` px: the advances and kerning
    /// plotters uses for its layout, so axes and labels are placed alike.
    fn layout(&self, text: &str, size: f64) -> (i32, i32) {
        let scaled = self.font.as_scaled(PxScale::from(size as f32));
        let mut width = 0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = prev {
                width += scaled.kern(p, id);
            }
            width += scaled.h_advance(id);
            prev = Some(id);
        }
        (width.ceil() as i32, (size / 1.24) as i32)
    }
}

impl<B: DrawingBackend> DrawingBackend for EvenText<B> {
    type ErrorType = B::ErrorType;

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

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
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

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let (w, h) = self.layout(text, style.size());
        Ok((w.max(0) as u32, h.max(0) as u32))
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 || text.is_empty() {
            return Ok(());
        }
        let size = style.size();
        let (width, height) = self.layout(text, size);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        // The baseline sits so that capitals and descenders fill the layout
        // box as plotters sizes it; the recorded box covers both.
        let baseline = (size * 0.74) as f32;
        let trans = style.transform();
        let ink = (
            (dx, dy - (size * 0.04) as i32),
            (dx + width, dy + (size * 0.98) as i32),
        );
        let corners = [
            trans.transform(ink.0.0, ink.0.1),
            trans.transform(ink.1.0, ink.1.1),
        ];
        if let Some(record) = &self.record {
            record.borrow_mut().push(TextBox {
                text: text.to_string(),
                x0: pos.0 + corners[0].0.min(corners[1].0),
                y0: pos.1 + corners[0].1.min(corners[1].1),
                x1: pos.0 + corners[0].0.max(corners[1].0),
                y1: pos.1 + corners[0].1.max(corners[1].1),
            });
        }
        let scale = PxScale::from(size as f32);
        let scaled = self.font.as_scaled(scale);
        let (w, h) = self.inner.get_size();
        let mut x = 0f32;
        let mut prev = None;
        let mut pixels = Vec::new();
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(p) = prev {
                x += scaled.kern(p, id);
            }
            prev = Some(id);
            let glyph = id.with_scale_and_position(scale, point(x, baseline));
            x += scaled.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            outline.draw(|gx, gy, coverage| {
                let (tx, ty) = trans.transform(
                    b.min.x as i32 + gx as i32 + dx,
                    b.min.y as i32 + gy as i32 + dy,
                );
                pixels.push((pos.0 + tx, pos.1 + ty, coverage));
            });
        }
        for (px, py, coverage) in pixels {
            if px >= 0 && py >= 0 && (px as u32) < w && (py as u32) < h && coverage > 0.0 {
                self.inner.draw_pixel(
                    (px, py),
                    BackendColor {
                        alpha: color.alpha * f64::from(coverage.min(1.0)),
                        rgb: color.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }
}

/// The text boxes of one chart as the PNG draws it (tests check that no
/// two overlap).
pub fn chart_text_boxes(model: &ReportModel, chart: &Chart) -> Result<Vec<TextBox>, ReportError> {
    let (w, h) = chart.size(model);
    let mut pixels = vec![0u8; w as usize * h as usize * 3];
    let record = Rc::new(RefCell::new(Vec::new()));
    {
        let backend = EvenText::recording(
            BitMapBackend::with_buffer(&mut pixels, (w, h)),
            Rc::clone(&record),
        );
        chart.draw(model, &backend.into_drawing_area())?;
    }
    Ok(record.take())
}

/// One chart rendered as a PNG image.
pub struct PngChart(pub Chart);

impl Renderer for PngChart {
    fn render(&self, model: &ReportModel, out: &mut dyn Write) -> Result<(), ReportError> {
        let (w, h) = self.0.size(model);
        let mut pixels = vec![0u8; w as usize * h as usize * 3];
        {
            let root =
                EvenText::new(BitMapBackend::with_buffer(&mut pixels, (w, h))).into_drawing_area();
            let glyphs = self.0.draw(model, &root)?;
            draw_glyphs(&root, &glyphs)?;
            root.present().map_err(|e| ReportError::Chart {
                chart: self.0.file_stem(),
                what: e.to_string(),
            })?;
        }
        let mut encoder = png::Encoder::new(out, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Fast);
        let png_err = |e: png::EncodingError| ReportError::Chart {
            chart: self.0.file_stem(),
            what: format!("PNG encoding failed: {e}"),
        };
        let mut writer = encoder.write_header().map_err(png_err)?;
        writer.write_image_data(&pixels).map_err(png_err)?;
        writer.finish().map_err(png_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first column with ink when `text` is drawn left-aligned at x = 0.
    fn first_ink_column(text: &str, size: u32) -> usize {
        let (w, h) = (200u32, 80u32);
        let mut pixels = vec![255u8; (w * h * 3) as usize];
        {
            let root =
                EvenText::new(BitMapBackend::with_buffer(&mut pixels, (w, h))).into_drawing_area();
            super::super::charts::ensure_font();
            root.draw_text(
                text,
                &TextStyle::from(("sans-serif", size).into_font()).pos(
                    plotters::style::text_anchor::Pos::new(HPos::Left, VPos::Top),
                ),
                (0, 10),
            )
            .unwrap();
        }
        (0..w as usize)
            .find(|x| (0..h as usize).any(|y| pixels[(y * w as usize + x) * 3] < 200))
            .expect("some ink")
    }

    #[test]
    fn glyphs_keep_their_left_side_bearing() {
        // DejaVu's '1' starts about a tenth of an em right of its origin
        // (plotters drew it at the origin: "51 6.0 MiB"); 'T' barely does.
        let font = FontRef::try_from_slice(super::super::charts::FONT).unwrap();
        let scaled = font.as_scaled(PxScale::from(40.0));
        let bearing = scaled.h_side_bearing(scaled.glyph_id('1'));
        assert!(bearing > 2.0, "{bearing}");
        let one = first_ink_column("1", 40) as f32;
        assert!(
            (one - bearing).abs() <= 1.0,
            "ink at {one}, bearing {bearing}"
        );
        assert!(first_ink_column("T", 40) < first_ink_column("1", 40));
    }

    #[test]
    fn text_boxes_overlap_only_when_they_share_pixels() {
        let b = |x0, y0, x1, y1| TextBox {
            text: String::new(),
            x0,
            y0,
            x1,
            y1,
        };
        assert!(b(0, 0, 10, 10).overlaps(&b(9, 9, 20, 20)));
        assert!(!b(0, 0, 10, 10).overlaps(&b(10, 0, 20, 10)));
        assert!(!b(0, 0, 10, 10).overlaps(&b(0, 10, 10, 20)));
    }
}
