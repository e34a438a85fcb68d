//! The doctor's own output and exit codes: a closed stdout/stderr never panics
//! and never replaces a code, every verb follows the README's exit-code table,
//! run folders never mix two runs, signal dispositions reach the command as
//! they would without the doctor, and damaged files are named on stderr.

mod common;

use assert_cmd::Command;
use predicates::prelude::*;
use prewarm_doctor::report::format::Format;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("prewarm-doctor")
}

fn cache() -> PathBuf {
    std::env::temp_dir().join("prewarm-doctor-test-cache")
}

fn doctor() -> Command {
    let mut c = Command::cargo_bin("prewarm-doctor").unwrap();
    c.env("PREWARM_DOCTOR_CACHE", cache());
    c
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A std command for the doctor, for tests that need raw pipes or pre_exec.
fn raw_doctor(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(bin());
    c.env("PREWARM_DOCTOR_CACHE", cache())
        .args(args)
        .current_dir(root());
    c
}

/// The write end of a pipe whose reader is already gone: every write to it
/// fails with EPIPE, as in `| head -1` after head exited or `| true`.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer
}

// ---- a closed stdout or stderr ----

#[test]
fn a_closed_stderr_and_stdout_never_replace_the_commands_exit_code() {
    // `prewarm-doctor run -- sh -c 'exit 3' 2>&1 | true`
    let dir = tempfile::tempdir().unwrap();
    let pipe = closed_pipe();
    let out = dir.path().join("r");
    let status = raw_doctor(&[
        "run",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 3",
    ])
    .stdout(pipe.try_clone().unwrap())
    .stderr(pipe)
    .status()
    .unwrap();
    assert_eq!(status.code(), Some(3));
    // The same for a matrix (progress lines and the summary go to the closed stderr).
    let pipe = closed_pipe();
    let out = dir.path().join("m");
    let status = raw_doctor(&[
        "run",
        "--out",
        out.to_str().unwrap(),
        "--variant",
        "a",
        "--variant",
        "b",
        "--",
        "sh",
        "-c",
        "exit 0",
    ])
    .stdout(pipe.try_clone().unwrap())
    .stderr(pipe)
    .status()
    .unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn report_into_a_closed_pipe_exits_with_the_code_it_would_have_had() {
    // Every format that writes to standard output (PNG refuses stdout).
    for format in Format::ALL
        .into_iter()
        .filter(|f| *f != Format::Png)
        .map(Format::name)
    {
        let out = raw_doctor(&["report", "reports/h200-matrix", "--format", format])
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{format}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{format}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{format}: {stderr}");
    }
    // A gate that fails still fails with its own code when nobody reads stdout.
    let out = raw_doctor(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "baseline:step1_oop>0",
    ])
    .stdout(closed_pipe())
    .stderr(Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(11));
}

