//! The A/B comparison: per attempt a headline (worst rank), per variant the
//! medians and spread over repeats, and per prewarm a verdict with evidence —
//! what it moved out of step 1, what it cost at setup, what still lands there.

use super::AttemptAccount;
use super::model::ProcessAccount;
use super::phases::Phase;
use super::ranks::{is_rank, step1_out_of_pool, step1_peak};
use crate::capture::meta::RunMeta;
use crate::prewarm::catalog::{self, EventClass};
use serde::Serialize;
use std::collections::BTreeMap;

pub use super::model::ClassCost;

/// The figures of one attempt, taken from its worst rank.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Headline {
    pub attempt: String,
    pub exit_code: Option<i32>,
    pub ranks: u32,
    pub step1_device_peak: Option<u64>,
    /// Out-of-pool bytes that landed in step 1: allocation calls, local-memory
    /// growth and NCCL's inferred init bytes.
    pub step1_out_of_pool: u64,
    pub step1_tightest_headroom: Option<i64>,
    pub step1_s: Option<f64>,
    pub setup_s: Option<f64>,
    pub steady_step_s: Option<f64>,
    pub oom: bool,
    /// NCCL communicators this attempt's worst rank created (any phase).
    pub nccl_comms: u32,
    pub step1_by_class: BTreeMap<EventClass, ClassCost>,
    /// Largest minus smallest step-1 device peak across ranks.
    pub rank_skew_peak: Option<u64>,
}

/// Median and spread of one figure over repeats.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: u32,
}

impl Stat {
    /// From values (None when empty).
    pub fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
            n: n as u32,
        })
    }
    /// max − min.
    pub fn spread(&self) -> f64 {
        self.max - self.min
    }
}

/// One variant over its repeats.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VariantSummary {
    pub name: String,
    pub prewarms: Vec<String>,
    pub attempts: Vec<Headline>,
    pub expected_attempts: u32,
    pub failed_attempts: u32,
    pub step1_device_peak: Option<Stat>,
    pub step1_out_of_pool: Option<Stat>,
    pub step1_tightest_headroom: Option<Stat>,
    pub step1_s: Option<Stat>,
    pub setup_s: Option<Stat>,
}

/// How a prewarm fared against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    Works,
    Partial,
    NoEffect,
    Regression,
}

impl VerdictClass {
    /// Label for reports.
    pub fn label(self) -> &'static str {
        match self {
            VerdictClass::Works => "works",
            VerdictClass::Partial => "partial",
            VerdictClass::NoEffect => "no effect",
            VerdictClass::Regression => "regression",
        }
    }
}

/// A verdict with its evidence.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verdict {
    pub variant: String,
    pub prewarms: Vec<String>,
    pub targets: Vec<EventClass>,
    pub class: VerdictClass,
    /// Targeted step-1 bytes/seconds in the baseline and in the variant (medians).
    pub baseline_targeted_bytes: f64,
    pub variant_targeted_bytes: f64,
    pub baseline_targeted_seconds: f64,
    pub variant_targeted_seconds: f64,
    pub moved_bytes: f64,
    pub moved_seconds: f64,
    pub setup_cost_s: Option<f64>,
    pub step1_peak_delta: Option<f64>,
    pub step1_s_delta: Option<f64>,
    /// Per targeted class: what still lands in step 1 of the variant (median).
    pub still_in_step1: Vec<(EventClass, ClassCost)>,
    /// Sentences that explain the class, including its uncertainty.
    pub evidence: Vec<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MatrixAccount {
    pub baseline: String,
    pub cache: String,
    pub isolated: bool,
    pub variants: Vec<VariantSummary>,
    pub verdicts: Vec<Verdict>,
    pub notes: Vec<String>,
}

