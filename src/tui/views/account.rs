//! The Account view: the selected process's device memory at step-1 end,
//! part by part; ↑↓ step through the attempt's processes. It keeps no state
//! of its own. Drawn by `src/tui/draw/account.rs`.

use super::view::{Action, Change, View};
use crate::tui::draw;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

/// The Account view (stateless: the process it shows is the shared
/// selection, so every view agrees on it).
#[derive(Debug, Clone, Default)]
pub struct Account;

impl View for Account {
    fn title(&self) -> &'static str {
        "Account"
    }

    fn hints(&self, _shared: &Shared) -> &'static str {
        "↑↓ rank · [ ] attempt · Tab views · ? help · q quit"
    }

    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action {
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => Action::SelectRank(shared.rank as isize + 1),
            KeyCode::Up | KeyCode::Char('k') => Action::SelectRank(shared.rank as isize - 1),
            _ => Action::None,
        }
    }

    fn changed(&mut self, _change: Change, _shared: &Shared) {}

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        draw::account::draw(frame, shared, area);
    }
}
