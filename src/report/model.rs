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

use super::{bytes, seconds};
use crate::analysis::AttemptAccount;
use crate::analysis::account::{Forensic, GapAccount, LateWarmup, ProcessAccount};
use crate::analysis::matrix::MatrixAccount;
use crate::analysis::noise::Quantity;
use crate::analysis::phases::Phase;
use crate::analysis::ranks::{self, RankSpread};
use crate::analysis::stats::Stat;
use crate::analysis::summary::VariantSummary;
use crate::analysis::timeline::{Marker, MarkerKind, Timeline};
use crate::analysis::verdict::Verdict;
use crate::load::{Problem, RunData};
use crate::report::verdict_text;
use crate::run_folder::meta::RunMeta;
use serde::Serialize;
use std::collections::BTreeMap;

/// Version of the model's serialised form (for the dashboard and tests).
pub const MODEL_VERSION: u32 = 1;

/// Ranks shown one by one before a renderer switches to worst ranks plus
/// distribution.
pub const SHOWN_RANKS: usize = 16;

/// How many worst ranks each figure lists at scale.
pub const WORST_PER_FIGURE: usize = 5;

/// Everything a report shows.
#[derive(Debug, Clone, Serialize)]
pub struct ReportModel {
    pub model_version: u32,
    pub run: RunInfo,
    /// One sentence per prewarm (matrix) or per attempt (single runs).
    pub headline: Vec<HeadlineSentence>,
    pub matrix: Option<MatrixView>,
    pub attempts: Vec<AttemptView>,
    /// The comparison as the analysis made it, for the JSON account
    /// (docs/json-schema.md keeps its layout); the other formats read `matrix`.
    #[serde(skip)]
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

/// One sentence of the headline: what a prewarm moved and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct HeadlineSentence {
    /// The variant (matrix) or attempt ("variant/attempt") it is about.
    pub subject: String,
    /// Verdict class key ("works", "partial", ...) or None for a single run.
    pub class: Option<String>,
    /// The whole sentence.
    pub text: String,
}

/// Median and spread of one figure over repeats.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: u32,
}

impl From<&Stat> for Spread {
    fn from(s: &Stat) -> Spread {
        Spread {
            median: s.median,
            min: s.min,
            max: s.max,
            n: s.n,
        }
    }
}

impl Spread {
    /// max − min.
    pub fn range(&self) -> f64 {
        self.max - self.min
    }
}

/// The comparison of the variants.
#[derive(Debug, Clone, Serialize)]
pub struct MatrixView {
    pub baseline: String,
    pub cache: String,
    pub isolated: bool,
    pub variants: Vec<VariantRow>,
    pub verdicts: Vec<VerdictView>,
    /// What the comparison could not do as asked (attempts missing, caches shared, ...).
    pub notes: Vec<String>,
    /// Attempts left out of the medians, and why ("baseline/3: interrupted ...").
    pub excluded: Vec<String>,
}

/// One variant over its repeats.
#[derive(Debug, Clone, Serialize)]
pub struct VariantRow {
    pub name: String,
    pub prewarms: Vec<String>,
    pub is_baseline: bool,
    /// Attempts that count (not warm-ups, not interrupted).
    pub runs: u32,
    pub expected: u32,
    pub failed: u32,
    pub step1_device_peak: Option<Spread>,
    pub step1_out_of_pool: Option<Spread>,
    pub step1_tightest_headroom: Option<Spread>,
    pub step1_s: Option<Spread>,
    pub setup_s: Option<Spread>,
}

/// What a prewarm costs, beside its class whatever the class
/// (docs/verdicts.md §2), and the step-1 changes shown as context only.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Costs {
    /// Setup time added (negative: saved), seconds.
    pub setup_s: Option<f64>,
    /// The setup change lies within the noise of the two sides: no cost is
    /// claimed (the short cost list says so beside the number).
    pub setup_within_noise: bool,
    /// Memory held at step-1 end that the baseline did not hold, bytes.
    pub held_extra_bytes: f64,
    /// Whether both sides have a step-1-end account (else the memory held is unknown).
    pub held_known: bool,
    /// Context, not a cost: step-1 device peak change, bytes.
    pub step1_peak_bytes: Option<f64>,
    /// Context, not a cost: step-1 wall time change, seconds.
    pub step1_s: Option<f64>,
}

