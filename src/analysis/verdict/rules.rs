//! The class of a verdict from its evidence: rules R0-R9 of docs/verdicts.md
//! §4, in order, each adding its reason.

use super::{
    AttemptCounts, ClassComparison, Confidence, LaterComparison, Moved, Reason, Recommendation,
    Side, Targeted, VerdictClass,
};
use crate::analysis::noise::{Outcome, Quantity, present};
use crate::prewarm::catalog::EventClass;

/// What the rules look at.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    pub targets: &'a [EventClass],
    pub unknown_prewarms: &'a [String],
    pub isolated: bool,
    pub attempts: AttemptCounts,
    pub baseline_failed: u32,
    pub variant_failed: u32,
    /// None when a side has no attempt that reached step 1.
    pub targeted: Option<Targeted>,
    pub by_class: &'a [ClassComparison],
    /// Per targeted class, steps 2..N (R8: work it could have moved, left there).
    pub later_by_class: &'a [LaterComparison],
    /// The memory charged (bytes): the increase of the total the variant holds
    /// outside the pool at step-1 end, when beyond noise; else 0.
    pub held_extra: f64,
    /// Failed items of an injected prescription in the variant's attempt
    /// that failed most (R8: a prescription that did not do what it says is
    /// never WORKS).
    pub prescription_failures: u32,
}

/// The rules' result.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub class: VerdictClass,
    pub confidence: Confidence,
    pub reasons: Vec<Reason>,
    pub recommendation: Option<Recommendation>,
    pub moved: Moved,
}

/// Classes a cache (Triton, inductor, CUDA JIT) changes: judged only on isolated caches.
pub const CACHE_SENSITIVE: [EventClass; 4] = [
    EventClass::Compile,
    EventClass::TritonAutotune,
    EventClass::LocalMemory,
    EventClass::ModuleLoad,
];

/// A left-over below this share of the baseline's is not material (R8).
pub const MATERIAL_SHARE: f64 = 0.10;

/// Attempts per side the recommendation asks for.
pub const RECOMMENDED_REPEAT: u32 = 3;

struct Builder {
    reasons: Vec<Reason>,
    moved: Moved,
    measured: bool,
}

impl Builder {
    fn decide(self, class: VerdictClass) -> Decision {
        Decision {
            class,
            confidence: if self.measured {
                Confidence::Measured
            } else {
                Confidence::Modelled
            },
            reasons: self.reasons,
            recommendation: None,
            moved: self.moved,
        }
    }

    fn inconclusive(self, why: Reason, next: Recommendation) -> Decision {
        self.inconclusive_as(why, Some(next))
    }

    /// Inconclusive with no advice: what would settle it is not running again.
    fn inconclusive_as(mut self, why: Reason, next: Option<Recommendation>) -> Decision {
        self.reasons.push(why);
        Decision {
            class: VerdictClass::Inconclusive,
            confidence: Confidence::Unknown,
            reasons: self.reasons,
            recommendation: next,
            moved: self.moved,
        }
    }
}

fn no_data_side(a: &AttemptCounts, step1: bool) -> Option<Side> {
    let (b, v) = if step1 {
        (a.baseline_step1, a.variant_step1)
    } else {
        (a.baseline, a.variant)
    };
    if b == 0 {
        Some(Side::Baseline)
    } else if v == 0 {
        Some(Side::Variant)
    } else {
        None
    }
}

fn moved_of(t: &Targeted, by_class: &[ClassComparison]) -> Moved {
    let down = |c: &crate::analysis::noise::Change| if c.is_down() { -c.delta } else { 0.0 };
    let (bytes, seconds) = (down(&t.bytes), down(&t.seconds));
    let mut classes: Vec<EventClass> = by_class
        .iter()
        .filter(|k| k.bytes.is_down() || k.seconds.is_down())
        .map(|k| k.class)
        .collect();
    if classes.is_empty() && (bytes > 0.0 || seconds > 0.0) {
        // Only the sum moved beyond noise: the classes that fell, else (the
        // median of sums is not the sum of medians) those the baseline's
        // step 1 has.
        let named = |f: &dyn Fn(&ClassComparison) -> bool| -> Vec<EventClass> {
            by_class.iter().filter(|k| f(k)).map(|k| k.class).collect()
        };
        classes = named(&|k| k.bytes.delta < 0.0 || k.seconds.delta < 0.0);
        if classes.is_empty() {
            classes = named(&|k| k.bytes.baseline.max > 0.0 || k.seconds.baseline.max > 0.0);
        }
    }
    if bytes == 0.0 && seconds == 0.0 {
        classes.clear();
    }
    Moved {
        bytes,
        seconds,
        classes,
    }
}

