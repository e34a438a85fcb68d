//! The report's charts, drawn with plotters on any backend (SVG for HTML,
//! bitmap for PNG): the memory timeline of one process, the waterfall of the
//! account at step-1 end, and what each prewarm moved against what it cost.
//!
//! Event markers are returned as [`Glyph`]s in pixel coordinates instead of
//! being drawn here, so the SVG writer can give each one its hover text
//! (`<title>`) and the PNG writer draws the same shapes.

use super::model::{ReportModel, VerdictView, marker_kind_label, marker_text};
use super::renderer::ReportError;
use super::{bytes, seconds};
use crate::analysis::account::GapAccount;
use crate::analysis::phases::Phase;
use crate::analysis::timeline::{MarkerKind, Point, Timeline, value_at};
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::sync::Once;

/// A backend pixel made relative to `area` (chart coordinates map to the
/// whole image; drawing on a sub-area is relative to its corner).
fn rel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: (i32, i32)) -> (i32, i32) {
    let (bx, by) = area.get_base_pixel();
    (p.0 - bx, p.1 - by)
}

/// A text style of the embedded font, anchored as given.
fn text(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, v))
}

/// The font every chart is drawn with, embedded so charts render on machines
/// without system fonts (assets/fonts/LICENSE-DejaVu.txt).
pub(crate) static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans-subset.ttf");

/// Pixel size of a timeline chart.
pub const TIMELINE_SIZE: (u32, u32) = (1100, 470);
/// Pixel size of the moved-vs-cost chart.
pub const MOVED_SIZE: (u32, u32) = (1100, 360);
/// Pixel width of a waterfall chart (height grows with its rows).
pub const WATERFALL_WIDTH: u32 = 1100;

/// Height of the event lanes above a timeline.
const LANES_HEIGHT: u32 = 150;
/// Room left of each plot for axis labels and lane names.
const LEFT: u32 = 96;

/// Registers the embedded font with plotters (once per process).
pub fn ensure_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse; a failure here would
        // only show as missing text, never as a panic in the report.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT);
    });
}

/// A marker to draw, in pixels of the whole image.
#[derive(Debug, Clone, PartialEq)]
pub struct Glyph {
    pub kind: MarkerKind,
    pub x0: i32,
    pub x1: i32,
    pub y: i32,
    pub failed: bool,
    /// The hover text.
    pub title: String,
}

/// Colour of a marker kind.
pub fn marker_color(k: MarkerKind) -> RGBColor {
    match k {
        MarkerKind::Allocation => RGBColor(0xf2, 0x8e, 0x2b),
        MarkerKind::LocalMemory => RGBColor(0x8e, 0x5a, 0xa8),
        MarkerKind::NcclComm => RGBColor(0x2a, 0x9d, 0x8f),
        MarkerKind::Autotune => RGBColor(0x3a, 0x6e, 0xa5),
        MarkerKind::Compile => RGBColor(0x6c, 0x75, 0x7d),
        MarkerKind::Oom => RGBColor(0xd6, 0x28, 0x28),
    }
}

/// Hex form of a colour (for CSS and SVG written by hand).
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

const CONTEXT: RGBColor = RGBColor(0xb8, 0xb8, 0xb8);
const POOL: RGBColor = RGBColor(0x4e, 0x79, 0xa7);
const LOCAL: RGBColor = RGBColor(0xb0, 0x7a, 0xa1);
const DEVICE: RGBColor = RGBColor(0x11, 0x11, 0x11);
const MOVED: RGBColor = RGBColor(0x3c, 0x9a, 0x4f);
const COST: RGBColor = RGBColor(0xe0, 0x6c, 0x1f);
const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);

/// Colour of an out-of-pool source (known libraries keep theirs).
pub fn source_color(source: &str, index: usize) -> RGBColor {
    const CYCLE: [RGBColor; 6] = [
        RGBColor(0x76, 0xb7, 0xb2),
        RGBColor(0xed, 0xc9, 0x48),
        RGBColor(0xff, 0x9d, 0xa7),
        RGBColor(0x9c, 0x75, 0x5f),
        RGBColor(0x86, 0xbc, 0xb6),
        RGBColor(0xd3, 0x72, 0x95),
    ];
    match source {
        "nccl" => RGBColor(0xf2, 0x8e, 0x2b),
        "cublas" => RGBColor(0xe1, 0x57, 0x59),
        "triton" => RGBColor(0x59, 0xa1, 0x4f),
        "cudnn" => RGBColor(0x76, 0xb7, 0xb2),
        _ => CYCLE[index % CYCLE.len()],
    }
}

