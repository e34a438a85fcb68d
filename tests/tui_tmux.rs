//! End to end in a real terminal: the dashboard runs inside tmux (80×24),
//! keys go in with `send-keys`, the screen comes back with `capture-pane`.
//! Checks what the snapshot tests cannot: raw mode, the alternate screen, the
//! terminal given back on exit and on SIGTERM, `run --tui` showing the
//! command's output and stopping it only after asking. Needs tmux
//! (scripts/test.sh installs it); set PREWARM_DOCTOR_NO_TMUX=1 to skip on a machine without.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    /// A private tmux server running `command` in an 80×24 window.
    fn start(name: &str, command: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            if std::env::var_os("PREWARM_DOCTOR_NO_TMUX").is_some() {
                return None;
            }
            panic!(
                "tmux is not installed: the end-to-end dashboard tests need it (`bash scripts/test.sh` installs it, with `apt-get install tmux`), or set PREWARM_DOCTOR_NO_TMUX=1 to skip them"
            );
        }
        let t = Tmux {
            socket: format!("pd-test-{}-{name}", std::process::id()),
        };
        let wrapped = format!("{command}; echo EXIT=$?; exec sh");
        let ok = t
            .tmux(&[
                "new-session",
                "-d",
                "-x",
                "80",
                "-y",
                "24",
                "sh",
                "-c",
                &wrapped,
            ])
            .status
            .success();
        assert!(ok, "tmux new-session failed");
        Some(t)
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", k]);
            // One key at a time: an Esc followed at once by a key reads as Alt+key.
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    /// Waits until the screen shows `text` (or fails with the last screen).
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "never showed {text:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The process the pane's shell is running (the dashboard).
    fn child_pid(&self) -> Option<i32> {
        let shell = String::from_utf8_lossy(&self.tmux(&["display", "-p", "#{pane_pid}"]).stdout)
            .trim()
            .to_string();
        let shell: i32 = shell.parse().ok()?;
        // The child whose parent is the shell, from /proc (no procps needed).
        std::fs::read_dir("/proc").ok()?.find_map(|e| {
            let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: i32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            (ppid == shell).then_some(pid)
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

fn doctor() -> &'static str {
    env!("CARGO_BIN_EXE_prewarm-doctor")
}

/// Whether the pane's terminal is back in cooked mode (stty answers "icanon").
fn cooked(t: &Tmux) -> bool {
    t.tmux(&[
        "send-keys",
        "stty -a | grep -o ' icanon' ; echo STTY-DONE",
        "Enter",
    ]);
    let s = t.wait_for("STTY-DONE\n");
    s.contains(" icanon")
}

#[test]
fn replay_walks_every_view_and_gives_the_terminal_back() {
    let cmd = format!("{} tui reports/h200-matrix", doctor());
    let Some(t) = Tmux::start("replay", &cmd) else {
        return;
    };
    let s = t.wait_for("nccl_comm       2/3");
    assert!(s.contains("triton_autotune") && s.contains("WORKS"), "{s}");
    t.keys(&["j", "j", "j", "Enter"]);
    t.wait_for("verdict: nccl_comm");
    t.keys(&["Escape"]);
    t.keys(&["Tab", "2"]);
    t.wait_for("zoom step 1");
    t.keys(&["l", "l"]);
    t.wait_for("event 3/");
    t.keys(&["Tab", "/", "n", "c", "c", "l", "Enter"]);
    t.wait_for("filter /nccl");
    t.keys(&["Tab"]);
    t.wait_for("s1 peak");
    t.keys(&["Tab"]);
    t.wait_for("= device used");
    t.keys(&["?"]);
    t.wait_for("Tab / Shift-Tab");
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    let s = t.wait_for("EXIT=0");
    assert!(
        !s.contains("= device used"),
        "left the alternate screen: {s}"
    );
    assert!(cooked(&t), "the terminal is back in cooked mode");
}

#[test]
fn sigterm_restores_the_terminal() {
    let Some(t) = Tmux::start(
        "sigterm",
        &format!("{} tui tests/fixtures/h200/multinode-fsdp2", doctor()),
    ) else {
        return;
    };
    t.wait_for("Matrix");
    let pid = t.child_pid().expect("the dashboard is running");
    // SAFETY: signals the dashboard process this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    t.wait_for("EXIT=143");
    assert!(cooked(&t));
}

#[test]
fn a_folder_that_is_not_a_run_is_refused_before_the_screen_changes() {
    let Some(t) = Tmux::start("notarun", &format!("{} tui /nonexistent/run", doctor())) else {
        return;
    };
    let s = t.wait_for("EXIT=");
    assert!(
        s.contains("/nonexistent/run does not exist") && s.contains("EXIT=3"),
        "{s}"
    );
}

#[test]
fn a_closed_terminal_ends_the_dashboard() {
    let Some(t) = Tmux::start("hangup", &format!("{} tui reports/h200-matrix", doctor())) else {
        return;
    };
    t.wait_for("Matrix");
    let pid = t.child_pid().expect("the dashboard is running");
    t.tmux(&["kill-server"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.contains(") Z ") {
            break; // exited, not yet reaped
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard is still running after its terminal closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pd-tui-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_live_run_shows_its_output_and_asks_before_stopping() {
    let out = fresh_dir("live");
    let cmd = format!(
        "{} run --tui --out {} --variant a --variant b --repeat 2 -- sh -c 'i=0; while [ $i -lt 300 ]; do echo tick-$i; echo warn-$i >&2; i=$((i+1)); sleep 0.1; done'",
        doctor(),
        out.display()
    );
    let Some(t) = Tmux::start("live", &cmd) else {
        return;
    };
    let s = t.wait_for("tick-5");
    assert!(s.contains("RUNNING") && s.contains("attempt 1/4"), "{s}");
    assert!(s.contains("warn-"), "stderr reaches the pane too: {s}");
    t.keys(&["q"]);
    t.wait_for("the run is still going");
    t.keys(&["n"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(t.screen().contains("RUNNING"), "n keeps the run going");
    t.keys(&["q", "y"]);
    let s = t.wait_for("EXIT=10");
    assert!(s.contains("run folder"), "the summary follows: {s}");
    // The first attempt was stopped, and no further attempt started.
    let log = std::fs::read_to_string(
        out.join("a/1")
            .read_dir()
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("output.log"),
    )
    .unwrap();
    assert!(
        log.contains("tick-0\n") && log.contains("warn-0\n"),
        "{log}"
    );
    assert!(!out.join("b/1").exists(), "stopping ends the matrix");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn ctrl_c_is_forwarded_then_kills() {
    let out = fresh_dir("ctrlc");
    let cmd = format!(
        "{} run --tui --out {} -- sh -c 'trap \"echo caught-INT\" INT; i=0; while [ $i -lt 600 ]; do echo tick-$i; i=$((i+1)); sleep 0.1; done'",
        doctor(),
        out.display()
    );
    let Some(t) = Tmux::start("ctrlc", &cmd) else {
        return;
    };
    t.wait_for("tick-3");
    t.keys(&["C-c"]);
    let s = t.wait_for("caught-INT");
    assert!(s.contains("Ctrl-C again kills"), "{s}");
    t.keys(&["C-c"]);
    t.wait_for("EXIT=137");
    assert!(Path::new(&out).join("run.json").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn without_a_terminal_tui_is_refused() {
    for args in [
        vec!["tui", "reports/h200-matrix"],
        vec!["run", "--tui", "--", "true"],
    ] {
        let out = Command::new(doctor())
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("needs an interactive terminal"), "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// The progress lines `run` prints on stderr for a matrix, by attempt:
/// (index, variant, repeat) of each "[prewarm-doctor] 3/4: variant 'a'
/// repeat 2" line.
fn progress_lines(stderr: &str) -> Vec<(u32, String, u32)> {
    let line =
        regex::Regex::new(r"(?m)^\[prewarm-doctor\] (\d+)/\d+: variant '([^']+)' repeat (\d+)")
            .unwrap();
    line.captures_iter(stderr)
        .map(|c| {
            (
                c[1].parse().unwrap(),
                c[2].to_string(),
                c[3].parse().unwrap(),
            )
        })
        .collect()
}

/// Issue 38: after `q` then `d` (leave the dashboard, let the run finish)
/// the remaining attempts printed no progress lines. The attempts that
/// start after the dashboard closed print on stderr the progress lines a
/// run without the dashboard prints for them.
#[test]
fn after_leaving_the_dashboard_the_remaining_attempts_print_their_progress() {
    let out = fresh_dir("detach");
    let err = fresh_dir("detach-stderr.txt");
    let cmd = format!(
        "{} run --tui --out {} --variant a --variant b --repeat 2 -- sh -c 'i=0; while [ $i -lt 25 ]; do echo tick-$i; i=$((i+1)); sleep 0.1; done' 2>{}",
        doctor(),
        out.display(),
        err.display()
    );
    let Some(t) = Tmux::start("detach", &cmd) else {
        return;
    };
    let s = t.wait_for("tick-2");
    assert!(s.contains("attempt 1/4"), "{s}");
    t.keys(&["q"]);
    t.wait_for("the run is still going");
    t.keys(&["d"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !t.screen().contains("EXIT=") {
        assert!(Instant::now() < deadline, "{}", t.screen());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(t.screen().contains("EXIT=0"), "{}", t.screen());
    let detached = progress_lines(&std::fs::read_to_string(&err).unwrap());
    // The same matrix without the dashboard: its progress lines.
    let plain = fresh_dir("plain");
    let st = Command::new(doctor())
        .args(["run", "--out"])
        .arg(&plain)
        .args([
            "--variant",
            "a",
            "--variant",
            "b",
            "--repeat",
            "2",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert!(st.status.success());
    let expected: Vec<_> = progress_lines(&String::from_utf8_lossy(&st.stderr))
        .into_iter()
        .filter(|(index, _, _)| *index > 1)
        .collect();
    assert_eq!(expected.len(), 3);
    assert_eq!(detached, expected);
    for d in [out, err, plain] {
        let _ = std::fs::remove_dir_all(&d);
        let _ = std::fs::remove_file(&d);
    }
}
