//! The dashboard's state and what each key does to it. Pure: no terminal,
//! no I/O; the event loop applies the returned [`Effect`] (stop the run,
//! forward Ctrl-C, quit), so every key is tested without a terminal.
//!
//! [`App`] holds what every view shares ([`Shared`]: the loaded run, the
//! selected attempt and process, the theme, the run state), each view's own
//! state ([`Views`]), the tab shown and the panel over it. It takes the
//! dashboard's own keys (q, ?, Tab, [ ], Ctrl-C), gives every other to the
//! view shown, and does what the view asks ([`Action`]); when the data or
//! the selection changes, it tells every view ([`Change`]).

use crate::tui::dashboard::Dashboard;
use crate::tui::draw::overlay::Overlay;
use crate::tui::draw::{self, Chrome};
use crate::tui::shared::{RunState, Shared};
use crate::tui::theme::Theme;
use crate::tui::views::overlay::Panel;
use crate::tui::views::{Action, Change, Tab, Views};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// What the event loop must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    None,
    /// Leave the dashboard.
    Quit,
    /// Forward Ctrl-C to the training (a second one kills it).
    Interrupt,
    /// Stop the run: Ctrl-C to the training, no further attempts.
    Stop,
    /// Leave the dashboard and let the run go on with plain output.
    Detach,
}

/// The whole state of the dashboard.
#[derive(Debug, Clone)]
pub struct App {
    /// What every view reads.
    pub shared: Shared,
    /// Each view's own state.
    pub views: Views,
    /// The view shown.
    pub tab: Tab,
    /// The panel over it.
    pub panel: Option<Panel>,
    /// Follow the attempt being run (until the user picks one).
    pub follow: bool,
    /// A one-line message for the status bar.
    pub status: Option<String>,
    /// Ctrl-Cs forwarded so far (the second one kills the training).
    pub interrupts: u32,
    /// A load error (the folder is not readable yet, or broke).
    pub error: Option<String>,
}

impl App {
    /// A dashboard over `data`.
    pub fn new(data: Dashboard, theme: Theme, run: RunState) -> App {
        let mut app = App {
            shared: Shared {
                data: Dashboard::default(),
                theme,
                run,
                attempt: 0,
                rank: 0,
            },
            views: Views::default(),
            tab: Tab::ALL[0],
            panel: None,
            follow: matches!(run, RunState::Running | RunState::Watching),
            status: None,
            interrupts: 0,
            error: None,
        };
        app.set_data(data);
        app.tab = app.tabs()[0];
        let shared = &app.shared;
        if !app.follow
            && let Some(a) = shared
                .data
                .model
                .matrix
                .as_ref()
                .and_then(|m| m.variants.first())
                .and_then(|v| shared.first_attempt(&v.name))
        {
            app.select_attempt(a as isize);
        }
        app
    }

    /// The tabs shown (Live first while a run is, or was, live).
    pub fn tabs(&self) -> Vec<Tab> {
        Tab::ALL
            .iter()
            .copied()
            .filter(|&t| self.views.get(t).shown(&self.shared))
            .collect()
    }

    /// Shows the first tab when the one shown has gone (Live, once the run
    /// being watched has finished).
    pub fn keep_tab_shown(&mut self) {
        let tabs = self.tabs();
        if !tabs.contains(&self.tab)
            && let Some(&first) = tabs.first()
        {
            self.tab = first;
        }
    }

    /// The panel open over the view, if any.
    pub fn overlay(&self) -> Option<Overlay> {
        self.panel.map(|p| p.shown)
    }

    /// Replaces the data, keeping the selection where it still exists.
    pub fn set_data(&mut self, data: Dashboard) {
        let s = &mut self.shared;
        let attempt_name = s.attempt().map(|a| a.id());
        let rank_label = s.rank().map(|r| (r.label.clone(), r.host.clone()));
        let running = data.running().map(str::to_string);
        s.data = data;
        let attempts = &s.data.model.attempts;
        let by_name = |n: &str| attempts.iter().position(|a| a.id() == n);
        s.attempt = match (&running, &attempt_name) {
            (Some(r), _) if self.follow => by_name(r),
            (_, Some(n)) => by_name(n),
            _ => None,
        }
        .unwrap_or(s.attempt)
        .min(attempts.len().saturating_sub(1));
        let ranks = s.attempt().map_or(&[][..], |a| &a.ranks[..]);
        s.rank = rank_label
            .and_then(|(l, h)| ranks.iter().position(|r| r.label == l && r.host == h))
            .unwrap_or(s.rank)
            .min(ranks.len().saturating_sub(1));
        self.changed(Change::Data);
        self.keep_tab_shown();
    }

    /// The live run ended with this exit code.
    pub fn finished(&mut self, code: i32) -> Effect {
        let stopping = self.shared.run == RunState::Stopping;
        self.shared.run = RunState::Finished(code);
        self.status = Some(format!(
            "the run ended (exit code {code}); q leaves, the summary follows"
        ));
        if self.overlay() == Some(Overlay::ConfirmQuit) {
            self.panel = None;
        }
        if stopping { Effect::Quit } else { Effect::None }
    }

