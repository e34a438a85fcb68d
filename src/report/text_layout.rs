//! The layout of the text formats: one table model for every text format
//! (the terminal writes it aligned in at most [`WIDTH`] columns, Markdown as
//! a GitHub table), and text word-wrapped at [`WIDTH`]. Cells hold plain
//! text from the run (names, hosts): each format escapes them.

use super::escape;
use std::fmt::Write;
use unicode_width::UnicodeWidthStr;

/// Widest line the terminal summary writes.
pub const WIDTH: usize = 100;

/// How a column lines up in the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: names, hosts. The only cells shortened (with "…") when a
    /// table is too wide; numbers are never cut.
    Text,
    /// Figures, right-aligned so units line up.
    Number,
}

/// A table: a header and rows of cells, as many as there are columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            headers: columns.iter().map(|(h, a)| (h.to_string(), *a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty, extra ones dropped).
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.headers.len(), String::new());
        self.rows.push(cells);
    }

    /// The table as terminal lines, each starting with `indent`, two spaces
    /// between columns, at most `width` columns: when too wide, the widest
    /// text column gives way first (its cells shortened with "…"); figures
    /// keep every digit. Cells are escaped for the terminal.
    pub fn text_lines(&self, indent: &str, width: usize) -> Vec<String> {
        let cell = |s: &str| escape::terminal(s).into_owned();
        let header: Vec<String> = self.headers.iter().map(|(h, _)| cell(h)).collect();
        let body: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| cell(c)).collect())
            .collect();
        // Display columns, as a terminal shows them: a CJK character or an
        // emoji takes two, a combining accent none (issue 39).
        let count = |s: &str| s.width();
        let mut widths: Vec<usize> = header.iter().map(|h| count(h)).collect();
        for r in &body {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(count(c));
            }
        }
        let total = |ws: &[usize]| count(indent) + ws.iter().sum::<usize>() + 2 * (ws.len() - 1);
        // Text columns give way, widest first, down to their header (or 6).
        while total(&widths) > width {
            let Some((i, _)) = widths
                .iter()
                .enumerate()
                .filter(|(i, w)| {
                    self.headers[*i].1 == Align::Text && **w > count(&header[*i]).max(6)
                })
                .max_by_key(|(_, w)| **w)
            else {
                break;
            };
            widths[i] -= 1;
        }
        std::iter::once(&header)
            .chain(&body)
            .map(|r| {
                let cells: Vec<String> = r
                    .iter()
                    .zip(&widths)
                    .zip(&self.headers)
                    .map(|((c, w), (_, align))| {
                        let c = crate::report::figures::shorten(c, *w);
                        let pad = " ".repeat(w.saturating_sub(c.width()));
                        match align {
                            Align::Text => format!("{c}{pad}"),
                            Align::Number => format!("{pad}{c}"),
                        }
                    })
                    .collect();
                format!("{indent}{}", cells.join("  "))
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    /// The table in GitHub Markdown (cells escaped; figures right-aligned).
    pub fn markdown(&self) -> String {
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let mut out = line(
            self.headers
                .iter()
                .map(|(h, _)| escape::markdown(h))
                .collect(),
        );
        out.push_str(&line(
            self.headers
                .iter()
                .map(|(_, a)| match a {
                    Align::Text => "---".to_string(),
                    Align::Number => "---:".to_string(),
                })
                .collect(),
        ));
        for r in &self.rows {
            out.push_str(&line(r.iter().map(|c| escape::markdown(c)).collect()));
        }
        out
    }
}

/// Word-wraps `text` to `width` display columns (wide and combining
/// characters counted as a terminal shows them): `first` before the first
/// line, `rest` before the others; lines filled greedily, a word wider than
/// a line cut to fit. A `first` wider than half the line (a variant named
/// with all its prewarms) is wrapped as words too, so it never squeezes the
/// words after it into one character per line.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
    use textwrap::{Options, WordSeparator, WordSplitter, WrapAlgorithm};
    if textwrap::core::display_width(first) > width / 2 && !first.trim().is_empty() {
        let lead: String = first.chars().take_while(|c| *c == ' ').collect();
        return wrap(&format!("{} {text}", first.trim()), &lead, rest, width);
    }
    let text = text
        .split(' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let options = Options::new(width.max(1))
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_separator(WordSeparator::AsciiSpace)
        .word_splitter(WordSplitter::NoHyphenation)
        .wrap_algorithm(WrapAlgorithm::FirstFit)
        .break_words(true);
    let lines: Vec<String> = textwrap::wrap(&text, options)
        .into_iter()
        .map(|l| l.into_owned())
        .collect();
    if lines.is_empty() {
        vec![first.to_string()]
    } else {
        lines
    }
}

/// The words of `text`, a word wider than `room` display columns cut into
/// pieces that fit (a kernel name; figures are never that long).
pub fn words(text: &str, room: usize) -> Vec<String> {
    let room = room.max(1);
    let mut out = Vec::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut piece = String::new();
        for c in word.chars() {
            let mut buf = [0u8; 4];
            let w = textwrap::core::display_width(c.encode_utf8(&mut buf));
            if !piece.is_empty() && textwrap::core::display_width(&piece) + w > room {
                out.push(std::mem::take(&mut piece));
            }
            piece.push(c);
        }
        out.push(piece);
    }
    out
}

