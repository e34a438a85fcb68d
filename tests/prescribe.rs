//! `prewarm-doctor prescribe` and the shim's side of it, on CPU: the shim
//! records replay signatures through its Triton observer (a stand-in Triton,
//! tests/shim/fake_triton) and injects a prescription at the right moment (a
//! stand-in torch, tests/shim/fake_torch); prescriptions of every bundled GPU
//! recording compile and say what they cannot replay; a generated
//! prescription replays its keys through the kernel's own autotuner.

mod common;

use prewarm_doctor::prescribe::prescribe;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> &'static str {
    ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("-c")
                .arg("pass")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("python3 is needed for the prescribe tests")
}

/// Runs `script` under the shim (fake torch and Triton on the path) with
/// PREWARM_DOCTOR_DIR=`dir`; returns (exit code, shim events, output).
fn run_py(script: &str, dir: &Path, env: &[(&str, &str)]) -> (i32, Vec<serde_json::Value>, String) {
    let path = std::env::join_paths([
        root().join("src/shim"),
        root().join("tests/shim/fake_torch"),
        root().join("tests/shim/fake_triton"),
    ])
    .unwrap();
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", path)
        .env("PREWARM_DOCTOR_DIR", dir)
        .env("RANK", "0")
        .env_remove("PREWARM_DOCTOR_PRESCRIPTION")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let mut events = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".shim.jsonl") {
            for line in std::fs::read_to_string(&p).unwrap().lines() {
                events.push(serde_json::from_str(line).unwrap());
            }
        }
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), events, text)
}

fn of<'a>(events: &'a [serde_json::Value], ev: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["ev"] == ev).collect()
}

