//! What a view of the dashboard is: its own state, the keys it takes and
//! its drawing ([`View`]); what a key asks of the dashboard ([`Action`]);
//! what changed under the views ([`Change`]). It stands below every view
//! and below the registration (`src/tui/views/mod.rs`), so that no two
//! files import each other: a view names another by its type, never by its
//! tab.

use crate::tui::draw::overlay::Overlay;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use std::any::TypeId;

/// One view of the dashboard, a tab: its own state is the type that
/// implements it. Each view is registered by one line in `views!`
/// (`src/tui/views/mod.rs`); the compiler then asks for the type and for
/// these methods.
pub trait View {
    /// The tab's title.
    fn title(&self) -> &'static str;

    /// Whether the view has a tab now (every one but Live always has).
    fn shown(&self, _shared: &Shared) -> bool {
        true
    }

    /// The key hints the status bar shows under the view.
    fn hints(&self, shared: &Shared) -> &'static str;

    /// Whether every key is the view's, the dashboard's own (q, ?, Tab,
    /// [ ]) included: a filter being typed.
    fn typing(&self) -> bool {
        false
    }

    /// Applies a key the dashboard did not take; what it asks of the
    /// dashboard.
    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action;

    /// Follows a change of the data or of the selection: a view whose state
    /// depends on them refreshes or clamps it here.
    fn changed(&mut self, change: Change, shared: &Shared);

    /// Draws the view in `area`, through its file in `src/tui/draw/`: pure,
    /// over the model's own types.
    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect);
}

/// What a view's key asks of the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond the view's own state.
    None,
    /// Select this attempt (clamped); every view follows.
    SelectAttempt(isize),
    /// Select this process of the attempt (clamped); every view follows.
    SelectRank(isize),
    /// Open a panel over the view.
    Open(Overlay),
    /// Show another view, named by its type (`Action::show`); the
    /// registration gives its tab (`Tab::of`).
    Show(TypeId),
}

impl Action {
    /// Show the view of type `V`.
    pub fn show<V: View + 'static>() -> Action {
        Action::Show(TypeId::of::<V>())
    }
}

/// What changed under the views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A new load of the run; the selection is kept where it still exists.
    Data,
    /// Another attempt; the process index is kept where the attempt has it.
    Attempt,
    /// Another process of the attempt.
    Rank,
}

/// Moves a list selection for up/down/j/k/PgUp/PgDn/g/G; None for other keys.
pub fn list_move(code: KeyCode, at: usize, n: usize) -> Option<usize> {
    let last = n.saturating_sub(1);
    Some(match code {
        KeyCode::Down | KeyCode::Char('j') => (at + 1).min(last),
        KeyCode::Up | KeyCode::Char('k') => at.saturating_sub(1),
        KeyCode::PageDown => (at + 10).min(last),
        KeyCode::PageUp => at.saturating_sub(10),
        KeyCode::Char('g') | KeyCode::Home => 0,
        KeyCode::Char('G') | KeyCode::End => last,
        _ => return None,
    })
}
