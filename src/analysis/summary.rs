//! Per attempt a headline (figures of its worst rank, docs/verdicts.md §1),
//! per variant the medians and spread over the attempts that count, and the
//! attempts left out with why. Below the matrix and the verdicts, which
//! compare these summaries.

use super::AttemptAccount;
use super::account::{ClassCost, GapAccount, LaterCost, PartSource, ProcessAccount};
use super::phases::Phase;
use super::ranks::{
    highest_step1_peak, is_rank, most_step1_out_of_pool, step1, step1_out_of_pool, step1_peak,
};
use super::stats::Stat;
use crate::load::Problem;
use crate::prewarm::catalog::EventClass;
use crate::run_folder::meta::RunMeta;
use serde::Serialize;
use std::collections::BTreeMap;

/// The figures of one attempt, taken from its worst rank.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Headline {
    pub attempt: String,
    pub exit_code: Option<i32>,
    pub ranks: u32,
    pub step1_device_peak: Option<u64>,
    /// Out-of-pool bytes that landed in step 1: allocation calls, local-memory
    /// growth and NCCL's inferred init bytes (None: no rank reached step 1,
    /// so nothing was measured; never shown as 0 B).
    pub step1_out_of_pool: Option<u64>,
    pub step1_tightest_headroom: Option<i64>,
    pub step1_s: Option<f64>,
    pub setup_s: Option<f64>,
    /// The slowest rank's steady step (each rank's the median of its steps
    /// 2..N without lazy initialisation: `StepInfo::steady_step_s`).
    pub steady_step_s: Option<f64>,
    pub oom: bool,
    /// NCCL communicators this attempt's worst rank created (any phase).
    pub nccl_comms: u32,
    pub step1_by_class: BTreeMap<EventClass, ClassCost>,
    /// What each class cost in steps 2..N, same rank as `step1_by_class`
    /// (empty when nothing landed there or no step ended after step 1).
    pub later_by_class: BTreeMap<EventClass, LaterCost>,
    /// Largest minus smallest step-1 device peak across ranks.
    pub rank_skew_peak: Option<u64>,
    /// Whether a rank reached step 1 (only such attempts give step-1 figures).
    pub reached_step1: bool,
    /// The out-of-pool account at step-1 end of the rank with the highest
    /// step-1 peak, by source (None without a step-1 account).
    pub held_step1_end: Option<Vec<HeldPart>>,
    /// That rank's PyTorch pool reserve at step-1 end.
    pub pool_reserved_step1_end: Option<u64>,
    /// Failed items of an injected prescription, over all ranks.
    pub prescription_failures: u32,
}

/// Why an attempt is left out of medians and verdicts (docs/verdicts.md §1).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Exclusion {
    /// The untimed cache warm-up run of `--cache warm`.
    Warmup,
    /// A signal stopped it, or it never recorded an exit status.
    Interrupted,
    /// The command could not be started (not found, not executable).
    NotStarted,
    /// Some of its files are corrupt.
    Damaged { problems: Vec<Problem> },
}

/// An attempt left out, and why.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExcludedAttempt {
    pub attempt: String,
    pub reasons: Vec<Exclusion>,
}

/// One variant over its repeats.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantSummary {
    pub name: String,
    pub prewarms: Vec<String>,
    /// The attempts that count (headline per attempt).
    pub attempts: Vec<Headline>,
    /// Attempts left out, with their reasons.
    pub excluded: Vec<ExcludedAttempt>,
    pub expected_attempts: u32,
    /// Timed attempts found on disk (counted or excluded).
    pub recorded_attempts: u32,
    pub failed_attempts: u32,
    pub step1_device_peak: Option<Stat>,
    pub step1_out_of_pool: Option<Stat>,
    pub step1_tightest_headroom: Option<Stat>,
    pub step1_s: Option<Stat>,
    pub setup_s: Option<Stat>,
}

/// What holds a part of the out-of-pool memory at step-1 end, as the verdict
/// groups the account's parts ([`PartSource`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum HeldSource {
    /// The CUDA context (with its initial local-memory reservation).
    Context,
    /// Local-memory growth from spilling kernels (never given back).
    LocalMemory,
    /// Reservation the driver dropped when a launch failed (negative).
    LocalMemoryDropped,
    /// Device growth no allocation record explains: NCCL init without
    /// allocation calls (inferred from its init window), module code loaded
    /// lazily (inferred from the readings around loads), what a failed
    /// launch released beyond the local memory held, the change across
    /// untraced stretches, plus the account's unexplained remainder. One bucket, because where the timing windows
    /// split the two differs between runs holding the same bytes.
    WithoutRecords,
    /// Live allocations of one library (`nccl`, `cublas`, `torch (outside pool)`, ...).
    Library(String),
}

