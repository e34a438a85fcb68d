//! Hostile strings in a run folder render safely in every format. The run
//! folder is CRAFTED for this test: a copy of the real H200 recording
//! `oom-triton-baseline` whose kernel names, library paths, probe notice,
//! shim kernel names and exception message, host tag, command line,
//! environment and notices were replaced with terminal escape sequences
//! (ESC/CSI colours, OSC 8 hyperlinks, BEL, `\r`, 8-bit CSI, a bidi override),
//! Markdown/HTML metacharacters, newlines that try to forge report lines,
//! spreadsheet formulas and bytes that are not UTF-8. It is not a recording.

mod common;

use assert_cmd::Command;
use prewarm_events::{Record, encode_record, read_file_bytes};
use std::path::{Path, PathBuf};

const HOSTILE: &str = "=k\u{1b}[31mred\u{1b}[0m\u{1b}]8;;http://evil.example/\u{7}click\u{1b}]8;;\u{7}\u{7}\rOVERWRITE\nFORGED LINE | cell | <b>bold</b> `code` *em* _u_ [l](http://x) \u{9b}2J\u{202e}desrever\u{7f}\u{61c}\u{200e}\u{200f}\u{2028}\u{2029}";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Marker in a kernel name that becomes two bytes that are not UTF-8.
const NOT_UTF8_MARK: &[u8] = b"@@NOTUTF8@@";

/// Re-encodes an event file with hostile strings, then swaps the marker for
/// invalid UTF-8 bytes (fixing each record's checksum).
fn poison_events(path: &Path) -> usize {
    let decoded = read_file_bytes(&std::fs::read(path).unwrap()).unwrap();
    let mut out = common::encoded_header(&decoded);
    let mut touched = 0;
    let hostile_kernel = format!("@@NOTUTF8@@{HOSTILE}");
    for mut r in decoded.records {
        match &mut r {
            Record::LocalMemory(l) => {
                l.kernel = format!("{hostile_kernel}{}", l.kernel);
                touched += 1;
            }
            Record::KernelFirst(k) => {
                k.kernel = format!("{hostile_kernel}{}", k.kernel);
                touched += 1;
            }
            Record::Library(l) => l.path = format!("/lib/{HOSTILE}/{}", l.path),
            Record::Notice(n) => n.text = format!("{HOSTILE} {}", n.text),
            _ => {}
        }
        let start = out.len();
        encode_record(&r, &mut out);
        let payload = &mut out[start + 8..];
        if let Some(at) = payload
            .windows(NOT_UTF8_MARK.len())
            .position(|w| w == NOT_UTF8_MARK)
        {
            // Same length: "@@NOTUTF8@@" (11 bytes) -> "\xff\xfe-bad-utf8" (11 bytes).
            payload[at..at + NOT_UTF8_MARK.len()].copy_from_slice(b"\xff\xfe-bad-utf8");
            let crc = crc32(&out[start + 8..]);
            out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        }
    }
    std::fs::write(path, out).unwrap();
    touched
}

fn poison_shim(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        for key in ["kernel", "config", "message"] {
            if let Some(s) = v.get(key).and_then(|s| s.as_str()) {
                v[key] = format!("{HOSTILE}@@NOTUTF8@@{s}").into();
            }
        }
        let line = serde_json::to_string(&v).unwrap();
        // Raw bytes that are not UTF-8 inside the JSON string.
        for (i, part) in line.split("@@NOTUTF8@@").enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\xff\xfe");
            }
            out.extend_from_slice(part.as_bytes());
        }
        out.push(b'\n');
    }
    let bytes = out;
    std::fs::write(path, bytes).unwrap();
}

fn poison_host_json(path: &Path) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    v["host"] = HOSTILE.into();
    v["command"].as_array_mut().unwrap().push(HOSTILE.into());
    v["env"]["HOSTILE_VALUE"] = HOSTILE.into();
    v["notices"] = serde_json::json!([HOSTILE]);
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// The crafted run folder (see the file's doc comment).
fn crafted_run(dir: &Path) -> PathBuf {
    let run = dir.join("crafted");
    common::copy_tree(
        &root().join("tests/fixtures/h200/oom-triton-baseline"),
        &run,
    );
    let host = run.join("default/1/vm");
    let mut kernels = 0;
    for e in std::fs::read_dir(&host).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".events") && name != "nvml.events" {
            kernels += poison_events(&p);
        } else if name.ends_with(".shim.jsonl") {
            poison_shim(&p);
        } else if name == "host.json" {
            poison_host_json(&p);
        }
    }
    assert!(kernels > 0, "the recording has kernel names to poison");
    run
}

