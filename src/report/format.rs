//! The formats of `report` and the choice of a renderer for each: above
//! every renderer, below `crate::output`, which writes what they render.

use super::png::PngChart;
use super::renderer::Renderer;
use super::select::Selection;

/// Every format of `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The terminal summary.
    Text,
    /// The versioned JSON account (docs/json-schema.md).
    Json,
    /// Markdown for pull requests and job summaries.
    Md,
    /// Tidy CSV, one measurement per row.
    Csv,
    /// One self-contained HTML file.
    Html,
    /// A folder of PNG charts.
    Png,
    /// Chrome trace-event JSON for ui.perfetto.dev.
    Perfetto,
}

/// What a format renders: one stream of bytes, or one page per chart.
pub enum Rendering<'a> {
    /// One stream (every format but PNG).
    Stream(Box<dyn Renderer + 'a>),
    /// One PNG image per chart of the model, each its own file.
    Pages,
}

impl Format {
    /// The renderer of this format, telling the attempts `selection` picks
    /// (the text and Markdown reports; the others hold every attempt).
    pub fn rendering<'a>(self, selection: Selection<'a>) -> Rendering<'a> {
        use super::{csv_out, html, json, markdown, perfetto, terminal};
        Rendering::Stream(match self {
            Format::Text => Box::new(terminal::Terminal { selection }),
            Format::Json => Box::new(json::Json),
            Format::Md => Box::new(markdown::Markdown { selection }),
            Format::Csv => Box::new(csv_out::Csv),
            Format::Html => Box::new(html::Html),
            Format::Perfetto => Box::new(perfetto::Perfetto),
            Format::Png => return Rendering::Pages,
        })
    }
}

/// One page of a paged format: the file name it gets in the output folder
/// and its renderer.
pub struct Page {
    pub file_name: String,
    pub renderer: PngChart,
}

/// The pages of the PNG format for `model`: one per chart, `<chart>.png`.
pub fn png_pages(model: &super::model::ReportModel) -> Vec<Page> {
    super::charts::Chart::all(model)
        .into_iter()
        .map(|chart| Page {
            file_name: format!("{}.png", chart.file_stem()),
            renderer: PngChart(chart),
        })
        .collect()
}
