//! The training run is sacred: exit codes, signals, output and environment,
//! tested with ordinary commands (no GPU needed).

use assert_cmd::Command;
use predicates::prelude::*;
use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

fn doctor() -> Command {
    let mut c = Command::cargo_bin("prewarm-doctor").unwrap();
    c.env(
        "PREWARM_DOCTOR_CACHE",
        std::env::temp_dir().join("prewarm-doctor-test-cache"),
    );
    c
}

#[test]
fn exit_code_is_passed_through() {
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args(["run", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "sh", "-c", "exit 7"])
        .assert()
        .code(7);
}

#[test]
fn death_by_signal_becomes_128_plus_n() {
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args(["run", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "sh", "-c", "kill -TERM $$"])
        .assert()
        .code(143);
}

#[test]
fn output_streams_through_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let payload = "line one\n\ttabbed \u{00e9}\u{1F600}\nno newline at end";
    doctor()
        .args(["run", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "printf", "%s", payload])
        .assert()
        .success()
        .stdout(payload.to_string());
}

#[test]
fn stdin_reaches_the_command() {
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args(["run", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "sh", "-c", "read x; echo got:$x"])
        .write_stdin("hello\n")
        .assert()
        .success()
        .stdout("got:hello\n");
}

#[test]
fn a_missing_command_is_127_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    doctor()
        .args(["run", "--out"])
        .arg(dir.path().join("r"))
        .args(["--", "definitely-not-a-command-xyz"])
        .assert()
        .code(127)
        .stderr(predicate::str::contains(
            "cannot start `definitely-not-a-command-xyz`",
        ));
}

#[test]
fn without_a_driver_the_run_still_happens_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let assert = doctor()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--", "true"])
        .assert()
        .success();
    // The summary wraps at 100 columns: compare words, not line breaks.
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if nvml_wrapper_absent() {
        assert!(
            stderr.contains("nothing GPU-side can be captured"),
            "{stderr}"
        );
    }
    assert!(out.join("run.json").exists());
    let hosts: Vec<_> = std::fs::read_dir(out.join("default/1")).unwrap().collect();
    assert!(!hosts.is_empty());
}

fn nvml_wrapper_absent() -> bool {
    !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists()
}

#[test]
fn the_command_sees_the_probe_shim_nccl_and_isolated_caches() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let assert = doctor()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "echo INJ=$CUDA_INJECTION64_PATH; echo PP=$PYTHONPATH; echo NCCL=$NCCL_DEBUG_FILE; echo TC=$TRITON_CACHE_DIR; echo DIR=$PREWARM_DOCTOR_DIR"])
        .env("PYTHONPATH", "/mine")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(
        stdout.contains("INJ=") && stdout.contains("libprewarm_probe-"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("PP=") && l.contains("shim-") && l.ends_with(":/mine")),
        "{stdout}"
    );
    assert!(stdout.contains("/nccl.%h.%p.log"), "{stdout}");
    assert!(
        stdout.contains("/default/1/cache-") && stdout.contains("/triton"),
        "{stdout}"
    );
    // Cold caches are deleted after the attempt.
    let attempt = out.join("default/1");
    assert!(!std::fs::read_dir(&attempt).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with("cache-")
    }));
}

#[test]
fn secrets_never_reach_the_run_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    doctor()
        .args(["run", "--out"])
        .arg(&out)
        .args(["--", "sh", "-c", "true", "--hf-token=abc123"])
        .env("WANDB_API_KEY", "s3cr3t-value")
        .assert()
        .success();
    for entry in walk(&out) {
        if let Ok(text) = std::fs::read_to_string(&entry) {
            assert!(!text.contains("s3cr3t-value"), "{}", entry.display());
            assert!(!text.contains("abc123"), "{}", entry.display());
        }
    }
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn spawn_doctor(out: &std::path::Path, script: &str) -> std::process::Child {
    let bin = assert_cmd::cargo::cargo_bin("prewarm-doctor");
    std::process::Command::new(bin)
        .env(
            "PREWARM_DOCTOR_CACHE",
            std::env::temp_dir().join("prewarm-doctor-test-cache"),
        )
        .args(["run", "--out"])
        .arg(out)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for_line(child: &mut std::process::Child, needle: &str) {
    // Read the child's stdout until the needle shows up (or 20 s pass).
    let stdout = child.stdout.as_mut().unwrap();
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut byte = [0u8; 1];
    while std::time::Instant::now() < deadline {
        if stdout.read(&mut byte).unwrap_or(0) == 0 {
            break;
        }
        seen.push(byte[0]);
        if String::from_utf8_lossy(&seen).contains(needle) {
            return;
        }
    }
    panic!(
        "never saw {needle:?}; got {:?}",
        String::from_utf8_lossy(&seen)
    );
}

#[test]
fn sigterm_to_the_doctor_reaches_the_command_and_its_grace_period_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_doctor(
        &dir.path().join("r"),
        "trap 'echo got-term; exit 42' TERM; echo ready; while true; do sleep 0.05; done",
    );
    wait_for_line(&mut child, "ready");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    child
        .stdout
        .as_mut()
        .unwrap()
        .read_to_string(&mut rest)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(rest.contains("got-term"), "{rest}");
    assert_eq!(status.code(), Some(42));
}

