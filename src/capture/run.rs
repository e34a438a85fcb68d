//! `run`'s orchestration: the variants its flags declare, the run folder
//! (`--out`, or a new one under `prewarm-runs`), this host's tag, the number
//! of its first repeat, run.json, the probe; then the plan of attempts
//! ([`super::matrix`]) and what they came to.
//!
//! Never prints: what `run` says on its way comes back as [`RunNotice`]s,
//! each attempt's start as a [`Progress`], what stops the run before its
//! command starts as a [`RunError`], and how the attempts ended as a
//! [`RunOutcome`]; the caller (`src/commands.rs`) writes them and chooses the
//! exit code.

use super::child::ChildError;
use super::child_output::OutputSink;
use super::matrix::{AttemptResult, MatrixPlan, Progress, run_matrix};
use super::{AttemptOutcome, CaptureError, default_host_tag, lossy};
use crate::injection::{AssetError, Assets, cache_root, extract_assets, find_cupti};
use crate::prewarm::variants::{self, VariantError};
use crate::run_folder::layout::{
    OutFolder, RUN_FILE, classify_out, create_default_run_dir, next_repeat, safe_component,
};
use crate::run_folder::meta::{CacheMode, META_SCHEMA, RunMeta, VariantSpec};
use crate::run_folder::redact::redact_args;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// What `run` is asked to do: its flags, as plain values.
pub struct RunRequest {
    /// The command as given (arguments need not be UTF-8).
    pub command: Vec<OsString>,
    /// `--name` (default: the script or program).
    pub name: Option<String>,
    /// The flags that declare the variants.
    pub variants: VariantFlags,
    /// `--repeat`: attempts per variant.
    pub repeat: u32,
    pub cache: CacheMode,
    /// `--out` (default: a new folder under `prewarm-runs`).
    pub out: Option<PathBuf>,
    /// `--force`: write into an `--out` that holds something else; run a
    /// `--prescribe` prescription on a model it was not made for.
    pub force: bool,
    /// `--host-tag` (default: $PREWARM_DOCTOR_HOST or the hostname).
    pub host_tag: Option<String>,
    pub kernel_steps: u32,
    pub step_marker: Option<String>,
    pub keep_caches: bool,
    /// False with `--no-probe`.
    pub probe: bool,
}

/// The flags that declare the variants (docs/variants.md).
#[derive(Debug, Default)]
pub struct VariantFlags {
    /// `--preset`.
    pub preset: Option<String>,
    /// `--variants-file`.
    pub file: Option<PathBuf>,
    /// Each `--variant`.
    pub variants: Vec<String>,
    /// Each `--variant-env`.
    pub env: Vec<String>,
    /// `--baseline`.
    pub baseline: Option<String>,
    /// `--prescribe`: every variant injects this prescription.
    pub prescribe: Option<PathBuf>,
}

