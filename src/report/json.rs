//! The versioned JSON account (`report --format json`), documented in
//! docs/json-schema.md. Bump SCHEMA_VERSION on any incompatible change.

use crate::analysis::AttemptAccount;
use crate::analysis::matrix::MatrixAccount;
use crate::capture::meta::RunMeta;
use serde::Serialize;

/// Version of the JSON layout below.
pub const SCHEMA_VERSION: u32 = 2;

/// The top-level JSON document.
#[derive(Debug, Serialize)]
pub struct RunReport<'a> {
    pub schema_version: u32,
    pub tool: &'static str,
    pub tool_version: &'static str,
    pub run_dir: String,
    pub run: Option<&'a RunMeta>,
    pub matrix: Option<&'a MatrixAccount>,
    pub attempts: &'a [AttemptAccount],
}

/// Serialises the report.
pub fn render(
    run_dir: &str,
    run: Option<&RunMeta>,
    matrix: Option<&MatrixAccount>,
    attempts: &[AttemptAccount],
) -> Vec<u8> {
    let doc = RunReport {
        schema_version: SCHEMA_VERSION,
        tool: "prewarm-doctor",
        tool_version: env!("CARGO_PKG_VERSION"),
        run_dir: run_dir.to_string(),
        run,
        matrix,
        attempts,
    };
    let mut out = serde_json::to_vec_pretty(&doc).expect("the account serialises");
    out.push(b'\n');
    out
}
