//! One attempt's account across its hosts: what `analyse_run` returns and
//! every comparison reads.

use super::account::ProcessAccount;
use super::ranks;
use crate::load::Problem;
use serde::Serialize;

/// The account of one attempt (one variant, one repeat), across hosts.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptAccount {
    pub variant: String,
    pub attempt: String,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    /// Stopped by a signal the doctor forwarded (Ctrl-C, timeout) or never finished:
    /// incomplete, so comparisons leave it out.
    pub interrupted: bool,
    /// The command could not be started (not found, not executable): no
    /// exit status, and not an interruption either.
    pub not_started: bool,
    pub warmup: bool,
    pub host_notices: Vec<String>,
    pub processes: Vec<ProcessAccount>,
    /// Worst rank and skew across ranks (None for a single rank).
    pub ranks: Option<ranks::RankSpread>,
    pub problems: Vec<Problem>,
}

impl AttemptAccount {
    /// Every problem met reading this attempt's files: host-level ones (host.json,
    /// NVML, NCCL logs) and each process's (event and shim files).
    pub fn all_problems(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .chain(self.processes.iter().flat_map(|p| p.problems.iter()))
    }

    /// The damaged or unreadable files of this attempt: its numbers are
    /// incomplete, so comparisons should leave it out and say so.
    pub fn damaged_files(&self) -> Vec<&Problem> {
        self.all_problems().filter(|p| p.damaged).collect()
    }
}
