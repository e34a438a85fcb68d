//! What every view of the dashboard reads: the loaded run, the attempt and
//! process selected (which drive every view), the theme and whether a run is
//! being made, watched or replayed. The dashboard (`app.rs`) changes it;
//! the views and the drawing only read it.

use crate::report::model::{AttemptView, RankView};
use crate::tui::dashboard::Dashboard;
use crate::tui::process_tables::ProcessTables;
use crate::tui::theme::Theme;

/// Whether a run is being made, watched or replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// A finished run folder.
    Replay,
    /// A folder another doctor is still writing (`tui RUN` on a live run).
    Watching,
    /// `run --tui`: this doctor runs the command.
    Running,
    /// `run --tui` after the user asked to stop: Ctrl-C was forwarded.
    Stopping,
    /// `run --tui` after the command (or the whole matrix) ended.
    Finished(i32),
}

impl RunState {
    /// Whether this doctor's own run is still going.
    pub fn ours_running(self) -> bool {
        matches!(self, RunState::Running | RunState::Stopping)
    }
}

/// The state every view shares.
#[derive(Debug, Clone)]
pub struct Shared {
    pub data: Dashboard,
    pub theme: Theme,
    pub run: RunState,
    /// The selected attempt (index into the model's attempts).
    pub attempt: usize,
    /// The selected process of that attempt (index into its ranks).
    pub rank: usize,
}

impl Shared {
    /// The selected attempt.
    pub fn attempt(&self) -> Option<&AttemptView> {
        self.data.model.attempts.get(self.attempt)
    }

    /// The selected process of the selected attempt.
    pub fn rank(&self) -> Option<&RankView> {
        self.attempt().and_then(|a| a.ranks.get(self.rank))
    }

    /// The selected process in drawing form (its events, markers, series).
    pub fn tables(&self) -> &ProcessTables {
        self.data.tables(self.attempt, self.rank)
    }

    /// Rows of the matrix: variants, or attempts for a single-variant run.
    pub fn matrix_rows(&self) -> usize {
        match &self.data.model.matrix {
            Some(m) => m.variants.len(),
            None => self.data.model.attempts.len(),
        }
    }

    /// The attempt a variant's matrix row opens on: its first attempt that
    /// was not interrupted (or is running now), else its first.
    pub fn first_attempt(&self, variant: &str) -> Option<usize> {
        let attempts = &self.data.model.attempts;
        let ended = |a: &AttemptView| !a.interrupted || a.not_started || self.data.is_running(a);
        attempts
            .iter()
            .position(|a| a.variant == variant && ended(a))
            .or_else(|| attempts.iter().position(|a| a.variant == variant))
    }
}