/// Runs the doctor as `doctor ARGS | head -c1`: the reader takes one byte
/// and goes away in the middle of the output. Returns the exit code and
/// stderr.
fn with_reader_gone_after_one_byte(args: &[&str]) -> (Option<i32>, String) {
    use std::io::Read;
    let mut child = raw_doctor(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut one = [0u8; 1];
    stdout.read_exact(&mut one).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_output_to_a_reader_that_leaves_after_one_byte_exits_0() {
    let mut cases: Vec<Vec<&str>> = Format::ALL
        .into_iter()
        .filter(|f| *f != Format::Png)
        .map(|f| vec!["report", "reports/h200-matrix", "--format", f.name()])
        .collect();
    for f in Format::ALL
        .into_iter()
        .filter(|f| f.diffable())
        .map(Format::name)
    {
        cases.push(vec![
            "diff",
            "reports/h200-matrix",
            "tests/fixtures/h200/matrix-live",
            "--format",
            f,
        ]);
    }
    cases.push(vec![
        "prescribe",
        "tests/fixtures/h200/examples-cublas-baseline",
    ]);
    for args in cases {
        let (code, stderr) = with_reader_gone_after_one_byte(&args);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

#[test]
fn report_png_into_a_folder_says_each_page_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let charts = dir.path().join("charts");
    let out = doctor()
        .args(["report", "reports/h200-matrix", "--format", "png", "-o"])
        .arg(&charts)
        .current_dir(root())
        .env_remove("GITHUB_STEP_SUMMARY")
        .assert()
        .success()
        .stdout("");
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    let pages: Vec<PathBuf> = std::fs::read_dir(&charts)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!pages.is_empty());
    for page in &pages {
        assert_eq!(page.extension().unwrap(), "png");
        assert!(
            stderr.contains(&format!("wrote {}\n", page.display())),
            "{stderr}"
        );
    }
    assert_eq!(stderr.lines().count(), pages.len(), "{stderr}");
}

#[test]
fn markdown_of_report_and_diff_goes_to_the_job_summary_wherever_else_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    // `diff --format md`: stdout and the job summary get the same bytes.
    let out = doctor()
        .args([
            "diff",
            "tests/fixtures/h200/examples-cublas-baseline",
            "tests/fixtures/h200/examples-cublas-prewarm",
            "--format",
            "md",
        ])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(root())
        .assert()
        .success()
        .stderr("");
    let printed = out.get_output().stdout.clone();
    assert!(printed.starts_with(b"## prewarm-doctor diff"));
    assert_eq!(std::fs::read(&summary).unwrap(), printed);
    // `report --format md -o FILE`: the file, "wrote FILE (N bytes)", and
    // the job summary again.
    let file = dir.path().join("report.md");
    let out = doctor()
        .args(["report", "reports/h200-matrix", "--format", "md", "-o"])
        .arg(&file)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(root())
        .assert()
        .success()
        .stdout("");
    let md = std::fs::read(&file).unwrap();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert_eq!(
        stderr,
        format!(
            "prewarm-doctor: wrote {} ({} bytes)\n",
            file.display(),
            md.len()
        )
    );
    assert!(std::fs::read(&summary).unwrap().ends_with(&md));
    // A job summary that cannot be written is a warning, not a failure.
    let unwritable = dir.path().join("no/such/folder/summary.md");
    let out = doctor()
        .args(["report", "reports/h200-matrix", "--format", "md"])
        .env("GITHUB_STEP_SUMMARY", &unwritable)
        .current_dir(root())
        .assert()
        .success();
    assert!(out.get_output().stdout.starts_with(b"## prewarm-doctor"));
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("cannot append to $GITHUB_STEP_SUMMARY"),
        "{stderr}"
    );
}

