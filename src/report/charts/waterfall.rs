//! The waterfall of the account at step-1 end: one bar a part, labels
//! wrapped to the chart's margin.

use super::style::*;
use crate::analysis::account::GapAccount;
use crate::report::bytes;
use crate::report::renderer::ReportError;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

/// One bar of the waterfall: a part of the account.
#[derive(Debug, Clone, PartialEq)]
pub struct WaterfallRow {
    pub label: String,
    /// Where the bar starts and ends (bytes; a negative part goes left).
    pub from: i64,
    pub to: i64,
    pub inferred: bool,
    pub total: bool,
}

/// The account at one instant as waterfall rows: the pool, each part outside
/// it, the unexplained remainder, then the device total.
pub fn waterfall_rows(g: &GapAccount) -> Vec<WaterfallRow> {
    let mut rows = Vec::new();
    let mut at = 0i64;
    let mut push = |label: String, bytes: i64, inferred: bool| {
        rows.push(WaterfallRow {
            label,
            from: at,
            to: at + bytes,
            inferred,
            total: false,
        });
        at += bytes;
    };
    push("torch pool reserved".into(), g.pool_reserved as i64, false);
    for p in &g.parts {
        push(
            crate::report::verdict_text::part_label(p),
            p.bytes,
            p.inferred,
        );
    }
    push("unexplained".into(), g.unexplained, false);
    rows.push(WaterfallRow {
        label: "device used".into(),
        from: 0,
        to: g.device_used as i64,
        inferred: false,
        total: true,
    });
    rows
}

/// Characters of a waterfall label per line (the label column is 340 px).
const WATERFALL_LABEL_CHARS: usize = 46;

/// Pixel height of a waterfall with `rows` rows whose longest label wraps
/// to `lines` lines.
pub fn waterfall_height(rows: usize, lines: usize) -> u32 {
    70 + waterfall_row_height(lines) * rows as u32
}

fn waterfall_row_height(lines: usize) -> u32 {
    30u32.max(LINE as u32 * lines as u32 + 8)
}

/// The byte range a waterfall's bars span, 0 and 1 byte included (a chart
/// of nothing still has an axis).
pub(super) fn waterfall_span(rows: &[WaterfallRow]) -> (f64, f64) {
    let hi = rows
        .iter()
        .map(|r| r.from.max(r.to))
        .max()
        .unwrap_or(1)
        .max(1);
    let lo = rows
        .iter()
        .map(|r| r.from.min(r.to))
        .min()
        .unwrap_or(0)
        .min(0);
    (lo as f64, hi as f64)
}

/// The most lines any label of `g`'s waterfall wraps to.
pub(super) fn waterfall_lines(g: &GapAccount) -> usize {
    waterfall_rows(g)
        .iter()
        .map(|r| wrap_label(&row_label(r), WATERFALL_LABEL_CHARS).len())
        .max()
        .unwrap_or(1)
}

fn row_label(r: &WaterfallRow) -> String {
    format!("{}{}", r.label, if r.inferred { " (inferred)" } else { "" })
}

fn waterfall_color(label: &str, inferred: bool, index: usize) -> RGBColor {
    if label.starts_with("CUDA context") {
        CONTEXT
    } else if label == "torch pool reserved" {
        POOL
    } else if label.starts_with("local-memory") {
        LOCAL
    } else if label == "unexplained" {
        RGBColor(0xcc, 0xcc, 0xcc)
    } else if inferred {
        RGBColor(0xf6, 0xc1, 0x8f)
    } else {
        source_color(label, index)
    }
}

/// Draws the account at step-1 end as a horizontal waterfall, on the
/// page's shared scale (`None`: its own).
pub fn draw_waterfall<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    g: &GapAccount,
    scale: Option<PageScale>,
) -> Result<(), ReportError> {
    ensure_font();
    let err = chart_err("account waterfall");
    area.fill(&WHITE).map_err(&err)?;
    let rows = waterfall_rows(g);
    let (own_lo, own_hi) = waterfall_span(&rows);
    let scale = scale.unwrap_or_else(|| PageScale::spanning(own_lo, own_hi));
    let (unit, unit_name) = (scale.unit, scale.unit_name);
    let (lo, hi) = (scale.lo.min(own_lo), scale.hi.max(own_hi));
    let n = rows.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 17))
        .margin(8)
        .margin_right(30)
        .y_label_area_size(340)
        .x_label_area_size(34)
        .build_cartesian_2d(lo / unit..hi / unit * 1.15, 0f64..n)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_desc(format!("device memory ({unit_name})"))
        .x_label_formatter(&|v| format!("{v:.1}"))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()
        .map_err(&err)?;
    for (i, r) in rows.iter().enumerate() {
        let y_top = n - i as f64 - 0.18;
        let y_bot = n - i as f64 - 0.82;
        let (a, b) = (
            r.from.min(r.to) as f64 / unit,
            r.from.max(r.to) as f64 / unit,
        );
        let color = if r.total {
            DEVICE
        } else {
            waterfall_color(&r.label, r.inferred, i)
        };
        let style = if r.total {
            color.mix(0.75).filled()
        } else {
            color.mix(0.85).filled()
        };
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, y_bot), (b.max(a), y_top)],
                style,
            )))
            .map_err(&err)?;
        let at = rel(area, chart.backend_coord(&(lo / unit, n - i as f64 - 0.5)));
        let lines = wrap_label(&row_label(r), WATERFALL_LABEL_CHARS);
        draw_row_label(area, &lines, at).map_err(&err)?;
        let (vx, vy) = rel(area, chart.backend_coord(&(b.max(a), n - i as f64 - 0.5)));
        let value = if r.total {
            bytes((r.to - r.from).max(0) as u64)
        } else {
            crate::report::signed_bytes(r.to - r.from)
        };
        area.draw_text(&value, &text(12, HPos::Left, VPos::Center), (vx + 6, vy))
            .map_err(&err)?;
    }
    Ok(())
}
