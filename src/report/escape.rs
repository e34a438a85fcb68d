//! Safe text from untrusted strings, one function per output format. Kernel
//! names, command lines, environment values, host tags, exception messages
//! and folder names come from the training or from a run folder anyone can
//! edit; none of them may drive the reader's terminal (ESC/CSI colours and
//! cursor moves, OSC 8 hyperlinks, BEL, `\r` overwriting a line), forge a line
//! of the report (a newline), break out of a Markdown table or inject markup,
//! or run as a spreadsheet formula. JSON stays faithful to the data (its
//! escapes decode to the same string) but carries no raw control characters.
//!
//! Unsafe characters are shown, not dropped: `\x1b`, `\r`, `\n`, `\u{202e}`,
//! so a strange name is still recognisable.

use std::borrow::Cow;
use std::fmt::Write;

/// A character that must not reach a terminal as it is: C0 controls (ESC,
/// BEL, CR, LF, TAB, ...), DEL, C1 controls (U+0080–U+009F, among them the
/// one-character CSI and OSC), and the bidirectional overrides and isolates
/// that make a terminal show text in another order than it is.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// The same policy for pictures and pages (SVG, HTML), where a character is
/// replaced rather than spelled out: a C0 control becomes its Unicode control
/// picture (ESC shows as ␛), DEL ␡, every other unsafe character (C1
/// controls, bidirectional marks, overrides and isolates, line and paragraph
/// separators) the replacement character. Tab and newlines stay: markup
/// shows them as spaces.
pub fn inert(c: char) -> char {
    match c {
        '\t' | '\n' | '\r' => c,
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}'),
        '\u{7f}' => '\u{2421}',
        c if is_unsafe(c) => '\u{fffd}',
        c => c,
    }
}

/// A command line's words quoted as a POSIX shell needs them, joined by
/// spaces, not yet escaped for a destination: the one quoting every format
/// shows a command with.
pub fn shell_words(words: &[String]) -> String {
    let quoted: Vec<Cow<str>> = words.iter().map(|w| shell_word(w)).collect();
    quoted.join(" ")
}

/// The visible form of an unsafe character.
fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_with(s: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) && !keep(c) {
            push_visible(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One field (a name, a command word, a message) for the terminal: every
/// unsafe character shown as an escape, newlines included, so the field stays
/// on its line and cannot change how the terminal shows anything.
pub fn terminal(s: &str) -> Cow<'_, str> {
    escape_with(s, |_| false)
}

/// A whole rendered text for the terminal: like [`terminal`], but the
/// renderer's own newlines stay. Applied to everything the doctor prints as
/// text, so no renderer can let an escape sequence through.
pub fn terminal_block(s: &str) -> Cow<'_, str> {
    escape_with(s, |c| c == '\n')
}

/// A command line as one line of text: words quoted like a shell would need
/// them (so word boundaries stay visible), then escaped for the terminal.
pub fn command_line(words: &[String]) -> String {
    terminal(&shell_words(words)).into_owned()
}

/// A word as a POSIX shell would need it: as is when it only has characters
/// no shell treats specially, else in single quotes.
fn shell_word(w: &str) -> Cow<'_, str> {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_=+:,./@%".contains(c));
    if plain {
        Cow::Borrowed(w)
    } else {
        Cow::Owned(format!("'{}'", w.replace('\'', "'\\''")))
    }
}

/// Characters with a meaning in Markdown (GitHub's flavour) or HTML.
fn is_markup(c: char) -> bool {
    matches!(
        c,
        '|' | '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '~' | '&' | '!' | '$'
    )
}

