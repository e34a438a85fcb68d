//! The report's charts as PNG files: plotters' bitmap backend with the
//! embedded font (no system fonts needed), encoded with the `png` crate.

use super::charts::{Chart, draw_glyphs};
use super::model::ReportModel;
use super::render::{Renderer, ReportError};
use plotters::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One chart rendered as a PNG image.
pub struct PngChart(pub Chart);

impl Renderer for PngChart {
    fn render(&self, model: &ReportModel, out: &mut dyn Write) -> Result<(), ReportError> {
        let (w, h) = self.0.size(model);
        let mut pixels = vec![0u8; w as usize * h as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (w, h)).into_drawing_area();
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

/// Writes every chart of the model as `DIR/<chart>.png`; returns the paths.
pub fn write_all(model: &ReportModel, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        ReportError::Output(format!("cannot create the folder {}: {e}", dir.display()))
    })?;
    let mut written = Vec::new();
    for chart in Chart::all(model) {
        let path = dir.join(format!("{}.png", chart.file_stem()));
        let file = std::fs::File::create(&path)
            .map_err(|e| ReportError::Output(format!("cannot write {}: {e}", path.display())))?;
        let mut out = std::io::BufWriter::new(file);
        PngChart(chart).render(model, &mut out)?;
        out.flush()?;
        written.push(path);
    }
    Ok(written)
}
