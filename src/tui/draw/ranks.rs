//! The Ranks tab: every process of the attempt with its step-1 figures, the
//! worst rank of each marked, and the skew across ranks. The selected rank is
//! the one the Timeline, Events and Account tabs show.

use super::{now_label, scroll_offset, short_bytes, short_secs};
use crate::report::model::{AttemptView, Figure};
use crate::tui::shared::Shared;
use crate::tui::theme::{Theme, Tone};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};

pub fn draw(frame: &mut Frame, shared: &Shared, area: Rect) {
    let t = shared.theme;
    let Some(attempt) = shared.attempt() else {
        frame.render_widget(
            Paragraph::new(Span::styled("no attempt yet", t.dim())),
            area,
        );
        return;
    };
    let spread = spread_lines(attempt);
    // Wrapped here, so that the area below the table is as tall as they are
    // (a long note cut to one line would lose its end).
    let width = usize::from(area.width.max(20));
    let notes: Vec<String> = notes(attempt)
        .iter()
        .flat_map(|n| crate::report::text_layout::wrap(n, "", "  ", width))
        .collect();
    let extra = (spread.len() + notes.len()) as u16;
    let [table, below] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(extra.min(area.height / 2)),
    ])
    .areas(area);
    let visible = usize::from(table.height.saturating_sub(1));
    frame.render_widget(rank_table(rank_rows(shared, attempt, visible), t), table);
    let lines = below_lines(spread, notes, t);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), below);
}

/// The rows of the ranks the table has room for, scrolled to the selected
/// one; the worst of each figure marked where there are several ranks.
fn rank_rows<'a>(shared: &Shared, attempt: &'a AttemptView, visible: usize) -> Vec<Row<'a>> {
    let t = shared.theme;
    // The worst of each figure: the top of the model's distribution.
    let worst_peak = attempt.figure_max(Figure::Step1Peak);
    let worst_oop = attempt.figure_max(Figure::Step1OutOfPool);
    let slowest = attempt.figure_max(Figure::Step1Seconds);
    let several = attempt.training_ranks().count() > 1;
    let mark = |is_worst: bool| {
        if is_worst && several {
            t.tone(Tone::Bad)
        } else {
            t.text()
        }
    };
    let offset = scroll_offset(shared.rank, visible);
    let running = shared.data.is_running(attempt);
    attempt
        .ranks
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .map(|(i, r)| {
            let peak = r.step1_peak.map_or("?".into(), |b| short_bytes(b as f64));
            let row = Row::new(vec![
                Cell::from(r.process_name()),
                Cell::from(r.host.clone()),
                Cell::from(Span::styled(
                    peak,
                    mark(r.is_rank && r.step1_peak.is_some_and(|v| Some(v as f64) == worst_peak)),
                )),
                Cell::from(Span::styled(
                    short_bytes(r.step1_out_of_pool as f64),
                    mark(r.is_rank && Some(r.step1_out_of_pool as f64) == worst_oop),
                )),
                Cell::from(Span::styled(
                    r.step1_s.map_or("?".into(), short_secs),
                    mark(r.is_rank && r.step1_s.is_some_and(|v| Some(v) == slowest)),
                )),
                Cell::from(format!("{}/{}", r.step1_comms, r.account.nccl.len())),
                Cell::from(if r.is_rank {
                    now_label(r, running)
                } else {
                    "helper".into()
                }),
            ]);
            t.row(row, i == shared.rank)
        })
        .collect()
}

/// The ranks table: its columns and header.
fn rank_table(rows: Vec<Row<'_>>, t: Theme) -> Table<'_> {
    Table::new(
        rows,
        [
            Constraint::Length(9),
            Constraint::Min(6),
            Constraint::Length(7),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(16),
        ],
    )
    .header(
        Row::new([
            "rank",
            "host",
            "s1 peak",
            "s1 outside",
            "step 1",
            "comms",
            "now",
        ])
        .style(t.heading()),
    )
    .column_spacing(1)
}

/// Under the table: each figure's worst rank and skew, then the notes.
fn below_lines(
    spread: Vec<crate::report::ranks_text::SpreadLine>,
    notes: Vec<String>,
    t: Theme,
) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = spread
        .into_iter()
        .map(|l| {
            Line::from(vec![
                Span::styled(format!("{}: ", l.label), t.dim()),
                Span::styled(format!("{} {}", l.owner, l.value), t.heading()),
                Span::styled(format!(", skew {}", l.skew), t.dim()),
            ])
        })
        .collect();
    lines.extend(
        notes
            .into_iter()
            .map(|n| Line::from(Span::styled(n, t.dim()))),
    );
    lines
}

/// The worst rank and the skew of each figure, as every format words them.
fn spread_lines(a: &AttemptView) -> Vec<crate::report::ranks_text::SpreadLine> {
    a.spread
        .as_ref()
        .map(crate::report::ranks_text::spread_lines)
        .unwrap_or_default()
}

/// The attempt's notices, its processes' capture notes (capture off, the
/// probe's warnings), and which ranks are missing.
fn notes(a: &AttemptView) -> Vec<String> {
    let mut notes = a.notices.clone();
    for r in &a.ranks {
        let capture = crate::report::step_text::capture_notes(&r.account);
        notes.extend(capture.iter().map(|n| format!("{}: {n}", r.label)));
    }
    notes.extend(
        a.spread
            .as_ref()
            .and_then(crate::report::ranks_text::missing_ranks_line),
    );
    // Untrusted text (a probe's notice quotes a driver's words): its control
    // characters shown as escapes, as the terminal report shows them.
    notes
        .into_iter()
        .map(|n| crate::report::escape::terminal(&n).into_owned())
        .collect()
}
