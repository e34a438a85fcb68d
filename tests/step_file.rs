//! The step file (the shim's default; PREWARM_DOCTOR_STEP_FILE=0 keeps lines) end to end: `prewarm-
//! doctor run` of a training against the stand-in torch. A warm step's end
//! is a record in `<stem>.shim.steps` instead of a line, and the analysis
//! reads the same steps from it as from lines; the records survive the
//! process being killed, where a buffered line would not.

mod common;

use common::python;
use prewarm_doctor::analysis::account::ProcessAccount;
use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::load::load_run;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `steps` steps of 2 ms; with `kill_at`, the process SIGKILLs itself
/// after that many steps ended.
fn train(steps: u32, kill_at: Option<u32>) -> String {
    let kill = kill_at.map_or(String::new(), |k| {
        format!("    if step + 1 == {k}:\n        os.kill(os.getpid(), signal.SIGKILL)\n")
    });
    format!(
        "import os, signal, time, torch\n\
         net = torch.nn.Module()\n\
         opt = torch.optim.Optimizer(net.parameters())\n\
         for step in range({steps}):\n\
         \x20   opt.zero_grad()\n\
         \x20   net(1)\n\
         \x20   time.sleep(0.002)\n\
         \x20   opt.step()\n\
         {kill}\
         print('TRAINED', flush=True)\n"
    )
}

/// Runs the training under the doctor; the run folder, the exit code and
/// the training's stdout.
fn recorded(dir: &Path, script: &str, step_file: bool) -> (PathBuf, Option<i32>, String) {
    let path = dir.join("train.py");
    std::fs::write(&path, script).unwrap();
    let out = dir.join("run");
    let r = assert_cmd::Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .args(["run", "--out"])
        .arg(&out)
        .arg("--")
        .arg(python())
        .arg(&path)
        .env("PREWARM_DOCTOR_CACHE", dir.join("cache"))
        .env("PYTHONPATH", root().join("tests/shim/fake_torch"))
        .env("FAKE_TORCH_CUDA", "1")
        .env(
            "PREWARM_DOCTOR_STEP_FILE",
            if step_file { "1" } else { "0" },
        )
        .output()
        .unwrap();
    (
        out,
        r.status.code(),
        String::from_utf8_lossy(&r.stdout).into_owned(),
    )
}

fn process(run: &Path) -> ProcessAccount {
    analyse_run(&load_run(run).unwrap())
        .remove(0)
        .processes
        .remove(0)
}

/// The files of the run's one process with this suffix.
fn files(run: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![run.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                found.push(p);
            }
        }
    }
    found
}

fn step_end_lines(run: &Path) -> usize {
    files(run, ".shim.jsonl")
        .iter()
        .map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .filter(|l| l.contains("\"ev\": \"step_end\""))
                .count()
        })
        .sum()
}

#[test]
fn warm_steps_go_to_the_step_file_and_read_as_the_same_steps() {
    let with = tempfile::tempdir().unwrap();
    let (run, code, stdout) = recorded(with.path(), &train(40, None), true);
    assert_eq!((code, stdout.as_str()), (Some(0), "TRAINED\n"));
    let p = process(&run);
    assert_eq!(p.steps.count, 40, "{:?}", p.steps);
    // Lines for the first five steps (their snapshots) only; the rest are
    // records.
    assert_eq!(step_end_lines(&run), 5);
    let steps_file = files(&run, ".shim.steps");
    assert_eq!(steps_file.len(), 1);
    // Cut at exit to its records: steps 6..=40.
    assert_eq!(
        std::fs::metadata(&steps_file[0]).unwrap().len(),
        32 + 35 * 24
    );
    assert!(p.steps.steady_shim_s.is_some(), "{:?}", p.steps);
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    // Without the switch: lines only, and the same steps.
    let without = tempfile::tempdir().unwrap();
    let (plain, code, stdout) = recorded(without.path(), &train(40, None), false);
    assert_eq!((code, stdout.as_str()), (Some(0), "TRAINED\n"));
    assert_eq!(step_end_lines(&plain), 40);
    assert!(files(&plain, ".shim.steps").is_empty());
    let q = process(&plain);
    assert_eq!(
        (q.steps.count, q.steps.steady_steps),
        (p.steps.count, p.steps.steady_steps)
    );
}

