//! Panels over the current view: help, a verdict's evidence, an event's
//! detail, and the question asked before leaving a live run.

use super::matrix::{runs, stat_bytes, stat_secs, verdict_label};
use super::{centered, timeline::event_line};
use crate::report::model::VerdictView;
use crate::report::{bytes, seconds};
use crate::tui::process_tables::EventRow;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use unicode_width::UnicodeWidthStr;

/// A panel over the current view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlay {
    Help,
    /// A matrix row's verdict, evidence and costs (index into the matrix's
    /// variants).
    Verdict(usize),
    /// One event's every field (index into `ProcessTables::events`).
    Event(usize),
    /// One timeline marker's detail (index into `ProcessTables::markers`).
    Marker(usize),
    /// Leaving while the run goes on: stop it, leave it running, or stay.
    ConfirmQuit,
}

/// The keys, as the help panel and docs/reports.md ("The dashboard") list them.
pub const KEYS: &[(&str, &str)] = &[
    ("q / Esc", "leave (asks first while a run is going)"),
    ("?", "this help"),
    ("Tab / Shift-Tab", "next / previous view"),
    (
        "↑ ↓ / j k",
        "move in a list; change rank in Timeline, Account",
    ),
    (
        "← → / h l",
        "Timeline: previous / next event; Events: sort column",
    ),
    ("g / G", "first / last (row, event, log line)"),
    ("Enter", "verdict evidence, event detail, rank's timeline"),
    ("[ / ]", "previous / next attempt"),
    ("1 2 3 / z", "Timeline zoom: setup, step 1, everything"),
    ("/", "Events: filter (Enter keeps, Esc clears)"),
    ("s / r", "Events: sort by next column / reverse"),
    (
        "Ctrl-C",
        "live run: forward to the training; again: kill it",
    ),
];

/// Draws `overlay` over the frame, scrolled `scroll` lines.
pub fn draw(frame: &mut Frame, shared: &Shared, overlay: Overlay, scroll: usize) {
    let t = shared.theme;
    let area = frame.area();
    let (title, lines, w, h): (String, Vec<Line>, u16, u16) = match overlay {
        Overlay::Help => (
            "keys".into(),
            KEYS.iter()
                .map(|(k, v)| {
                    Line::from(vec![
                        Span::styled(format!("{k:<16}"), t.heading()),
                        Span::raw(*v),
                    ])
                })
                .collect(),
            76,
            KEYS.len() as u16 + 2,
        ),
        Overlay::Verdict(row) => verdict(shared, row),
        Overlay::Event(i) => event(shared, shared.tables().events.get(i)),
        Overlay::Marker(i) => event(shared, shared.tables().markers.get(i)),
        Overlay::ConfirmQuit => (
            "the run is still going".into(),
            vec![
                Line::from("Leaving the dashboard does not have to stop the training."),
                Line::from(""),
                Line::from(vec![
                    Span::styled("  y ", t.heading()),
                    Span::raw("stop it: Ctrl-C to the training, no further attempts"),
                ]),
                Line::from(vec![
                    Span::styled("  d ", t.heading()),
                    Span::raw("leave, let it finish (its output continues here)"),
                ]),
                Line::from(vec![Span::styled("  n ", t.heading()), Span::raw("stay")]),
            ],
            62,
            7,
        ),
    };
    let rect: Rect = centered(area, w, h.max(3));
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(format!(" {title} "), t.heading()))
        .title_bottom(Span::styled(" Esc closes · j k scroll ", t.dim()));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll as u16, 0))
            .block(block),
        rect,
    );
}

fn verdict(shared: &Shared, row: usize) -> (String, Vec<Line<'static>>, u16, u16) {
    let t = shared.theme;
    let area = (120u16, 30u16);
    let model = &shared.data.model;
    let Some(row) = model.matrix.as_ref().and_then(|m| m.variants.get(row)) else {
        return ("verdict".into(), vec![], area.0, 3);
    };
    let mut lines = Vec::new();
    match model.verdict(&row.name) {
        Some(v) => {
            let (label, tone) = verdict_label(v);
            lines.push(Line::from(vec![
                Span::styled(format!("{} ", row.name), t.heading()),
                Span::styled(label, t.tone(tone)),
            ]));
            lines.push(Line::from(v.headline.clone()));
            lines.push(Line::from(""));
            lines.extend(
                verdict_lines(v)
                    .into_iter()
                    .map(|l| Line::from(format!("- {l}"))),
            );
        }
        None => lines.push(Line::from(Span::styled(
            "no verdict for this variant (the baseline, or no known prewarm)",
            t.dim(),
        ))),
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        format!(
            "medians over {} runs: step-1 peak {}, out of pool {}, step 1 {}, setup {}",
            runs(row),
            stat_bytes(row.step1_device_peak),
            stat_bytes(row.step1_out_of_pool),
            stat_secs(row.step1_s),
            stat_secs(row.setup_s)
        ),
        t.dim(),
    )));
    let h = (lines.len() as u16 + 6).min(area.1);
    (format!("verdict: {}", row.name), lines, area.0, h)
}

/// A verdict's story: its prewarms, its class with its confidence, the
/// evidence and costs (the model's sentences), and what still lands in step 1.
fn verdict_lines(v: &VerdictView) -> Vec<String> {
    let mut lines = vec![
        format!("prewarms: {}", v.prewarms.join(", ")),
        v.class_line.clone(),
    ];
    lines.extend(v.evidence.iter().cloned());
    if !v.still_in_step1.is_empty() {
        let parts: Vec<String> = v
            .still_in_step1
            .iter()
            .map(|s| {
                let mut t = s.class.label().to_string();
                if s.bytes > 0 {
                    t += &format!(" {}", bytes(s.bytes));
                }
                if s.seconds > 0.0 {
                    t += &format!(" {}", seconds(s.seconds));
                }
                t
            })
            .collect();
        lines.push(format!("still in step 1: {}", parts.join(", ")));
    }
    lines
}

fn event(shared: &Shared, e: Option<&EventRow>) -> (String, Vec<Line<'static>>, u16, u16) {
    let t = shared.theme;
    let Some(e) = e else {
        return ("event".into(), vec![], 60, 3);
    };
    let mut lines = vec![Line::from(event_line(e)), Line::from("")];
    let key_w = e.detail.iter().map(|(k, _)| k.width()).max().unwrap_or(0);
    for (k, v) in &e.detail {
        lines.push(Line::from(vec![
            Span::styled(format!("{k:<key_w$}  "), t.heading()),
            Span::raw(v.clone()),
        ]));
    }
    // Tall enough for the lines as they wrap (a what-if or a fix is often
    // longer than one line), up to 30 rows; beyond that j/k scroll.
    let w: u16 = 110;
    let rows: usize = lines
        .iter()
        .map(|l| l.width().max(1).div_ceil(usize::from(w - 2)))
        .sum();
    let h = (rows as u16 + 4).min(30);
    (format!("{} event", e.kind.label()), lines, w, h)
}
