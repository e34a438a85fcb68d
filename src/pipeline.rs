//! The one pipeline from a run folder to the one report model: load it
//! (src/load), analyse and compare it (src/analysis), build the model
//! (src/report/model/). `report`, `diff`, `prescribe`, the summary printed
//! at the end of `run` and the dashboard (replay, and live during
//! `run --tui`) all start from [`Analysed`]; no other place calls the loader,
//! the analysis and the model builder in sequence, so every view of a run is
//! made the same way.

use crate::analysis::matrix::{MatrixAccount, compare};
use crate::analysis::summary::{VariantSummary, summaries};
use crate::analysis::{AttemptAccount, analyse_run};
use crate::load::{LoadError, Problem, RunData, load_run};
use crate::report::model::{ReportModel, RunInfo};
use crate::report::select::Selection;
use std::path::{Path, PathBuf};

/// A run folder loaded and analysed: the raw run (for what only the files
/// say: a live attempt's NVML samples, the shim's records), the analysis,
/// and from them the report model.
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
        ReportModel::build(self.run_info(), &self.attempts, self.matrix.as_ref())
    }

    /// The report model, taking the analysis over (no copy).
    pub fn into_model(self) -> ReportModel {
        let info = self.run_info();
        ReportModel::from_analysis(info, self.attempts, self.matrix)
    }

    /// The report model with the run called `label` instead of its path:
    /// for tests, benchmarks and fuzzing, whose output must not depend on
    /// where the checkout is.
    pub fn model_named(&self, label: &str) -> ReportModel {
        let info = RunInfo::from_run(label, &self.run);
        ReportModel::build(info, &self.attempts, self.matrix.as_ref())
    }

    fn run_info(&self) -> RunInfo {
        RunInfo::from_run(&self.path.display().to_string(), &self.run)
    }

    /// Each variant over its attempts (for gates and `diff`).
    pub fn summaries(&self) -> Vec<VariantSummary> {
        summaries(self.run.meta.as_ref(), &self.attempts)
    }

    /// How the run was made, for `diff`: its command, declared variants and
    /// damaged files.
    pub fn how(&self) -> crate::report::diff::RunHow {
        let info = self.run_info();
        crate::report::diff::RunHow {
            command: info.command,
            variants: info.variants,
            incomplete: crate::report::model::incomplete_data(&self.attempts, self.matrix.as_ref()),
        }
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
    let mut text = crate::report::terminal::Terminal {
        selection: Selection::Default,
    }
    .text(&model)
    .unwrap_or_default();
    text.push_str(&format!(
        "   run folder: {}\n",
        crate::report::escape::terminal(&out.display().to_string())
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
    pub fn diff(&self) -> crate::report::diff::Diff<'_> {
        crate::report::diff::Diff {
            old_run: self.old.path.display().to_string(),
            new_run: self.new.path.display().to_string(),
            old: &self.old_summaries,
            new: &self.new_summaries,
            old_matrix: self.old.matrix.as_ref(),
            new_matrix: self.new.matrix.as_ref(),
            old_how: self.old.how(),
            new_how: self.new.how(),
        }
    }
}