fn phase_fill(p: Phase) -> RGBColor {
    match p {
        Phase::Setup => RGBColor(0xf4, 0xf4, 0xf4),
        Phase::Step1 => RGBColor(0xff, 0xf1, 0xcc),
        Phase::Steady => RGBColor(0xe9, 0xf4, 0xe9),
        Phase::Teardown => RGBColor(0xf4, 0xf4, 0xf4),
    }
}

fn chart_err<E: std::fmt::Display>(chart: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Chart {
        chart: chart.to_string(),
        what: e.to_string(),
    }
}

/// A unit for a byte axis: GiB from 2 GiB up, else MiB.
fn byte_unit(max: f64) -> (f64, &'static str) {
    if max >= 2.0 * (1u64 << 30) as f64 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    }
}

/// The time window a timeline chart shows: from the start through step 1
/// (with a margin), or the whole process when it never finished step 1.
pub fn timeline_window(t: &Timeline) -> (f64, f64) {
    let end = t.end_s.max(1e-3);
    match t.phase(Phase::Step1) {
        Some(s1) if s1.end_s > 0.0 => {
            let margin = (s1.end_s * 0.06).max(0.05);
            (0.0, (s1.end_s + margin).min(end).max(s1.end_s))
        }
        // Never reached the end of step 1 (died, or no step seen): all of
        // it, with room for the last markers.
        _ => (0.0, end * 1.03),
    }
}

/// The per-pixel-column maximum of each cumulative layer (peak-preserving
/// envelope), so a chart never carries more vertices than it has pixels.
/// Layer k of the result is the sum of layers 0..=k (stacked). Any chart of
/// a timeline can use it (the dashboard draws at its own width).
pub fn envelopes(layers: &[&[Point]], window: (f64, f64), columns: usize) -> Vec<Vec<u64>> {
    let columns = columns.max(1);
    let dt = (window.1 - window.0) / columns as f64;
    let mut out = vec![vec![0u64; columns]; layers.len()];
    let mut add = |c: usize, t: f64| {
        let mut cum = 0u64;
        for (k, l) in layers.iter().enumerate() {
            cum += value_at(l, t);
            if cum > out[k][c] {
                out[k][c] = cum;
            }
        }
    };
    // What holds at each column's start, then every change inside it.
    for c in 0..columns {
        add(c, window.0 + c as f64 * dt);
    }
    for l in layers {
        for p in l.iter().filter(|p| p.0 >= window.0 && p.0 <= window.1) {
            let c = (((p.0 - window.0) / dt) as usize).min(columns - 1);
            add(c, p.0);
        }
    }
    out
}

/// The chart of a timeline's axes: seconds across, a byte unit (or lanes) up.
type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One stacked memory layer of a timeline: its legend, colour and series.
type Layer = (String, RGBColor, Vec<Point>);

