//! A prewarm's verdict against the baseline, as data (docs/verdicts.md):
//! per targeted class what moved, the costs, the class, a confidence and
//! structured reasons. The report layer phrases it; nothing here is English.

pub mod comms;
pub mod costs;
pub mod judge;
pub mod rules;
#[cfg(test)]
pub(crate) mod tests;

use crate::analysis::noise::Change;
use crate::prewarm::catalog::{self, EventClass};
use costs::Costs;
use serde::Serialize;

/// Which side of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline,
    Variant,
}

/// How a prewarm fared against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    Works,
    Partial,
    NoEffect,
    Regression,
    Inconclusive,
}

impl VerdictClass {
    /// Every class, in the order the docs list them.
    pub const ALL: [VerdictClass; 5] = [
        VerdictClass::Works,
        VerdictClass::Partial,
        VerdictClass::NoEffect,
        VerdictClass::Regression,
        VerdictClass::Inconclusive,
    ];

    /// The machine name (JSON, `--fail-if 'x:verdict==no_effect'`).
    pub fn key(self) -> &'static str {
        match self {
            VerdictClass::Works => "works",
            VerdictClass::Partial => "partial",
            VerdictClass::NoEffect => "no_effect",
            VerdictClass::Regression => "regression",
            VerdictClass::Inconclusive => "inconclusive",
        }
    }

    /// The class with this machine name.
    pub fn from_key(key: &str) -> Option<VerdictClass> {
        Self::ALL.into_iter().find(|c| c.key() == key)
    }
}

/// How much the class can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Repeats on both sides: noise is their measured spread.
    Measured,
    /// One attempt on a side: noise from the documented model.
    Modelled,
    /// The class rests on something not known (inconclusive).
    Unknown,
}

/// What would settle an inconclusive verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "run", rename_all = "snake_case")]
pub enum Recommendation {
    /// Run the matrix again with `--repeat N`.
    Repeat { attempts: u32 },
    /// Run the matrix again with `--cache cold`.
    IsolateCaches,
}

/// Why a verdict has its class: each with the numbers it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reason {
    /// A prewarm the catalog does not know: judged on every class.
    UnknownPrewarm { name: String },
    /// A side has no attempt that counts, or none that reached step 1.
    NoUsableAttempts { side: Side },
    /// Variant attempts failed where no baseline attempt did.
    NewFailures {
        variant_failed: u32,
        variant_attempts: u32,
        baseline_attempts: u32,
    },
    /// Baseline attempts failed and no variant attempt did (evidence only).
    FailuresFixed {
        baseline_failed: u32,
        baseline_attempts: u32,
    },
    /// It moved targeted bytes/seconds out of step 1 (0 for a quantity that did not move).
    MovedOut { bytes: f64, seconds: f64 },
    /// Caches were shared and it targets classes a cache changes.
    CachesNotIsolated { classes: Vec<EventClass> },
    /// More of its own targeted classes in step 1, beyond noise.
    TargetedIncrease { change: Change },
    /// Memory it adds and keeps exceeds the bytes it moved out of step 1.
    NetMemoryLoss {
        held_extra: f64,
        moved_bytes: f64,
        noise: f64,
    },
    /// One attempt, and the seconds the class would rest on lie in the model's grey zone.
    NoiseUnknown { change: Change },
    /// None of its targets is present in the baseline's step 1.
    NothingToMove,
    /// Enabled, but nothing targeted moved beyond noise.
    MovedNothing { bytes: Change, seconds: Change },
    /// A material part of what it targets is left in step 1 (`share` of the baseline's).
    StillInStep1 { change: Change, share: f64 },
    /// Items of the injected prescription failed (a replayed key that tuned
    /// another key than the training's, a kernel not found, a group not
    /// warmed): it did not do all it says (R8).
    PrescriptionFailed { failures: u32 },
    /// One targeted class that the baseline has in step 1 did not move
    /// enough: its step-1 bytes or seconds are still present and at least
    /// [`crate::analysis::verdict::rules::MATERIAL_SHARE`] of the baseline's
    /// (`share`, the larger of the two), whatever the other classes moved
    /// (R8). `events` are that class's (autotune keys, compiles, ...).
    ClassStillInStep1 {
        class: EventClass,
        bytes: Change,
        seconds: Change,
        events: Change,
        share: f64,
    },
    /// One targeted class rose beyond noise while the total fell.
    ClassIncreased { class: EventClass, change: Change },
    /// Work of a targeted class that the baseline also has in steps 2..N is
    /// left there, beyond noise and material (`share` of the baseline's):
    /// the prewarm could have moved it (R8). `events` are the variant's
    /// (autotune keys, compiles, ...), `steps` where they landed.
    StillAfterStep1 {
        class: EventClass,
        bytes: Change,
        seconds: Change,
        events: Change,
        share: f64,
        steps: Vec<u32>,
    },
}

/// One targeted class, baseline vs variant, in step 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassComparison {
    pub class: EventClass,
    pub bytes: Change,
    pub seconds: Change,
    pub events: Change,
}

/// One targeted class, baseline vs variant, in steps 2..N (after step 1),
/// with the steps each side's work landed in (over its attempts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaterComparison {
    pub class: EventClass,
    pub bytes: Change,
    pub seconds: Change,
    pub events: Change,
    pub baseline_steps: Vec<u32>,
    pub variant_steps: Vec<u32>,
}

/// The sums over the targeted classes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Targeted {
    pub bytes: Change,
    pub seconds: Change,
}

/// What it moved out of step 1 (0 where the decrease is within noise).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Moved {
    pub bytes: f64,
    pub seconds: f64,
    /// The targeted classes that moved: those whose step-1 bytes or seconds
    /// went down beyond noise (when only the sum did, those that fell);
    /// never a class with nothing on either side.
    pub classes: Vec<EventClass>,
}

/// Attempts that count on each side (those that reached step 1 give step-1 figures).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AttemptCounts {
    pub baseline: u32,
    pub variant: u32,
    pub baseline_step1: u32,
    pub variant_step1: u32,
}

/// A verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub variant: String,
    pub prewarms: Vec<String>,
    pub targets: Vec<EventClass>,
    pub class: VerdictClass,
    pub confidence: Confidence,
    pub reasons: Vec<Reason>,
    pub recommendation: Option<Recommendation>,
    pub attempts: AttemptCounts,
    /// Per targeted class (empty when a side has no step-1 figures).
    pub by_class: Vec<ClassComparison>,
    /// Per targeted class, steps 2..N (empty when a side has no step-1 figures).
    pub later_by_class: Vec<LaterComparison>,
    pub targeted: Option<Targeted>,
    pub moved: Moved,
    pub costs: Costs,
}

/// The event classes a variant's prewarms target, and the names the catalog
/// does not know (those target every class).
pub fn targets_of(prewarms: &[String]) -> (Vec<EventClass>, Vec<String>) {
    const EVERY: [EventClass; 6] = EventClass::ALL;
    let mut targets = Vec::new();
    let mut unknown = Vec::new();
    for p in prewarms {
        match catalog::find(p) {
            Some(entry) => targets.extend(entry.targets.iter().copied()),
            None => {
                targets.extend(EVERY);
                unknown.push(p.clone());
            }
        }
    }
    targets.sort();
    targets.dedup();
    (targets, unknown)
}
