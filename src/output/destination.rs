//! Where a report, a diff or a prescription goes: standard output (no `-o`,
//! or `-o -`), an `-o` file, an `-o` folder of PNG pages, and for Markdown
//! also the GitHub job summary; and what the doctor says about it on stderr
//! ("wrote FILE (N bytes)", a job summary that could not be appended).

use super::stdout::{PipeWatch, stdout_bytes};
use crate::report::diff::Diff;
use crate::report::format::{Format, Rendering, png_pages};
use crate::report::model::ReportModel;
use crate::report::renderer::{Renderer, ReportError, render_to_vec};
use crate::report::select::Selection;
use std::io::Write;
use std::path::Path;

/// Why an output could not be written where it was asked to go.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The renderer failed (or `--attempt` named no attempt of the run).
    #[error(transparent)]
    Report(#[from] ReportError),
    /// The destination cannot be written: a missing folder, a full disk.
    #[error("{0}")]
    Destination(String),
    /// The flags ask for something the format cannot do (PNG to standard
    /// output): a usage error, exit code 2.
    #[error("{0}")]
    Usage(String),
}

/// Where `-o` sends the bytes.
#[derive(Clone, Copy)]
enum Destination<'a> {
    /// No `-o`, or `-o -`.
    Stdout,
    /// A file, or for PNG a folder.
    Path(&'a Path),
}

