//! From a run folder to what the verbs print: load it (src/load), analyse
//! and compare it (src/analysis), build the one report model. `commands`
//! calls these and only dispatches.

use super::model::{ReportModel, RunInfo};
use super::select::Selection;
use crate::analysis::matrix::{MatrixAccount, compare};
use crate::analysis::summary::{VariantSummary, summaries};
use crate::analysis::{AttemptAccount, analyse_run};
use crate::load::{LoadError, Problem, RunData, load_run};
use std::path::{Path, PathBuf};

/// A run folder loaded and analysed.
pub struct Analysed {
    /// The folder as the user named it.
    pub path: PathBuf,
    pub run: RunData,
    pub attempts: Vec<AttemptAccount>,
    /// The comparison, for runs of several variants (or repeats).
    pub matrix: Option<MatrixAccount>,
}

impl Analysed {
    /// Loads and analyses the run folder at `path`.
    pub fn load(path: &Path) -> Result<Analysed, LoadError> {
        let run = load_run(path)?;
        let attempts = analyse_run(&run);
        let matrix = compare(run.meta.as_ref(), &attempts);
        Ok(Analysed {
            path: path.to_path_buf(),
            run,
            attempts,
            matrix,
        })
    }

    /// The report model every format renders (a copy of the analysis).
    pub fn model(&self) -> ReportModel {
        let info = RunInfo::from_run(&self.path.display().to_string(), &self.run);
        ReportModel::build(info, &self.attempts, self.matrix.as_ref())
    }

    /// The report model, taking the analysis over (no copy).
    pub fn into_model(self) -> ReportModel {
        let info = RunInfo::from_run(&self.path.display().to_string(), &self.run);
        ReportModel::from_analysis(info, self.attempts, self.matrix)
    }

    /// Each variant over its attempts (for gates and `diff`).
    pub fn summaries(&self) -> Vec<VariantSummary> {
        summaries(self.run.meta.as_ref(), &self.attempts)
    }

    /// One line per damaged or unreadable file (the file under the run
    /// folder, the byte offset, what is wrong), each file once.
    pub fn damage_lines(&self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        let mut lines = Vec::new();
        for p in self.attempts.iter().flat_map(|a| a.all_problems()) {
            if p.damaged && seen.insert(p.file.clone()) {
                let located = Problem {
                    file: self.path.join(&p.file).display().to_string(),
                    ..p.clone()
                };
                lines.push(format!("damaged file: {located}"));
            }
        }
        lines
    }
}

/// The summary `run` prints at its end: the terminal report's default view
/// and where the run folder is.
pub fn end_of_run_summary(out: &Path) -> Result<String, LoadError> {
    let model = Analysed::load(out)?.into_model();
    let mut text = super::terminal::Terminal {
        selection: Selection::Default,
    }
    .text(&model)
    .unwrap_or_default();
    text.push_str(&format!(
        "   run folder: {}\n",
        super::escape::terminal(&out.display().to_string())
    ));
    Ok(text)
}

/// `diff`'s inputs: the same variants in two runs.
pub struct DiffInputs {
    pub old: Analysed,
    pub new: Analysed,
    pub old_summaries: Vec<VariantSummary>,
    pub new_summaries: Vec<VariantSummary>,
}

impl DiffInputs {
    /// Loads and analyses both runs.
    pub fn load(old: &Path, new: &Path) -> Result<DiffInputs, LoadError> {
        let old = Analysed::load(old)?;
        let new = Analysed::load(new)?;
        Ok(DiffInputs {
            old_summaries: old.summaries(),
            new_summaries: new.summaries(),
            old,
            new,
        })
    }

    /// The comparison, ready to render.
    pub fn diff(&self) -> super::diff::Diff<'_> {
        super::diff::Diff {
            old_run: self.old.path.display().to_string(),
            new_run: self.new.path.display().to_string(),
            old: &self.old_summaries,
            new: &self.new_summaries,
            old_matrix: self.old.matrix.as_ref(),
            new_matrix: self.new.matrix.as_ref(),
        }
    }
}
