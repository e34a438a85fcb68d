//! The Python shim, exercised in real Python processes against a stand-in for
//! torch's hook APIs (tests/shim/fake_torch): the step-1 rule, step ends,
//! crash handling, silence without torch, and chaining to a user sitecustomize.

mod common;

use common::python312::python_312;
use common::shim_events;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `PREWARM_TEST_PYTHON` (to run the shim tests under another Python),
/// else python3 or python on PATH.
fn python() -> Option<&'static str> {
    if let Ok(p) = std::env::var("PREWARM_TEST_PYTHON") {
        return Some(String::leak(p));
    }
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("-c")
            .arg("pass")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn shim_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/shim")
}

fn fake_torch() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/fake_torch")
}

/// Runs `script` with the shim first on PYTHONPATH; returns (exit code, events, stderr+stdout).
fn run(
    script: &str,
    extra_path: Option<&Path>,
    with_dir: bool,
) -> (i32, Vec<serde_json::Value>, String, tempfile::TempDir) {
    run_env(script, extra_path, with_dir, &[])
}

/// As `run`, with extra environment variables.
fn run_env(
    script: &str,
    extra_path: Option<&Path>,
    with_dir: bool,
    env: &[(&str, &str)],
) -> (i32, Vec<serde_json::Value>, String, tempfile::TempDir) {
    let py = python().expect("python3 is needed for the shim tests");
    let dir = tempfile::tempdir().unwrap();
    let mut path = vec![shim_dir(), fake_torch()];
    if let Some(p) = extra_path {
        path.push(p.to_path_buf());
    }
    let pp = std::env::join_paths(path).unwrap();
    let mut cmd = Command::new(py);
    cmd.arg("-c")
        .arg(script)
        .env("PYTHONPATH", pp)
        .env("RANK", "0")
        .envs(env.iter().copied());
    if with_dir {
        cmd.env("PREWARM_DOCTOR_DIR", dir.path());
    } else {
        cmd.env_remove("PREWARM_DOCTOR_DIR");
    }
    let out = cmd.output().unwrap();
    let events = shim_events(dir.path());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code().unwrap_or(-1), events, text, dir)
}

const TRAIN: &str = r#"
import time, torch
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._children = [torch.nn.Module()]
net = Net()
opt = torch.optim.Optimizer(net.parameters())
# A prewarm: forward on the model at setup, then its gradients are cleared.
net(1)
opt.zero_grad()
time.sleep(0.01)
print("AFTER_PREWARM", time.monotonic_ns(), flush=True)
for step in range(3):
    opt.zero_grad()
    net(1)
    opt.step()
"#;

fn of<'a>(events: &'a [serde_json::Value], ev: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["ev"] == ev).collect()
}

