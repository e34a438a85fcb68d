//! The dashboard's state and what each key does to it. Pure: no terminal,
//! no I/O; the event loop applies the returned [`Effect`] (stop the run,
//! forward Ctrl-C, quit), so every key is tested without a terminal.

use crate::analysis::phases::Phase;
use crate::tui::dashboard::Dashboard;
use crate::tui::draw::events::Column;
use crate::tui::draw::overlay::Overlay;
use crate::tui::draw::{self, Chrome};
use crate::tui::process_tables::EventRow;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::VecDeque;

pub use crate::tui::shared::{RunState, Shared};

/// The views, in tab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Live,
    Matrix,
    Timeline,
    Events,
    Ranks,
    Account,
}

impl Tab {
    /// The tab's title.
    pub fn title(self) -> &'static str {
        match self {
            Tab::Live => "Live",
            Tab::Matrix => "Matrix",
            Tab::Timeline => "Timeline",
            Tab::Events => "Events",
            Tab::Ranks => "Ranks",
            Tab::Account => "Account",
        }
    }
}

/// What part of the process's life the timeline shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zoom {
    Setup,
    Step1,
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

/// The events table's filter, sort and selection.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventsTable {
    /// Selected row (index into `rows`).
    pub selected: usize,
    pub filter: String,
    /// `/` was pressed: keys edit the filter.
    pub editing: bool,
    pub sort: usize,
    pub descending: bool,
    /// Indices into [`ProcessTables::events`], filtered and sorted.
    pub rows: Vec<usize>,
    /// Every event of the rank in `sort` order (ascending), kept so that a
    /// filter keystroke only filters; dropped when the rank or data changes.
    order: Option<(usize, Vec<usize>)>,
}

/// Lines of training output kept for the log pane.
pub const LOG_LINES: usize = 2000;

