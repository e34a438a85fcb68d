//! Gate results in human units: `2.0 GiB > 1.9 GiB`, and for limits written
//! in decimal units (`2GB`) the figures in GB with a note saying so.

use super::verdict_text::class_label;
use super::{bytes, seconds};
use crate::analysis::gate::{
    GateResult, Limit, Metric, MetricKind, NoiseCheck, Observed, Op, RunSide, UnitFamily,
};
use crate::analysis::noise::Basis;

/// Bytes in decimal units: "2.15 GB".
pub fn decimal_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = b.abs();
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    let sign = if b < 0.0 { "-" } else { "" };
    if u == 0 {
        format!("{sign}{v:.0} B")
    } else {
        format!("{sign}{v:.2} {}", UNITS[u])
    }
}

fn signed_binary(b: f64) -> String {
    let sign = if b < 0.0 { "-" } else { "" };
    format!("{sign}{}", bytes(b.abs() as u64))
}

/// A metric's figure in the unit family the limit was written in.
fn figure(metric: Metric, unit: UnitFamily, v: f64) -> String {
    if v.is_infinite() {
        return "unbounded (no out-of-pool request in step 1)".into();
    }
    match metric.kind() {
        MetricKind::Bytes if unit == UnitFamily::Decimal => decimal_bytes(v),
        MetricKind::Bytes => signed_binary(v),
        MetricKind::Seconds => seconds(v),
        MetricKind::Count | MetricKind::Class => format!("{v:.0}"),
    }
}

/// Two figures of a comparison in the same unit, with as many digits as it
/// takes to tell them apart: a gate never reads "2.0 GiB > 2.0 GiB" beside
/// a result that depends on the digits not shown.
fn figures(metric: Metric, unit: UnitFamily, a: f64, b: f64) -> (String, String) {
    let short = (figure(metric, unit, a), figure(metric, unit, b));
    if short.0 != short.1 || a == b || !a.is_finite() || !b.is_finite() {
        return short;
    }
    match metric.kind() {
        MetricKind::Bytes => (exact_bytes(a), exact_bytes(b)),
        MetricKind::Seconds => {
            let digits = (3..=9)
                .find(|d| format!("{a:.d$}", d = *d) != format!("{b:.d$}", d = *d))
                .unwrap_or(9);
            (format!("{a:.digits$} s"), format!("{b:.digits$} s"))
        }
        MetricKind::Count | MetricKind::Class => (format!("{a}"), format!("{b}")),
    }
}

/// A byte count to the byte, grouped: "-2,147,489,792 B" (a median of an
/// even number of attempts may end in .5).
pub fn exact_bytes(v: f64) -> String {
    let whole = v.abs().trunc() as u64;
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if v < 0.0 { "-" } else { "" };
    let half = if v.fract() != 0.0 { ".5" } else { "" };
    format!("{sign}{grouped}{half} B")
}

/// Two percentages, with the digits that tell them apart.
fn percents(a: f64, b: f64) -> (String, String) {
    let short = (percent(a), percent(b));
    if short.0 != short.1 || a == b || !a.is_finite() || !b.is_finite() {
        return short;
    }
    let digits = (2..=9)
        .find(|d| format!("{:+.d$}", a * 100.0, d = *d) != format!("{:+.d$}", b * 100.0, d = *d))
        .unwrap_or(9);
    (
        format!("{:+.digits$}%", a * 100.0),
        format!("{:+.digits$}%", b * 100.0),
    )
}

fn unit_of(limit: &Limit) -> UnitFamily {
    match limit {
        Limit::Absolute { unit, .. } | Limit::Change { unit, .. } => *unit,
        _ => UnitFamily::Plain,
    }
}

fn percent(f: f64) -> String {
    if f.is_infinite() {
        if f > 0.0 { "+inf%" } else { "-inf%" }.into()
    } else {
        format!("{:+.1}%", f * 100.0)
    }
}

/// The relation that holds when `op` does not: what an "ok" line states.
fn negated(op: Op) -> &'static str {
    match op {
        Op::Gt => "<=",
        Op::Ge => "<",
        Op::Lt => ">=",
        Op::Le => ">",
        Op::Eq => "!=",
        Op::Ne => "==",
    }
}

