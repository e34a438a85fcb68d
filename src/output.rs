//! The doctor's own output. A closed stdout or stderr (`report | head -1`,
//! `run ... 2>&1 | true`) never panics and never changes an exit code: stderr
//! lines are best effort, and a reader that went away on stdout ends that
//! output quietly while the command still exits with the code it would have had.
//!
//! SIGPIPE, deliberately: a Rust program starts with SIGPIPE ignored, so a
//! write to a closed pipe returns `EPIPE` instead of killing the process. The
//! doctor keeps that: `run` must outlive a closed pipe to reap the training
//! command and pass its exit code on. The command itself gets the default
//! disposition back (the standard library resets SIGPIPE to `SIG_DFL` in every
//! child it spawns), exactly as it would without the doctor;
//! `tests/cli_output.rs` checks both sides.

use crate::report::escape::{terminal, terminal_block};
use std::fmt::Display;
use std::io::{ErrorKind, Write};

/// Prefix of every message the doctor writes about itself.
pub const PREFIX: &str = "prewarm-doctor: ";

/// One message on stderr, `prewarm-doctor: MSG`. Messages quote paths,
/// flags and names from the user or a run folder, so every control character
/// is shown as an escape (`crate::report::escape`) — except the line breaks
/// of a message that has several lines (a TOML parser's error with its
/// caret), which stay line breaks, each further line indented under the
/// first: a literal `\n` in an error is unreadable. Write errors are
/// ignored: there is nowhere left to report them.
pub fn error(msg: impl Display) {
    write_stderr(&error_text(&msg.to_string()));
}

/// The text [`error`] writes for `msg`.
pub fn error_text(msg: &str) -> String {
    let lines: Vec<String> = msg
        .trim_end_matches(['\n', '\r'])
        .lines()
        .map(|l| terminal(l).into_owned())
        .collect();
    format!("{PREFIX}{}\n", lines.join("\n  "))
}

/// Text on stderr (progress lines, the end-of-run summary), its newlines kept
/// and any other control character shown as an escape; errors ignored.
pub fn stderr_text(text: &str) {
    write_stderr(&terminal_block(text));
}

fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// How writing to stdout went when it did not fail outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Everything was written.
    Written,
    /// The reader closed the pipe (`| head`): the rest was dropped on purpose.
    ReaderGone,
}

/// Writes `bytes` to stdout. A closed pipe is [`Delivery::ReaderGone`], not an
/// error; any other failure (disk full behind a redirect) is returned.
pub fn stdout_bytes(bytes: &[u8]) -> std::io::Result<Delivery> {
    write_to(&mut std::io::stdout().lock(), bytes)
}

/// [`stdout_bytes`] for any writer (tests use a closed pipe).
pub fn write_to(out: &mut impl Write, bytes: &[u8]) -> std::io::Result<Delivery> {
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(Delivery::Written),
        Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(Delivery::ReaderGone),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Closed(ErrorKind);
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_multi_line_error_keeps_its_line_breaks_and_escapes_the_rest() {
        let text = error_text("bad.toml: parse error at line 2\n  |\n2 | nam\x1b[31m\n");
        assert!(!text.contains("\\n"), "{text}");
        assert_eq!(
            text,
            "prewarm-doctor: bad.toml: parse error at line 2\n    |\n  2 | nam\\x1b[31m\n"
        );
        assert_eq!(error_text("one line"), "prewarm-doctor: one line\n");
    }

    #[test]
    fn a_closed_pipe_is_a_reader_that_went_away_and_other_failures_are_errors() {
        assert_eq!(
            write_to(&mut Closed(ErrorKind::BrokenPipe), b"x").unwrap(),
            Delivery::ReaderGone
        );
        assert!(write_to(&mut Closed(ErrorKind::StorageFull), b"x").is_err());
        let mut v = Vec::new();
        assert_eq!(write_to(&mut v, b"ok").unwrap(), Delivery::Written);
        assert_eq!(v, b"ok");
    }
}
