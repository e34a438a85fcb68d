//! Damaged data is never silent. A file of an attempt whose command exited
//! normally that stops short — the doctor's own `nvml.events`, a rank's
//! probe event file, an NCCL log — was cut after it was written: every
//! format says so first ("these verdicts rest on incomplete data: FILE,
//! WHAT"), stderr names the file, and `report` exits 4. The same cut in a
//! process that died is the expected loss it always was: said at the end,
//! exit code unchanged.

mod common;

use common::{copy_tree, repo};
use prewarm_doctor::tui::app::App;
use prewarm_doctor::tui::loader::load_once;
use prewarm_doctor::tui::shared::RunState;
use prewarm_doctor::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WARNING: &str = "these verdicts rest on incomplete data: ";

fn report(run: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .arg("report")
        .arg(run)
        .args(args)
        .output()
        .unwrap()
}

/// A copy of the recording `rel` in `dir`.
fn copy_of(dir: &Path, rel: &str) -> PathBuf {
    let run = dir.join("run");
    copy_tree(&repo(rel), &run);
    run
}

/// The one file of `host` whose name passes `pick`.
fn file_in(host: &Path, pick: impl Fn(&str) -> bool) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(host)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| pick(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found.into_iter().next().unwrap()
}

fn nvml(n: &str) -> bool {
    n == "nvml.events"
}
fn rank_events(n: &str) -> bool {
    n.starts_with("rank-") && n.ends_with(".events")
}
fn nccl_log(n: &str) -> bool {
    n.starts_with("nccl.") && n.ends_with(".log")
}

