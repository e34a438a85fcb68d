//! benches/gpu_steady_toggles.py, the bench that times a steady step with
//! one piece of the doctor off and on in one process, driven with the real
//! `prewarm-doctor` (its `run` flags must be the binary's) and a stand-in
//! worker interpreter: each process runs at its own speed (whole processes
//! differ by far more than the piece), and its probe piece adds 0.5 ms a
//! step while on. The summary must find exactly that, within pairs, and
//! nothing for the piece that switches nothing.

mod common;

use std::path::Path;
use std::process::Command;

/// The stand-in interpreter: `python3 <bench> --worker` prints the rows a
/// worker prints. Its step takes 40 ms plus 5 ms a process (a counter), the
/// probe piece 0.5 ms more while on; the unwind piece cannot be switched.
const WORKER: &str = r#"#!/usr/bin/env python3
import json, os, sys
counter = os.path.join(os.environ["STANDIN_DIR"], "count")
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
base = 40.0 + 5.0 * n
if os.environ.get("STANDIN_DIES") == str(n + 1):
    sys.stderr.write("Segmentation fault\n")
    sys.exit(139)
pieces = {"none": 0.0}
if os.environ.get("CUDA_INJECTION64_PATH"):
    pieces["probe"] = 0.5
print("TOGGLE_MISSING unwind (no shim monitoring tool in this process)", flush=True)
for pair in range(int(os.environ.get("STEADY_TOGGLES_PAIRS", "20"))):
    for piece, cost in pieces.items():
        row = {"on_ms": base + cost, "off_ms": base, "first": "off" if pair % 2 else "on"}
        print(f"TOGGLE piece={piece} pair={pair} {json.dumps(row)}", flush=True)
"#;

fn bench(dir: &Path, processes: &str) -> Command {
    common::write_executable(dir, "python", WORKER);
    let mut c = Command::new("python3");
    c.arg(common::repo("benches/gpu_steady_toggles.py"))
        .arg(processes)
        .env("BIN", assert_cmd::cargo::cargo_bin("prewarm-doctor"))
        .env("STEADY_TOGGLES_PYTHON", dir.join("python"))
        .env("STEADY_TOGGLES_ROWS", dir.join("rows.txt"))
        .env("STEADY_TOGGLES_PAIRS", "6")
        .env("STANDIN_DIR", dir);
    c
}

fn line<'a>(out: &'a str, start: &str, has: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start) && l.contains(has))
        .unwrap_or_else(|| panic!("no {start} line with {has:?} in\n{out}"))
}

/// The probe's 0.5 ms a step found in every pair of every process, though
/// the processes' steps differ by 5 ms; nothing for `none`; the piece the
/// worker could not switch is said, and every pair is stored by process.
#[test]
fn a_piece_that_costs_a_step_is_found_within_pairs_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(&mut bench(dir.path(), "3"));
    let probe = line(&out, "TOGGLE_PAIRED", "piece=probe ");
    assert!(probe.contains(" pairs=18 "), "{probe}");
    assert!(probe.contains(" added_us=500.0 "), "{probe}");
    assert!(probe.contains(" added_us_90=500.0..500.0 "), "{probe}");
    assert!(probe.contains(" slower=18/18 "), "{probe}");
    // The median step over the three processes' 40.5, 45.5 and 50.5 ms.
    assert!(probe.contains(" step_ms=45.50 "), "{probe}");
    let none = line(&out, "TOGGLE_PAIRED", "piece=none ");
    assert!(
        none.contains(" pairs=18 step_ms=45.00 added_us=0.0 "),
        "{none}"
    );
    assert!(none.contains(" slower=0/0 "), "{none}");
    assert!(!out.contains("piece=unwind "), "{out}");
    line(&out, "TOGGLE_MISSING", "unwind");
    let stored = std::fs::read_to_string(dir.path().join("rows.txt")).unwrap();
    for process in 1..=3 {
        let rows = stored
            .lines()
            .filter(|l| l.starts_with(&format!("TOGGLE process={process} piece=probe ")))
            .count();
        assert_eq!(rows, 6, "{stored}");
    }
    // The stored rows give the summary the run printed.
    common::stored_rows_give_the_printed_summary(
        "benches/gpu_steady_toggles.py",
        &dir.path().join("rows.txt"),
        "TOGGLE_PAIRED",
        &out,
    );
}

