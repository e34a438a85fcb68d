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
    let said =
        "internal error in the allocation callback (the event was dropped; capture continues)";
    let text = report(&run, "text");
    // Under the process's heading, placed in its step (wrapped at the
    // report's width).
    let at = text
        .find("-- rank 0 (host vm, pid 783, cuda:0)\n   probe warning (step 4, at ")
        .unwrap_or_else(|| panic!("{text}"));
    let warning: String = text[at..]
        .lines()
        .skip(1)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        warning.contains("s): internal error in the allocation callback (the event was")
            && warning.ends_with("continues): \\x1b[31mboom"),
        "{warning}"
    );
    // The notice's escape sequence is shown (above), not obeyed.
    assert!(!text.contains('\u{1b}'), "{text}");
    let markdown = report(&run, "md");
    assert!(
        markdown.contains("> probe warning (step 4, at ") && markdown.contains(said),
        "{markdown}"
    );
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
    let warning = &capture["warnings"][0];
    assert_eq!(
        (&warning["text"], &warning["phase"], &warning["step"]),
        (
            &serde_json::json!(WARNING),
            &serde_json::json!("steady"),
            &serde_json::json!(4)
        )
    );
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
    // Its one notice says capture was active: the header's CUPTI fields say
    // that already, so it is no note.
    let text = report(&common::repo("tests/fixtures/h200/async-lazy-init"), "text");
    assert!(
        !text.contains("probe warning")
            && !text.contains("capture: OFF")
            && !text.contains("probe note"),
        "{text}"
    );
}

/// What the probe stopped tracing is said beside the figures, not only in
/// the JSON: the stream-ordered switch's notice, as the probe words it.
#[test]
fn a_probe_note_is_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let note = "stream-ordered allocations traced until now (2820 allocations, 2790 frees; step 2 used only known pools): no longer traced, pools' sizes are read every tick and their call counts are unknown from here";
    let run = common::with_probe_notice(dir.path(), NoticeLevel::Info, note);
    let text = report(&run, "text");
    // "Until now" is placed: the note says when now was.
    assert!(
        text.contains("   probe note (step 4, at ")
            && text.contains(
                "s): stream-ordered allocations traced until now (2820 allocations,\n     2790 frees; step 2"
            ),
        "{text}"
    );
    assert!(report(&run, "md").contains("> probe note (step 4, at "));
    assert!(report(&run, "html").contains("probe note (step 4, at "));
    let json: serde_json::Value = serde_json::from_str(&report(&run, "json")).unwrap();
    let process = json["attempts"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["rank"] == 0)
        .unwrap();
    assert_eq!(
        process["capture"]["notes"][0]["text"],
        serde_json::json!(note)
    );
    assert_eq!(process["capture"]["warnings"], serde_json::json!([]));
}