/// Draws a process's memory timeline: event lanes on top, stacked memory
/// (context, pool, out-of-pool by source, local-memory growth) under the
/// device-used line, phase bands behind. Returns the markers to draw.
pub fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    t: &Timeline,
    scale: Option<PageScale>,
) -> Result<Vec<Glyph>, ReportError> {
    ensure_font();
    let err = chart_err("timeline");
    area.fill(&WHITE).map_err(&err)?;
    let window = timeline_window(t);
    // No step placed: the one phase is "before any step", not setup.
    let no_step = t.phases.iter().all(|b| b.phase == Phase::Setup);
    let (lanes_area, main) = area.split_vertically(LANES_HEIGHT);
    let lanes = draw_lanes(area, &lanes_area, title, window)?;

    let layers = memory_layers(t);
    let probe = memory_chart(&main, window, 1.0)?;
    let columns = probe.plotting_area().dim_in_pixel().0 as usize;
    let refs: Vec<&[Point]> = layers.iter().map(|l| l.2.as_slice()).collect();
    let env = envelopes(&refs, window, columns);
    let device = envelopes(&[t.device_used.as_slice()], window, columns).remove(0);
    let top = env
        .last()
        .map_or(0, |e| e.iter().copied().max().unwrap_or(0))
        .max(device.iter().copied().max().unwrap_or(0))
        .max(1);
    // The page's unit, so the timelines of one report read alike.
    let (unit, unit_name) = scale.map_or_else(|| byte_unit(top as f64), |s| (s.unit, s.unit_name));
    let ymax = top as f64 / unit * 1.12;
    let mut main_chart = memory_chart(&main, window, ymax)?;
    draw_phase_bands(area, &mut main_chart, t, window, ymax, no_step)?;
    main_chart
        .configure_mesh()
        .light_line_style(GRID.mix(0.6))
        .bold_line_style(GRID)
        .x_desc("seconds since the process started")
        .y_desc(format!("device memory ({unit_name})"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .x_label_formatter(&|v| format!("{v:.1}"))
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .draw()
        .map_err(&err)?;
    let xs: Vec<f64> = (0..columns)
        .map(|c| window.0 + (c as f64 + 0.5) * (window.1 - window.0) / columns as f64)
        .collect();
    draw_layers(&mut main_chart, &layers, &env, &xs, unit)?;
    if !t.device_used.is_empty() {
        main_chart
            .draw_series(LineSeries::new(
                xs.iter().zip(&device).map(|(x, v)| (*x, *v as f64 / unit)),
                DEVICE.stroke_width(2),
            ))
            .map_err(&err)?
            .label("device used (this process)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], DEVICE.stroke_width(2)));
    }
    // An OOM cuts through the memory too.
    for m in t.markers.iter().filter(|m| m.kind == MarkerKind::Oom) {
        if m.t_s >= window.0 && m.t_s <= window.1 {
            main_chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(m.t_s, 0.0), (m.t_s, ymax)],
                    marker_color(MarkerKind::Oom).stroke_width(2),
                )))
                .map_err(&err)?;
        }
    }
    main_chart
        .configure_series_labels()
        .position(SeriesLabelPosition::Coordinate(8, 22))
        .background_style(WHITE.mix(0.85))
        .border_style(GRID)
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(&err)?;
    Ok(marker_glyphs(area, &lanes, t, window, no_step))
}

/// The height of a marker kind's lane in the lanes chart (first kind on top).
fn lane_y(k: MarkerKind) -> f64 {
    let i = MarkerKind::ALL.iter().position(|x| *x == k).unwrap_or(0);
    MarkerKind::ALL.len() as f64 - i as f64 - 0.5
}

/// The event lanes above a timeline, one per marker kind, named on the
/// left; returns their chart, where the markers are placed.
fn draw_lanes<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lanes_area: &'a DrawingArea<DB, Shift>,
    title: &str,
    window: (f64, f64),
) -> Result<TimeChart<'a, DB>, ReportError> {
    let err = chart_err("timeline");
    let mut lanes = ChartBuilder::on(lanes_area)
        .caption(title, ("sans-serif", 17))
        .margin_left(8)
        .margin_right(24)
        .margin_top(6)
        .y_label_area_size(LEFT)
        .x_label_area_size(0)
        .build_cartesian_2d(window.0..window.1, 0f64..MarkerKind::ALL.len() as f64)
        .map_err(&err)?;
    lanes
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .disable_x_axis()
        .y_labels(0)
        .axis_style(GRID)
        .draw()
        .map_err(&err)?;
    for k in MarkerKind::ALL {
        let (x, y) = rel(area, lanes.backend_coord(&(window.0, lane_y(k))));
        area.draw_text(
            marker_kind_label(k),
            &("sans-serif", 12).into_font().color(&marker_color(k)).pos(
                plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Right,
                    plotters::style::text_anchor::VPos::Center,
                ),
            ),
            (x - 8, y),
        )
        .map_err(&err)?;
        let (x1, _) = rel(area, lanes.backend_coord(&(window.1, lane_y(k))));
        area.draw(&PathElement::new(vec![(x, y), (x1, y)], GRID))
            .map_err(&err)?;
    }
    Ok(lanes)
}