fn step1_costs(p: &ProcessAccount) -> BTreeMap<EventClass, ClassCost> {
    let mut m: BTreeMap<EventClass, ClassCost> = BTreeMap::new();
    let Some(s1) = p.phases.iter().find(|ph| ph.phase == Phase::Step1) else {
        return m;
    };
    for sb in &s1.by_source {
        if let Some(c) = super::framework::class_of_source(&sb.source) {
            let e = m.entry(c).or_default();
            e.bytes += sb.allocated;
            e.events += sb.calls as u32;
        }
    }
    let local = m.entry(EventClass::LocalMemory).or_default();
    local.bytes += s1.local_memory_growth;
    local.events += p
        .local_memory
        .iter()
        .filter(|l| l.phase == Phase::Step1)
        .count() as u32;
    let nccl = m.entry(EventClass::NcclComm).or_default();
    for c in p.nccl.iter().filter(|c| c.phase == Some(Phase::Step1)) {
        nccl.bytes += c.inferred_bytes;
        nccl.events += 1;
    }
    nccl.seconds += s1.stall.nccl_init_s;
    let at = m.entry(EventClass::TritonAutotune).or_default();
    at.seconds += s1.stall.autotune_s;
    at.events += p
        .autotune
        .iter()
        .filter(|a| a.phase == Phase::Step1)
        .count() as u32;
    let comp = m.entry(EventClass::Compile).or_default();
    comp.seconds += s1.stall.compile_s;
    comp.events += p
        .compiles
        .iter()
        .filter(|c| c.phase == Phase::Step1)
        .count() as u32;
    let module = m.entry(EventClass::ModuleLoad).or_default();
    module.seconds += s1.stall.module_load_s;
    module.events += s1.kernels_first_launched;
    m.retain(|_, c| c.bytes > 0 || c.seconds > 0.0 || c.events > 0);
    m
}

/// The headline of one attempt (worst rank for each figure).
pub fn headline(a: &AttemptAccount) -> Headline {
    let ranks: Vec<&ProcessAccount> = a.processes.iter().filter(|p| is_rank(p)).collect();
    let peaks: Vec<u64> = ranks.iter().filter_map(|p| step1_peak(p)).collect();
    let worst = ranks.iter().max_by_key(|p| step1_out_of_pool(p)).copied();
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
            .map(|p| step1_out_of_pool(p))
            .max()
            .unwrap_or(0),
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
        step1_by_class: worst.map(step1_costs).unwrap_or_default(),
        rank_skew_peak: a.ranks.as_ref().and_then(|r| r.step1_peak_skew),
    }
}

fn stat_of(h: &[Headline], f: impl Fn(&Headline) -> Option<f64>) -> Option<Stat> {
    Stat::of(&h.iter().filter_map(f).collect::<Vec<_>>())
}

fn targeted(h: &Headline, targets: &[EventClass]) -> (f64, f64) {
    let mut b = 0.0;
    let mut s = 0.0;
    for t in targets {
        if let Some(c) = h.step1_by_class.get(t) {
            b += c.bytes as f64;
            s += c.seconds;
        }
    }
    (b, s)
}

const MIB: f64 = 1024.0 * 1024.0;

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
    judge(attempts, baseline, cache, isolated, variants)
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

fn summarise_variants(
    meta: Option<&RunMeta>,
    attempts: &[AttemptAccount],
    order: &[String],
    expected: u32,
) -> Vec<VariantSummary> {
    let mut variants = Vec::new();
    for name in order {
        let heads: Vec<Headline> = attempts
            .iter()
            .filter(|a| &a.variant == name && !a.warmup && !a.interrupted)
            .map(headline)
            .collect();
        let prewarms = meta
            .and_then(|m| m.variants.iter().find(|v| &v.name == name))
            .map(|v| v.prewarms.clone())
            .unwrap_or_default();
        variants.push(VariantSummary {
            name: name.clone(),
            prewarms,
            expected_attempts: expected,
            failed_attempts: heads
                .iter()
                .filter(|h| h.exit_code.is_some_and(|c| c != 0))
                .count() as u32,
            step1_device_peak: stat_of(&heads, |h| h.step1_device_peak.map(|v| v as f64)),
            step1_out_of_pool: stat_of(&heads, |h| Some(h.step1_out_of_pool as f64)),
            step1_tightest_headroom: stat_of(&heads, |h| {
                h.step1_tightest_headroom.map(|v| v as f64)
            }),
            step1_s: stat_of(&heads, |h| h.step1_s),
            setup_s: stat_of(&heads, |h| h.setup_s),
            attempts: heads,
        });
    }
    variants
}

