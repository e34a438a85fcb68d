//! The README's test command is `bash scripts/test.sh`, CI runs that same
//! script, and the script installs what the tests need when it is missing:
//! run against stand-ins (an `apt-get` that records what it is asked for, a
//! PATH without tmux or Chromium), it asks for both, honours the opt-outs, and
//! a failed install is said without stopping it; it finds or installs a
//! Python >= 3.12, else stops naming PD_SKIP_PYTHON312=1 (issue 39).

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
    on_path("bash")
}

/// Where `program` is on this PATH.
fn on_path(program: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{program} on PATH"))
}

/// The machine the stand-ins make.
#[derive(Clone, Copy, Default)]
struct Machine<'a> {
    /// apt-get fails every call.
    fail: bool,
    /// python3 is older than 3.12 (else it passes for 3.12).
    old_python: bool,
    /// What `apt-cache policy` offers; installing one of them puts its
    /// program (a Python >= 3.12) on PATH.
    apt_offers: &'a [&'a str],
}

/// A PATH of stand-ins: cargo, cc, python3 and id (root) that do nothing
/// much, an apt-get that appends its arguments to `apt.log` (and fails when
/// `fail` is set), an apt-cache offering `apt_offers`, and nothing else but
/// `dirname`.
fn stand_ins(dir: &Path, machine: Machine) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["cargo", "cc"] {
        write_executable(&bin, tool, "#!/bin/sh\necho stand-in\n");
    }
    let python = if machine.old_python {
        "#!/bin/sh\ncase \"$*\" in *version_info*) exit 1 ;; esac\necho stand-in\n"
    } else {
        "#!/bin/sh\necho stand-in\n"
    };
    write_executable(&bin, "python3", python);
    write_executable(&bin, "id", "#!/bin/sh\necho 0\n");
    let log = dir.join("apt.log");
    let chmod = on_path("chmod");
    let mut installs = String::new();
    for package in machine.apt_offers {
        installs.push_str(&format!(
            "case \"$*\" in 'install '*' {package}') printf '#!/bin/sh\\necho stand-in\\n' > '{bin}/{package}'; '{chmod}' +x '{bin}/{package}' ;; esac\n",
            bin = bin.display(),
            chmod = chmod.display()
        ));
    }
    write_executable(
        &bin,
        "apt-get",
        &format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\n{}{}",
            log.display(),
            if machine.fail { "exit 100\n" } else { "" },
            installs
        ),
    );
    let mut policy = String::from("#!/bin/sh\necho \"apt-cache $*\" >> '");
    policy.push_str(&format!("{}'\n", log.display()));
    for package in machine.apt_offers {
        policy.push_str(&format!(
            "[ \"$2\" = {package} ] && printf '{package}:\\n  Installed: (none)\\n  Candidate: 3.12.3-1\\n'\n"
        ));
    }
    policy.push_str("exit 0\n");
    write_executable(&bin, "apt-cache", &policy);
    std::os::unix::fs::symlink(on_path("dirname"), bin.join("dirname")).unwrap();
    bin
}

/// Runs `scripts/test.sh --setup-only` on the stand-ins: (success, apt-get's
/// calls, stderr).
fn setup_only(fail: bool, env: &[(&str, &str)]) -> (bool, Vec<String>, String) {
    let (ok, calls, _, stderr) = setup_only_on(
        Machine {
            fail,
            ..Machine::default()
        },
        env,
        |_| {},
    );
    (ok, calls, stderr)
}