impl HeldSource {
    /// The bucket of one part of the account (None: the unexplained remainder).
    pub fn of(part: Option<&PartSource>) -> HeldSource {
        match part {
            Some(PartSource::Context) => HeldSource::Context,
            Some(PartSource::LocalMemoryGrowth) => HeldSource::LocalMemory,
            Some(PartSource::LocalMemoryDropped) => HeldSource::LocalMemoryDropped,
            Some(
                PartSource::NcclWithoutAllocations
                | PartSource::ModuleCode
                | PartSource::ReleasedAtFailure
                | PartSource::Untraced,
            )
            | None => HeldSource::WithoutRecords,
            Some(PartSource::Library(name)) => HeldSource::Library(name.clone()),
        }
    }
}

/// One source's bytes at step-1 end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldPart {
    pub source: HeldSource,
    /// Signed: a dropped reservation is negative.
    pub bytes: i64,
    /// Inferred from the device timeline, not from allocation records.
    pub inferred: bool,
}

/// The parts of a step-1-end account, one per source; the unexplained
/// remainder joins the inferred bucket, so the parts add up to the measured
/// out-of-pool total (device used − pool).
pub fn held_parts(gap: &GapAccount) -> Vec<HeldPart> {
    let mut by: BTreeMap<HeldSource, HeldPart> = BTreeMap::new();
    let parts = gap
        .parts
        .iter()
        .map(|p| (Some(&p.source), p.bytes, p.inferred))
        .chain([(None, gap.unexplained, true)]);
    for (source, bytes, inferred) in parts {
        let source = HeldSource::of(source);
        let e = by.entry(source.clone()).or_insert(HeldPart {
            source,
            bytes: 0,
            inferred,
        });
        e.bytes += bytes;
        e.inferred &= inferred;
    }
    by.into_values().collect()
}

/// The headline of one attempt (worst rank for each figure).
pub fn headline(a: &AttemptAccount) -> Headline {
    let ranks: Vec<&ProcessAccount> = a.processes.iter().filter(|p| is_rank(p)).collect();
    let peaks: Vec<u64> = ranks.iter().filter_map(|p| step1_peak(p)).collect();
    let worst = most_step1_out_of_pool(&ranks);
    let peak_rank = highest_step1_peak(&ranks);
    let peak_step1 = peak_rank.and_then(step1);
    let max_f = |f: &dyn Fn(&ProcessAccount) -> Option<f64>| {
        ranks.iter().filter_map(|p| f(p)).reduce(f64::max)
    };
    Headline {
        attempt: a.attempt.clone(),
        exit_code: a.exit_code,
        ranks: ranks.len() as u32,
        step1_device_peak: peaks.iter().copied().max(),
        step1_out_of_pool: ranks
            .iter()
            .filter(|p| step1(p).is_some())
            .map(|p| step1_out_of_pool(p))
            .max(),
        step1_tightest_headroom: ranks
            .iter()
            .flat_map(|p| {
                p.tightest
                    .iter()
                    .filter(|t| t.phase == Phase::Step1)
                    .filter_map(|t| t.headroom_after)
            })
            .min(),
        step1_s: max_f(&|p| p.steps.step1_s),
        setup_s: max_f(&|p| p.steps.setup_s),
        steady_step_s: max_f(&|p| p.steps.steady_step_s),
        oom: ranks.iter().any(|p| !p.forensics.is_empty()),
        nccl_comms: ranks.iter().map(|p| p.nccl.len() as u32).max().unwrap_or(0),
        step1_by_class: worst
            .map(|p| super::framework_joins::class_costs(p, Phase::Step1))
            .unwrap_or_default(),
        later_by_class: worst
            .map(super::framework_joins::later_costs)
            .unwrap_or_default(),
        rank_skew_peak: a.ranks.as_ref().and_then(|r| r.step1_peak_skew),
        reached_step1: ranks.iter().any(|p| step1(p).is_some()),
        prescription_failures: ranks.iter().map(|p| p.prescription_failures).sum(),
        held_step1_end: peak_step1.and_then(|s| s.gap_end.as_ref()).map(held_parts),
        pool_reserved_step1_end: peak_step1.map(|s| s.pool_reserved_end),
    }
}

/// Why an attempt does not count; empty when it does.
pub fn exclusions(a: &AttemptAccount) -> Vec<Exclusion> {
    let mut out = Vec::new();
    if a.warmup {
        out.push(Exclusion::Warmup);
    }
    if a.interrupted {
        out.push(Exclusion::Interrupted);
    }
    if a.not_started {
        out.push(Exclusion::NotStarted);
    }
    let damaged: Vec<Problem> = a
        .problems
        .iter()
        .chain(a.processes.iter().flat_map(|p| p.problems.iter()))
        .filter(|p| p.damaged)
        .cloned()
        .collect();
    if !damaged.is_empty() {
        out.push(Exclusion::Damaged { problems: damaged });
    }
    out
}

fn stat_of(h: &[Headline], f: impl Fn(&Headline) -> Option<f64>) -> Option<Stat> {
    Stat::of(&h.iter().filter_map(f).collect::<Vec<_>>())
}

