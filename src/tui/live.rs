//! `run --tui`: the dashboard while this doctor runs the command. The run goes
//! on a worker thread; the training's output arrives through an output sink
//! (its lines go to the log pane while the dashboard is up, and straight to
//! the doctor's stdout/stderr once it is closed); Ctrl-C in the dashboard is
//! sent to the doctor itself as SIGINT, so the capture's forwarder treats it
//! exactly like a Ctrl-C without the dashboard (first forwarded, second kills).

use super::app::App;
use super::loader::{Loader, Update};
use super::shared::RunState;
use super::{Ending, RunControl, event_loop, term, theme::Theme};
use crate::capture::child_output::{OutputSink, Stream};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// Longest line kept for the log pane (longer ones are cut).
const MAX_LINE: usize = 4096;

/// Makes a line of training output safe to draw: escape sequences removed,
/// a carriage return keeps what was written after it (progress bars), tabs
/// become spaces, other control characters are dropped.
pub fn display_line(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let text = text.rsplit('\r').find(|s| !s.is_empty()).unwrap_or("");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ params final-byte; OSC: ESC ] ... BEL or ESC \; others: ESC + one.
                match chars.next() {
                    Some('[') => {
                        for d in chars.by_ref() {
                            if ('@'..='~').contains(&d) {
                                break;
                            }
                        }
                    }
                    Some(']') => {
                        while let Some(d) = chars.next() {
                            if d == '\u{7}' || (d == '\u{1b}' && chars.peek() == Some(&'\\')) {
                                if d == '\u{1b}' {
                                    chars.next();
                                }
                                break;
                            }
                        }
                    }
                    _ => {}
                }
            }
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
        if out.len() >= MAX_LINE {
            break;
        }
    }
    out
}

/// The output sink of `run --tui`.
pub struct LogSink {
    tx: Mutex<Sender<Update>>,
    showing: AtomicBool,
    partial: Mutex<[Vec<u8>; 2]>,
}

impl LogSink {
    fn new(tx: Sender<Update>) -> LogSink {
        LogSink {
            tx: Mutex::new(tx),
            showing: AtomicBool::new(true),
            partial: Mutex::new([Vec::new(), Vec::new()]),
        }
    }

    /// From now on output goes to the doctor's own streams (the dashboard
    /// closed); half lines held for the pane go first.
    fn release(&self) {
        self.showing.store(false, Ordering::SeqCst);
        if let Ok(mut p) = self.partial.lock() {
            let [out, err] = &mut *p;
            let _ = std::io::stdout().write_all(out);
            let _ = std::io::stderr().write_all(err);
            out.clear();
            err.clear();
        }
    }
}

impl OutputSink for LogSink {
    fn chunk(&self, stream: Stream, bytes: &[u8]) {
        let Ok(mut partial) = self.partial.lock() else {
            return;
        };
        if !self.showing.load(Ordering::SeqCst) {
            drop(partial);
            let _ = match stream {
                Stream::Stdout => std::io::stdout().write_all(bytes),
                Stream::Stderr => std::io::stderr().write_all(bytes),
            };
            return;
        }
        let buf = &mut partial[stream as usize];
        buf.extend_from_slice(bytes);
        let mut lines = Vec::new();
        while let Some(i) = buf.iter().position(|&b| b == b'\n') {
            lines.push(display_line(&buf[..i]));
            buf.drain(..=i);
        }
        if buf.len() > MAX_LINE {
            lines.push(display_line(buf));
            buf.clear();
        }
        drop(partial);
        if let Ok(tx) = self.tx.lock() {
            for l in lines {
                let _ = tx.send(Update::Log(l));
            }
        }
    }
}

/// Marks in the log pane where each attempt's output begins, while the
/// dashboard is open.
#[derive(Clone)]
pub struct AttemptLog {
    tx: Sender<Update>,
    sink: Arc<LogSink>,
}

impl AttemptLog {
    /// Called by the matrix before attempt `index` of `total` starts.
    pub fn attempt_started(&self, variant: &str, attempt: &str, index: usize, total: usize) {
        let _ = self.tx.send(Update::Log(format!(
            "── attempt {index}/{total}: {variant}/{attempt} ──"
        )));
    }

    /// Whether the dashboard still shows the run: once it is closed (`d`:
    /// leave, let it finish) the run's output, and its progress lines, go
    /// to the doctor's own streams as without the dashboard.
    pub fn dashboard_open(&self) -> bool {
        self.sink.showing.load(Ordering::SeqCst)
    }
}