#[test]
fn sighup_and_sigint_are_forwarded_too() {
    for (sig, name) in [(libc::SIGHUP, "HUP"), (libc::SIGINT, "INT")] {
        let dir = tempfile::tempdir().unwrap();
        let script = format!(
            "trap 'echo got-{name}; exit 3' {name}; echo ready; while true; do sleep 0.05; done"
        );
        let mut child = spawn_doctor(&dir.path().join("r"), &script);
        wait_for_line(&mut child, "ready");
        unsafe { libc::kill(child.id() as i32, sig) };
        let mut rest = String::new();
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_to_string(&mut rest)
            .unwrap();
        assert_eq!(child.wait().unwrap().code(), Some(3), "{name}");
        assert!(rest.contains(&format!("got-{name}")), "{rest}");
    }
}

#[test]
fn a_second_interrupt_ends_a_command_that_ignores_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_doctor(
        &dir.path().join("r"),
        "trap '' INT; echo ready; while true; do sleep 0.05; done",
    );
    wait_for_line(&mut child, "ready");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGKILL));
}

#[test]
fn a_signal_stops_the_whole_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let bin = assert_cmd::cargo::cargo_bin("prewarm-doctor");
    let mut child = std::process::Command::new(bin)
        .env(
            "PREWARM_DOCTOR_CACHE",
            std::env::temp_dir().join("prewarm-doctor-test-cache"),
        )
        .args(["run", "--out"])
        .arg(&out)
        .args([
            "--variant",
            "a",
            "--variant",
            "b",
            "--repeat",
            "3",
            "--",
            "sh",
            "-c",
            "echo ready; while true; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_line(&mut child, "ready");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(10));
    assert!(out.join("a/1").exists());
    assert!(
        !out.join("b/1").exists(),
        "the matrix went on after the signal"
    );
}

#[test]
fn variants_get_their_arguments_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m");
    let assert = doctor()
        .args(["run", "--out"])
        .arg(&out)
        .args([
            "--variant",
            "base",
            "--variant",
            "x:--flag 'two words'",
            "--variant-env",
            "x:MODE=fast",
            "--",
            "sh",
            "-c",
            "echo \"args=$* mode=$MODE\"",
            "sh",
        ])
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(stdout.contains("args= mode="), "{stdout}");
    assert!(
        stdout.contains("args=--flag two words mode=fast"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        stderr.contains("[prewarm-doctor] 2/2: variant 'x'"),
        "{stderr}"
    );
}

#[test]
fn bad_variant_declarations_name_the_flag() {
    doctor()
        .args(["run", "--variant-env", "nope:K=V", "--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("--variant-env 'nope:K=V'"));
    doctor()
        .args(["run", "--preset", "nemo-something", "--", "true"])
        .assert()
        .code(125)
        .stderr(predicate::str::contains("unknown preset"));
}

#[test]
fn a_bad_step_marker_is_refused_before_anything_runs() {
    doctor()
        .args([
            "run",
            "--step-marker",
            "train(",
            "--",
            "sh",
            "-c",
            "echo should-not-run",
        ])
        .assert()
        .code(125)
        .stdout("")
        .stderr(predicate::str::contains(
            "--step-marker 'train(' is not a valid regular expression",
        ));
}