impl<'a> Destination<'a> {
    fn of(output: Option<&'a Path>) -> Destination<'a> {
        match output {
            Some(p) if p != Path::new("-") => Destination::Path(p),
            _ => Destination::Stdout,
        }
    }
}

/// Why `format` cannot go where `output` says, as the usage error that says
/// what to do: the PNG format writes one file per chart (binary, and never
/// to standard output).
pub fn refuse_destination(format: Format, output: Option<&Path>) -> Option<String> {
    let to_stdout = matches!(Destination::of(output), Destination::Stdout);
    (format == Format::Png && to_stdout).then(|| PAGES_NEED_A_FOLDER.into())
}

/// The usage error of a paged format (PNG) without a folder to write into.
const PAGES_NEED_A_FOLDER: &str =
    "--format png writes one file per chart: give a folder with -o DIR";

/// Writes the report of `model` in `format` where `output` says: a file,
/// a folder for PNG, or standard output (`None` or `-`; not for PNG). A
/// reader that went away on standard output is not an error. Markdown is
/// also appended to `$GITHUB_STEP_SUMMARY` when set. Says on stderr what it
/// wrote ("wrote FILE (N bytes)", a summary that could not be appended).
pub fn write_report(
    format: Format,
    model: &ReportModel,
    selection: Selection,
    output: Option<&Path>,
) -> Result<(), OutputError> {
    report_to(format, model, selection, output).map(|notes| say(&notes))
}

/// Writes `diff` in `format` (text, JSON or Markdown) to standard output;
/// Markdown also goes to `$GITHUB_STEP_SUMMARY` (a summary that could not be
/// appended is said on stderr).
pub fn write_diff(format: Format, diff: &Diff) -> Result<(), OutputError> {
    diff_to_stdout(format, diff).map(|notes| say(&notes))
}

/// Each note on stderr, `prewarm-doctor: wrote FILE (N bytes)`.
fn say(notes: &[String]) {
    notes.iter().for_each(super::messages::error);
}

/// [`write_report`]; returns the notes to say.
fn report_to(
    format: Format,
    model: &ReportModel,
    selection: Selection,
    output: Option<&Path>,
) -> Result<Vec<String>, OutputError> {
    selection.pick(model)?;
    let dest = Destination::of(output);
    if let Destination::Path(path) = dest {
        parent_folder_exists(path)?;
    }
    let renderer = match (format.rendering(selection), dest) {
        (Rendering::Stream(renderer), _) => renderer,
        (Rendering::Pages, Destination::Path(dir)) => return write_pages(model, dir),
        (Rendering::Pages, Destination::Stdout) => {
            return Err(OutputError::Usage(PAGES_NEED_A_FOLDER.into()));
        }
    };
    if format != Format::Md {
        return stream(renderer.as_ref(), model, dest);
    }
    // Markdown is small and also goes to the job summary.
    let bytes = render_to_vec(renderer.as_ref(), model)?;
    let mut said: Vec<String> = append_step_summary(&bytes).into_iter().collect();
    said.extend(write_whole(dest, &bytes, None)?);
    Ok(said)
}

/// [`write_diff`]; returns the notes to say.
fn diff_to_stdout(format: Format, diff: &Diff) -> Result<Vec<String>, OutputError> {
    let mut bytes = Vec::new();
    diff.render(format, &mut bytes).map_err(ReportError::from)?;
    let mut said = Vec::new();
    if format == Format::Md {
        said.extend(append_step_summary(&bytes));
    }
    said.extend(write_whole(Destination::Stdout, &bytes, None)?);
    Ok(said)
}

/// Writes `text` (`what`, named in an error: "the prescription") to the `-o`
/// file, or to standard output for `None` or `-`. Says nothing: the caller's
/// summary says what the text holds.
pub fn write_text(output: Option<&Path>, text: &[u8], what: &str) -> Result<(), OutputError> {
    write_whole(Destination::of(output), text, Some(what)).map(drop)
}

/// `-o DIR/FILE` into a folder that is not there is refused before anything
/// is rendered.
fn parent_folder_exists(path: &Path) -> Result<(), OutputError> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => {
            Err(OutputError::Destination(format!(
                "-o {}: the folder {} does not exist (create it first, or use -o - for standard output)",
                path.display(),
                dir.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Writes bytes rendered beforehand; "wrote FILE (N bytes)" for a file.
fn write_whole(
    dest: Destination,
    bytes: &[u8],
    what: Option<&str>,
) -> Result<Option<String>, OutputError> {
    match dest {
        Destination::Stdout => match stdout_bytes(bytes) {
            Ok(_) => Ok(None),
            Err(e) => Err(OutputError::Destination(format!(
                "cannot write to standard output: {e}"
            ))),
        },
        Destination::Path(path) => {
            std::fs::write(path, bytes).map_err(|e| {
                let what = what.map(|w| format!(" {w}")).unwrap_or_default();
                OutputError::Destination(format!("-o {}: cannot write{what}: {e}", path.display()))
            })?;
            Ok(Some(format!(
                "wrote {} ({} bytes)",
                path.display(),
                bytes.len()
            )))
        }
    }
}

/// Writes every page of a paged format (PNG) as its own file in `dir`;
/// "wrote DIR/PAGE" for each.
fn write_pages(model: &ReportModel, dir: &Path) -> Result<Vec<String>, OutputError> {
    std::fs::create_dir_all(dir).map_err(|e| {
        OutputError::Destination(format!("cannot create the folder {}: {e}", dir.display()))
    })?;
    let mut said = Vec::new();
    for page in png_pages(model) {
        let path = dir.join(&page.file_name);
        let file = std::fs::File::create(&path).map_err(|e| {
            OutputError::Destination(format!("cannot write {}: {e}", path.display()))
        })?;
        let mut out = std::io::BufWriter::new(file);
        page.renderer.render(model, &mut out)?;
        out.flush().map_err(ReportError::from)?;
        said.push(format!("wrote {}", path.display()));
    }
    if said.is_empty() {
        said.push(format!(
            "wrote no chart into {}: the run measured nothing a chart could show (the text report says why)",
            dir.display()
        ));
    }
    Ok(said)
}

/// Writes a format as it is rendered (a large run's JSON or trace is
/// hundreds of MB), to a file or standard output.
fn stream(
    renderer: &dyn Renderer,
    model: &ReportModel,
    dest: Destination,
) -> Result<Vec<String>, OutputError> {
    match dest {
        Destination::Path(path) => {
            let file = std::fs::File::create(path).map_err(|e| {
                OutputError::Destination(format!("-o {}: cannot write: {e}", path.display()))
            })?;
            let mut out = Counted {
                inner: std::io::BufWriter::new(file),
                bytes: 0,
            };
            renderer.render(model, &mut out)?;
            out.flush().map_err(ReportError::from)?;
            Ok(vec![format!(
                "wrote {} ({} bytes)",
                path.display(),
                out.bytes
            )])
        }
        Destination::Stdout => {
            let mut out = PipeWatch::new(std::io::BufWriter::new(std::io::stdout().lock()));
            let written = renderer
                .render(model, &mut out)
                .and_then(|()| Ok(out.flush()?));
            Ok(reader_gone_is_fine(written, out.gone)?)
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
        let mut out = PipeWatch::new(Closing { room: 3 });
        let big = vec!["a long string"; 100];
        let written = serde_json::to_writer(&mut out, &big).map_err(ReportError::from);
        assert!(matches!(written, Err(ReportError::Json(_))));
        assert!(out.gone);
        assert!(reader_gone_is_fine(written, out.gone).unwrap().is_empty());
        // Any other failure stays an error.
        let other: Result<(), ReportError> = Err(ReportError::Csv("disk full".into()));
        assert!(reader_gone_is_fine(other, false).is_err());
    }

    #[test]
    fn png_is_refused_on_standard_output_and_allowed_into_a_folder() {
        for stdout in [None, Some(Path::new("-"))] {
            let why = refuse_destination(Format::Png, stdout).unwrap();
            assert!(why.contains("give a folder with -o DIR"), "{why}");
        }
        assert!(refuse_destination(Format::Png, Some(Path::new("charts"))).is_none());
        assert!(refuse_destination(Format::Json, None).is_none());
    }
}
