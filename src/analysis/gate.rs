//! CI gating: `--fail-if` expressions evaluated on a run (absolute) or on a
//! `diff` (the second run relative to the first). Grammar (docs/gating.md):
//!
//! ```text
//! [VARIANT|PREWARM:]METRIC OP VALUE [beyond noise]
//! METRIC  step1_peak | step1_oop | step1_time | setup_time | step1_headroom | failed | verdict
//! OP      > >= < <= == !=
//! VALUE   number with unit (0, 512MiB, 2GiB, 2GB, 1.5s, 300ms), relative change (+5%, -10%),
//!         absolute change (+256MiB, +0.5s), or for verdict: works | partial | no_effect |
//!         regression | inconclusive
//! ```
//!
//! `beyond noise` (changes only) fails a gate only when the change is also
//! larger than the noise of the two runs (their repeats' spread, or the
//! documented model with one attempt: docs/verdicts.md §3).
//!
//! A gate that names a variant, prewarm or metric the run does not have is an
//! error, never a pass. Results are data; `report::gate_text` phrases them.

use super::matrix::MatrixAccount;
use super::stats::Stat;
use super::summary::VariantSummary;
use super::verdict::VerdictClass;
use serde::Serialize;

/// A `--fail-if` expression that cannot be evaluated; the message names the fix.
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
    #[error(
        "--fail-if '{expr}': the change '{value}' has no unit: write '{value}%' for a relative change, or {examples} for an absolute one"
    )]
    UnitlessChange {
        expr: String,
        value: String,
        examples: String,
    },
    #[error(
        "--fail-if '{0}': 'beyond noise' qualifies a change (+5%, +256MiB, +0.5s) between two runs, not an absolute limit or a verdict"
    )]
    NoiseNeedsChange(String),
    #[error(
        "--fail-if '{expr}': no variant or prewarm named '{name}' in {where_} (variants: {}; prewarms: {})",
        list(.variants), list(.prewarms)
    )]
    UnknownName {
        expr: String,
        name: String,
        where_: &'static str,
        variants: Vec<String>,
        prewarms: Vec<String>,
    },
    #[error(
        "--fail-if '{expr}': variant '{variant}' has no verdict (it is the baseline or enables no known prewarm); variants with a verdict: {}",
        list(.judged)
    )]
    NoVerdict {
        expr: String,
        variant: String,
        judged: Vec<String>,
    },
    #[error(
        "--fail-if '{0}': this run has no verdicts (it has one variant, or no variant enables a known prewarm)"
    )]
    NoVerdicts(String),
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// What a gate measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Step1Peak,
    Step1Oop,
    Step1Time,
    SetupTime,
    Step1Headroom,
    Failed,
    Verdict,
}

/// The kind of number a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    Bytes,
    Seconds,
    Count,
    Class,
}

impl Metric {
    const NAMES: [(&'static str, Metric); 7] = [
        ("step1_peak", Metric::Step1Peak),
        ("step1_oop", Metric::Step1Oop),
        ("step1_time", Metric::Step1Time),
        ("setup_time", Metric::SetupTime),
        ("step1_headroom", Metric::Step1Headroom),
        ("failed", Metric::Failed),
        ("verdict", Metric::Verdict),
    ];

    /// The name written in a gate.
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, m)| *m == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// The kind of its values.
    pub fn kind(self) -> MetricKind {
        match self {
            Metric::Step1Peak | Metric::Step1Oop | Metric::Step1Headroom => MetricKind::Bytes,
            Metric::Step1Time | Metric::SetupTime => MetricKind::Seconds,
            Metric::Failed => MetricKind::Count,
            Metric::Verdict => MetricKind::Class,
        }
    }
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl Op {
    /// As written.
    pub fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => (a - b).abs() < 1e-9,
            Op::Ne => (a - b).abs() >= 1e-9,
        }
    }
}

/// The unit family a limit was written in, so results echo it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitFamily {
    /// No unit: bytes, seconds or a count as the metric has it.
    Plain,
    /// kB, MB, GB, TB: powers of 1000.
    Decimal,
    /// KiB, MiB, GiB, TiB: powers of 1024.
    Binary,
    /// s, ms.
    Seconds,
}