/// A stored row that is not one is refused, naming its file and line.
#[test]
fn a_broken_row_is_refused_by_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.txt");
    std::fs::write(
        &rows,
        "TOGGLE process=1 piece=probe pair=0 {\"on_ms\": 40.5, \"off_ms\": 40.0}\nTOGGLE process=1 piece=probe pair=1 {\"on_ms\": 40.5}\n",
    )
    .unwrap();
    let done = Command::new("python3")
        .arg(common::repo("benches/gpu_steady_toggles.py"))
        .arg("--summary")
        .arg(&rows)
        .output()
        .unwrap();
    assert!(!done.status.success());
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(
        err.contains(&format!("{}:2: not a TOGGLE row", rows.display())),
        "{err}"
    );
}

/// Under the real binary the worker finds the doctor as its parent, and
/// the `doctor` piece stops that process and continues it (the training,
/// its child, runs on); the probe, which CUDA has not loaded on a machine
/// without a GPU, is said missing with that reason.
#[test]
fn under_the_doctor_its_own_process_is_a_piece_that_stops_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        r#"
import os, sys, time
sys.path.insert(0, {benches:?})
import gpu_steady_toggles as bench
found, missing = bench.switches()
print("FOUND", " ".join(sorted(found)))
print("MISSING", " | ".join(missing))
def state():
    with open(f"/proc/{{os.getppid()}}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
off, on = found["doctor"]
off()
for _ in range(100):
    if state() == "T":
        break
    time.sleep(0.01)
print("STOPPED", state())
on()
for _ in range(100):
    if state() != "T":
        break
    time.sleep(0.01)
print("CONTINUED", state())
"#,
        benches = common::repo("benches").display().to_string()
    );
    let out = common::stdout_of_success(
        Command::new(assert_cmd::cargo::cargo_bin("prewarm-doctor"))
            .args(["run", "--cache", "user", "--out"])
            .arg(dir.path().join("run"))
            .args(["--", "python3", "-c", &script]),
    );
    assert!(line(&out, "FOUND", "").contains(" doctor"), "{out}");
    assert!(line(&out, "FOUND", "").contains(" none"), "{out}");
    line(
        &out,
        "MISSING",
        "probe (CUDA has not loaded it in this process)",
    );
    assert_eq!(line(&out, "STOPPED", ""), "STOPPED T", "{out}");
    assert_ne!(line(&out, "CONTINUED", ""), "CONTINUED T", "{out}");
}

/// Call 19 (an H100, three processes of fsdp2's steady step, 20 pairs a
/// piece each): its stored rows give the summary it printed, every pair
/// counted.
#[test]
fn the_gpu_calls_rows_give_its_printed_summary() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-06-h100");
    let out = Command::new("python3")
        .arg(common::repo("benches/gpu_steady_toggles.py"))
        .arg("--summary")
        .arg(folder.join("steady-toggles-call19.txt"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ours = String::from_utf8(out.stdout).unwrap();
    let printed = std::fs::read_to_string(folder.join("summary-call19.txt")).unwrap();
    let paired = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("TOGGLE_PAIRED"))
            .map(str::to_string)
            .collect()
    };
    let ours = paired(&ours);
    assert_eq!(ours.len(), 4);
    assert_eq!(ours, paired(&printed)[..4]);
    for piece in ["none", "probe", "unwind", "doctor"] {
        let l = line(
            &ours.join("\n"),
            "TOGGLE_PAIRED",
            &format!("piece={piece} "),
        )
        .to_string();
        assert!(l.contains(" pairs=60 "), "{l}");
    }
}

/// A process whose worker dies (the second: exit 139) is said with its
/// exit status and last stderr line, and the processes after it still run:
/// the pairs are the other two's.
#[test]
fn a_dying_process_is_named_and_the_next_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(bench(dir.path(), "3").env("STANDIN_DIES", "2"));
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 1, "{out}");
    assert!(
        failed[0].starts_with("FAILED process=2 exit=139: "),
        "{out}"
    );
    let probe = line(&out, "TOGGLE_PAIRED", "piece=probe ");
    assert!(probe.contains(" pairs=12 "), "{probe}");
    assert!(probe.contains(" added_us=500.0 "), "{probe}");
}