/// Notes and verdicts for summarised variants.
fn judge(
    attempts: &[AttemptAccount],
    baseline: String,
    cache: String,
    isolated: bool,
    variants: Vec<VariantSummary>,
) -> Option<MatrixAccount> {
    let mut notes = Vec::new();
    for a in attempts.iter().filter(|a| a.interrupted) {
        notes.push(format!(
            "attempt {}/{} was interrupted (a signal stopped it) and is left out of the comparison",
            a.variant, a.attempt
        ));
    }
    if !isolated {
        notes.push(format!(
            "cache mode '{cache}': variants did not run on isolated caches, so earlier variants warmed later ones; these verdicts are not trustworthy (use --cache cold or warm)"
        ));
    }
    for v in &variants {
        if (v.attempts.len() as u32) < v.expected_attempts {
            notes.push(format!(
                "variant '{}' has {} of {} attempts (the run was stopped early)",
                v.name,
                v.attempts.len(),
                v.expected_attempts
            ));
        }
        if v.failed_attempts > 0 {
            notes.push(format!("variant '{}': {} attempt(s) exited with an error; their figures are included up to the failure", v.name, v.failed_attempts));
        }
    }
    let base = variants.iter().find(|v| v.name == baseline)?.clone();
    let mut verdicts = Vec::new();
    for v in variants
        .iter()
        .filter(|v| v.name != baseline && !v.prewarms.is_empty())
    {
        verdicts.push(verdict(&base, v));
    }
    for v in variants
        .iter()
        .filter(|v| v.name != baseline && v.prewarms.is_empty())
    {
        notes.push(format!("variant '{}' names no known prewarm (see `prewarm-doctor run --help`): compared, but not judged", v.name));
    }
    Some(MatrixAccount {
        baseline,
        cache,
        isolated,
        variants,
        verdicts,
        notes,
    })
}

fn median(values: Vec<f64>) -> f64 {
    Stat::of(&values).map_or(0.0, |s| s.median)
}