/// R5: the bytes it keeps beyond what it moved out of step 1, when beyond
/// noise. `held_extra` is 0 unless the total held grew beyond its own noise,
/// so a total within noise is never a net loss.
fn net_memory_loss(held_extra: f64, moved_bytes: f64) -> Option<Reason> {
    let model = Quantity::Bytes.model();
    let noise = model
        .floor
        .max(model.relative * held_extra.max(moved_bytes));
    (held_extra - moved_bytes > noise).then_some(Reason::NetMemoryLoss {
        held_extra,
        moved_bytes,
        noise,
    })
}

/// The share of the baseline's `c` left in the variant when it is material:
/// present beyond noise on both sides and at least [`MATERIAL_SHARE`] of the
/// baseline's.
fn material_left(c: &crate::analysis::noise::Change) -> Option<f64> {
    let (base, left) = (c.baseline.median, c.variant.median);
    (present(c.quantity, c.baseline)
        && present(c.quantity, c.variant)
        && base > 0.0
        && left >= MATERIAL_SHARE * base)
        .then(|| left / base)
}

/// The larger share [`material_left`] finds in a class's bytes or seconds.
fn material_left_of_either(
    bytes: &crate::analysis::noise::Change,
    seconds: &crate::analysis::noise::Change,
) -> Option<f64> {
    [bytes, seconds]
        .into_iter()
        .filter_map(material_left)
        .reduce(f64::max)
}

/// R8 after step 1: per targeted class, work the baseline also has in steps
/// 2..N that the variant still has there (bytes or seconds, beyond noise and
/// material). Work only the variant has there is not the prewarm's to move.
fn left_after_step1(later: &[LaterComparison]) -> Vec<Reason> {
    later
        .iter()
        .filter_map(|k| {
            let share = material_left_of_either(&k.bytes, &k.seconds)?;
            Some(Reason::StillAfterStep1 {
                class: k.class,
                bytes: k.bytes,
                seconds: k.seconds,
                events: k.events,
                share,
                steps: k.variant_steps.clone(),
            })
        })
        .collect()
}

/// R8 per class: each targeted class the baseline has in step 1 must have
/// moved, leaving less than [`MATERIAL_SHARE`] of its bytes and of its
/// seconds there; a class that did not is named, whatever the others moved
/// (a prescription that moved 6 GiB of local memory and its compiles but
/// left 10 of 13 autotune keys in step 1 is not WORKS).
fn classes_left_in_step1(by_class: &[ClassComparison]) -> Vec<Reason> {
    by_class
        .iter()
        .filter_map(|k| {
            let share = material_left_of_either(&k.bytes, &k.seconds)?;
            Some(Reason::ClassStillInStep1 {
                class: k.class,
                bytes: k.bytes,
                seconds: k.seconds,
                events: k.events,
                share,
            })
        })
        .collect()
}

/// R8: a material part left in step 1 (of the targeted total or of one
/// targeted class), a targeted class that rose, or targeted work left in
/// steps 2..N.
fn leftovers(t: &Targeted, by_class: &[ClassComparison], later: &[LaterComparison]) -> Vec<Reason> {
    let mut out = Vec::new();
    for c in [t.bytes, t.seconds] {
        let base = c.baseline.median;
        let left = c.variant.median;
        if present(c.quantity, c.variant) && base > 0.0 && left >= MATERIAL_SHARE * base {
            out.push(Reason::StillInStep1 {
                change: c,
                share: left / base,
            });
        }
    }
    out.extend(classes_left_in_step1(by_class));
    for k in by_class {
        for c in [k.bytes, k.seconds] {
            if c.is_up() {
                out.push(Reason::ClassIncreased {
                    class: k.class,
                    change: c,
                });
            }
        }
    }
    out.extend(left_after_step1(later));
    out
}