/// The comparison as a true statement: the gate's own relation where it
/// holds ("2.0 GiB > 1.9 GiB", "+12.0% > +5% (1.0 GiB -> 1.1 GiB)",
/// "verdict regression == regression"), its negation where it does not
/// ("1.5 GiB <= 2.0 GiB", "verdict works == works" for `verdict!=works`).
fn comparison(r: &GateResult) -> String {
    let unit = unit_of(&r.limit);
    let op = if r.holds {
        r.op.symbol()
    } else {
        negated(r.op)
    };
    match (&r.observed, &r.limit) {
        (Observed::Value { value }, Limit::Absolute { value: limit, .. }) => {
            let (v, l) = figures(r.metric, unit, *value, *limit);
            format!("{v} {op} {l}")
        }
        (Observed::Change { old, new }, Limit::Relative { fraction }) => {
            let (c, l) = percents(
                crate::analysis::gate::relative_change(*old, *new),
                *fraction,
            );
            let (o, n) = figures(r.metric, unit, *old, *new);
            format!("{c} {op} {l} ({o} -> {n})")
        }
        (Observed::Change { old, new }, Limit::Change { value, .. }) => {
            let change = if old == new { 0.0 } else { new - old };
            let (c, l) = figures(r.metric, unit, change.abs(), value.abs());
            let sign = |v: f64| if v < 0.0 { "-" } else { "+" };
            let (o, n) = figures(r.metric, unit, *old, *new);
            format!("{}{c} {op} {}{l} ({o} -> {n})", sign(change), sign(*value))
        }
        (Observed::Verdict { class }, Limit::Verdict { class: want }) => format!(
            "verdict {} {op} {}",
            class_label(*class),
            class_label(*want)
        ),
        (Observed::NotMeasured { side }, _) => format!(
            "{} has no value in the {} run (no attempt counts, or it was not measured)",
            r.metric.name(),
            side_name(*side)
        ),
        (Observed::OnlyIn { side, allowed }, _) => format!(
            "variant '{}' is only in the {} run{}",
            r.variant,
            side_name(*side),
            if *allowed {
                " (--allow-missing)"
            } else {
                " (pass --allow-missing to accept that)"
            }
        ),
        _ => "not comparable".into(),
    }
}

fn side_name(s: RunSide) -> &'static str {
    match s {
        RunSide::Old => "old",
        RunSide::New => "new",
    }
}

/// What the unit of a limit means, when it could be misread.
fn unit_note(r: &GateResult) -> Option<&'static str> {
    (unit_of(&r.limit) == UnitFamily::Decimal && r.metric.kind() == MetricKind::Bytes)
        .then_some("GB/MB/kB are decimal (10^9/10^6/10^3 bytes); write GiB/MiB/KiB for binary")
}

/// "the noise of the two runs (changes up to 1.2 s: the ranges of their
/// repeats)": the threshold a change's size is compared with
/// (docs/verdicts.md §3), not a ± around a figure.
fn noise_text(r: &GateResult, n: &NoiseCheck) -> String {
    let size = figure(r.metric, unit_of(&r.limit), n.threshold);
    let basis = match n.basis {
        Basis::Measured => "the ranges of their repeats, docs/verdicts.md §3",
        Basis::Model => "one attempt on a side: the noise model of docs/verdicts.md §3",
    };
    format!("the noise of the two runs (changes up to {size}: {basis})")
}