#[test]
fn step_one_starts_after_the_prewarm_and_steps_are_counted() {
    let (code, events, stderr, _d) = run(TRAIN, None, true);
    assert_eq!(code, 0, "{stderr}");
    let begin = of(&events, "step1_begin");
    assert_eq!(begin.len(), 1);
    assert_eq!(begin[0]["rule"], "first-forward-after-zero-grad");
    let ends = of(&events, "step_end");
    assert_eq!(
        ends.iter()
            .map(|e| e["step"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let process = of(&events, "process");
    assert_eq!(process[0]["versions"]["torch"], "0.0-fake");
    // The prewarm's forward (before the sleep) is setup: step 1 begins after it.
    let t_begin = begin[0]["t"].as_u64().unwrap();
    let after_prewarm: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("AFTER_PREWARM "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        t_begin > after_prewarm,
        "step 1 must begin after the prewarm's forward"
    );
    assert!(t_begin < ends[0]["t"].as_u64().unwrap());
}

/// Torch's memory queries are slow (they build the whole statistics dict):
/// the first steps carry them, steady-state steps only every 100th.
#[test]
fn pool_statistics_are_recorded_for_the_first_steps_then_sparsely() {
    let script = r#"
import torch
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
for step in range(205):
    opt.zero_grad()
    net(1)
    opt.step()
"#;
    let (code, events, text, _d) = run_env(script, None, true, &[("FAKE_TORCH_CUDA", "1")]);
    assert_eq!(code, 0, "{text}");
    let ends = of(&events, "step_end");
    assert_eq!(ends.len(), 205);
    let with_stats: Vec<u64> = ends
        .iter()
        .filter(|e| e.get("reserved").is_some())
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    assert_eq!(with_stats, vec![1, 2, 3, 4, 5, 100, 200]);
    assert_eq!(ends[0]["reserved"], 64 << 20);
    assert_eq!(ends[0]["allocated"], 32 << 20);
    assert_eq!(ends[0]["max_reserved"], 96 << 20);
    assert_eq!(ends[0]["device_free"], 100u64 << 30);
}

#[test]
fn a_crash_before_the_first_step_still_places_step_one_and_records_the_exception() {
    let script = r#"
import torch
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
opt.zero_grad()
net(1)
raise RuntimeError("Triton Error [CUDA]: out of memory")
"#;
    let (code, events, stderr, _d) = run(script, None, true);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("RuntimeError: Triton Error [CUDA]: out of memory"),
        "the traceback must still be printed: {stderr}"
    );
    let exc = of(&events, "exception");
    assert_eq!(exc[0]["type"], "RuntimeError");
    assert!(
        exc[0].get("pool_reserved").is_none(),
        "no pool figures before CUDA is up"
    );
    assert_eq!(exc[0]["message"], "Triton Error [CUDA]: out of memory");
    let begin = of(&events, "step1_begin");
    assert!(
        begin[0]["rule"]
            .as_str()
            .unwrap()
            .contains("died before its first optimizer step")
    );
}

/// A loop that zeroes gradients after the step (never before the first one)
/// and dies in step 1: the optimizer is known from its construction.
#[test]
fn a_crash_without_any_zero_grad_places_step_one_at_the_first_owning_forward() {
    let script = r#"
import torch
net = torch.nn.Module()
other = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
other(1)   # a module the optimizer does not own
net(1)
raise RuntimeError("CUDA out of memory")
"#;
    let (code, events, stderr, _d) = run_env(script, None, true, &[("FAKE_TORCH_CUDA", "1")]);
    assert_eq!(code, 1, "{stderr}");
    // The pool as the process died: its cache is what it could have given back.
    let exc = of(&events, "exception");
    assert_eq!(exc[0]["pool_reserved"], 64 << 20);
    assert_eq!(exc[0]["pool_allocated"], 32 << 20);
    let begin = of(&events, "step1_begin");
    assert_eq!(begin.len(), 1, "{events:?}");
    assert!(
        begin[0]["rule"]
            .as_str()
            .unwrap()
            .starts_with("first-forward (the process died")
    );
    let forwards = of(&events, "first_forward");
    assert_eq!(forwards.len(), 1, "only the owning forward: {events:?}");
    assert_eq!(begin[0]["t"], forwards[0]["t"]);
    assert_eq!(forwards[0]["after_zero_grad"], false);
}

/// A process killed without Python's hooks running (here `os._exit`, as after
/// an abort or a signal) leaves the records the doctor places step 1 from.
#[test]
fn the_step_rule_inputs_are_written_as_they_happen() {
    let script = r#"
import os, torch
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
net(1)          # prewarm
opt.zero_grad()
net(1)          # step 1 begins
net(1)          # not recorded: the first forward after the zero_grad is
os._exit(3)
"#;
    let (code, events, stderr, _d) = run(script, None, true);
    assert_eq!(code, 3, "{stderr}");
    assert!(of(&events, "step1_begin").is_empty());
    let zero = of(&events, "zero_grad");
    let forwards = of(&events, "first_forward");
    assert_eq!((zero.len(), forwards.len()), (1, 2), "{events:?}");
    assert_eq!(forwards[0]["after_zero_grad"], false);
    assert_eq!(forwards[1]["after_zero_grad"], true);
    assert!(forwards[1]["t"].as_u64() > zero[0]["t"].as_u64());
    assert!(zero[0]["opt"] == 0 && forwards[1]["opt"] == 0);
}

#[test]
fn nothing_more_is_written_once_step_one_is_placed() {
    let (code, events, stderr, _d) = run(TRAIN, None, true);
    assert_eq!(code, 0, "{stderr}");
    // The prewarm's forward, its zero_grad, step 1's zero_grad and forward.
    assert_eq!(of(&events, "zero_grad").len(), 2, "{events:?}");
    assert_eq!(of(&events, "first_forward").len(), 2, "{events:?}");
}

#[test]
fn silent_and_harmless_without_torch_or_without_the_doctor() {
    let (code, events, stderr, dir) = run("print('plain python')", None, true);
    assert_eq!(code, 0, "{stderr}");
    assert!(events.is_empty());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no files for processes without torch"
    );
    let (code, events, stderr, _d) = run(TRAIN, None, false);
    assert_eq!(code, 0, "{stderr}");
    assert!(events.is_empty());
    let (code, _, stderr, _d) = run("raise SystemExit(5)", None, true);
    assert_eq!(code, 5, "{stderr}");
}

#[test]
fn the_users_own_sitecustomize_still_runs() {
    let user = tempfile::tempdir().unwrap();
    std::fs::write(
        user.path().join("sitecustomize.py"),
        "import os\nos.environ['USER_SITE_RAN'] = 'yes'\nMARK = 42\n",
    )
    .unwrap();
    let script =
        "import os, sitecustomize\nprint(os.environ.get('USER_SITE_RAN'), sitecustomize.MARK)";
    let py = python().unwrap();
    let pp = std::env::join_paths([shim_dir(), user.path().to_path_buf()]).unwrap();
    let out = Command::new(py)
        .arg("-c")
        .arg(script)
        .env("PYTHONPATH", pp)
        .env("PREWARM_DOCTOR_DIR", user.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "yes 42",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = run; // keep helper used when python is present
}

#[test]
fn nvtx_ranges_matching_the_step_marker_are_recorded() {
    let script = r#"
import torch
for i in range(2):
    torch.cuda.nvtx.range_push("train_step")
    torch.cuda.nvtx.range_push("forward")
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()
"#;
    let (code, events, out, _d) = run_env(
        script,
        None,
        true,
        &[("PREWARM_DOCTOR_STEP_MARKER", "^train_step$")],
    );
    assert_eq!(code, 0, "{out}");
    let markers = of(&events, "marker");
    assert_eq!(markers.len(), 2, "only the matching ranges: {:?}", events);
    assert!(
        markers
            .iter()
            .all(|m| m["name"] == "train_step" && m["t1"].as_u64() > m["t0"].as_u64())
    );
}

#[test]
fn process_groups_and_their_communicators_are_named_after_torch() {
    // A clip group whose communicator appears in step 1 (after its first
    // all-reduce), a mesh-dimension group warmed at setup, and a group never
    // used; destroy_process_group snapshots once more before torch forgets them.
    let script = r#"
import torch, torch.distributed as dist
dist.init_process_group("nccl")
mesh_ep = dist.new_group([0, 1], group_desc="mesh_ep")
clip = dist.new_group([0, 1], group_desc="clip_expert")
unused = dist.new_group([1])
mesh_ep._set_comm(0x4a654200)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._children = [torch.nn.Module()]
net = Net()
opt = torch.optim.Optimizer(net.parameters())
for step in range(3):
    opt.zero_grad()
    net(1)
    if step == 0:
        clip._set_comm(0x77e0)
    opt.step()
dist.destroy_process_group()
print("done")
"#;
    let (code, events, out, _d) = run(script, None, true);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("done"), "{out}");
    let groups = of(&events, "comm_group");
    let find = |desc: &str, comm: serde_json::Value| {
        groups
            .iter()
            .filter(|g| g["desc"] == desc && g["comm"] == comm)
            .collect::<Vec<_>>()
    };
    // Seen once with its communicator, at the first step's end.
    let ep = find("mesh_ep", "0x4a654200".into());
    assert_eq!(ep.len(), 1, "{groups:?}");
    assert_eq!(ep[0]["step"], 1);
    assert_eq!(ep[0]["ranks"], serde_json::json!([0, 1]));
    // The clip group's communicator is written when it appears, once.
    let clip = find("clip_expert", "0x77e0".into());
    assert_eq!(clip.len(), 1, "{groups:?}");
    assert_eq!(clip[0]["step"], 1);
    // A group without a communicator is written once, with none.
    let unused: Vec<_> = groups
        .iter()
        .filter(|g| g["ranks"] == serde_json::json!([1]))
        .collect();
    assert_eq!(unused.len(), 1, "{groups:?}");
    assert!(unused[0]["comm"].is_null() && unused[0]["desc"] == "undefined");
}

/// Raises through Triton's autotuner (a kernel's out-of-memory inside
/// `_bench`, then inside `run`), `Optimizer.zero_grad`,
/// `init_process_group` and `destroy_process_group`, printing
/// the formatted tracebacks, the stack depth and `inspect.stack()` inside the
/// kernel: what the program itself can see of its stack.
const RAISE_THROUGH_HOOKS: &str = r#"
import inspect, traceback
import torch
import triton
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

seen = []
def kernel(n, config, oom=False, **kw):
    stack = inspect.stack(0)
    seen.append((len(stack), [(f.function, f.lineno) for f in stack]))
    if oom and config.block == 64:
        raise RuntimeError("Triton Error [CUDA]: out of memory")
    return n * config.block

tuner = Autotuner(JITFunction(kernel), [Config(32), Config(64)], key=[0])
print(tuner.run(4), tuner.run(4))
for call in (lambda: tuner.run(8, oom=True), lambda: tuner.run(4, oom=True)):
    try:
        call()
    except RuntimeError:
        print(traceback.format_exc())
opt = torch.optim.Optimizer([])
try:
    opt.zero_grad(set_to_none="raise")
except ValueError:
    print(traceback.format_exc())
import torch.distributed as dist
try:
    dist.init_process_group(fail=True)
except RuntimeError:
    print(traceback.format_exc())
# A communicator that appears after the first steps: written as torch forgets it.
dist.init_process_group("nccl")
dist.new_group([0], group_desc="late")._set_comm(0x5e)
try:
    dist.destroy_process_group(fail=True)
except RuntimeError:
    print(traceback.format_exc())
for depth, frames in seen:
    print(depth, frames)
"#;

/// Runs [`RAISE_THROUGH_HOOKS`] with `py`: without the shim, or with it
/// (and the doctor's folder); returns stdout and the shim's events.
fn raise_through(py: &Path, shim: bool, env: &[(&str, &str)]) -> (String, Vec<serde_json::Value>) {
    let dir = tempfile::tempdir().unwrap();
    let fakes = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/fake_triton"),
        fake_torch(),
    ];
    let path: Vec<PathBuf> = shim.then(shim_dir).into_iter().chain(fakes).collect();
    let mut cmd = Command::new(py);
    cmd.args(["-c", RAISE_THROUGH_HOOKS])
        .env("PYTHONPATH", std::env::join_paths(path).unwrap())
        .env("RANK", "0")
        .envs(env.iter().copied());
    if shim {
        cmd.env("PREWARM_DOCTOR_DIR", dir.path());
    } else {
        cmd.env_remove("PREWARM_DOCTOR_DIR");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8(out.stdout).unwrap(),
        shim_events(dir.path()),
    )
}

