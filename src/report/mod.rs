//! Outputs: each format renders the analysis account to bytes; none prints.

pub mod csv_out;
pub mod diff;
pub mod escape;
pub mod json;
pub mod markdown;
pub mod matrix;
pub mod terminal;

/// Human-readable byte counts (binary units).
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Signed byte counts.
pub fn signed_bytes(b: i64) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs()))
    } else {
        bytes(b as u64)
    }
}

/// Seconds with sensible precision.
pub fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1000.0)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(signed_bytes(-(1 << 20)), "-1.0 MiB");
        assert_eq!(seconds(0.0123), "12.3 ms");
        assert_eq!(seconds(12.345), "12.35 s");
    }
}