/// Text for a Markdown line or table cell: markup characters backslash-escaped
/// (no table break, link, image, HTML tag, entity, emphasis or code span),
/// newlines as spaces, other unsafe characters shown as escapes.
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => out.push(' '),
            c if is_unsafe(c) => {
                let mut visible = String::new();
                push_visible(&mut visible, c);
                // Its backslash is escaped too, so Markdown shows it as written.
                out.push_str(&visible.replace('\\', "\\\\"));
            }
            c if is_markup(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// A text field for CSV: unsafe characters shown as escapes (the csv writer
/// already quotes commas, quotes and newlines, but a raw ESC would still reach
/// a terminal that shows the file), and a leading `=`, `+`, `-`, `@` (a
/// formula to spreadsheets) made literal with a `'` in front.
pub fn csv_field(s: &str) -> Cow<'_, str> {
    let escaped = terminal(s);
    if escaped.starts_with(['=', '+', '-', '@']) {
        Cow::Owned(format!("'{escaped}"))
    } else {
        escaped
    }
}

/// JSON bytes with every control character, DEL, C1 control, line/paragraph
/// separator and bidirectional control written as a `\uXXXX` escape. Such
/// characters only occur inside JSON strings and the escape decodes to the
/// same character, so the data is unchanged while no raw control reaches a
/// terminal that shows the file.
pub fn json_controls(json: &[u8]) -> Cow<'_, [u8]> {
    let mut out = Vec::with_capacity(json.len());
    let mut w = JsonControls::new(&mut out);
    if std::io::Write::write_all(&mut w, json).is_err() || out == json {
        return Cow::Borrowed(json);
    }
    Cow::Owned(out)
}

/// [`json_controls`] as a writer: JSON written through it reaches `inner`
/// with the unsafe characters inside its strings escaped, in one pass and
/// without holding the document (a large run's account is hundreds of MB).
/// `"` and `\` are ASCII and never part of a multi-byte character, so the
/// string state is followed byte by byte; a character split between two
/// writes is held until its last byte arrives.
pub struct JsonControls<W: std::io::Write> {
    inner: W,
    in_string: bool,
    escaped: bool,
    /// The bytes so far of a multi-byte character inside a string.
    partial: [u8; 4],
    partial_len: usize,
    /// Bytes still missing from `partial`.
    need: usize,
}

impl<W: std::io::Write> JsonControls<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        JsonControls {
            inner,
            in_string: false,
            escaped: false,
            partial: [0; 4],
            partial_len: 0,
            need: 0,
        }
    }

    /// One whole character inside a string: as it is, or as `\uXXXX`.
    fn character(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| t.chars().next())
        {
            Some(c) if is_unsafe(c) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(self.inner, "\\u{u:04x}")?;
                }
                Ok(())
            }
            _ => self.inner.write_all(bytes),
        }
    }
}

/// How many bytes a UTF-8 character starting with `lead` has.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