/// One line per result: the gate, the variant, the outcome, the figures,
/// and for a change between two runs whether it is beyond their noise.
pub fn gate_line(r: &GateResult) -> String {
    let mut line = format!(
        "[prewarm-doctor] --fail-if '{}' on '{}': {}: {}",
        r.gate,
        r.variant,
        if r.failed { "FAILED" } else { "ok" },
        comparison(r)
    );
    match (r.holds, r.noise) {
        (true, Some(n)) if n.within && !r.failed => line.push_str(&format!(
            " holds, but within {}; the gate asks for a change beyond noise",
            noise_text(r, &n)
        )),
        (true, Some(n)) if n.within => line.push_str(&format!(
            " — within {} (add 'beyond noise' to the gate to fail only on a larger change)",
            noise_text(r, &n)
        )),
        (true, Some(n)) => line.push_str(&format!(" — beyond {}", noise_text(r, &n))),
        _ => {}
    }
    if let Some(n) = unit_note(r) {
        line.push_str(&format!(" [{n}]"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::gate::{Gate, Runs, evaluate};
    use crate::analysis::stats::Stat;
    use crate::analysis::summary::VariantSummary;

    fn summary(peak: f64) -> VariantSummary {
        VariantSummary {
            name: "v".into(),
            prewarms: vec![],
            attempts: vec![],
            excluded: vec![],
            expected_attempts: 1,
            recorded_attempts: 1,
            failed_attempts: 0,
            step1_device_peak: Stat::of(&[peak]),
            step1_out_of_pool: Stat::of(&[0.0]),
            step1_tightest_headroom: None,
            step1_s: Stat::of(&[1.0]),
            setup_s: Stat::of(&[1.0]),
        }
    }

    fn line(gate: &str, peak: f64) -> String {
        let new = [summary(peak)];
        let runs = Runs {
            new: &new,
            new_matrix: None,
            old: None,
            allow_missing: false,
        };
        gate_line(&evaluate(&[Gate::parse(gate).unwrap()], &runs).unwrap()[0])
    }

    fn timed(times: &[f64]) -> VariantSummary {
        VariantSummary {
            step1_s: Stat::of(times),
            ..summary(1.0)
        }
    }

    fn diff_line(gate: &str, old: &[f64], new: &[f64]) -> String {
        let (old, new) = ([timed(old)], [timed(new)]);
        let runs = Runs {
            new: &new,
            new_matrix: None,
            old: Some(&old),
            allow_missing: false,
        };
        gate_line(&evaluate(&[Gate::parse(gate).unwrap()], &runs).unwrap()[0])
    }

    #[test]
    fn figures_that_print_alike_get_the_digits_that_tell_them_apart() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let over = line("step1_peak>2GiB", 2.0 * gib + 6144.0);
        assert_eq!(
            over,
            "[prewarm-doctor] --fail-if 'step1_peak>2GiB' on 'v': FAILED: 2,147,489,792 B > 2,147,483,648 B"
        );
        let under = line("step1_peak>2GiB", 2.0 * gib - 4096.0);
        assert!(
            under.ends_with("ok: 2,147,479,552 B <= 2,147,483,648 B"),
            "{under}"
        );
        // Exactly equal: the short form is already the whole truth.
        assert!(line("step1_peak>2GiB", 2.0 * gib).ends_with("ok: 2.0 GiB <= 2.0 GiB"));
        assert_eq!(exact_bytes(-1234.5), "-1,234.5 B");
        assert_eq!(
            percents(0.10004, 0.1),
            ("+10.004%".into(), "+10.000%".into())
        );
    }

    #[test]
    fn a_time_change_within_the_noise_of_both_runs_says_so_and_beyond_noise_passes_it() {
        // Repeats spread by seconds: +31% is within their noise.
        let old = [8.0, 10.45, 12.0];
        let new = [11.0, 13.74, 16.0];
        let plain = diff_line("step1_time>+10%", &old, &new);
        assert!(plain.contains("FAILED: +31.5% > +10.0%"), "{plain}");
        assert!(
            plain.contains("within the noise of the two runs"),
            "{plain}"
        );
        let qualified = diff_line("step1_time>+10% beyond noise", &old, &new);
        assert!(qualified.contains(": ok: +31.5% > +10.0%"), "{qualified}");
        assert!(
            qualified.contains("holds, but within the noise"),
            "{qualified}"
        );
        // Tight repeats: the same change is beyond noise and fails either way.
        let tight = diff_line(
            "step1_time>+10% beyond noise",
            &[10.4, 10.45, 10.5],
            &[13.7, 13.74, 13.8],
        );
        assert!(tight.contains("FAILED: +31.5% > +10.0%"), "{tight}");
        assert!(
            tight.contains("beyond the noise of the two runs"),
            "{tight}"
        );
    }

    /// Every line states what is true: a gate that fails, its own relation;
    /// one that passes, the negation of it (never "2.0 GiB > 1.9 GiB" beside
    /// "ok").
    #[test]
    fn a_passing_gate_states_the_relation_that_holds() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        for (gate, peak, relation) in [
            ("step1_peak>2GiB", 1.5, "1.5 GiB <= 2.0 GiB"),
            ("step1_peak>=2GiB", 1.5, "1.5 GiB < 2.0 GiB"),
            ("step1_peak<1GiB", 1.5, "1.5 GiB >= 1.0 GiB"),
            ("step1_peak<=1GiB", 1.5, "1.5 GiB > 1.0 GiB"),
            ("step1_peak==1GiB", 1.5, "1.5 GiB != 1.0 GiB"),
            ("step1_peak!=1.5GiB", 1.5, "1.5 GiB == 1.5 GiB"),
        ] {
            let l = line(gate, peak * gib);
            assert!(l.ends_with(&format!(": ok: {relation}")), "{gate}: {l}");
        }
    }

    /// `step1_headroom` with no out-of-pool request in step 1 is unbounded,
    /// and says so in a sentence that reads right.
    #[test]
    fn an_unbounded_headroom_reads_as_one() {
        let s = VariantSummary {
            step1_tightest_headroom: None,
            step1_out_of_pool: Stat::of(&[0.0]),
            ..summary(1.0)
        };
        let new = [s];
        let runs = Runs {
            new: &new,
            new_matrix: None,
            old: None,
            allow_missing: false,
        };
        let l = gate_line(
            &evaluate(&[Gate::parse("step1_headroom<100GiB").unwrap()], &runs).unwrap()[0],
        );
        assert!(
            l.ends_with(": ok: unbounded (no out-of-pool request in step 1) >= 100.0 GiB"),
            "{l}"
        );
    }

    #[test]
    fn results_print_human_units() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        assert_eq!(
            line("step1_peak>1.9GiB", 2.0 * gib),
            "[prewarm-doctor] --fail-if 'step1_peak>1.9GiB' on 'v': FAILED: 2.0 GiB > 1.9 GiB"
        );
        assert_eq!(
            line("step1_peak>2GiB", 1.5 * gib),
            "[prewarm-doctor] --fail-if 'step1_peak>2GiB' on 'v': ok: 1.5 GiB <= 2.0 GiB"
        );
        let decimal = line("step1_peak>2GB", 2.0 * gib);
        assert!(
            decimal.contains("FAILED: 2.15 GB > 2.00 GB [GB/MB/kB are decimal"),
            "{decimal}"
        );
    }
}
