//! benches/py_unwind_first_call.py: whether the shim's program-wide
//! PY_UNWIND event slows code run for the first time. On an interpreter
//! with sys.monitoring it runs alternated processes and prints one summary
//! line per figure over every round; on one without, it stops and says
//! which Python it needs. benches/shim_hook_cost.py's UNWIND line and
//! benches/py_unwinds_per_step.py give the other half: what the shim's
//! callback costs each frame an exception leaves, and how many a step has.

mod common;

use std::process::Command;

/// Each Python found (python3, python3.12 and python3.13 on the PATH, and
/// every pyenv version's): the bench summarises its 3 rounds, or, where
/// that Python lacks sys.monitoring, stops and says what it needs.
#[test]
fn the_bench_summarises_every_round_or_names_the_python_it_needs() {
    for python in &pythons() {
        check_with(python);
    }
}

/// python3, python3.12 and python3.13 on the PATH, and every pyenv
/// version's, where they run.
fn pythons() -> Vec<String> {
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
    found
}

/// Whether `python` runs `code` without an error.
fn runs(python: &str, code: &str) -> bool {
    Command::new(python)
        .args(["-c", code])
        .output()
        .unwrap()
        .status
        .success()
}

fn has_monitoring(python: &str) -> bool {
    runs(python, "import sys; sys.monitoring")
}

/// The shim's program-wide PY_UNWIND callback is really called for every
/// frame an exception leaves (1,000 of 1,000, counted on the callback the
/// shim registered), and the bench's other lines still run with the
/// meter's begin/end made no-ops; without sys.monitoring there is no
/// UNWIND line and the bench says the shim wraps instead.
#[test]
fn the_shims_unwind_callback_is_called_for_every_frame_an_exception_leaves() {
    // The bench times the shim's own modules, which need time.perf_counter_ns (3.7).
    let new_enough =
        |python: &&String| runs(python, "import sys; assert sys.version_info >= (3, 7)");
    for python in pythons().iter().filter(new_enough) {
        let out = Command::new(python)
            .arg(common::repo("benches/shim_hook_cost.py"))
            .arg("2000")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{python}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let unwind: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("UNWIND "))
            .collect();
        if has_monitoring(python) {
            assert_eq!(unwind.len(), 1, "{python}: {stdout}");
            assert!(
                unwind[0].ends_with(" unwinds_seen=1000/1000"),
                "{python}: {stdout}"
            );
            assert!(stdout.contains(" of_it_meter_ns="), "{python}: {stdout}");
        } else {
            assert!(unwind.is_empty(), "{python}: {stdout}");
            assert!(
                stdout.contains("no sys.monitoring: the shim wraps instead"),
                "{stdout}"
            );
        }
    }
}

/// Where it cannot count (no sys.monitoring, or no torch and transformers)
/// benches/py_unwinds_per_step.py stops and says what it needs; a Python
/// with torch is left out here (it would train the model).
#[test]
fn the_unwind_count_says_what_it_needs() {
    for python in &pythons() {
        if runs(python, "import torch, transformers") {
            continue;
        }
        let out = Command::new(python)
            .arg(common::repo("benches/py_unwinds_per_step.py"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{python}");
        let needs = if has_monitoring(python) {
            "needs torch and transformers"
        } else {
            "has no sys.monitoring; run it with Python >= 3.12"
        };
        assert!(stderr.contains(needs), "{python}: {stderr}");
    }
}

fn check_with(python: &str) {
    let has_monitoring = has_monitoring(python);
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