/// Per-variant summaries in declaration order (single-variant runs too: gating
/// and `diff` work on these).
pub fn summaries(meta: Option<&RunMeta>, attempts: &[AttemptAccount]) -> Vec<VariantSummary> {
    let mut order = variant_order(meta, attempts);
    order.retain(|n| attempts.iter().any(|a| &a.variant == n));
    summarise_variants(meta, attempts, &order, meta.map_or(1, |m| m.repeat))
}

/// Variants in declaration order, then any found only on disk.
pub(super) fn variant_order(meta: Option<&RunMeta>, attempts: &[AttemptAccount]) -> Vec<String> {
    let mut order: Vec<String> = meta
        .map(|m| m.variants.iter().map(|v| v.name.clone()).collect())
        .unwrap_or_default();
    for a in attempts {
        if !order.contains(&a.variant) {
            order.push(a.variant.clone());
        }
    }
    order
}

/// A variant's medians and spreads over the headlines of the attempts that count.
pub fn summary_of(
    name: &str,
    prewarms: Vec<String>,
    heads: Vec<Headline>,
    expected: u32,
    recorded: u32,
) -> VariantSummary {
    VariantSummary {
        name: name.to_string(),
        prewarms,
        expected_attempts: expected,
        recorded_attempts: recorded,
        excluded: Vec::new(),
        failed_attempts: heads
            .iter()
            .filter(|h| h.exit_code.is_some_and(|c| c != 0))
            .count() as u32,
        step1_device_peak: stat_of(&heads, |h| h.step1_device_peak.map(|v| v as f64)),
        step1_out_of_pool: stat_of(&heads, |h| h.step1_out_of_pool.map(|v| v as f64)),
        step1_tightest_headroom: stat_of(&heads, |h| h.step1_tightest_headroom.map(|v| v as f64)),
        step1_s: stat_of(&heads, |h| h.step1_s),
        setup_s: stat_of(&heads, |h| h.setup_s),
        attempts: heads,
    }
}

/// The summaries of the variants named in `order`, in that order.
pub(super) fn summarise_variants(
    meta: Option<&RunMeta>,
    attempts: &[AttemptAccount],
    order: &[String],
    expected: u32,
) -> Vec<VariantSummary> {
    let mut variants = Vec::new();
    for name in order {
        let mine: Vec<&AttemptAccount> = attempts.iter().filter(|a| &a.variant == name).collect();
        let excluded: Vec<ExcludedAttempt> = mine
            .iter()
            .map(|a| ExcludedAttempt {
                attempt: a.attempt.clone(),
                reasons: exclusions(a),
            })
            .filter(|e| !e.reasons.is_empty())
            .collect();
        let heads: Vec<Headline> = mine
            .iter()
            .filter(|a| exclusions(a).is_empty())
            .map(|a| headline(a))
            .collect();
        let prewarms = meta
            .and_then(|m| m.variants.iter().find(|v| &v.name == name))
            .map(|v| v.prewarms.clone())
            .unwrap_or_default();
        let recorded = mine.iter().filter(|a| !a.warmup).count() as u32;
        let mut v = summary_of(name, prewarms, heads, expected, recorded);
        v.excluded = excluded;
        variants.push(v);
    }
    variants
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::account::GapPart;

    fn part(source: PartSource, bytes: i64, inferred: bool) -> GapPart {
        GapPart {
            source,
            context: None,
            bytes,
            inferred,
        }
    }

    #[test]
    fn account_parts_map_to_typed_sources() {
        let parts = vec![
            part(PartSource::Context, 10, false),
            part(PartSource::Library("nccl".into()), 20, false),
            part(PartSource::Library("cublas".into()), 30, false),
            part(PartSource::LocalMemoryGrowth, 40, false),
            part(PartSource::LocalMemoryDropped, -5, false),
            part(PartSource::NcclWithoutAllocations, 50, true),
            part(PartSource::ModuleCode, 3, true),
        ];
        let gap = GapAccount {
            at_s: 0.0,
            device_used: 0,
            pool_reserved: 0,
            out_of_pool: 0,
            parts,
            unexplained: 7,
            not_understood: false,
        };
        let held = held_parts(&gap);
        let find = |s: HeldSource| held.iter().find(|h| h.source == s).unwrap().bytes;
        assert_eq!(find(HeldSource::Context), 10);
        assert_eq!(find(HeldSource::Library("nccl".into())), 20);
        assert_eq!(find(HeldSource::LocalMemory), 40);
        assert_eq!(find(HeldSource::LocalMemoryDropped), -5);
        assert_eq!(
            find(HeldSource::WithoutRecords),
            60,
            "inferred + unexplained"
        );
        assert!(
            held.iter()
                .find(|h| h.source == HeldSource::WithoutRecords)
                .unwrap()
                .inferred
        );
        let total: i64 = held.iter().map(|h| h.bytes).sum();
        assert_eq!(total, 10 + 20 + 30 + 40 - 5 + 50 + 3 + 7);
        // A library named like another source is still that library.
        assert_eq!(
            HeldSource::of(Some(&PartSource::Library("CUDA context".into()))),
            HeldSource::Library("CUDA context".into())
        );
    }
}
