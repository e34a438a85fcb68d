//! What one load of a run folder gives the dashboard: the report model —
//! the same one the terminal, Markdown, JSON, HTML, PNG and Perfetto
//! reports render, built by the one pipeline (`crate::pipeline`) — each of
//! its processes in drawing form, and, while the run is still being written,
//! its progress. Every view is drawn from the model; nothing here re-states
//! it.

use super::process_tables::ProcessTables;
use crate::report::model::{AttemptView, ReportModel};
use std::path::Path;

/// Everything the dashboard draws, for one load of a run folder.
#[derive(Debug, Clone, Default)]
pub struct Dashboard {
    /// The one report model.
    pub model: ReportModel,
    /// Each process of the model in drawing form: `tables[a][r]` is
    /// `model.attempts[a].ranks[r]`.
    pub tables: Vec<Vec<ProcessTables>>,
    /// Progress of a run still being written (None when it has finished).
    pub live: Option<LiveView>,
}

impl Dashboard {
    /// The dashboard of a model (on the loader thread: the drawing forms of
    /// a large run take a while).
    pub fn new(model: ReportModel, live: Option<LiveView>) -> Dashboard {
        let tables = model
            .attempts
            .iter()
            .map(|a| a.ranks.iter().map(ProcessTables::of).collect())
            .collect();
        Dashboard {
            model,
            tables,
            live,
        }
    }

    /// Process `rank` of attempt `attempt` in drawing form (empty when there
    /// is no such process).
    pub fn tables(&self, attempt: usize, rank: usize) -> &ProcessTables {
        self.tables
            .get(attempt)
            .and_then(|a| a.get(rank))
            .unwrap_or(&NO_PROCESS)
    }

    /// The run's name (run.json), or its folder's name.
    pub fn title(&self) -> String {
        self.model.run.name.clone().unwrap_or_else(|| {
            Path::new(&self.model.run.path)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
    }

    /// Whether `attempt` is the one being run now.
    pub fn is_running(&self, attempt: &AttemptView) -> bool {
        self.running().is_some_and(|id| id == attempt.id())
    }

    /// The attempt being run now ("variant/attempt"), if any.
    pub fn running(&self) -> Option<&str> {
        self.live.as_ref()?.current.as_deref()
    }
}

static NO_PROCESS: ProcessTables = ProcessTables::EMPTY;

/// Progress of a run that is still being written (what the files say while
/// the command runs; the model has no place for it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveView {
    /// Attempts planned (variants × repeats, warm-ups included).
    pub total: usize,
    /// Attempts finished.
    pub done: usize,
    /// The attempt running now ("cublas/2").
    pub current: Option<String>,
    pub elapsed_s: f64,
    pub eta_s: Option<f64>,
    pub gpus: Vec<GpuView>,
}

/// One GPU's memory in the running attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuView {
    pub index: u32,
    pub name: String,
    pub total: u64,
    pub used: u64,
    /// Device used over the last minute, oldest first, evenly spaced.
    pub history: Vec<u64>,
}