/// The right-hand side of a gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limit {
    Absolute { value: f64, unit: UnitFamily },
    Relative { fraction: f64 },
    Change { value: f64, unit: UnitFamily },
    Verdict { class: VerdictClass },
}

/// A parsed `--fail-if` expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    pub text: String,
    /// A variant or prewarm name, if the gate names one.
    pub name: Option<String>,
    pub metric: Metric,
    pub op: Op,
    pub limit: Limit,
    /// `... beyond noise`: fail only when the change is also larger than
    /// the noise of the two runs.
    pub beyond_noise: bool,
}

/// "2GiB" -> (2·2^30, Binary), "2GB" -> (2·10^9, Decimal), "300ms" -> (0.3, Seconds).
fn parse_quantity(s: &str) -> Option<(f64, UnitFamily)> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.trim().parse().ok()?;
    if !n.is_finite() {
        return None;
    }
    let (factor, family) = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => (1.0, UnitFamily::Plain),
        "kb" => (1e3, UnitFamily::Decimal),
        "mb" => (1e6, UnitFamily::Decimal),
        "gb" => (1e9, UnitFamily::Decimal),
        "tb" => (1e12, UnitFamily::Decimal),
        "kib" => (1024.0, UnitFamily::Binary),
        "mib" => (1024.0 * 1024.0, UnitFamily::Binary),
        "gib" => (1024.0 * 1024.0 * 1024.0, UnitFamily::Binary),
        "tib" => (1024.0f64.powi(4), UnitFamily::Binary),
        "s" => (1.0, UnitFamily::Seconds),
        "ms" => (1e-3, UnitFamily::Seconds),
        _ => return None,
    };
    Some((n * factor, family))
}

/// Whether a unit family fits a metric ("1.5s" is no byte limit).
fn unit_fits(kind: MetricKind, unit: UnitFamily) -> Result<(), &'static str> {
    match (kind, unit) {
        (_, UnitFamily::Plain) => Ok(()),
        (MetricKind::Bytes, UnitFamily::Decimal | UnitFamily::Binary) => Ok(()),
        (MetricKind::Seconds, UnitFamily::Seconds) => Ok(()),
        (MetricKind::Bytes, _) => {
            Err("a byte limit takes B, kB/MB/GB (decimal) or KiB/MiB/GiB (binary)")
        }
        (MetricKind::Seconds, _) => Err("a time limit takes s or ms"),
        _ => Err("a count takes a plain number"),
    }
}

fn split_op(text: &str) -> Option<(&str, Op, &str)> {
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
        .min_by_key(|x| (x.0, std::cmp::Reverse(x.1.len())))?;
    let (lhs, rhs) = (text[..pos].trim(), text[pos + op_text.len()..].trim());
    (!lhs.is_empty() && !rhs.is_empty()).then_some((lhs, op, rhs))
}

impl Gate {
    /// Parses one expression.
    pub fn parse(expr: &str) -> Result<Gate, GateError> {
        let text = expr.trim().to_string();
        let (lhs, op, rhs) = split_op(&text).ok_or_else(|| GateError::Form(text.clone()))?;
        let (rhs, beyond_noise) = match strip_noise(rhs) {
            Some(r) => (r, true),
            None => (rhs, false),
        };
        let (name, metric_name) = match lhs.rsplit_once(':') {
            Some((v, m)) => (Some(v.trim().to_string()), m.trim()),
            None => (None, lhs),
        };
        if name.as_deref() == Some("") {
            return Err(GateError::Form(text));
        }
        let metric = Metric::NAMES
            .iter()
            .find(|(n, _)| *n == metric_name)
            .map(|(_, m)| *m)
            .ok_or_else(|| GateError::Metric {
                expr: text.clone(),
                metric: metric_name.to_string(),
            })?;
        let limit = parse_limit(&text, metric, op, rhs)?;
        if beyond_noise && !matches!(limit, Limit::Relative { .. } | Limit::Change { .. }) {
            return Err(GateError::NoiseNeedsChange(text));
        }
        Ok(Gate {
            text,
            name,
            metric,
            op,
            limit,
            beyond_noise,
        })
    }