/// As [`setup_only`] on `machine`, after `prepare` on its home folder:
/// (success, apt-get's and apt-cache's calls, stdout, stderr).
fn setup_only_on(
    machine: Machine,
    env: &[(&str, &str)],
    prepare: impl FnOnce(&Path),
) -> (bool, Vec<String>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let bin = stand_ins(dir.path(), machine);
    prepare(dir.path());
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
        String::from_utf8_lossy(&out.stdout).into_owned(),
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

#[test]
fn a_pyenv_python_312_is_found_and_none_is_installed() {
    let machine = Machine {
        old_python: true,
        apt_offers: &["python3.12"],
        ..Machine::default()
    };
    let (ok, calls, stdout, stderr) = setup_only_on(machine, &[], |home| {
        let bin = home.join(".pyenv/versions/3.12.1/bin");
        std::fs::create_dir_all(&bin).unwrap();
        write_executable(&bin, "python3", "#!/bin/sh\necho Python 3.12.1\n");
    });
    assert!(ok, "{stderr}");
    assert!(!installs(&calls, "python3.12"), "{calls:?}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("Python >= 3.12 for the sys.monitoring tests"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains(".pyenv/versions/3.12.1/bin/python3"),
        "{line}"
    );
}

#[test]
fn without_a_python_312_the_script_installs_one_the_distribution_has() {
    let machine = Machine {
        old_python: true,
        apt_offers: &["python3.12"],
        ..Machine::default()
    };
    let (ok, calls, stdout, stderr) = setup_only_on(machine, &[], |_| {});
    assert!(ok, "{stderr}");
    assert!(installs(&calls, "python3.12"), "{calls:?}");
    // python3.13 first, which this distribution does not have.
    assert!(
        calls.iter().any(|c| c == "apt-cache policy python3.13"),
        "{calls:?}"
    );
    assert!(!installs(&calls, "python3.13"), "{calls:?}");
    assert!(
        stdout.contains("sys.monitoring tests: stand-in (python3.12)"),
        "{stdout}"
    );
}

#[test]
fn without_a_python_312_to_find_or_install_the_script_stops_naming_the_opt_out() {
    let machine = Machine {
        old_python: true,
        ..Machine::default()
    };
    let (ok, calls, _, stderr) = setup_only_on(machine, &[], |_| {});
    assert!(!ok, "{calls:?}");
    assert!(
        !calls.iter().any(|c| c.starts_with("install python3.1")),
        "{calls:?}"
    );
    for needed in [
        "Python >= 3.12",
        "PD_SKIP_PYTHON312=1",
        "PREWARM_TEST_PYTHON312",
    ] {
        assert!(stderr.contains(needed), "{stderr}");
    }
    // The opt-out: said, and the script goes on.
    let (ok, _, stdout, stderr) = setup_only_on(machine, &[("PD_SKIP_PYTHON312", "1")], |_| {});
    assert!(ok, "{stderr}");
    assert!(stdout.contains("PD_SKIP_PYTHON312=1"), "{stdout}");
    // A PREWARM_TEST_PYTHON312 that is no Python >= 3.12 is said as such.
    let (ok, _, _, stderr) =
        setup_only_on(machine, &[("PREWARM_TEST_PYTHON312", "python3")], |_| {});
    assert!(!ok);
    assert!(
        stderr.contains("PREWARM_TEST_PYTHON312=python3 does not run"),
        "{stderr}"
    );
}

/// The tests that need a missing program fail naming it and the opt-out
/// (the script runs them with --no-fail-fast, so the others still run).
#[test]
fn tests_that_need_a_missing_program_name_it_and_the_opt_out() {
    for (file, program, opt_out) in [
        ("tests/html_chromium.rs", "Chromium", "PD_SKIP_CHROMIUM=1"),
        ("tests/tui_tmux.rs", "tmux", "PREWARM_DOCTOR_NO_TMUX=1"),
        (
            "tests/common/python312.rs",
            "Python >= 3.12",
            "PD_SKIP_PYTHON312=1",
        ),
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

/// Every shell script under scripts/ and benches/ that starts with a
/// shebang is executable, as its usage line runs it (by its path, not
/// through `bash`): call 40 lost a GPU call to
/// `scripts/gpu-footprint-zoo.sh: Permission denied`. Scripts meant to be
/// sourced have no shebang.
#[test]
fn every_runnable_shell_script_is_executable() {
    use std::os::unix::fs::PermissionsExt;
    let mut checked = 0;
    for folder in ["scripts", "benches"] {
        for entry in std::fs::read_dir(repo(folder)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "sh") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            if !text.starts_with("#!") {
                continue;
            }
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert!(mode & 0o111 != 0, "{} is not executable", path.display());
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} scripts found");
}