/// No byte or character that a terminal would act on, other than newlines.
fn assert_inert(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for (i, line) in text.lines().enumerate() {
        let bad: Vec<char> = line
            .chars()
            .filter(|&c| {
                (c.is_control() && c != '\t')
                    || matches!(
                        c,
                        '\u{202a}'..='\u{202e}'
                            | '\u{2066}'..='\u{2069}'
                            | '\u{61c}'
                            | '\u{200e}'
                            | '\u{200f}'
                            | '\u{2028}'
                            | '\u{2029}'
                    )
            })
            .collect();
        assert!(bad.is_empty(), "{what}: line {} has {bad:?}: {line}", i + 1);
        assert!(
            !line.trim_start().starts_with("FORGED"),
            "{what}: a name forged line {}: {line}",
            i + 1
        );
    }
}

fn report(run: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .arg("report")
        .arg(run)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn terminal_output_shows_hostile_strings_as_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let run = crafted_run(dir.path());
    let out = report(&run, &["--all"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert("text", &out.stdout);
    assert_inert("stderr", &out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    // Still recognisable: the escapes are shown, the bad bytes replaced.
    assert!(text.contains("\\x1b[31mred"), "{text}");
    assert!(
        text.contains("\\x1b]8;;http://evil.example/\\x07click"),
        "{text}"
    );
    assert!(text.contains("\\rOVERWRITE\\nFORGED LINE"), "{text}");
    assert!(text.contains("\u{fffd}"), "{text}");
    assert!(
        text.contains("OUT OF MEMORY"),
        "the story is still told: {text}"
    );
}

#[test]
fn markdown_output_cannot_be_broken_or_marked_up() {
    let dir = tempfile::tempdir().unwrap();
    let run = crafted_run(dir.path());
    let out = report(&run, &["--format", "md", "--all"]);
    assert_eq!(out.status.code(), Some(0));
    assert_inert("md", &out.stdout);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(!md.contains("<b>"), "{md}");
    assert!(
        !md.replace("\\]", "").contains("](http"),
        "a live link: {md}"
    );
    // Every table row keeps its table's column count: no unescaped '|' got in.
    let mut columns = None;
    let mut tables = 0;
    for line in md.lines() {
        if !line.starts_with('|') {
            columns = None;
            continue;
        }
        let cells = line.replace("\\|", "").matches('|').count();
        match columns {
            None => {
                columns = Some(cells);
                tables += 1;
            }
            Some(n) => assert_eq!(cells, n, "{line}"),
        }
    }
    assert!(tables > 0, "{md}");
}

#[test]
fn csv_output_holds_no_formulas_or_controls() {
    let dir = tempfile::tempdir().unwrap();
    let run = crafted_run(dir.path());
    let out = report(&run, &["--format", "csv"]);
    assert_eq!(out.status.code(), Some(0));
    assert_inert("csv", &out.stdout);
    let mut rows = csv::Reader::from_reader(out.stdout.as_slice());
    let mut n = 0;
    for r in rows.records() {
        let r = r.unwrap();
        assert_eq!(r.len(), 10);
        let host = &r[2];
        assert!(host.starts_with("'="), "{host}");
        n += 1;
    }
    assert!(n > 0);
}

#[test]
fn json_output_keeps_the_data_without_raw_controls() {
    let dir = tempfile::tempdir().unwrap();
    let run = crafted_run(dir.path());
    let out = report(&run, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(0));
    // Pretty JSON has newlines between fields only; nothing else raw.
    assert_inert("json", &out.stdout);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["attempts"][0]["processes"][0];
    assert_eq!(p["host"], HOSTILE, "the data is faithful");
    let kernel = p["local_memory"][0]["kernel"].as_str().unwrap();
    // Kernel names are shortened for display (100 characters), not altered.
    let expected = format!("\u{fffd}\u{fffd}-bad-utf8{HOSTILE}");
    assert!(
        expected.starts_with(kernel.trim_end_matches("...")),
        "{kernel:?}"
    );
    assert_eq!(
        v["attempts"][0]["command"]
            .as_array()
            .unwrap()
            .last()
            .unwrap(),
        HOSTILE
    );
}

#[test]
fn diff_and_dump_are_inert_too() {
    let dir = tempfile::tempdir().unwrap();
    let run = crafted_run(dir.path());
    for format in ["text", "md", "json"] {
        let out = Command::cargo_bin("prewarm-doctor")
            .unwrap()
            .arg("diff")
            .arg(root().join("tests/fixtures/h200/oom-triton-baseline"))
            .arg(&run)
            .args(["--format", format])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{format}");
        assert_inert(format, &out.stdout);
        assert_inert(format, &out.stderr);
    }
    let events = std::fs::read_dir(run.join("default/1/vm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".events") && !p.ends_with("nvml.events"))
        .unwrap();
    let out = Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .arg("dump")
        .arg(&events)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_inert("dump", &out.stdout);
}
