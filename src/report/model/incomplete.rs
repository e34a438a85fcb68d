//! Damaged files, said first: a file of the run that is corrupt, or that
//! stops short although its writer finished (docs/verdicts.md §1), leaves the
//! figures built on it incomplete. Every format opens with one line per such
//! file ("these verdicts rest on incomplete data: FILE, WHAT"), the JSON in
//! its top-level `incomplete_data`, and `report` exits 4.

use crate::analysis::AttemptAccount;
use crate::analysis::matrix::MatrixAccount;
use crate::load::Problem;
use serde::Serialize;

/// One damaged file of the run, with the attempt it belongs to.
#[derive(Debug, Clone, Serialize)]
pub struct IncompleteData {
    pub variant: String,
    pub attempt: String,
    pub problem: Problem,
    /// The comparison leaves the attempt out (damaged attempts do not count
    /// in a matrix).
    pub left_out: bool,
}

impl IncompleteData {
    /// The line every format opens with.
    pub fn sentence(&self) -> String {
        let mut s = format!(
            "these verdicts rest on incomplete data: {}, {}",
            self.problem.file,
            self.problem.where_and_what()
        );
        if self.left_out {
            s.push_str(&format!(
                "; attempt {}/{} is left out of the comparison",
                self.variant, self.attempt
            ));
        }
        s
    }
}

/// The damaged files of `attempts`, each file once, in the attempts' order.
pub fn incomplete_data(
    attempts: &[AttemptAccount],
    matrix: Option<&MatrixAccount>,
) -> Vec<IncompleteData> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for a in attempts {
        let left_out = matrix.is_some_and(|m| {
            m.variants
                .iter()
                .filter(|v| v.name == a.variant)
                .any(|v| v.excluded.iter().any(|e| e.attempt == a.attempt))
        });
        for p in a.damaged_files() {
            if seen.insert(p.file.clone()) {
                out.push(IncompleteData {
                    variant: a.variant.clone(),
                    attempt: a.attempt.clone(),
                    problem: p.clone(),
                    left_out,
                });
            }
        }
    }
    out
}

/// The opening lines of the text formats: at most `max` files, then how
/// many more (stderr and the JSON name each).
pub fn opening_lines(incomplete: &[IncompleteData], max: usize) -> Vec<String> {
    let mut lines: Vec<String> = incomplete
        .iter()
        .take(max)
        .map(IncompleteData::sentence)
        .collect();
    if incomplete.len() > max {
        lines.push(format!(
            "and {} more damaged files (stderr and `--format json` name each)",
            incomplete.len() - max
        ));
    }
    lines
}
