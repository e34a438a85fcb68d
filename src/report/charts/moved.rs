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

/// Draws, per prewarm, what it moved out of step 1 beside what it cost:
/// bytes on the left (moved vs extra memory held), seconds on the right
/// (moved vs setup time added); one row per variant.
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
    panel(
        &left,
        "bytes out of step 1 vs extra memory held",
        verdicts,
        &layout,
        |v| (v.moved_bytes / unit, v.costs.held_extra_bytes / unit),
        ("moved out of step 1", "held at step-1 end, extra (cost)"),
        unit_name,
        &|v| bytes((v.abs() * unit) as u64),
    )?;
    panel(
        &right,
        "seconds out of step 1 vs setup time added",
        verdicts,
        &layout,
        |v| (v.moved_seconds, v.costs.setup_s.unwrap_or(0.0)),
        ("moved out of step 1", "setup time added (cost)"),
        "s",
        &|v| seconds(v.abs()),
    )?;
    for (k, line) in layout.key.iter().enumerate() {
        key_area
            .draw_text(line, &text(12, HPos::Left, VPos::Top), (16, k as i32 * 18))
            .map_err(&err)?;
    }
    Ok(())
}

/// One panel of the moved-vs-cost chart: per variant a row with the moved
/// bar above the cost bar, each value at its bar's end.
#[allow(clippy::too_many_arguments)]
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    verdicts: &[VerdictView],
    layout: &MovedLayout,
    values: impl Fn(&VerdictView) -> (f64, f64),
    names: (&str, &str),
    unit: &str,
    fmt: &dyn Fn(f64) -> String,
) -> Result<(), ReportError> {
    let err = chart_err("moved vs cost");
    let (head, body) = area.split_vertically(MOVED_HEAD);
    let width = head.dim_in_pixel().0 as i32;
    head.draw_text(title, &text(15, HPos::Center, VPos::Top), (width / 2, 6))
        .map_err(&err)?;
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
    let n = verdicts.len().max(1) as f64;
    let vals: Vec<(f64, f64)> = verdicts.iter().map(&values).collect();
    let hi = vals.iter().flat_map(|v| [v.0, v.1]).fold(0.0, f64::max);
    let lo = vals.iter().flat_map(|v| [v.0, v.1]).fold(0.0, f64::min);
    let span = (hi - lo).max(1e-9);
    // Room at both ends for the value written beside a bar.
    let x_lo = if lo < 0.0 { lo - span * 0.45 } else { 0.0 };
    let x_hi = hi + span * 0.32;
    let mut chart = ChartBuilder::on(&body)
        .margin_left(8)
        .margin_right(16)
        .margin_bottom(6)
        .y_label_area_size(150)
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
        .x_label_formatter(&|v| format!("{v:.1}"))
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
    for (i, (lines, (moved, cost))) in layout.labels.iter().zip(&vals).enumerate() {
        let row = n - i as f64;
        for (k, (value, color)) in [(*moved, MOVED), (*cost, COST)].into_iter().enumerate() {
            let (y_top, y_bot) = (row - 0.12 - k as f64 * 0.4, row - 0.46 - k as f64 * 0.4);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(0.0, y_bot), (value, y_top)],
                    color.mix(0.85).filled(),
                )))
                .map_err(&err)?;
            let (px, py) = rel(area, chart.backend_coord(&(value, (y_top + y_bot) / 2.0)));
            let (anchor, dx) = if value < 0.0 {
                (HPos::Right, -5)
            } else {
                (HPos::Left, 5)
            };
            area.draw_text(
                &format!("{}{}", if value < 0.0 { "-" } else { "" }, fmt(value)),
                &text(11, anchor, VPos::Center),
                (px + dx, py),
            )
            .map_err(&err)?;
        }
        let at = rel(area, chart.backend_coord(&(x_lo, row - 0.5)));
        draw_row_label(area, lines, at).map_err(&err)?;
    }
    Ok(())
}
