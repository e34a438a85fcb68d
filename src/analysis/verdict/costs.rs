//! What a prewarm costs, whatever its class (docs/verdicts.md §2): setup
//! time, memory held at step-1 end that the baseline did not hold (by source),
//! communicators, and as context the step-1 time and device peak.

use crate::analysis::noise::{Change, Quantity, assess};
use crate::analysis::stats::Stat;
use crate::analysis::summary::{Headline, HeldPart, HeldSource, VariantSummary};
use serde::Serialize;
use std::collections::BTreeMap;

/// One source's share of the change of the total held at step-1 end: an
/// explanation of [`Costs::held_total_step1_end`], never judged on its own
/// (bytes that move from one source to another between runs are no cost).
/// Taken on each side from the attempt(s) whose total is the median (the two
/// middle ones averaged), so the shares add up to the total's change exactly.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldCost {
    pub source: HeldSource,
    pub inferred: bool,
    pub baseline: f64,
    pub variant: f64,
    /// variant − baseline.
    pub delta: f64,
}

/// What a prewarm costs; shown next to its class, whatever the class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costs {
    /// Setup wall time, baseline vs variant.
    pub setup_s: Option<Change>,
    /// The judged memory quantity: what the variant holds outside the pool at
    /// step-1 end (device used − pool), against the baseline, with its noise
    /// (None: a side has no step-1 account).
    pub held_total_step1_end: Option<Change>,
    /// Per source, how the total's change splits (explanation only; None with
    /// the total).
    pub held_step1_end: Option<Vec<HeldCost>>,
    /// The memory cost charged: the total's increase when it is beyond noise,
    /// else 0. Never more than the total's change.
    pub held_extra: f64,
    /// The PyTorch pool's reserve at step-1 end (gives cached blocks back; not in `held_extra`).
    pub pool_reserved_step1_end: Option<Change>,
    /// NCCL communicators created in any phase.
    pub nccl_communicators: Option<Change>,
    /// Step-1 wall time: context only (includes classes the prewarm does not target).
    pub step1_s: Option<Change>,
    /// Step-1 device peak: context only.
    pub step1_device_peak: Option<Change>,
}

/// Shares of the total's change up to this are not worth naming: two device
/// pages, what sampling moves between sources in runs holding the same bytes.
pub const EXPLAIN_MIN_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

impl Costs {
    /// The sources whose share of the total's change is worth naming,
    /// largest change first (ups and downs).
    pub fn held_explained(&self) -> Vec<&HeldCost> {
        let mut out: Vec<&HeldCost> = self
            .held_step1_end
            .iter()
            .flatten()
            .filter(|h| h.delta.abs() > EXPLAIN_MIN_BYTES)
            .collect();
        out.sort_by(|a, b| b.delta.abs().total_cmp(&a.delta.abs()));
        out
    }
}

fn change_of(
    q: Quantity,
    base: &[Headline],
    variant: &[Headline],
    f: impl Fn(&Headline) -> Option<f64>,
) -> Option<Change> {
    let stat = |hs: &[Headline]| Stat::of(&hs.iter().filter_map(&f).collect::<Vec<_>>());
    Some(assess(q, stat(base)?, stat(variant)?))
}

/// The total of one attempt's step-1-end parts.
fn total_of(parts: &[HeldPart]) -> f64 {
    parts.iter().map(|p| p.bytes as f64).sum()
}

/// Per source, the bytes of the median-total attempt (odd count) or the
/// average of the two middle ones (even): their sum is the median total.
fn median_parts(side: &[&[HeldPart]]) -> BTreeMap<HeldSource, (f64, bool)> {
    let mut sorted: Vec<&[HeldPart]> = side.to_vec();
    sorted.sort_by(|a, b| total_of(a).total_cmp(&total_of(b)));
    let n = sorted.len();
    let middle: &[&[HeldPart]] = if n % 2 == 1 {
        &sorted[n / 2..n / 2 + 1]
    } else {
        &sorted[n / 2 - 1..n / 2 + 1]
    };
    let mut out: BTreeMap<HeldSource, (f64, bool)> = BTreeMap::new();
    for parts in middle {
        for p in parts.iter() {
            let e = out.entry(p.source.clone()).or_insert((0.0, true));
            e.0 += p.bytes as f64 / middle.len() as f64;
            e.1 &= p.inferred;
        }
    }
    out
}

fn refs(side: &[Vec<HeldPart>]) -> Vec<&[HeldPart]> {
    side.iter().map(|p| p.as_slice()).collect()
}

/// The total held at step-1 end, judged, and its split by source.
pub fn held(base: &[Headline], variant: &[Headline]) -> Option<(Change, Vec<HeldCost>)> {
    let with = |hs: &[Headline]| -> Vec<Vec<HeldPart>> {
        hs.iter().filter_map(|h| h.held_step1_end.clone()).collect()
    };
    let (b, v) = (with(base), with(variant));
    let totals =
        |side: &[Vec<HeldPart>]| Stat::of(&side.iter().map(|p| total_of(p)).collect::<Vec<_>>());
    let total = assess(Quantity::DeviceBytes, totals(&b)?, totals(&v)?);
    let (mb, mv) = (median_parts(&refs(&b)), median_parts(&refs(&v)));
    let mut sources: Vec<&HeldSource> = mb.keys().chain(mv.keys()).collect();
    sources.sort();
    sources.dedup();
    let split = sources
        .into_iter()
        .map(|s| {
            let (bb, bi) = mb.get(s).copied().unwrap_or((0.0, true));
            let (vb, vi) = mv.get(s).copied().unwrap_or((0.0, true));
            HeldCost {
                source: s.clone(),
                inferred: bi && vi,
                baseline: bb,
                variant: vb,
                delta: vb - bb,
            }
        })
        .collect();
    Some((total, split))
}

/// The costs of `v` against `base`.
pub fn costs(base: &VariantSummary, v: &VariantSummary) -> Costs {
    let (b, w) = (&base.attempts[..], &v.attempts[..]);
    let (total, split) = held(b, w).unzip();
    let held_extra = total.filter(|t| t.is_up()).map_or(0.0, |t| t.delta);
    Costs {
        setup_s: change_of(Quantity::Seconds, b, w, |h| h.setup_s),
        held_total_step1_end: total,
        held_step1_end: split,
        held_extra,
        pool_reserved_step1_end: change_of(Quantity::Bytes, b, w, |h| {
            h.pool_reserved_step1_end.map(|x| x as f64)
        }),
        nccl_communicators: change_of(Quantity::Events, b, w, |h| Some(h.nccl_comms as f64)),
        step1_s: change_of(Quantity::Seconds, b, w, |h| h.step1_s),
        step1_device_peak: change_of(Quantity::Bytes, b, w, |h| {
            h.step1_device_peak.map(|x| x as f64)
        }),
    }
}
