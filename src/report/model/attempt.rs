//! One attempt's view: its ranks, the worst of them and the
//! distribution of each figure over all of them.

use crate::analysis::AttemptAccount;
use crate::analysis::account::{Forensic, GapAccount, LateWarmup, ProcessAccount};
use crate::analysis::phases::Phase;
use crate::analysis::ranks::{self, RankSpread};
use crate::analysis::timeline::Timeline;
use crate::load::Problem;
use crate::report::{bytes, seconds};
use serde::Serialize;

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
        if crate::report::no_step(&self.account) {
            format!("the end of the run, {}", crate::report::BEFORE_ANY_STEP)
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
        crate::report::no_step(&self.account)
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
pub(super) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

pub(super) fn distribution(ranks: &[RankView], figure: Figure) -> Option<FigureDistribution> {
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
    pub(super) fn from_account(run_order: usize, a: AttemptAccount) -> AttemptView {
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

/// Ranks shown one by one before a renderer switches to worst ranks plus
/// distribution.
pub const SHOWN_RANKS: usize = 16;

/// How many worst ranks each figure lists at scale.
pub const WORST_PER_FIGURE: usize = 5;
