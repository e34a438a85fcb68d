//! The exit codes (README "Exit codes"), and the one place where what a verb
//! came to — an [`Outcome`] when it did its work, a [`DoctorError`] when it
//! could not — becomes one. Every variant is matched by name, down to the
//! variants of each error a `DoctorError` wraps: a new one anywhere is a
//! compile error here until it has its code.

use crate::analysis::gate::GateError;
use crate::capture::run::{AttemptEnd, RunError, RunOutcome};
use crate::injection::AssetError;
use crate::load::LoadError;
use crate::output::OutputError;
use crate::prescribe::PrescribeError;
use crate::report::renderer::ReportError;
use crate::tui::TuiError;
use std::path::PathBuf;

/// `check`: this machine cannot capture (each line says why).
const CANNOT_CAPTURE: i32 = 1;
/// `report`, `diff`, `check`, `dump`, `prescribe`: bad usage (unknown flag,
/// malformed `--fail-if`, a format the verb does not have). `run` uses 125
/// instead.
const USAGE: i32 = crate::cli::USAGE_ERROR;
/// A `--fail-if` expression is malformed, or names what the run does not
/// have (a usage error).
const BAD_GATE: i32 = USAGE;
/// `report`, `diff`, `prescribe`, `tui`: the input is not a usable run
/// directory; `dump`: the file cannot be opened.
const BAD_INPUT: i32 = 3;
/// The run has damaged files (the report was still produced; stderr names each file).
const DAMAGED_INPUT: i32 = 4;
/// `report --attempt`, `prescribe --attempt`: no such attempt in the run
/// (stderr lists the ones there are).
const NO_SUCH_ATTEMPT: i32 = 5;
/// `run` of a matrix: at least one attempt's command failed.
const MATRIX_RUN_FAILED: i32 = 10;
/// A `--fail-if` threshold was crossed.
const GATE_FAILED: i32 = 11;
/// The doctor itself failed: `run` before the command started (bad flags,
/// unwritable or conflicting run folder); any verb that cannot write its
/// own output (`report -o` into a missing folder, a full disk); no terminal
/// for the dashboard.
const DOCTOR_FAILED: i32 = crate::cli::RUN_USAGE_ERROR;
/// `run`: the command exists but cannot be executed (permissions).
const COMMAND_NOT_EXECUTABLE: i32 = 126;
/// `run`: the command was not found.
const COMMAND_NOT_FOUND: i32 = 127;

/// What a verb came to when it did its work (what it writes is written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, nothing to flag.
    Done,
    /// `check`: this machine cannot capture (each line said why).
    CannotCapture,
    /// `report`, `diff`, `dump`: written, but the run has damaged files
    /// (stderr named each).
    Damaged,
    /// `report`, `diff`: a `--fail-if` gate failed (it takes precedence over
    /// damage).
    GateFailed,
    /// `run`: what its attempts came to.
    Run(RunOutcome),
    /// `tui`: the code the dashboard was left with (0, or `128+N` when signal
    /// N closed it).
    Dashboard(i32),
}

impl Outcome {
    /// The code the doctor exits with.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Done => 0,
            Outcome::CannotCapture => CANNOT_CAPTURE,
            Outcome::Damaged => DAMAGED_INPUT,
            Outcome::GateFailed => GATE_FAILED,
            Outcome::Run(RunOutcome::Single(end)) => match end {
                AttemptEnd::Exited(code) => code,
                AttemptEnd::NotFound => COMMAND_NOT_FOUND,
                AttemptEnd::NotExecutable => COMMAND_NOT_EXECUTABLE,
                AttemptEnd::DoctorFailed => DOCTOR_FAILED,
            },
            Outcome::Run(RunOutcome::Matrix { failed: true }) => MATRIX_RUN_FAILED,
            Outcome::Run(RunOutcome::Matrix { failed: false }) => 0,
            Outcome::Dashboard(code) => code,
        }
    }
}