fn verdict(base: &VariantSummary, v: &VariantSummary) -> Verdict {
    let mut targets: Vec<EventClass> = Vec::new();
    for p in &v.prewarms {
        match catalog::find(p) {
            Some(entry) => targets.extend(entry.targets.iter().copied()),
            None => targets.extend([
                EventClass::Cublas,
                EventClass::TritonAutotune,
                EventClass::LocalMemory,
                EventClass::Compile,
                EventClass::NcclComm,
                EventClass::ModuleLoad,
            ]),
        }
    }
    targets.sort();
    targets.dedup();
    let bt: Vec<(f64, f64)> = base
        .attempts
        .iter()
        .map(|h| targeted(h, &targets))
        .collect();
    let vt: Vec<(f64, f64)> = v.attempts.iter().map(|h| targeted(h, &targets)).collect();
    let (bb, bs) = (
        median(bt.iter().map(|x| x.0).collect()),
        median(bt.iter().map(|x| x.1).collect()),
    );
    let (vb, vs) = (
        median(vt.iter().map(|x| x.0).collect()),
        median(vt.iter().map(|x| x.1).collect()),
    );
    let spread = |xs: &[(f64, f64)], k: usize| {
        Stat::of(
            &xs.iter()
                .map(|x| if k == 0 { x.0 } else { x.1 })
                .collect::<Vec<_>>(),
        )
        .map_or(0.0, |s| s.spread())
    };
    // What counts as real: more than the repeats' spread, and more than small floors.
    let noise_b = (spread(&bt, 0) + spread(&vt, 0))
        .max(1.0 * MIB)
        .max(0.05 * bb);
    let noise_s = (spread(&bt, 1) + spread(&vt, 1)).max(0.05).max(0.05 * bs);
    let moved_b = bb - vb;
    let moved_s = bs - vs;
    let base_has = bb > noise_b || bs > noise_s;
    let median_of = |s: &Option<Stat>| s.map(|x| x.median);
    let peak_delta = median_of(&v.step1_device_peak)
        .zip(median_of(&base.step1_device_peak))
        .map(|(a, b)| a - b);
    let s1_delta = median_of(&v.step1_s)
        .zip(median_of(&base.step1_s))
        .map(|(a, b)| a - b);
    let setup_cost = median_of(&v.setup_s)
        .zip(median_of(&base.setup_s))
        .map(|(a, b)| a - b);
    let peak_noise = base.step1_device_peak.map_or(0.0, |s| s.spread())
        + v.step1_device_peak.map_or(0.0, |s| s.spread());
    let s1_noise = base.step1_s.map_or(0.0, |s| s.spread()) + v.step1_s.map_or(0.0, |s| s.spread());
    let regressed_peak = peak_delta.is_some_and(|d| d > (peak_noise).max(64.0 * MIB));
    let regressed_time = s1_delta.is_some_and(|d| d > s1_noise.max(0.2) && moved_s <= noise_s);
    let newly_failing = v.failed_attempts > 0 && base.failed_attempts == 0;
    let moved_enough = (moved_b > noise_b) || (moved_s > noise_s);
    let remaining_small = (vb <= 0.1 * bb || vb <= noise_b) && (vs <= 0.1 * bs || vs <= noise_s);
    let class = if newly_failing || regressed_peak || regressed_time {
        VerdictClass::Regression
    } else if !base_has || !moved_enough {
        VerdictClass::NoEffect
    } else if remaining_small {
        VerdictClass::Works
    } else {
        VerdictClass::Partial
    };
    let labels: Vec<&str> = targets.iter().map(|t| t.label()).collect();
    let mut evidence = Vec::new();
    let bytes = |b: f64| crate::report::bytes(b.max(0.0) as u64);
    evidence.push(format!(
        "targets {}; in the baseline's step 1 these cost {} and {:.2} s (median of {}), in this variant's {} and {:.2} s (median of {})",
        labels.join(", "),
        bytes(bb),
        bs,
        base.attempts.len(),
        bytes(vb),
        vs,
        v.attempts.len()
    ));
    match class {
        VerdictClass::NoEffect if !base_has => evidence.push("nothing it targets lands in the baseline's step 1, so there was nothing to move".into()),
        VerdictClass::NoEffect => evidence.push(format!(
            "enabled but moved nothing: the change ({} , {:.2} s) is within the noise ({} , {:.2} s)",
            bytes(moved_b),
            moved_s,
            bytes(noise_b),
            noise_s
        )),
        _ => {
            if moved_enough {
                evidence.push(format!("moved {} and {:.2} s out of step 1", bytes(moved_b), moved_s));
            }
            if class == VerdictClass::Partial {
                evidence.push(format!("but {} and {:.2} s of what it targets still land in step 1", bytes(vb), vs));
            }
        }
    }
    if newly_failing {
        evidence.push(format!(
            "{} attempt(s) of this variant failed while the baseline's did not",
            v.failed_attempts
        ));
    }
    if let Some(d) = peak_delta
        && regressed_peak
    {
        evidence.push(format!("step-1 device peak rose by {} (beyond the spread of {}): the prewarm holds memory the baseline never needed", bytes(d), bytes(peak_noise)));
        let comms =
            |s: &VariantSummary| median(s.attempts.iter().map(|h| h.nccl_comms as f64).collect());
        let (bc, vc) = (comms(base), comms(v));
        if vc > bc {
            evidence.push(format!("this variant creates {vc:.0} NCCL communicator(s), the baseline {bc:.0}: it warms a communicator the training never uses"));
        }
    }
    if regressed_time {
        evidence.push(format!(
            "step 1 got {:.2} s slower without moving anything it targets",
            s1_delta.unwrap_or(0.0)
        ));
    }
    if let Some(c) = setup_cost {
        evidence.push(format!("setup time changed by {c:+.2} s"));
    }
    if base.attempts.len() < 2 || v.attempts.len() < 2 {
        evidence.push("one attempt on a side: no spread is known, so the noise floor is a guess (use --repeat 3)".into());
    }
    let mut still = Vec::new();
    for t in &targets {
        let costs: Vec<&ClassCost> = v
            .attempts
            .iter()
            .filter_map(|h| h.step1_by_class.get(t))
            .collect();
        if costs.is_empty() {
            continue;
        }
        let n = v.attempts.len().max(1) as f64;
        let c = ClassCost {
            bytes: median(costs.iter().map(|c| c.bytes as f64).collect()) as u64,
            seconds: median(costs.iter().map(|c| c.seconds).collect()),
            events: (costs.iter().map(|c| c.events as f64).sum::<f64>() / n).round() as u32,
        };
        if c.bytes > 0 || c.seconds > 0.01 {
            still.push((*t, c));
        }
    }
    Verdict {
        variant: v.name.clone(),
        prewarms: v.prewarms.clone(),
        targets,
        class,
        baseline_targeted_bytes: bb,
        variant_targeted_bytes: vb,
        baseline_targeted_seconds: bs,
        variant_targeted_seconds: vs,
        moved_bytes: moved_b,
        moved_seconds: moved_s,
        setup_cost_s: setup_cost,
        step1_peak_delta: peak_delta,
        step1_s_delta: s1_delta,
        still_in_step1: still,
        evidence,
    }
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
