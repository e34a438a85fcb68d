//! scripts/account_flags.py, the GPU scripts' reading of each report for
//! its account: the phase ends out of bounds are named, the others not.

use std::path::Path;
use std::process::Command;

mod common;

/// `prewarm-doctor report --format json` of a recording, written into `dir`.
fn report_json(dir: &Path, recording: &str) -> std::path::PathBuf {
    let json = common::stdout_of_success(
        Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
            .args(["report", "--format", "json"])
            .arg(common::repo(recording)),
    );
    let path = dir.join(format!("{}.json", recording.replace('/', "_")));
    std::fs::write(&path, json).unwrap();
    path
}

fn flags_of(files: &[&Path]) -> String {
    common::stdout_of_success(
        Command::new(common::python())
            .arg(common::repo("scripts/account_flags.py"))
            .arg("case")
            .args(files),
    )
}

/// The async allocator's first pool growth is "not understood" in every
/// phase of `async-lazy-init` (docs/accounting.md); the shared-GPU H100
/// runs, whose accounts were out of bounds before the shared-GPU fixes,
/// name nothing.
#[test]
fn the_recordings_out_of_bounds_are_named_and_the_others_not() {
    let dir = tempfile::tempdir().unwrap();
    let flagged = report_json(dir.path(), "tests/fixtures/h200/async-lazy-init");
    let out = flags_of(&[&flagged]);
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ACCOUNT_FLAG "))
        .collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines.iter().all(|l| l.ends_with(" not understood")),
        "{out}"
    );
    assert!(out.ends_with("ACCOUNT_FLAGS case 4\n"), "{out}");
    for run in ["hf-first", "hf-detach", "lazy-first", "fsdp2-first"] {
        let json = report_json(dir.path(), &format!("tests/fixtures/h100-shared-gpu/{run}"));
        assert_eq!(flags_of(&[&json]), "ACCOUNT_FLAGS case 0\n", "{run}");
    }
}

/// A remainder below -16 MiB is over-explained (a real report with one
/// phase end's remainder set to -20 MiB: no recording holds one now), and
/// a file that is not a report is refused by name.
#[test]
fn parts_over_the_device_are_named_and_bad_input_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = report_json(dir.path(), "tests/fixtures/h100-shared-gpu/hf-first");
    let mut report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    report["attempts"][0]["processes"][0]["phases"][1]["gap_end"]["unexplained"] =
        serde_json::json!(-20i64 << 20);
    std::fs::write(&path, report.to_string()).unwrap();
    let out = flags_of(&[&path]);
    assert!(
        out.starts_with("ACCOUNT_FLAG case attempt=default#1 pid=1369 phase=step1 unexplained_mib=-20.0 over-explained\n"),
        "{out}"
    );
    let missing = Command::new(common::python())
        .arg(common::repo("scripts/account_flags.py"))
        .arg("case")
        .arg(dir.path().join("absent.json"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("absent.json"));
}