/// The memory layers of a timeline, in stacking order: context, pool,
/// out-of-pool by source, local-memory growth.
fn memory_layers(t: &Timeline) -> Vec<Layer> {
    let mut layers: Vec<Layer> = Vec::new();
    if let Some(c) = t.context {
        layers.push(("CUDA context".into(), CONTEXT, vec![c]));
    }
    layers.push(("torch pool reserved".into(), POOL, t.pool_reserved.clone()));
    for (i, s) in t.out_of_pool.iter().enumerate() {
        layers.push((
            format!("{} (out of pool)", s.source),
            source_color(&s.source, i),
            s.points.clone(),
        ));
    }
    if !t.local_memory.is_empty() {
        layers.push(("local-memory growth".into(), LOCAL, t.local_memory.clone()));
    }
    layers
}

/// The memory part of a timeline, from 0 to `ymax` (in the page's unit).
fn memory_chart<'a, DB: DrawingBackend>(
    main: &'a DrawingArea<DB, Shift>,
    window: (f64, f64),
    ymax: f64,
) -> Result<TimeChart<'a, DB>, ReportError> {
    ChartBuilder::on(main)
        .margin_left(8)
        .margin_right(24)
        .margin_bottom(6)
        .y_label_area_size(LEFT)
        .x_label_area_size(40)
        .build_cartesian_2d(window.0..window.1, 0f64..ymax)
        .map_err(chart_err("timeline"))
}

/// Phase bands behind everything, each named at the top when it is wide
/// enough to hold its name.
fn draw_phase_bands<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &mut TimeChart<'_, DB>,
    t: &Timeline,
    window: (f64, f64),
    ymax: f64,
    no_step: bool,
) -> Result<(), ReportError> {
    let err = chart_err("timeline");
    for b in &t.phases {
        let (a, z) = (b.start_s.max(window.0), b.end_s.min(window.1));
        if z <= a {
            continue;
        }
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (z, ymax)],
                phase_fill(b.phase).filled(),
            )))
            .map_err(&err)?;
        let (px0, py) = rel(area, chart.backend_coord(&(a, ymax)));
        let (px1, _) = rel(area, chart.backend_coord(&(z, ymax)));
        if px1 - px0 > 40 {
            area.draw_text(
                &super::phase_word(no_step, b.phase, None),
                &("sans-serif", 12)
                    .into_font()
                    .color(&RGBColor(0x55, 0x55, 0x55)),
                (px0 + 4, py + 4),
            )
            .map_err(&err)?;
        }
    }
    Ok(())
}