#[test]
fn no_frame_of_ours_in_the_programs_tracebacks_or_stack_with_sys_monitoring() {
    let Some(py) = python_312("tracebacks and stacks under sys.monitoring") else {
        return;
    };
    let (plain, none) = raise_through(&py, false, &[]);
    let (shimmed, events) = raise_through(&py, true, &[]);
    assert!(none.is_empty());
    assert!(plain.contains("out of memory") && plain.contains("zero_grad was asked to fail"));
    assert!(plain.contains("NCCL timed out") && plain.contains("destroy failed"));
    // Byte for byte: tracebacks, stack depths and inspect.stack() frames.
    assert_eq!(shimmed, plain, "{}", py.display());
    // ... and the hooks did observe everything.
    let autotunes = of(&events, "autotune");
    assert_eq!(autotunes.len(), 1, "{events:?}");
    assert_eq!(autotunes[0]["benchmarked"], 2);
    assert_eq!(autotunes[0]["chosen"], "BLOCK: 32");
    let configs = of(&events, "autotune_config");
    // 2 for key 4; for key 8, BLOCK 32 then BLOCK 64 raising (no timing).
    assert_eq!(configs.len(), 4, "{configs:?}");
    assert_eq!(configs[3]["config"], "BLOCK: 64");
    assert!(configs[3]["ms"].is_null() && configs[2]["ms"] == 32.0);
    assert_eq!(of(&events, "compile").len(), 2);
    assert_every_compile_began(&events);
    assert_eq!(of(&events, "zero_grad").len(), 1);
    assert_late_group_named(&events);
    // The same program with the wrappers (the fallback before 3.12) does
    // show our frames: the comparison above can fail.
    let (wrapped, _) = raise_through(&py, true, &[("PREWARM_DOCTOR_SHIM_MONITORING", "0")]);
    assert_ne!(wrapped, plain);
    assert!(wrapped.contains("prewarm_doctor_triton.py"));
}