#[test]
fn help_dump_and_diff_survive_closed_pipes() {
    let status = raw_doctor(&["--help"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let status = raw_doctor(&["report", "--no-such-flag"])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let status = raw_doctor(&[
        "diff",
        "tests/fixtures/h200/examples-nccl-baseline",
        "tests/fixtures/h200/examples-nccl-prewarm",
    ])
    .stdout(closed_pipe())
    .stderr(closed_pipe())
    .status()
    .unwrap();
    assert_eq!(status.code(), Some(0));
    let events =
        std::fs::read_dir(root().join("tests/fixtures/h200/examples-cublas-baseline/default/1/vm"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().ends_with(".events") && !p.ends_with("nvml.events"))
            .unwrap();
    let out = raw_doctor(&["dump", events.to_str().unwrap()])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- signal dispositions the command gets ----

/// The command's SigIgn and SigBlk masks, as /proc shows them to it.
fn command_signal_masks(
    setup: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut cmd = raw_doctor(&[
        "run",
        "--no-probe",
        "--out",
        out.to_str().unwrap(),
        "--",
        "grep",
        "-E",
        "^Sig(Ign|Blk):",
        "/proc/self/status",
    ]);
    // SAFETY: the closure only calls async-signal-safe signal().
    unsafe { cmd.pre_exec(setup) };
    let output = cmd.stderr(Stdio::null()).output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let mask = |name: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{text}"));
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    (mask("SigIgn:"), mask("SigBlk:"))
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

#[test]
fn the_command_gets_default_sigpipe_although_the_doctor_ignores_it() {
    // Started from a shell: SIGPIPE at its default, nothing blocked.
    let (ignored, blocked) = command_signal_masks(|| Ok(()));
    assert_eq!(ignored & bit(libc::SIGPIPE), 0, "SigIgn {ignored:x}");
    assert_eq!(blocked, 0, "SigBlk {blocked:x}");
}

#[test]
fn ignored_signals_of_the_caller_stay_ignored_in_the_command() {
    // As from Python's subprocess(restore_signals=False) or `nohup`: the
    // command inherits what the doctor's caller ignored.
    let (ignored, _) = command_signal_masks(|| {
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
        }
        Ok(())
    });
    assert_ne!(ignored & bit(libc::SIGPIPE), 0, "SigIgn {ignored:x}");
    assert_ne!(ignored & bit(libc::SIGHUP), 0, "SigIgn {ignored:x}");
}

#[test]
fn a_pipeline_in_the_command_ends_quietly_as_without_the_doctor() {
    // `yes` dies of SIGPIPE when `head` exits; with SIGPIPE ignored it would
    // print "yes: standard output: Broken pipe" into the training's stderr.
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "sh", "-c", "yes | head -1 >/dev/null; echo done"])
        .assert()
        .success()
        .stdout("done\n")
        .stderr(predicate::str::contains("Broken pipe").not());
}

// ---- exit codes: one table (README "Exit codes") ----

#[test]
fn usage_errors_of_run_are_125_and_of_other_verbs_2() {
    doctor().args(["run"]).assert().code(125).stdout("");
    doctor()
        .args([
            "run",
            "--no-such-flag",
            "--",
            "sh",
            "-c",
            "echo should-not-run",
        ])
        .assert()
        .code(125)
        .stdout("")
        .stderr(predicate::str::contains("'--no-such-flag'"));
    doctor()
        .args([
            "run",
            "--no-probe",
            "--reapeat",
            "3",
            "sh",
            "-c",
            "echo should-not-run",
        ])
        .assert()
        .code(125)
        .stdout("");
    doctor()
        .args(["run", "--repeat", "0", "--", "true"])
        .assert()
        .code(125);
    doctor().args(["report"]).assert().code(2);
    doctor().args(["diff", "a"]).assert().code(2);
    doctor().args(["dump"]).assert().code(2);
    doctor().args(["no-such-verb"]).assert().code(2);
    doctor().assert().code(2);
    doctor()
        .args(["report", "reports/h200-matrix", "--fail-if", "step1_peak>>"])
        .current_dir(root())
        .assert()
        .code(2);
    doctor()
        .args(["run", "--help"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("--out"));
    doctor().arg("--version").assert().code(0);
}

#[test]
fn flags_a_format_cannot_honour_are_usage_errors_that_say_what_to_do() {
    // PNG writes a folder of files: without -o it is a usage error (2).
    doctor()
        .args(["report", "reports/h200-matrix", "--format", "png"])
        .current_dir(root())
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("give a folder with -o DIR"));
    // --attempt and --all choose what the text formats tell; the others hold
    // every attempt and say so instead of ignoring the flag.
    for (format, flag) in [
        ("json", ["--attempt", "cublas/2"].as_slice()),
        ("csv", ["--attempt", "cublas"].as_slice()),
        ("html", ["--all"].as_slice()),
    ] {
        doctor()
            .args(["report", "reports/h200-matrix", "--format", format])
            .args(flag)
            .current_dir(root())
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(format!(
                "--format {format} always holds every attempt"
            )));
    }
    doctor()
        .args([
            "report",
            "reports/h200-matrix",
            "--all",
            "--attempt",
            "cublas",
        ])
        .current_dir(root())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
    // diff lists only the formats it has.
    let help = doctor().args(["diff", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("- md:"), "{help}");
    for refused in ["- csv:", "- html:", "- png:", "- perfetto:"] {
        assert!(!help.contains(refused), "{refused} in diff --help: {help}");
    }
    doctor()
        .args([
            "diff",
            "reports/h200-matrix",
            "reports/h200-matrix",
            "--format",
            "csv",
        ])
        .current_dir(root())
        .assert()
        .code(2);
}

#[test]
fn run_help_lists_the_presets_and_every_known_prewarm() {
    let help = doctor().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("nemo-automodel"), "{help}");
    for p in prewarm_doctor::prewarm::catalog::CATALOG {
        assert!(
            help.contains(&format!("  {} (", p.name)),
            "{}: {help}",
            p.name
        );
    }
}

#[test]
fn a_multi_line_error_keeps_its_lines_and_prints_no_literal_backslash_n() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[[variant]]\nnam = \"b\"\n").unwrap();
    let out = doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(dir.path().join("r"))
        .arg("--variants-file")
        .arg(&file)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `nam`"), "{err}");
    assert!(!err.contains("\\n"), "a literal \\n: {err}");
    assert!(err.lines().count() > 1, "{err}");
}