/// What still lands in step 1 of one targeted class.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StillInStep1 {
    pub class: String,
    pub bytes: u64,
    pub seconds: f64,
    pub events: u32,
}

/// A prewarm's verdict against the baseline, with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictView {
    pub variant: String,
    pub prewarms: Vec<String>,
    /// Class key: works, partial, no_effect, regression, inconclusive.
    pub class: String,
    /// Class as shown ("works", "no effect", ...).
    pub label: String,
    /// Labels of the event classes it targets.
    pub targets: Vec<String>,
    pub moved_bytes: f64,
    pub moved_seconds: f64,
    /// What it moved in words, the same in every format
    /// (`verdict_text::moved_text`).
    pub moved: String,
    pub baseline_targeted_bytes: f64,
    pub baseline_targeted_seconds: f64,
    pub costs: Costs,
    pub still_in_step1: Vec<StillInStep1>,
    /// How sure the verdict is, when the analysis says.
    pub confidence: Option<String>,
    /// One sentence: what it moved, what it cost.
    pub headline: String,
    /// The class with its confidence ("WORKS (noise measured over 3 ...)").
    pub class_line: String,
    pub evidence: Vec<String>,
}

/// The one place that reads the analysis' verdict type: every renderer of
/// this module reads [`VerdictView`] instead.
fn verdict_view(v: &Verdict) -> VerdictView {
    let targeted = v.targeted.as_ref();
    VerdictView {
        variant: v.variant.clone(),
        prewarms: v.prewarms.clone(),
        class: v.class.key().to_string(),
        label: verdict_text::class_label(v.class).to_string(),
        targets: v.targets.iter().map(|t| t.label().to_string()).collect(),
        moved_bytes: v.moved.bytes,
        moved_seconds: v.moved.seconds,
        moved: verdict_text::moved_text(v),
        baseline_targeted_bytes: targeted.map_or(0.0, |t| t.bytes.baseline.median),
        baseline_targeted_seconds: targeted.map_or(0.0, |t| t.seconds.baseline.median),
        costs: Costs {
            setup_s: v.costs.setup_s.map(|c| c.delta),
            setup_within_noise: v
                .costs
                .setup_s
                .is_some_and(|c| c.outcome == crate::analysis::noise::Outcome::Within),
            held_extra_bytes: v.costs.held_extra,
            held_known: v.costs.held_total_step1_end.is_some(),
            step1_peak_bytes: v.costs.step1_device_peak.map(|c| c.delta),
            step1_s: v.costs.step1_s.map(|c| c.delta),
        },
        still_in_step1: v
            .by_class
            .iter()
            // Left in step 1 means present beyond noise (docs/verdicts.md §3).
            .filter(|c| {
                crate::analysis::noise::present(Quantity::Bytes, c.bytes.variant)
                    || crate::analysis::noise::present(Quantity::Seconds, c.seconds.variant)
            })
            .map(|c| StillInStep1 {
                class: c.class.label().to_string(),
                bytes: c.bytes.variant.median.max(0.0) as u64,
                seconds: c.seconds.variant.median,
                events: c.events.variant.median.round().max(0.0) as u32,
            })
            .collect(),
        confidence: serde_json::to_value(v.confidence)
            .ok()
            .and_then(|c| c.as_str().map(str::to_string)),
        headline: verdict_text::headline(v),
        class_line: verdict_text::class_line(v),
        evidence: verdict_text::evidence_lines(v),
    }
}

fn variant_row(v: &VariantSummary, baseline: &str) -> VariantRow {
    let s = |x: &Option<Stat>| x.as_ref().map(Spread::from);
    VariantRow {
        name: v.name.clone(),
        prewarms: v.prewarms.clone(),
        is_baseline: v.name == baseline,
        runs: v.attempts.len() as u32,
        expected: v.expected_attempts,
        failed: v.failed_attempts,
        step1_device_peak: s(&v.step1_device_peak),
        step1_out_of_pool: s(&v.step1_out_of_pool),
        step1_tightest_headroom: s(&v.step1_tightest_headroom),
        step1_s: s(&v.step1_s),
        setup_s: s(&v.setup_s),
    }
}

