//! What each prewarm moved against what it cost: two panels, one bar a
//! variant.

use super::style::*;
use crate::report::model::VerdictView;
use crate::report::renderer::ReportError;
use crate::report::{bytes, seconds};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

/// Characters of a variant name per line in the moved-vs-cost chart.
const MOVED_LABEL_CHARS: usize = 20;
/// Lines a variant's label may take before the chart names it by number
/// (the full name then in a key under the chart).
const MOVED_LABEL_LINES: usize = 2;

/// How the moved-vs-cost chart lays its variants out: one row per variant
/// (horizontal bars: names never run into each other however many there
/// are), each name wrapped; names too long for their rows are numbered
/// and spelled out in full in a key.
pub struct MovedLayout {
    /// Per variant, the lines left of its row (its name, then its class).
    pub labels: Vec<Vec<String>>,
    /// Key lines under the chart ("1 = full name"), when a name is numbered.
    pub key: Vec<String>,
    pub row_height: u32,
}

/// Head (title and legend) of each moved-vs-cost panel, px.
const MOVED_HEAD: u32 = 52;
/// Axis and margins under the rows, px.
const MOVED_FOOT: u32 = 44;

impl MovedLayout {
    /// The layout of `verdicts`.
    pub fn of(verdicts: &[VerdictView]) -> MovedLayout {
        let mut key = Vec::new();
        let labels: Vec<Vec<String>> = verdicts
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut lines = wrap_label(&v.variant, MOVED_LABEL_CHARS);
                if lines.len() > MOVED_LABEL_LINES {
                    key.push(format!("{} = {}", i + 1, v.variant));
                    lines = vec![format!(
                        "{} {}",
                        i + 1,
                        short(&v.variant, MOVED_LABEL_CHARS - 2)
                    )];
                }
                lines.push(format!("({})", v.label));
                lines
            })
            .collect();
        let most = labels.iter().map(Vec::len).max().unwrap_or(1);
        MovedLayout {
            labels,
            key,
            row_height: 44u32.max(LINE as u32 * most as u32 + 10),
        }
    }

    /// Pixel height of the chart.
    pub fn height(&self) -> u32 {
        let rows = self.labels.len().max(1) as u32;
        MOVED_HEAD + MOVED_FOOT + rows * self.row_height + 18 * self.key.len() as u32
    }
}

/// One bar of a moved-vs-cost row: its value (None: not measured on this
/// run, so no bar is drawn) and what is written at its end.
struct Bar {
    value: Option<f64>,
    label: String,
}

impl Bar {
    /// A measured value written with `fmt` (and `note` after it), or "not
    /// measured" where the report says the quantity is unknown.
    fn of(value: Option<f64>, fmt: &dyn Fn(f64) -> String, note: &str) -> Bar {
        Bar {
            value,
            label: value.map_or_else(
                || "not measured".to_string(),
                |v| format!("{}{}{note}", if v < 0.0 { "-" } else { "" }, fmt(v)),
            ),
        }
    }
}

/// Whether the moved-vs-cost chart has anything to show: some verdict with a
/// measured figure (what it moved, its setup time or the memory it holds).
/// A run where none was measured (no capture, no step 1 on a side) draws
/// no chart of zeros: every figure is unknown, as the text says.
pub fn moved_vs_cost_measured(verdicts: &[VerdictView]) -> bool {
    verdicts
        .iter()
        .any(|v| v.moved_known || v.costs.setup_s.is_some() || held_known(v))
}

/// Whether the memory a variant holds at step-1 end against the baseline
/// is known (`costs_text` says "unknown" otherwise).
fn held_known(v: &VerdictView) -> bool {
    v.costs.held_known || v.costs.held_extra_bytes > 0.0
}