#[test]
fn a_step_marker_in_pythons_re_syntax_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args([
            "run",
            "--no-probe",
            "--step-marker",
            r"step (?=\d)",
            "--out",
        ])
        .arg(dir.path().join("r"))
        .args(["--", "true"])
        .assert()
        .code(0);
    doctor()
        .args(["run", "--no-probe", "--step-marker", "step (", "--out"])
        .arg(dir.path().join("r2"))
        .args(["--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("--step-marker 'step ('"));
}

#[test]
fn a_command_that_is_not_found_is_127_and_its_attempt_says_it_never_started() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(&out)
        .args(["--", "prewarm-doctor-no-such-command"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains(
            "(the command could not be started)",
        ));
    let text = doctor().arg("report").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("attempt 1 (the command could not be started)"),
        "{text}"
    );
    assert!(!text.contains("interrupted"), "{text}");
    let json = doctor()
        .arg("report")
        .arg(&out)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["attempts"][0]["interrupted"], false, "{json}");
}

#[test]
fn a_command_that_cannot_be_executed_is_126() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(dir.path().join("r"))
        .arg("--")
        .arg(&script)
        .assert()
        .code(126)
        .stderr(predicate::str::contains("cannot start"));
}

#[test]
fn an_unknown_attempt_is_5_and_lists_the_ones_there_are() {
    doctor()
        .args(["report", "reports/h200-matrix", "--attempt", "nope/1"])
        .current_dir(root())
        .assert()
        .code(5)
        .stderr(predicate::str::contains(
            "--attempt nope/1: no such attempt",
        ))
        .stderr(predicate::str::contains("baseline/1"))
        .stderr(predicate::str::contains("not a run directory").not());
    doctor()
        .args([
            "report",
            "reports/h200-matrix",
            "--attempt",
            "cublas/9",
            "--format",
            "md",
        ])
        .current_dir(root())
        .assert()
        .code(5)
        .stderr(predicate::str::contains("cublas/2"));
}

#[test]
fn a_missing_run_folder_is_3() {
    doctor()
        .args(["report", "no/such/run"])
        .assert()
        .code(3)
        .stderr(predicate::str::contains("no/such/run does not exist"));
}

// ---- report -o ----

#[test]
fn report_o_says_where_it_wrote_and_dash_means_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("account.json");
    doctor()
        .args(["report", "reports/h200-matrix", "--format", "json", "-o"])
        .arg(&file)
        .current_dir(root())
        .assert()
        .success()
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "wrote {}",
            file.display()
        )));
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["schema_version"], 4);
    let out = doctor()
        .args([
            "report",
            "reports/h200-matrix",
            "--format",
            "json",
            "-o",
            "-",
        ])
        .current_dir(root())
        .assert()
        .success()
        .stderr("");
    let printed: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(printed["schema_version"], 4);
}

#[test]
fn report_o_into_a_missing_folder_is_125_and_names_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("missing/dir/x.json");
    doctor()
        .args(["report", "reports/h200-matrix", "-o"])
        .arg(&target)
        .current_dir(root())
        .assert()
        .code(125)
        .stderr(predicate::str::contains(format!(
            "the folder {} does not exist",
            dir.path().join("missing/dir").display()
        )));
    assert!(!target.exists());
}

// ---- run folders ----

