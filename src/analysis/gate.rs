//! CI gating: `--fail-if` expressions evaluated on a run (absolute) or on a
//! `diff` (the second run relative to the first). Grammar (docs/gating.md):
//!
//! ```text
//! [VARIANT:]METRIC OP VALUE
//! METRIC  step1_peak | step1_oop | step1_time | setup_time | step1_headroom | failed | verdict
//! OP      > >= < <= == !=
//! VALUE   number with unit (0, 512MiB, 2GiB, 1.5s, 300ms), relative change (+5%, -10%),
//!         absolute change (+256MiB, +0.5s), or for verdict: works | partial | no_effect | regression
//! ```

use super::matrix::{MatrixAccount, Stat, VariantSummary};
use serde::Serialize;

/// A malformed `--fail-if` expression; the message shows the expected form.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GateError {
    #[error(
        "--fail-if '{0}': expected [VARIANT:]METRIC OP VALUE, e.g. 'step1_peak>+5%' or 'cublas:verdict!=works'"
    )]
    Form(String),
    #[error(
        "--fail-if '{expr}': unknown metric '{metric}' (known: step1_peak, step1_oop, step1_time, setup_time, step1_headroom, failed, verdict)"
    )]
    Metric { expr: String, metric: String },
    #[error("--fail-if '{expr}': cannot read the value '{value}' ({why})")]
    Value {
        expr: String,
        value: String,
        why: String,
    },
    #[error(
        "--fail-if '{0}': relative and change values (+5%, +256MiB) need two runs: use `prewarm-doctor diff OLD NEW --fail-if ...`"
    )]
    NeedsDiff(String),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Metric {
    Step1Peak,
    Step1Oop,
    Step1Time,
    SetupTime,
    Step1Headroom,
    Failed,
    Verdict,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Absolute(f64),
    Relative(f64),
    Change(f64),
    Verdict(String),
}

/// A parsed `--fail-if` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub text: String,
    variant: Option<String>,
    metric: Metric,
    op: Op,
    value: Value,
}

fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "s" => 1.0,
        "kib" | "kb" => 1024.0,
        "mib" | "mb" => 1024.0 * 1024.0,
        "gib" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "ms" => 1e-3,
        _ => return None,
    };
    Some(n * factor)
}

impl Gate {
    /// Parses one expression.
    pub fn parse(expr: &str) -> Result<Gate, GateError> {
        let text = expr.trim().to_string();
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let (pos, op_text, op) = ops
            .iter()
            .filter_map(|(t, o)| text.find(t).map(|p| (p, *t, *o)))
            .min_by_key(|x| (x.0, std::cmp::Reverse(x.1.len())))
            .ok_or_else(|| GateError::Form(text.clone()))?;
        let (lhs, rhs) = (text[..pos].trim(), text[pos + op_text.len()..].trim());
        if lhs.is_empty() || rhs.is_empty() {
            return Err(GateError::Form(text));
        }
        let (variant, metric_name) = match lhs.rsplit_once(':') {
            Some((v, m)) => (Some(v.trim().to_string()), m.trim()),
            None => (None, lhs),
        };
        let metric = match metric_name {
            "step1_peak" => Metric::Step1Peak,
            "step1_oop" => Metric::Step1Oop,
            "step1_time" => Metric::Step1Time,
            "setup_time" => Metric::SetupTime,
            "step1_headroom" => Metric::Step1Headroom,
            "failed" => Metric::Failed,
            "verdict" => Metric::Verdict,
            other => {
                return Err(GateError::Metric {
                    expr: text.clone(),
                    metric: other.to_string(),
                });
            }
        };
        let bad = |why: &str| GateError::Value {
            expr: text.clone(),
            value: rhs.to_string(),
            why: why.to_string(),
        };
        let value = if metric == Metric::Verdict {
            if !matches!(op, Op::Eq | Op::Ne) {
                return Err(bad("verdicts compare with == or != only"));
            }
            match rhs {
                "works" | "partial" | "no_effect" | "regression" => Value::Verdict(rhs.to_string()),
                _ => return Err(bad("expected works, partial, no_effect or regression")),
            }
        } else if let Some(pct) = rhs.strip_suffix('%') {
            Value::Relative(
                pct.trim()
                    .parse::<f64>()
                    .map_err(|_| bad("not a percentage"))?
                    / 100.0,
            )
        } else if rhs.starts_with('+') || (rhs.starts_with('-') && metric != Metric::Step1Headroom)
        {
            Value::Change(parse_quantity(rhs).ok_or_else(|| bad("not a number with a known unit"))?)
        } else {
            Value::Absolute(
                parse_quantity(rhs).ok_or_else(|| {
                    bad("not a number with a known unit (B, KiB, MiB, GiB, s, ms)")
                })?,
            )
        };
        Ok(Gate {
            text,
            variant,
            metric,
            op,
            value,
        })
    }

    /// True when the gate compares two runs.
    pub fn needs_diff(&self) -> bool {
        matches!(self.value, Value::Relative(_) | Value::Change(_))
    }
}

/// One gate evaluated on one variant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GateResult {
    pub gate: String,
    pub variant: String,
    pub value: Option<f64>,
    pub reference: Option<f64>,
    pub failed: bool,
    pub detail: String,
}

