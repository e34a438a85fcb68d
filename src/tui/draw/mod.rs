//! Drawing: pure functions from the state to a frame. Every view reads the
//! one report model (`Shared::data.model`, the same one every format
//! renders) through [`Shared`] and what its own state hands it; the words a
//! view shares with the other formats come from `crate::report`. Nothing
//! here reads the dashboard's `App` or a view's keys: `App::draw` draws the
//! frame around the view ([`chrome`]), asks the view to draw itself (each
//! view calls its own file here), then draws the panel over it
//! ([`overlay`]). It works on any ratatui backend (the terminal, or
//! `TestBackend` in the tests) and only touches what is visible: long
//! tables render their visible rows, series are down-sampled to the chart's
//! width.

pub mod account;
pub mod events;
pub mod live;
pub mod matrix;
pub mod overlay;
pub mod ranks;
pub mod timeline;

use crate::analysis::phases::Phase;
use crate::report::model::{AttemptView, RankView};
use crate::tui::shared::{RunState, Shared};
use crate::tui::theme::Tone;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr;

/// What the dashboard shows around its view.
#[derive(Debug, Clone, PartialEq)]
pub struct Chrome<'a> {
    /// The titles of the tabs shown, in order.
    pub tabs: Vec<&'static str>,
    /// Which of them is the view shown.
    pub selected: Option<usize>,
    /// A message for the status bar, shown instead of the hints.
    pub status: Option<&'a str>,
    /// The view's key hints.
    pub hints: &'static str,
    /// A load error (the folder is not readable yet, or broke), shown while
    /// there is no attempt.
    pub error: Option<&'a str>,
}

