//! Judging one prewarm variant against the baseline: compares the targeted
//! classes' step-1 and later costs over the attempts that reached step 1,
//! gathers the costs, and hands the evidence to the rules (`rules.rs`)
//! for a [`Verdict`].

use super::costs::costs;
use super::rules::{Evidence, classify};
use super::{AttemptCounts, ClassComparison, LaterComparison, Targeted, Verdict, targets_of};
use crate::analysis::account::ClassCost;
use crate::analysis::noise::{Quantity, assess};
use crate::analysis::stats::Stat;
use crate::analysis::summary::{Headline, VariantSummary};
use crate::prewarm::catalog::EventClass;

/// Attempts that reached step 1.
fn in_step1(s: &VariantSummary) -> Vec<&Headline> {
    s.attempts.iter().filter(|h| h.reached_step1).collect()
}

fn class_stat(hs: &[&Headline], f: impl Fn(&Headline) -> f64) -> Stat {
    Stat::of(&hs.iter().map(|h| f(h)).collect::<Vec<_>>()).expect("at least one attempt")
}

fn compare_class(b: &[&Headline], v: &[&Headline], class: EventClass) -> ClassComparison {
    let get = |h: &Headline| h.step1_by_class.get(&class).copied().unwrap_or_default();
    let change = |q, f: &dyn Fn(&Headline) -> f64| assess(q, class_stat(b, f), class_stat(v, f));
    ClassComparison {
        class,
        bytes: change(Quantity::Bytes, &|h| get(h).bytes as f64),
        seconds: change(Quantity::Seconds, &|h| get(h).seconds),
        events: change(Quantity::Events, &|h| get(h).events as f64),
    }
}

fn compare_later(b: &[&Headline], v: &[&Headline], class: EventClass) -> LaterComparison {
    let get = |h: &Headline| h.later_by_class.get(&class).cloned().unwrap_or_default();
    let change = |q, f: &dyn Fn(&Headline) -> f64| assess(q, class_stat(b, f), class_stat(v, f));
    let steps = |hs: &[&Headline]| {
        let mut s: Vec<u32> = hs.iter().flat_map(|h| get(h).steps).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    LaterComparison {
        class,
        bytes: change(Quantity::Bytes, &|h| get(h).bytes as f64),
        seconds: change(Quantity::Seconds, &|h| get(h).seconds),
        events: change(Quantity::Events, &|h| get(h).events as f64),
        baseline_steps: steps(b),
        variant_steps: steps(v),
    }
}

fn targeted_totals(b: &[&Headline], v: &[&Headline], targets: &[EventClass]) -> Targeted {
    let sum = |h: &Headline, f: &dyn Fn(&ClassCost) -> f64| {
        targets
            .iter()
            .filter_map(|t| h.step1_by_class.get(t))
            .map(f)
            .sum::<f64>()
    };
    let bytes = |h: &Headline| sum(h, &|c| c.bytes as f64);
    let seconds = |h: &Headline| sum(h, &|c| c.seconds);
    Targeted {
        bytes: assess(Quantity::Bytes, class_stat(b, bytes), class_stat(v, bytes)),
        seconds: assess(
            Quantity::Seconds,
            class_stat(b, seconds),
            class_stat(v, seconds),
        ),
    }
}

/// Judges one prewarm variant against the baseline.
pub fn judge(base: &VariantSummary, v: &VariantSummary, isolated: bool) -> Verdict {
    let (targets, unknown) = targets_of(&v.prewarms);
    let (b1, v1) = (in_step1(base), in_step1(v));
    let have_step1 = !b1.is_empty() && !v1.is_empty();
    let by_class: Vec<ClassComparison> = if have_step1 {
        targets
            .iter()
            .map(|t| compare_class(&b1, &v1, *t))
            .collect()
    } else {
        Vec::new()
    };
    let later_by_class: Vec<LaterComparison> = if have_step1 {
        targets
            .iter()
            .map(|t| compare_later(&b1, &v1, *t))
            .collect()
    } else {
        Vec::new()
    };
    let targeted = have_step1.then(|| targeted_totals(&b1, &v1, &targets));
    let costs = costs(base, v);
    let attempts = AttemptCounts {
        baseline: base.attempts.len() as u32,
        variant: v.attempts.len() as u32,
        baseline_step1: b1.len() as u32,
        variant_step1: v1.len() as u32,
    };
    let evidence = Evidence {
        targets: &targets,
        unknown_prewarms: &unknown,
        isolated,
        attempts,
        baseline_failed: base.failed_attempts,
        variant_failed: v.failed_attempts,
        targeted,
        by_class: &by_class,
        later_by_class: &later_by_class,
        held_extra: costs.held_extra,
        prescription_failures: v
            .attempts
            .iter()
            .map(|h| h.prescription_failures)
            .max()
            .unwrap_or(0),
    };
    let decision = classify(&evidence);
    Verdict {
        variant: v.name.clone(),
        prewarms: v.prewarms.clone(),
        targets,
        class: decision.class,
        confidence: decision.confidence,
        reasons: decision.reasons,
        recommendation: decision.recommendation,
        attempts,
        by_class,
        later_by_class,
        targeted,
        moved: decision.moved,
        costs,
    }
}