#[test]
fn a_training_that_sets_rank_itself_after_starting_keeps_its_warm_steps() {
    // A one-rank job without torchrun sets RANK itself once running (as
    // examples/common.py does); its lines were already named without it.
    let script =
        train(40, None).replacen("for step in", "os.environ['RANK'] = '0'\nfor step in", 1);
    let dir = tempfile::tempdir().unwrap();
    let (run, code, stdout) = recorded(dir.path(), &script, true);
    assert_eq!((code, stdout.as_str()), (Some(0), "TRAINED\n"));
    assert_eq!(process(&run).steps.count, 40);
    // A recording made before the shim kept its stem: the step file named
    // with the rank, the lines without it, is still found by its pid.
    let (lines, steps) = (files(&run, ".shim.jsonl"), files(&run, ".shim.steps"));
    let renamed = steps[0].with_file_name(
        steps[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replacen("proc.", "rank-0.", 1),
    );
    assert!(lines[0].to_string_lossy().contains("proc.pid-"));
    // The shim names both with the stem of its first file.
    assert_eq!(
        steps[0].to_string_lossy().replace(".shim.steps", ""),
        lines[0].to_string_lossy().replace(".shim.jsonl", "")
    );
    std::fs::rename(&steps[0], &renamed).unwrap();
    assert_eq!(process(&run).steps.count, 40);
}

#[test]
fn the_step_files_records_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let (run, code, stdout) = recorded(dir.path(), &train(40, Some(23)), true);
    assert_eq!(stdout, "");
    // The doctor passes the training's death on (128 + SIGKILL).
    assert_ne!(code, Some(0));
    let p = process(&run);
    assert_eq!(p.steps.count, 23, "{:?}", p.steps);
}

/// `script` run with the shim's writer importable, writing into `dir` with
/// the step file on.
fn writer_alone(dir: &Path, script: &str) -> std::process::Output {
    std::process::Command::new(python())
        .args(["-c", script])
        .env("PYTHONPATH", root().join("src/shim"))
        .env("PREWARM_DOCTOR_DIR", dir)
        .env("PREWARM_DOCTOR_STEP_FILE", "1")
        .env_remove("RANK")
        .output()
        .unwrap()
}

/// The steps a shim file and its step file end, sorted, and the own-time
/// samples read with them; no problems.
fn steps_read(dir: &Path, shim: &Path) -> (Vec<u32>, usize) {
    let (lines, problems) = prewarm_doctor::load::read_shim(dir, shim);
    assert!(problems.is_empty(), "{problems:?}");
    let mut steps: Vec<u32> = lines
        .events
        .iter()
        .filter_map(|e| match e {
            prewarm_doctor::load::shim::ShimEvent::StepEnd { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    steps.sort();
    (steps, lines.own_time.len())
}

/// The shim's writer alone, 70,000 warm steps (every 100th a line, as the
/// step tracker writes it): the file grows past its first 65,536 records
/// and every step reads back once.
#[test]
fn the_step_file_grows_and_every_step_reads_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import prewarm_doctor_events as ev\n\
                  for k in range(6, 70006):\n\
                  \x20   ev.emit_ints('step_end', step=k) if k % 100 == 0 else ev.step_end(k)\n";
    let out = writer_alone(dir.path(), script);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shim = files(dir.path(), ".shim.jsonl");
    assert_eq!(shim.len(), 1);
    let size = std::fs::metadata(&files(dir.path(), ".shim.steps")[0])
        .unwrap()
        .len();
    // Grown past its first 65,536 records, then cut at exit to the last
    // written one (step 70,005's).
    assert_eq!(size, 32 + 70_000 * 24);
    let (steps, own_times) = steps_read(dir.path(), &shim[0]);
    assert_eq!(steps, (6..70_006).collect::<Vec<u32>>());
    assert_eq!(own_times, 70_000);
}

/// A step end after the file was cut at exit (an atexit hook registered
/// before it opened runs after the cut) is a line, and every step reads back.
#[test]
fn a_step_end_after_the_cut_at_exit_is_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import atexit, prewarm_doctor_events as ev\n\
                  atexit.register(lambda: ev.step_end(30))\n\
                  for k in range(6, 30):\n\
                  \x20   ev.step_end(k)\n";
    let out = writer_alone(dir.path(), script);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(step_end_lines(dir.path()), 1);
    let steps_file = files(dir.path(), ".shim.steps");
    assert_eq!(
        std::fs::metadata(&steps_file[0]).unwrap().len(),
        32 + 24 * 24
    );
    let shim = files(dir.path(), ".shim.jsonl");
    assert_eq!(
        steps_read(dir.path(), &shim[0]).0,
        (6..=30).collect::<Vec<u32>>()
    );
}

/// Where the step file cannot be made (here a folder stands at its path),
/// the warm steps' ends are lines as without it, and nothing is printed.
#[test]
fn without_a_step_file_the_ends_are_lines_and_nothing_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let script = "import os, prewarm_doctor_events as ev\n\
                  os.makedirs(ev._path()[: -len('.jsonl')] + '.steps')\n\
                  for k in range(6, 26):\n\
                  \x20   ev.step_end(k)\n";
    let out = writer_alone(dir.path(), script);
    assert!(out.status.success());
    assert_eq!(
        (out.stdout.as_slice(), out.stderr.as_slice()),
        (&b""[..], &b""[..])
    );
    assert_eq!(step_end_lines(dir.path()), 20);
}