/// Why a verb could not do its work. Each message names the file or flag
/// and what to do; `commands::dispatch` says it on stderr.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// `report --attempt` or `--all` with a format that holds every attempt.
    #[error(
        "{flag} chooses the attempts the text and Markdown reports tell; --format {format} always holds every attempt (drop {flag}, or use --format text or md)"
    )]
    SelectionFlag {
        flag: &'static str,
        format: &'static str,
    },
    /// A `--fail-if` that does not parse, or names what the run lacks.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// `report`, `diff`: not a usable run directory.
    #[error(transparent)]
    Input(#[from] LoadError),
    /// `dump`: the event file cannot be opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Prescribe(#[from] PrescribeError),
    /// The output cannot go where it was asked to, in the form asked.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// `run`, before its command started.
    #[error(transparent)]
    Run(#[from] RunError),
    /// `tui`, `run --tui`.
    #[error(transparent)]
    Tui(#[from] TuiError),
    /// `check`: the probe cannot be extracted.
    #[error(transparent)]
    Assets(#[from] AssetError),
}

impl DoctorError {
    /// The code the doctor exits with.
    pub fn exit_code(&self) -> i32 {
        match self {
            DoctorError::SelectionFlag { .. } => USAGE,
            DoctorError::Gate(
                GateError::Form(_)
                | GateError::Metric { .. }
                | GateError::Value { .. }
                | GateError::NeedsDiff(_)
                | GateError::UnitlessChange { .. }
                | GateError::NoiseNeedsChange(_)
                | GateError::UnknownName { .. }
                | GateError::NoVerdict { .. }
                | GateError::NoVerdicts(_),
            ) => BAD_GATE,
            DoctorError::Input(
                LoadError::Missing { .. } | LoadError::NotARun { .. } | LoadError::BadMeta { .. },
            )
            | DoctorError::Open { .. } => BAD_INPUT,
            DoctorError::Prescribe(e) => match e {
                PrescribeError::NoSuchAttempt(..) => NO_SUCH_ATTEMPT,
                PrescribeError::Load(_)
                | PrescribeError::NoCapture(..)
                | PrescribeError::Render(..) => BAD_INPUT,
            },
            DoctorError::Output(e) => match e {
                OutputError::Usage(_) => USAGE,
                OutputError::Report(ReportError::NoSuchAttempt(_)) => NO_SUCH_ATTEMPT,
                OutputError::Destination(_)
                | OutputError::Report(
                    ReportError::Io(_)
                    | ReportError::Chart { .. }
                    | ReportError::Template(_)
                    | ReportError::Json(_)
                    | ReportError::Csv(_),
                ) => DOCTOR_FAILED,
            },
            DoctorError::Run(
                RunError::StepMarker { .. }
                | RunError::Variants(_)
                | RunError::DefaultFolder(_)
                | RunError::OutTaken { .. }
                | RunError::Folder { .. }
                | RunError::RunFile { .. }
                | RunError::Attempt(_),
            ) => DOCTOR_FAILED,
            DoctorError::Tui(e) => match e {
                TuiError::Load(_) => BAD_INPUT,
                TuiError::NoTerminal { .. } | TuiError::Terminal(_) => DOCTOR_FAILED,
            },
            DoctorError::Assets(AssetError::Write { .. }) => DOCTOR_FAILED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table, row by row, for the outcomes and errors that do
    /// not need a run folder to reach.
    #[test]
    fn each_outcome_and_error_has_the_documented_code() {
        let run = |o| Outcome::Run(o).exit_code();
        assert_eq!(run(RunOutcome::Single(AttemptEnd::Exited(3))), 3);
        assert_eq!(run(RunOutcome::Single(AttemptEnd::Exited(137))), 137);
        assert_eq!(run(RunOutcome::Single(AttemptEnd::NotFound)), 127);
        assert_eq!(run(RunOutcome::Single(AttemptEnd::NotExecutable)), 126);
        assert_eq!(run(RunOutcome::Single(AttemptEnd::DoctorFailed)), 125);
        assert_eq!(run(RunOutcome::Matrix { failed: false }), 0);
        assert_eq!(run(RunOutcome::Matrix { failed: true }), 10);
        assert_eq!(Outcome::Done.exit_code(), 0);
        assert_eq!(Outcome::CannotCapture.exit_code(), 1);
        assert_eq!(Outcome::Damaged.exit_code(), 4);
        assert_eq!(Outcome::GateFailed.exit_code(), 11);
        let usage = DoctorError::SelectionFlag {
            flag: "--all",
            format: "json",
        };
        assert_eq!(usage.exit_code(), 2);
        assert_eq!(
            DoctorError::Gate(GateError::Form("x".into())).exit_code(),
            2
        );
        let png = OutputError::Usage("--format png ...".into());
        assert_eq!(DoctorError::Output(png).exit_code(), 2);
        let attempt = OutputError::Report(ReportError::NoSuchAttempt("--attempt x".into()));
        assert_eq!(DoctorError::Output(attempt).exit_code(), 5);
        let attempt = PrescribeError::NoSuchAttempt("x".into(), "default/1".into());
        assert_eq!(DoctorError::Prescribe(attempt).exit_code(), 5);
        let missing = LoadError::Missing {
            path: "nowhere".into(),
        };
        assert_eq!(DoctorError::Input(missing).exit_code(), 3);
        let full = OutputError::Destination("-o x: cannot write: disk full".into());
        assert_eq!(DoctorError::Output(full).exit_code(), 125);
        let out = RunError::OutTaken { why: "x".into() };
        assert_eq!(DoctorError::Run(out).exit_code(), 125);
        assert_eq!(DoctorError::Tui(TuiError::Load("x".into())).exit_code(), 3);
    }
}