/// Draws, per prewarm, what it moved out of step 1 beside what it cost:
/// bytes on the left (moved vs extra memory held), seconds on the right
/// (moved vs setup time added); one row per variant. A figure the run did
/// not measure is written "not measured", with no bar; a setup change
/// within noise carries "(within noise)" as the text gives it.
pub fn draw_moved_vs_cost<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    verdicts: &[VerdictView],
) -> Result<(), ReportError> {
    ensure_font();
    let err = chart_err("moved vs cost");
    area.fill(&WHITE).map_err(&err)?;
    let layout = MovedLayout::of(verdicts);
    let key_height = 18 * layout.key.len() as u32;
    let (panels, key_area) = area.split_vertically(area.dim_in_pixel().1 - key_height);
    let (left, right) = panels.split_horizontally(panels.dim_in_pixel().0 / 2);
    let top = verdicts
        .iter()
        .flat_map(|v| [v.moved_bytes.abs(), v.costs.held_extra_bytes.abs()])
        .fold(1.0, f64::max);
    let (unit, unit_name) = byte_unit(top);
    let fmt_bytes = |v: f64| bytes((v.abs() * unit) as u64);
    let fmt_secs = |v: f64| seconds(v.abs());
    let byte_bars: Vec<[Bar; 2]> = verdicts
        .iter()
        .map(|v| {
            [
                Bar::of(
                    v.moved_known.then_some(v.moved_bytes / unit),
                    &fmt_bytes,
                    "",
                ),
                Bar::of(
                    held_known(v).then_some(v.costs.held_extra_bytes / unit),
                    &fmt_bytes,
                    "",
                ),
            ]
        })
        .collect();
    let second_bars: Vec<[Bar; 2]> = verdicts
        .iter()
        .map(|v| {
            // As the text gives it ("setup -375.0 ms (within noise)").
            let noise = if v.costs.setup_within_noise {
                " (within noise)"
            } else {
                ""
            };
            [
                Bar::of(v.moved_known.then_some(v.moved_seconds), &fmt_secs, ""),
                Bar::of(v.costs.setup_s, &fmt_secs, noise),
            ]
        })
        .collect();
    panel(
        &left,
        "bytes out of step 1 vs extra memory held",
        &layout,
        &byte_bars,
        ("moved out of step 1", "held at step-1 end, extra (cost)"),
        unit_name,
    )?;
    panel(
        &right,
        "seconds out of step 1 vs setup time added",
        &layout,
        &second_bars,
        ("moved out of step 1", "setup time added (cost)"),
        "s",
    )?;
    for (k, line) in layout.key.iter().enumerate() {
        key_area
            .draw_text(line, &text(12, HPos::Left, VPos::Top), (16, k as i32 * 18))
            .map_err(&err)?;
    }
    Ok(())
}

/// Room left of a panel's plot for the variants' names, px.
const ROW_LABELS: u32 = 150;
/// Margins of a panel's plot: left, right, px.
const PLOT_MARGINS: (u32, u32) = (8, 16);
/// Gap between a bar's end and its label, px.
const LABEL_GAP: i32 = 5;

/// The value range of a panel: from 0 (or below the most negative bar)
/// to past the largest, with room at both ends for the label written
/// beside each bar, measured in pixels of `plot_width`.
fn panel_range(bars: &[[Bar; 2]], widths: &[[i32; 2]], plot_width: f64) -> (f64, f64) {
    let values = || bars.iter().flatten().filter_map(|b| b.value);
    let hi = values().fold(0.0, f64::max);
    let lo = values().fold(0.0, f64::min);
    // All zero: a nominal span, so the axis reads 0, 0.2, … not 0.0 0.0 0.0.
    let span = if hi - lo > 1e-9 { hi - lo } else { 1.0 };
    let mut x_lo = if lo < 0.0 { lo - span * 0.45 } else { 0.0 };
    let mut x_hi = hi + span * 0.32;
    for _ in 0..40 {
        let px = |v: f64| (v - x_lo) / (x_hi - x_lo) * plot_width;
        let (mut short_left, mut short_right) = (false, false);
        for (row, w) in bars.iter().zip(widths) {
            for (b, &w) in row.iter().zip(w) {
                let v = b.value.unwrap_or(0.0);
                if v < 0.0 {
                    short_left |= px(v) - f64::from(LABEL_GAP + w) < 0.0;
                } else {
                    short_right |= px(v) + f64::from(LABEL_GAP + w) > plot_width;
                }
            }
        }
        if !short_left && !short_right {
            break;
        }
        if short_left {
            x_lo -= span * 0.1;
        }
        if short_right {
            x_hi += span * 0.1;
        }
    }
    (x_lo, x_hi)
}

/// Axis labels with as many decimals as the step between them needs (at
/// least one): "0.010 0.020", never "0.0 0.0".
fn axis_label(v: f64, step: f64) -> String {
    let decimals = if step > 0.0 {
        (-step.log10()).ceil().clamp(1.0, 6.0) as usize
    } else {
        1
    };
    format!("{v:.decimals$}")
}

