//! Python literals from recorded data. Everything a prescription carries from
//! a recording (kernel names, module paths, group names, the run folder) is
//! untrusted: it reaches the generated module only as a literal written here,
//! ASCII-only, with every quote, backslash, control and non-ASCII character
//! escaped, so no recorded byte can end a string, a comment or a line.

use serde_json::Value;

/// A Python string literal (single-quoted, ASCII only) holding `s` exactly.
pub fn str_lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_ascii() => out.push(c),
            c if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('\'');
    out
}

/// An optional string: the literal, or `None`.
pub fn opt_str(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_string(), str_lit)
}

/// A JSON value as the equal Python literal (dicts keep their key order).
pub fn value(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => number(n),
        Value::String(s) => str_lit(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(value).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}: {}", str_lit(k), value(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    match n.as_f64() {
        // `{:?}` always writes a form Python reads back as the same float.
        Some(f) if f.is_finite() => format!("{f:?}"),
        _ => "None".into(),
    }
}

/// A comment line's text: recorded text made safe to follow `# ` (its
/// literal form, so a newline in a kernel name cannot end the comment).
pub fn comment_text(s: &str) -> String {
    let lit = str_lit(s);
    // Quotes need no escape in a comment; every `\'` is an escaped quote
    // (a raw quote never follows an escaped backslash's pair unescaped).
    lit[1..lit.len() - 1].replace("\\'", "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_stays_inside_its_literal() {
        let nasty = "k'\"\\\n\r\t\u{7f}\u{0}é😀\u{2028}";
        let lit = str_lit(nasty);
        assert!(lit.is_ascii());
        assert!(!lit.contains('\n') && !lit.contains('\r'));
        assert_eq!(
            lit,
            "'k\\'\"\\\\\\n\\r\\t\\x7f\\x00\\u00e9\\U0001f600\\u2028'"
        );
        assert!(!comment_text("a\nimport os").contains('\n'));
        assert_eq!(comment_text("it's \\'"), "it's \\\\'");
    }

    #[test]
    fn json_values_become_python_literals() {
        let v: Value =
            serde_json::from_str(r#"{"a": [1, -2, 1.5, 1e300, true, false, null, "x"], "b'": {}}"#)
                .unwrap();
        assert_eq!(
            value(&v),
            "{'a': [1, -2, 1.5, 1e300, True, False, None, 'x'], 'b\\'': {}}"
        );
    }
}