fn py_compile(text: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("prescription.py");
    std::fs::write(&file, text).unwrap();
    let out = Command::new(python())
        .args(["-m", "py_compile"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every run folder bundled with the repository (recordings made on the H200).
fn recordings() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for base in ["tests/fixtures/h200", "reports"] {
        for e in std::fs::read_dir(root().join(base)).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && prewarm_doctor::load::load_run(&p).is_ok() {
                out.push(PathBuf::from(base).join(p.file_name().unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_bundled_recording_gets_a_valid_prescription_that_guesses_nothing() {
    let runs = recordings();
    assert!(runs.len() >= 10, "{runs:?}");
    for run in &runs {
        let p = prescribe(&root().join(run), None).unwrap_or_else(|e| panic!("{run:?}: {e}"));
        py_compile(&p.text);
        // Made before the replay records existed: nothing is replayed, and
        // every late cuBLAS init, communicator or autotune says why not.
        assert!(p.plan.triton.is_empty() && p.plan.cublas.is_empty() && p.plan.groups.is_empty());
        assert!(p.plan.fingerprint.is_none());
        assert!(p.text.contains("No fingerprint was recorded"), "{run:?}");
    }
    let nccl = prescribe(&root().join("tests/fixtures/h200/examples-nccl-baseline"), None).unwrap();
    assert!(nccl.plan.not_replayed.iter().any(|n| n.block == "nccl"
        && n.why.contains("no process-group records")));
    let triton =
        prescribe(&root().join("tests/fixtures/h200/examples-triton-baseline"), None).unwrap();
    assert!(triton.plan.not_replayed.iter().any(|n| n.block == "triton"
        && n.what.contains("rowwise_mix")
        && n.why.contains("no call signature was recorded")));
}

#[test]
fn prescription_snapshots() {
    for (name, run) in [
        ("triton_baseline", "tests/fixtures/h200/examples-triton-baseline"),
        ("nccl_baseline", "tests/fixtures/h200/examples-nccl-baseline"),
    ] {
        // Relative to the package root (the tests' working directory), so the
        // header's run path is the same on every machine.
        let p = prescribe(Path::new(run), None).unwrap();
        let head: String = p.text.split("\nimport os\n").next().unwrap().to_string();
        insta::assert_snapshot!(format!("prescription_{name}"), head);
    }
}

#[test]
fn a_missing_attempt_names_the_ones_there_are() {
    let err = prescribe(
        &root().join("tests/fixtures/h200/examples-triton-baseline"),
        Some("nope/1"),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("--attempt 'nope/1'") && err.contains("default/1"), "{err}");
}

const KERNELS: &str = r#"
import torch, triton

class T:
    """A tensor's layout, as the shim reads it."""
    def __init__(self, shape, dtype="torch.bfloat16", offset=0):
        self.shape, self.dtype, self._off = list(shape), dtype, offset
    def stride(self):
        out, acc = [], 1
        for n in reversed(self.shape):
            out.insert(0, acc)
            acc *= n
        return tuple(out)
    def data_ptr(self):
        return 0
    def storage_offset(self):
        return self._off

@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 32}, num_warps=8)], key=["n"])
def mix(x, y, n, scale, BLOCK):
    return BLOCK

@triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=["n"])
def opaque(x, n, thing, B):
    return B
"#;

#[test]
fn the_observer_records_each_new_key_once_with_what_replay_needs() {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "{KERNELS}\nx, y = T([4, 128]), T([4, 128], offset=8)\n\
         for n in (128, 128, 256, 128):\n    mix[lambda m: (m['n'] // m['BLOCK'], 4)](x, y, n, 0.5)\n\
         opaque[(1,)](x, 7, object())\nprint('OK')\n"
    );
    let (code, events, out) = run_py(&script, dir.path(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("OK"));
    let calls = of(&events, "autotune_call");
    assert_eq!(calls.len(), 3, "one per (kernel, key): {calls:?}");
    let first = calls[0];
    assert_eq!(first["kernel"], "mix");
    assert_eq!(first["module"], "__main__");
    assert_eq!(first["qualname"], "mix");
    assert_eq!(first["key"], "(128, 'torch.bfloat16', 'torch.bfloat16')");
    assert_eq!(
        first["args"][1]["tensor"],
        serde_json::json!({"shape": [4, 128], "stride": [128, 1], "dtype": "torch.bfloat16", "device": "cuda", "offset": 8})
    );
    assert_eq!(first["args"][2], serde_json::json!({"value": 128}));
    assert_eq!(first["args"][3], serde_json::json!({"value": 0.5}));
    // The grid function, evaluated on each candidate's meta-parameters.
    assert_eq!(
        first["grid"],
        serde_json::json!({"per_config": [[{"BLOCK": 64}, [2, 4]], [{"BLOCK": 32}, [4, 4]]]})
    );
    assert!(first["replay"].is_null());
    assert_eq!(calls[1]["key"], "(256, 'torch.bfloat16', 'torch.bfloat16')");
    let opaque = calls[2];
    assert_eq!(opaque["grid"], serde_json::json!({"fixed": [1]}));
    assert!(
        opaque["replay"]
            .as_str()
            .unwrap()
            .contains("argument(s) 2 are neither tensors nor plain values"),
        "{opaque}"
    );
    // The observer's own events are unchanged.
    assert_eq!(of(&events, "autotune").len(), 3);
}

const PRESCRIPTION: &str = r#"
import json, os
FINGERPRINT = None
def mismatch(fp):
    want = os.environ.get("WANT_PARAMS")
    return None if want is None or int(want) == fp["params"] else "made for params=%s" % want
def warm_group(torch, index, group, ranks, force):
    return None
def warm_at_step1(torch):
    import prewarm_doctor_shim as s
    print("WARM", s.now(), flush=True)
    return [("cublas:torch.float32", None), ("triton:k:(1,)", "boom")]
"#;

const TRAIN: &str = r#"
import time, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._children = [torch.nn.Module()]
net = Net()
with torch.no_grad():
    net(1)  # evaluation at setup: not the moment
opt = torch.optim.Optimizer(net.parameters())
for step in range(3):
    opt.zero_grad()
    net(1)
    opt.step()
print("TRAINED", flush=True)
"#;

fn warm_times(out: &str) -> Vec<u64> {
    out.lines()
        .filter_map(|l| l.strip_prefix("WARM "))
        .map(|t| t.trim().parse().unwrap())
        .collect()
}

#[test]
fn the_prescription_runs_once_before_step_one_and_never_raises_into_training() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.py");
    std::fs::write(&file, PRESCRIPTION).unwrap();
    let run_dir = dir.path().join("run");
    std::fs::create_dir(&run_dir).unwrap();
    let (code, events, out) = run_py(
        TRAIN,
        &run_dir,
        &[("PREWARM_DOCTOR_PRESCRIPTION", file.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("TRAINED"));
    let warms = warm_times(&out);
    assert_eq!(warms.len(), 1, "the hook fires once and is removed: {out}");
    let begin = of(&events, "step1_begin")[0]["t"].as_u64().unwrap();
    let p = of(&events, "prescription");
    assert_eq!(p.len(), 1);
    assert!(p[0]["t1"].as_u64().unwrap() <= begin, "the prescription is setup, not step 1");
    assert!(warms[0] < begin);
    assert_eq!(p[0]["ran"], serde_json::json!(["cublas:torch.float32"]));
    assert_eq!(p[0]["failed"], 1);
    let errors: Vec<_> = std::fs::read_dir(&run_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("prescription-errors"))
        .collect();
    assert_eq!(errors.len(), 1);
    assert!(std::fs::read_to_string(&errors[0]).unwrap().contains("boom"));
    let fp = of(&events, "fingerprint");
    assert_eq!(fp.len(), 1);
    assert_eq!(fp[0]["params"], 2);
    assert_eq!(fp[0]["world"], 1);
}

#[test]
fn a_prescription_for_another_model_is_refused_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.py");
    std::fs::write(&file, PRESCRIPTION).unwrap();
    for (force, runs) in [("0", 0), ("1", 1)] {
        let run_dir = tempfile::tempdir().unwrap();
        let (code, events, out) = run_py(
            TRAIN,
            run_dir.path(),
            &[
                ("PREWARM_DOCTOR_PRESCRIPTION", file.to_str().unwrap()),
                ("WANT_PARAMS", "7"),
                ("PREWARM_DOCTOR_PRESCRIPTION_FORCE", force),
            ],
        );
        assert_eq!(code, 0, "{out}");
        assert_eq!(warm_times(&out).len(), runs, "{out}");
        let p = of(&events, "prescription");
        if runs == 0 {
            assert_eq!(p[0]["skipped"], "made for params=7");
        } else {
            assert!(p[0]["skipped"].is_null());
        }
    }
}

#[test]
fn a_broken_prescription_file_leaves_training_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.py");
    std::fs::write(&file, "raise SystemError('bad prescription')\n").unwrap();
    let (code, events, out) = run_py(
        TRAIN,
        dir.path(),
        &[("PREWARM_DOCTOR_PRESCRIPTION", file.to_str().unwrap())],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("TRAINED") && !out.contains("bad prescription"), "{out}");
    let p = of(&events, "prescription");
    assert_eq!(p[0]["skipped"], "the prescription could not be loaded");
    assert_eq!(of(&events, "step_end").len(), 3);
}
