//! The renderer interface: every output format turns the one report model
//! into bytes written to any `Write` (a file, standard output, a buffer in a
//! test), as hyperfine's exporters and py-spy's recorders do.

use super::model::ReportModel;
use super::select::Selection;
use std::io::Write;
use std::path::Path;

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
    /// `--attempt` named an attempt the run does not have.
    #[error("{0}")]
    NoSuchAttempt(String),
    /// The flags ask for something the format cannot do (PNG to standard
    /// output): a usage error, exit code 2.
    #[error("{0}")]
    Usage(String),
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

/// The renderer of a format that writes one stream (all but PNG).
fn renderer<'a>(format: Format, selection: Selection<'a>) -> Option<Box<dyn Renderer + 'a>> {
    Some(match format {
        Format::Text => Box::new(super::terminal::Terminal { selection }),
        Format::Json => Box::new(super::json::Json),
        Format::Md => Box::new(super::markdown::Markdown { selection }),
        Format::Csv => Box::new(super::csv_out::Csv),
        Format::Html => Box::new(super::html::Html),
        Format::Perfetto => Box::new(super::perfetto::Perfetto),
        Format::Png => return None,
    })
}

/// Writes the report of `model` in `format` where `output` says: a file,
/// a folder for PNG, or standard output (`None` or `-`; not for PNG). A
/// reader that went away on standard output is not an error. Markdown is
/// also appended to `$GITHUB_STEP_SUMMARY` when set. Returns what to tell
/// the user ("wrote FILE (N bytes)", a summary that could not be appended).
pub fn write_report(
    format: Format,
    model: &ReportModel,
    selection: Selection,
    output: Option<&Path>,
) -> Result<Vec<String>, ReportError> {
    selection.pick(model)?;
    let output = output.filter(|p| *p != Path::new("-"));
    if let Some(dir) = output
        .and_then(|p| p.parent())
        .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
    {
        return Err(ReportError::Output(format!(
            "-o {}: the folder {} does not exist (create it first, or use -o - for standard output)",
            output.unwrap_or(Path::new("")).display(),
            dir.display()
        )));
    }
    let Some(renderer) = renderer(format, selection) else {
        let dir = output.ok_or_else(|| {
            ReportError::Usage(
                "--format png writes one file per chart: give a folder with -o DIR".into(),
            )
        })?;
        let paths = super::png::write_all(model, dir)?;
        return Ok(paths
            .iter()
            .map(|p| format!("wrote {}", p.display()))
            .collect());
    };
    if format != Format::Md {
        return stream(renderer.as_ref(), model, output);
    }
    // Markdown is small and also goes to the job summary.
    let mut said = Vec::new();
    let bytes = render_to_vec(renderer.as_ref(), model)?;
    if let Some(warning) = append_step_summary(&bytes) {
        said.push(warning);
    }
    match output {
        None => match crate::output::stdout_bytes(&bytes) {
            Ok(_) => {}
            Err(e) => {
                return Err(ReportError::Output(format!(
                    "cannot write to standard output: {e}"
                )));
            }
        },
        Some(path) => {
            std::fs::write(path, &bytes).map_err(|e| {
                ReportError::Output(format!("-o {}: cannot write: {e}", path.display()))
            })?;
            said.push(format!("wrote {} ({} bytes)", path.display(), bytes.len()));
        }
    }
    Ok(said)
}

/// Writes a format as it is rendered (a large run's JSON or trace is
/// hundreds of MB), to a file or standard output.
fn stream(
    renderer: &dyn Renderer,
    model: &ReportModel,
    output: Option<&Path>,
) -> Result<Vec<String>, ReportError> {
    match output {
        Some(path) => {
            let file = std::fs::File::create(path).map_err(|e| {
                ReportError::Output(format!("-o {}: cannot write: {e}", path.display()))
            })?;
            let mut out = Counted {
                inner: std::io::BufWriter::new(file),
                bytes: 0,
            };
            renderer.render(model, &mut out)?;
            out.flush()?;
            Ok(vec![format!(
                "wrote {} ({} bytes)",
                path.display(),
                out.bytes
            )])
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = PipeWatch {
                inner: std::io::BufWriter::new(stdout.lock()),
                gone: false,
            };
            let written = renderer
                .render(model, &mut out)
                .and_then(|()| Ok(out.flush()?));
            reader_gone_is_fine(written, out.gone)
        }
    }
}

/// A render that failed because the reader closed the pipe (`| head -1`)
/// is not an error, whatever layer the failure came back through (serde_json
/// wraps it in its own error for the JSON and Perfetto formats).
fn reader_gone_is_fine(
    written: Result<(), ReportError>,
    gone: bool,
) -> Result<Vec<String>, ReportError> {
    match written {
        Err(_) if gone => Ok(Vec::new()),
        Err(ReportError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Vec::new()),
        other => other.map(|()| Vec::new()),
    }
}

/// A writer that remembers whether its reader went away (a broken pipe).
struct PipeWatch<W: Write> {
    inner: W,
    gone: bool,
}

impl<W: Write> PipeWatch<W> {
    fn note<T>(&mut self, r: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &r
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            self.gone = true;
        }
        r
    }
}

impl<W: Write> Write for PipeWatch<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let r = self.inner.write(buf);
        self.note(r)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let r = self.inner.flush();
        self.note(r)
    }
}

/// A writer that counts what passes through (for "wrote FILE (N bytes)").
struct Counted<W: Write> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// GitHub Actions shows Markdown appended to `$GITHUB_STEP_SUMMARY` on the
/// job page. Returns a warning when it is set and cannot be written.
pub fn append_step_summary(md: &[u8]) -> Option<String> {
    let path = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty())?;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(md));
    written.err().map(|e| {
        format!(
            "cannot append to $GITHUB_STEP_SUMMARY ({}): {e}",
            path.to_string_lossy()
        )
    })
}

#[cfg(test)]
mod pipe_tests {
    use super::*;

    /// A reader that went away after `room` bytes.
    struct Closing {
        room: usize,
    }

    impl Write for Closing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_reader_gone_in_the_middle_of_serde_json_is_not_an_error() {
        let mut out = PipeWatch {
            inner: Closing { room: 3 },
            gone: false,
        };
        let big = vec!["a long string"; 100];
        let written = serde_json::to_writer(&mut out, &big).map_err(ReportError::from);
        assert!(matches!(written, Err(ReportError::Json(_))));
        assert!(out.gone);
        assert!(reader_gone_is_fine(written, out.gone).unwrap().is_empty());
        // Any other failure stays an error.
        let other: Result<(), ReportError> = Err(ReportError::Output("disk full".into()));
        assert!(reader_gone_is_fine(other, false).is_err());
    }
}
