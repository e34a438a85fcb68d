//! The terminal rendering of a variant comparison: one table of medians and
//! spreads, then one verdict per prewarm with its evidence.

use super::{bytes, seconds, signed_bytes};
use crate::analysis::matrix::{MatrixAccount, Stat};
use std::fmt::Write;

fn fmt_bytes_stat(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ±{}",
            bytes(s.median.max(0.0) as u64),
            bytes((s.spread() / 2.0) as u64)
        ),
        Some(s) => bytes(s.median.max(0.0) as u64),
        None => "?".into(),
    }
}

fn fmt_signed_stat(s: Option<Stat>) -> String {
    match s {
        Some(s) => signed_bytes(s.median as i64),
        None => "-".into(),
    }
}

fn fmt_secs_stat(s: Option<Stat>) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} ±{}", seconds(s.median), seconds(s.spread() / 2.0)),
        Some(s) => seconds(s.median),
        None => "?".into(),
    }
}

/// Renders the comparison table and verdicts.
pub fn render_matrix(m: &MatrixAccount) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "== prewarm-doctor: {} variants, cache mode '{}'{}, baseline '{}'",
        m.variants.len(),
        m.cache,
        if m.isolated {
            " (each variant on its own caches)"
        } else {
            " (NOT isolated)"
        },
        m.baseline
    );
    let _ = writeln!(
        o,
        "   {:<18} {:>5} {:>20} {:>20} {:>14} {:>18} {:>16}",
        "variant",
        "runs",
        "step-1 device peak",
        "step-1 out-of-pool",
        "step-1 tightest",
        "step-1 time",
        "setup time"
    );
    for v in &m.variants {
        let runs = format!("{}/{}", v.attempts.len(), v.expected_attempts);
        let _ = writeln!(
            o,
            "   {:<18} {:>5} {:>20} {:>20} {:>14} {:>18} {:>16}",
            v.name,
            runs,
            fmt_bytes_stat(v.step1_device_peak),
            fmt_bytes_stat(v.step1_out_of_pool),
            fmt_signed_stat(v.step1_tightest_headroom),
            fmt_secs_stat(v.step1_s),
            fmt_secs_stat(v.setup_s)
        );
    }
    for n in &m.notes {
        let _ = writeln!(o, "   note: {n}");
    }
    if !m.verdicts.is_empty() {
        let _ = writeln!(o, "-- verdicts (each prewarm against '{}')", m.baseline);
    }
    for v in &m.verdicts {
        let _ = writeln!(
            o,
            "   {} [{}]: {}",
            v.variant,
            v.prewarms.join(", "),
            v.class.label().to_uppercase()
        );
        for e in &v.evidence {
            let _ = writeln!(o, "     - {e}");
        }
        if !v.still_in_step1.is_empty() {
            let parts: Vec<String> = v
                .still_in_step1
                .iter()
                .map(|(c, cost)| {
                    let mut s = c.label().to_string();
                    if cost.bytes > 0 {
                        s += &format!(" {}", bytes(cost.bytes));
                    }
                    if cost.seconds > 0.0 {
                        s += &format!(" {}", seconds(cost.seconds));
                    }
                    s
                })
                .collect();
            let _ = writeln!(o, "     - still in step 1: {}", parts.join(", "));
        }
    }
    o
}