/// The dashboard side of `run --tui`, created before the run starts.
pub struct LiveRun {
    tx: Sender<Update>,
    rx: Receiver<Update>,
    sink: Arc<LogSink>,
    stop: Arc<AtomicBool>,
}

struct Control<'a>(&'a AtomicBool);

impl RunControl for Control<'_> {
    fn interrupt(&self) {
        self.0.store(true, Ordering::SeqCst);
        // The capture forwards SIGINT to the training's process group and
        // kills it on the second; between attempts the stop flag holds the matrix.
        // SAFETY: signals this process only.
        unsafe { libc::kill(libc::getpid(), libc::SIGINT) };
    }
    fn stop(&self) {
        self.interrupt();
    }
}

impl Default for LiveRun {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveRun {
    /// A dashboard waiting for its run.
    pub fn new() -> LiveRun {
        let (tx, rx) = channel();
        LiveRun {
            sink: Arc::new(LogSink::new(tx.clone())),
            tx,
            rx,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Where the matrix announces each attempt.
    pub fn log(&self) -> AttemptLog {
        AttemptLog {
            tx: self.tx.clone(),
            sink: self.sink.clone(),
        }
    }

    /// Where the run sends the training's output.
    pub fn sink(&self) -> Arc<dyn OutputSink> {
        self.sink.clone()
    }

    /// Set when the user stopped the run: no further attempts.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Runs `work` (the matrix) on a worker thread and shows the dashboard
    /// over `root` until the user leaves; then waits for the work and returns
    /// its result. `code` gives the exit code the status bar shows.
    pub fn show<R: Send>(
        self,
        root: &Path,
        work: impl FnOnce() -> R + Send,
        code: impl Fn(&R) -> i32 + Send,
    ) -> R {
        let LiveRun { tx, rx, sink, stop } = self;
        let loader = Loader::spawn(root.to_path_buf(), true, tx.clone());
        std::thread::scope(|scope| {
            let finished_tx = tx.clone();
            let worker = scope.spawn(move || {
                let r = work();
                let _ = finished_tx.send(Update::Finished(code(&r)));
                r
            });
            let ending = match term::Screen::enter() {
                Ok(mut screen) => {
                    let mut app =
                        App::new(Default::default(), Theme::from_env(), RunState::Running);
                    let control = Control(&stop);
                    let ending = event_loop(&mut screen.terminal, &mut app, &rx, Some(&control));
                    drop(screen);
                    ending.map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            sink.release();
            let still_running = !worker.is_finished();
            match ending {
                Err(e) => crate::output::error(format_args!(
                    "the dashboard failed ({e}); the run goes on with plain output"
                )),
                Ok(Ending::Signal(s)) if still_running => crate::output::stderr_text(&format!(
                    "[prewarm-doctor] signal {s}: dashboard closed; the signal was forwarded to the training, which is stopping\n"
                )),
                Ok(Ending::Detached) | Ok(Ending::Quit) if still_running => {
                    crate::output::stderr_text(
                        "[prewarm-doctor] dashboard closed; the run goes on and its output follows (all of it is in output.log of each attempt folder)\n",
                    )
                }
                _ => {}
            }
            let r = worker
                .join()
                .expect("the run's worker thread does not panic");
            loader.finish();
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_made_safe_to_draw() {
        assert_eq!(display_line(b"plain"), "plain");
        assert_eq!(display_line(b"\x1b[31mred\x1b[0m text"), "red text");
        assert_eq!(display_line(b"10%\r50%\r100%"), "100%");
        assert_eq!(display_line(b"a\tb\x07"), "a    b");
        assert_eq!(display_line(b"\x1b]0;title\x07after"), "after");
        assert_eq!(display_line(b"bad \xff byte"), "bad \u{fffd} byte");
    }

    #[test]
    fn the_sink_splits_lines_across_chunks_per_stream() {
        let (tx, rx) = channel();
        let sink = LogSink::new(tx);
        sink.chunk(Stream::Stdout, b"hel");
        sink.chunk(Stream::Stderr, b"err line\n");
        sink.chunk(Stream::Stdout, b"lo\nnext");
        let got: Vec<String> = rx
            .try_iter()
            .map(|u| match u {
                Update::Log(l) => l,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, vec!["err line".to_string(), "hello".to_string()]);
    }
}
