//! Fuzz targets for every parser of untrusted input, shared by the
//! coverage-guided entry points (`fuzz/fuzz_targets/*.rs`, cargo-fuzz on a
//! nightly toolchain) and the stable mutation driver (`tests/fuzz_stable.rs`,
//! which includes this file). Each target must never panic, and checks the
//! properties its parser promises; a violated property panics, which both
//! drivers report as a crash with the input that caused it.

use prewarm_doctor::load::nccl::parse_nccl_log;
use prewarm_doctor::load::shim_from_bytes;
use prewarm_doctor::prewarm::variants;
use prewarm_doctor::report::escape;
use prewarm_events::{Record, encode_header, encode_record, read_file_bytes};
use std::path::Path;

/// The event decoder (crates/events) and the load layer's problems for it:
/// decoding never panics; what decodes re-encodes to a file that decodes to
/// the same header and records (after the one normalisation encoding does:
/// strings cut to 4096 bytes, replacement characters for bad UTF-8); a
/// problem always names a byte offset inside the file.
pub fn event_decoder(data: &[u8]) {
    let streamed = prewarm_doctor::load::stream_records(data, |_| {});
    for p in streamed.problems(Path::new(""), Path::new("f.events")) {
        if let Some(offset) = p.offset {
            assert!(
                offset <= data.len() as u64,
                "offset {offset} past the end: {p}"
            );
        }
    }
    let Ok(first) = read_file_bytes(data) else {
        assert!(streamed.error.is_some() || streamed.header.is_none());
        return;
    };
    assert_eq!(first.records.len() as u64, streamed.records);
    let second = read_file_bytes(&reencode(&first.header.fields, &first.records))
        .expect("re-encoded records decode");
    assert_eq!(second.records.len(), first.records.len());
    let third = read_file_bytes(&reencode(&second.header.fields, &second.records))
        .expect("re-encoded records decode");
    assert_eq!(third.header, second.header);
    assert_eq!(third.records, second.records);
}

fn reencode(fields: &[(String, String)], records: &[Record]) -> Vec<u8> {
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut out = encode_header(&fields);
    for r in records {
        encode_record(r, &mut out);
    }
    out
}

/// The shim JSON-lines reader (src/load/shim.rs via the load layer): never
/// panics; at most one problem per file, at a line and byte offset inside it
/// where a line starts.
pub fn shim_jsonl(data: &[u8]) {
    let (_events, problems) = shim_from_bytes("p.shim.jsonl", data);
    assert!(problems.len() <= 1, "{problems:?}");
    for p in &problems {
        let offset = p.offset.expect("a shim problem has an offset") as usize;
        let line = p.line.expect("a shim problem has a line") as usize;
        assert!(offset <= data.len(), "{p}");
        assert!(offset == 0 || data[offset - 1] == b'\n', "{p}");
        assert_eq!(
            data[..offset].iter().filter(|&&b| b == b'\n').count() + 1,
            line,
            "{p}"
        );
    }
}

/// The NCCL log parser (src/load/nccl.rs): never panics; every communicator
/// has the pointer NCCL printed (a word of the input).
pub fn nccl_log(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for c in parse_nccl_log(&text, "nccl.h.1.log") {
        assert!(!c.comm.is_empty() && text.contains(&c.comm), "{c:?}");
    }
}

/// The variants TOML (src/prewarm/variants.rs): never panics; a file that is
/// accepted yields uniquely named variants and a baseline among them.
pub fn variants_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok((mut declared, baseline)) = variants::from_toml(text, "matrix.toml") else {
        return;
    };
    assert!(!declared.is_empty());
    if let Ok(base) = variants::finish(&mut declared, baseline.as_deref()) {
        assert!(declared.iter().any(|v| v.name == base), "{base}");
        let mut names: Vec<&str> = declared.iter().map(|v| v.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), declared.len());
    }
}

/// The sanitisers (src/report/escape.rs): whatever the input, terminal
/// fields hold no unsafe character, blocks only newlines, Markdown no
/// newline and no unescaped table separator, CSV fields are no formulas, and
/// JSON keeps its value while losing its raw controls.
pub fn escape(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let field = escape::terminal(&text);
    assert!(!field.chars().any(escape::is_unsafe), "{field:?}");
    let block = escape::terminal_block(&text);
    assert!(
        !block.chars().any(|c| c != '\n' && escape::is_unsafe(c)),
        "{block:?}"
    );
    assert_eq!(block.matches('\n').count(), text.matches('\n').count());
    let md = escape::markdown(&text);
    assert!(!md.chars().any(escape::is_unsafe), "{md:?}");
    let mut backslashes = 0;
    for c in md.chars() {
        assert!(c != '|' || backslashes % 2 == 1, "bare | in {md:?}");
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
    }
    let csv = escape::csv_field(&text);
    assert!(!csv.starts_with(['=', '+', '-', '@']), "{csv:?}");
    let json = serde_json::to_vec(&serde_json::json!({ "s": text })).expect("serialises");
    let safe = escape::json_controls(&json);
    let back: serde_json::Value = serde_json::from_slice(&safe).expect("still JSON");
    assert_eq!(back["s"].as_str(), Some(&*text));
    let safe_text = std::str::from_utf8(&safe).expect("UTF-8");
    assert!(!safe_text.chars().any(escape::is_unsafe), "{safe_text:?}");
    let block = escape::markdown_code_block("text", &text);
    let fence_len = block.chars().take_while(|&c| c == '`').count();
    let inner = &block[fence_len..block.len() - fence_len - 1];
    assert!(!inner.contains(&"`".repeat(fence_len)), "{block:?}");
}