/// One attempt (variant, repeat) with its ranks.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptView {
    pub variant: String,
    pub attempt: String,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub interrupted: bool,
    /// The command could not be started (not found, not executable).
    #[serde(skip)]
    pub not_started: bool,
    pub warmup: bool,
    pub notices: Vec<String>,
    pub problems: Vec<Problem>,
    /// Every process that used CUDA, ranks first in rank order.
    pub ranks: Vec<RankView>,
    /// Worst rank and skew (None for a single rank).
    pub spread: Option<RankSpread>,
    /// Quantiles and worst ranks per figure, over the training ranks.
    pub distribution: Vec<FigureDistribution>,
    /// Position in the analysis' order (variant folder, attempt number),
    /// which the JSON and CSV keep.
    #[serde(skip)]
    pub run_order: usize,
}

/// One process of an attempt: its figures, full account and timeline.
#[derive(Debug, Clone, Serialize)]
pub struct RankView {
    /// "rank 3 on node-b" (or "pid 123 on node-b").
    pub label: String,
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    /// A training rank (reached a step or failed), not a helper process.
    pub is_rank: bool,
    pub step1_peak: Option<u64>,
    pub step1_out_of_pool: u64,
    pub step1_s: Option<f64>,
    pub setup_s: Option<f64>,
    pub step1_comms: u32,
    /// The account, without its timeline (that is `timeline`).
    pub account: ProcessAccount,
    pub timeline: Timeline,
}

impl RankView {
    /// The memory account at the end of step 1 (or the last phase it reached).
    pub fn step1_account(&self) -> Option<&GapAccount> {
        let phases = &self.account.phases;
        phases
            .iter()
            .find(|p| p.phase == Phase::Step1)
            .or(phases.iter().find(|p| p.phase == Phase::Setup))
            .and_then(|p| p.gap_end.as_ref())
    }

    /// When [`Self::step1_account`] is taken, in words: "the end of step 1",
    /// or for a process without a step "the end of the run, before any step".
    pub fn account_when(&self) -> String {
        if super::no_step(&self.account) {
            format!("the end of the run, {}", super::BEFORE_ANY_STEP)
        } else {
            "the end of step 1".into()
        }
    }

    /// "rank 3", or "pid 123" for a process without a rank: the label
    /// without its host, for a column that has the host beside it.
    pub fn process_name(&self) -> String {
        self.rank
            .map_or_else(|| format!("pid {}", self.pid), |n| format!("rank {n}"))
    }

    /// Where the timeline ends: its last sample, or the end of its last
    /// phase when that is later.
    pub fn timeline_end_s(&self) -> f64 {
        let t = &self.timeline;
        t.phases
            .iter()
            .map(|b| b.end_s)
            .fold(t.end_s.max(0.0), f64::max)
    }

    /// Whether this process has no step placed (its run is one phase).
    pub fn no_step(&self) -> bool {
        super::no_step(&self.account)
    }

    /// What still lands after setup (the warmups a user still needs).
    pub fn late_warmups(&self) -> &[LateWarmup] {
        &self.account.late_warmups
    }

    /// Out-of-memory failures and what led to them.
    pub fn forensics(&self) -> &[Forensic] {
        &self.account.forensics
    }
}

/// A per-rank figure whose distribution is shown at scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Step1Peak,
    Step1OutOfPool,
    Step1Seconds,
    SetupSeconds,
}

impl Figure {
    /// Every figure, in display order.
    pub const ALL: [Figure; 4] = [
        Figure::Step1Peak,
        Figure::Step1OutOfPool,
        Figure::Step1Seconds,
        Figure::SetupSeconds,
    ];

    /// Label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Figure::Step1Peak => "step-1 device peak",
            Figure::Step1OutOfPool => "step-1 out-of-pool",
            Figure::Step1Seconds => "step-1 time",
            Figure::SetupSeconds => "setup time",
        }
    }

    /// Whether values are bytes (else seconds).
    pub fn is_bytes(self) -> bool {
        matches!(self, Figure::Step1Peak | Figure::Step1OutOfPool)
    }

    /// The figure of one rank.
    pub fn of(self, r: &RankView) -> Option<f64> {
        match self {
            Figure::Step1Peak => r.step1_peak.map(|v| v as f64),
            Figure::Step1OutOfPool => Some(r.step1_out_of_pool as f64),
            Figure::Step1Seconds => r.step1_s,
            Figure::SetupSeconds => r.setup_s,
        }
    }

    /// A value formatted in the figure's unit.
    pub fn format(self, v: f64) -> String {
        if self.is_bytes() {
            bytes(v.max(0.0) as u64)
        } else {
            seconds(v)
        }
    }
}

