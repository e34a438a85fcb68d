//! Styles of the dashboard. Only foreground accents on the terminal's own
//! colours (no painted backgrounds), so it reads on dark and light themes;
//! selection is reverse video. `NO_COLOR` (https://no-color.org) drops every
//! colour and keeps bold/reverse/dim, which carry the meaning on their own.

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Row;

/// How a figure or verdict should read: good news, a warning, bad news.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Good,
    Warn,
    Bad,
    Neutral,
}

impl Tone {
    /// How a verdict class reads.
    pub fn of_verdict(class: crate::analysis::verdict::VerdictClass) -> Tone {
        use crate::analysis::verdict::VerdictClass::*;
        match class {
            Works => Tone::Good,
            Regression => Tone::Bad,
            Partial | NoEffect | Inconclusive => Tone::Warn,
        }
    }
}

/// The dashboard's styles; `plain` when colour is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set to a non-empty value.
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    /// Without any colour (NO_COLOR, and the snapshot tests).
    pub fn plain() -> Theme {
        Theme { color: false }
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    /// Body text: the terminal's own colours.
    pub fn text(self) -> Style {
        Style::default()
    }

    /// Secondary text (units, hints, axes).
    pub fn dim(self) -> Style {
        Style::default().add_modifier(Modifier::DIM)
    }

    /// Headings and column titles.
    pub fn heading(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// The selected row, tab or cursor.
    pub fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    /// A table row, reversed when it is the selected one.
    pub fn row<'a>(self, row: Row<'a>, selected: bool) -> Row<'a> {
        if selected {
            row.style(self.selected())
        } else {
            row
        }
    }

    /// A verdict or figure by its tone.
    pub fn tone(self, tone: Tone) -> Style {
        match tone {
            Tone::Good => self.fg(Color::Green).add_modifier(Modifier::BOLD),
            Tone::Warn => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Tone::Bad => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            Tone::Neutral => Style::default().add_modifier(Modifier::BOLD),
        }
    }

    /// Timeline series: device used, pool reserved, out of pool.
    pub fn series(self, i: usize) -> Style {
        match i {
            0 => self.fg(Color::Blue),
            1 => self.fg(Color::Green),
            2 => self.fg(Color::Magenta),
            _ => self.fg(Color::Yellow),
        }
    }

    /// Event markers on the timeline.
    pub fn marker(self) -> Style {
        self.fg(Color::Yellow)
    }
}
