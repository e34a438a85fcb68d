//! The pip package. Building the wheel is a release build, too slow for every
//! `cargo test`, so .ci/run runs scripts/wheel-check.sh (build with maturin,
//! install into a fresh venv, run the installed binary) as its own step; these
//! tests keep what that check relies on from drifting: pyproject.toml names
//! this crate's binary and takes Cargo's version, .ci/run runs the check
//! before the tests, the README's install section leads with pip and states
//! the glibc floor pyproject.toml enforces, and the report's first line is the
//! title the check looks for.

mod common;

use assert_cmd::Command;
use common::repo;
use toml::Value;

fn toml_of(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo(rel)).unwrap();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut at = v;
    for key in path {
        at = at
            .get(key)
            .unwrap_or_else(|| panic!("no {} in the TOML", path.join(".")));
    }
    at.as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}

/// The manylinux tag pyproject.toml builds for, e.g. "manylinux_2_34".
fn compatibility() -> String {
    str_at(
        &toml_of("pyproject.toml"),
        &["tool", "maturin", "compatibility"],
    )
    .to_string()
}

#[test]
fn pyproject_builds_this_crates_binary_with_cargos_name_and_version() {
    let py = toml_of("pyproject.toml");
    let cargo = toml_of("Cargo.toml");
    assert_eq!(str_at(&py, &["build-system", "build-backend"]), "maturin");
    let requires = py["build-system"]["requires"].as_array().unwrap();
    assert!(
        requires
            .iter()
            .any(|r| r.as_str().unwrap().starts_with("maturin")),
        "{requires:?}"
    );

    // The package and the binary are both Cargo's package name: src/main.rs,
    // no [[bin]] renaming it, and maturin builds the root manifest's binaries.
    assert_eq!(str_at(&cargo, &["package", "name"]), "prewarm-doctor");
    assert_eq!(str_at(&py, &["project", "name"]), "prewarm-doctor");
    assert!(
        cargo.get("bin").is_none(),
        "a [[bin]] section renames or adds binaries"
    );
    assert!(repo("src/main.rs").is_file());
    assert_eq!(
        str_at(&cargo, &["package", "default-run"]),
        "prewarm-doctor"
    );
    assert_eq!(str_at(&py, &["tool", "maturin", "bindings"]), "bin");
    assert_eq!(
        str_at(&py, &["tool", "maturin", "manifest-path"]),
        "Cargo.toml"
    );

    // The version is Cargo's: dynamic, so maturin reads Cargo.toml's, and no
    // second copy that could disagree.
    assert!(
        py["project"].get("version").is_none(),
        "pyproject.toml must not pin a version: Cargo.toml's is the one"
    );
    let dynamic = py["project"]["dynamic"].as_array().unwrap();
    assert!(dynamic.iter().any(|d| d.as_str() == Some("version")));
    assert!(!str_at(&cargo, &["package", "version"]).is_empty());

    let tag = compatibility();
    assert!(
        tag.strip_prefix("manylinux_2_")
            .is_some_and(|minor| minor.parse::<u32>().is_ok()),
        "{tag}: a manylinux_2_N tag"
    );
}

#[test]
fn ci_checks_the_wheel_before_the_tests() {
    let ci = std::fs::read_to_string(repo(".ci/run")).unwrap();
    let steps: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let wheel = steps
        .iter()
        .position(|l| *l == "bash scripts/wheel-check.sh")
        .unwrap_or_else(|| panic!("no `bash scripts/wheel-check.sh` step in .ci/run:\n{ci}"));
    let tests = steps
        .iter()
        .position(|l| *l == "bash scripts/test.sh")
        .unwrap();
    assert!(wheel < tests, "{ci}");

    let syntax = std::process::Command::new("bash")
        .args(["-n", "scripts/wheel-check.sh"])
        .current_dir(repo(""))
        .status()
        .unwrap();
    assert!(syntax.success());
    // What the check runs from the fresh venv, and what it compares against.
    let script = std::fs::read_to_string(repo("scripts/wheel-check.sh")).unwrap();
    for needle in [
        "python3 -m venv \"$venv\"",
        "prewarm-doctor --version",
        "prewarm-doctor report \"$root/reports/h200-matrix\"",
        "\"prewarm-doctor $version\"",
        "\"== prewarm-doctor: \"*",
    ] {
        assert!(
            script.contains(needle),
            "scripts/wheel-check.sh lacks {needle}"
        );
    }
}

#[test]
fn the_readmes_install_section_leads_with_pip_and_states_the_glibc_floor() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let section = readme
        .split("\n## Install\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has an Install section");
    let pip = section.find("pip install").expect("pip install in Install");
    let cargo = section
        .find("cargo install")
        .expect("cargo install in Install");
    assert!(pip < cargo, "pip comes first:\n{section}");
    assert!(section.contains("maturin build --release"), "{section}");
    // The floor the README promises is the one pyproject.toml makes maturin enforce.
    let tag = compatibility();
    let glibc = tag.trim_start_matches("manylinux_").replace('_', ".");
    assert!(
        section.contains(&format!("`{tag}_x86_64`")),
        "{tag}:\n{section}"
    );
    assert!(
        section.contains(&format!("glibc is {glibc} or newer")),
        "{glibc}:\n{section}"
    );
    assert!(
        readme.find("\n## Install\n") < readme.find("\n## Set up\n"),
        "Install comes before Set up"
    );
}

#[test]
fn the_report_starts_with_the_title_the_wheel_check_expects() {
    let out = Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .args(["report", "reports/h200-matrix"])
        .current_dir(repo(""))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap_or_default();
    assert!(first.starts_with("== prewarm-doctor: "), "{first}");

    let version = Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .arg("--version")
        .output()
        .unwrap();
    assert!(version.status.success());
    assert_eq!(
        String::from_utf8(version.stdout).unwrap().trim_end(),
        format!("prewarm-doctor {}", env!("CARGO_PKG_VERSION"))
    );
}
