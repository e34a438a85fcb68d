//! The Events tab: every event of the selected process as a table that
//! filters (`/`), sorts by any column and opens an event's detail. Only the
//! visible rows are built, so a million-event process draws as fast as ten.

use super::timeline::event_line;
use super::{clip, scroll_offset, short_bytes};
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use unicode_width::UnicodeWidthStr;

/// Columns of the events table (also its sort keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Time,
    Phase,
    Kind,
    Library,
    Bytes,
    Key,
}

impl Column {
    /// All columns, left to right.
    pub const ALL: [Column; 6] = [
        Column::Time,
        Column::Phase,
        Column::Kind,
        Column::Library,
        Column::Bytes,
        Column::Key,
    ];

    /// Header text.
    pub fn title(self) -> &'static str {
        match self {
            Column::Time => "time",
            Column::Phase => "phase",
            Column::Kind => "kind",
            Column::Library => "library",
            Column::Bytes => "bytes",
            Column::Key => "kernel / communicator / key",
        }
    }
}

/// What the events view hands its drawing: its rows, selection, sort and
/// filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown<'a> {
    /// Indices into the process's events, filtered and sorted.
    pub rows: &'a [usize],
    /// The selected row (index into `rows`).
    pub selected: usize,
    pub sort: Column,
    pub descending: bool,
    pub filter: &'a str,
    /// The filter is being typed.
    pub editing: bool,
}

pub fn draw(frame: &mut Frame, shared: &Shared, ev: &Shown, area: Rect) {
    let t = shared.theme;
    let [head, table, detail] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(2),
        Constraint::Length(1),
    ])
    .areas(area);
    if shared.rank().is_none() {
        frame.render_widget(
            Paragraph::new(Span::styled("no process in this attempt", t.dim())),
            area,
        );
        return;
    }
    let events = &shared.tables().events;
    let sort = ev.sort;
    let mut spans = vec![
        Span::styled(
            format!("{} of {} events", ev.rows.len(), events.len()),
            t.heading(),
        ),
        Span::styled(
            format!(
                " · sorted by {} {}",
                sort.title(),
                if ev.descending { "↓" } else { "↑" }
            ),
            t.dim(),
        ),
    ];
    if ev.editing || !ev.filter.is_empty() {
        spans.push(Span::styled(" · filter /", t.dim()));
        spans.push(Span::styled(
            format!("{}{}", ev.filter, if ev.editing { "▏" } else { "" }),
            t.heading(),
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), head);

    let visible = usize::from(table.height.saturating_sub(1));
    let offset = scroll_offset(ev.selected, visible);
    let rows: Vec<Row> = ev
        .rows
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .map(|(i, &idx)| {
            let e = &events[idx];
            let row = Row::new(vec![
                Cell::from(format!("{:.3}", e.t_s)),
                Cell::from(e.phase_name.clone()),
                Cell::from(e.kind.label()),
                Cell::from(clip(&e.library, 14)),
                Cell::from(e.bytes.map_or(String::new(), |b| short_bytes(b as f64))),
                Cell::from(e.key.clone()),
            ]);
            let row = if e.failed {
                row.style(t.tone(crate::tui::theme::Tone::Bad))
            } else {
                row
            };
            t.row(row, i == ev.selected)
        })
        .collect();
    let header: Vec<Cell> = Column::ALL
        .iter()
        .map(|c| {
            let title = if *c == sort {
                format!("{}{}", c.title(), if ev.descending { "↓" } else { "↑" })
            } else {
                c.title().to_string()
            };
            Cell::from(title)
        })
        .collect();
    // As wide as the longest phase name shown ("before any step", "after
    // last step"), so a phase is never cut.
    let phase_width = events
        .iter()
        .map(|e| e.phase_name.width())
        .max()
        .unwrap_or(5)
        .clamp(5, 15) as u16;
    frame.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(8),
                Constraint::Length(phase_width),
                Constraint::Length(9),
                Constraint::Length(14),
                Constraint::Length(6),
                Constraint::Min(10),
            ],
        )
        .header(Row::new(header).style(t.heading()))
        .column_spacing(1),
        table,
    );
    let line = match ev.rows.get(ev.selected).and_then(|&i| events.get(i)) {
        Some(e) => Span::styled(clip(&event_line(e), usize::from(detail.width)), t.dim()),
        None if !ev.filter.is_empty() => {
            Span::styled("no event matches the filter (Esc in / clears it)", t.dim())
        }
        None => Span::styled("this process recorded no event", t.dim()),
    };
    frame.render_widget(Paragraph::new(line), detail);
}
