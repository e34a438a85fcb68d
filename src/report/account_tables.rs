//! The tables the text formats share (terminal and Markdown write the same
//! rows): variants over repeats, verdicts, phases of one process, ranks side
//! by side, and the distribution over ranks.

use super::model::{AttemptView, FigureDistribution, MatrixView, Spread, costs_text};
use super::text_layout::{Align, Table};
use super::{bytes, seconds, signed_bytes};
use crate::analysis::account::ProcessAccount;
use crate::analysis::phases::Phase;

const BYTE_UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];

/// "968.3 MiB ±12.5 MiB": the median with half the range, in the median's unit.
pub fn bytes_spread(s: Option<Spread>) -> String {
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
            format!("{half:.0} B")
        } else {
            format!("{:.1} {}", half / scale, BYTE_UNITS[unit])
        }
    })
}

/// "10.45 s ±1.56 s" / "791.8 ms ±18.8 ms": the spread in the median's unit.
pub fn seconds_spread(s: Option<Spread>) -> String {
    let Some(s) = s else { return "?".into() };
    spread_suffix(seconds(s.median), s, |half| {
        if s.median >= 100.0 {
            format!("{half:.0} s")
        } else if s.median >= 1.0 {
            format!("{half:.2} s")
        } else {
            format!("{:.1} ms", half * 1000.0)
        }
    })
}

fn spread_suffix(median: String, s: Spread, half: impl Fn(f64) -> String) -> String {
    if s.n < 2 {
        return median;
    }
    let h = s.range() / 2.0;
    if h == 0.0 {
        format!("{median} ±0")
    } else {
        format!("{median} ±{}", half(h))
    }
}

/// The variants over their repeats: medians ± half the range.
pub fn variant_table(m: &MatrixView) -> Table {
    let mut t = Table::new(&[
        ("variant", Align::Text),
        ("runs", Align::Number),
        ("step-1 peak", Align::Number),
        ("step-1 oop", Align::Number),
        ("tightest", Align::Number),
        ("step-1 time", Align::Number),
        ("setup time", Align::Number),
    ]);
    for v in &m.variants {
        t.row(vec![
            v.name.clone(),
            format!("{}/{}", v.runs, v.expected),
            bytes_spread(v.step1_device_peak),
            bytes_spread(v.step1_out_of_pool),
            v.step1_tightest_headroom
                .map_or("-".into(), |s| signed_bytes(s.median as i64)),
            seconds_spread(v.step1_s),
            seconds_spread(v.setup_s),
        ]);
    }
    t
}

/// One row per prewarm: its class, what it moved, what it cost.
pub fn verdict_table(m: &MatrixView) -> Table {
    let mut t = Table::new(&[
        ("variant", Align::Text),
        ("prewarms", Align::Text),
        ("verdict", Align::Text),
        ("moved out of step 1", Align::Text),
        ("cost", Align::Text),
    ]);
    for v in &m.verdicts {
        t.row(vec![
            v.variant.clone(),
            v.prewarms.join(", "),
            v.label.clone(),
            super::model::moved_text(v),
            costs_text(&v.costs),
        ]);
    }
    t
}

/// A phase's label in the table: a run whose step 1 could not be placed has
/// one phase, which is not "setup" (it may hold step 1's work); the steps
/// 2..N of a process that died in one of them end at its death, in the step
/// it died in ("step 2 (died)", "steps 2..5 (died)": docs/step-rule.md).
pub fn phase_label(p: &ProcessAccount, phase: Phase) -> String {
    match (phase, p.steps.died_in_step) {
        (Phase::Setup, _) if super::no_step(p) => super::BEFORE_ANY_STEP.into(),
        (Phase::Steady, Some(2)) => "step 2 (died)".into(),
        (Phase::Steady, Some(k)) => format!("steps 2..{k} (died)"),
        _ => phase.label().into(),
    }
}