    /// Applies one key: Ctrl-C, then the panel's keys while one is open,
    /// then the dashboard's own keys (unless the view takes every key), and
    /// every other to the view shown.
    pub fn on_key(&mut self, key: KeyEvent) -> Effect {
        if key.kind == KeyEventKind::Release {
            return Effect::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        if let Some(panel) = &mut self.panel {
            if panel.shown == Overlay::ConfirmQuit {
                return self.confirm_quit_key(key);
            }
            if !panel.keys(key) {
                self.panel = None;
            }
            return Effect::None;
        }
        if !self.views.get(self.tab).typing()
            && let Some(effect) = self.dashboard_key(key)
        {
            return effect;
        }
        let action = self.views.get_mut(self.tab).keys(key, &self.shared);
        self.act(action);
        Effect::None
    }

    /// The keys that are the dashboard's in every view; None for the others.
    fn dashboard_key(&mut self, key: KeyEvent) -> Option<Effect> {
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Some(self.ask_quit()),
            KeyCode::Char('?') => self.open(Overlay::Help),
            KeyCode::Tab => self.next_tab(1),
            KeyCode::BackTab => self.next_tab(-1),
            KeyCode::Char(']') => self.select_attempt(self.shared.attempt as isize + 1),
            KeyCode::Char('[') => self.select_attempt(self.shared.attempt as isize - 1),
            _ => return None,
        }
        Some(Effect::None)
    }

    /// Does what a view's key asked.
    fn act(&mut self, action: Action) {
        match action {
            Action::None => {}
            Action::SelectAttempt(i) => self.select_attempt(i),
            Action::SelectRank(i) => self.select_rank(i),
            Action::Open(o) => self.open(o),
            Action::Show(view) => {
                if let Some(tab) = Tab::of(view) {
                    self.tab = tab;
                }
            }
        }
    }

    fn ctrl_c(&mut self) -> Effect {
        if !self.shared.run.ours_running() {
            return Effect::Quit;
        }
        self.interrupts += 1;
        self.status = Some(if self.interrupts == 1 {
            "Ctrl-C forwarded to the training; Ctrl-C again kills it".into()
        } else {
            "the training was killed (SIGKILL to its process group)".into()
        });
        self.shared.run = RunState::Stopping;
        Effect::Interrupt
    }

    fn ask_quit(&mut self) -> Effect {
        if self.shared.run.ours_running() {
            self.open(Overlay::ConfirmQuit);
            Effect::None
        } else {
            Effect::Quit
        }
    }

    fn open(&mut self, o: Overlay) {
        self.panel = Some(Panel::new(o));
    }

    /// The answer to "the run is still going": stop it, leave it going, or
    /// stay.
    fn confirm_quit_key(&mut self, key: KeyEvent) -> Effect {
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('s') => {
                self.panel = None;
                if self.shared.run == RunState::Running {
                    self.shared.run = RunState::Stopping;
                    self.status = Some(
                        "stopping: Ctrl-C forwarded to the training; the dashboard closes when it has stopped (Ctrl-C again kills it)".into(),
                    );
                    Effect::Stop
                } else {
                    self.status = Some(
                        "already stopping: Ctrl-C kills the training now; q then d leaves it finishing".into(),
                    );
                    Effect::None
                }
            }
            KeyCode::Char('d') => Effect::Detach,
            KeyCode::Char('n') | KeyCode::Char('q') | KeyCode::Esc => {
                self.panel = None;
                Effect::None
            }
            _ => Effect::None,
        }
    }

    fn next_tab(&mut self, step: isize) {
        let tabs = self.tabs();
        let i = tabs.iter().position(|t| *t == self.tab).unwrap_or(0) as isize;
        let n = tabs.len() as isize;
        self.tab = tabs[((i + step) % n + n) as usize % tabs.len()];
    }

    /// Selects an attempt (clamped) and keeps the rank index where possible.
    pub fn select_attempt(&mut self, i: isize) {
        let s = &mut self.shared;
        let n = s.data.model.attempts.len();
        if n == 0 {
            return;
        }
        self.follow = false;
        s.attempt = i.clamp(0, n as isize - 1) as usize;
        let ranks = s.attempt().map_or(0, |a| a.ranks.len());
        s.rank = s.rank.min(ranks.saturating_sub(1));
        self.changed(Change::Attempt);
    }

    /// Selects a process of the current attempt (clamped).
    pub fn select_rank(&mut self, i: isize) {
        let s = &mut self.shared;
        let n = s.attempt().map_or(0, |a| a.ranks.len());
        if n == 0 {
            return;
        }
        s.rank = i.clamp(0, n as isize - 1) as usize;
        self.changed(Change::Rank);
    }

    /// Tells every view that the data or the selection changed.
    fn changed(&mut self, change: Change) {
        for &tab in Tab::ALL {
            self.views.get_mut(tab).changed(change, &self.shared);
        }
    }

    /// Draws the dashboard: the frame around the view, the view, and the
    /// panel over it (the drawing itself is `src/tui/draw/`'s).
    pub fn draw(&self, frame: &mut Frame) {
        let tabs = self.tabs();
        let view = self.views.get(self.tab);
        let body = draw::chrome(
            frame,
            &self.shared,
            &Chrome {
                tabs: tabs.iter().map(|&t| self.views.get(t).title()).collect(),
                selected: tabs.iter().position(|&t| t == self.tab),
                status: self.status.as_deref(),
                hints: view.hints(&self.shared),
                error: self.error.as_deref(),
            },
        );
        view.draw(frame, &self.shared, body);
        if let Some(panel) = &self.panel {
            panel.draw(frame, &self.shared);
        }
    }
}
