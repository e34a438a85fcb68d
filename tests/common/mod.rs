//! Helpers shared by the integration tests (and the report benchmark).
#![allow(dead_code)]

pub mod python312;
pub mod synthetic;

use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::model::ReportModel;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python the tests run (python3, else python on PATH).
pub fn python() -> &'static str {
    ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("-c")
                .arg("pass")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("python3 is needed for these tests")
}

/// Every line of the shim files the doctor's folder `dir` holds.
pub fn shim_events(dir: &Path) -> Vec<serde_json::Value> {
    let mut events = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".shim.jsonl") {
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                events.push(serde_json::from_str(line).unwrap());
            }
        }
    }
    // Warm steps' ends stored in step files, as the lines they stand for,
    // in time order among the lines (an event without `t` keeps its place
    // after the one before it).
    let mut stored = step_file_ends(dir);
    if stored.is_empty() {
        return events;
    }
    events.append(&mut stored);
    let mut last = 0;
    let mut keyed: Vec<(u64, serde_json::Value)> = events
        .into_iter()
        .map(|e| {
            last = e["t"].as_u64().unwrap_or(last);
            (last, e)
        })
        .collect();
    keyed.sort_by_key(|(t, _)| *t);
    keyed.into_iter().map(|(_, e)| e).collect()
}

/// The `step_end` events of the step files in `dir`, as JSON lines.
fn step_file_ends(dir: &Path) -> Vec<serde_json::Value> {
    let mut ends = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if !p.to_string_lossy().ends_with(".shim.steps") {
            continue;
        }
        let file = prewarm_doctor::load::shim::parse_step_file(&std::fs::read(&p).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for (event, own) in file.events.iter().zip(&file.own_time) {
            if let prewarm_doctor::load::shim::ShimEvent::StepEnd { step, .. } = event {
                ends.push(serde_json::json!({
                    "ev": "step_end", "step": step, "t": own.t, "own_ns": own.own_ns
                }));
            }
        }
    }
    ends
}

/// The report model of a run folder, named `label` in the report.
pub fn model_of(path: &Path, label: &str) -> ReportModel {
    Analysed::load(path).unwrap().model_named(label)
}

/// The HTML report's text as a reader sees it: a break opportunity
/// (`<wbr>`) is no character, a no-break space (between a figure and its
/// unit) is a space.
pub fn html_as_read(html: &str) -> String {
    html.replace("<wbr>", "").replace('\u{a0}', " ")
}

/// The terminal report of a run folder with every attempt told (`--all`).
pub fn terminal_text(path: &Path) -> String {
    let model = Analysed::load(path).unwrap().model();
    prewarm_doctor::report::terminal::Terminal {
        selection: prewarm_doctor::report::select::Selection::All,
    }
    .text(&model)
    .unwrap()
}