/// Each phase of one process: time, peaks, what it added outside the pool,
/// and what its end account leaves unexplained (a "failed" column only when
/// a request failed).
pub fn phase_table(p: &ProcessAccount) -> Table {
    let failed = p.phases.iter().any(|ph| ph.failed_requests > 0);
    let mut columns = vec![
        ("phase", Align::Text),
        ("time", Align::Number),
        ("device peak", Align::Number),
        ("pool peak", Align::Number),
        ("out-of-pool +", Align::Number),
        ("local mem +", Align::Number),
        ("unexplained", Align::Number),
    ];
    if failed {
        columns.push(("failed", Align::Number));
    }
    let mut t = Table::new(&columns);
    for ph in &p.phases {
        let mut row = vec![
            phase_label(p, ph.phase),
            seconds(ph.duration_s),
            ph.device_used_peak.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(ph.pool_reserved_peak),
            bytes(ph.out_of_pool_allocated),
            bytes(ph.local_memory_growth),
            ph.gap_end
                .as_ref()
                .map_or("-".into(), |g| signed_bytes(g.unexplained)),
        ];
        if failed {
            row.push(ph.failed_requests.to_string());
        }
        t.row(row);
    }
    t
}

/// The ranks of an attempt side by side (at scale: the worst of each figure,
/// [`AttemptView::shown_ranks`]).
pub fn rank_table(a: &AttemptView) -> Table {
    let mut t = Table::new(&[
        ("rank", Align::Text),
        ("host", Align::Text),
        ("step-1 peak", Align::Number),
        ("step-1 out-of-pool", Align::Number),
        ("step-1 time", Align::Number),
        ("step-1 NCCL", Align::Number),
        ("OOM", Align::Text),
    ]);
    for r in a.shown_ranks(super::model::SHOWN_RANKS) {
        t.row(vec![
            r.rank.map_or(format!("pid {}", r.pid), |n| n.to_string()),
            r.host.clone(),
            r.step1_peak.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(r.step1_out_of_pool),
            r.step1_s.map(seconds).unwrap_or_else(|| "?".into()),
            r.step1_comms.to_string(),
            if r.forensics().is_empty() { "" } else { "yes" }.into(),
        ]);
    }
    t
}

/// Quantiles of each per-rank figure over the training ranks, with the
/// worst ranks: the view of hundreds of ranks that fits a screen.
pub fn distribution_table(a: &AttemptView) -> Table {
    let mut t = Table::new(&[
        ("over ranks", Align::Text),
        ("min", Align::Number),
        ("median", Align::Number),
        ("p90", Align::Number),
        ("p99", Align::Number),
        ("max", Align::Number),
        ("worst ranks", Align::Text),
    ]);
    for d in &a.distribution {
        t.row(distribution_row(a, d));
    }
    t
}

fn distribution_row(a: &AttemptView, d: &FigureDistribution) -> Vec<String> {
    let f = d.figure;
    let worst: Vec<String> = d
        .worst
        .iter()
        .filter_map(|&i| a.ranks.get(i))
        .map(|r| r.rank.map_or(format!("pid {}", r.pid), |n| n.to_string()))
        .collect();
    vec![
        format!("{} ({})", f.label(), d.n),
        f.format(d.min),
        f.format(d.p50),
        f.format(d.p90),
        f.format(d.p99),
        f.format(d.max),
        worst.join(", "),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(values: &[f64]) -> Option<Spread> {
        crate::analysis::stats::Stat::of(values)
            .as_ref()
            .map(Spread::from)
    }

    #[test]
    fn spreads_are_compact() {
        assert_eq!(
            bytes_spread(spread(&[968.3 * 1048576.0, 968.3 * 1048576.0])),
            "968.3 MiB ±0"
        );
        assert_eq!(seconds_spread(spread(&[8.89, 12.01])), "10.45 s ±1.56 s");
        assert_eq!(
            seconds_spread(spread(&[0.773, 0.8106])),
            "791.8 ms ±18.8 ms"
        );
        assert_eq!(seconds_spread(spread(&[4.0])), "4.00 s");
        assert_eq!(bytes_spread(spread(&[512.0, 514.0])), "513 B ±1 B");
    }
}
