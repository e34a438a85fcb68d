//! The versioned JSON account (`report --format json`), documented in
//! docs/json-schema.md and described by docs/report.schema.json. Bump
//! SCHEMA_VERSION on any incompatible change.

use super::escape::write_json_pretty;
use super::model::{AttemptView, IncompleteData, ReportModel};
use super::renderer::{Renderer, ReportError};
use crate::analysis::account::ProcessAccount;
use crate::analysis::matrix::MatrixAccount;
use crate::analysis::ranks::RankSpread;
use crate::load::Problem;
use crate::run_folder::meta::RunMeta;
use serde::Serialize;
use std::io::Write;

/// Version of the JSON layout below.
pub const SCHEMA_VERSION: u32 = 4;

/// The top-level JSON document.
#[derive(Debug, Serialize)]
struct RunReport<'a> {
    schema_version: u32,
    tool: &'static str,
    tool_version: &'static str,
    run_dir: &'a str,
    /// The run's damaged files (docs/json-schema.md): first, as every format
    /// says them first.
    incomplete_data: Vec<IncompleteJson<'a>>,
    run: Option<&'a RunMeta>,
    matrix: Option<&'a MatrixAccount>,
    attempts: Vec<AttemptJson<'a>>,
}

/// One damaged file: the attempt, where and what, whether the comparison
/// leaves the attempt out, and the sentence the other formats open with.
#[derive(Debug, Serialize)]
pub(crate) struct IncompleteJson<'a> {
    variant: &'a str,
    attempt: &'a str,
    file: &'a str,
    offset: Option<u64>,
    line: Option<u64>,
    what: &'a str,
    left_out: bool,
    message: String,
}

impl<'a> From<&'a IncompleteData> for IncompleteJson<'a> {
    fn from(d: &'a IncompleteData) -> Self {
        IncompleteJson {
            variant: &d.variant,
            attempt: &d.attempt,
            file: &d.problem.file,
            offset: d.problem.offset,
            line: d.problem.line,
            what: &d.problem.what,
            left_out: d.left_out,
            message: d.sentence(),
        }
    }
}

/// One attempt, in the analysis' layout (every process, in full).
#[derive(Debug, Serialize)]
struct AttemptJson<'a> {
    variant: &'a str,
    attempt: &'a str,
    command: &'a [String],
    exit_code: Option<i32>,
    interrupted: bool,
    warmup: bool,
    host_notices: &'a [String],
    processes: Vec<&'a ProcessAccount>,
    ranks: Option<&'a RankSpread>,
    problems: &'a [Problem],
}

impl<'a> From<&'a AttemptView> for AttemptJson<'a> {
    fn from(a: &'a AttemptView) -> Self {
        AttemptJson {
            variant: &a.variant,
            attempt: &a.attempt,
            command: &a.command,
            exit_code: a.exit_code,
            interrupted: a.interrupted,
            warmup: a.warmup,
            host_notices: &a.notices,
            processes: a.ranks.iter().map(|r| &r.account).collect(),
            ranks: a.spread.as_ref(),
            problems: &a.problems,
        }
    }
}

/// `report --format json`: every attempt and rank, whatever their number.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl Renderer for Json {
    fn render(&self, model: &ReportModel, out: &mut dyn std::io::Write) -> Result<(), ReportError> {
        let doc = RunReport {
            schema_version: SCHEMA_VERSION,
            tool: "prewarm-doctor",
            tool_version: env!("CARGO_PKG_VERSION"),
            run_dir: &model.run.path,
            incomplete_data: model.incomplete.iter().map(IncompleteJson::from).collect(),
            run: model.run.meta.as_ref(),
            matrix: model.matrix_account.as_ref(),
            attempts: model
                .attempts_in_run_order()
                .into_iter()
                .map(AttemptJson::from)
                .collect(),
        };
        // Written as it is serialised: a large run's account is hundreds of MB.
        let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
        write_json_pretty(&mut w, &doc).map_err(|e| {
            if e.is_io() {
                ReportError::Io(e.into())
            } else {
                ReportError::Json(e)
            }
        })?;
        w.write_all(b"\n")?;
        w.flush()?;
        Ok(())
    }
}