#[test]
fn default_run_folders_are_unique_even_in_the_same_second() {
    let dir = tempfile::tempdir().unwrap();
    let spawn = || {
        raw_doctor(&["run", "--no-probe", "--", "sh", "-c", "sleep 0.2"])
            .current_dir(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let children: Vec<_> = (0..4).map(|_| spawn()).collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let runs: Vec<PathBuf> = std::fs::read_dir(dir.path().join("prewarm-runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 4, "{runs:?}");
    for r in &runs {
        let name = r.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with("sh-"), "{name}");
        // Exactly one attempt each: nobody wrote into another's folder.
        let hosts: Vec<_> = std::fs::read_dir(r.join("default/1")).unwrap().collect();
        assert_eq!(hosts.len(), 1, "{name}");
        assert!(!r.join("default/2").exists(), "{name}");
    }
}

#[test]
fn out_holding_another_command_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "exit 0"])
        .assert()
        .success();
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "echo other; exit 0"])
        .assert()
        .code(125)
        .stdout("")
        .stderr(predicate::str::contains("holds a run of another command"))
        .stderr(predicate::str::contains("--force"));
    doctor()
        .args([
            "run",
            "--no-probe",
            "--variant",
            "a",
            "--variant",
            "b",
            "--out",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", "exit 0"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("another matrix"));
    doctor()
        .args(["run", "--no-probe", "--force", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "echo other; exit 0"])
        .assert()
        .success()
        .stdout("other\n");
}

#[test]
fn out_that_is_not_a_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    doctor()
        .args(["run", "--no-probe", "--out"])
        .arg(dir.path())
        .args(["--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("holds no prewarm-doctor run"));
}

#[test]
fn the_same_command_again_adds_attempts_instead_of_overwriting() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    for expected in ["1", "2"] {
        doctor()
            .args(["run", "--no-probe", "--host-tag", "h", "--out"])
            .arg(&out)
            .args(["--", "sh", "-c", "exit 0"])
            .assert()
            .success();
        assert!(
            out.join("default")
                .join(expected)
                .join("h/host.json")
                .exists()
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["repeat"], 2);
    doctor()
        .arg("report")
        .arg(&out)
        .arg("--all")
        .assert()
        .success()
        .stdout(predicate::str::contains("attempt 2"));
}

/// Found on the GPU (2026-12-06, the SILENCE check): a run into a folder
/// that already held an attempt printed "adding attempts 2..2" on stderr
/// before the training's first byte. What preparing says now follows the
/// doctor's summary, so the stderr up to the summary's first
/// `== prewarm-doctor` line is the training's alone (what the GPU check
/// compares); so does `--force`'s notice.
#[test]
fn what_preparing_says_comes_after_the_trainings_own_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let training = ["--", "sh", "-c", "echo first-of-training >&2; exit 0"];
    let stderr_of = |extra: &[&str]| {
        let done = doctor()
            .args(["run", "--no-probe", "--host-tag", "h"])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .args(training)
            .assert()
            .success();
        String::from_utf8(done.get_output().stderr.clone()).unwrap()
    };
    let training_part = |stderr: &str| -> String {
        let summary = stderr.find("== prewarm-doctor").expect(stderr);
        stderr[..summary].to_string()
    };
    let first = stderr_of(&[]);
    assert_eq!(training_part(&first), "first-of-training\n", "{first}");
    let again = stderr_of(&[]);
    assert_eq!(training_part(&again), "first-of-training\n", "{again}");
    assert!(again.contains("adding attempts 2..2"), "{again}");
    std::fs::write(
        out.join("run.json"),
        "{\"schema\": 1, \"command\": [\"other\"]}",
    )
    .unwrap();
    let forced = stderr_of(&["--force"]);
    assert_eq!(training_part(&forced), "first-of-training\n", "{forced}");
    assert!(
        forced.contains("--force: writing into it anyway"),
        "{forced}"
    );
}

#[test]
fn the_nodes_of_one_job_share_a_folder_although_their_node_rank_differs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    let node = |n: &str| {
        raw_doctor(&[
            "run",
            "--no-probe",
            "--out",
            out.to_str().unwrap(),
            "--host-tag",
            &format!("node{n}"),
            "--",
            "sh",
            "-c",
            "sleep 0.3",
            "sh",
            "--node_rank",
            n,
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
    };
    let (mut a, mut b) = (node("0"), node("1"));
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    assert!(out.join("default/1/node0/host.json").exists());
    assert!(out.join("default/1/node1/host.json").exists());
}

// ---- damaged files: one stderr line each ----

fn rank_events(host: &Path) -> PathBuf {
    std::fs::read_dir(host)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.ends_with(".events") && n != "nvml.events"
        })
        .unwrap()
}

