//! The Python >= 3.12 the tests of the shim's sys.monitoring path run (what
//! the GPU machines run; older Pythons take the wrappers' path). Like tmux and
//! Chromium, a missing one fails the tests that need it, naming how to get
//! one; `PD_SKIP_PYTHON312=1` skips them knowingly (issue 39).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The opt-out: set to 1, the tests that need a Python >= 3.12 say they
/// were skipped and pass.
pub const SKIP: &str = "PD_SKIP_PYTHON312";

/// Whether `p` runs and is Python >= 3.12.
fn new_enough(p: &Path) -> bool {
    Command::new(p)
        .args([
            "-c",
            "import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)",
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// pyenv's Pythons >= 3.12 (`$PYENV_ROOT`, else `~/.pyenv`), newest first.
fn pyenv_versions() -> Vec<PathBuf> {
    let Some(root) = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))
    else {
        return Vec::new();
    };
    let Ok(versions) = std::fs::read_dir(root.join("versions")) else {
        return Vec::new();
    };
    // "3.13.0" as (3, 13, 0): 3.12.10 after 3.12.9, as strings would not.
    let key = |name: &str| -> Vec<u32> {
        name.split('.')
            .map(|part| {
                let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
                digits.parse().unwrap_or(0)
            })
            .collect()
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = versions
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let v = key(&name);
            (v.len() >= 2 && v[0] == 3 && (12..=19).contains(&v[1]))
                .then(|| (v, e.path().join("bin/python3")))
        })
        .collect();
    found.sort();
    found.into_iter().rev().map(|(_, p)| p).collect()
}

/// The first Python >= 3.12 here: `PREWARM_TEST_PYTHON312`, then pyenv's
/// versions (newest first), then python3.12, python3.13 and python3 on PATH.
/// An error says what is wrong: none found, or a `PREWARM_TEST_PYTHON312`
/// that is not one.
pub fn find() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("PREWARM_TEST_PYTHON312") {
        let p = PathBuf::from(p);
        return if new_enough(&p) {
            Ok(p)
        } else {
            Err(format!(
                "PREWARM_TEST_PYTHON312={} does not run as a Python >= 3.12",
                p.display()
            ))
        };
    }
    pyenv_versions()
        .into_iter()
        .chain(["python3.12", "python3.13", "python3"].map(PathBuf::from))
        .find(|p| new_enough(p))
        .ok_or_else(|| {
            "no Python >= 3.12 was found (PREWARM_TEST_PYTHON312, pyenv's \
             ~/.pyenv/versions/3.12+, python3.12, python3.13 or python3 on PATH)"
                .to_string()
        })
}

/// The Python >= 3.12 for a test of the shim's sys.monitoring path (`what`
/// it tests, for the messages). `None` only with `PD_SKIP_PYTHON312=1`, said
/// on stderr; without one and without the opt-out the test fails.
pub fn python_312(what: &str) -> Option<PathBuf> {
    if std::env::var_os(SKIP).is_some_and(|v| v == "1") {
        eprintln!(
            "PD_SKIP_PYTHON312=1: skipped on request: {what} (needs a Python >= 3.12, sys.monitoring)"
        );
        return None;
    }
    let why = match find() {
        Ok(p) => return Some(p),
        Err(why) => why,
    };
    panic!(
        "{why}: a Python >= 3.12 is needed to test {what} (the shim's sys.monitoring path, \
         what the GPU machines run). `bash scripts/test.sh` finds or installs one; else \
         install one (`pyenv install 3.12`, or `apt-get install python3.12` where the \
         distribution has it), point PREWARM_TEST_PYTHON312 at one, or set \
         PD_SKIP_PYTHON312=1 to skip these tests"
    );
}
