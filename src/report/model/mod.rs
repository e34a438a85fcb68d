//! The one report model every renderer reads: built once from the analysis
//! (run description, comparison, per attempt and rank the account, timelines)
//! so that the terminal summary, Markdown, JSON, CSV, HTML, PNG, Perfetto and
//! the dashboard show the same numbers. The JSON keeps the analysis' own
//! layout (docs/json-schema.md): the model carries run.json and the
//! comparison as analysed for it.
//!
//! Plain serialisable structs. Phrasing that several renderers share (the
//! headline sentences, owner labels) is done here, once; everything else
//! stays numbers. At scale the model keeps every rank and offers a "worst
//! ranks + distribution" view ([`AttemptView::shown_ranks`],
//! [`AttemptView::distribution`]) so pictures and tables stay readable.

use crate::analysis::AttemptAccount;
use crate::analysis::account::Forensic;
use crate::analysis::matrix::MatrixAccount;
use crate::load::RunData;
use crate::report::verdict_text;
use crate::run_folder::meta::RunMeta;
use serde::Serialize;
use std::collections::BTreeMap;

mod attempt;
mod headlines;
mod incomplete;
mod markers;
mod matrix;
#[cfg(test)]
mod tests;

pub use attempt::*;
pub use headlines::*;
pub use incomplete::*;
pub use markers::*;
pub use matrix::*;

/// Everything a report shows: built once, read by every renderer and the
/// dashboard (it is not serialised itself: the JSON renderer writes the
/// versioned account of docs/json-schema.md).
#[derive(Debug, Clone)]
pub struct ReportModel {
    pub run: RunInfo,
    /// One sentence per prewarm (matrix) or per attempt (single runs).
    pub headline: Vec<HeadlineSentence>,
    pub matrix: Option<MatrixView>,
    pub attempts: Vec<AttemptView>,
    /// The run's damaged files, which every format names first.
    pub incomplete: Vec<IncompleteData>,
    /// The comparison as the analysis made it, for the JSON account
    /// (docs/json-schema.md keeps its layout); the other formats read `matrix`.
    pub matrix_account: Option<MatrixAccount>,
}

/// How the run was made.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunInfo {
    /// The run folder as the user named it.
    pub path: String,
    pub name: Option<String>,
    pub created: Option<String>,
    pub doctor_version: Option<String>,
    /// The command every variant ran (secret-looking values redacted at capture).
    pub command: Vec<String>,
    pub variants: Vec<VariantInfo>,
    pub repeat: Option<u32>,
    pub cache: Option<String>,
    pub kernel_steps: Option<u32>,
    pub step_marker: Option<String>,
    pub baseline: Option<String>,
    pub hosts: Vec<HostInfo>,
    /// torch / Triton / NCCL / CUDA versions as the first rank saw them.
    pub versions: BTreeMap<String, String>,
    /// run.json as written, for the JSON account.
    #[serde(skip)]
    pub meta: Option<RunMeta>,
}

/// One variant as declared.
#[derive(Debug, Clone, Serialize)]
pub struct VariantInfo {
    pub name: String,
    pub args: Vec<String>,
    /// Extra environment, secret-looking values redacted.
    pub env: Vec<(String, String)>,
    pub prewarms: Vec<String>,
}

