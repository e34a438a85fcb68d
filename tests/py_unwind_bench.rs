//! benches/py_unwind_first_call.py: whether the shim's program-wide
//! PY_UNWIND event slows code run for the first time. On an interpreter
//! with sys.monitoring it runs alternated processes and prints one summary
//! line per figure over every round; on one without, it stops and says
//! which Python it needs.

mod common;

use std::process::Command;

/// Each Python found (python3, python3.12 and python3.13 on the PATH, and
/// every pyenv version's): the bench summarises its 3 rounds, or, where
/// that Python lacks sys.monitoring, stops and says what it needs.
#[test]
fn the_bench_summarises_every_round_or_names_the_python_it_needs() {
    let home = std::env::var("HOME").unwrap_or_default();
    let pyenv = std::fs::read_dir(format!("{home}/.pyenv/versions"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|v| v.path().join("bin/python3").display().to_string());
    let found: Vec<String> = ["python3", "python3.12", "python3.13"]
        .iter()
        .map(|p| p.to_string())
        .chain(pyenv)
        .filter(|p| {
            Command::new(p)
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    assert!(!found.is_empty());
    for python in &found {
        check_with(python);
    }
}

fn check_with(python: &str) {
    let has_monitoring = Command::new(python)
        .args(["-c", "import sys; sys.monitoring"])
        .output()
        .unwrap()
        .status
        .success();
    let out = Command::new("python3")
        .arg(common::repo("benches/py_unwind_first_call.py"))
        .args(["3", "200"])
        .env("PYTHON", python)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if has_monitoring {
        assert!(out.status.success(), "{python}: {stderr}");
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("FIRSTCALL_SUMMARY "))
            .collect();
        assert_eq!(lines.len(), 2, "{python}: {stdout}");
        for (line, figure) in lines.iter().zip(["first_us", "again_us"]) {
            assert!(
                line.contains(&format!("figure={figure} rounds=3 functions=200 ")),
                "{line}"
            );
        }
    } else {
        assert!(!out.status.success(), "{python}: {stdout}");
        assert!(
            stderr.contains("needs Python >= 3.12"),
            "{python}: {stderr}"
        );
    }
}
