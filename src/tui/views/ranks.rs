//! The Ranks view: the attempt's processes; moving in the list selects the
//! process every view shows, Enter opens its timeline. It keeps no state of
//! its own (the selection is shared). Drawn by `src/tui/draw/ranks.rs`.

use super::timeline::Timeline;
use super::view::{Action, Change, View, list_move};
use crate::tui::draw;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

/// The Ranks view (stateless: its selection is the shared one, which is
/// what makes it drive every view).
#[derive(Debug, Clone, Default)]
pub struct Ranks;

impl View for Ranks {
    fn title(&self) -> &'static str {
        "Ranks"
    }

    fn hints(&self, _shared: &Shared) -> &'static str {
        "↑↓ rank (drives every view) · Enter timeline · [ ] attempt · ?"
    }

    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action {
        let n = shared.attempt().map_or(0, |a| a.ranks.len());
        match list_move(key.code, shared.rank, n) {
            Some(r) => Action::SelectRank(r as isize),
            None if key.code == KeyCode::Enter && n > 0 => Action::show::<Timeline>(),
            None => Action::None,
        }
    }

    fn changed(&mut self, _change: Change, _shared: &Shared) {}

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        draw::ranks::draw(frame, shared, area);
    }
}
