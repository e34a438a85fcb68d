//! The interactive terminal dashboard: `prewarm-doctor tui RUN` replays a run
//! folder (finished, or still being written by another doctor), and
//! `prewarm-doctor run --tui` shows it while this doctor runs the command.
//!
//! Architecture: [`app::App`] holds the state every view shares
//! ([`shared::Shared`]: the loaded run, the selection, theme, run state) and
//! each view's own ([`views`]: one file a view, its state and keys, each
//! registered by one line) and turns keys into state changes and effects
//! (pure, tested without a terminal); [`draw`] renders it on any ratatui
//! backend, every view from the one report model; [`loader`] reads the
//! folder on a background thread through the one pipeline every report uses
//! and sends [`dashboard::Dashboard`]s (the model, each process in drawing
//! form — [`process_tables`]: its events table, markers and memory series —
//! and the live progress) over a channel; [`term`] owns the real terminal
//! and always restores it; [`live`] connects `run --tui` (training output,
//! Ctrl-C, stopping the matrix).

pub mod app;
pub mod dashboard;
pub mod draw;
pub mod live;
pub mod loader;
pub mod process_tables;
pub mod shared;
pub mod term;
pub mod theme;
pub mod views;

use app::{App, Effect};
use loader::{Loader, Update};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::{self, Event};
use shared::RunState;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

pub use term::{TuiError, require_terminal};

/// How a dashboard session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The user left (q, or Ctrl-C outside a live run).
    Quit,
    /// The user left a live run and let it go on.
    Detached,
    /// A signal (SIGTERM, SIGHUP, SIGINT from outside) ended it.
    Signal(i32),
}

/// What the event loop asks of a run this doctor is making.
pub trait RunControl {
    /// Forward Ctrl-C to the training (the second one kills it).
    fn interrupt(&self);
    /// Stop the run: Ctrl-C to the training and no further attempts.
    fn stop(&self);
}

/// Signals that end the dashboard; the last one received, or 0.
struct SignalWatch {
    last: Arc<AtomicUsize>,
    ids: Vec<signal_hook::SigId>,
}

impl SignalWatch {
    fn new(signals: &[i32]) -> SignalWatch {
        let last = Arc::new(AtomicUsize::new(0));
        let ids = signals
            .iter()
            .filter_map(|&s| signal_hook::flag::register_usize(s, last.clone(), s as usize).ok())
            .collect();
        SignalWatch { last, ids }
    }

    fn take(&self) -> Option<i32> {
        match self.last.swap(0, Ordering::SeqCst) {
            0 => None,
            s => Some(s as i32),
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Applies one update from the loader or the runner; the effect it asks for.
pub fn apply(app: &mut App, update: Update) -> Effect {
    match update {
        Update::Data(d) => {
            app.error = None;
            app.set_data(*d);
            if app.shared.run == RunState::Watching && app.shared.data.live.is_none() {
                app.shared.run = RunState::Replay;
                app.status = Some("the run finished".into());
                app.keep_tab_shown();
            }
        }
        Update::Error(e) => app.error = Some(e),
        Update::Log(line) => app.views.live.push(line),
        Update::Finished(code) => return app.finished(code),
    }
    Effect::None
}

/// The event loop: draws when something changed, applies keys and updates,
/// and returns when the user leaves or a signal arrives.
pub fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    app: &mut App,
    rx: &Receiver<Update>,
    control: Option<&dyn RunControl>,
) -> std::io::Result<Ending> {
    let signals = SignalWatch::new(&[libc::SIGTERM, libc::SIGHUP, libc::SIGINT]);
    let resized = SignalWatch::new(&[libc::SIGWINCH]);
    let mut dirty = true;
    loop {
        let mut effects = Vec::new();
        while let Ok(u) = rx.try_recv() {
            effects.push(apply(app, u));
            dirty = true;
        }
        if resized.take().is_some() {
            dirty = true; // drawing resizes to the new window
        }
        if let Some(sig) = signals.take() {
            if sig == libc::SIGINT && control.is_some() {
                // Ctrl-C from the keyboard (sent by the dashboard itself) or
                // kill -INT from outside: the run's forwarder passes it on.
                if app.shared.run == RunState::Running {
                    app.shared.run = RunState::Stopping;
                    app.status =
                        Some("SIGINT forwarded to the training; Ctrl-C again kills it".into());
                }
                dirty = true;
            } else {
                return Ok(Ending::Signal(sig));
            }
        }
        if dirty {
            terminal
                .draw(|f| app.draw(f))
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            dirty = false;
        }
        let input = term::wait_input(Duration::from_millis(100));
        if input == term::Input::HangUp {
            return Ok(Ending::Signal(libc::SIGHUP));
        }
        if input == term::Input::Ready && event::poll(Duration::ZERO)? {
            if let Event::Key(k) = event::read()? {
                effects.push(app.on_key(k));
                dirty = true;
            }
        } else if app.shared.data.live.is_some() {
            // The clock and estimate move even when nothing arrives.
            dirty = true;
        }
        for e in effects {
            match e {
                Effect::None => {}
                Effect::Quit => return Ok(Ending::Quit),
                Effect::Detach => return Ok(Ending::Detached),
                Effect::Interrupt => {
                    if let Some(c) = control {
                        c.interrupt();
                    }
                }
                Effect::Stop => {
                    if let Some(c) = control {
                        c.stop();
                    }
                }
            }
        }
    }
}

/// `prewarm-doctor tui RUN`: the dashboard over a run folder. Returns the
/// exit code (0, or 128+N after signal N).
pub fn replay(root: &Path) -> Result<i32, TuiError> {
    require_terminal(
        "prewarm-doctor tui",
        "`prewarm-doctor report RUN` prints the same account as text",
    )?;
    // Refuse what is not a run before taking the terminal; a folder whose
    // run.json exists but has no attempt yet is a run just starting.
    let first = match loader::load_once(root, false) {
        Ok(d) => Some(d),
        Err(e) if loader::just_starting(root, &e) => None,
        Err(e) => return Err(TuiError::Load(e.to_string())),
    };
    let run = match &first {
        Some(d) if d.live.is_none() => RunState::Replay,
        _ => RunState::Watching,
    };
    let mut app = App::new(first.unwrap_or_default(), theme::Theme::from_env(), run);
    let (tx, rx) = channel();
    let loader = (run == RunState::Watching).then(|| Loader::spawn(root.to_path_buf(), false, tx));
    let mut screen = term::Screen::enter()?;
    let ending = event_loop(&mut screen.terminal, &mut app, &rx, None);
    drop(screen);
    drop(loader);
    match ending.map_err(TuiError::Terminal)? {
        Ending::Signal(s) => Ok(128 + s),
        _ => Ok(0),
    }
}
