//! The Timeline view: what part of the selected process's life it shows
//! (the zoom) and a cursor that steps from event to event inside it. Drawn
//! by `src/tui/draw/timeline.rs`.

use super::view::{Action, Change, View};
use crate::analysis::phases::Phase;
use crate::tui::draw;
use crate::tui::draw::overlay::Overlay;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use std::ops::Range;

/// What part of the process's life the timeline shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Zoom {
    Setup,
    Step1,
    #[default]
    All,
}

impl Zoom {
    /// Label in the timeline's title.
    pub fn label(self) -> &'static str {
        match self {
            Zoom::Setup => "setup",
            Zoom::Step1 => "step 1",
            Zoom::All => "everything",
        }
    }
}

/// The zoom and the cursor.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub zoom: Zoom,
    /// An index into the selected process's markers (`ProcessTables::markers`).
    pub cursor: Option<usize>,
}

impl Timeline {
    /// The time span (seconds on the process's clock) the timeline shows.
    pub fn window(&self, shared: &Shared) -> Option<(f64, f64)> {
        let r = shared.rank()?;
        let end = r.timeline_end_s();
        let band = |p: Phase| r.timeline.phase(p);
        Some(match self.zoom {
            Zoom::All => (0.0, end.max(1e-3)),
            Zoom::Setup => band(Phase::Setup).map_or((0.0, end), |b| (b.start_s, b.end_s)),
            Zoom::Step1 => band(Phase::Step1).map_or((0.0, end), |b| (b.start_s, b.end_s)),
        })
    }

    /// Markers of the selected process inside the zoom window: a range of
    /// indices (markers are time-ordered).
    pub fn in_window(&self, shared: &Shared) -> Range<usize> {
        let Some((a, b)) = self.window(shared) else {
            return 0..0;
        };
        let markers = &shared.tables().markers;
        let lo = markers.partition_point(|e| e.t_s < a);
        let hi = markers.partition_point(|e| e.t_s <= b);
        lo..hi.max(lo)
    }

    /// The cursor's position among the events in the zoom window.
    pub fn cursor_position(&self, shared: &Shared) -> Option<usize> {
        let c = self.cursor?;
        let w = self.in_window(shared);
        w.contains(&c).then(|| c - w.start)
    }

    /// Puts the cursor on an event inside the zoom window (the first one when
    /// it is outside or unset).
    fn fix_cursor(&mut self, shared: &Shared) {
        let w = self.in_window(shared);
        if self.cursor.is_none_or(|c| !w.contains(&c)) {
            self.cursor = (!w.is_empty()).then_some(w.start);
        }
    }

    fn set_zoom(&mut self, z: Zoom, shared: &Shared) {
        self.zoom = z;
        self.fix_cursor(shared);
    }
}

impl View for Timeline {
    fn title(&self) -> &'static str {
        "Timeline"
    }

    fn hints(&self, _shared: &Shared) -> &'static str {
        "←→ event · Enter detail · 1 2 3 zoom · ↑↓ rank · [ ] attempt · ?"
    }

    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action {
        let w = self.in_window(shared);
        let last = w.end.saturating_sub(1);
        match key.code {
            KeyCode::Right | KeyCode::Char('l') => {
                self.cursor = self
                    .cursor
                    .map(|c| (c + 1).min(last))
                    .filter(|c| w.contains(c))
            }
            KeyCode::Left | KeyCode::Char('h') => {
                self.cursor = self
                    .cursor
                    .map(|c| c.saturating_sub(1).max(w.start))
                    .filter(|c| w.contains(c))
            }
            KeyCode::Char('g') | KeyCode::Home => self.cursor = (!w.is_empty()).then_some(w.start),
            KeyCode::Char('G') | KeyCode::End => self.cursor = (!w.is_empty()).then_some(last),
            KeyCode::Char('1') => self.set_zoom(Zoom::Setup, shared),
            KeyCode::Char('2') => self.set_zoom(Zoom::Step1, shared),
            KeyCode::Char('3') => self.set_zoom(Zoom::All, shared),
            KeyCode::Char('z') => {
                let next = match self.zoom {
                    Zoom::All => Zoom::Setup,
                    Zoom::Setup => Zoom::Step1,
                    Zoom::Step1 => Zoom::All,
                };
                self.set_zoom(next, shared)
            }
            KeyCode::Down | KeyCode::Char('j') => {
                return Action::SelectRank(shared.rank as isize + 1);
            }
            KeyCode::Up | KeyCode::Char('k') => {
                return Action::SelectRank(shared.rank as isize - 1);
            }
            KeyCode::Enter => {
                return self
                    .cursor
                    .map_or(Action::None, |c| Action::Open(Overlay::Marker(c)));
            }
            _ => {}
        }
        Action::None
    }

    fn changed(&mut self, change: Change, shared: &Shared) {
        // Another process: its first event in the window. The same one
        // reloaded: the cursor stays where it still is in the window.
        if change != Change::Data {
            self.cursor = None;
        }
        self.fix_cursor(shared);
    }

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        let shown = draw::timeline::Shown {
            zoom: self.zoom.label(),
            window: self.window(shared),
            cursor: self.cursor,
            position: self.cursor_position(shared),
            in_window: self.in_window(shared).len(),
        };
        draw::timeline::draw(frame, shared, &shown, area);
    }
}