fn metric_value(v: &VariantSummary, m: Metric) -> Option<f64> {
    let med = |s: &Option<Stat>| s.map(|x| x.median);
    match m {
        Metric::Step1Peak => med(&v.step1_device_peak),
        Metric::Step1Oop => med(&v.step1_out_of_pool),
        Metric::Step1Time => med(&v.step1_s),
        Metric::SetupTime => med(&v.setup_s),
        Metric::Step1Headroom => med(&v.step1_tightest_headroom),
        Metric::Failed => Some(v.failed_attempts as f64),
        Metric::Verdict => None,
    }
}

fn compare(op: Op, a: f64, b: f64) -> bool {
    match op {
        Op::Gt => a > b,
        Op::Ge => a >= b,
        Op::Lt => a < b,
        Op::Le => a <= b,
        Op::Eq => (a - b).abs() < 1e-9,
        Op::Ne => (a - b).abs() >= 1e-9,
    }
}

/// Evaluates gates on `new`, relative to `old` where a gate needs it.
pub fn evaluate(
    gates: &[Gate],
    new: &[VariantSummary],
    new_matrix: Option<&MatrixAccount>,
    old: Option<&[VariantSummary]>,
) -> Result<Vec<GateResult>, GateError> {
    let mut out = Vec::new();
    for g in gates {
        if g.needs_diff() && old.is_none() {
            return Err(GateError::NeedsDiff(g.text.clone()));
        }
        for v in new
            .iter()
            .filter(|v| g.variant.as_ref().is_none_or(|n| n == &v.name))
        {
            if g.metric == Metric::Verdict {
                let verdict =
                    new_matrix.and_then(|m| m.verdicts.iter().find(|x| x.variant == v.name));
                let Some(verdict) = verdict else { continue };
                let name = format!("{:?}", verdict.class)
                    .to_ascii_lowercase()
                    .replace("noeffect", "no_effect");
                let Value::Verdict(want) = &g.value else {
                    continue;
                };
                let failed = (name == *want) == (g.op == Op::Eq);
                out.push(GateResult {
                    gate: g.text.clone(),
                    variant: v.name.clone(),
                    value: None,
                    reference: None,
                    failed,
                    detail: format!("verdict is {name}"),
                });
                continue;
            }
            let value = metric_value(v, g.metric);
            let reference = old
                .and_then(|o| o.iter().find(|x| x.name == v.name))
                .and_then(|x| metric_value(x, g.metric));
            let (failed, detail) = match (&g.value, value, reference) {
                (Value::Absolute(limit), Some(val), _) => (
                    compare(g.op, val, *limit),
                    format!("{val:.4} vs limit {limit:.4}"),
                ),
                (Value::Relative(r), Some(val), Some(reference)) => {
                    let change = if reference.abs() < 1e-12 {
                        if val.abs() < 1e-12 {
                            0.0
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        (val - reference) / reference.abs()
                    };
                    (
                        compare(g.op, change, *r),
                        format!("{:+.2}% ({val:.4} vs {reference:.4})", change * 100.0),
                    )
                }
                (Value::Change(d), Some(val), Some(reference)) => {
                    let change = val - reference;
                    (
                        compare(g.op, change, *d),
                        format!("change {change:+.4} vs limit {d:+.4}"),
                    )
                }
                (_, None, _) => (false, "no value in this run (not measured)".into()),
                (_, _, None) => (false, "no such variant or value in the first run".into()),
                _ => (false, "not comparable".into()),
            };
            out.push(GateResult {
                gate: g.text.clone(),
                variant: v.name.clone(),
                value,
                reference,
                failed,
                detail,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let g = Gate::parse("step1_peak>+5%").unwrap();
        assert_eq!(
            (g.metric, g.op, g.value.clone()),
            (Metric::Step1Peak, Op::Gt, Value::Relative(0.05))
        );
        assert!(g.needs_diff());
        let g = Gate::parse("step1_oop>0").unwrap();
        assert_eq!(g.value, Value::Absolute(0.0));
        let g = Gate::parse("cublas:verdict!=works").unwrap();
        assert_eq!(g.variant.as_deref(), Some("cublas"));
        assert_eq!(g.op, Op::Ne);
        assert_eq!(
            Gate::parse("step1_time >= 1.5s").unwrap().value,
            Value::Absolute(1.5)
        );
        assert_eq!(
            Gate::parse("setup_time>+300ms").unwrap().value,
            Value::Change(0.3)
        );
        assert_eq!(
            Gate::parse("step1_oop<=512MiB").unwrap().value,
            Value::Absolute(512.0 * 1024.0 * 1024.0)
        );
        assert_eq!(
            Gate::parse("step1_headroom<-1GiB").unwrap().value,
            Value::Absolute(-1024.0 * 1024.0 * 1024.0)
        );
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        assert!(matches!(Gate::parse("step1_peak"), Err(GateError::Form(_))));
        assert!(matches!(
            Gate::parse("peak>1"),
            Err(GateError::Metric { .. })
        ));
        assert!(matches!(
            Gate::parse("step1_oop>lots"),
            Err(GateError::Value { .. })
        ));
        assert!(matches!(
            Gate::parse("verdict>works"),
            Err(GateError::Value { .. })
        ));
        let msg = Gate::parse("peak>1").unwrap_err().to_string();
        assert!(msg.contains("known: step1_peak"));
    }
}
