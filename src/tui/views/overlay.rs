//! The panel over the current view: which one and how far it is scrolled,
//! and the keys that scroll and close it. Drawn by
//! `src/tui/draw/overlay.rs`. The question asked before leaving a live run
//! is answered by the dashboard itself (`App`): stop the run, leave it
//! going, or stay.

use crate::tui::draw;
use crate::tui::draw::overlay::Overlay;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

/// An open panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Panel {
    /// Which panel.
    pub shown: Overlay,
    /// Lines scrolled down.
    pub scroll: usize,
}

impl Panel {
    /// A panel just opened, at its top.
    pub fn new(shown: Overlay) -> Panel {
        Panel { shown, scroll: 0 }
    }

    /// Applies a key; false when it closes the panel.
    pub fn keys(&mut self, key: KeyEvent) -> bool {
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc | KeyCode::Enter | KeyCode::Char('?') => {
                return false;
            }
            KeyCode::Down | KeyCode::Char('j') => self.scroll += 1,
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::Char('g') | KeyCode::Home => self.scroll = 0,
            _ => {}
        }
        true
    }

    /// Draws the panel over the frame.
    pub fn draw(&self, frame: &mut Frame, shared: &Shared) {
        draw::overlay::draw(frame, shared, self.shown, self.scroll);
    }
}
