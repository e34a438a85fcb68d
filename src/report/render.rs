//! The renderer interface: every output format turns the one report model
//! into bytes written to any `Write` (a file, standard output, a buffer in a
//! test), as hyperfine's exporters and py-spy's recorders do.

use super::model::ReportModel;
use std::io::Write;

/// Why a report could not be written.
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
    #[error("{0}")]
    Output(String),
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

/// The picture formats of `report` (the text formats predate this trait).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visual {
    /// One self-contained HTML file.
    Html,
    /// A folder of PNG charts.
    Png,
    /// Chrome trace-event JSON for ui.perfetto.dev.
    Perfetto,
}

/// Builds the model of an analysed run and writes it in a picture format:
/// to `output` (a file; a folder for PNG), or standard output for HTML and
/// Perfetto. Returns what was written, for the user.
pub fn write_visual(
    format: Visual,
    run_path: &std::path::Path,
    run: &crate::load::RunData,
    attempts: &[crate::analysis::AttemptAccount],
    matrix: Option<&crate::analysis::matrix::MatrixAccount>,
    output: Option<&std::path::Path>,
) -> Result<Vec<std::path::PathBuf>, ReportError> {
    let info = super::model::RunInfo::from_run(&run_path.display().to_string(), run);
    let model = ReportModel::build(info, attempts, matrix);
    let renderer: Box<dyn Renderer> = match format {
        Visual::Png => {
            let dir = output.ok_or_else(|| {
                ReportError::Output(
                    "--format png writes one file per chart: give a folder with -o DIR".into(),
                )
            })?;
            return super::png::write_all(&model, dir);
        }
        Visual::Html => Box::new(super::html::Html),
        Visual::Perfetto => Box::new(super::perfetto::Perfetto),
    };
    match output {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| {
                ReportError::Output(format!("cannot write {}: {e}", path.display()))
            })?;
            let mut out = std::io::BufWriter::new(file);
            renderer.render(&model, &mut out)?;
            out.flush()?;
            Ok(vec![path.to_path_buf()])
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            renderer.render(&model, &mut out)?;
            out.flush()?;
            Ok(Vec::new())
        }
    }
}
