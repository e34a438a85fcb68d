//! The A/B comparison: per attempt a headline (worst rank), per variant the
//! medians and spread over the attempts that count (docs/verdicts.md §1), and
//! per prewarm a verdict (`verdict.rs`). Data only: the report layer phrases it.

use super::AttemptAccount;
use super::account::ProcessAccount;
use super::phases::Phase;
use super::ranks::{is_rank, step1, step1_out_of_pool, step1_peak};
use super::stats::Stat;
use super::verdict::{self, Verdict};
use super::verdict_costs::{HeldPart, held_parts};
use crate::capture::meta::RunMeta;
use crate::load::Problem;
use crate::prewarm::catalog::EventClass;
use serde::Serialize;
use std::collections::BTreeMap;

pub use super::account::{ClassCost, LaterCost};

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

/// Something a reader of the comparison must know, as data.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MatrixNote {
    /// Variants shared caches: earlier variants warmed later ones.
    CachesNotIsolated { cache: String },
    /// Fewer timed attempts on disk than `--repeat` asked for (the run stopped early).
    AttemptsMissing {
        variant: String,
        recorded: u32,
        expected: u32,
    },
    /// Attempts that exited with an error (their figures count up to the failure).
    AttemptsFailed { variant: String, failed: u32 },
    /// A variant that enables no known prewarm: compared, not judged.
    NotJudged { variant: String },
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MatrixAccount {
    pub baseline: String,
    pub cache: String,
    pub isolated: bool,
    pub variants: Vec<VariantSummary>,
    pub verdicts: Vec<Verdict>,
    pub notes: Vec<MatrixNote>,
    /// Communicator prewarms' verdicts per process group (verdict_comms.rs).
    pub comm_groups: Vec<super::verdict_comms::CommVerdict>,
}

/// The rank with the highest step-1 device peak (the first on ties).
fn highest_peak<'a>(ranks: &[&'a ProcessAccount]) -> Option<&'a ProcessAccount> {
    ranks
        .iter()
        .copied()
        .reduce(|a, b| if step1_peak(b) > step1_peak(a) { b } else { a })
}

/// The headline of one attempt (worst rank for each figure).
pub fn headline(a: &AttemptAccount) -> Headline {
    let ranks: Vec<&ProcessAccount> = a.processes.iter().filter(|p| is_rank(p)).collect();
    let peaks: Vec<u64> = ranks.iter().filter_map(|p| step1_peak(p)).collect();
    let worst = ranks.iter().max_by_key(|p| step1_out_of_pool(p)).copied();
    let peak_rank = highest_peak(&ranks);
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
            .map(|p| super::framework::class_costs(p, Phase::Step1))
            .unwrap_or_default(),
        later_by_class: worst.map(super::framework::later_costs).unwrap_or_default(),
        rank_skew_peak: a.ranks.as_ref().and_then(|r| r.step1_peak_skew),
        reached_step1: ranks.iter().any(|p| step1(p).is_some()),
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

/// Builds the comparison of a run's variants. None for a single-variant run.
pub fn compare(meta: Option<&RunMeta>, attempts: &[AttemptAccount]) -> Option<MatrixAccount> {
    let order = variant_order(meta, attempts);
    if order.len() < 2 {
        return None;
    }
    let baseline = meta
        .and_then(|m| m.baseline.clone())
        .filter(|b| order.contains(b))
        .unwrap_or_else(|| order[0].clone());
    let expected = meta.map_or(1, |m| m.repeat);
    let cache = meta.map_or("unknown".to_string(), |m| {
        format!("{:?}", m.cache).to_lowercase()
    });
    let isolated = !matches!(cache.as_str(), "shared" | "user");
    let variants = summarise_variants(meta, attempts, &order, expected);
    let mut m = judge(baseline, cache, isolated, variants)?;
    m.comm_groups = super::verdict_comms::comm_verdicts(&m.baseline, &m.variants, attempts);
    Some(m)
}

/// Per-variant summaries in declaration order (single-variant runs too: gating
/// and `diff` work on these).
pub fn summaries(meta: Option<&RunMeta>, attempts: &[AttemptAccount]) -> Vec<VariantSummary> {
    let mut order = variant_order(meta, attempts);
    order.retain(|n| attempts.iter().any(|a| &a.variant == n));
    summarise_variants(meta, attempts, &order, meta.map_or(1, |m| m.repeat))
}

/// Variants in declaration order, then any found only on disk.
fn variant_order(meta: Option<&RunMeta>, attempts: &[AttemptAccount]) -> Vec<String> {
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

fn summarise_variants(
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

/// Notes and verdicts for summarised variants.
fn judge(
    baseline: String,
    cache: String,
    isolated: bool,
    variants: Vec<VariantSummary>,
) -> Option<MatrixAccount> {
    let base = variants.iter().find(|v| v.name == baseline)?.clone();
    let mut notes = Vec::new();
    if !isolated {
        notes.push(MatrixNote::CachesNotIsolated {
            cache: cache.clone(),
        });
    }
    for v in &variants {
        if v.recorded_attempts < v.expected_attempts {
            notes.push(MatrixNote::AttemptsMissing {
                variant: v.name.clone(),
                recorded: v.recorded_attempts,
                expected: v.expected_attempts,
            });
        }
        if v.failed_attempts > 0 {
            notes.push(MatrixNote::AttemptsFailed {
                variant: v.name.clone(),
                failed: v.failed_attempts,
            });
        }
    }
    let others = variants.iter().filter(|v| v.name != baseline);
    let (judged, unjudged): (Vec<&VariantSummary>, Vec<&VariantSummary>) =
        others.partition(|v| !v.prewarms.is_empty());
    notes.extend(unjudged.iter().map(|v| MatrixNote::NotJudged {
        variant: v.name.clone(),
    }));
    let verdicts = judged
        .iter()
        .map(|v| verdict::judge(&base, v, isolated))
        .collect();
    Some(MatrixAccount {
        baseline,
        cache,
        isolated,
        variants,
        verdicts,
        notes,
        comm_groups: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stat::of(&[1.0, 2.0]).unwrap().median, 1.5);
        assert!(Stat::of(&[]).is_none());
    }
}
