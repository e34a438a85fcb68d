//! Gate results in human units: `2.0 GiB > 1.9 GiB`, and for limits written
//! in decimal units (`2GB`) the figures in GB with a note saying so.

use super::verdict_text::class_label;
use super::{bytes, seconds};
use crate::analysis::gate::{GateResult, Limit, Metric, MetricKind, Observed, RunSide, UnitFamily};

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
        return "no out-of-pool request in step 1".into();
    }
    match metric.kind() {
        MetricKind::Bytes if unit == UnitFamily::Decimal => decimal_bytes(v),
        MetricKind::Bytes => signed_binary(v),
        MetricKind::Seconds => seconds(v),
        MetricKind::Count | MetricKind::Class => format!("{v:.0}"),
    }
}

fn unit_of(limit: &Limit) -> UnitFamily {
    match limit {
        Limit::Absolute { unit, .. } | Limit::Change { unit, .. } => *unit,
        _ => UnitFamily::Plain,
    }
}

fn change_figure(metric: Metric, unit: UnitFamily, d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    format!("{sign}{}", figure(metric, unit, d.abs()))
}

fn percent(f: f64) -> String {
    if f.is_infinite() {
        if f > 0.0 { "+inf%" } else { "-inf%" }.into()
    } else {
        format!("{:+.1}%", f * 100.0)
    }
}

/// "2.0 GiB > 1.9 GiB", "+12.0% > +5% (1.0 GiB -> 1.1 GiB)", "verdict regression == regression".
fn comparison(r: &GateResult) -> String {
    let unit = unit_of(&r.limit);
    let op = r.op.symbol();
    let f = |v: f64| figure(r.metric, unit, v);
    match (&r.observed, &r.limit) {
        (Observed::Value { value }, Limit::Absolute { value: limit, .. }) => {
            format!("{} {op} {}", f(*value), f(*limit))
        }
        (Observed::Change { old, new }, Limit::Relative { fraction }) => format!(
            "{} {op} {} ({} -> {})",
            percent(crate::analysis::gate::relative_change(*old, *new)),
            percent(*fraction),
            f(*old),
            f(*new)
        ),
        (Observed::Change { old, new }, Limit::Change { value, .. }) => format!(
            "{} {op} {} ({} -> {})",
            change_figure(r.metric, unit, new - old),
            change_figure(r.metric, unit, *value),
            f(*old),
            f(*new)
        ),
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

/// One line per result: the gate, the variant, the outcome, the figures.
pub fn gate_line(r: &GateResult) -> String {
    let mut line = format!(
        "[prewarm-doctor] --fail-if '{}' on '{}': {}: {}",
        r.gate,
        r.variant,
        if r.failed { "FAILED" } else { "ok" },
        comparison(r)
    );
    if !r.failed && matches!(r.observed, Observed::Value { .. } | Observed::Change { .. }) {
        line.push_str(" does not hold");
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
    use crate::analysis::matrix::{Stat, VariantSummary};

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

    #[test]
    fn results_print_human_units() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        assert_eq!(
            line("step1_peak>1.9GiB", 2.0 * gib),
            "[prewarm-doctor] --fail-if 'step1_peak>1.9GiB' on 'v': FAILED: 2.0 GiB > 1.9 GiB"
        );
        assert_eq!(
            line("step1_peak>2GiB", 1.5 * gib),
            "[prewarm-doctor] --fail-if 'step1_peak>2GiB' on 'v': ok: 1.5 GiB > 2.0 GiB does not hold"
        );
        let decimal = line("step1_peak>2GB", 2.0 * gib);
        assert!(
            decimal.contains("FAILED: 2.15 GB > 2.00 GB [GB/MB/kB are decimal"),
            "{decimal}"
        );
    }
}
