//! The README's test command is `bash scripts/test.sh`, CI runs that same
//! script, and the script installs what the tests need when it is missing:
//! run against stand-ins (an `apt-get` that records what it is asked for, a
//! PATH without tmux or Chromium), it asks for both, honours the opt-outs, and
//! a failed install is said without stopping it.

mod common;

use common::{repo, write_executable};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The commands of the README's "Set up" block, by their comment.
fn readme_setup_command(comment: &str) -> String {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let block = readme
        .split("## Set up")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README has a Set up section with a sh block");
    block
        .lines()
        .find_map(|l| {
            let (cmd, c) = l.split_once('#')?;
            (c.trim() == comment).then(|| cmd.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no `# {comment}` line in:\n{block}"))
}

#[test]
fn the_readmes_test_command_is_the_script_ci_runs() {
    assert_eq!(readme_setup_command("the tests"), "bash scripts/test.sh");
    let ci = std::fs::read_to_string(repo(".ci/run")).unwrap();
    let last = ci
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .unwrap();
    assert_eq!(last.trim(), "bash scripts/test.sh", "{ci}");
    let script = std::fs::read_to_string(repo("scripts/test.sh")).unwrap();
    let last = script.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.contains("cargo test --workspace --locked --no-fail-fast"),
        "{last}"
    );
    let syntax = Command::new(bash())
        .args(["-n", "scripts/test.sh"])
        .current_dir(repo(""))
        .status()
        .unwrap();
    assert!(syntax.success());
}

fn bash() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
        .expect("bash on PATH")
}

/// A PATH of stand-ins: cargo, cc, python3 and id (root) that do nothing
/// much, an apt-get that appends its arguments to `apt.log` (and fails when
/// `fail` is set), and nothing else but `dirname`.
fn stand_ins(dir: &Path, fail: bool) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["cargo", "cc", "python3"] {
        write_executable(&bin, tool, "#!/bin/sh\necho stand-in\n");
    }
    write_executable(&bin, "id", "#!/bin/sh\necho 0\n");
    let log = dir.join("apt.log");
    write_executable(
        &bin,
        "apt-get",
        &format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\n{}",
            log.display(),
            if fail { "exit 100\n" } else { "" }
        ),
    );
    let dirname = std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join("dirname"))
        .find(|p| p.is_file())
        .expect("dirname on PATH");
    std::os::unix::fs::symlink(dirname, bin.join("dirname")).unwrap();
    bin
}

/// Runs `scripts/test.sh --setup-only` on the stand-ins: (success, apt-get's
/// calls, stderr).
fn setup_only(fail: bool, env: &[(&str, &str)]) -> (bool, Vec<String>, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = stand_ins(dir.path(), fail);
    let mut cmd = Command::new(bash());
    cmd.arg(repo("scripts/test.sh"))
        .arg("--setup-only")
        .env_clear()
        .env("PATH", &bin)
        .env("HOME", dir.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let log = std::fs::read_to_string(dir.path().join("apt.log")).unwrap_or_default();
    (
        out.status.success(),
        log.lines().map(str::to_string).collect(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn installs(calls: &[String], package: &str) -> bool {
    calls
        .iter()
        .any(|c| c.starts_with("install ") && c.split_whitespace().any(|w| w == package))
}

#[test]
fn the_script_installs_chromium_and_tmux_when_they_are_missing() {
    let (ok, calls, stderr) = setup_only(false, &[]);
    assert!(ok, "{stderr}");
    assert!(installs(&calls, "tmux"), "{calls:?}");
    assert!(installs(&calls, "chromium"), "{calls:?}");
    // What is there already is not installed again.
    assert!(!installs(&calls, "python3"), "{calls:?}");
    assert!(!installs(&calls, "build-essential"), "{calls:?}");
}

#[test]
fn the_opt_outs_skip_the_installs_too() {
    let (ok, calls, stderr) = setup_only(
        false,
        &[("PD_SKIP_CHROMIUM", "1"), ("PREWARM_DOCTOR_NO_TMUX", "1")],
    );
    assert!(ok, "{stderr}");
    assert!(!installs(&calls, "tmux"), "{calls:?}");
    assert!(!installs(&calls, "chromium"), "{calls:?}");
}

#[test]
fn an_install_that_fails_is_said_and_the_script_goes_on() {
    let (ok, calls, stderr) = setup_only(true, &[]);
    assert!(ok, "{stderr}");
    assert!(installs(&calls, "chromium"), "{calls:?}");
    for (package, opt_out) in [
        ("chromium", "PD_SKIP_CHROMIUM=1"),
        ("tmux", "PREWARM_DOCTOR_NO_TMUX=1"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("could not install {package}")))
            .unwrap_or_else(|| panic!("{stderr}"));
        assert!(line.contains(opt_out), "{line}");
    }
}

/// The tests that need a missing program fail naming it and the opt-out
/// (the script runs them with --no-fail-fast, so the others still run).
#[test]
fn tests_that_need_a_missing_program_name_it_and_the_opt_out() {
    for (file, program, opt_out) in [
        ("tests/html_chromium.rs", "Chromium", "PD_SKIP_CHROMIUM=1"),
        ("tests/tui_tmux.rs", "tmux", "PREWARM_DOCTOR_NO_TMUX=1"),
    ] {
        let text = std::fs::read_to_string(repo(file)).unwrap();
        let message = text
            .split("panic!(")
            .nth(1)
            .unwrap_or_else(|| panic!("{file} has no failure message"));
        let message = &message[..message.find(");").unwrap()];
        for needed in [program, opt_out, "scripts/test.sh"] {
            assert!(message.contains(needed), "{file}: {message}");
        }
    }
}
