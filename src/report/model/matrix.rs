//! The matrix's view: each variant's row, what each prewarm moved and
//! cost, and the wording of its costs.

use crate::analysis::noise::Quantity;
use crate::analysis::stats::Stat;
use crate::analysis::summary::VariantSummary;
use crate::analysis::verdict::Verdict;
use crate::report::verdict_text;
use crate::report::{bytes, seconds};
use serde::Serialize;

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
    /// Shown by its label (`EventClass::label`).
    pub class: crate::prewarm::catalog::EventClass,
    pub bytes: u64,
    pub seconds: f64,
    pub events: u32,
}

/// A prewarm's verdict against the baseline, with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictView {
    pub variant: String,
    pub prewarms: Vec<String>,
    /// The verdict's class (its key and label: `VerdictClass::key`, `label`).
    pub class: crate::analysis::verdict::VerdictClass,
    /// Class as shown ("works", "no effect", ...).
    pub label: String,
    /// Labels of the event classes it targets.
    pub targets: Vec<String>,
    pub moved_bytes: f64,
    pub moved_seconds: f64,
    /// Whether what it moved was measured (both sides have step-1 figures);
    /// else `moved_bytes` and `moved_seconds` are 0 for want of a figure,
    /// and the words say it cannot be judged. Charts read it; the JSON has
    /// the verdict's own figures.
    #[serde(skip)]
    pub moved_known: bool,
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
pub(super) fn verdict_view(v: &Verdict) -> VerdictView {
    let targeted = v.targeted.as_ref();
    VerdictView {
        variant: v.variant.clone(),
        prewarms: v.prewarms.clone(),
        class: v.class,
        label: verdict_text::class_label(v.class).to_string(),
        targets: v.targets.iter().map(|t| t.label().to_string()).collect(),
        moved_bytes: v.moved.bytes,
        moved_seconds: v.moved.seconds,
        moved_known: v.targeted.is_some(),
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
                class: c.class,
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

pub(super) fn variant_row(v: &VariantSummary, baseline: &str) -> VariantRow {
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
