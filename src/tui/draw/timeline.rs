//! The Timeline tab: device used, pool reserved and out-of-pool memory of the
//! selected process over time, with its phases as bands, its events as
//! markers, and a cursor that steps from event to event.

use super::{clip, short_bytes, short_secs};
use crate::report::model::RankView;
use crate::tui::process_tables::EventRow;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph};

/// What the timeline view hands its drawing: the zoom and the cursor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown {
    /// The zoom's name ("step 1").
    pub zoom: &'static str,
    /// The span shown (seconds on the process's clock); None without a
    /// process.
    pub window: Option<(f64, f64)>,
    /// The cursor: an index into the process's markers.
    pub cursor: Option<usize>,
    /// The cursor's position among the markers in the window.
    pub position: Option<usize>,
    /// How many markers the window holds.
    pub in_window: usize,
}

/// How each series is drawn (also its legend), told apart without colour.
const GLYPHS: [&str; 3] = ["⣿", "•", "▞"];

/// Width of the y-axis labels left of the chart.
const GUTTER: u16 = 7;

/// The points of a time-ordered series inside [a, b], reduced to at most
/// two per bucket (the lowest and highest, in time order) so that spikes
/// survive; the value in force at `a` starts the line.
pub fn downsample(points: &[(f64, f64)], a: f64, b: f64, buckets: usize) -> Vec<(f64, f64)> {
    let lo = points.partition_point(|p| p.0 < a);
    let hi = points.partition_point(|p| p.0 <= b);
    let mut out = Vec::with_capacity(buckets * 2 + 2);
    if lo > 0 {
        out.push((a, points[lo - 1].1));
    }
    let inside = &points[lo..hi];
    if inside.len() <= buckets * 2 || buckets == 0 {
        out.extend_from_slice(inside);
    } else {
        let width = (b - a) / buckets as f64;
        let mut i = 0;
        while i < inside.len() {
            let bucket = (((inside[i].0 - a) / width) as usize).min(buckets - 1);
            let mut j = i;
            let (mut min, mut max) = (inside[i], inside[i]);
            while j < inside.len()
                && (((inside[j].0 - a) / width) as usize).min(buckets - 1) == bucket
            {
                if inside[j].1 < min.1 {
                    min = inside[j];
                }
                if inside[j].1 > max.1 {
                    max = inside[j];
                }
                j += 1;
            }
            if min.0 <= max.0 {
                out.push(min);
                if max != min {
                    out.push(max);
                }
            } else {
                out.push(max);
                out.push(min);
            }
            i = j;
        }
    }
    // Hold the last value to the window's edge when the series goes on past it
    // (not when the recording ends inside the window).
    if hi < points.len()
        && let Some(&last) = out.last()
        && last.0 < b
    {
        out.push((b, last.1));
    }
    out
}

/// A step series as line segments: each value holds until the next point.
pub fn as_steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(points.len() * 2);
    for (i, p) in points.iter().enumerate() {
        if i > 0 {
            out.push((p.0, points[i - 1].1));
        }
        out.push(*p);
    }
    out
}

/// The column of time `t` in a strip `width` cells wide showing [a, b].
fn column(t: f64, a: f64, b: f64, width: u16) -> u16 {
    if width <= 1 || b <= a {
        return 0;
    }
    (((t - a) / (b - a)) * f64::from(width - 1))
        .round()
        .clamp(0.0, f64::from(width - 1)) as u16
}

