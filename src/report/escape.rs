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

/// JSON written with [`write_json_pretty`] carries every unsafe character
/// ([`is_unsafe`]) of its strings as a `\uXXXX` escape, at the source: the
/// escape decodes to the same character, so the data is unchanged while no
/// raw control, bidirectional mark or separator reaches a terminal that shows
/// the file. serde_json escapes quotes, backslashes and C0 controls itself;
/// this formatter the rest, in the fragments it hands over.
struct InertFormatter(serde_json::ser::PrettyFormatter<'static>);

impl serde_json::ser::Formatter for InertFormatter {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_unsafe(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(w, "\\u{u:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as pretty-printed JSON into `out`, as it is serialised (a large
/// run's account is hundreds of MB), its strings' unsafe characters escaped.
pub fn write_json_pretty<T: serde::Serialize + ?Sized>(
    out: &mut dyn std::io::Write,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(
        out,
        InertFormatter(serde_json::ser::PrettyFormatter::new()),
    );
    value.serialize(&mut ser)
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
        let value = serde_json::json!({ "kernel": HOSTILE, "list": ["\u{2066}x\u{85}", "é\\\"", "\u{200e}\u{2029}"] });
        let mut out = Vec::new();
        write_json_pretty(&mut out, &value).unwrap();
        let text = std::str::from_utf8(&out).unwrap();
        // The layout's newlines are the only raw controls left.
        assert!(!text.chars().any(|c| c != '\n' && is_unsafe(c)), "{text}");
        assert!(text.contains('\n'), "the layout's newlines stay");
        let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, value);
        // Plain data is what serde_json writes.
        let plain = serde_json::json!({"a": ["b", 1]});
        let mut out = Vec::new();
        write_json_pretty(&mut out, &plain).unwrap();
        assert_eq!(out, serde_json::to_vec_pretty(&plain).unwrap());
    }
}
