//! The A/B comparison: the variants' summaries (`summary.rs`), notes a
//! reader must know, per prewarm a verdict (`verdict/judge.rs`) and per
//! process group a communicator verdict (`verdict/comms.rs`). Data only: the
//! report layer phrases it.

use super::AttemptAccount;
use super::summary::{VariantSummary, summarise_variants, variant_order};
use super::verdict;
use super::verdict::Verdict;
use crate::run_folder::meta::RunMeta;
use serde::Serialize;

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
    /// Communicator prewarms' verdicts per process group (verdict/comms.rs).
    pub comm_groups: Vec<super::verdict::comms::CommVerdict>,
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
    m.comm_groups = super::verdict::comms::comm_verdicts(&m.baseline, &m.variants, attempts);
    Some(m)
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
        .map(|v| verdict::judge::judge(&base, v, isolated))
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