/// The stacked layers, each the area between its envelope and the one
/// below, topmost first so the legend reads top-down.
fn draw_layers<DB: DrawingBackend>(
    chart: &mut TimeChart<'_, DB>,
    layers: &[Layer],
    env: &[Vec<u64>],
    xs: &[f64],
    unit: f64,
) -> Result<(), ReportError> {
    let zero = vec![0; xs.len()];
    for k in (0..layers.len()).rev() {
        let upper = &env[k];
        let lower = if k == 0 { &zero } else { &env[k - 1] };
        let mut poly: Vec<(f64, f64)> = xs
            .iter()
            .zip(upper)
            .map(|(x, v)| (*x, *v as f64 / unit))
            .collect();
        poly.extend(
            xs.iter()
                .zip(lower)
                .rev()
                .map(|(x, v)| (*x, *v as f64 / unit)),
        );
        let color = layers[k].1;
        chart
            .draw_series(std::iter::once(Polygon::new(
                poly,
                color.mix(0.85).filled(),
            )))
            .map_err(chart_err("timeline"))?
            .label(layers[k].0.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    Ok(())
}

/// The markers inside the window, placed on their lanes, in pixels of `area`.
fn marker_glyphs<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lanes: &TimeChart<'_, DB>,
    t: &Timeline,
    window: (f64, f64),
    no_step: bool,
) -> Vec<Glyph> {
    let mut glyphs = Vec::new();
    for m in &t.markers {
        if m.t_s > window.1 || m.end_s.unwrap_or(m.t_s) < window.0 {
            continue;
        }
        let (x0, y) = rel(
            area,
            lanes.backend_coord(&(m.t_s.max(window.0), lane_y(m.kind))),
        );
        let x1 = m
            .end_s
            .map(|e| rel(area, lanes.backend_coord(&(e.min(window.1), 0.0))).0)
            .unwrap_or(x0);
        glyphs.push(Glyph {
            kind: m.kind,
            x0,
            x1: x1.max(x0),
            y,
            failed: m.failed,
            title: marker_text(m, no_step),
        });
    }
    glyphs
}

/// Draws glyphs with plotters (PNG; the SVG writer draws its own with titles).
pub fn draw_glyphs<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    glyphs: &[Glyph],
) -> Result<(), ReportError> {
    let err = chart_err("timeline markers");
    for g in glyphs {
        let c = marker_color(g.kind);
        if g.x1 - g.x0 >= 3 {
            area.draw(&Rectangle::new(
                [(g.x0, g.y - 6), (g.x1, g.y + 6)],
                c.mix(0.55).filled(),
            ))
            .map_err(&err)?;
            area.draw(&Rectangle::new([(g.x0, g.y - 6), (g.x1, g.y + 6)], c))
                .map_err(&err)?;
        } else if g.kind == MarkerKind::Oom || g.failed {
            area.draw(&Cross::new((g.x0, g.y), 7, c.stroke_width(3)))
                .map_err(&err)?;
        } else {
            area.draw(&Circle::new((g.x0, g.y), 5, c.mix(0.8).filled()))
                .map_err(&err)?;
        }
    }
    Ok(())
}

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
        push(super::verdict_text::part_label(p), p.bytes, p.inferred);
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

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let cut: String = s.chars().take(n - 1).collect();
        format!("{cut}…")
    }
}

