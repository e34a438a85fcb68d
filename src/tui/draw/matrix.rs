//! The Matrix tab: variants with medians ± spread and each prewarm's verdict
//! (for a single-variant run: its attempts).

use super::{attempt_status, clip, scroll_offset, short_bytes, short_secs};
use crate::report::model::{Figure, MatrixView, Spread, VariantRow, VerdictView};
use crate::tui::shared::Shared;
use crate::tui::theme::Tone;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};
use unicode_width::UnicodeWidthStr;

/// "968M ±2.0M" (the spread is half the range over repeats), or the median alone.
pub fn stat_bytes(s: Option<Spread>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ±{}",
            short_bytes(s.median),
            short_bytes(s.range() / 2.0)
        ),
        Some(s) => short_bytes(s.median),
        None => "?".into(),
    }
}

/// A spread of seconds in at most five characters: "1.6s", "19ms", "0".
fn short_spread(s: f64) -> String {
    if s >= 0.1 {
        format!("{s:.1}s")
    } else if s >= 0.0005 {
        format!("{:.0}ms", s * 1000.0)
    } else {
        "0".into()
    }
}

/// "10.4s ±1.6s", or the median alone.
pub fn stat_secs(s: Option<Spread>) -> String {
    match s {
        Some(s) if s.n > 1 => format!(
            "{} ±{}",
            short_secs(s.median),
            short_spread(s.range() / 2.0)
        ),
        Some(s) => short_secs(s.median),
        None => "?".into(),
    }
}

/// "2/3": the attempts that count, of those planned.
pub fn runs(v: &VariantRow) -> String {
    format!("{}/{}", v.runs, v.expected)
}

/// A verdict's class as the matrix shows it ("WORKS") and how it reads.
pub fn verdict_label(v: &VerdictView) -> (String, Tone) {
    (v.label.to_uppercase(), Tone::of_verdict(v.class))
}

/// The verdict of a variant's row, if it was judged.
fn verdict_of<'m>(m: &'m MatrixView, v: &VariantRow) -> Option<&'m VerdictView> {
    m.verdicts.iter().find(|x| x.variant == v.name)
}

/// The matrix with `row` selected: a variant, or an attempt of a
/// single-variant run.
pub fn draw(frame: &mut Frame, shared: &Shared, row: usize, area: Rect) {
    match &shared.data.model.matrix {
        Some(m) => draw_matrix(frame, shared, m, row, area),
        None => draw_attempts(frame, shared, row, area),
    }
}

fn draw_matrix(frame: &mut Frame, shared: &Shared, m: &MatrixView, row: usize, area: Rect) {
    let t = shared.theme;
    let table_h = (m.variants.len() as u16 + 1).min(area.height.saturating_sub(4).max(2));
    let [head, table, below] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(table_h),
        Constraint::Min(0),
    ])
    .areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!("{} variants", m.variants.len()), t.heading()),
            Span::styled(
                format!(
                    " · cache {}{} · vs '{}' · step 1: median ±half-range",
                    m.cache,
                    if m.isolated { "" } else { " (NOT isolated)" },
                    m.baseline
                ),
                t.dim(),
            ),
        ])),
        head,
    );
    let wide = area.width >= 92;
    let mut header = vec!["variant", "runs", "peak", "out of pool"];
    if wide {
        header.push("headroom");
    }
    header.extend(["step 1", "setup", "verdict"]);
    let (widths, name_width) = matrix_widths(m, wide, area.width);
    let visible = table.height.saturating_sub(1) as usize;
    let offset = scroll_offset(row, visible);
    let rows: Vec<Row> = m
        .variants
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .map(|(i, r)| {
            let mut cells = vec![
                Cell::from(clip(&r.name, usize::from(name_width))),
                Cell::from(runs(r)),
                Cell::from(stat_bytes(r.step1_device_peak)),
                Cell::from(stat_bytes(r.step1_out_of_pool)),
            ];
            if wide {
                cells.push(Cell::from(
                    r.step1_tightest_headroom
                        .map_or("-".into(), |s| short_bytes(s.median)),
                ));
            }
            cells.push(Cell::from(stat_secs(r.step1_s)));
            cells.push(Cell::from(stat_secs(r.setup_s)));
            cells.push(match verdict_of(m, r) {
                Some(v) => {
                    let (label, tone) = verdict_label(v);
                    Cell::from(Span::styled(label, t.tone(tone)))
                }
                None if r.is_baseline => Cell::from(Span::styled("baseline", t.dim())),
                None => Cell::from(Span::styled("-", t.dim())),
            });
            t.row(Row::new(cells), i == row)
        })
        .collect();
    frame.render_widget(
        Table::new(rows, widths)
            .header(Row::new(header).style(t.heading()))
            .column_spacing(1),
        table,
    );
    draw_selected_verdict(frame, shared, m, row, below);
}