/// The whole state of the dashboard.
#[derive(Debug, Clone)]
pub struct App {
    pub shared: Shared,
    pub tab: Tab,
    pub overlay: Option<Overlay>,
    /// Scroll offset inside an overlay.
    pub overlay_scroll: usize,
    pub matrix_row: usize,
    /// Follow the attempt being run (until the user picks one).
    pub follow: bool,
    pub zoom: Zoom,
    /// Timeline cursor: an index into [`ProcessTables::markers`].
    pub cursor: Option<usize>,
    pub events: EventsTable,
    pub log: VecDeque<String>,
    /// Lines scrolled back from the newest (0: follow the tail).
    pub log_back: usize,
    /// A one-line message for the status bar.
    pub status: Option<String>,
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
            tab: Tab::Matrix,
            overlay: None,
            overlay_scroll: 0,
            matrix_row: 0,
            follow: matches!(run, RunState::Running | RunState::Watching),
            zoom: Zoom::All,
            cursor: None,
            events: EventsTable::default(),
            log: VecDeque::new(),
            log_back: 0,
            status: None,
            interrupts: 0,
            error: None,
        };
        app.set_data(data);
        app.tab = app.tabs()[0];
        if !app.follow
            && let Some(a) = app
                .shared
                .data
                .model
                .matrix
                .as_ref()
                .and_then(|m| m.variants.first())
                .and_then(|v| app.shared.first_attempt(&v.name))
        {
            app.select_attempt(a as isize);
        }
        app
    }

    /// The tabs shown: Live first while a run is (or was) live.
    pub fn tabs(&self) -> Vec<Tab> {
        let mut t = Vec::new();
        if self.has_live() {
            t.push(Tab::Live);
        }
        t.extend([
            Tab::Matrix,
            Tab::Timeline,
            Tab::Events,
            Tab::Ranks,
            Tab::Account,
        ]);
        t
    }

    fn has_live(&self) -> bool {
        self.shared.run != RunState::Replay || self.shared.data.live.is_some()
    }

    /// Replaces the data, keeping the selection where it still exists.
    pub fn set_data(&mut self, data: Dashboard) {
        let attempt_name = self.shared.attempt().map(|a| a.id());
        let rank_label = self
            .shared
            .rank()
            .map(|r| (r.label.clone(), r.host.clone()));
        let running = data.running().map(str::to_string);
        self.shared.data = data;
        let attempts = &self.shared.data.model.attempts;
        let by_name = |n: &str| attempts.iter().position(|a| a.id() == n);
        self.shared.attempt = match (&running, &attempt_name) {
            (Some(r), _) if self.follow => by_name(r),
            (_, Some(n)) => by_name(n),
            _ => None,
        }
        .unwrap_or(self.shared.attempt)
        .min(attempts.len().saturating_sub(1));
        let ranks = self.shared.attempt().map_or(&[][..], |a| &a.ranks[..]);
        self.shared.rank = rank_label
            .and_then(|(l, h)| ranks.iter().position(|r| r.label == l && r.host == h))
            .unwrap_or(self.shared.rank)
            .min(ranks.len().saturating_sub(1));
        self.matrix_row = self
            .matrix_row
            .min(self.shared.matrix_rows().saturating_sub(1));
        if !self.tabs().contains(&self.tab) {
            self.tab = Tab::Matrix;
        }
        self.rank_changed();
        self.fix_cursor();
    }

    /// Draws the dashboard: the frame around the view, the view, and the
    /// panel over it (pure: the drawing is draw/'s).
    pub fn draw(&self, frame: &mut Frame) {
        let tabs = self.tabs();
        let body = draw::chrome(
            frame,
            &self.shared,
            &Chrome {
                tabs: tabs.iter().map(|t| t.title()).collect(),
                selected: tabs.iter().position(|t| *t == self.tab),
                status: self.status.as_deref(),
                hints: self.hints(),
                error: self.error.as_deref(),
            },
        );
        let shared = &self.shared;
        match self.tab {
            Tab::Live => draw::live::draw(frame, shared, &self.log, self.log_back, body),
            Tab::Matrix => draw::matrix::draw(frame, shared, self.matrix_row, body),
            Tab::Timeline => draw::timeline::draw(
                frame,
                shared,
                &draw::timeline::Shown {
                    zoom: self.zoom.label(),
                    window: self.zoom_window(),
                    cursor: self.cursor,
                    position: self.cursor_position(),
                    in_window: self.in_window_count(),
                },
                body,
            ),
            Tab::Events => draw::events::draw(
                frame,
                shared,
                &draw::events::Shown {
                    rows: &self.events.rows,
                    selected: self.events.selected,
                    sort: Column::ALL[self.events.sort],
                    descending: self.events.descending,
                    filter: &self.events.filter,
                    editing: self.events.editing,
                },
                body,
            ),
            Tab::Ranks => draw::ranks::draw(frame, shared, body),
            Tab::Account => draw::account::draw(frame, shared, body),
        }
        if let Some(o) = self.overlay {
            draw::overlay::draw(frame, shared, o, self.overlay_scroll);
        }
    }

    /// Key hints for the current tab.
    fn hints(&self) -> &'static str {
        if self.tab == Tab::Events && self.events.editing {
            return "type to filter · Enter keep · Esc clear";
        }
        match self.tab {
            Tab::Live => "↑↓ scroll log · G follow · Tab views · ? help · q quit",
            // Verdict keys only where there are verdicts; a single variant's
            // rows are its attempts, and Enter shows their ranks.
            Tab::Matrix => match &self.shared.data.model.matrix {
                Some(m) if !m.verdicts.is_empty() => {
                    "↑↓ variant · Enter verdict · [ ] attempt · Tab views · ? help"
                }
                Some(_) => "↑↓ variant · [ ] attempt · Tab views · ? help · q quit",
                None => "↑↓ attempt · Enter ranks · Tab views · ? help · q quit",
            },
            Tab::Timeline => "←→ event · Enter detail · 1 2 3 zoom · ↑↓ rank · [ ] attempt · ?",
            Tab::Events => "↑↓ row · / filter · s sort · r reverse · Enter detail · ?",
            Tab::Ranks => "↑↓ rank (drives every view) · Enter timeline · [ ] attempt · ?",
            Tab::Account => "↑↓ rank · [ ] attempt · Tab views · ? help · q quit",
        }
    }

    /// Adds a line of training output.
    pub fn push_log(&mut self, line: String) {
        if self.log.len() == LOG_LINES {
            self.log.pop_front();
        }
        self.log.push_back(line);
        if self.log_back > 0 {
            self.log_back = (self.log_back + 1).min(self.log.len());
        }
    }

    /// The live run ended with this exit code.
    pub fn finished(&mut self, code: i32) -> Effect {
        let stopping = self.shared.run == RunState::Stopping;
        self.shared.run = RunState::Finished(code);
        self.status = Some(format!(
            "the run ended (exit code {code}); q leaves, the summary follows"
        ));
        if self.overlay == Some(Overlay::ConfirmQuit) {
            self.overlay = None;
        }
        if stopping { Effect::Quit } else { Effect::None }
    }

    /// Applies one key.
    pub fn on_key(&mut self, key: KeyEvent) -> Effect {
        if key.kind == KeyEventKind::Release {
            return Effect::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        if let Some(o) = self.overlay {
            return self.overlay_key(o, key);
        }
        if self.tab == Tab::Events && self.events.editing {
            self.filter_key(key);
            return Effect::None;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return self.ask_quit(),
            KeyCode::Char('?') => self.open(Overlay::Help),
            KeyCode::Tab => self.next_tab(1),
            KeyCode::BackTab => self.next_tab(-1),
            KeyCode::Char(']') => self.select_attempt(self.shared.attempt as isize + 1),
            KeyCode::Char('[') => self.select_attempt(self.shared.attempt as isize - 1),
            _ => match self.tab {
                Tab::Live => self.live_key(key),
                Tab::Matrix => self.matrix_key(key),
                Tab::Timeline => self.timeline_key(key),
                Tab::Events => self.events_key(key),
                Tab::Ranks => self.ranks_key(key),
                Tab::Account => self.account_key(key),
            },
        }
        Effect::None
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
        self.overlay = Some(o);
        self.overlay_scroll = 0;
    }

    fn overlay_key(&mut self, o: Overlay, key: KeyEvent) -> Effect {
        if o == Overlay::ConfirmQuit {
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('s') => {
                    self.overlay = None;
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
                    self.overlay = None;
                    Effect::None
                }
                _ => Effect::None,
            };
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc | KeyCode::Enter | KeyCode::Char('?') => {
                self.overlay = None
            }
            KeyCode::Down | KeyCode::Char('j') => self.overlay_scroll += 1,
            KeyCode::Up | KeyCode::Char('k') => {
                self.overlay_scroll = self.overlay_scroll.saturating_sub(1)
            }
            KeyCode::Char('g') | KeyCode::Home => self.overlay_scroll = 0,
            _ => {}
        }
        Effect::None
    }

    fn next_tab(&mut self, step: isize) {
        let tabs = self.tabs();
        let i = tabs.iter().position(|t| *t == self.tab).unwrap_or(0) as isize;
        let n = tabs.len() as isize;
        self.tab = tabs[((i + step) % n + n) as usize % tabs.len()];
    }

    /// Selects an attempt (clamped) and keeps the rank index where possible.
    pub fn select_attempt(&mut self, i: isize) {
        let n = self.shared.data.model.attempts.len();
        if n == 0 {
            return;
        }
        self.follow = false;
        self.shared.attempt = i.clamp(0, n as isize - 1) as usize;
        let ranks = self.shared.attempt().map_or(0, |a| a.ranks.len());
        self.shared.rank = self.shared.rank.min(ranks.saturating_sub(1));
        self.rank_changed();
        self.cursor = None;
        self.fix_cursor();
    }

    /// Selects a process of the current attempt (clamped).
    pub fn select_rank(&mut self, i: isize) {
        let n = self.shared.attempt().map_or(0, |a| a.ranks.len());
        if n == 0 {
            return;
        }
        self.shared.rank = i.clamp(0, n as isize - 1) as usize;
        self.events.selected = 0;
        self.rank_changed();
        self.cursor = None;
        self.fix_cursor();
    }

    /// Sorts and filters the events table again for the process now
    /// selected (after the selection or the data changed).
    fn rank_changed(&mut self) {
        self.events.order = None;
        self.refresh_events();
    }

    fn live_key(&mut self, key: KeyEvent) {
        let n = self.log.len();
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.log_back = (self.log_back + 1).min(n),
            KeyCode::Down | KeyCode::Char('j') => self.log_back = self.log_back.saturating_sub(1),
            KeyCode::PageUp => self.log_back = (self.log_back + 10).min(n),
            KeyCode::PageDown => self.log_back = self.log_back.saturating_sub(10),
            KeyCode::Char('g') | KeyCode::Home => self.log_back = n,
            KeyCode::Char('G') | KeyCode::End => self.log_back = 0,
            _ => {}
        }
    }

    fn matrix_key(&mut self, key: KeyEvent) {
        let n = self.shared.matrix_rows();
        let row = match list_move(key.code, self.matrix_row, n) {
            Some(r) => r,
            None => {
                if key.code == KeyCode::Enter && n > 0 {
                    if self.shared.data.model.matrix.is_some() {
                        self.open(Overlay::Verdict(self.matrix_row));
                    } else {
                        self.tab = Tab::Ranks;
                    }
                }
                return;
            }
        };
        self.matrix_row = row;
        let attempt = match &self.shared.data.model.matrix {
            Some(m) => m
                .variants
                .get(row)
                .and_then(|v| self.shared.first_attempt(&v.name)),
            None => Some(row),
        };
        if let Some(a) = attempt {
            self.select_attempt(a as isize);
        }
    }

    /// The time span (seconds on the process's clock) the timeline shows.
    pub fn zoom_window(&self) -> Option<(f64, f64)> {
        let r = self.shared.rank()?;
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
    pub fn in_window(&self) -> std::ops::Range<usize> {
        let Some((a, b)) = self.zoom_window() else {
            return 0..0;
        };
        let markers = &self.shared.tables().markers;
        let lo = markers.partition_point(|e| e.t_s < a);
        let hi = markers.partition_point(|e| e.t_s <= b);
        lo..hi.max(lo)
    }

    /// How many markers the zoom window holds.
    pub fn in_window_count(&self) -> usize {
        self.in_window().len()
    }

    /// The cursor's position among the events in the zoom window.
    pub fn cursor_position(&self) -> Option<usize> {
        let c = self.cursor?;
        let w = self.in_window();
        w.contains(&c).then(|| c - w.start)
    }

    /// Puts the cursor on an event inside the zoom window (the first one when
    /// it is outside or unset).
    fn fix_cursor(&mut self) {
        let w = self.in_window();
        if self.cursor.is_none_or(|c| !w.contains(&c)) {
            self.cursor = (!w.is_empty()).then_some(w.start);
        }
    }

    fn timeline_key(&mut self, key: KeyEvent) {
        let w = self.in_window();
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
            KeyCode::Char('1') => self.set_zoom(Zoom::Setup),
            KeyCode::Char('2') => self.set_zoom(Zoom::Step1),
            KeyCode::Char('3') => self.set_zoom(Zoom::All),
            KeyCode::Char('z') => self.set_zoom(match self.zoom {
                Zoom::All => Zoom::Setup,
                Zoom::Setup => Zoom::Step1,
                Zoom::Step1 => Zoom::All,
            }),
            KeyCode::Down | KeyCode::Char('j') => self.select_rank(self.shared.rank as isize + 1),
            KeyCode::Up | KeyCode::Char('k') => self.select_rank(self.shared.rank as isize - 1),
            KeyCode::Enter => {
                if let Some(c) = self.cursor {
                    self.open(Overlay::Marker(c));
                }
            }
            _ => {}
        }
    }

    fn set_zoom(&mut self, z: Zoom) {
        self.zoom = z;
        self.fix_cursor();
    }

    fn filter_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Enter => self.events.editing = false,
            KeyCode::Esc => {
                self.events.editing = false;
                self.events.filter.clear();
            }
            KeyCode::Backspace => {
                self.events.filter.pop();
            }
            KeyCode::Char(c) => self.events.filter.push(c),
            _ => return,
        }
        self.events.selected = 0;
        self.refresh_events();
    }

    fn events_key(&mut self, key: KeyEvent) {
        let n = self.events.rows.len();
        if let Some(r) = list_move(key.code, self.events.selected, n) {
            self.events.selected = r;
            return;
        }
        let cols = Column::ALL.len();
        match key.code {
            KeyCode::Char('/') => self.events.editing = true,
            KeyCode::Right | KeyCode::Char('l') | KeyCode::Char('s') => {
                self.events.sort = (self.events.sort + 1) % cols;
                self.refresh_events();
            }
            KeyCode::Left | KeyCode::Char('h') | KeyCode::Char('S') => {
                self.events.sort = (self.events.sort + cols - 1) % cols;
                self.refresh_events();
            }
            KeyCode::Char('r') => {
                self.events.descending = !self.events.descending;
                self.refresh_events();
            }
            KeyCode::Enter => {
                if let Some(&i) = self.events.rows.get(self.events.selected) {
                    self.open(Overlay::Event(i));
                }
            }
            _ => {}
        }
    }

    fn ranks_key(&mut self, key: KeyEvent) {
        let n = self.shared.attempt().map_or(0, |a| a.ranks.len());
        if let Some(r) = list_move(key.code, self.shared.rank, n) {
            self.select_rank(r as isize);
        } else if key.code == KeyCode::Enter && n > 0 {
            self.tab = Tab::Timeline;
        }
    }

    fn account_key(&mut self, key: KeyEvent) {
        match key.code {
            KeyCode::Down | KeyCode::Char('j') => self.select_rank(self.shared.rank as isize + 1),
            KeyCode::Up | KeyCode::Char('k') => self.select_rank(self.shared.rank as isize - 1),
            _ => {}
        }
    }

    /// Recomputes the events table's rows (after a filter, sort, rank or
    /// data change). The sorted order is computed once per column; a filter
    /// keystroke then only walks it.
    pub fn refresh_events(&mut self) {
        if self.shared.rank().is_none() {
            self.events.rows.clear();
            self.events.selected = 0;
            return;
        }
        let events = &self
            .shared
            .data
            .tables(self.shared.attempt, self.shared.rank)
            .events;
        let col = self.events.sort;
        let order = match self.events.order.take() {
            Some((c, o)) if c == col => o,
            _ => sorted_order(events, Column::ALL[col]),
        };
        let needle = self.events.filter.to_lowercase();
        let mut rows: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| needle.is_empty() || matches_filter(&events[i], &needle))
            .collect();
        if self.events.descending {
            rows.reverse();
        }
        self.events.order = Some((col, order));
        self.events.rows = rows;
        self.events.selected = self
            .events
            .selected
            .min(self.events.rows.len().saturating_sub(1));
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

/// Moves a list selection for up/down/j/k/PgUp/PgDn/g/G; None for other keys.
fn list_move(code: KeyCode, at: usize, n: usize) -> Option<usize> {
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
