//! The renderer interface, at the bottom of `src/report`: every output
//! format turns the one report model into bytes written to any `Write` (a
//! file, standard output, a buffer in a test), as hyperfine's exporters and
//! py-spy's recorders do. Where the bytes go is not a renderer's business:
//! `crate::output` chooses the destination.

use super::model::ReportModel;
use std::io::Write;

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write the report: {0} (check the output path and free disk space)")]
    Io(#[from] std::io::Error),
    #[error("cannot draw the {chart} chart: {what}")]
    Chart { chart: String, what: String },
    #[error("cannot fill the HTML template: {0}")]
    Template(String),
    #[error("cannot serialise the report: {0}")]
    Json(#[from] serde_json::Error),
    /// The CSV writer failed for a reason other than I/O.
    #[error("cannot write CSV: {0}")]
    Csv(String),
    /// `--attempt` named an attempt the run does not have.
    #[error("{0}")]
    NoSuchAttempt(String),
}

/// One output format.
pub trait Renderer {
    /// Writes the report for `model` to `out`.
    fn render(&self, model: &ReportModel, out: &mut dyn Write) -> Result<(), ReportError>;
}

/// Renders into memory (tests, and formats that are sized before writing).
pub fn render_to_vec(r: &dyn Renderer, model: &ReportModel) -> Result<Vec<u8>, ReportError> {
    let mut buf = Vec::new();
    r.render(model, &mut buf)?;
    Ok(buf)
}