#[test]
fn the_wrappers_before_python_3_12_record_the_same_events() {
    let py = PathBuf::from(python().expect("python3 is needed for the shim tests"));
    let (_, events) = raise_through(&py, true, &[("PREWARM_DOCTOR_SHIM_MONITORING", "0")]);
    assert_eq!(of(&events, "autotune").len(), 1, "{events:?}");
    assert_eq!(of(&events, "autotune_config").len(), 4);
    assert_eq!(of(&events, "compile").len(), 2);
    assert_every_compile_began(&events);
    assert_eq!(of(&events, "zero_grad").len(), 1);
    assert_late_group_named(&events);
}

/// Each `compile` line has its `compile_begin`, written before it with the
/// same kernel and start.
fn assert_every_compile_began(events: &[serde_json::Value]) {
    let begun = of(events, "compile_begin");
    let ended = of(events, "compile");
    assert_eq!(begun.len(), ended.len(), "{events:?}");
    for (b, e) in begun.iter().zip(&ended) {
        assert_eq!(
            (&b["kernel"], &b["t0"]),
            (&e["kernel"], &e["t0"]),
            "{events:?}"
        );
    }
}

/// A process that ends inside a compile (here `os._exit` while the fake
/// compile stores its binary) leaves the compile's start and no end: what
/// the account runs to the process's end.
const EXIT_INSIDE_A_COMPILE: &str = r#"
import os
import triton
from triton.runtime.jit import JITFunction

class Key:
    def __hash__(self):
        os._exit(0)

def rowwise_mix(*args, **kwargs):
    return 0

JITFunction(rowwise_mix)._do_compile(Key())
"#;

#[test]
fn a_process_ending_inside_a_compile_leaves_its_start() {
    let wrappers = PathBuf::from(python().expect("python3 is needed for the shim tests"));
    let pythons = [
        python_312("a compile under sys.monitoring").map(|p| ("1", p)),
        Some(("0", wrappers)),
    ];
    for (monitoring, py) in pythons.into_iter().flatten() {
        let dir = tempfile::tempdir().unwrap();
        let path = [
            shim_dir(),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/fake_triton"),
            fake_torch(),
        ];
        common::stdout_of_success(
            Command::new(&py)
                .args(["-c", EXIT_INSIDE_A_COMPILE])
                .env("PYTHONPATH", std::env::join_paths(path).unwrap())
                .env("PREWARM_DOCTOR_DIR", dir.path())
                .env("PREWARM_DOCTOR_SHIM_MONITORING", monitoring)
                .env("RANK", "0"),
        );
        let events = shim_events(dir.path());
        let begun = of(&events, "compile_begin");
        assert_eq!(begun.len(), 1, "monitoring={monitoring}: {events:?}");
        assert_eq!(begun[0]["kernel"], "rowwise_mix");
        assert!(of(&events, "compile").is_empty(), "{events:?}");
    }
}

