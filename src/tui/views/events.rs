//! The Events view: the selected process's events filtered (`/`), sorted
//! by any column and selected. Drawn by `src/tui/draw/events.rs`.

use super::view::{Action, Change, View, list_move};
use crate::tui::draw;
use crate::tui::draw::events::Column;
use crate::tui::draw::overlay::Overlay;
use crate::tui::process_tables::EventRow;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

/// The events table's filter, sort and selection.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Events {
    /// Selected row (index into `rows`).
    pub selected: usize,
    /// What the rows must contain (matched lower-cased; empty: every row).
    pub filter: String,
    /// `/` was pressed: keys edit the filter.
    pub editing: bool,
    /// The sort column (index into [`Column::ALL`]).
    pub sort: usize,
    /// Largest first (`r` flips it).
    pub descending: bool,
    /// Indices into `ProcessTables::events`, filtered and sorted.
    pub rows: Vec<usize>,
    /// Every event of the rank in `sort` order (ascending), kept so that a
    /// filter keystroke only filters; dropped when the rank or data changes.
    order: Option<(usize, Vec<usize>)>,
}

impl Events {
    /// Recomputes the rows (after a filter, sort, rank or data change). The
    /// sorted order is computed once per column; a filter keystroke then
    /// only walks it.
    pub fn refresh(&mut self, shared: &Shared) {
        if shared.rank().is_none() {
            self.rows.clear();
            self.selected = 0;
            return;
        }
        let events = &shared.tables().events;
        let col = self.sort;
        let order = match self.order.take() {
            Some((c, o)) if c == col => o,
            _ => sorted_order(events, Column::ALL[col]),
        };
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| needle.is_empty() || matches_filter(&events[i], &needle))
            .collect();
        if self.descending {
            rows.reverse();
        }
        self.order = Some((col, order));
        self.rows = rows;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    fn filter_key(&mut self, key: KeyEvent, shared: &Shared) {
        match key.code {
            KeyCode::Enter => self.editing = false,
            KeyCode::Esc => {
                self.editing = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) => self.filter.push(c),
            _ => return,
        }
        self.selected = 0;
        self.refresh(shared);
    }
}

impl View for Events {
    fn title(&self) -> &'static str {
        "Events"
    }

    fn hints(&self, _shared: &Shared) -> &'static str {
        if self.editing {
            "type to filter · Enter keep · Esc clear"
        } else {
            "↑↓ row · / filter · s sort · r reverse · Enter detail · ?"
        }
    }

    fn typing(&self) -> bool {
        self.editing
    }

    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action {
        if self.editing {
            self.filter_key(key, shared);
            return Action::None;
        }
        if let Some(r) = list_move(key.code, self.selected, self.rows.len()) {
            self.selected = r;
            return Action::None;
        }
        let cols = Column::ALL.len();
        match key.code {
            KeyCode::Char('/') => self.editing = true,
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Char('s') => {
                self.sort = (self.sort + 1) % cols;
                self.refresh(shared);
            }
            KeyCode::Left | KeyCode::Char('h') | KeyCode::Char('S') => {
                self.sort = (self.sort + cols - 1) % cols;
                self.refresh(shared);
            }
            KeyCode::Char('r') => {
                self.descending = !self.descending;
                self.refresh(shared);
            }
            KeyCode::Enter => {
                if let Some(&i) = self.rows.get(self.selected) {
                    return Action::Open(Overlay::Event(i));
                }
            }
            _ => {}
        }
        Action::None
    }

    fn changed(&mut self, change: Change, shared: &Shared) {
        if change == Change::Rank {
            self.selected = 0;
        }
        self.order = None;
        self.refresh(shared);
    }

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        let shown = draw::events::Shown {
            rows: &self.rows,
            selected: self.selected,
            sort: Column::ALL[self.sort],
            descending: self.descending,
            filter: &self.filter,
            editing: self.editing,
        };
        draw::events::draw(frame, shared, &shown, area);
    }
}

/// Indices of `events` sorted by one column (ties in time order). Events are
/// time-ordered already, so sorting by time costs nothing.
fn sorted_order(events: &[EventRow], col: Column) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len()).collect();
    let by = |f: fn(&EventRow, &EventRow) -> std::cmp::Ordering| {
        move |a: &usize, b: &usize| f(&events[*a], &events[*b]).then(a.cmp(b))
    };
    match col {
        Column::Time => {}
        Column::Phase => order.sort_by(by(|x, y| x.phase.cmp(&y.phase))),
        Column::Kind => order.sort_by(by(|x, y| x.kind.cmp(&y.kind))),
        Column::Library => order.sort_by(by(|x, y| x.library.cmp(&y.library))),
        Column::Bytes => order.sort_by(by(|x, y| x.bytes.cmp(&y.bytes))),
        Column::Key => order.sort_by(by(|x, y| x.key.cmp(&y.key))),
    }
    order
}

/// Whether an event matches a (lower-case) filter: its kind, phase, library
/// or key contains it.
fn matches_filter(e: &EventRow, needle: &str) -> bool {
    e.search.contains(needle)
}