/// Draws the frame around the view — the tabs, the selection, the run's
/// damaged files, the status bar — and returns the area the view draws in.
pub fn chrome(frame: &mut Frame, shared: &Shared, chrome: &Chrome) -> Rect {
    let damaged = !shared.data.model.incomplete.is_empty();
    let [tabs, context, warning, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(u16::from(damaged)),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_tabs(frame, shared, chrome, tabs);
    draw_context(frame, shared, chrome.error, context);
    if damaged {
        draw_incomplete(frame, shared, warning);
    }
    draw_status(frame, shared, chrome, status);
    body
}

fn draw_tabs(frame: &mut Frame, shared: &Shared, chrome: &Chrome, area: Rect) {
    let t = shared.theme;
    let mut spans = Vec::new();
    for (i, title) in chrome.tabs.iter().enumerate() {
        let style = if Some(i) == chrome.selected {
            t.selected().patch(t.heading())
        } else {
            t.text()
        };
        spans.push(Span::styled(format!(" {title} "), style));
        spans.push(Span::raw(" "));
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let title = format!("prewarm-doctor · {}", shared.data.title());
    let room = (area.width as usize).saturating_sub(used + 1);
    if room > 8 {
        let shown = clip(&title, room);
        let pad = room - shown.width();
        spans.push(Span::raw(" ".repeat(pad + 1)));
        spans.push(Span::styled(shown, t.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_context(frame: &mut Frame, shared: &Shared, error: Option<&str>, area: Rect) {
    let t = shared.theme;
    let mut spans = Vec::new();
    match shared.attempt() {
        Some(a) => {
            spans.push(Span::styled("attempt ", t.dim()));
            spans.push(Span::styled(a.id(), t.heading()));
            spans.push(Span::raw(" "));
            let (status, tone) = attempt_status(a, shared.data.is_running(a));
            spans.push(Span::styled(status, t.tone(tone)));
            spans.push(Span::styled(
                format!(
                    " ({}/{})",
                    shared.attempt + 1,
                    shared.data.model.attempts.len()
                ),
                t.dim(),
            ));
            if let Some(r) = shared.rank() {
                spans.push(Span::styled(" · ", t.dim()));
                spans.push(Span::styled(r.label.clone(), t.heading()));
                spans.push(Span::styled(
                    format!(" ({}/{})", shared.rank + 1, a.ranks.len()),
                    t.dim(),
                ));
            }
        }
        None => spans.push(Span::styled(
            match error {
                Some(e) => e.to_string(),
                None => "waiting for the first attempt to write its folder".into(),
            },
            t.dim(),
        )),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The run's damaged files, under the context line: the first one's
/// sentence, and how many more (the JSON and stderr name each).
fn draw_incomplete(frame: &mut Frame, shared: &Shared, area: Rect) {
    let t = shared.theme;
    let incomplete = &shared.data.model.incomplete;
    let more = match incomplete.len() {
        0 | 1 => String::new(),
        n => format!(" (+{} more damaged files)", n - 1),
    };
    let first = incomplete.first().map(|d| d.sentence()).unwrap_or_default();
    let room = (area.width as usize).saturating_sub(more.width());
    let line = format!("{}{more}", clip(&first, room));
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(line, t.tone(Tone::Bad)))),
        area,
    );
}

fn draw_status(frame: &mut Frame, shared: &Shared, chrome: &Chrome, area: Rect) {
    let t = shared.theme;
    let mut spans = Vec::new();
    match shared.run {
        RunState::Running => spans.push(Span::styled(" RUNNING ", t.selected())),
        RunState::Stopping => spans.push(Span::styled(" STOPPING ", t.selected())),
        RunState::Watching => spans.push(Span::styled(" WATCHING ", t.selected())),
        RunState::Finished(c) => spans.push(Span::styled(format!(" EXIT {c} "), t.selected())),
        RunState::Replay => {}
    }
    if !spans.is_empty() {
        spans.push(Span::raw(" "));
    }
    match chrome.status {
        Some(s) => spans.push(Span::styled(s.to_string(), t.heading())),
        None => spans.push(Span::styled(chrome.hints, t.dim())),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// How an attempt stands: "running" (the attempt in progress), "not
/// started", "interrupted", "exit N", "no exit status".
pub fn attempt_status(a: &AttemptView, running: bool) -> (String, Tone) {
    if running {
        ("running".to_string(), Tone::Warn)
    } else if a.not_started {
        ("not started".to_string(), Tone::Bad)
    } else if a.interrupted {
        ("interrupted".to_string(), Tone::Warn)
    } else {
        match a.exit_code {
            Some(0) => ("exit 0".to_string(), Tone::Good),
            Some(c) => (format!("exit {c}"), Tone::Bad),
            None => ("no exit status".to_string(), Tone::Warn),
        }
    }
}

/// Where a process is: the step in progress (`running`: its attempt is),
/// or how it ended ("done, 4 steps", "failed in step 1", "failed, before
/// any step").
pub fn now_label(r: &RankView, running: bool) -> String {
    let p = &r.account;
    let started = p.phases.iter().any(|ph| ph.phase == Phase::Step1);
    let failed = !p.forensics.is_empty() || !p.exceptions.is_empty();
    match (started, running) {
        (false, _) if failed => format!("failed, {}", crate::report::BEFORE_ANY_STEP),
        (false, true) => "setup".into(),
        (false, false) => "no step".into(),
        (true, true) => format!("step {}", p.steps.count + 1),
        (true, false) if failed => format!("failed in step {}", p.steps.count + 1),
        (true, false) => format!("done, {} steps", p.steps.count),
    }
}

/// Cuts `s` to at most `n` display columns, marking the cut with `…`.
pub fn clip(s: &str, n: usize) -> String {
    crate::report::figures::shorten(s, n)
}

/// Compact binary byte counts for narrow columns: "968M", "2.0G", "0".
pub fn short_bytes(b: f64) -> String {
    let neg = b < 0.0;
    let mut v = b.abs();
    let units = ["B", "K", "M", "G", "T"];
    let mut u = 0;
    while v >= 1024.0 && u < units.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    let sign = if neg { "-" } else { "" };
    if v == 0.0 {
        "0".into()
    } else if u == 0 {
        format!("{sign}{v:.0}B")
    } else if v < 10.0 {
        format!("{sign}{v:.1}{}", units[u])
    } else {
        format!("{sign}{v:.0}{}", units[u])
    }
}

/// Compact seconds: "10.4s", "792ms".
pub fn short_secs(s: f64) -> String {
    let a = s.abs();
    if a >= 100.0 {
        format!("{s:.0}s")
    } else if a >= 10.0 {
        format!("{s:.1}s")
    } else if a >= 1.0 {
        format!("{s:.2}s")
    } else {
        format!("{:.0}ms", s * 1000.0)
    }
}

/// Elapsed time as "2m 10s" / "1h 02m".
pub fn clock(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The first row shown so that `selected` is visible in `height` rows.
pub fn scroll_offset(selected: usize, height: usize) -> usize {
    if height == 0 {
        return selected;
    }
    (selected + 1).saturating_sub(height)
}

/// A centered rectangle of at most `w`×`h` inside `area`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_figures() {
        assert_eq!(short_bytes(0.0), "0");
        assert_eq!(short_bytes(968.3 * 1024.0 * 1024.0), "968M");
        assert_eq!(short_bytes(2.0 * 1024.0 * 1024.0 * 1024.0), "2.0G");
        assert_eq!(short_bytes(-390.0 * 1024.0 * 1024.0), "-390M");
        assert_eq!(short_secs(10.45), "10.4s");
        assert_eq!(short_secs(0.7918), "792ms");
        assert_eq!(clock(130.0), "2m 10s");
        assert_eq!(clip("abcdef", 4), "abc…");
        // By display columns: a CJK character takes two, a combining accent none.
        assert_eq!(clip("数据数据", 5), "数据…");
        assert_eq!(clip("数据数据", 5).width(), 5);
        assert_eq!(clip("cafe\u{301}s", 5), "cafe\u{301}s");
        assert_eq!(scroll_offset(3, 10), 0);
        assert_eq!(scroll_offset(12, 10), 3);
    }
}