/// Copies a run folder (to change it in a test).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// Every H200 recording: the bundled matrix, then each fixture folder in
/// name order, then the zoo of models not written for the tool.
pub fn recordings() -> Vec<std::path::PathBuf> {
    let mut runs = vec![repo("reports/h200-matrix")];
    for dir in ["tests/fixtures/h200", "tests/fixtures/h200-zoo"] {
        let mut fixtures: Vec<_> = std::fs::read_dir(repo(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("run.json").is_file())
            .collect();
        fixtures.sort();
        runs.extend(fixtures);
    }
    runs
}

/// One stage of the first-use experiment (tests/fixtures/h200-zoo/first-use/
/// firstuse.txt: a script's own cuMemGetInfo readings on the H200, no
/// doctor): its `FIRSTUSE` record in the section headed `# {section}`.
pub fn first_use(section: &str, stage: &str) -> serde_json::Value {
    let text =
        std::fs::read_to_string(repo("tests/fixtures/h200-zoo/first-use/firstuse.txt")).unwrap();
    let body = text
        .split(&format!("# {section}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no section {section}"));
    let body = body.split("\n# ").next().unwrap();
    let line = body
        .lines()
        .find(|l| l.contains(&format!("\"stage\": \"{stage}\"")))
        .unwrap_or_else(|| panic!("no stage {stage} in {section}"));
    serde_json::from_str(line.trim_start_matches("FIRSTUSE ")).unwrap()
}

/// The path of a file in this repository.
pub fn repo(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Checks a Chrome trace-event document: required fields, `dur` on complete
/// events, numeric counters, named processes, and complete events on one
/// thread properly nested. Returns the number of events.
pub fn check_trace(bytes: &[u8]) -> usize {
    let doc: serde_json::Value = serde_json::from_slice(bytes).expect("the trace is valid JSON");
    let events = doc["traceEvents"]
        .as_array()
        .expect("traceEvents is an array");
    let mut named = std::collections::BTreeSet::new();
    let mut used = std::collections::BTreeSet::new();
    let mut slices: std::collections::BTreeMap<(u64, u64), Vec<(f64, f64)>> = Default::default();
    for e in events {
        let ph = e["ph"].as_str().expect("ph is a string");
        assert!(e["name"].is_string(), "name missing: {e}");
        let pid = e["pid"].as_u64().expect("pid is an integer");
        let tid = e["tid"].as_u64().expect("tid is an integer");
        let ts = e["ts"].as_f64().expect("ts is a number");
        assert!(ts >= 0.0, "negative ts: {e}");
        match ph {
            "M" => {
                assert!(e["args"].is_object(), "{e}");
                if e["name"] == "process_name" {
                    assert!(e["args"]["name"].is_string());
                    named.insert(pid);
                }
            }
            "X" => {
                let dur = e["dur"].as_f64().expect("complete events carry dur");
                assert!(dur >= 0.0, "{e}");
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
                used.insert(pid);
            }
            "i" => {
                assert!(matches!(e["s"].as_str(), Some("t" | "p" | "g")), "{e}");
                assert!(e.get("dur").is_none());
                used.insert(pid);
            }
            "C" => {
                let args = e["args"].as_object().expect("counter args");
                assert!(!args.is_empty());
                assert!(
                    args.values().all(|v| v.is_number()),
                    "counters are numeric: {e}"
                );
                used.insert(pid);
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert!(used.is_subset(&named), "every process is named");
    for ((pid, tid), mut s) in slices {
        s.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<f64> = Vec::new();
        for (a, b) in s {
            while open.last().is_some_and(|&end| end <= a + 1e-3) {
                open.pop();
            }
            if let Some(&end) = open.last() {
                assert!(
                    b <= end + 1e-6,
                    "slices on pid {pid} tid {tid} overlap without nesting"
                );
            }
            open.push(b);
        }
    }
    events.len()
}

/// Decodes a PNG; returns (width, height, RGB pixels).
pub fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("sized")];
    let info = reader.next_frame(&mut buf).expect("a PNG frame");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Whether an image is a picture, not a blank: several distinct colours and
/// real variance of brightness.
pub fn not_blank(rgb: &[u8]) -> bool {
    let px: Vec<f64> = rgb
        .chunks(3)
        .map(|p| (p[0] as f64 + p[1] as f64 + p[2] as f64) / 3.0)
        .collect();
    let mean = px.iter().sum::<f64>() / px.len() as f64;
    let var = px.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / px.len() as f64;
    let colours: std::collections::HashSet<&[u8]> = rgb.chunks(3).collect();
    var > 100.0 && colours.len() > 50
}

/// Whether an image has a pixel close to `c`.
pub fn has_colour(rgb: &[u8], c: (u8, u8, u8)) -> bool {
    rgb.chunks(3).any(|p| {
        (p[0] as i32 - c.0 as i32).abs() <= 6
            && (p[1] as i32 - c.1 as i32).abs() <= 6
            && (p[2] as i32 - c.2 as i32).abs() <= 6
    })
}

/// Writes an executable stand-in script (a doctor, a python) for a test
/// that drives one of the repository's shell scripts.
pub fn write_executable(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs a command that must succeed; its stdout (its stderr too in the
/// failure message).
pub fn stdout_of_success(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The lines of `text` that start with `prefix` (a bench summary's lines).
pub fn lines_starting(text: &str, prefix: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Asserts that a GPU bench's `--summary` of the rows it stored prints the
/// very `prefix` lines its run printed (`printed`), and that there are some.
pub fn stored_rows_give_the_printed_summary(bench: &str, rows: &Path, prefix: &str, printed: &str) {
    let stored = stdout_of_success(
        Command::new("python3")
            .arg(repo(bench))
            .arg("--summary")
            .arg(rows),
    );
    let want = lines_starting(printed, prefix);
    assert!(!want.is_empty(), "no {prefix} lines in\n{printed}");
    assert_eq!(lines_starting(&stored, prefix), want);
}

/// A copy of the H200 recording `async-lazy-init` in `dir`, with one probe
/// notice appended to rank 0's events, 1 ms after its step 3 ended, so in
/// step 4 (CRAFTED: not a recording).
pub fn with_probe_notice(dir: &Path, level: prewarm_events::NoticeLevel, text: &str) -> PathBuf {
    let run = dir.join("run");
    copy_tree(&repo("tests/fixtures/h200/async-lazy-init"), &run);
    let shim = std::fs::read_to_string(run.join("default/1/vm/rank-0.pid-783.shim.jsonl")).unwrap();
    let step3_end = shim
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["ev"] == "step_end" && e["step"] == 3)
        .and_then(|e| e["t"].as_u64())
        .expect("the recording's step 3 ends");
    let events = run.join("default/1/vm/rank-0.pid-783.events");
    let decoded = prewarm_events::read_file_bytes(&std::fs::read(&events).unwrap()).unwrap();
    let mut out = encoded_header(&decoded);
    for r in &decoded.records {
        prewarm_events::encode_record(r, &mut out);
    }
    let notice = prewarm_events::Record::Notice(prewarm_events::Notice {
        t: step3_end + 1_000_000,
        level,
        text: text.into(),
    });
    prewarm_events::encode_record(&notice, &mut out);
    std::fs::write(&events, out).unwrap();
    run
}

/// The header of a decoded event file, encoded again: the start of a
/// rewritten copy of the file.
pub fn encoded_header(decoded: &prewarm_events::ReadOutcome) -> Vec<u8> {
    let fields: Vec<(&str, &str)> = decoded
        .header
        .fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    prewarm_events::encode_header(&fields)
}