/// One panel of the moved-vs-cost chart: per variant a row with the moved
/// bar above the cost bar, each label at its bar's end. A panel where no
/// figure was measured says so, with no axis.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    layout: &MovedLayout,
    bars: &[[Bar; 2]],
    names: (&str, &str),
    unit: &str,
) -> Result<(), ReportError> {
    let err = chart_err("moved vs cost");
    let (head, body) = area.split_vertically(MOVED_HEAD);
    let width = head.dim_in_pixel().0 as i32;
    head.draw_text(title, &text(15, HPos::Center, VPos::Top), (width / 2, 6))
        .map_err(&err)?;
    if bars.iter().flatten().all(|b| b.value.is_none()) {
        let (w, h) = body.dim_in_pixel();
        body.draw_text(
            "not measured on this run",
            &text(13, HPos::Center, VPos::Center),
            (w as i32 / 2, h as i32 / 2),
        )
        .map_err(&err)?;
        return Ok(());
    }
    // The legend in the head, never over a bar or a value.
    let mut x = 20;
    for (name, color) in [(names.0, MOVED), (names.1, COST)] {
        head.draw(&Rectangle::new(
            [(x, 32), (x + 12, 42)],
            color.mix(0.85).filled(),
        ))
        .map_err(&err)?;
        head.draw_text(name, &text(12, HPos::Left, VPos::Center), (x + 18, 37))
            .map_err(&err)?;
        x += 18 + name.chars().count() as i32 * 7 + 24;
    }
    let n = bars.len().max(1) as f64;
    let style = text(11, HPos::Left, VPos::Center);
    let widths: Vec<[i32; 2]> = bars
        .iter()
        .map(|row| {
            row.each_ref().map(|b| {
                area.estimate_text_size(&b.label, &style)
                    .map_or(0, |(w, _)| w as i32)
            })
        })
        .collect();
    let plot_width = f64::from(
        body.dim_in_pixel()
            .0
            .saturating_sub(ROW_LABELS + PLOT_MARGINS.0 + PLOT_MARGINS.1),
    );
    let (x_lo, x_hi) = panel_range(bars, &widths, plot_width.max(1.0));
    let step = (x_hi - x_lo) / 6.0;
    let mut chart = ChartBuilder::on(&body)
        .margin_left(PLOT_MARGINS.0)
        .margin_right(PLOT_MARGINS.1)
        .margin_bottom(6)
        .y_label_area_size(ROW_LABELS)
        .x_label_area_size(36)
        .build_cartesian_2d(x_lo..x_hi, 0f64..n)
        .map_err(&err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(6)
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .x_desc(unit)
        .x_label_formatter(&|v| axis_label(*v, step))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 12))
        .draw()
        .map_err(&err)?;
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 0.0), (0.0, n)],
            BLACK.mix(0.5),
        )))
        .map_err(&err)?;
    for (i, (lines, row)) in layout.labels.iter().zip(bars).enumerate() {
        let row_top = n - i as f64;
        for (k, (bar, color)) in row.iter().zip([MOVED, COST]).enumerate() {
            let (y_top, y_bot) = (
                row_top - 0.12 - k as f64 * 0.4,
                row_top - 0.46 - k as f64 * 0.4,
            );
            let value = bar.value.unwrap_or(0.0);
            if bar.value.is_some() {
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(0.0, y_bot), (value, y_top)],
                        color.mix(0.85).filled(),
                    )))
                    .map_err(&err)?;
            }
            let (px, py) = rel(area, chart.backend_coord(&(value, (y_top + y_bot) / 2.0)));
            let (anchor, dx) = if value < 0.0 {
                (HPos::Right, -LABEL_GAP)
            } else {
                (HPos::Left, LABEL_GAP)
            };
            let style = if bar.value.is_some() {
                text(11, anchor, VPos::Center)
            } else {
                text(11, anchor, VPos::Center).color(&RGBColor(0x77, 0x77, 0x77))
            };
            area.draw_text(&bar.label, &style, (px + dx, py))
                .map_err(&err)?;
        }
        let at = rel(area, chart.backend_coord(&(x_lo, row_top - 0.5)));
        draw_row_label(area, lines, at).map_err(&err)?;
    }
    Ok(())
}