/// Splits a label into lines of at most `width` characters, at spaces, or
/// at `_`/`-` inside a long identifier (kept at the end of the line); a
/// label is wrapped, never cut.
pub fn wrap_label(label: &str, width: usize) -> Vec<String> {
    let width = width.max(4);
    let mut pieces: Vec<String> = Vec::new();
    for word in label.split(' ').filter(|w| !w.is_empty()) {
        if word.chars().count() <= width {
            pieces.push(word.to_string());
            continue;
        }
        // A long identifier: break after `_` or `-`, else every `width` chars.
        let mut part = String::new();
        for c in word.chars() {
            part.push(c);
            let n = part.chars().count();
            if (matches!(c, '_' | '-') && n >= width / 2) || n == width {
                pieces.push(std::mem::take(&mut part) + "\u{0}");
            }
        }
        if !part.is_empty() {
            pieces.push(part);
        }
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut glued = false;
    for piece in pieces {
        let (text, glue_next) = match piece.strip_suffix('\u{0}') {
            Some(t) => (t.to_string(), true),
            None => (piece, false),
        };
        let sep = if line.is_empty() || glued { "" } else { " " };
        if !line.is_empty() && line.chars().count() + sep.len() + text.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(&text);
        } else {
            line.push_str(sep);
            line.push_str(&text);
        }
        glued = glue_next;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Characters of a waterfall label per line (the label column is 340 px).
const WATERFALL_LABEL_CHARS: usize = 46;
/// Line spacing of wrapped chart labels, px.
const LINE: i32 = 13;

/// Pixel height of a waterfall with `rows` rows whose longest label wraps
/// to `lines` lines.
pub fn waterfall_height(rows: usize, lines: usize) -> u32 {
    70 + waterfall_row_height(lines) * rows as u32
}

fn waterfall_row_height(lines: usize) -> u32 {
    30u32.max(LINE as u32 * lines as u32 + 8)
}

/// The most lines any label of `g`'s waterfall wraps to.
fn waterfall_lines(g: &GapAccount) -> usize {
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

/// The byte scale the comparable charts of one page share (every
/// waterfall and timeline of a report): one unit, and for the waterfalls
/// one range, so two variants' charts read side by side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageScale {
    pub unit: f64,
    pub unit_name: &'static str,
    /// The waterfalls' range, bytes.
    pub lo: f64,
    pub hi: f64,
}

impl PageScale {
    /// The scale of every chart of `model`.
    pub fn of(model: &ReportModel) -> PageScale {
        let mut hi = 1.0f64;
        let mut lo = 0.0f64;
        for v in model.variants() {
            let Some((_, r)) = model.representative(v) else {
                continue;
            };
            if let Some(g) = r.step1_account() {
                for row in waterfall_rows(g) {
                    hi = hi.max(row.from.max(row.to) as f64);
                    lo = lo.min(row.from.min(row.to) as f64);
                }
            }
            let t = &r.timeline;
            for series in [&t.device_used, &t.pool_reserved] {
                hi = hi.max(series.iter().map(|p| p.1 as f64).fold(0.0, f64::max));
            }
        }
        let (unit, unit_name) = byte_unit(hi);
        PageScale {
            unit,
            unit_name,
            lo,
            hi,
        }
    }

    /// The scale of one chart alone.
    fn alone(lo: f64, hi: f64) -> PageScale {
        let (unit, unit_name) = byte_unit(hi);
        PageScale {
            unit,
            unit_name,
            lo,
            hi,
        }
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
    let own_hi = rows
        .iter()
        .map(|r| r.from.max(r.to))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let own_lo = rows
        .iter()
        .map(|r| r.from.min(r.to))
        .min()
        .unwrap_or(0)
        .min(0) as f64;
    let scale = scale.unwrap_or_else(|| PageScale::alone(own_lo, own_hi));
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
        let (lx, ly) = rel(area, chart.backend_coord(&(lo / unit, n - i as f64 - 0.5)));
        let lines = wrap_label(&row_label(r), WATERFALL_LABEL_CHARS);
        let first = ly - (lines.len() as i32 - 1) * LINE / 2;
        for (k, line) in lines.iter().enumerate() {
            area.draw_text(
                line,
                &text(12, HPos::Right, VPos::Center),
                (lx - 8, first + k as i32 * LINE),
            )
            .map_err(&err)?;
        }
        let (vx, vy) = rel(area, chart.backend_coord(&(b.max(a), n - i as f64 - 0.5)));
        let value = if r.total {
            bytes((r.to - r.from).max(0) as u64)
        } else {
            super::signed_bytes(r.to - r.from)
        };
        area.draw_text(&value, &text(12, HPos::Left, VPos::Center), (vx + 6, vy))
            .map_err(&err)?;
    }
    Ok(())
}

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
        let (lx, ly) = rel(area, chart.backend_coord(&(x_lo, row - 0.5)));
        let first = ly - (lines.len() as i32 - 1) * LINE / 2;
        for (k, line) in lines.iter().enumerate() {
            area.draw_text(
                line,
                &text(12, HPos::Right, VPos::Center),
                (lx - 8, first + k as i32 * LINE),
            )
            .map_err(&err)?;
        }
    }
    Ok(())
}

/// The charts a report draws, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    /// What each prewarm moved against what it cost (matrices only).
    MovedVsCost,
    /// The step-1 timeline of a variant's representative rank.
    Timeline { variant: String },
    /// The account at step-1 end of a variant's representative rank.
    Waterfall { variant: String },
}

impl Chart {
    /// Every chart the model has data for.
    pub fn all(model: &ReportModel) -> Vec<Chart> {
        let mut out = Vec::new();
        if model
            .matrix
            .as_ref()
            .is_some_and(|m| !m.verdicts.is_empty())
        {
            out.push(Chart::MovedVsCost);
        }
        for v in model.variants() {
            if let Some((_, r)) = model.representative(v) {
                if !r.timeline.is_empty() {
                    out.push(Chart::Timeline {
                        variant: v.to_string(),
                    });
                }
                if r.step1_account().is_some() {
                    out.push(Chart::Waterfall {
                        variant: v.to_string(),
                    });
                }
            }
        }
        out
    }

    /// A file name for the chart (variant names made safe).
    pub fn file_stem(&self) -> String {
        let safe = |v: &str| -> String {
            v.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(64)
                .collect()
        };
        match self {
            Chart::MovedVsCost => "moved-vs-cost".into(),
            Chart::Timeline { variant } => format!("timeline-{}", safe(variant)),
            Chart::Waterfall { variant } => format!("account-{}", safe(variant)),
        }
    }