/// Quantiles of one figure over ranks, with the worst ranks.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FigureDistribution {
    pub figure: Figure,
    pub n: u32,
    pub min: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Indices into the attempt's `ranks`, worst first.
    pub worst: Vec<usize>,
}

/// Nearest-rank quantile of sorted values.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn distribution(ranks: &[RankView], figure: Figure) -> Option<FigureDistribution> {
    let mut values: Vec<(f64, usize)> = ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.is_rank)
        .filter_map(|(i, r)| figure.of(r).map(|v| (v, i)))
        .collect();
    if values.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = values.iter().map(|v| v.0).collect();
    sorted.sort_by(f64::total_cmp);
    // Worst first; the lower index wins ties so the order is stable.
    values.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Some(FigureDistribution {
        figure,
        n: sorted.len() as u32,
        min: sorted[0],
        p25: quantile(&sorted, 0.25),
        p50: quantile(&sorted, 0.50),
        p75: quantile(&sorted, 0.75),
        p90: quantile(&sorted, 0.90),
        p99: quantile(&sorted, 0.99),
        max: sorted[sorted.len() - 1],
        worst: values.iter().take(WORST_PER_FIGURE).map(|v| v.1).collect(),
    })
}

impl AttemptView {
    /// Takes one analysed attempt over (its accounts move into the ranks).
    fn from_account(run_order: usize, a: AttemptAccount) -> AttemptView {
        let ranks: Vec<RankView> = a
            .processes
            .into_iter()
            .map(|mut account| {
                let timeline = std::mem::take(&mut account.timeline);
                let p = &account;
                RankView {
                    label: ranks::RankFigure {
                        rank: p.rank,
                        host: p.host.clone(),
                        pid: p.pid,
                        value: (),
                    }
                    .owner(),
                    rank: p.rank,
                    host: p.host.clone(),
                    pid: p.pid,
                    is_rank: ranks::is_rank(p),
                    step1_peak: ranks::step1_peak(p),
                    step1_out_of_pool: ranks::step1_out_of_pool(p),
                    step1_s: p.steps.step1_s,
                    setup_s: p.steps.setup_s,
                    step1_comms: ranks::step1_comm_count(p),
                    account,
                    timeline,
                }
            })
            .collect();
        let distribution = Figure::ALL
            .iter()
            .filter_map(|f| distribution(&ranks, *f))
            .collect();
        AttemptView {
            variant: a.variant,
            attempt: a.attempt,
            command: a.command,
            exit_code: a.exit_code,
            interrupted: a.interrupted,
            not_started: a.not_started,
            warmup: a.warmup,
            notices: a.host_notices,
            problems: a.problems,
            ranks,
            spread: a.ranks,
            distribution,
            run_order,
        }
    }

