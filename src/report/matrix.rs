//! The terminal rendering of a variant comparison (at most 100 columns): one
//! table of medians and spreads, the excluded attempts, then per prewarm its
//! headline, class and evidence (phrased by `verdict_text`).

use super::verdict_text::{class_line, evidence_lines, exclusion_text, headline, note_text, wrap};
use super::{seconds, signed_bytes};
use crate::analysis::matrix::{MatrixAccount, Stat};
use std::fmt::Write;

/// Widest line the matrix writes.
pub const WIDTH: usize = 100;

const BYTE_UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];

/// "968.3 MiB ±12.5": the spread in the median's unit.
fn fmt_bytes_stat(s: Option<Stat>) -> String {
    let Some(s) = s else { return "?".into() };
    let mut unit = 0;
    let mut scale = 1.0;
    while s.median.abs() >= scale * 1024.0 && unit < BYTE_UNITS.len() - 1 {
        scale *= 1024.0;
        unit += 1;
    }
    let median = if unit == 0 {
        format!("{:.0} B", s.median)
    } else {
        format!("{:.1} {}", s.median / scale, BYTE_UNITS[unit])
    };
    spread_suffix(median, s, |half| {
        if unit == 0 {
            format!("{half:.0}")
        } else {
            format!("{:.1}", half / scale)
        }
    })
}

/// "10.45 s ±1.56" / "791.8 ms ±18.8".
fn fmt_secs_stat(s: Option<Stat>) -> String {
    let Some(s) = s else { return "?".into() };
    spread_suffix(seconds(s.median), s, |half| {
        if s.median >= 100.0 {
            format!("{half:.0}")
        } else if s.median >= 1.0 {
            format!("{half:.2}")
        } else {
            format!("{:.1}", half * 1000.0)
        }
    })
}

fn spread_suffix(median: String, s: Stat, half: impl Fn(f64) -> String) -> String {
    if s.n < 2 {
        return median;
    }
    let h = s.spread() / 2.0;
    if h == 0.0 {
        format!("{median} ±0")
    } else {
        format!("{median} ±{}", half(h))
    }
}

fn fmt_signed_stat(s: Option<Stat>) -> String {
    s.map_or("-".into(), |s| signed_bytes(s.median as i64))
}

fn table(o: &mut String, m: &MatrixAccount) {
    let _ = writeln!(
        o,
        "   {:<15} {:>5} {:>15} {:>15} {:>10} {:>14} {:>14}",
        "variant", "runs", "step-1 peak", "step-1 oop", "tightest", "step-1 time", "setup time"
    );
    for v in &m.variants {
        let runs = format!("{}/{}", v.attempts.len(), v.expected_attempts);
        let _ = writeln!(
            o,
            "   {:<15} {:>5} {:>15} {:>15} {:>10} {:>14} {:>14}",
            v.name,
            runs,
            fmt_bytes_stat(v.step1_device_peak),
            fmt_bytes_stat(v.step1_out_of_pool),
            fmt_signed_stat(v.step1_tightest_headroom),
            fmt_secs_stat(v.step1_s),
            fmt_secs_stat(v.setup_s)
        );
    }
}

fn lines(o: &mut String, text: &str, first: &str, rest: &str) {
    for l in wrap(text, first, rest, WIDTH) {
        let _ = writeln!(o, "{l}");
    }
}

/// Renders the comparison table, exclusions, notes and verdicts.
pub fn render_matrix(m: &MatrixAccount) -> String {
    let mut o = String::new();
    let title = format!(
        "== prewarm-doctor: {} variants, baseline '{}', cache '{}'{}",
        m.variants.len(),
        m.baseline,
        m.cache,
        if m.isolated {
            " (each variant on its own caches)"
        } else {
            " (NOT isolated)"
        }
    );
    lines(&mut o, &title, "", "   ");
    table(&mut o, m);
    for v in &m.variants {
        for e in &v.excluded {
            let why: Vec<String> = e.reasons.iter().map(exclusion_text).collect();
            let text = format!("{}/{}: {}", v.name, e.attempt, why.join("; "));
            lines(&mut o, &text, "   excluded: ", "     ");
        }
    }
    for n in &m.notes {
        lines(&mut o, &note_text(n), "   note: ", "     ");
    }
    if !m.verdicts.is_empty() {
        let _ = writeln!(
            o,
            "-- verdicts (each prewarm against '{}'; rules: docs/verdicts.md)",
            m.baseline
        );
    }
    for v in &m.verdicts {
        let first = format!("   {} [{}]: ", v.variant, v.prewarms.join(", "));
        lines(&mut o, &headline(v), &first, "     ");
        lines(&mut o, &class_line(v), "     => ", "        ");
        for e in evidence_lines(v) {
            lines(&mut o, &e, "     - ", "       ");
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_compact() {
        let s = Stat::of(&[968.3 * 1048576.0, 968.3 * 1048576.0]);
        assert_eq!(fmt_bytes_stat(s), "968.3 MiB ±0");
        assert_eq!(fmt_secs_stat(Stat::of(&[8.89, 12.01])), "10.45 s ±1.56");
        assert_eq!(fmt_secs_stat(Stat::of(&[0.773, 0.8106])), "791.8 ms ±18.8");
        assert_eq!(fmt_secs_stat(Stat::of(&[4.0])), "4.00 s");
        assert_eq!(fmt_bytes_stat(Stat::of(&[512.0, 514.0])), "513 B ±1");
    }
}