    /// Pixel size of the chart.
    pub fn size(&self, model: &ReportModel) -> (u32, u32) {
        match self {
            Chart::MovedVsCost => {
                let verdicts = model.matrix.as_ref().map_or(&[][..], |m| &m.verdicts);
                (
                    MOVED_SIZE.0,
                    MOVED_SIZE.1.max(MovedLayout::of(verdicts).height()),
                )
            }
            Chart::Timeline { .. } => TIMELINE_SIZE,
            Chart::Waterfall { variant } => {
                let (rows, lines) = model
                    .representative(variant)
                    .and_then(|(_, r)| r.step1_account())
                    .map_or((3, 1), |g| (waterfall_rows(g).len(), waterfall_lines(g)));
                (WATERFALL_WIDTH, waterfall_height(rows, lines))
            }
        }
    }

    /// Draws the chart; returns the timeline's markers (empty for others).
    pub fn draw<DB: DrawingBackend>(
        &self,
        model: &ReportModel,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<Vec<Glyph>, ReportError> {
        let missing = |what: &str| ReportError::Chart {
            chart: what.to_string(),
            what: "the model has no data for it".into(),
        };
        match self {
            Chart::MovedVsCost => {
                let verdicts = model
                    .matrix
                    .as_ref()
                    .map(|m| m.verdicts.as_slice())
                    .unwrap_or(&[]);
                draw_moved_vs_cost(area, verdicts)?;
                Ok(Vec::new())
            }
            Chart::Timeline { variant } => {
                let (a, r) = model
                    .representative(variant)
                    .ok_or_else(|| missing("timeline"))?;
                let span = if r
                    .timeline
                    .phase(Phase::Step1)
                    .is_some_and(|s| s.end_s > 0.0)
                {
                    "memory through step 1"
                } else {
                    "memory over the whole process (step 1 never finished)"
                };
                let title = format!("{variant}: {span} ({}, {})", a.id(), r.label);
                draw_timeline(area, &title, &r.timeline, Some(PageScale::of(model)))
            }
            Chart::Waterfall { variant } => {
                let (a, r) = model
                    .representative(variant)
                    .ok_or_else(|| missing("waterfall"))?;
                let g = r.step1_account().ok_or_else(|| missing("waterfall"))?;
                let title = format!(
                    "{variant}: device memory at {} ({}, {}, {:.2} s)",
                    r.account_when(),
                    a.id(),
                    r.label,
                    g.at_s
                );
                draw_waterfall(area, &title, g, Some(PageScale::of(model)))?;
                Ok(Vec::new())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_keep_the_peak_of_each_column_and_stack() {
        let a: Vec<Point> = vec![(0.0, 10), (0.5, 100), (0.51, 10)];
        let b: Vec<Point> = vec![(0.0, 5)];
        let e = envelopes(&[&a, &b], (0.0, 1.0), 4);
        assert_eq!(e[0], vec![10, 10, 100, 10]);
        assert_eq!(e[1], vec![15, 15, 105, 15]);
    }

    #[test]
    fn the_waterfall_ends_where_the_device_total_is() {
        let g = GapAccount {
            at_s: 1.0,
            device_used: 1000,
            pool_reserved: 400,
            out_of_pool: 600,
            parts: vec![
                crate::analysis::account::GapPart {
                    source: crate::analysis::account::PartSource::Library("nccl".into()),
                    context: None,
                    bytes: 500,
                    inferred: false,
                },
                crate::analysis::account::GapPart {
                    source: crate::analysis::account::PartSource::LocalMemoryDropped,
                    context: None,
                    bytes: -50,
                    inferred: false,
                },
            ],
            unexplained: 150,
        };
        let rows = waterfall_rows(&g);
        assert_eq!(rows.len(), 5);
        assert_eq!((rows[2].from, rows[2].to), (900, 850));
        assert_eq!(rows[3].to, 1000, "the remainder closes the gap");
        assert!(rows[4].total && rows[4].to == 1000);
    }
}