/// Cuts `file` to half its length.
fn halve(file: &Path) {
    let len = std::fs::metadata(file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
}

/// `file`'s path under `run`, as the reports name it.
fn rel(run: &Path, file: &Path) -> String {
    file.strip_prefix(run).unwrap().display().to_string()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first screen of every format opens with the warning naming `file`,
/// stderr names it, and each exits 4.
fn assert_said_first(run: &Path, file: &str) {
    let warning = format!("{WARNING}{file}, ");
    // Terminal: right under the title line (wrapped at 100 columns, so the
    // file is on that line).
    let out = report(run, &[]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let stdout = text(&out);
    let second = stdout.lines().nth(1).unwrap();
    assert!(
        second.trim_start().starts_with(WARNING) && second.contains(file),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("prewarm-doctor: damaged file: ") && stderr.contains(file),
        "{stderr}"
    );
    // Markdown: the first paragraph under the title.
    let out = report(run, &["--format", "md"]);
    assert_eq!(out.status.code(), Some(4));
    let md = text(&out).replace('\\', "");
    let first = md.lines().nth(2).unwrap();
    assert!(
        first.starts_with("> **") && first.contains(&warning),
        "{md}"
    );
    // HTML: the first paragraph after the title.
    let out = report(run, &["--format", "html"]);
    assert_eq!(out.status.code(), Some(4));
    let html = common::html_as_read(&text(&out));
    let after_title = &html[html.find("</h1>").unwrap()..];
    let first_p = &after_title[after_title.find("<p").unwrap()..];
    let first_p = &first_p[..first_p.find("</p>").unwrap()];
    assert!(first_p.contains(&warning), "{first_p}");
    // JSON: a top-level field, before the run's own data.
    let out = report(run, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(4));
    let json = text(&out);
    assert!(
        json.find("\"incomplete_data\"").unwrap() < json.find("\"run\":").unwrap(),
        "incomplete_data comes first"
    );
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let items = doc["incomplete_data"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["file"], file);
    assert!(
        items[0]["message"].as_str().unwrap().starts_with(&warning),
        "{items:?}"
    );
    // CSV: the first row after the header.
    let out = report(run, &["--format", "csv"]);
    assert_eq!(out.status.code(), Some(4));
    let csv = text(&out);
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!((row[6], row[7]), ("incomplete_data", file), "{csv}");
    // The dashboard: under its context line.
    let app = App::new(
        load_once(run, false).unwrap(),
        Theme::plain(),
        RunState::Replay,
    );
    let mut term = Terminal::new(TestBackend::new(200, 24)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer();
    let row2: String = (0..200).map(|x| buf[(x, 2)].symbol()).collect();
    assert!(row2.starts_with(&warning), "{row2}");
}

/// Each kind of file, cut to half in an attempt that exited 0 after its
/// steps: said first everywhere, exit 4.
#[test]
fn a_file_cut_short_in_an_attempt_that_exited_normally_is_said_first_in_every_format() {
    let whole = report(&repo("tests/fixtures/h200/examples-nccl-baseline"), &[]);
    assert_eq!(whole.status.code(), Some(0));
    assert!(!text(&whole).contains(WARNING));
    for (kind, pick) in [
        ("nvml.events", nvml as fn(&str) -> bool),
        ("rank events", rank_events),
        ("NCCL log", nccl_log),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let run = copy_of(dir.path(), "tests/fixtures/h200/examples-nccl-baseline");
        let file = file_in(&run.join("default/1/vm"), pick);
        halve(&file);
        eprintln!("{kind}: {}", file.display());
        assert_said_first(&run, &rel(&run, &file));
    }
}

/// In a matrix the damaged attempt is left out of the comparison, and the
/// warning says so on the first screen.
#[test]
fn in_a_matrix_the_warning_names_the_attempt_it_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = copy_of(dir.path(), "reports/h200-matrix");
    let host = std::fs::read_dir(run.join("nccl_comm/1"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = file_in(&host, nccl_log);
    halve(&log);
    let out = report(&run, &[]);
    assert_eq!(out.status.code(), Some(4));
    let stdout = text(&out);
    let opening: String = stdout
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("     ") || l.contains(WARNING))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(opening.starts_with(WARNING), "{stdout}");
    assert!(opening.contains(&rel(&run, &log)), "{opening}");
    assert!(
        opening.ends_with("attempt nccl_comm/1 is left out of the comparison"),
        "{opening}"
    );
    assert!(stdout.contains("excluded: nccl_comm/1: damaged files:"));
}

/// A rank file cut on a record boundary leaves no trace in the file itself,
/// but the doctor's own NVML file has one: its sampler writes a last sample
/// after the command ended, so a copy without the later half of its records
/// is cut short.
#[test]
fn an_nvml_file_cut_between_records_is_cut_short_too() {
    let dir = tempfile::tempdir().unwrap();
    let run = copy_of(dir.path(), "tests/fixtures/h200/examples-nccl-baseline");
    let file = run.join("default/1/vm/nvml.events");
    let decoded = prewarm_events::read_file_bytes(&std::fs::read(&file).unwrap()).unwrap();
    let mut out = common::encoded_header(&decoded);
    for r in &decoded.records[..decoded.records.len() / 2] {
        prewarm_events::encode_record(r, &mut out);
    }
    std::fs::write(&file, out).unwrap();
    assert_eq!(
        prewarm_events::read_file_bytes(&std::fs::read(&file).unwrap())
            .unwrap()
            .tail,
        prewarm_events::Tail::Clean
    );
    assert_said_first(&run, "default/1/vm/nvml.events");
}

/// The same cuts in an attempt whose rank died (out of memory, exit 1):
/// the expected loss of a process that stopped mid-write, said where it
/// always was, exit code unchanged, nothing first, nothing on stderr.
#[test]
fn a_file_cut_short_by_a_process_that_died_stays_expected_loss() {
    let fixture = "tests/fixtures/h200/oom-nccl-baseline";
    let whole = report(&repo(fixture), &[]);
    for pick in [rank_events as fn(&str) -> bool, nccl_log] {
        let dir = tempfile::tempdir().unwrap();
        let run = copy_of(dir.path(), fixture);
        let file = file_in(&run.join("default/1/vm"), pick);
        halve(&file);
        for format in ["text", "json", "md"] {
            let out = report(&run, &["--format", format]);
            assert_eq!(out.status.code(), whole.status.code(), "{format}");
            assert_eq!(out.stderr, b"", "{format}");
            assert!(!text(&out).contains(WARNING), "{format}");
        }
        let json: serde_json::Value =
            serde_json::from_slice(&report(&run, &["--format", "json"]).stdout).unwrap();
        assert_eq!(json["incomplete_data"], serde_json::json!([]));
    }
    // The rank's own file still says where it ends, as before.
    let dir = tempfile::tempdir().unwrap();
    let run = copy_of(dir.path(), fixture);
    let file = file_in(&run.join("default/1/vm"), rank_events);
    halve(&file);
    let stdout = text(&report(&run, &[]));
    assert!(
        stdout.contains("the process stopped while writing"),
        "{stdout}"
    );
}

/// A communicator whose log was cut before its init completed is told in
/// words, not "created in ?: ?".
#[test]
fn a_communicator_of_a_cut_log_is_told_without_question_marks() {
    let dir = tempfile::tempdir().unwrap();
    let run = copy_of(dir.path(), "tests/fixtures/h200/examples-nccl-baseline");
    let log = file_in(&run.join("default/1/vm"), nccl_log);
    halve(&log);
    let stdout = text(&report(&run, &[]));
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("NCCL communicator "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(!line.contains('?'), "{line}");
    assert!(line.contains("created at a time not recorded"), "{stdout}");
    let next = stdout
        .lines()
        .skip_while(|l| *l != line)
        .nth(1)
        .unwrap_or_default();
    assert!(
        format!("{line} {next}").contains("init time not recorded"),
        "{stdout}"
    );
    assert!(!stdout.contains(": ?"), "{stdout}");
}