/// Classifies a verdict's evidence (docs/verdicts.md §4).
pub fn classify(e: &Evidence) -> Decision {
    let mut d = Builder {
        reasons: e
            .unknown_prewarms
            .iter()
            .map(|n| Reason::UnknownPrewarm { name: n.clone() })
            .collect(),
        moved: Moved::default(),
        measured: e.attempts.baseline_step1 >= 2 && e.attempts.variant_step1 >= 2,
    };
    let repeat = Recommendation::Repeat {
        attempts: RECOMMENDED_REPEAT,
    };
    // R0
    if let Some(side) = no_data_side(&e.attempts, false) {
        return d.inconclusive(Reason::NoUsableAttempts { side }, repeat);
    }
    // R1
    let new_failures = e.variant_failed > 0 && e.baseline_failed == 0;
    if e.baseline_failed > 0 && e.variant_failed == 0 {
        d.reasons.push(Reason::FailuresFixed {
            baseline_failed: e.baseline_failed,
            baseline_attempts: e.attempts.baseline,
        });
    }
    if let Some(t) = &e.targeted {
        d.moved = moved_of(t, e.by_class);
        if d.moved.bytes > 0.0 || d.moved.seconds > 0.0 {
            d.reasons.push(Reason::MovedOut {
                bytes: d.moved.bytes,
                seconds: d.moved.seconds,
            });
        }
    }
    if new_failures {
        d.reasons.push(Reason::NewFailures {
            variant_failed: e.variant_failed,
            variant_attempts: e.attempts.variant,
            baseline_attempts: e.attempts.baseline,
        });
        return d.decide(VerdictClass::Regression);
    }
    // R2: attempts that ran to their end but captured no step 1 (nothing
    // GPU-side, or no optimizer step): running them again captures nothing
    // more, so there is no --repeat advice.
    let Some(t) = e.targeted else {
        let side = no_data_side(&e.attempts, true).unwrap_or(Side::Variant);
        return d.inconclusive_as(Reason::NoUsableAttempts { side }, None);
    };
    // R3
    let cached: Vec<EventClass> = e
        .targets
        .iter()
        .copied()
        .filter(|c| CACHE_SENSITIVE.contains(c))
        .collect();
    if !e.isolated && !cached.is_empty() {
        return d.inconclusive(
            Reason::CachesNotIsolated { classes: cached },
            Recommendation::IsolateCaches,
        );
    }
    // R4, R5
    let before = d.reasons.len();
    for c in [t.bytes, t.seconds] {
        if c.is_up() {
            d.reasons.push(Reason::TargetedIncrease { change: c });
        }
    }
    d.reasons
        .extend(net_memory_loss(e.held_extra, d.moved.bytes));
    if d.reasons.len() > before {
        return d.decide(VerdictClass::Regression);
    }
    // R6
    if t.seconds.outcome == Outcome::Unsure && (!t.bytes.is_down() || t.seconds.delta > 0.0) {
        return d.inconclusive(Reason::NoiseUnknown { change: t.seconds }, repeat);
    }
    // R7
    if !t.bytes.is_down() && !t.seconds.is_down() {
        let anything = present(Quantity::Bytes, t.bytes.baseline)
            || present(Quantity::Seconds, t.seconds.baseline);
        d.reasons.push(if anything {
            Reason::MovedNothing {
                bytes: t.bytes,
                seconds: t.seconds,
            }
        } else {
            Reason::NothingToMove
        });
        return d.decide(VerdictClass::NoEffect);
    }
    // R8, R9
    let mut left = leftovers(&t, e.by_class, e.later_by_class);
    if e.prescription_failures > 0 {
        left.push(Reason::PrescriptionFailed {
            failures: e.prescription_failures,
        });
    }
    let class = if left.is_empty() {
        VerdictClass::Works
    } else {
        VerdictClass::Partial
    };
    d.reasons.extend(left);
    d.decide(class)
}