#[test]
fn every_damaged_file_gets_one_stderr_line_with_file_offset_and_what() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    common::copy_tree(
        &root().join("tests/fixtures/h200/examples-cublas-baseline"),
        &run,
    );
    let host = run.join("default/1/vm");
    let events = rank_events(&host);
    let mut bytes = std::fs::read(&events).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&events, bytes).unwrap();
    let shim = std::fs::read_dir(&host)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".shim.jsonl"))
        .unwrap();
    let mut text = std::fs::read(&shim).unwrap();
    // Two bad lines in one file: still one stderr line for the file.
    text.splice(0..0, b"garbage one\ngarbage two\n".iter().copied());
    std::fs::write(&shim, text).unwrap();

    for format in ["text", "json"] {
        let out = doctor()
            .arg("report")
            .arg(&run)
            .args(["--format", format])
            .assert()
            .code(4);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 2, "{stderr}");
        let ev = lines
            .iter()
            .find(|l| l.contains(&events.display().to_string()))
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(ev.starts_with("prewarm-doctor: damaged file: "), "{ev}");
        assert!(ev.contains("at byte offset"), "{ev}");
        assert!(
            ev.contains("checksum") || ev.contains("out of range"),
            "{ev}"
        );
        let sh = lines
            .iter()
            .find(|l| l.contains(&shim.display().to_string()))
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(sh.contains("line 1 (byte offset 0)"), "{sh}");
        assert!(sh.contains("and 1 more bad lines"), "{sh}");
    }
    // The JSON account carries the same facts as fields.
    let out = doctor()
        .arg("report")
        .arg(&run)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems: Vec<&serde_json::Value> = v["attempts"][0]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["problems"].as_array().unwrap())
        .collect();
    let ev = problems
        .iter()
        .find(|p| p["file"].as_str().unwrap().ends_with(".events"))
        .unwrap();
    assert!(ev["offset"].as_u64().unwrap() > 0);
    assert_eq!(ev["damaged"], true);
    let sh = problems
        .iter()
        .find(|p| p["file"].as_str().unwrap().ends_with(".shim.jsonl"))
        .unwrap();
    assert_eq!(
        (sh["line"].as_u64(), sh["offset"].as_u64()),
        (Some(1), Some(0))
    );
}

/// A rank that died (the recording's rank ran out of memory, exit 1) may
/// stop mid-record: expected loss, not damage.
#[test]
fn a_run_cut_short_is_not_damage_and_prints_nothing_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    common::copy_tree(&root().join("tests/fixtures/h200/oom-nccl-baseline"), &run);
    let events = run.join("default/1/vm/rank-0.pid-591.events");
    let len = std::fs::metadata(&events).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&events)
        .unwrap()
        .set_len(len - 7)
        .unwrap();
    doctor()
        .arg("report")
        .arg(&run)
        .assert()
        .success()
        .stderr("")
        .stdout(predicate::str::contains("at byte offset"));
}

// ---- bytes that are not UTF-8 ----

#[test]
fn arguments_and_environment_that_are_not_utf8_reach_the_command_byte_for_byte() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let out = raw_doctor(&[
        "run",
        "--no-probe",
        "--out",
        dir.path().join("r").to_str().unwrap(),
    ])
    .args(["--", "sh", "-c", "printf '%s|%s' \"$ODD\" \"$1\"", "sh"])
    .arg(OsStr::from_bytes(b"a\xfeb"))
    .env("ODD", OsStr::from_bytes(b"\xff\x1b[31m"))
    .stderr(Stdio::null())
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"\xff\x1b[31m|a\xfeb");
    // The run folder records them as text (U+FFFD for the bytes), still readable.
    doctor()
        .arg("report")
        .arg(dir.path().join("r"))
        .assert()
        .success();
}

#[test]
fn a_matrix_that_captured_nothing_reads_whole_words_and_no_repeat_advice() {
    // `run --out X --preset nemo-automodel -- true; report X`: a variant
    // named with all its prewarms is wider than half a line.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nemo");
    doctor()
        .args(["run", "--no-probe", "--preset", "nemo-automodel", "--out"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .code(0);
    let text = doctor().arg("report").arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("INCONCLUSIVE"), "{text}");
    assert!(!text.contains("I N C O N"), "{text}");
    // No line is a column of single characters.
    let singles = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(4)
        .filter(|w| {
            w.iter()
                .all(|t| t.chars().count() == 1 && t.chars().all(char::is_alphabetic))
        })
        .count();
    assert_eq!(singles, 0, "{text}");
    // The attempts ran to their end and captured no step 1: repeating them
    // captures nothing more, so there is no --repeat advice.
    assert!(!text.contains("--repeat 3"), "{text}");
}
