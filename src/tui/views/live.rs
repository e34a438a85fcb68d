//! The Live view: the training's output as it comes (scrolled back, or
//! following its tail) beside the run's progress. Shown while a run is, or
//! was, live. Drawn by `src/tui/draw/live.rs`.

use super::view::{Action, Change, View};
use crate::tui::draw;
use crate::tui::shared::{RunState, Shared};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use std::collections::VecDeque;

/// Lines of training output kept for the log pane.
pub const LOG_LINES: usize = 2000;

/// The training's output and how far it is scrolled.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// The newest [`LOG_LINES`] lines, oldest first.
    pub log: VecDeque<String>,
    /// Lines scrolled back from the newest (0: follow the tail).
    pub back: usize,
}

impl Live {
    /// Adds a line of training output.
    pub fn push(&mut self, line: String) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
        if self.back > 0 {
            self.back = (self.back + 1).min(self.log.len());
        }
    }
}

impl View for Live {
    fn title(&self) -> &'static str {
        "Live"
    }

    fn shown(&self, shared: &Shared) -> bool {
        shared.run != RunState::Replay || shared.data.live.is_some()
    }

    fn hints(&self, _shared: &Shared) -> &'static str {
        "↑↓ scroll log · G follow · Tab views · ? help · q quit"
    }

    fn keys(&mut self, key: KeyEvent, _shared: &Shared) -> Action {
        let n = self.log.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.back = (self.back + 1).min(n),
            KeyCode::Down | KeyCode::Char('j') => self.back = self.back.saturating_sub(1),
            KeyCode::PageUp => self.back = (self.back + 10).min(n),
            KeyCode::PageDown => self.back = self.back.saturating_sub(10),
            KeyCode::Char('g') | KeyCode::Home => self.back = n,
            KeyCode::Char('G') | KeyCode::End => self.back = 0,
            _ => {}
        }
        Action::None
    }

    fn changed(&mut self, _change: Change, _shared: &Shared) {}

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        draw::live::draw(frame, shared, &self.log, self.back, area);
    }
}
