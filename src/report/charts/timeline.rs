//! The memory timeline of one process: its stacked layers, the phase bands
//! and the event lanes, with the markers returned as glyphs.

use super::style::*;
use crate::analysis::phases::Phase;
use crate::analysis::timeline::{MarkerKind, Point, Timeline, value_at};
use crate::report::model::{marker_kind_label, marker_text};
use crate::report::renderer::ReportError;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

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

/// Room right of a timeline's plot (its lanes and its memory alike), px.
pub const TIMELINE_MARGIN_RIGHT: u32 = 24;

/// The chart of a timeline's axes: seconds across, a byte unit (or lanes) up.
type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One stacked memory layer of a timeline: its legend, colour and series.
type Layer = (String, RGBColor, Vec<Point>);

/// Draws a process's memory timeline: event lanes on top, stacked memory
/// (context, pool, out-of-pool by source, local-memory growth) under the
/// device-used line, phase bands behind, each named by `phase_name` (the
/// words of the text's phase table: "step 2 (died)"). Returns the markers
/// to draw.
pub fn draw_timeline<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    t: &Timeline,
    scale: Option<PageScale>,
    phase_name: &dyn Fn(Phase) -> String,
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
    let band_labels = draw_phase_bands(area, &mut main_chart, t, window, ymax, phase_name)?;
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
    draw_band_labels(area, &band_labels)?;
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
        .margin_right(TIMELINE_MARGIN_RIGHT)
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
        .margin_right(TIMELINE_MARGIN_RIGHT)
        .margin_bottom(6)
        .y_label_area_size(LEFT)
        .x_label_area_size(40)
        .build_cartesian_2d(window.0..window.1, 0f64..ymax)
        .map_err(chart_err("timeline"))
}

/// Phase bands behind everything. Returns their names, placed: a name
/// sits at the top left of its band where it fits there; the band at the
/// plot's right end (the phase a process died in, or the one after its
/// last step: often narrow) that it does not fit has its name on a second
/// row, right-aligned to the plot's edge, where it clears the names beside
/// it; else the band goes unnamed. No name runs past the plot.
fn draw_phase_bands<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &mut TimeChart<'_, DB>,
    t: &Timeline,
    window: (f64, f64),
    ymax: f64,
    name: &dyn Fn(Phase) -> String,
) -> Result<Vec<BandLabel>, ReportError> {
    let err = chart_err("timeline");
    let (plot_left, _) = rel(area, chart.backend_coord(&(window.0, ymax)));
    let (plot_right, _) = rel(area, chart.backend_coord(&(window.1, ymax)));
    let mut labels: Vec<BandLabel> = Vec::new();
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
        let text = name(b.phase);
        let width = area
            .estimate_text_size(&text, &band_label_style())
            .map_or(i32::MAX, |(w, _)| w as i32);
        let clear = |x: i32, y: i32, labels: &[BandLabel]| {
            labels.iter().filter(|l| l.at.1 == y).all(|l| {
                x >= l.at.0 + l.width + BAND_LABEL_GAP || x + width + BAND_LABEL_GAP <= l.at.0
            })
        };
        let inside = (px0 + 4, py + 4);
        let second = (px1 - 4 - width, py + 4 + BAND_LABEL_ROW);
        let at = if inside.0 + width + 4 <= px1 && clear(inside.0, inside.1, &labels) {
            Some(inside)
        } else if px1 >= plot_right
            && px1 - px0 >= BAND_LABEL_GAP
            && second.0 >= plot_left + 4
            && clear(second.0, second.1, &labels)
        {
            Some(second)
        } else {
            None
        };
        if let Some(at) = at {
            labels.push(BandLabel { text, at, width });
        }
    }
    Ok(labels)
}

/// A phase band's name where it is drawn (after the memory, over it).
struct BandLabel {
    text: String,
    /// Its top-left corner, px of the chart's area.
    at: (i32, i32),
    width: i32,
}

/// The second row of band names, px below the first.
const BAND_LABEL_ROW: i32 = 17;
/// The least room between two band names on a row, px.
const BAND_LABEL_GAP: i32 = 8;

fn band_label_style() -> TextStyle<'static> {
    ("sans-serif", 12)
        .into_font()
        .color(&RGBColor(0x55, 0x55, 0x55))
}

/// Draws the band names over everything drawn before them, each on a
/// white ground so the memory under it does not hide it.
fn draw_band_labels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    labels: &[BandLabel],
) -> Result<(), ReportError> {
    let err = chart_err("timeline");
    for l in labels {
        let (x, y) = l.at;
        area.draw(&Rectangle::new(
            [(x - 2, y - 1), (x + l.width + 2, y + 14)],
            WHITE.mix(0.8).filled(),
        ))
        .map_err(&err)?;
        area.draw_text(&l.text, &band_label_style(), (x, y))
            .map_err(&err)?;
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

/// Height of the event lanes above a timeline.
const LANES_HEIGHT: u32 = 150;
