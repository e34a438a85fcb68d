//! The formats of `report` and the choice of a renderer for each: above
//! every renderer, below `crate::output`, which writes what they render.

use super::png::PngChart;
use super::renderer::Renderer;
use super::select::Selection;

/// Every format of `report`: the one list the CLI (`--format`, its help
/// from these comments), the renderers, `diff` and the tests read; a new
/// variant makes the compiler ask each of them for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable summary.
    Text,
    /// The versioned JSON account (docs/json-schema.md).
    Json,
    /// Markdown for pull requests; also appended to $GITHUB_STEP_SUMMARY when that is set.
    Md,
    /// Tidy CSV, one measurement per row.
    Csv,
    /// One self-contained HTML file with charts; opens offline.
    Html,
    /// PNG charts, one file per chart, into the folder given with -o.
    Png,
    /// Chrome trace-event JSON for ui.perfetto.dev.
    Perfetto,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 7] = [
        Format::Text,
        Format::Json,
        Format::Md,
        Format::Csv,
        Format::Html,
        Format::Png,
        Format::Perfetto,
    ];

    /// Whether `diff` has this format (a comparison is text, JSON or
    /// Markdown; charts, tables and traces are one run's).
    pub fn diffable(self) -> bool {
        match self {
            Format::Text | Format::Json | Format::Md => true,
            Format::Csv | Format::Html | Format::Png | Format::Perfetto => false,
        }
    }

    /// Whether the format tells only the attempts a selection picks (the
    /// text and Markdown reports); the others hold every attempt.
    pub fn tells_a_selection(self) -> bool {
        match self {
            Format::Text | Format::Md => true,
            Format::Json | Format::Csv | Format::Html | Format::Png | Format::Perfetto => false,
        }
    }

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Md => "md",
            Format::Csv => "csv",
            Format::Html => "html",
            Format::Png => "png",
            Format::Perfetto => "perfetto",
        }
    }
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