pub fn draw(frame: &mut Frame, shared: &Shared, shown: &Shown, area: Rect) {
    let t = shared.theme;
    let (Some(rank), Some((a, b))) = (shared.rank(), shown.window) else {
        frame.render_widget(
            Paragraph::new(Span::styled("no process in this attempt", t.dim())),
            area,
        );
        return;
    };
    let [title, chart_row, bands, markers, detail] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(3),
    ])
    .areas(area);
    let mut spans = vec![Span::styled(format!("zoom {} ", shown.zoom), t.heading())];
    spans.push(Span::styled(
        format!("{}–{}  ", short_secs(a), short_secs(b)),
        t.dim(),
    ));
    let series = &shared.tables().series;
    for (i, s) in series.iter().enumerate() {
        spans.push(Span::styled(
            format!("{} ", GLYPHS[i % GLYPHS.len()]),
            t.series(i),
        ));
        spans.push(Span::styled(format!("{}  ", s.name), t.text()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), title);

    let [gutter, plot] =
        Layout::horizontal([Constraint::Length(GUTTER), Constraint::Min(1)]).areas(chart_row);
    let buckets = usize::from(plot.width) * 2;
    let sampled: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| as_steps(&downsample(&s.points, a, b, buckets)))
        .collect();
    let ymax = sampled
        .iter()
        .flatten()
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.05;
    let markers_kind = [Marker::Braille, Marker::Dot, Marker::Quadrant];
    let datasets: Vec<Dataset> = sampled
        .iter()
        .enumerate()
        .map(|(i, pts)| {
            Dataset::default()
                .marker(markers_kind[i % markers_kind.len()])
                .graph_type(GraphType::Line)
                .style(t.series(i))
                .data(pts)
        })
        .collect();
    if sampled.iter().all(|s| s.is_empty()) {
        frame.render_widget(
            Paragraph::new(Span::styled("no memory samples in this window", t.dim())),
            plot,
        );
    } else {
        frame.render_widget(
            Chart::new(datasets)
                .x_axis(Axis::default().bounds([a, b]))
                .y_axis(Axis::default().bounds([0.0, ymax])),
            plot,
        );
    }
    let labels: Vec<Line> = (0..gutter.height)
        .map(|row| {
            let text = if row == 0 {
                short_bytes(ymax)
            } else if row + 1 == gutter.height {
                "0".into()
            } else if row == gutter.height / 2 {
                short_bytes(ymax / 2.0)
            } else {
                String::new()
            };
            Line::from(Span::styled(format!("{text:>6}┤"), t.dim()))
        })
        .collect();
    frame.render_widget(Paragraph::new(labels), gutter);

    draw_bands(frame, shared, rank, a, b, strip(bands));
    draw_markers(frame, shared, shown.cursor, a, b, strip(markers));
    draw_detail(frame, shared, shown, detail);
}

/// The part of a strip row under the plot.
fn strip(row: Rect) -> Rect {
    Rect {
        x: row.x + GUTTER,
        width: row.width.saturating_sub(GUTTER),
        ..row
    }
}

fn draw_bands(frame: &mut Frame, shared: &Shared, rank: &RankView, a: f64, b: f64, area: Rect) {
    let t = shared.theme;
    let w = area.width;
    let mut cells: Vec<char> = vec![' '; usize::from(w)];
    // No step placed: the one band is "before any step", not setup.
    let bands = &rank.timeline.phases;
    let no_step = bands
        .iter()
        .all(|b| b.phase == crate::analysis::phases::Phase::Setup);
    for band in bands {
        if band.end_s < a || band.start_s > b {
            continue;
        }
        let x0 = usize::from(column(band.start_s.max(a), a, b, w));
        let x1 = usize::from(column(band.end_s.min(b), a, b, w));
        for c in cells.iter_mut().take(x1 + 1).skip(x0) {
            *c = '─';
        }
        cells[x0] = '├';
        let name = crate::report::phase_word(no_step, band.phase, None);
        for (k, ch) in name.chars().enumerate() {
            if x0 + 1 + k < x1 {
                cells[x0 + 1 + k] = ch;
            }
        }
    }
    let text: String = cells.into_iter().collect();
    frame.render_widget(Paragraph::new(Span::styled(text, t.dim())), area);
}