/// The group whose communicator appeared after the first steps was written
/// by the snapshot at `destroy_process_group`, with no step.
fn assert_late_group_named(events: &[serde_json::Value]) {
    let late: Vec<_> = of(events, "comm_group")
        .into_iter()
        .filter(|g| g["desc"] == "late")
        .collect();
    assert_eq!(late.len(), 1, "{events:?}");
    assert_eq!(late[0]["comm"], "0x5e");
    assert!(late[0]["step"].is_null());
}

/// Each line's `own_ns`, by the line's time.
fn own_time(events: &[serde_json::Value]) -> Vec<(u64, u64)> {
    let mut samples: Vec<(u64, u64)> = events
        .iter()
        .map(|e| {
            let t = e["t"].as_u64().expect("every line has its time");
            let own = e["own_ns"].as_u64();
            (
                t,
                own.unwrap_or_else(|| panic!("a line without own_ns: {e}")),
            )
        })
        .collect();
    samples.sort();
    samples
}

fn own_at(events: &[serde_json::Value], ev: &str, i: usize) -> u64 {
    of(events, ev)[i]["own_ns"].as_u64().unwrap()
}

#[test]
fn the_shims_own_time_counts_its_hooks_and_not_the_training() {
    // The step-end hook's pool query takes 50 ms (a slow stand-in torch); the
    // training itself sleeps 150 ms in each step.
    let train = r#"
import time, torch
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
for step in range(3):
    opt.zero_grad()
    net(1)
    time.sleep(0.15)
    opt.step()
"#;
    let env = [("FAKE_TORCH_CUDA", "1"), ("FAKE_TORCH_SLOW_STATS_MS", "50")];
    let (code, events, out, _d) = run_env(train, None, true, &env);
    assert_eq!(code, 0, "{out}");
    // Every line says the shim's time so far, never less than before.
    let samples = own_time(&events);
    assert!(
        samples.windows(2).all(|w| w[0].1 <= w[1].1),
        "own_ns falls back in time: {samples:?}"
    );
    let ms = |ns: u64| ns as f64 / 1e6;
    let step1 = ms(own_at(&events, "step_end", 0) - own_at(&events, "step1_begin", 0));
    let step2 = ms(own_at(&events, "step_end", 1) - own_at(&events, "step_end", 0));
    // Step 1 holds its step-end hook (the 50 ms query, which the training's
    // optimizer.step() waited for) and not the training's 150 ms.
    assert!(
        (50.0..150.0).contains(&step1),
        "step 1: {step1} ms of the shim's"
    );
    assert!(
        (50.0..150.0).contains(&step2),
        "step 2: {step2} ms of the shim's"
    );
    // A step's end is written after its hook's work: a step holds its own
    // query, whose time the shim's figure says is inside it.
    let t_end = of(&events, "step_end")[0]["t"].as_u64().unwrap();
    let t_begin = of(&events, "step1_begin")[0]["t"].as_u64().unwrap();
    assert!(ms(t_end - t_begin) >= 150.0 + 50.0);
    // At exit, the same time by hook: every nanosecond in exactly one hook
    // (the parts add up to the total), the step-end hook's three queries
    // the costliest.
    let own = of(&events, "shim_own");
    assert_eq!(own.len(), 1, "one line, at exit: {events:?}");
    let by = own[0]["by"].as_object().expect("by hook");
    let parts: u64 = by.values().map(|v| v[1].as_u64().unwrap()).sum();
    assert_eq!(parts, own[0]["own_ns"].as_u64().unwrap(), "{by:?}");
    let post = &by["_StepTracker.post_step"];
    assert_eq!(post[0], 3, "{by:?}");
    assert!(ms(post[1].as_u64().unwrap()) >= 150.0, "{by:?}");
    let costliest = by
        .iter()
        .max_by_key(|(_, v)| v[1].as_u64().unwrap())
        .unwrap();
    assert_eq!(costliest.0, "_StepTracker.post_step", "{by:?}");
    // ... and its line writes: every line before this one, each timed.
    let writes = own[0]["writes"].as_array().expect("writes");
    let before = events.iter().position(|e| e["ev"] == "shim_own").unwrap();
    assert_eq!(writes[0].as_u64(), Some(before as u64), "{events:?}");
    let write_ns = writes[1].as_u64().unwrap();
    assert!(
        write_ns > 0 && write_ns < own[0]["own_ns"].as_u64().unwrap(),
        "{writes:?}"
    );
}

/// Triton's autotune with each candidate's kernel taking 100 ms: the
/// autotune's own time, not the shim's.
const SLOW_AUTOTUNE: &str = r#"
import time
import triton
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

def kernel(n, config, **kw):
    time.sleep(0.1)
    return n * config.block

