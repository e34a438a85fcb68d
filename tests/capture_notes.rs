//! A probe that stopped, or that warned it saw less than it should (an
//! event dropped, kernel records not switched off), says so in every
//! format, not only in the JSON. The run folders are CRAFTED from the real
//! H200 recording `async-lazy-init`: one notice appended to its rank's
//! event file; they are not recordings.

mod common;

use assert_cmd::Command;
use prewarm_events::NoticeLevel;
use std::path::Path;

const WARNING: &str = "internal error in the allocation callback (the event was dropped; capture continues): \u{1b}[31mboom";

fn report(run: &Path, format: &str) -> String {
    let out = Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .args(["report", "--format", format])
        .arg(run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_probe_warning_is_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::with_probe_notice(dir.path(), NoticeLevel::Warning, WARNING);
    let said = "probe warning: internal error in the allocation callback (the event was dropped; capture continues)";
    let text = report(&run, "text");
    // Wrapped at the report's width, under the process's heading.
    assert!(
        text.contains("-- rank 0 (host vm, pid 783, cuda:0)\n   probe warning: internal error in the allocation callback (the event was dropped; capture\n     continues): \\x1b[31mboom\n"),
        "{text}"
    );
    // The notice's escape sequence is shown (above), not obeyed.
    assert!(!text.contains('\u{1b}'), "{text}");
    let markdown = report(&run, "md");
    assert!(markdown.contains(&format!("> {said}")), "{markdown}");
    let html = report(&run, "html");
    assert!(
        html.contains("rank 0") && html.contains(said),
        "no warning in the HTML"
    );
    let json: serde_json::Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let capture = &json["attempts"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["rank"] == 0)
        .unwrap()["capture"];
    assert_eq!(capture["warnings"], serde_json::json!([WARNING]));
    assert_eq!(capture["active"], true);
}

#[test]
fn a_probe_that_stopped_says_capture_off_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let why = "cuptiSubscribe failed: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    let run = common::with_probe_notice(dir.path(), NoticeLevel::Disabled, why);
    let said = format!("capture: OFF — {why} (the run itself was not affected)");
    let text = report(&run, "text");
    assert!(text.contains(&format!("   {}", &said[..40])), "{text}");
    let markdown = report(&run, "md");
    assert!(
        markdown.contains(&format!("> {}", &said[..40])),
        "{markdown}"
    );
    let html = report(&run, "html");
    assert!(html.contains("capture: OFF"), "no capture OFF in the HTML");
    // No warning was given: none is said.
    assert!(!text.contains("probe warning"), "{text}");
}

#[test]
fn a_recording_without_warnings_says_none() {
    let text = report(&common::repo("tests/fixtures/h200/async-lazy-init"), "text");
    assert!(
        !text.contains("probe warning") && !text.contains("capture: OFF"),
        "{text}"
    );
}