/// Why `run` stopped before its command started (or, for an attempt the
/// doctor could not set up, before the run's end); each message names the
/// flag or file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `--step-marker` is compiled by the shim with Python's `re`.
    #[error("--step-marker '{pattern}' is not a valid regular expression: {source}")]
    StepMarker {
        pattern: String,
        source: Box<fancy_regex::Error>,
    },
    /// `--variant`, `--variant-env`, `--variants-file`, `--preset`,
    /// `--baseline` or `--prescribe`.
    #[error(transparent)]
    Variants(#[from] VariantError),
    #[error("cannot create a run folder under prewarm-runs: {0}")]
    DefaultFolder(std::io::Error),
    /// `--out` holds another command's run, or something that is no run.
    #[error("--out: {why}; choose another --out, or add --force to write into it anyway")]
    OutTaken { why: String },
    #[error("cannot create the run folder {}: {source}", path.display())]
    Folder {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    RunFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// An attempt the doctor itself could not set up (its folder, its
    /// host.json): the run ends there.
    #[error(transparent)]
    Attempt(CaptureError),
}

/// What `run` says on its way, besides each attempt's start: the caller
/// writes each on stderr as it comes.
#[derive(Debug)]
pub enum RunNotice<'a> {
    /// `--force` over an `--out` that holds something else.
    Forced { why: &'a str },
    /// The folder already holds attempts of this command from this host: the
    /// new ones are numbered after them.
    Continuing {
        out: &'a Path,
        host: &'a str,
        first: u32,
        last: u32,
    },
    /// The probe could not be extracted: the command runs without it.
    NoProbe(&'a AssetError),
    /// An attempt whose command could not be started.
    NotStarted {
        variant: &'a str,
        attempt: &'a str,
        error: &'a ChildError,
    },
}

impl fmt::Display for RunNotice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunNotice::Forced { why } => write!(f, "--force: writing into it anyway: {why}"),
            RunNotice::Continuing {
                out,
                host,
                first,
                last,
            } => write!(
                f,
                "{} already holds attempts of this command from host '{host}': adding attempts {first}..{last}",
                out.display()
            ),
            RunNotice::NoProbe(e) => write!(f, "{e}; running the command without the probe"),
            RunNotice::NotStarted {
                variant,
                attempt,
                error,
            } => write!(f, "variant '{variant}' attempt {attempt}: {error}"),
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The command exited with this code (`128+N` when signal N killed it).
    Exited(i32),
    /// The command was not found.
    NotFound,
    /// The command exists but cannot be executed (permissions).
    NotExecutable,
    /// The doctor could not start the command or wait for it, could not set
    /// the attempt up, or no attempt ran.
    DoctorFailed,
}

impl AttemptEnd {
    fn of(outcome: &Result<AttemptOutcome, CaptureError>) -> AttemptEnd {
        match outcome {
            Ok(o) => AttemptEnd::Exited(o.exit.code),
            Err(CaptureError::Child(ChildError::Spawn { source, .. })) => match source.kind() {
                std::io::ErrorKind::NotFound => AttemptEnd::NotFound,
                std::io::ErrorKind::PermissionDenied => AttemptEnd::NotExecutable,
                _ => AttemptEnd::DoctorFailed,
            },
            Err(CaptureError::Child(
                ChildError::Empty | ChildError::Wait(_) | ChildError::Signals(_),
            ))
            | Err(
                CaptureError::HostTaken { .. }
                | CaptureError::Folder { .. }
                | CaptureError::Meta { .. },
            ) => AttemptEnd::DoctorFailed,
        }
    }
}

/// What the attempts came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// One attempt of one variant (no warm-up): how it ended; the run passes
    /// the command's code on.
    Single(AttemptEnd),
    /// A matrix: whether some attempt did not end with its command exiting 0.
    Matrix { failed: bool },
}

/// A run ready to start: its folder made, run.json written, the probe ready.
pub struct PreparedRun {
    out: PathBuf,
    host: String,
    command: Vec<OsString>,
    variants: Vec<VariantSpec>,
    repeat: u32,
    first_repeat: u32,
    cache: CacheMode,
    keep_caches: bool,
    kernel_steps: u32,
    step_marker: Option<String>,
    assets: Option<Assets>,
    cupti: Option<PathBuf>,
}

