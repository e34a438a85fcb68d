//! The real terminal: refuse without one, enter raw mode and the alternate
//! screen, and always give the terminal back — on return, on error, on panic
//! (a hook restores it before the panic message prints) and on signals (the
//! event loop ends on SIGTERM/SIGHUP and this guard's drop restores).

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use std::io::{IsTerminal, Stdout};
use std::sync::Once;

/// Why the dashboard could not be shown: no terminal, a terminal that
/// cannot be set up, or a folder that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(
        "{what} needs an interactive terminal, and standard input or output is not one here (CI, a pipe, a redirect); {instead}"
    )]
    NoTerminal { what: String, instead: String },
    #[error("cannot set up the terminal: {0}")]
    Terminal(std::io::Error),
    #[error("{0}")]
    Load(String),
}

/// Refuses when standard input or output is not a terminal (CI, pipes);
/// `instead` says what to do there.
pub fn require_terminal(what: &str, instead: &str) -> Result<(), TuiError> {
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(TuiError::NoTerminal {
            what: what.to_string(),
            instead: instead.to_string(),
        })
    }
}

/// What waiting for input found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A key, paste or resize is ready to read.
    Ready,
    Timeout,
    /// The terminal is gone (its window closed, ssh dropped).
    HangUp,
}

/// Waits up to `timeout` for input on the terminal (standard input). A
/// hung-up terminal is reported instead of read: crossterm would spin
/// forever on its end-of-file.
pub fn wait_input(timeout: std::time::Duration) -> Input {
    let mut fds = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe {
        libc::poll(
            &mut fds,
            1,
            timeout.as_millis().min(i32::MAX as u128) as i32,
        )
    };
    if n < 0 {
        return Input::Timeout; // EINTR: a signal; the caller checks its flags.
    }
    if fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Input::HangUp
    } else if fds.revents & libc::POLLIN != 0 {
        Input::Ready
    } else {
        Input::Timeout
    }
}

/// Puts the terminal back: cooked mode, main screen, cursor shown.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(std::io::stdout(), LeaveAlternateScreen, Show);
}

fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// The dashboard's screen; dropping it restores the terminal.
pub struct Screen {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Screen {
    /// Takes over the terminal.
    pub fn enter() -> Result<Screen, TuiError> {
        install_panic_hook();
        let setup = || -> std::io::Result<Terminal<CrosstermBackend<Stdout>>> {
            enable_raw_mode()?;
            execute!(std::io::stdout(), EnterAlternateScreen, Hide)?;
            Terminal::new(CrosstermBackend::new(std::io::stdout()))
        };
        match setup() {
            Ok(terminal) => Ok(Screen { terminal }),
            Err(e) => {
                restore();
                Err(TuiError::Terminal(e))
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}