    /// True when the gate compares two runs.
    pub fn needs_diff(&self) -> bool {
        matches!(self.limit, Limit::Relative { .. } | Limit::Change { .. })
    }
}

/// The value without its `beyond noise` qualifier, if it has one.
fn strip_noise(rhs: &str) -> Option<&str> {
    const QUALIFIER: &str = "beyond noise";
    let n = rhs.len().checked_sub(QUALIFIER.len())?;
    (rhs.is_char_boundary(n) && rhs[n..].eq_ignore_ascii_case(QUALIFIER))
        .then(|| rhs[..n].trim_end())
        .filter(|r| !r.is_empty())
}

fn parse_limit(text: &str, metric: Metric, op: Op, rhs: &str) -> Result<Limit, GateError> {
    let bad = |why: &str| GateError::Value {
        expr: text.to_string(),
        value: rhs.to_string(),
        why: why.to_string(),
    };
    if metric == Metric::Verdict {
        if !matches!(op, Op::Eq | Op::Ne) {
            return Err(bad("verdicts compare with == or != only"));
        }
        return VerdictClass::from_key(rhs)
            .map(|class| Limit::Verdict { class })
            .ok_or_else(|| bad("expected works, partial, no_effect, regression or inconclusive"));
    }
    if let Some(pct) = rhs.strip_suffix('%') {
        let p: f64 = pct.trim().parse().map_err(|_| bad("not a percentage"))?;
        return Ok(Limit::Relative {
            fraction: p / 100.0,
        });
    }
    let (value, unit) = parse_quantity(rhs).ok_or_else(|| {
        bad("not a number with a known unit (B, kB, MB, GB, KiB, MiB, GiB, s, ms)")
    })?;
    unit_fits(metric.kind(), unit).map_err(bad)?;
    let change = rhs.starts_with('+') || (rhs.starts_with('-') && metric != Metric::Step1Headroom);
    // `step1_peak>+5` reads as five bytes, which nobody means: a change of
    // bytes or seconds names its unit (or is a percentage).
    let measured = matches!(metric.kind(), MetricKind::Bytes | MetricKind::Seconds);
    if change && measured && unit == UnitFamily::Plain && value != 0.0 {
        let number = rhs.trim();
        let examples = match metric.kind() {
            MetricKind::Seconds => format!("'{number}s' or '{number}ms'"),
            _ => format!("'{number}MiB' or '{number}GiB'"),
        };
        return Err(GateError::UnitlessChange {
            expr: text.to_string(),
            value: number.to_string(),
            examples,
        });
    }
    Ok(if change {
        Limit::Change { value, unit }
    } else {
        Limit::Absolute { value, unit }
    })
}

/// Which run of a `diff` (a plain `report` is the new run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunSide {
    Old,
    New,
}

/// What a gate found for one variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Observed {
    /// The metric's median in the (new) run; +inf headroom: no out-of-pool request in step 1.
    Value { value: f64 },
    /// Old and new medians (relative and change gates).
    Change { old: f64, new: f64 },
    /// The variant's verdict class.
    Verdict { class: VerdictClass },
    /// The variant has no value for the metric on that side (no attempt counts, or not measured).
    NotMeasured { side: RunSide },
    /// The variant exists on one side of a diff only.
    OnlyIn { side: RunSide, allowed: bool },
}

/// One gate evaluated on one variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateResult {
    pub gate: String,
    pub variant: String,
    pub metric: Metric,
    pub op: Op,
    pub limit: Limit,
    pub observed: Observed,
    pub failed: bool,
    /// Whether the comparison itself holds; differs from `failed` only for a
    /// `beyond noise` gate whose change is within the noise.
    pub holds: bool,
    /// For a change between two runs: how it compares with their noise.
    pub noise: Option<NoiseCheck>,
}

/// A change between two runs against the noise of both (their repeats'
/// spread, or the documented model with one attempt on a side).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NoiseCheck {
    /// What the change had to exceed to count, in the metric's unit (with one
    /// attempt on a side, the top of the model's grey zone).
    pub threshold: f64,
    /// Whether the change is no larger than the threshold (or in the model's
    /// grey zone): it may be noise.
    pub within: bool,
    pub basis: super::noise::Basis,
}

