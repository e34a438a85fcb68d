//! The spread across ranks and the ranks missing from a run folder, in
//! words, for every format.

use super::figures::seconds;
use crate::units::bytes;

/// One line of the rank spread: figure, the rank it belongs to, its value,
/// and the skew across ranks, formatted for any renderer.
pub struct SpreadLine {
    pub label: &'static str,
    pub owner: String,
    pub value: String,
    pub skew: String,
}

/// The worst rank and skew for each figure the spread holds.
pub fn spread_lines(s: &crate::analysis::ranks::RankSpread) -> Vec<SpreadLine> {
    let mut out = Vec::new();
    let mut push = |label, owner: Option<String>, value: Option<String>, skew: Option<String>| {
        if let (Some(owner), Some(value), Some(skew)) = (owner, value, skew) {
            out.push(SpreadLine {
                label,
                owner,
                value,
                skew,
            });
        }
    };
    let peak = s.worst_step1_peak.as_ref();
    push(
        "worst step-1 peak",
        peak.map(|w| w.owner()),
        peak.map(|w| bytes(w.value)),
        s.step1_peak_skew.map(bytes),
    );
    let oop = s.worst_step1_out_of_pool.as_ref();
    push(
        "most step-1 out-of-pool",
        oop.map(|w| w.owner()),
        oop.map(|w| bytes(w.value)),
        s.step1_out_of_pool_skew.map(bytes),
    );
    let slow = s.slowest_step1.as_ref();
    push(
        "slowest step 1",
        slow.map(|w| w.owner()),
        slow.map(|w| seconds(w.value)),
        s.step1_skew_s.map(seconds),
    );
    out
}

/// The ranks of the world with no capture here, and the likely reason.
pub fn missing_ranks_line(s: &crate::analysis::ranks::RankSpread) -> Option<String> {
    if s.missing_ranks.is_empty() {
        return None;
    }
    Some(format!(
        "missing: rank(s) {} of world size {} have no capture in this run folder (their node's doctor wrote elsewhere: `--out` must be on a filesystem every node shares; or it never started)",
        crate::analysis::ranks::rank_ranges(&s.missing_ranks),
        s.world_size.unwrap_or(0)
    ))
}