/// Writes `text` word-wrapped at [`WIDTH`]: `first` before the first line,
/// `rest` before the others.
pub fn print_text(o: &mut String, text: &str, first: &str, rest: &str) {
    for line in wrap(text, first, rest, WIDTH) {
        let _ = writeln!(o, "{line}");
    }
}

/// A table indented under its heading, at most [`WIDTH`] columns.
pub fn write_table(o: &mut String, t: &Table) {
    for line in t.text_lines("   ", WIDTH) {
        let _ = writeln!(o, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(&[("variant", Align::Text), ("step-1 peak", Align::Number)]);
        t.row(vec!["baseline".into(), "2.0 GiB ±0".into()]);
        t.row(vec!["a|b".into(), "968.3 MiB".into()]);
        t
    }

    #[test]
    fn text_columns_align_and_figures_right() {
        let lines = sample().text_lines("   ", WIDTH);
        assert_eq!(lines[0], "   variant   step-1 peak");
        assert_eq!(lines[1], "   baseline   2.0 GiB ±0");
        assert_eq!(lines[2], "   a|b         968.3 MiB");
    }

    #[test]
    fn too_wide_tables_cut_names_never_figures() {
        let mut t = Table::new(&[("name", Align::Text), ("figure", Align::Number)]);
        t.row(vec!["k".repeat(200), "123456.7 MiB".into()]);
        let lines = t.text_lines("   ", 40);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        assert!(lines[1].ends_with("123456.7 MiB"));
        assert!(lines[1].contains('…'));
    }

    #[test]
    fn columns_align_by_display_width_not_characters() {
        // "数据" is 2 characters and 4 columns; "e\u{301}" (e and a
        // combining acute accent) 2 characters and 1 column.
        let mut t = Table::new(&[("name", Align::Text), ("figure", Align::Number)]);
        t.row(vec!["数据".into(), "1.0 GiB".into()]);
        t.row(vec!["cafe\u{301}".into(), "12.0 GiB".into()]);
        t.row(vec!["abcdef".into(), "3 MiB".into()]);
        let lines = t.text_lines("  ", WIDTH);
        assert_eq!(
            lines,
            vec![
                "  name      figure",
                "  数据     1.0 GiB",
                "  cafe\u{301}    12.0 GiB",
                "  abcdef     3 MiB",
            ]
        );
        // Every line ends at the same display column, the figures' edge.
        assert!(lines.iter().all(|l| l.width() == 18), "{lines:?}");
    }

    #[test]
    fn wide_names_are_cut_by_display_width() {
        let mut t = Table::new(&[("name", Align::Text), ("figure", Align::Number)]);
        t.row(vec!["数".repeat(30), "123456.7 MiB".into()]);
        t.row(vec!["short".into(), "1 MiB".into()]);
        let lines = t.text_lines("   ", 40);
        assert!(lines.iter().all(|l| l.width() <= 40), "{lines:?}");
        assert!(lines[1].ends_with("123456.7 MiB") && lines[1].contains('…'));
        // The cut name plus its padding fills its column: the figures line up.
        let ends: Vec<usize> = lines.iter().map(|l| l.width()).collect();
        assert_eq!(ends, vec![40; 3], "{lines:?}");
        assert_eq!(crate::report::figures::shorten("数据数据", 6), "数据…");
        assert_eq!(crate::report::figures::shorten("数据数据", 5), "数据…");
        assert_eq!(
            crate::report::figures::shorten("e\u{301}e\u{301}x", 3),
            "e\u{301}e\u{301}x"
        );
    }

    #[test]
    fn markdown_escapes_cells_and_right_aligns_figures() {
        let md = sample().markdown();
        assert!(md.starts_with("| variant | step-1 peak |\n| --- | ---: |\n"));
        assert!(md.contains("| a\\|b | 968.3 MiB |"));
    }

    #[test]
    fn wraps_at_the_width_with_a_hanging_indent() {
        let lines = wrap("aaa bbb ccc ddd", "  - ", "    ", 12);
        assert_eq!(lines, vec!["  - aaa bbb", "    ccc ddd"]);
        assert!(lines.iter().all(|l| l.len() <= 12));
        assert_eq!(
            wrap("averyveryverylongword", "- ", "  ", 8),
            vec!["- averyv", "  eryver", "  ylongw", "  ord"]
        );
    }

    #[test]
    fn a_head_wider_than_the_line_never_collapses_to_a_character_per_line() {
        let head = format!("   all [{}]: ", ["cublas_backward"; 6].join(", "));
        let lines = wrap(
            "INCONCLUSIVE (cannot be judged on this run)",
            &head,
            "     ",
            100,
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("INCONCLUSIVE (cannot be judged")),
            "{lines:#?}"
        );
        // A long first prefix leaves every word whole.
        let lines = wrap("averyveryverylongword x", "- a long lead: ", "  ", 24);
        assert_eq!(lines, ["- a long lead:", "  averyveryverylongword", "  x"]);
    }

    /// Width is what a terminal shows: a CJK character takes two columns, a
    /// combining accent none (counting chars put 8 wide characters, 16
    /// columns, on a line of 10).
    #[test]
    fn wraps_by_display_width() {
        let lines = wrap("核函数名称很长 x", "", "", 10);
        assert!(
            lines.iter().all(|l| textwrap::core::display_width(l) <= 10),
            "{lines:?}"
        );
        let accented = "e\u{301}e\u{301}e\u{301}e\u{301}e\u{301} ab";
        assert_eq!(wrap(accented, "", "", 8), [accented]);
    }
}