    /// " (cache warm-up, untimed)", " (interrupted)", " (the command could
    /// not be started)" or nothing: why an attempt does not count, after its name.
    pub fn status_suffix(&self) -> &'static str {
        if self.not_started {
            " (the command could not be started)"
        } else if self.warmup {
            " (cache warm-up, untimed)"
        } else if self.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    }

    /// "variant/attempt".
    pub fn id(&self) -> String {
        format!("{}/{}", self.variant, self.attempt)
    }

    /// The highest value of a figure over the training ranks (the top of
    /// its distribution), if any rank has it.
    pub fn figure_max(&self, figure: Figure) -> Option<f64> {
        self.distribution
            .iter()
            .find(|d| d.figure == figure)
            .map(|d| d.max)
    }

    /// The training ranks (helper processes left out).
    pub fn training_ranks(&self) -> impl Iterator<Item = &RankView> {
        self.ranks.iter().filter(|r| r.is_rank)
    }

    /// The rank that runs out of memory first: highest step-1 device peak
    /// (most step-1 out-of-pool when no peak is known), else the first process.
    pub fn worst_rank(&self) -> Option<&RankView> {
        let order = |r: &RankView| crate::analysis::ranks::peak_order(&r.account);
        crate::analysis::ranks::first_highest(self.training_ranks(), order).or(self.ranks.first())
    }

    /// The ranks whose story a text report tells: every process, or at
    /// scale the worst rank alone (the JSON keeps every one).
    pub fn told_ranks(&self) -> Vec<&RankView> {
        if self.at_scale() {
            self.worst_rank().into_iter().collect()
        } else {
            self.ranks.iter().collect()
        }
    }

    /// Whether a renderer should list every rank (few) or the worst ranks
    /// plus the distribution (many).
    pub fn at_scale(&self) -> bool {
        self.training_ranks().count() > SHOWN_RANKS
    }

    /// The ranks a table shows: all of them when there are few, else the
    /// worst ranks of every figure (in rank order, at most `limit`).
    pub fn shown_ranks(&self, limit: usize) -> Vec<&RankView> {
        if self.ranks.len() <= limit {
            return self.ranks.iter().collect();
        }
        let mut picked: Vec<usize> = Vec::new();
        for depth in 0..WORST_PER_FIGURE {
            for d in &self.distribution {
                if let Some(&i) = d.worst.get(depth)
                    && !picked.contains(&i)
                    && picked.len() < limit
                {
                    picked.push(i);
                }
            }
        }
        picked.sort_unstable();
        picked.iter().map(|&i| &self.ranks[i]).collect()
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
            model_version: MODEL_VERSION,
            run,
            headline,
            matrix,
            attempts,
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

fn signed_seconds(s: f64) -> String {
    let sign = if s < 0.0 { "-" } else { "+" };
    format!("{sign}{}", seconds(s.abs()))
}

fn signed_bytes_f(b: f64) -> String {
    let sign = if b < 0.0 { "-" } else { "+" };
    format!("{sign}{}", bytes(b.abs() as u64))
}

/// The verdict's costs as a short list ("setup +7.85 s, +388.0 MiB held at step-1 end").
pub fn costs_text(c: &Costs) -> String {
    let mut parts = Vec::new();
    if let Some(s) = c.setup_s {
        let noise = if c.setup_within_noise {
            " (within noise)"
        } else {
            ""
        };
        parts.push(format!("setup {}{noise}", signed_seconds(s)));
    }
    if c.held_extra_bytes > 0.0 {
        parts.push(format!(
            "{} held at step-1 end that the baseline does not hold",
            signed_bytes_f(c.held_extra_bytes)
        ));
    } else if c.held_known {
        parts.push("no extra memory held at step-1 end".into());
    } else {
        parts.push("memory held at step-1 end unknown".into());
    }
    parts.join(", ")
}

/// "moved 128.3 MiB and 1.20 s of cuBLAS init out of step 1": the
/// verdict's own words ([`VerdictView::moved`]), for the tables.
pub fn moved_text(v: &VerdictView) -> String {
    v.moved.clone()
}

fn headline_of_verdict(v: &VerdictView) -> HeadlineSentence {
    HeadlineSentence {
        subject: v.variant.clone(),
        class: Some(v.class.clone()),
        text: format!("{} ({}): {}", v.variant, v.label, v.headline),
    }
}

fn headline_of_attempt(a: &AttemptView) -> Option<HeadlineSentence> {
    let r = a.worst_rank()?;
    if super::no_step(&r.account) {
        return Some(headline_without_step(a, r));
    }
    let step1 = r.step1_s.map_or("step 1 was not reached".to_string(), |s| {
        format!("step 1 took {}", seconds(s))
    });
    let late = r.late_warmups().len();
    let oom = if r.forensics().is_empty() {
        String::new()
    } else {
        format!(
            "; it ran out of memory ({} failure(s))",
            r.forensics().len()
        )
    };
    Some(HeadlineSentence {
        subject: a.id(),
        class: None,
        text: format!(
            "{} ({}): {step1} with {} of lazy initialisation outside the pool; {late} warmup(s) still land after setup{oom}.",
            a.id(),
            r.label,
            bytes(r.step1_out_of_pool),
        ),
    })
}

/// The headline of a process whose step 1 could not be placed: its run is
/// one phase, "before any step" (docs/step-rule.md), not a setup with an
/// account "at the end of step 1".
fn headline_without_step(a: &AttemptView, r: &RankView) -> HeadlineSentence {
    let outside: u64 = r
        .account
        .phases
        .iter()
        .map(|p| p.out_of_pool_allocated + p.local_memory_growth)
        .sum();
    let oom = match r.forensics().len() {
        0 => String::new(),
        n => format!("; it ran out of memory ({n} failure(s))"),
    };
    HeadlineSentence {
        subject: a.id(),
        class: None,
        text: format!(
            "{} ({}): no step was placed, so the run is one phase, {}, with {} of lazy initialisation outside the pool{oom}.",
            a.id(),
            r.label,
            super::BEFORE_ANY_STEP,
            bytes(outside),
        ),
    }
}

/// Short name of a marker kind (legends, lanes, tables).
pub fn marker_kind_label(k: MarkerKind) -> &'static str {
    match k {
        MarkerKind::Allocation => "allocation",
        MarkerKind::LocalMemory => "local memory",
        MarkerKind::NcclComm => "NCCL init",
        MarkerKind::Autotune => "autotune",
        MarkerKind::Compile => "compile",
        MarkerKind::Oom => "OOM",
    }
}