/// Prepares `request`: checks `--step-marker`, declares the variants, makes
/// or checks the run folder, numbers this host's attempts after the ones it
/// already holds, writes run.json and extracts the probe. `notice` gets what
/// is said on the way, in order.
pub fn prepare(
    request: RunRequest,
    notice: &mut impl FnMut(RunNotice<'_>),
) -> Result<PreparedRun, RunError> {
    if let Some(m) = &request.step_marker {
        check_step_marker(m)?;
    }
    let (variants, baseline) =
        declared_variants(&request.variants).and_then(|v| with_prescription(&request, v))?;
    let command = lossy(&request.command);
    let name = request
        .name
        .clone()
        .unwrap_or_else(|| default_name(&command));
    let mut meta = RunMeta {
        schema: META_SCHEMA,
        doctor_version: env!("CARGO_PKG_VERSION").into(),
        name: name.clone(),
        command: redact_args(&command),
        created: chrono::Local::now().to_rfc3339(),
        variants: variants.clone(),
        repeat: request.repeat,
        cache: request.cache,
        kernel_steps: request.kernel_steps,
        step_marker: request.step_marker.clone(),
        baseline: Some(baseline),
        label: None,
    };
    let out = prepare_out(&request, &name, &meta, notice)?;
    // Absolute, so children that change directory still find it.
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    let host = safe_component(&request.host_tag.clone().unwrap_or_else(default_host_tag));
    let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
    let first_repeat = next_repeat(&out, &names, &host);
    meta.repeat = (first_repeat - 1).saturating_add(request.repeat);
    if first_repeat > 1 {
        notice(RunNotice::Continuing {
            out: &out,
            host: &host,
            first: first_repeat,
            last: meta.repeat,
        });
    }
    write_run_meta(&out, &meta)?;
    let assets = if request.probe {
        extract_assets(&cache_root())
            .inspect_err(|e| notice(RunNotice::NoProbe(e)))
            .ok()
    } else {
        None
    };
    Ok(PreparedRun {
        out,
        host,
        command: request.command,
        variants,
        repeat: request.repeat,
        first_repeat,
        cache: request.cache,
        keep_caches: request.keep_caches,
        kernel_steps: request.kernel_steps,
        step_marker: request.step_marker,
        assets,
        cupti: find_cupti().0,
    })
}

impl PreparedRun {
    /// The run folder (absolute).
    pub fn folder(&self) -> &Path {
        &self.out
    }

    /// One attempt of one variant, no warm-up: its output is the training's
    /// alone (no progress lines), and the run passes its command's code on.
    pub fn is_single(&self) -> bool {
        self.variants.len() == 1 && self.repeat == 1 && self.cache != CacheMode::Warm
    }

    /// Runs the attempts (warm-ups first, then the repeats round-robin);
    /// `on_progress` is called before each. `output` and `stop` are the
    /// dashboard's of `run --tui`: where the command's output goes besides
    /// `output.log`, and the flag that stops the run before its next attempt.
    pub fn run_attempts(
        &self,
        output: Option<Arc<dyn OutputSink>>,
        stop: Option<Arc<AtomicBool>>,
        on_progress: impl FnMut(&Progress),
    ) -> Vec<AttemptResult> {
        let plan = MatrixPlan {
            run: self.out.clone(),
            host: self.host.clone(),
            command: self.command.clone(),
            variants: self.variants.clone(),
            repeat: self.repeat,
            first_repeat: self.first_repeat,
            cache: self.cache,
            keep_caches: self.keep_caches,
            assets: self.assets.as_ref(),
            cupti: self.cupti.clone(),
            kernel_steps: self.kernel_steps,
            step_marker: self.step_marker.clone(),
            output,
            stop,
        };
        run_matrix(&plan, on_progress)
    }

    /// What `results` came to (the dashboard's status bar shows it as the
    /// run ends).
    pub fn outcome(&self, results: &[AttemptResult]) -> RunOutcome {
        if self.is_single() {
            RunOutcome::Single(
                results
                    .first()
                    .map_or(AttemptEnd::DoctorFailed, |(_, o)| AttemptEnd::of(o)),
            )
        } else {
            RunOutcome::Matrix {
                failed: results
                    .iter()
                    .any(|(_, o)| AttemptEnd::of(o) != AttemptEnd::Exited(0)),
            }
        }
    }

    /// What `results` came to, with a notice for each attempt whose command
    /// could not start; an attempt the doctor itself could not set up (its
    /// folder, its host.json) is the run's error.
    pub fn conclude(
        &self,
        results: Vec<AttemptResult>,
        notice: &mut impl FnMut(RunNotice<'_>),
    ) -> Result<RunOutcome, RunError> {
        let outcome = self.outcome(&results);
        for (planned, attempt) in results {
            match attempt {
                Ok(_) => {}
                Err(CaptureError::Child(error)) => notice(RunNotice::NotStarted {
                    variant: &self.variants[planned.variant].name,
                    attempt: &planned.attempt,
                    error: &error,
                }),
                Err(
                    e @ (CaptureError::HostTaken { .. }
                    | CaptureError::Folder { .. }
                    | CaptureError::Meta { .. }),
                ) => return Err(RunError::Attempt(e)),
            }
        }
        Ok(outcome)
    }
}

/// The name a run gets by default: the script (for python/torchrun) or program.
fn default_name(command: &[String]) -> String {
    let script = command
        .iter()
        .find(|a| a.ends_with(".py"))
        .or_else(|| command.first());
    script
        .map(|s| {
            Path::new(s)
                .file_stem()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| s.clone())
        })
        .unwrap_or_else(|| "run".into())
}

/// The variants the flags declare, and the baseline's name.
fn declared_variants(flags: &VariantFlags) -> Result<(Vec<VariantSpec>, String), VariantError> {
    let mut variants = Vec::new();
    let mut baseline = flags.baseline.clone();
    if let Some(p) = &flags.preset {
        variants.extend(variants::preset(p)?);
    }
    if let Some(f) = &flags.file {
        let (vs, b) = variants::from_file(f)?;
        variants.extend(vs);
        baseline = baseline.or(b);
    }
    for spec in &flags.variants {
        variants.push(variants::parse_variant(spec)?);
    }
    if variants.is_empty() {
        variants.push(VariantSpec {
            name: "default".into(),
            args: vec![],
            env: vec![],
            prewarms: vec![],
        });
    }
    for spec in &flags.env {
        variants::apply_env(&mut variants, spec)?;
    }
    let base = variants::finish(&mut variants, baseline.as_deref())?;
    Ok((variants, base))
}

/// `--prescribe FILE`: every variant injects the prescription (`--force`
/// lets it run on a model it was not made for).
fn with_prescription(
    request: &RunRequest,
    (mut variants, baseline): (Vec<VariantSpec>, String),
) -> Result<(Vec<VariantSpec>, String), VariantError> {
    let Some(file) = &request.variants.prescribe else {
        return Ok((variants, baseline));
    };
    let shown = file.display().to_string();
    let env = variants::prescription_env("--prescribe", &shown).map_err(|e| match e {
        VariantError::Prescription { file, why, .. } => VariantError::File {
            file: format!("--prescribe {file}"),
            why,
        },
        other => other,
    })?;
    for v in &mut variants {
        v.env.extend(env.iter().cloned());
        if request.force {
            v.env
                .push(("PREWARM_DOCTOR_PRESCRIPTION_FORCE".into(), "1".into()));
        }
        if !v.prewarms.iter().any(|p| p == "prescribed") {
            v.prewarms.push("prescribed".into());
        }
    }
    Ok((variants, baseline))
}

/// `--step-marker` is compiled by the shim with Python's `re`; it is checked
/// here with a regex engine that accepts the same syntax (lookarounds,
/// backreferences, `(?P<name>...)`), so a pattern Python takes is not refused.
fn check_step_marker(m: &str) -> Result<(), RunError> {
    fancy_regex::Regex::new(m)
        .map(|_| ())
        .map_err(|e| RunError::StepMarker {
            pattern: m.to_string(),
            source: Box::new(e),
        })
}

/// The run folder `run` writes into: `--out` (checked against what it holds)
/// or a new default folder.
fn prepare_out(
    request: &RunRequest,
    name: &str,
    meta: &RunMeta,
    notice: &mut impl FnMut(RunNotice<'_>),
) -> Result<PathBuf, RunError> {
    let Some(out) = &request.out else {
        return create_default_run_dir(Path::new("prewarm-runs"), name)
            .map_err(RunError::DefaultFolder);
    };
    if let OutFolder::Conflict(why) = classify_out(out, meta) {
        if !request.force {
            return Err(RunError::OutTaken { why });
        }
        notice(RunNotice::Forced { why: &why });
    }
    std::fs::create_dir_all(out).map_err(|source| RunError::Folder {
        path: out.clone(),
        source,
    })?;
    Ok(out.clone())
}

/// Writes run.json. Every node of a multi-node job writes the same description
/// into the shared folder: write-then-rename, so a reader never sees half a file.
fn write_run_meta(out: &Path, meta: &RunMeta) -> Result<(), RunError> {
    let staged = out.join(format!(".{RUN_FILE}.{}", std::process::id()));
    std::fs::write(
        &staged,
        serde_json::to_string_pretty(meta).expect("run metadata serialises"),
    )
    .and_then(|()| std::fs::rename(&staged, out.join(RUN_FILE)))
    .map_err(|source| RunError::RunFile {
        path: out.join(RUN_FILE),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_marker_takes_what_pythons_re_takes() {
        for ok in [
            r"step (?=\d)",
            r"(?<!warm)step",
            r"(?P<n>step)\s(?P=n)?",
            r"^train_step$",
        ] {
            assert!(check_step_marker(ok).is_ok(), "{ok}");
        }
        let e = check_step_marker("step (").unwrap_err().to_string();
        assert!(e.contains("--step-marker 'step ('"), "{e}");
    }

    #[test]
    fn a_run_is_named_after_its_script_or_program() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            default_name(&words(&["torchrun", "-n2", "a/train.py"])),
            "train"
        );
        assert_eq!(default_name(&words(&["/usr/bin/env", "x"])), "env");
        assert_eq!(default_name(&[]), "run");
    }
}