/// The noise quantity of a metric.
fn quantity(m: Metric) -> super::noise::Quantity {
    use super::noise::Quantity;
    match m.kind() {
        MetricKind::Seconds => Quantity::Seconds,
        MetricKind::Count | MetricKind::Class => Quantity::Events,
        MetricKind::Bytes => Quantity::Bytes,
    }
}

fn metric_stat(v: &VariantSummary, m: Metric) -> Option<Stat> {
    match m {
        Metric::Step1Peak => v.step1_device_peak,
        Metric::Step1Oop => v.step1_out_of_pool,
        Metric::Step1Time => v.step1_s,
        Metric::SetupTime => v.setup_s,
        Metric::Step1Headroom => v.step1_tightest_headroom,
        Metric::Failed | Metric::Verdict => None,
    }
}

/// How the change of `m` from `old` to `new` compares with the noise of both.
pub fn noise_check(m: Metric, old: &VariantSummary, new: &VariantSummary) -> Option<NoiseCheck> {
    use super::noise::{Outcome, assess};
    let c = assess(quantity(m), metric_stat(old, m)?, metric_stat(new, m)?);
    Some(NoiseCheck {
        threshold: c.beyond(),
        within: matches!(c.outcome, Outcome::Within | Outcome::Unsure),
        basis: c.basis,
    })
}

fn metric_value(v: &VariantSummary, m: Metric) -> Option<f64> {
    let med = |s: &Option<Stat>| s.map(|x| x.median);
    match m {
        Metric::Step1Peak => med(&v.step1_device_peak),
        Metric::Step1Oop => med(&v.step1_out_of_pool),
        Metric::Step1Time => med(&v.step1_s),
        Metric::SetupTime => med(&v.setup_s),
        // No out-of-pool request in step 1 leaves all of the device free.
        Metric::Step1Headroom => med(&v.step1_tightest_headroom).or_else(|| {
            med(&v.step1_out_of_pool)
                .filter(|oop| *oop == 0.0)
                .map(|_| f64::INFINITY)
        }),
        Metric::Failed => (!v.attempts.is_empty()).then_some(v.failed_attempts as f64),
        Metric::Verdict => None,
    }
}

/// The runs a gate is evaluated on.
pub struct Runs<'a> {
    pub new: &'a [VariantSummary],
    pub new_matrix: Option<&'a MatrixAccount>,
    /// The reference run of a `diff`.
    pub old: Option<&'a [VariantSummary]>,
    /// `diff --allow-missing`: a variant on one side only passes.
    pub allow_missing: bool,
}

impl Runs<'_> {
    fn all(&self) -> impl Iterator<Item = &VariantSummary> {
        self.new.iter().chain(self.old.into_iter().flatten())
    }

    /// Variant names, new run first, each once.
    fn variant_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for v in self.all() {
            if !names.contains(&v.name) {
                names.push(v.name.clone());
            }
        }
        names
    }

    fn prewarm_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.all().flat_map(|v| v.prewarms.clone()).collect();
        names.sort();
        names.dedup();
        names
    }

    fn judged(&self) -> Vec<String> {
        self.new_matrix
            .map(|m| m.verdicts.iter().map(|v| v.variant.clone()).collect())
            .unwrap_or_default()
    }
}

/// The variants a gate applies to (an unknown name is an error).
fn resolve(g: &Gate, runs: &Runs) -> Result<Vec<String>, GateError> {
    let names = runs.variant_names();
    let chosen: Vec<String> = match &g.name {
        None => names.clone(),
        Some(n) if names.contains(n) => vec![n.clone()],
        Some(n) => names
            .iter()
            .filter(|v| runs.all().any(|s| &s.name == *v && s.prewarms.contains(n)))
            .cloned()
            .collect(),
    };
    if chosen.is_empty() {
        return Err(GateError::UnknownName {
            expr: g.text.clone(),
            name: g.name.clone().unwrap_or_default(),
            where_: if runs.old.is_some() {
                "either run"
            } else {
                "this run"
            },
            variants: names,
            prewarms: runs.prewarm_names(),
        });
    }
    if g.metric != Metric::Verdict {
        return Ok(chosen);
    }
    let judged = runs.judged();
    if judged.is_empty() {
        return Err(GateError::NoVerdicts(g.text.clone()));
    }
    let in_new = |v: &String| runs.new.iter().any(|s| &s.name == v);
    if g.name.is_some() {
        if let Some(v) = chosen.iter().find(|v| in_new(v) && !judged.contains(v)) {
            return Err(GateError::NoVerdict {
                expr: g.text.clone(),
                variant: v.clone(),
                judged,
            });
        }
        return Ok(chosen);
    }
    // Every judged variant, and those a diff has in the old run only (they fail as missing).
    Ok(chosen
        .into_iter()
        .filter(|v| judged.contains(v) || !in_new(v))
        .collect())
}