tuner = Autotuner(JITFunction(kernel), [Config(32), Config(64)], key=[0])
print(tuner.run(4))
"#;

fn slow_autotune(py: &Path, env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    run_with_fakes(py, SLOW_AUTOTUNE, env)
}

/// Runs `script` with `py` under the shim, the stand-in torch and Triton on
/// its path; asserts it succeeded with nothing on stderr; the shim's events.
fn run_with_fakes(py: &Path, script: &str, env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let path = [
        shim_dir(),
        fake_torch(),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/shim/fake_triton"),
    ];
    let out = Command::new(py)
        .args(["-c", script])
        .env("PYTHONPATH", std::env::join_paths(path).unwrap())
        .env("PREWARM_DOCTOR_DIR", dir.path())
        .env("RANK", "0")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    shim_events(dir.path())
}

#[test]
fn an_observed_call_counts_only_the_shims_callbacks_not_the_call() {
    // Observed (sys.monitoring, Python >= 3.12) and wrapped (the fallback):
    // either way the 3 x 100 ms of kernels inside the autotune are not the
    // time of the hooks around them (a few milliseconds even on a loaded
    // machine; counting the kernels would make it the whole). The hooks'
    // own figures are read, not the process's total, whose imports and
    // installation alone took 200 ms once on a machine loaded by a build.
    let wrapped = PathBuf::from(python().expect("python3 is needed for the shim tests"));
    let mut cases = vec![(wrapped, vec![("PREWARM_DOCTOR_SHIM_MONITORING", "0")])];
    if let Some(py) = python_312("the shim's own time of an observed call") {
        cases.push((py, vec![]));
    }
    for (py, env) in cases {
        let events = slow_autotune(&py, &env);
        let autotune = of(&events, "autotune");
        assert_eq!(autotune.len(), 1, "{events:?}");
        let took = autotune[0]["t1"].as_u64().unwrap() - autotune[0]["t0"].as_u64().unwrap();
        assert!(took >= 200_000_000, "{took} ns");
        // By hook, under one name whichever way it was observed: the run
        // and the two candidates' benchmarks.
        let by = &of(&events, "shim_own")[0]["by"];
        assert_eq!(by["Autotuner.run"][0], 1, "{}: {by}", py.display());
        assert_eq!(by["Autotuner._bench"][0], 2, "{}: {by}", py.display());
        let hooks: u64 = ["Autotuner.run", "Autotuner._bench"]
            .iter()
            .map(|h| by[h][1].as_u64().unwrap())
            .sum();
        assert!(
            hooks < took / 2,
            "{}: the hooks' own time {hooks} ns holds the kernels' {took} ns",
            py.display()
        );
        // The process's own time holds the hooks', never less.
        assert!(own_time(&events).last().unwrap().1 >= hooks);
    }
}

/// With [`NESTED_TUNERS`] and [`TUNED_TRAINING`]: a training of 12 steps
/// launching an autotuned kernel 5 times a step, whose kernel launches a
/// second autotuned kernel (the same `run` code object, one inside the
/// other; the inner one tuned inside the outer's first candidate, launched
/// tuned in its second). This part: the imports and the inner kernel.
const TUNED_LAUNCHES: &str = r#"
import torch
import triton
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

def kernel(n, config, **kw):
    return n * config.block
"#;

/// An autotuned `outer_kernel` whose launch launches the autotuned `inner`
/// (of `kernel`, defined before it).
const NESTED_TUNERS: &str = r#"
inner = Autotuner(JITFunction(kernel), [Config(8), Config(16)], key=[0])

class Outer:
    __name__ = "outer_kernel"
    def __init__(self):
        self.fn = self
    def run(self, n, config=None, **kw):
        return inner.run(n)

outer = Autotuner(Outer(), [Config(32), Config(64)], key=[0])
"#;

/// The training of [`TUNED_LAUNCHES`], after [`NESTED_TUNERS`].
const TUNED_TRAINING: &str = r#"
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
for step in range(12):
    opt.zero_grad()
    net(1)
    for _ in range(5):
        outer.run(4)
    opt.step()
"#;

fn tuned_launches(py: &Path, env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    let script = format!("{TUNED_LAUNCHES}{NESTED_TUNERS}{TUNED_TRAINING}");
    run_with_fakes(py, &script, env)
}

