//! The Matrix view: its selected row (a variant, or an attempt of a
//! single-variant run), which selects the attempt every view shows. Drawn by
//! `src/tui/draw/matrix.rs`.

use super::ranks::Ranks;
use super::view::{Action, Change, View, list_move};
use crate::tui::draw;
use crate::tui::draw::overlay::Overlay;
use crate::tui::shared::Shared;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;

/// The selected row.
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    pub row: usize,
}

impl View for Matrix {
    fn title(&self) -> &'static str {
        "Matrix"
    }

    fn hints(&self, shared: &Shared) -> &'static str {
        // Verdict keys only where there are verdicts; a single variant's
        // rows are its attempts, and Enter shows their ranks.
        match &shared.data.model.matrix {
            Some(m) if !m.verdicts.is_empty() => {
                "↑↓ variant · Enter verdict · [ ] attempt · Tab views · ? help"
            }
            Some(_) => "↑↓ variant · [ ] attempt · Tab views · ? help · q quit",
            None => "↑↓ attempt · Enter ranks · Tab views · ? help · q quit",
        }
    }

    fn keys(&mut self, key: KeyEvent, shared: &Shared) -> Action {
        let n = shared.matrix_rows();
        let Some(row) = list_move(key.code, self.row, n) else {
            return match key.code {
                KeyCode::Enter if n > 0 && shared.data.model.matrix.is_some() => {
                    Action::Open(Overlay::Verdict(self.row))
                }
                KeyCode::Enter if n > 0 => Action::show::<Ranks>(),
                _ => Action::None,
            };
        };
        self.row = row;
        let attempt = match &shared.data.model.matrix {
            Some(m) => m
                .variants
                .get(row)
                .and_then(|v| shared.first_attempt(&v.name)),
            None => Some(row),
        };
        attempt.map_or(Action::None, |a| Action::SelectAttempt(a as isize))
    }

    fn changed(&mut self, change: Change, shared: &Shared) {
        if change == Change::Data {
            self.row = self.row.min(shared.matrix_rows().saturating_sub(1));
        }
    }

    fn draw(&self, frame: &mut Frame, shared: &Shared, area: Rect) {
        draw::matrix::draw(frame, shared, self.row, area);
    }
}
