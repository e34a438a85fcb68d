//! What a prewarm costs, whatever its class (docs/verdicts.md §2): setup
//! time, memory held at step-1 end that the baseline did not hold (by source),
//! communicators, and as context the step-1 time and device peak.

use super::matrix::{Headline, Stat, VariantSummary};
use super::model::{GapAccount, GapPart};
use super::noise::{Change, Quantity, assess};
use serde::Serialize;
use std::collections::BTreeMap;

/// What holds a part of the out-of-pool memory at step-1 end.
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
    /// lazily (inferred from the readings around loads) plus the account's
    /// unexplained remainder. One bucket, because where the timing windows
    /// split the two differs between runs holding the same bytes.
    WithoutRecords,
    /// Live allocations of one library (`nccl`, `cublas`, `torch (outside pool)`, ...).
    Library(String),
}

impl HeldSource {
    /// The source of one named part of the account (process.rs names them).
    pub fn of_part(name: &str) -> HeldSource {
        if name.starts_with("CUDA context") {
            HeldSource::Context
        } else if name.starts_with("local-memory growth") {
            HeldSource::LocalMemory
        } else if name.starts_with("local-memory reservation dropped") {
            HeldSource::LocalMemoryDropped
        } else if name.starts_with("NCCL init without allocation calls")
            || name.starts_with("module code (lazy loading)")
        {
            HeldSource::WithoutRecords
        } else {
            HeldSource::Library(name.to_string())
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
/// out-of-pool total.
pub fn held_parts(gap: &GapAccount) -> Vec<HeldPart> {
    let remainder = GapPart {
        name: String::new(),
        bytes: gap.unexplained,
        inferred: true,
    };
    let mut by: BTreeMap<HeldSource, HeldPart> = BTreeMap::new();
    for p in gap.parts.iter().chain([&remainder]) {
        let source = if p.name.is_empty() {
            HeldSource::WithoutRecords
        } else {
            HeldSource::of_part(&p.name)
        };
        let e = by.entry(source.clone()).or_insert(HeldPart {
            source,
            bytes: 0,
            inferred: p.inferred,
        });
        e.bytes += p.bytes;
        e.inferred &= p.inferred;
    }
    by.into_values().collect()
}

/// One source, baseline vs variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldCost {
    pub source: HeldSource,
    pub change: Change,
}

/// What a prewarm costs; shown next to its class, whatever the class.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costs {
    /// Setup wall time, baseline vs variant.
    pub setup_s: Option<Change>,
    /// Every source either side holds at step-1 end (None: no account on a side).
    pub held_step1_end: Option<Vec<HeldCost>>,
    /// Sum of the increases beyond noise in `held_step1_end`: memory the
    /// variant holds at step-1 end that the baseline did not.
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

impl Costs {
    /// The held sources whose increase counts, largest first.
    pub fn held_increases(&self) -> Vec<&HeldCost> {
        let mut up: Vec<&HeldCost> = self
            .held_step1_end
            .iter()
            .flatten()
            .filter(|h| h.change.is_up())
            .collect();
        up.sort_by(|a, b| b.change.delta.total_cmp(&a.change.delta));
        up
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

/// Per source, baseline vs variant, over the attempts that have a step-1 account.
fn held(base: &[Headline], variant: &[Headline]) -> Option<Vec<HeldCost>> {
    let with = |hs: &[Headline]| -> Vec<Vec<HeldPart>> {
        hs.iter().filter_map(|h| h.held_step1_end.clone()).collect()
    };
    let (b, v) = (with(base), with(variant));
    if b.is_empty() || v.is_empty() {
        return None;
    }
    let mut sources: BTreeMap<HeldSource, bool> = BTreeMap::new();
    for p in b.iter().chain(&v).flatten() {
        *sources.entry(p.source.clone()).or_insert(true) &= p.inferred;
    }
    let stat = |side: &[Vec<HeldPart>], s: &HeldSource| {
        let values: Vec<f64> = side
            .iter()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| &p.source == s)
                    .map(|p| p.bytes as f64)
                    .sum()
            })
            .collect();
        Stat::of(&values).expect("one value per attempt")
    };
    Some(
        sources
            .into_iter()
            .map(|(s, inferred)| {
                let q = if inferred {
                    Quantity::InferredBytes
                } else {
                    Quantity::Bytes
                };
                HeldCost {
                    change: assess(q, stat(&b, &s), stat(&v, &s)),
                    source: s,
                }
            })
            .collect(),
    )
}

/// The costs of `v` against `base`.
pub fn costs(base: &VariantSummary, v: &VariantSummary) -> Costs {
    let (b, w) = (&base.attempts[..], &v.attempts[..]);
    let held = held(b, w);
    let held_extra = held
        .iter()
        .flatten()
        .filter(|h| h.change.is_up())
        .map(|h| h.change.delta)
        .sum();
    Costs {
        setup_s: change_of(Quantity::Seconds, b, w, |h| h.setup_s),
        held_step1_end: held,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn part(name: &str, bytes: i64, inferred: bool) -> GapPart {
        GapPart {
            name: name.into(),
            bytes,
            inferred,
        }
    }

    #[test]
    fn account_parts_map_to_stable_sources() {
        let parts = vec![
            part(
                "CUDA context (incl. 148.5 MiB initial local memory)",
                10,
                false,
            ),
            part("nccl", 20, false),
            part("cublas", 30, false),
            part("local-memory growth (spills)", 40, false),
            part(
                "local-memory reservation dropped by the failed launch",
                -5,
                false,
            ),
            part("NCCL init without allocation calls (kernel code)", 50, true),
        ];
        let gap = GapAccount {
            at_s: 0.0,
            device_used: 0,
            pool_reserved: 0,
            out_of_pool: 0,
            parts,
            unexplained: 7,
        };
        let held = held_parts(&gap);
        let find = |s: HeldSource| held.iter().find(|h| h.source == s).unwrap().bytes;
        assert_eq!(find(HeldSource::Context), 10);
        assert_eq!(find(HeldSource::Library("nccl".into())), 20);
        assert_eq!(find(HeldSource::LocalMemory), 40);
        assert_eq!(find(HeldSource::LocalMemoryDropped), -5);
        assert_eq!(
            find(HeldSource::WithoutRecords),
            57,
            "inferred + unexplained"
        );
        assert!(
            held.iter()
                .find(|h| h.source == HeldSource::WithoutRecords)
                .unwrap()
                .inferred
        );
        let total: i64 = held.iter().map(|h| h.bytes).sum();
        assert_eq!(total, 10 + 20 + 30 + 40 - 5 + 50 + 7);
        // The context's name carries a number; it still maps to one source.
        assert_eq!(
            HeldSource::of_part(
                "CUDA context (incl. 0 B initial local memory, 2.0 MiB of it committed at the first kernel launch)"
            ),
            HeldSource::Context
        );
    }
}
