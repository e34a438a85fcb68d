//! Drawing: one pure function from the state to a frame. Every view reads
//! the one report model (`App::data.model`, the same one every format
//! renders) and the view state beside it; the words a view shares with the
//! other formats come from `crate::report`. It works on any ratatui backend
//! (the terminal, or `TestBackend` in the tests) and only touches what is
//! visible: long tables render their visible rows, series are down-sampled
//! to the chart's width.

mod account;
mod events;
mod live;
mod matrix;
mod overlay;

pub use overlay::KEYS;
mod ranks;
mod timeline;

use crate::analysis::phases::Phase;
use crate::report::model::{AttemptView, RankView};
use crate::tui::app::{App, RunState, Tab};
use crate::tui::theme::Tone;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Draws the whole dashboard.
pub fn draw(frame: &mut Frame, app: &App) {
    let damaged = !app.data.model.incomplete.is_empty();
    let [tabs, context, warning, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(u16::from(damaged)),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    draw_tabs(frame, app, tabs);
    draw_context(frame, app, context);
    if damaged {
        draw_incomplete(frame, app, warning);
    }
    match app.tab {
        Tab::Live => live::draw(frame, app, body),
        Tab::Matrix => matrix::draw(frame, app, body),
        Tab::Timeline => timeline::draw(frame, app, body),
        Tab::Events => events::draw(frame, app, body),
        Tab::Ranks => ranks::draw(frame, app, body),
        Tab::Account => account::draw(frame, app, body),
    }
    draw_status(frame, app, status);
    if let Some(o) = app.overlay {
        overlay::draw(frame, app, o);
    }
}

fn draw_tabs(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme;
    let mut spans = Vec::new();
    for tab in app.tabs() {
        let style = if tab == app.tab {
            t.selected().patch(t.heading())
        } else {
            t.text()
        };
        spans.push(Span::styled(format!(" {} ", tab.title()), style));
        spans.push(Span::raw(" "));
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let title = format!("prewarm-doctor · {}", app.data.title());
    let room = (area.width as usize).saturating_sub(used + 1);
    if room > 8 {
        let shown = clip(&title, room);
        let pad = room - shown.chars().count();
        spans.push(Span::raw(" ".repeat(pad + 1)));
        spans.push(Span::styled(shown, t.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn draw_context(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme;
    let mut spans = Vec::new();
    match app.attempt() {
        Some(a) => {
            spans.push(Span::styled("attempt ", t.dim()));
            spans.push(Span::styled(a.id(), t.heading()));
            spans.push(Span::raw(" "));
            let (status, tone) = attempt_status(a, app.data.is_running(a));
            spans.push(Span::styled(status, t.tone(tone)));
            spans.push(Span::styled(
                format!(" ({}/{})", app.attempt + 1, app.data.model.attempts.len()),
                t.dim(),
            ));
            if let Some(r) = app.rank() {
                spans.push(Span::styled(" · ", t.dim()));
                spans.push(Span::styled(r.label.clone(), t.heading()));
                spans.push(Span::styled(
                    format!(" ({}/{})", app.rank + 1, a.ranks.len()),
                    t.dim(),
                ));
            }
        }
        None => spans.push(Span::styled(
            match &app.error {
                Some(e) => e.clone(),
                None => "waiting for the first attempt to write its folder".into(),
            },
            t.dim(),
        )),
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The run's damaged files, under the context line: the first one's
/// sentence, and how many more (the JSON and stderr name each).
fn draw_incomplete(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme;
    let incomplete = &app.data.model.incomplete;
    let more = match incomplete.len() {
        0 | 1 => String::new(),
        n => format!(" (+{} more damaged files)", n - 1),
    };
    let first = incomplete.first().map(|d| d.sentence()).unwrap_or_default();
    let room = (area.width as usize).saturating_sub(more.chars().count());
    let line = format!("{}{more}", clip(&first, room));
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(line, t.tone(Tone::Bad)))),
        area,
    );
}

/// Key hints for the current tab.
fn hints(app: &App) -> &'static str {
    if app.tab == Tab::Events && app.events.editing {
        return "type to filter · Enter keep · Esc clear";
    }
    match app.tab {
        Tab::Live => "↑↓ scroll log · G follow · Tab views · ? help · q quit",
        // Verdict keys only where there are verdicts; a single variant's
        // rows are its attempts, and Enter shows their ranks.
        Tab::Matrix => match &app.data.model.matrix {
            Some(m) if !m.verdicts.is_empty() => {
                "↑↓ variant · Enter verdict · [ ] attempt · Tab views · ? help"
            }
            Some(_) => "↑↓ variant · [ ] attempt · Tab views · ? help · q quit",
            None => "↑↓ attempt · Enter ranks · Tab views · ? help · q quit",
        },
        Tab::Timeline => "←→ event · Enter detail · 1 2 3 zoom · ↑↓ rank · [ ] attempt · ?",
        Tab::Events => "↑↓ row · / filter · s sort · r reverse · Enter detail · ?",
        Tab::Ranks => "↑↓ rank (drives every view) · Enter timeline · [ ] attempt · ?",
        Tab::Account => "↑↓ rank · [ ] attempt · Tab views · ? help · q quit",
    }
}

fn draw_status(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme;
    let mut spans = Vec::new();
    match app.run {
        RunState::Running => spans.push(Span::styled(" RUNNING ", t.selected())),
        RunState::Stopping => spans.push(Span::styled(" STOPPING ", t.selected())),
        RunState::Watching => spans.push(Span::styled(" WATCHING ", t.selected())),
        RunState::Finished(c) => spans.push(Span::styled(format!(" EXIT {c} "), t.selected())),
        RunState::Replay => {}
    }
    if !spans.is_empty() {
        spans.push(Span::raw(" "));
    }
    match &app.status {
        Some(s) => spans.push(Span::styled(s.clone(), t.heading())),
        None => spans.push(Span::styled(hints(app), t.dim())),
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

/// Cuts `s` to at most `n` characters, marking the cut with `…`.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    if n == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(n - 1).collect();
    out.push('…');
    out
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
        assert_eq!(scroll_offset(3, 10), 0);
        assert_eq!(scroll_offset(12, 10), 3);
    }
}
