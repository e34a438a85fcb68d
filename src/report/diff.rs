//! `diff` output: the same variants in two runs, side by side, with changes.

use super::{bytes, seconds, signed_bytes};
use crate::analysis::matrix::{MatrixAccount, Stat, VariantSummary};
use serde::Serialize;
use std::fmt::Write;

fn med(s: Option<Stat>) -> Option<f64> {
    s.map(|x| x.median)
}

fn pct(old: f64, new: f64) -> String {
    if old.abs() < 1e-12 {
        if new.abs() < 1e-12 {
            "±0%".into()
        } else {
            "new".into()
        }
    } else {
        format!("{:+.1}%", (new - old) / old.abs() * 100.0)
    }
}

fn row(
    o: &mut String,
    label: &str,
    old: Option<f64>,
    new: Option<f64>,
    fmt: &dyn Fn(f64) -> String,
) {
    let show = |v: Option<f64>| v.map(fmt).unwrap_or_else(|| "-".into());
    let change = match (old, new) {
        (Some(a), Some(b)) => pct(a, b),
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "     {:<20} {:>14} -> {:<14} {}",
        label,
        show(old),
        show(new),
        change
    );
}

/// Human-readable comparison.
pub fn render_text(
    old: &[VariantSummary],
    new: &[VariantSummary],
    old_m: Option<&MatrixAccount>,
    new_m: Option<&MatrixAccount>,
) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "== prewarm-doctor diff (old -> new, medians over repeats)"
    );
    let b = |v: f64| bytes(v.max(0.0) as u64);
    let sb = |v: f64| signed_bytes(v as i64);
    for n in new {
        let Some(p) = old.iter().find(|x| x.name == n.name) else {
            let _ = writeln!(o, "   {}: only in the new run", n.name);
            continue;
        };
        let _ = writeln!(
            o,
            "   {} ({} -> {} attempts)",
            n.name,
            p.attempts.len(),
            n.attempts.len()
        );
        row(
            &mut o,
            "step-1 device peak",
            med(p.step1_device_peak),
            med(n.step1_device_peak),
            &b,
        );
        row(
            &mut o,
            "step-1 out-of-pool",
            med(p.step1_out_of_pool),
            med(n.step1_out_of_pool),
            &b,
        );
        row(
            &mut o,
            "step-1 tightest",
            med(p.step1_tightest_headroom),
            med(n.step1_tightest_headroom),
            &sb,
        );
        row(
            &mut o,
            "step-1 time",
            med(p.step1_s),
            med(n.step1_s),
            &seconds,
        );
        row(
            &mut o,
            "setup time",
            med(p.setup_s),
            med(n.setup_s),
            &seconds,
        );
        let verdict = |m: Option<&MatrixAccount>| {
            m.and_then(|m| m.verdicts.iter().find(|v| v.variant == n.name))
                .map(|v| super::verdict_text::class_label(v.class))
        };
        if let (Some(a), Some(c)) = (verdict(old_m), verdict(new_m)) {
            let _ = writeln!(
                o,
                "     {:<20} {:>14} -> {:<14}{}",
                "verdict",
                a,
                c,
                if a != c { " CHANGED" } else { "" }
            );
        }
    }
    for p in old.iter().filter(|p| !new.iter().any(|n| n.name == p.name)) {
        let _ = writeln!(o, "   {}: only in the old run", p.name);
    }
    o
}

#[derive(Serialize)]
struct DiffDoc<'a> {
    schema_version: u32,
    tool: &'static str,
    old_run: &'a str,
    new_run: &'a str,
    old: &'a [VariantSummary],
    new: &'a [VariantSummary],
    old_matrix: Option<&'a MatrixAccount>,
    new_matrix: Option<&'a MatrixAccount>,
}

/// Machine-readable comparison (same schema version as `report --format json`).
pub fn render_json(
    old_run: &str,
    new_run: &str,
    old: &[VariantSummary],
    new: &[VariantSummary],
    old_m: Option<&MatrixAccount>,
    new_m: Option<&MatrixAccount>,
) -> Vec<u8> {
    let doc = DiffDoc {
        schema_version: super::json::SCHEMA_VERSION,
        tool: "prewarm-doctor",
        old_run,
        new_run,
        old,
        new,
        old_matrix: old_m,
        new_matrix: new_m,
    };
    let mut v = serde_json::to_vec_pretty(&doc).expect("serialises");
    v.push(b'\n');
    v
}
