//! Messages on stderr: the doctor's errors and notes, and text such as the
//! end-of-run summary. Write errors are ignored: there is nowhere left to
//! report them.

use crate::report::escape::{terminal, terminal_block};
use std::fmt::Display;
use std::io::Write;

/// Prefix of every message the doctor writes about itself.
pub const PREFIX: &str = "prewarm-doctor: ";

/// One message on stderr, `prewarm-doctor: MSG`. Messages quote paths,
/// flags and names from the user or a run folder, so every control character
/// is shown as an escape (`crate::report::escape`) — except the line breaks
/// of a message that has several lines (a TOML parser's error with its
/// caret), which stay line breaks, each further line indented under the
/// first: a literal `\n` in an error is unreadable.
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
