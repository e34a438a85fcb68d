//! Which attempts get their full story in the text formats (`--attempt`,
//! `--all`); the JSON and CSV always hold every attempt.

use super::model::{AttemptView, ReportModel};
use super::renderer::ReportError;

/// The attempts a text report tells in full.
#[derive(Debug, Clone, Copy, Default)]
pub enum Selection<'a> {
    /// Single runs: every attempt; matrices: the baseline's first attempt
    /// (the terminal) or every attempt, folded (Markdown).
    #[default]
    Default,
    /// Every attempt.
    All,
    /// `--attempt VARIANT[/N]`.
    One(&'a str),
}

impl<'a> Selection<'a> {
    /// From the `--attempt` and `--all` flags.
    pub fn from_flags(attempt: Option<&'a str>, all: bool) -> Selection<'a> {
        match (attempt, all) {
            (Some(a), _) => Selection::One(a),
            (None, true) => Selection::All,
            (None, false) => Selection::Default,
        }
    }

    /// The attempts chosen, in the model's order; an unknown `--attempt`
    /// is an error listing the attempts there are.
    pub fn pick<'m>(&self, model: &'m ReportModel) -> Result<Vec<&'m AttemptView>, ReportError> {
        let attempts = &model.attempts;
        Ok(match (self, &model.matrix) {
            (Selection::All, _) | (Selection::Default, None) => attempts.iter().collect(),
            (Selection::One(spec), _) => {
                let (variant, attempt) = match spec.split_once('/') {
                    Some((v, a)) => (v, Some(a)),
                    None => (*spec, None),
                };
                let found: Vec<&AttemptView> = attempts
                    .iter()
                    .filter(|a| a.variant == variant && attempt.is_none_or(|n| a.attempt == n))
                    .take(if attempt.is_some() { 1 } else { usize::MAX })
                    .collect();
                if found.is_empty() {
                    let known: Vec<String> = attempts.iter().map(|a| a.id()).collect();
                    return Err(ReportError::NoSuchAttempt(format!(
                        "--attempt {spec}: no such attempt in this run (it has: {}; give VARIANT or VARIANT/N)",
                        known.join(", ")
                    )));
                }
                found
            }
            (Selection::Default, Some(m)) => attempts
                .iter()
                .filter(|a| a.variant == m.baseline && !a.warmup)
                .take(1)
                .collect(),
        })
    }
}