impl<W: std::io::Write> std::io::Write for JsonControls<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut i = 0;
        let mut run = 0;
        while i < buf.len() {
            let b = buf[i];
            if self.need > 0 {
                self.partial[self.partial_len] = b;
                self.partial_len += 1;
                self.need -= 1;
                i += 1;
                run = i;
                if self.need == 0 {
                    let whole = self.partial;
                    self.character(&whole[..self.partial_len])?;
                    self.partial_len = 0;
                }
                continue;
            }
            if !self.in_string {
                self.in_string = b == b'"';
                i += 1;
                continue;
            }
            if self.escaped {
                self.escaped = false;
                i += 1;
                continue;
            }
            match b {
                b'\\' => self.escaped = true,
                b'"' => self.in_string = false,
                0x00..=0x1f | 0x7f => {
                    self.inner.write_all(&buf[run..i])?;
                    self.character(&[b])?;
                    run = i + 1;
                }
                0x80..=0xff => {
                    let len = utf8_len(b);
                    self.inner.write_all(&buf[run..i])?;
                    if i + len <= buf.len() {
                        self.character(&buf[i..i + len])?;
                    } else {
                        let have = buf.len() - i;
                        self.partial[..have].copy_from_slice(&buf[i..]);
                        self.partial_len = have;
                        self.need = len - have;
                    }
                    i += len;
                    run = i.min(buf.len());
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        self.inner.write_all(&buf[run.min(buf.len())..])?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "k\u{1b}[31mred\u{1b}[0m\u{1b}]8;;http://evil\u{7}link\u{1b}]8;;\u{7}\u{7}\rover\nnext\u{9b}2J\u{202e}txt\u{7f}";

    #[test]
    fn terminal_fields_show_every_control_and_stay_on_one_line() {
        let t = terminal(HOSTILE);
        assert!(!t.chars().any(is_unsafe), "{t}");
        assert_eq!(
            t,
            "k\\x1b[31mred\\x1b[0m\\x1b]8;;http://evil\\x07link\\x1b]8;;\\x07\\x07\\rover\\nnext\\u{9b}2J\\u{202e}txt\\x7f"
        );
        assert!(matches!(
            terminal("plain kernel<float, 4>"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn a_terminal_block_keeps_only_its_newlines() {
        let t = terminal_block("line one\u{1b}[2K\nline two\r\n");
        assert_eq!(t, "line one\\x1b[2K\nline two\\r\n");
    }

    #[test]
    fn command_lines_keep_word_boundaries_visible() {
        let words: Vec<String> = [
            "python",
            "train.py",
            "--n=1",
            "a b",
            "it's",
            "",
            "x\u{1b}[1my",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            command_line(&words),
            "python train.py --n=1 'a b' 'it'\\''s' '' 'x\\x1b[1my'"
        );
    }

    #[test]
    fn markdown_cannot_break_tables_or_inject_markup() {
        assert_eq!(markdown("a|b"), "a\\|b");
        assert_eq!(markdown("<script>"), "\\<script\\>");
        assert_eq!(
            markdown("kernel<float, 4>\n[x](y)"),
            "kernel\\<float, 4\\> \\[x\\](y)"
        );
        assert_eq!(
            markdown("![i](u) `c` *b* _e_"),
            "\\!\\[i\\](u) \\`c\\` \\*b\\* \\_e\\_"
        );
        assert_eq!(markdown("\u{1b}[31m"), "\\\\x1b\\[31m");
        let m = markdown(HOSTILE);
        assert!(!m.chars().any(is_unsafe));
        assert!(!m.contains('\n'));
    }

    #[test]
    fn csv_fields_are_not_formulas_and_carry_no_controls() {
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(csv_field("-1+2"), "'-1+2");
        assert_eq!(csv_field("node0"), "node0");
        assert_eq!(csv_field("a\u{1b}b"), "a\\x1bb");
    }

    #[test]
    fn json_keeps_its_data_and_loses_its_raw_controls() {
        let value = serde_json::json!({ "kernel": HOSTILE, "plain": "x" });
        let raw = serde_json::to_vec(&value).unwrap();
        let safe = json_controls(&raw);
        let text = std::str::from_utf8(&safe).unwrap();
        assert!(!text.chars().any(is_unsafe), "{text}");
        let back: serde_json::Value = serde_json::from_slice(&safe).unwrap();
        assert_eq!(back, value);
        let plain = serde_json::to_vec(&serde_json::json!({"a": "b"})).unwrap();
        assert!(matches!(json_controls(&plain), Cow::Borrowed(_)));
    }

    /// Written in pieces of every size (characters split between writes),
    /// pretty-printed (newlines outside strings stay), the result is the same.
    #[test]
    fn json_written_in_pieces_is_escaped_the_same() {
        let value = serde_json::json!({ "kernel": HOSTILE, "list": ["\u{2066}x\u{85}", "é\\\""] });
        let raw = serde_json::to_vec_pretty(&value).unwrap();
        let whole = json_controls(&raw).into_owned();
        assert!(whole.contains(&b'\n'), "the layout's newlines stay");
        for piece in 1..8 {
            let mut out = Vec::new();
            let mut w = JsonControls::new(&mut out);
            for chunk in raw.chunks(piece) {
                std::io::Write::write_all(&mut w, chunk).unwrap();
            }
            assert_eq!(out, whole, "pieces of {piece}");
        }
        let back: serde_json::Value = serde_json::from_slice(&whole).unwrap();
        assert_eq!(back, value);
    }
}
