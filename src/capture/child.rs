//! Running the training command: its own process group, output untouched,
//! SIGINT/SIGTERM/SIGHUP forwarded to the whole group (a second SIGINT kills
//! it), and the exit status turned into the code the doctor exits with.
//!
//! Signal dispositions reach the command as they would without the doctor:
//! SIGPIPE as the doctor's caller left it (default, or ignored), although the
//! Rust runtime ignores SIGPIPE inside the doctor (see `crate::output`); a signal
//! the caller ignored (`nohup` ignores SIGHUP, a shell's background job SIGINT)
//! is neither caught nor forwarded, so the command inherits it ignored.

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::ffi::OsStr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Whether SIGPIPE was ignored when the doctor started, before the Rust
/// runtime set it to ignored (recorded by [`record_inherited_sigpipe`]).
static SIGPIPE_INHERITED_IGNORED: AtomicBool = AtomicBool::new(false);

fn is_ignored(sig: i32) -> bool {
    // SAFETY: a null new action only reads the current disposition into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Records how the doctor's caller left SIGPIPE. `main` calls it from a
/// constructor that runs before the Rust runtime ignores SIGPIPE; without
/// that call commands get the default disposition (what a shell gives them).
pub fn record_inherited_sigpipe() {
    SIGPIPE_INHERITED_IGNORED.store(is_ignored(libc::SIGPIPE), Ordering::Relaxed);
}

/// The signals forwarded to the command: those of SIGINT, SIGTERM and SIGHUP
/// that the doctor's caller did not ignore.
fn forwarded_signals() -> Vec<i32> {
    [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !is_ignored(s))
        .collect()
}

/// Why the command could not run.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error(
        "the command is empty: give it after `--`, e.g. `prewarm-doctor run -- python train.py`"
    )]
    Empty,
    #[error("cannot start `{program}`: {source} (is it installed and on PATH?)")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for the command failed: {0}")]
    Wait(std::io::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
}

use crate::run_folder::meta::ChildExit;

/// The code a shell would report for this status.
pub fn exit_code(status: ExitStatus) -> (i32, Option<i32>) {
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(s)) => (128 + s, Some(s)),
        (None, None) => (1, None),
    }
}

/// Runs `argv` with exactly `env`, forwarding signals, and waits for it.
/// `on_start` gets the child's pid right after it started. With `output`
/// (`run --tui`) its stdout and stderr are captured and its stdin is empty
/// (the dashboard owns the terminal); otherwise it has the doctor's streams.
pub fn run_child<K, V>(
    argv: &[impl AsRef<OsStr>],
    env: impl IntoIterator<Item = (K, V)>,
    output: Option<&Arc<super::child_output::OutputCapture>>,
    on_start: impl FnOnce(u32),
) -> Result<ChildExit, ChildError>
where
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let (program, args) = argv.split_first().ok_or(ChildError::Empty)?;
    let mut signals = Signals::new(forwarded_signals()).map_err(ChildError::Signals)?;
    let handle = signals.handle();
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().envs(env).process_group(0);
    if output.is_some() {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    // The standard library resets SIGPIPE to the default in the child (and
    // empties its signal mask); put back an ignored SIGPIPE the caller gave us.
    if SIGPIPE_INHERITED_IGNORED.load(Ordering::Relaxed) {
        // SAFETY: signal() is async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|source| ChildError::Spawn {
        program: program.as_ref().to_string_lossy().into_owned(),
        source,
    })?;
    let pumps = output.map(|o| o.pump(&mut child));
    let pgid = child.id() as i32;
    on_start(child.id());

    let forwarded = Arc::new(AtomicI32::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let forwarder = {
        let forwarded = forwarded.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut interrupts = 0;
            for sig in signals.forever() {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                let mut to_send = sig;
                if sig == SIGINT {
                    interrupts += 1;
                    if interrupts >= 2 {
                        to_send = libc::SIGKILL;
                    }
                }
                // SAFETY: kill(-pgid) signals the child's process group only.
                unsafe { libc::kill(-pgid, to_send) };
                forwarded.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let status = child.wait();
    if let Some(p) = pumps {
        p.join();
    }
    done.store(true, Ordering::SeqCst);
    handle.close();
    let _ = forwarder.join();
    let status = status.map_err(ChildError::Wait)?;
    let (code, signal) = exit_code(status);
    Ok(ChildExit {
        code,
        signal,
        forwarded: forwarded.load(Ordering::SeqCst) as u32,
    })
}