impl VariantInfo {
    /// How the variant changes the command, in words: "args: --prewarm-cublas;
    /// prewarms: cublas", or "the command as is".
    pub fn spec(&self) -> String {
        let mut parts = Vec::new();
        if !self.args.is_empty() {
            parts.push(format!("args: {}", self.args.join(" ")));
        }
        if !self.env.is_empty() {
            parts.push(format!(
                "env: {}",
                self.env
                    .iter()
                    .map(|(k, x)| format!("{k}={x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        if !self.prewarms.is_empty() {
            parts.push(format!("prewarms: {}", self.prewarms.join(", ")));
        }
        if parts.is_empty() {
            parts.push("the command as is".into());
        }
        parts.join("; ")
    }
}

/// One host the run used.
#[derive(Debug, Clone, Serialize)]
pub struct HostInfo {
    pub host: String,
    pub hostname: String,
    pub gpus: Vec<GpuInfo>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub cupti_path: Option<String>,
}

/// One GPU of a host.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub total_bytes: u64,
    pub used_before_bytes: u64,
}

impl RunInfo {
    /// Reads the run description out of already-loaded run data (no I/O).
    pub fn from_run(path: &str, run: &RunData) -> RunInfo {
        let mut info = RunInfo {
            path: path.to_string(),
            ..Default::default()
        };
        info.meta = run.meta.clone();
        if let Some(m) = &run.meta {
            info.name = Some(m.name.clone());
            info.created = Some(m.created.clone());
            info.doctor_version = Some(m.doctor_version.clone());
            info.command = m.command.clone();
            info.variants = m
                .variants
                .iter()
                .map(|v| VariantInfo {
                    name: v.name.clone(),
                    args: crate::run_folder::redact::redact_args(&v.args),
                    env: crate::run_folder::redact::redacted(&v.env.iter().cloned().collect())
                        .into_iter()
                        .collect(),
                    prewarms: v.prewarms.clone(),
                })
                .collect();
            info.repeat = Some(m.repeat);
            info.cache = Some(format!("{:?}", m.cache).to_lowercase());
            info.kernel_steps = Some(m.kernel_steps);
            info.step_marker = m.step_marker.clone();
            info.baseline = m.baseline.clone();
        }
        for host in run.attempts.iter().flat_map(|a| &a.hosts) {
            let Some(h) = &host.meta else { continue };
            if info.command.is_empty() {
                info.command = h.command.clone();
            }
            if info.cache.is_none() {
                info.cache = Some(format!("{:?}", h.cache).to_lowercase());
            }
            if info.hosts.iter().any(|x| x.host == h.host) {
                continue;
            }
            info.hosts.push(HostInfo {
                host: h.host.clone(),
                hostname: h.hostname.clone(),
                gpus: h
                    .gpus
                    .iter()
                    .map(|g| GpuInfo {
                        index: g.index,
                        name: g.name.clone(),
                        total_bytes: g.total_bytes,
                        used_before_bytes: g.used_before_bytes,
                    })
                    .collect(),
                driver_version: h.driver.driver_version.clone(),
                cuda_driver_version: h.driver.cuda_driver_version.clone(),
                cupti_path: h.cupti_path.clone(),
            });
        }
        info
    }
}

impl Default for ReportModel {
    /// The model of nothing read yet (the dashboard before its first load).
    fn default() -> ReportModel {
        ReportModel::from_analysis(RunInfo::default(), Vec::new(), None)
    }
}

impl ReportModel {
    /// Builds the model once from the analysis; every renderer reads it.
    pub fn build(
        run: RunInfo,
        attempts: &[AttemptAccount],
        matrix: Option<&MatrixAccount>,
    ) -> ReportModel {
        ReportModel::from_analysis(run, attempts.to_vec(), matrix.cloned())
    }

    /// [`ReportModel::build`] taking the analysis over instead of copying
    /// it (the accounts of a large run are not small).
    pub fn from_analysis(
        run: RunInfo,
        attempts: Vec<AttemptAccount>,
        matrix_account: Option<MatrixAccount>,
    ) -> ReportModel {
        let incomplete = incomplete_data(&attempts, matrix_account.as_ref());
        let matrix = matrix_account.as_ref().map(|m| MatrixView {
            baseline: m.baseline.clone(),
            cache: m.cache.clone(),
            isolated: m.isolated,
            variants: m
                .variants
                .iter()
                .map(|v| variant_row(v, &m.baseline))
                .collect(),
            verdicts: m
                .verdicts
                .iter()
                .map(|v| {
                    let mut view = verdict_view(v);
                    // The per-group verdict of a communicator prewarm.
                    let groups = m.comm_groups.iter().filter(|c| c.variant == v.variant);
                    view.evidence
                        .extend(groups.flat_map(super::comm_text::group_lines));
                    view
                })
                .collect(),
            notes: verdict_text::note_texts(&m.notes),
            excluded: m
                .variants
                .iter()
                .flat_map(|v| {
                    v.excluded.iter().map(move |e| {
                        let why: Vec<String> =
                            e.reasons.iter().map(verdict_text::exclusion_text).collect();
                        format!("{}/{}: {}", v.name, e.attempt, why.join("; "))
                    })
                })
                .collect(),
        });
        let mut attempts: Vec<AttemptView> = attempts
            .into_iter()
            .enumerate()
            .map(|(i, a)| AttemptView::from_account(i, a))
            .collect();
        let mut run = run;
        if run.versions.is_empty()
            && let Some(r) = attempts.iter().flat_map(|a| a.training_ranks()).next()
        {
            run.versions = r.account.versions.clone();
        }
        attempts.sort_by_key(|a| {
            let declared = run.variants.iter().position(|v| v.name == a.variant);
            (
                declared.unwrap_or(usize::MAX),
                a.variant.clone(),
                attempt_number(&a.attempt),
            )
        });
        let headline = match &matrix {
            Some(m) => m.verdicts.iter().map(headline_of_verdict).collect(),
            None => attempts
                .iter()
                .filter(|a| !a.warmup)
                .filter_map(headline_of_attempt)
                .collect(),
        };
        ReportModel {
            run,
            headline,
            matrix,
            attempts,
            incomplete,
            matrix_account,
        }
    }

    /// The attempts in the analysis' order (variant folder, then attempt
    /// number), as the JSON and CSV list them.
    pub fn attempts_in_run_order(&self) -> Vec<&AttemptView> {
        let mut out: Vec<&AttemptView> = self.attempts.iter().collect();
        out.sort_by_key(|a| a.run_order);
        out
    }

    /// Variant names in display order (declared order, then any others).
    pub fn variants(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for a in &self.attempts {
            if !out.contains(&a.variant.as_str()) {
                out.push(&a.variant);
            }
        }
        out
    }

    /// The attempt and rank whose timeline stands for a variant: its first
    /// complete attempt, worst rank.
    pub fn representative(&self, variant: &str) -> Option<(&AttemptView, &RankView)> {
        let of_variant = || self.attempts.iter().filter(move |a| a.variant == variant);
        let attempt = of_variant()
            .find(|a| !a.warmup && !a.interrupted && a.training_ranks().next().is_some())
            .or_else(|| of_variant().find(|a| !a.warmup))
            .or_else(|| of_variant().next())?;
        Some((attempt, attempt.worst_rank()?))
    }

    /// The verdict of a variant, if it was judged.
    pub fn verdict(&self, variant: &str) -> Option<&VerdictView> {
        self.matrix
            .as_ref()?
            .verdicts
            .iter()
            .find(|v| v.variant == variant)
    }

    /// Every out-of-memory failure of the run, with where it happened.
    pub fn forensics(&self) -> Vec<(&AttemptView, &RankView, &Forensic)> {
        self.attempts
            .iter()
            .flat_map(|a| {
                a.ranks
                    .iter()
                    .flat_map(move |r| r.forensics().iter().map(move |f| (a, r, f)))
            })
            .collect()
    }
}

fn attempt_number(a: &str) -> (u64, String) {
    (a.parse().unwrap_or(u64::MAX), a.to_string())
}