/// The matrix table's column widths, and the names' column among them: the
/// verdict column as wide as its longest entry ("INCONCLUSIVE"), the names
/// giving way first when the row is short of room (clipped with "…").
fn matrix_widths(m: &MatrixView, wide: bool, width: u16) -> (Vec<Constraint>, u16) {
    let longest = m.variants.iter().map(|r| r.name.width()).max().unwrap_or(7);
    let verdict_width = m
        .variants
        .iter()
        .map(|r| match verdict_of(m, r) {
            Some(v) => verdict_label(v).0.width(),
            None if r.is_baseline => "baseline".len(),
            None => 1,
        })
        .chain(["verdict".len()])
        .max()
        .unwrap_or(7) as u16;
    let mut figures = vec![4, 10, 11];
    if wide {
        figures.push(8);
    }
    figures.extend([11, 11, verdict_width]);
    let others: u16 = figures.iter().sum::<u16>() + figures.len() as u16;
    let name_width = (longest.clamp(7, 24) as u16).min(width.saturating_sub(others).max(7));
    let widths: Vec<Constraint> = std::iter::once(name_width)
        .chain(figures)
        .map(Constraint::Length)
        .collect();
    (widths, name_width)
}

fn draw_selected_verdict(
    frame: &mut Frame,
    shared: &Shared,
    m: &MatrixView,
    row: usize,
    area: Rect,
) {
    let t = shared.theme;
    let mut lines = Vec::new();
    if let Some(r) = m.variants.get(row) {
        match verdict_of(m, r) {
            Some(v) => {
                let (label, tone) = verdict_label(v);
                lines.push(Line::from(vec![
                    Span::styled(format!("{} ", r.name), t.heading()),
                    Span::styled(format!("[{}] ", r.prewarms.join(", ")), t.dim()),
                    Span::styled(label, t.tone(tone)),
                    Span::styled("  (Enter: evidence and costs)", t.dim()),
                ]));
                lines.push(Line::from(v.headline.clone()));
            }
            None if r.is_baseline => lines.push(Line::from(Span::styled(
                format!("{}: the baseline every prewarm is judged against", r.name),
                t.dim(),
            ))),
            None => lines.push(Line::from(Span::styled(
                format!(
                    "{}: names no known prewarm, so it is compared but not judged",
                    r.name
                ),
                t.dim(),
            ))),
        }
    }
    let excluded = m.excluded.iter().map(|e| format!("excluded: {e}"));
    for n in m.notes.iter().cloned().chain(excluded) {
        lines.push(Line::from(Span::styled(format!("note: {n}"), t.dim())));
    }
    let [_, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), rest);
}

/// A single-variant run: one row per attempt with its worst-rank figures.
fn draw_attempts(frame: &mut Frame, shared: &Shared, row: usize, area: Rect) {
    let t = shared.theme;
    let [head, table] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(
                format!("{} attempt(s)", shared.data.model.attempts.len()),
                t.heading(),
            ),
            Span::styled(
                " · one variant, so no verdicts · worst rank's figures",
                t.dim(),
            ),
        ])),
        head,
    );
    let visible = table.height.saturating_sub(1) as usize;
    let offset = scroll_offset(row, visible);
    let rows: Vec<Row> = shared
        .data
        .model
        .attempts
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .map(|(i, a)| {
            let max = |f: Figure| a.figure_max(f);
            let (status, tone) = attempt_status(a, shared.data.is_running(a));
            let cells = Row::new(vec![
                Cell::from(clip(&a.id(), 24)),
                Cell::from(Span::styled(status, t.tone(tone))),
                Cell::from(a.training_ranks().count().to_string()),
                Cell::from(max(Figure::Step1Peak).map_or("?".into(), short_bytes)),
                Cell::from(max(Figure::Step1OutOfPool).map_or("?".into(), short_bytes)),
                Cell::from(max(Figure::Step1Seconds).map_or("?".into(), short_secs)),
            ]);
            t.row(cells, i == row)
        })
        .collect();
    frame.render_widget(
        Table::new(
            rows,
            [
                Constraint::Min(10),
                Constraint::Length(12),
                Constraint::Length(5),
                Constraint::Length(10),
                Constraint::Length(11),
                Constraint::Length(8),
            ],
        )
        .header(
            Row::new([
                "attempt",
                "status",
                "ranks",
                "s1 peak",
                "s1 outside",
                "step 1",
            ])
            .style(t.heading()),
        ),
        table,
    );
}