/// Observed figure and whether the gate fails, for a variant present on the sides it needs.
fn observe(
    g: &Gate,
    new: &VariantSummary,
    old: Option<&VariantSummary>,
    runs: &Runs,
) -> (Observed, bool) {
    if let Limit::Verdict { class: want } = g.limit {
        let class = runs
            .new_matrix
            .and_then(|m| m.verdicts.iter().find(|x| x.variant == new.name))
            .map(|v| v.class)
            .expect("resolve() keeps judged variants only");
        return (
            Observed::Verdict { class },
            (class == want) == (g.op == Op::Eq),
        );
    }
    let Some(value) = metric_value(new, g.metric) else {
        return (Observed::NotMeasured { side: RunSide::New }, true);
    };
    let reference = old.map(|o| metric_value(o, g.metric));
    match (&g.limit, reference) {
        (Limit::Absolute { value: limit, .. }, _) => {
            (Observed::Value { value }, g.op.holds(value, *limit))
        }
        (_, Some(None)) | (_, None) => (Observed::NotMeasured { side: RunSide::Old }, true),
        (limit, Some(Some(old))) => {
            let change = match limit {
                Limit::Relative { .. } => relative_change(old, value),
                _ if old == value => 0.0,
                _ => value - old,
            };
            let bound = match limit {
                Limit::Relative { fraction } => *fraction,
                Limit::Change { value, .. } => *value,
                _ => unreachable!("absolute and verdict limits handled above"),
            };
            (
                Observed::Change { old, new: value },
                g.op.holds(change, bound),
            )
        }
    }
}

/// (new − old) / |old|; 0 for no change, +inf from nothing to something.
pub fn relative_change(old: f64, new: f64) -> f64 {
    if old == new {
        0.0
    } else if old.abs() < 1e-12 || old.is_infinite() || new.is_infinite() {
        if new > old {
            f64::INFINITY
        } else {
            f64::NEG_INFINITY
        }
    } else {
        (new - old) / old.abs()
    }
}

/// Evaluates every gate on every variant it applies to.
pub fn evaluate(gates: &[Gate], runs: &Runs) -> Result<Vec<GateResult>, GateError> {
    let mut out = Vec::new();
    for g in gates {
        if g.needs_diff() && runs.old.is_none() {
            return Err(GateError::NeedsDiff(g.text.clone()));
        }
        for name in resolve(g, runs)? {
            let new = runs.new.iter().find(|v| v.name == name);
            let old = runs.old.map(|o| o.iter().find(|v| v.name == name));
            let (observed, mut failed) = match (new, old) {
                (Some(n), Some(Some(o))) => observe(g, n, Some(o), runs),
                (Some(n), None) => observe(g, n, None, runs),
                (None, _) => one_side(RunSide::Old, runs.allow_missing),
                (Some(_), Some(None)) => one_side(RunSide::New, runs.allow_missing),
            };
            let noise = match (new, old, &observed) {
                (Some(n), Some(Some(o)), Observed::Change { .. }) => noise_check(g.metric, o, n),
                _ => None,
            };
            let holds = failed;
            if g.beyond_noise && noise.is_some_and(|c| c.within) {
                failed = false;
            }
            out.push(GateResult {
                gate: g.text.clone(),
                variant: name,
                metric: g.metric,
                op: g.op,
                limit: g.limit.clone(),
                observed,
                failed,
                holds,
                noise,
            });
        }
    }
    Ok(out)
}

fn one_side(side: RunSide, allowed: bool) -> (Observed, bool) {
    (Observed::OnlyIn { side, allowed }, !allowed)
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
