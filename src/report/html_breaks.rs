//! Where the HTML report's text may wrap: at spaces, never inside a word.
//! A figure stays on one line with its unit ("128.0 MiB", "16.309 s": a
//! no-break space between them), and a token too long for a table column
//! (a path, a URL, a kernel name) is given break opportunities (`<wbr>`,
//! which copies as nothing) after its separators, so a column need not be as
//! wide as the longest path and no word is cut anywhere else.
//!
//! Applied to the rendered page's text nodes only: tags, the style sheet,
//! the inline SVG charts and the `<title>` pass through as they are.

/// The units the report prints after a figure (`units::bytes`, `seconds`).
const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "ns", "µs", "ms", "s"];

/// A token longer than this many characters gets break opportunities.
pub const LONG_TOKEN: usize = 20;

/// Characters after which a long token may break (the last of a run of
/// them: "https://" breaks after both slashes, never between them); an
/// underscore too, where it joins two words ("PYTORCH_CUDA_ALLOC_CONF").
const SEPARATORS: [&str; 6] = ["/", "#", "?", "&amp;", "=", ","];

/// Elements whose content is not text to wrap (or not HTML at all).
const OPAQUE: [&str; 4] = ["svg", "style", "title", "script"];

/// The page with its text nodes made to wrap only at spaces and separators.
pub fn wrap_only_between_words(html: &str) -> String {
    let mut out = String::with_capacity(html.len() + html.len() / 16);
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        out.push_str(&text_node(&rest[..i]));
        let tail = &rest[i..];
        let opaque = OPAQUE.iter().find(|t| {
            tail[1..].starts_with(*t)
                && tail[1 + t.len()..].starts_with(|c: char| c == '>' || c.is_whitespace())
        });
        let end = match opaque {
            Some(t) => {
                let close = format!("</{t}>");
                tail.find(&close).map_or(tail.len(), |j| j + close.len())
            }
            None => tail.find('>').map_or(tail.len(), |j| j + 1),
        };
        out.push_str(&tail[..end]);
        rest = &tail[end..];
    }
    out.push_str(&text_node(rest));
    out
}

/// One text node: figures bound to their units, long tokens breakable.
fn text_node(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let bound = bind_units(text);
    let mut out = String::with_capacity(bound.len());
    let mut token = String::new();
    for c in bound.chars() {
        if c.is_ascii_whitespace() {
            out.push_str(&breakable(&token));
            token.clear();
            out.push(c);
        } else {
            token.push(c);
        }
    }
    out.push_str(&breakable(&token));
    out
}

/// "128.0 MiB" -> "128.0\u{a0}MiB": a space between a digit and a unit
/// (followed by no letter or digit) becomes a no-break space.
fn bind_units(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<char> = None;
    for (i, c) in text.char_indices() {
        if c == ' ' && prev.is_some_and(|p| p.is_ascii_digit()) && unit_at(&text[i + 1..]) {
            out.push('\u{a0}');
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

/// Whether `s` starts with a unit that ends there (no letter or digit after it).
fn unit_at(s: &str) -> bool {
    UNITS.iter().any(|u| {
        s.strip_prefix(u)
            .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric()))
    })
}

/// The atoms of escaped text: an entity ("&#62;") or one character.
fn atoms(token: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = token;
    while let Some(c) = rest.chars().next() {
        let len = match (c, rest.find(';')) {
            ('&', Some(j))
                if j <= 10
                    && rest[1..j]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '#') =>
            {
                j + 1
            }
            _ => c.len_utf8(),
        };
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    out
}

/// A token as it may break: unchanged when short, else with `<wbr>` after
/// each last separator of a run that has more of the token after it.
fn breakable(token: &str) -> String {
    let atoms = atoms(token);
    if atoms.len() <= LONG_TOKEN {
        return token.to_string();
    }
    let separator = |a: &str| SEPARATORS.contains(&a);
    let word = |a: Option<&&str>| a.is_some_and(|a| a.chars().all(|c| c.is_ascii_alphanumeric()));
    let mut out = String::with_capacity(token.len() + 16);
    for (k, a) in atoms.iter().enumerate() {
        out.push_str(a);
        let next = atoms.get(k + 1);
        let joins_words = *a == "_" && k > 0 && word(atoms.get(k - 1)) && word(next);
        if joins_words || (separator(a) && next.is_some_and(|n| !separator(n))) {
            out.push_str("<wbr>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_keeps_its_unit_and_words_stay_whole() {
        assert_eq!(
            text_node("cuMemAlloc of 128.0 MiB by torch pool"),
            "cuMemAlloc of 128.0\u{a0}MiB by torch pool"
        );
        assert_eq!(text_node("16.309 s, step 2"), "16.309\u{a0}s, step 2");
        assert_eq!(
            text_node("+0 B; 3 steps; 2 of 4"),
            "+0\u{a0}B; 3 steps; 2 of 4"
        );
        assert_eq!(text_node("10.45 s ±1.56 s"), "10.45\u{a0}s ±1.56\u{a0}s");
    }

    #[test]
    fn long_paths_break_after_their_separators_only() {
        assert_eq!(
            text_node("/opt/torch/.venv/lib/x.py:869 wrapper"),
            "/<wbr>opt/<wbr>torch/<wbr>.venv/<wbr>lib/<wbr>x.py:869 wrapper"
        );
        assert_eq!(
            text_node("(https://docs.pytorch.org/docs/a#b-c)"),
            "(https://<wbr>docs.pytorch.org/<wbr>docs/<wbr>a#<wbr>b-c)"
        );
        // An entity is one character, never split or taken for a separator.
        assert_eq!(
            text_node("a&#62;b&amp;cccccccccccccccccccccc"),
            "a&#62;b&amp;<wbr>cccccccccccccccccccccc"
        );
        assert_eq!(text_node("short/path"), "short/path");
        // An underscore breaks where it joins two words, not where it starts one.
        assert_eq!(
            text_node("/torch/autograd/__init__.py:381 PYTORCH_CUDA_ALLOC_CONF=x"),
            "/<wbr>torch/<wbr>autograd/<wbr>__init__.py:381 PYTORCH_<wbr>CUDA_<wbr>ALLOC_<wbr>CONF=<wbr>x"
        );
    }

    #[test]
    fn markup_styles_charts_and_the_title_are_left_alone() {
        let page = "<title>a 1 s</title><style>td { a: 1 s }</style><p class=\"x\">1 s</p>\
                    <svg width=\"1 s\"><text>1 s</text></svg><td>2 MiB</td>";
        assert_eq!(
            wrap_only_between_words(page),
            "<title>a 1 s</title><style>td { a: 1 s }</style><p class=\"x\">1\u{a0}s</p>\
             <svg width=\"1 s\"><text>1 s</text></svg><td>2\u{a0}MiB</td>"
        );
    }
}