/// Both autotunes, the inner one inside the outer one, each with its two
/// candidates: the outer's end is its own frame's, not the inner `run`'s
/// that returned first.
fn assert_nested_autotunes(py: &Path, events: &[serde_json::Value]) {
    let tunes = of(events, "autotune");
    assert_eq!(tunes.len(), 2, "{}: {events:?}", py.display());
    let (inner, outer) = (tunes[0], tunes[1]);
    assert_eq!(inner["kernel"], "kernel");
    assert_eq!(outer["kernel"], "outer_kernel");
    assert_eq!(
        (inner["benchmarked"].as_u64(), outer["benchmarked"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(outer["chosen"], "BLOCK: 32");
    let t = |e: &serde_json::Value, k: &str| e[k].as_u64().unwrap();
    assert!(t(outer, "t0") <= t(inner, "t0") && t(inner, "t1") <= t(outer, "t1"));
    let ends: Vec<u64> = of(events, "step_end")
        .iter()
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    assert_eq!(ends, (1..=12).collect::<Vec<_>>());
}

#[test]
fn a_tuned_kernels_launches_and_the_steady_steps_call_nothing_of_ours() {
    let wrapped = PathBuf::from(python().expect("python3 is needed for the shim tests"));
    let events = tuned_launches(&wrapped, &[("PREWARM_DOCTOR_SHIM_MONITORING", "0")]);
    assert_nested_autotunes(&wrapped, &events);
    let Some(py) = python_312("a tuned kernel's launches under sys.monitoring") else {
        return;
    };
    let events = tuned_launches(&py, &[]);
    assert_nested_autotunes(&py, &events);
    // 61 launches of the outer kernel and 62 of the inner one, but only
    // their two tunings called the shim; zero_grad() and the step's
    // pre-hook only until step 1 was placed; the step's end every step.
    let by = &of(&events, "shim_own")[0]["by"];
    let calls = |name: &str| by[name][0].as_u64();
    assert_eq!(calls("Autotuner.run"), Some(2), "{by}");
    assert_eq!(calls("Autotuner.prune_configs"), Some(2), "{by}");
    assert_eq!(calls("Autotuner._bench"), Some(4), "{by}");
    assert_eq!(calls("Optimizer.zero_grad"), Some(1), "{by}");
    assert_eq!(calls("_StepTracker.pre_step"), Some(1), "{by}");
    assert_eq!(calls("_StepTracker.post_step"), Some(12), "{by}");
    // Every step's end says the shim's time so far, never less than before.
    let own: Vec<u64> = of(&events, "step_end")
        .iter()
        .map(|e| e["own_ns"].as_u64().unwrap())
        .collect();
    assert!(own.windows(2).all(|w| w[0] <= w[1]), "{own:?}");
}

/// A stand-in for the probe's calls the shim makes, writing each call as a
/// line into `$PROBE_CALLS_LOG`.
const PROBE_CALLS_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static void note(const char *what, long n) {
    FILE *f = fopen(getenv("PROBE_CALLS_LOG"), "a");
    if (f) { fprintf(f, "%s %ld\n", what, n); fclose(f); }
}
void prewarm_probe_step_ended(unsigned step) { note("step_ended", step); }
int prewarm_probe_set_kernel_records(int on) { note("kernel_records", on); return 1; }
int prewarm_probe_pause_kernel_records(int paused) { note("pause", paused); return 1; }
"#;

/// Builds [`PROBE_CALLS_C`] into `dir`: the library's path.
fn probe_calls_library(dir: &Path) -> PathBuf {
    let source = dir.join("probe_calls.c");
    let library = dir.join("libprobe_calls.so");
    std::fs::write(&source, PROBE_CALLS_C).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("this test needs a C compiler: `{cc}`: {e}"));
    assert!(built.success());
    library
}

/// The start of the benchmarked scripts: the stand-in probe loaded, and a
/// kernel writing each launch into the probe's log.
const LOGGED_KERNEL: &str = r#"
import ctypes, os
ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH'])
import torch
from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.jit import JITFunction

def kernel(n, config, **kw):
    with open(os.environ["PROBE_CALLS_LOG"], "a") as f:
        f.write(f"launch {config.block}\n")
    return n * config.block
"#;

/// Two candidates benchmarked as Triton's do_bench does (1 + 5 calls, then
/// 20 repetitions).
const BENCHED: &str = r#"
tuner = Autotuner(JITFunction(kernel), [Config(32), Config(64)], key=[0])
tuner.run(4)
"#;

/// An autotuned kernel whose candidates launch a second autotuned kernel,
/// tuned inside the outer one's first candidate call (as in
/// [`TUNED_LAUNCHES`]), benchmarked as [`BENCHED`] is.
const NESTED_BENCHED: &str = r#"
outer.run(4)
"#;

/// The probe's log of [`BENCHED`] run by `py` with `env`, launches counted
/// in runs: "launch 32 x6", "pause 1", ...
fn benched(py: &Path, env: &[(&str, &str)]) -> Vec<String> {
    benched_script(py, BENCHED, env)
}

/// As [`benched`], for `script` after [`LOGGED_KERNEL`].
fn benched_script(py: &Path, script: &str, env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let library = probe_calls_library(dir.path());
    let log = dir.path().join("calls.log");
    let mut all = vec![
        ("CUDA_INJECTION64_PATH", library.to_str().unwrap()),
        ("PROBE_CALLS_LOG", log.to_str().unwrap()),
        ("FAKE_TRITON_BENCH_REPEATS", "20"),
    ];
    all.extend(env.iter().copied());
    run_with_fakes(py, &format!("{LOGGED_KERNEL}{script}"), &all);
    let mut runs: Vec<(String, usize)> = Vec::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        match runs.last_mut() {
            Some((last, n)) if last == line => *n += 1,
            _ => runs.push((line.to_string(), 1)),
        }
    }
    runs.into_iter()
        .map(|(l, n)| if n > 1 { format!("{l} x{n}") } else { l })
        .collect()
}

#[test]
fn kernel_records_pause_for_a_candidates_repeated_launches_only() {
    // Observed: each candidate's first six launches recorded, its 20
    // repetitions paused, records back on when its benchmark returns; the
    // tuned launch after it recorded.
    let Some(py) = python_312("kernel records paused in a candidate's repetitions") else {
        return;
    };
    assert_eq!(
        benched(&py, &[]),
        [
            "launch 32 x6",
            "pause 1",
            "launch 32 x20",
            "pause 0",
            "launch 64 x6",
            "pause 1",
            "launch 64 x20",
            "pause 0",
            "launch 32"
        ]
    );
    // Asked to keep them (PREWARM_DOCTOR_BENCH_RECORDS=1), or wrapped
    // (no sys.monitoring): never paused.
    let kept = ["launch 32 x26", "launch 64 x26", "launch 32"];
    assert_eq!(benched(&py, &[("PREWARM_DOCTOR_BENCH_RECORDS", "1")]), kept);
    let wrapped = PathBuf::from(python().expect("python3 is needed for the shim tests"));
    assert_eq!(
        benched(&wrapped, &[("PREWARM_DOCTOR_SHIM_MONITORING", "0")]),
        kept
    );
}

#[test]
fn an_autotune_tuned_inside_a_candidate_keeps_its_records() {
    // The inner kernel is tuned in the outer candidate's first call: all of
    // its candidates' launches recorded (26 each, the same kernel_call code
    // but not the counted benchmark's calls); the outer candidate's calls
    // 2..6 launch the tuned inner kernel, then pause from the seventh.
    let Some(py) = python_312("kernel records kept through a nested autotune") else {
        return;
    };
    assert_eq!(
        benched_script(&py, &format!("{NESTED_TUNERS}{NESTED_BENCHED}"), &[]),
        [
            "launch 8 x26",
            "launch 16 x26",
            "launch 8 x6",
            "pause 1",
            "launch 8 x20",
            "pause 0",
            "launch 8 x6",
            "pause 1",
            "launch 8 x20",
            "pause 0",
            "launch 8"
        ]
    );
}

#[test]
fn the_probe_hears_of_the_first_steps_ends_and_of_kernel_records_off() {
    let dir = tempfile::tempdir().unwrap();
    let library = probe_calls_library(dir.path());
    let log = dir.path().join("calls.log");
    // The probe is loaded by CUDA before the training runs; here the
    // training loads the stand-in itself, at its start.
    let script = format!(
        "import ctypes, os\nctypes.CDLL(os.environ['CUDA_INJECTION64_PATH'])\n{}",
        TRAIN.replace("range(3)", "range(7)")
    );
    let (code, events, text, _d) = run_env(
        &script,
        None,
        true,
        &[
            ("CUDA_INJECTION64_PATH", library.to_str().unwrap()),
            ("PROBE_CALLS_LOG", log.to_str().unwrap()),
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(of(&events, "step_end").len(), 7);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls,
        "step_ended 1\nstep_ended 2\nstep_ended 3\nkernel_records 0\nstep_ended 4\nstep_ended 5\n"
    );
}

/// The shim names its files as crates/events/src/names.rs does for the probe
/// and the loader: one definition of the per-process file names, and the
/// shim's spelling of it checked against it (with a RANK and without).
#[test]
fn the_shims_file_names_are_the_run_folders() {
    use prewarm_events::names::*;
    let py = python().expect("python3 is needed for the shim tests");
    for rank in [Some("3"), None] {
        let mut cmd = Command::new(py);
        cmd.arg("-c")
            .arg(
                "import os, prewarm_doctor_events as e\n\
                 print(os.getpid(), e.process_stem(), e.SHIM_SUFFIX, e.STEPS_SUFFIX, \
                 e.PRESCRIPTION_ERRORS_PREFIX, e.PRESCRIPTION_ERRORS_SUFFIX)",
            )
            .env("PYTHONPATH", shim_dir())
            .env_remove("RANK");
        if let Some(r) = rank {
            cmd.env("RANK", r);
        }
        let out = cmd.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let f: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(f.len(), 6, "{text}{}", String::from_utf8_lossy(&out.stderr));
        let pid: u32 = f[0].parse().unwrap();
        assert_eq!(f[1], process_stem(rank, pid));
        assert_eq!(
            (f[2], f[3], f[4], f[5]),
            (
                SHIM_SUFFIX,
                STEPS_SUFFIX,
                PRESCRIPTION_ERRORS_PREFIX,
                PRESCRIPTION_ERRORS_SUFFIX
            )
        );
        let shim_file = format!("{}{}", f[1], f[2]);
        assert_eq!(
            parse_process_file(&shim_file),
            Some((rank.map(|r| r.parse().unwrap()), pid, true))
        );
    }
}