fn draw_markers(
    frame: &mut Frame,
    shared: &Shared,
    cursor: Option<usize>,
    a: f64,
    b: f64,
    area: Rect,
) {
    let t = shared.theme;
    let w = area.width;
    let mut cells: Vec<char> = vec![' '; usize::from(w)];
    let markers = &shared.tables().markers;
    let lo = markers.partition_point(|e| e.t_s < a);
    let hi = markers.partition_point(|e| e.t_s <= b);
    for e in &markers[lo..hi] {
        cells[usize::from(column(e.t_s, a, b, w))] = if e.failed { '✖' } else { '▲' };
    }
    let cursor = cursor
        .and_then(|c| markers.get(c))
        .map(|e| usize::from(column(e.t_s, a, b, w)));
    let mut spans = Vec::new();
    let text: String = cells.iter().collect();
    match cursor {
        Some(c) => {
            let before: String = cells[..c].iter().collect();
            let after: String = cells[c + 1..].iter().collect();
            spans.push(Span::styled(before, t.marker()));
            spans.push(Span::styled(cells[c].to_string(), t.selected()));
            spans.push(Span::styled(after, t.marker()));
        }
        None => spans.push(Span::styled(text, t.marker())),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// One line about an event: when, where, what and how much.
pub fn event_line(e: &EventRow) -> String {
    let mut s = format!("{} · {}", short_secs(e.t_s), e.phase_name);
    if let Some(n) = e
        .step
        .filter(|_| e.phase != crate::analysis::phases::Phase::Step1)
    {
        s += &format!(" (step {n})");
    }
    s += &format!(" · {}", e.kind.label());
    if !e.library.is_empty() && e.library != e.kind.label() && e.library != "compile" {
        s += &format!(" · {}", e.library);
    }
    if let Some(b) = e.bytes.filter(|b| *b > 0) {
        s += &format!(" · {}", crate::report::bytes(b));
    }
    if let Some(d) = e.seconds {
        s += &format!(" · {}", crate::report::seconds(d));
    }
    s
}

fn draw_detail(frame: &mut Frame, shared: &Shared, shown: &Shown, area: Rect) {
    let t = shared.theme;
    let w = usize::from(area.width);
    let lines = match shown.cursor.and_then(|c| shared.tables().markers.get(c)) {
        Some(e) => {
            let total = shown.in_window;
            let pos = shown.position.map_or(0, |p| p + 1);
            vec![
                Line::from(vec![
                    Span::styled(format!("event {pos}/{total} "), t.heading()),
                    Span::raw(clip(&event_line(e), w.saturating_sub(14))),
                ]),
                Line::from(clip(&e.key, w)),
                Line::from(Span::styled(
                    clip(
                        &e.detail
                            .iter()
                            .skip(1)
                            .map(|(k, v)| format!("{k}: {v}"))
                            .collect::<Vec<_>>()
                            .join(" · "),
                        w,
                    ),
                    t.dim(),
                )),
            ]
        }
        None => vec![Line::from(Span::styled(
            "no event in this window (1 setup · 2 step 1 · 3 everything)",
            t.dim(),
        ))],
    };
    frame.render_widget(Paragraph::new(lines), area);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_keeps_spikes_and_bounds_the_points() {
        let mut pts: Vec<(f64, f64)> = (0..100_000).map(|i| (i as f64 / 1000.0, 1.0)).collect();
        pts[50_000].1 = 99.0;
        let d = downsample(&pts, 0.0, 100.0, 80);
        assert!(d.len() <= 80 * 2 + 2, "{} points", d.len());
        assert!(d.iter().any(|p| p.1 == 99.0), "the spike is kept");
        assert!(d.windows(2).all(|w| w[0].0 <= w[1].0), "time-ordered");
    }

    #[test]
    fn downsampling_starts_with_the_value_in_force() {
        let pts = [(0.0, 5.0), (10.0, 7.0), (20.0, 9.0)];
        let d = downsample(&pts, 5.0, 15.0, 10);
        assert_eq!(d.first(), Some(&(5.0, 5.0)));
        assert_eq!(d[1], (10.0, 7.0));
        assert_eq!(d.last(), Some(&(15.0, 7.0)));
    }

    #[test]
    fn columns_span_the_strip() {
        assert_eq!(column(0.0, 0.0, 10.0, 11), 0);
        assert_eq!(column(10.0, 0.0, 10.0, 11), 10);
        assert_eq!(column(5.0, 0.0, 10.0, 11), 5);
        assert_eq!(column(99.0, 0.0, 10.0, 11), 10);
    }
}