/// One line describing a timeline marker: what it was, when, and its detail
/// (hover text in HTML, the detail line in the dashboard). `no_step`: the
/// process has no step placed, so its one phase is "before any step".
pub fn marker_text(m: &Marker, no_step: bool) -> String {
    let at = if m.t_s < 1.0 {
        format!("{:.3} ms", m.t_s * 1e3)
    } else {
        format!("{:.3} s", m.t_s)
    };
    let when = format!(
        "at {at}{}",
        m.phase.map_or(String::new(), |p| {
            match super::phase_word(no_step, p, None) {
                w if w == super::BEFORE_ANY_STEP => format!(" {w}"),
                w => format!(" in {w}"),
            }
        })
    );
    let dur = m
        .end_s
        .map(|e| format!(", {}", seconds((e - m.t_s).max(0.0))))
        .unwrap_or_default();
    let times = if m.count > 1 {
        format!(" ({} events)", m.count)
    } else {
        String::new()
    };
    let what = if m.what.is_empty() {
        "various".to_string()
    } else {
        m.what.clone()
    };
    match m.kind {
        MarkerKind::Allocation => format!(
            "{} out-of-pool allocation{times}: {} by {} [{}] {when}",
            m.source,
            bytes(m.bytes),
            if m.libraries.is_empty() {
                "an unknown library".to_string()
            } else {
                m.libraries.join(", ")
            },
            what,
        ),
        MarkerKind::LocalMemory => format!(
            "local-memory growth{} of {} by kernel {what}{} {when}",
            if m.failed { " (failed)" } else { "" },
            bytes(m.bytes),
            m.config
                .as_ref()
                .map_or(String::new(), |c| format!(" [autotune candidate {c}]")),
        ),
        MarkerKind::NcclComm => format!(
            "NCCL communicator {}{dur}, {} {when}",
            m.key.clone().unwrap_or(what),
            bytes(m.bytes),
        ),
        MarkerKind::Autotune => format!(
            "Triton autotune {what}{} key {}{dur}{} {when}",
            times,
            m.key.as_deref().unwrap_or("?"),
            m.config
                .as_ref()
                .map_or(String::new(), |c| format!(", chose {c}")),
        ),
        MarkerKind::Compile => format!("compile {what}{times}{dur} {when}"),
        MarkerKind::Oom => format!(
            "OUT OF MEMORY: {what} ({} by {}) {when}",
            bytes(m.bytes),
            if m.libraries.is_empty() {
                m.source.clone()
            } else {
                m.libraries.join(", ")
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&[7.0], 0.9), 7.0);
    }

    #[test]
    fn costs_are_setup_and_held_memory_never_step_one_context() {
        let c = Costs {
            setup_s: Some(7.85),
            setup_within_noise: false,
            held_extra_bytes: 388.0 * 1024.0 * 1024.0,
            held_known: true,
            step1_peak_bytes: Some(390.0 * 1024.0 * 1024.0),
            step1_s: Some(-9.6),
        };
        assert_eq!(
            costs_text(&c),
            "setup +7.85 s, +388.0 MiB held at step-1 end that the baseline does not hold"
        );
        // Never "no extra memory" where the memory held is not known.
        assert_eq!(
            costs_text(&Costs::default()),
            "memory held at step-1 end unknown"
        );
        let known = Costs {
            held_known: true,
            ..Costs::default()
        };
        assert_eq!(costs_text(&known), "no extra memory held at step-1 end");
        // A setup change within the noise is stated as such, never as a cost.
        let noisy = Costs {
            setup_s: Some(-0.5333),
            setup_within_noise: true,
            held_known: true,
            ..Costs::default()
        };
        assert_eq!(
            costs_text(&noisy),
            "setup -533.3 ms (within noise), no extra memory held at step-1 end"
        );
    }
}
