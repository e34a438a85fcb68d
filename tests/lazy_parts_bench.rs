//! benches/gpu_lazy_parts.py, the bench that times step 1's lazy parts one
//! by one under each of the doctor's modes, driven with the real
//! `prewarm-doctor` (its `run` flags must be the binary's) and a stand-in
//! worker interpreter: each process starts from its own base time (whole
//! processes differ), and the first communicator takes 30 ms more when the
//! probe is injected with its kernel records on. The summary must pair
//! within rounds and find exactly that, and nothing where nothing differs.

mod common;

use std::path::Path;
use std::process::Command;

/// The stand-in interpreter: `python3 <bench> --worker` prints the parts.
/// The base differs from round to round (a process counter over the round's
/// number of modes), as whole processes drift, and holds within a round, so
/// only a pairing within rounds reads the 30 ms exactly.
const WORKER: &str = r#"#!/usr/bin/env python3
import json, os, sys
counter = os.path.join(os.environ["STANDIN_DIR"], "count")
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
with open(os.path.join(os.environ["STANDIN_DIR"], "argv"), "a") as f:
    f.write(" ".join(sys.argv[1:]) + "\n")
base = 100.0 + 50.0 * (n // int(os.environ["STANDIN_PER_ROUND"]))
parts = {p: base for p in ("context", "first_kernels", "alloc_segments", "cublas",
                           "nccl_first", "nccl_further", "nccl_gather", "nccl_steady",
                           "launches")}
probe = os.environ.get("CUDA_INJECTION64_PATH")
if probe and os.environ.get("PREWARM_DOCTOR_KERNEL_RECORDS") != "0":
    parts["nccl_first"] += 30.0
if os.environ.get("NCCL_DEBUG") == "INFO":
    parts["nccl_further"] += 2.0
if os.environ.get("PREWARM_DOCTOR_DETACH_AFTER_WATCH") == "1":
    parts["cublas"] += 7.0
if os.environ.get("PREWARM_DOCTOR_DETACH_AFTER_WATCH") == "bare":
    parts["cublas"] += 11.0
if os.environ.get("PREWARM_DOCTOR_DETACH_AFTER_WATCH") == "1" and os.environ.get("STANDIN_DETACH_DIES"):
    sys.stderr.write("Segmentation fault\n")
    sys.exit(139)
print("RESULT " + json.dumps(parts), flush=True)
"#;

fn bench(dir: &Path, rounds: &str, modes: &str) -> Command {
    common::write_executable(dir, "python", WORKER);
    let mut c = Command::new("python3");
    c.arg(common::repo("benches/gpu_lazy_parts.py"))
        .arg(rounds)
        .env("BIN", assert_cmd::cargo::cargo_bin("prewarm-doctor"))
        .env("LAZY_PARTS_PYTHON", dir.join("python"))
        .env("LAZY_PARTS_MODES", modes)
        .env("LAZY_PARTS_ROWS", dir.join("rows.txt"))
        .env("LAZY_PARTS_WARMUP", "0")
        .env("STANDIN_DIR", dir)
        .env(
            "STANDIN_PER_ROUND",
            (1 + modes.split_whitespace().count()).to_string(),
        );
    c
}

/// The bench's summary of stored rows (`--summary FILE...`).
fn summary_of(files: &[&Path]) -> String {
    common::stdout_of_success(
        Command::new("python3")
            .arg(common::repo("benches/gpu_lazy_parts.py"))
            .arg("--summary")
            .args(files),
    )
}

fn line<'a>(out: &'a str, start: &str, has: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start) && l.contains(has))
        .unwrap_or_else(|| panic!("no {start} line with {has:?} in\n{out}"))
}

/// The probe's 30 ms on the first communicator, found in every round and
/// in no other part; the doctor without its kernel records or its probe,
/// and the plain run with NCCL's log, differ where the stand-in made them
/// differ and nowhere else.
#[test]
fn a_part_the_probe_slows_is_found_within_rounds_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(&mut bench(
        dir.path(),
        "5",
        "doctor no-kernels no-probe nccl-log",
    ));
    let paired = line(&out, "LAZY_PART_PAIRED", "mode=doctor part=nccl_first ");
    assert!(
        paired.contains(
            " rounds=5 added_ms=30.00 added_ms_90=30.00..30.00 coverage=0.938 slower=5/5 "
        ),
        "{paired}"
    );
    for (mode, part) in [
        ("doctor", "cublas"),
        ("doctor", "nccl_steady"),
        ("no-kernels", "nccl_first"),
        ("no-probe", "nccl_first"),
        ("nccl-log", "nccl_first"),
    ] {
        let l = line(
            &out,
            "LAZY_PART_PAIRED",
            &format!("mode={mode} part={part} "),
        );
        assert!(l.contains(" added_ms=0.00 added_ms_90=0.00..0.00 "), "{l}");
    }
    // The doctor turns NCCL's INFO log on, and so does `nccl-log`.
    for mode in ["doctor", "nccl-log"] {
        let l = line(
            &out,
            "LAZY_PART_PAIRED",
            &format!("mode={mode} part=nccl_further "),
        );
        assert!(l.contains(" added_ms=2.00 "), "{l}");
    }
    // Unpaired, the rounds' drift: 50 ms a round.
    let plain = line(&out, "LAZY_PART", "mode=plain part=context ");
    assert!(
        plain.contains(" runs=5 median_ms=200.00 range_ms=100.00..300.00"),
        "{plain}"
    );
    // Every process ran the worker, under the doctor as `run -- python3 <bench> --worker`.
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    assert_eq!(argv.lines().count(), 25, "{argv}");
    assert!(
        argv.lines()
            .all(|l| l.ends_with("gpu_lazy_parts.py --worker")),
        "{argv}"
    );
}

/// Stored rows of two calls pool (a call's round 1 is not another's) and
/// give the summary the run printed.
#[test]
fn stored_rows_of_two_calls_pool_into_one_summary() {
    let one = tempfile::tempdir().unwrap();
    let two = tempfile::tempdir().unwrap();
    common::stdout_of_success(&mut bench(one.path(), "3", "doctor"));
    common::stdout_of_success(&mut bench(two.path(), "2", "doctor"));
    let out = summary_of(&[&one.path().join("rows.txt"), &two.path().join("rows.txt")]);
    let paired = line(&out, "LAZY_PART_PAIRED", "mode=doctor part=nccl_first ");
    assert!(paired.contains(" rounds=5 added_ms=30.00 "), "{paired}");
}

/// Every other mode runs the worker under the real binary, with its
/// switch as the binary reads it (a switch it refused would be a notice in
/// the run, not a failure: the rows are what this checks).
#[test]
fn every_mode_runs_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    let modes = "kernels-all no-nvml nvml-10ms no-shim detach detach-bare";
    let out = common::stdout_of_success(&mut bench(dir.path(), "1", modes));
    for mode in ["plain"].into_iter().chain(modes.split(' ')) {
        line(&out, "LAZYPARTS", &format!("mode={mode} round=1 "));
    }
    // Kernel records on every launch: still the probe with its records.
    let l = line(
        &out,
        "LAZY_PART_PAIRED",
        "mode=kernels-all part=nccl_first ",
    );
    assert!(l.contains(" added_ms=30.00 "), "{l}");
    // The detach switch reaches the training's process through the binary.
    let l = line(&out, "LAZY_PART_PAIRED", "mode=detach part=cublas ");
    assert!(l.contains(" added_ms=7.00 "), "{l}");
    let l = line(&out, "LAZY_PART_PAIRED", "mode=detach-bare part=cublas ");
    assert!(l.contains(" added_ms=11.00 "), "{l}");
}

/// The warm-up (the default: it fills Triton's compile cache for the
/// Triton parts) is one plain process before the rounds, said on its own
/// line and in no round: the rounds' rows and their pairing are as
/// without it.
#[test]
fn the_warm_up_process_runs_first_and_is_not_a_round() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = bench(dir.path(), "2", "doctor");
    // The stand-in's base moves with each process: one more before the
    // rounds shifts it, which the pairing within rounds does not see.
    c.env("LAZY_PARTS_WARMUP", "1");
    let out = common::stdout_of_success(&mut c);
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    assert_eq!(argv.lines().count(), 5, "{argv}");
    let first = out.lines().next().unwrap();
    assert_eq!(first, "WARMUP plain: done (not a round)", "{out}");
    let rows = std::fs::read_to_string(dir.path().join("rows.txt")).unwrap();
    assert_eq!(rows.lines().count(), 4, "{rows}");
    assert!(!rows.contains("warmup"), "{rows}");
    let paired = line(&out, "LAZY_PART_PAIRED", "mode=doctor part=nccl_first ");
    assert!(paired.contains(" rounds=2 added_ms=30.00 "), "{paired}");
}

/// A mode the bench does not know is refused before any run, naming it.
#[test]
fn an_unknown_mode_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let done = bench(dir.path(), "1", "doctor no-such").output().unwrap();
    assert!(!done.status.success());
    let err = String::from_utf8_lossy(&done.stderr);
    assert!(err.contains("unknown mode 'no-such'"), "{err}");
    assert!(!dir.path().join("count").exists());
}

fn h100_folder() -> std::path::PathBuf {
    common::repo("tests/fixtures/h200-overhead/2026-12-06-h100")
}

/// A GPU call's stored rows (`lazy-parts-call<N>.txt`) summarised: `lines`
/// LAZY_PART lines, exactly those its log printed (the log holds the
/// summary, then the bench's last lines again). The summary.
fn gpu_call_summary(call: u32, lines: usize) -> String {
    gpu_call_summary_in(&h100_folder(), call, lines)
}

/// [`gpu_call_summary`] of a call stored in another dated folder.
fn gpu_call_summary_in(folder: &Path, call: u32, lines: usize) -> String {
    let out = summary_of(&[&folder.join(format!("lazy-parts-call{call}.txt"))]);
    let printed = std::fs::read_to_string(folder.join(format!("summary-call{call}.txt"))).unwrap();
    let summary = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("LAZY_PART"))
            .map(str::to_string)
            .collect()
    };
    let ours = summary(&out);
    assert_eq!(ours.len(), lines);
    assert_eq!(ours, summary(&printed)[..lines]);
    out
}

/// The H100 call's stored rows (tests/fixtures/h200-overhead/2026-12-06-h100,
/// call 16) summarise to exactly what the call printed on the GPU, and rows
/// of a later bench with more parts pool with them: each part counts the
/// rounds that timed it.
#[test]
fn the_gpu_calls_rows_give_its_printed_summary_and_pool_with_newer_parts() {
    let rows = h100_folder().join("lazy-parts-call16.txt");
    gpu_call_summary(16, 9 * 6 + 9 * 5);

    let dir = tempfile::tempdir().unwrap();
    let newer = dir.path().join("newer.txt");
    let parts = r#"{"nccl_first": 300.0, "nccl_after_watch": 10.0, "queries_after_watch": 40.0}"#;
    let doctor = r#"{"nccl_first": 310.0, "nccl_after_watch": 10.5, "queries_after_watch": 42.0}"#;
    let text: String = (1..=3)
        .map(|r| {
            format!(
                "LAZYPARTS mode=plain round={r} {parts}\nLAZYPARTS mode=doctor round={r} {doctor}\n"
            )
        })
        .collect();
    std::fs::write(&newer, text).unwrap();
    let out = summary_of(&[&rows, &newer]);
    let first = line(&out, "LAZY_PART_PAIRED", "mode=doctor part=nccl_first ");
    assert!(first.contains(" rounds=15 "), "{first}");
    let after = line(
        &out,
        "LAZY_PART_PAIRED",
        "mode=doctor part=queries_after_watch ",
    );
    assert!(after.contains(" rounds=3 added_ms=2.00 "), "{after}");
    assert!(after.contains(" slower=3/3 "), "{after}");
    // A mode only the older call ran keeps its own 12 rounds.
    let kernels = line(
        &out,
        "LAZY_PART_PAIRED",
        "mode=no-kernels part=nccl_steady ",
    );
    assert!(kernels.contains(" rounds=12 added_ms=1.48 "), "{kernels}");
}

/// The LAZY_PART_PAIRED line of a mode and part in a summary.
fn paired<'a>(out: &'a str, mode: &str, part: &str) -> &'a str {
    line(
        out,
        "LAZY_PART_PAIRED",
        &format!("mode={mode} part={part} "),
    )
}

/// Call 21 (an H100, 23 rounds of plain, doctor and no-probe, each part
/// after the watch too): its stored rows give the summary it printed, and
/// that summary says what the footprint notes rest on — a launch after the
/// watch ended still slower under the probe, in most rounds, and not with
/// the probe left out.
#[test]
fn the_after_watch_call_rows_give_its_printed_summary() {
    let out = gpu_call_summary(21, 12 * 3 + 12 * 2);
    let doctor = paired(&out, "doctor", "launches_after_watch");
    assert!(doctor.contains(" rounds=23 "), "{doctor}");
    assert!(doctor.contains(" slower=20/23 "), "{doctor}");
    let without = paired(&out, "no-probe", "launches_after_watch");
    assert!(without.contains(" slower=11/23 "), "{without}");
}

/// Call 22's rows (four doctor modes, 17 rounds) give what the GPU printed:
/// under the default probe a launch after the watch is slower in every
/// round, with CUPTI detached at the watch's end in no more rounds than
/// chance, and the detach's own part (`watch_end`) slower in every round.
#[test]
fn the_detach_call_rows_give_its_printed_summary() {
    let out = gpu_call_summary(22, 13 * 5 + 13 * 4);
    let doctor = paired(&out, "doctor", "launches_after_watch");
    assert!(doctor.contains(" rounds=17 "), "{doctor}");
    assert!(doctor.contains(" slower=17/17 "), "{doctor}");
    let detach = paired(&out, "detach", "launches_after_watch");
    assert!(detach.contains(" slower=12/17 "), "{detach}");
    let watch_end = paired(&out, "detach", "watch_end");
    assert!(watch_end.contains(" slower=17/17 "), "{watch_end}");
}

/// Call 25's rows (five modes, 14 rounds) give what the GPU printed, and
/// what docs/footprint.md's ninth session reads from them: records
/// switched once more outside any callback (`end-cycle`) or once a burst
/// (`linger`) leave a launch after the watch as slow as the default does,
/// in 13 of 14 rounds; with CUPTI detached and not attached again
/// (`detach-bare`) it is slower in no more rounds than chance, while a
/// collective pair after the watch stays slower in every round — a cost
/// that is not CUPTI's — and is not with the doctor's probe and shim left
/// out (`no-probe`).
#[test]
fn the_bare_detach_call_rows_give_its_printed_summary() {
    let out = gpu_call_summary(25, 13 * 6 + 13 * 5);
    for mode in ["doctor", "end-cycle", "linger"] {
        let launches = paired(&out, mode, "launches_after_watch");
        assert!(launches.contains(" rounds=14 "), "{launches}");
        assert!(launches.contains(" slower=13/14 "), "{launches}");
    }
    let bare = paired(&out, "detach-bare", "launches_after_watch");
    assert!(bare.contains(" slower=7/14 "), "{bare}");
    let collectives = paired(&out, "detach-bare", "nccl_after_watch");
    assert!(collectives.contains(" slower=14/14 "), "{collectives}");
    let without = paired(&out, "no-probe", "nccl_after_watch");
    assert!(without.contains(" slower=8/14 "), "{without}");
}

/// Call 31's rows (doctor, the fixed detach and no probe, 10 rounds on a
/// machine whose plain parts spread several times call 25's) give what it
/// printed: the detach's own cost at the watch's end in every round, the
/// collectives after the watch under the doctor slower in only 7 of 10
/// now that the bench ends the shim's watch (14 of 14 in call 25).
#[test]
fn the_fixed_detach_call_rows_give_its_printed_summary() {
    let out = gpu_call_summary(31, 13 * 4 + 13 * 3);
    let detach = paired(&out, "detach", "watch_end");
    assert!(detach.contains(" rounds=10 "), "{detach}");
    assert!(detach.contains(" slower=10/10 "), "{detach}");
    let collectives = paired(&out, "doctor", "nccl_after_watch");
    assert!(collectives.contains(" slower=7/10 "), "{collectives}");
}

/// Call 56's rows (eighteenth session: the Triton parts, four doctor modes,
/// 10 rounds after a warm-up process) give what the GPU printed, and what
/// docs/footprint.md reads from them: lazy's step-1 forward extra (about
/// 40 ms) is not the autotuner's benchmarks run with CUPTI attached — a
/// retune's 627 ms of benchmarks carry under 4 ms (a tenth of it) in each
/// mode that keeps CUPTI attached through them — while the context's
/// creation is slower in every round with the probe in, and not without.
#[test]
fn the_triton_parts_call_rows_give_its_printed_summary() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-07-h100");
    let out = gpu_call_summary_in(&folder, 56, 16 * 5 + 16 * 4);
    for mode in ["doctor", "attached", "no-kernels"] {
        let retune = paired(&out, mode, "triton_retune");
        assert!(retune.contains(" rounds=10 "), "{retune}");
        let interval = retune
            .split(" added_ms_90=")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap();
        let top: f64 = interval.split("..").nth(1).unwrap().parse().unwrap();
        assert!(top < 4.0, "{retune}");
        let context = paired(&out, mode, "context");
        if mode != "no-kernels" {
            assert!(context.contains(" slower=10/10 "), "{context}");
        }
    }
    let without = paired(&out, "no-probe", "context");
    assert!(without.contains(" slower=6/10 "), "{without}");
}

/// A mode whose worker dies (the detach's, exit 139, as on call 29) is said
/// round by round, and the rounds go on: the other modes are paired in
/// every round (one dead worker used to end the whole call).
#[test]
fn a_mode_whose_worker_dies_is_named_and_the_rounds_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(
        bench(dir.path(), "3", "doctor detach").env("STANDIN_DETACH_DIES", "1"),
    );
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 3, "{out}");
    assert!(
        failed
            .iter()
            .all(|l| l.starts_with("FAILED mode=detach round=") && l.contains(" exit=139: ")),
        "{failed:?}"
    );
    let doctor = paired(&out, "doctor", "nccl_first");
    assert!(doctor.contains(" rounds=3 "), "{doctor}");
    assert!(!out.contains("LAZY_PART_PAIRED mode=detach "), "{out}");
}

/// The worker ends the first steps as a training's third step does,
/// the shim's part included: the real shim's watch on the collectives
/// (installed on a stand-in `torch.distributed`) is gone after it, so the
/// parts after the watch hold no shim hook (calls 21-25 left it on).
#[test]
fn the_end_of_the_first_steps_ends_the_shims_collective_watch() {
    let script = r#"
import sys, types
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import prewarm_doctor_prescribe as prescribe
import gpu_lazy_parts
dist = types.ModuleType("stand_in_dist")
def all_reduce(tensor, op=None, group=None, async_op=False):
    return None
dist.all_reduce = all_reduce
prescribe._watch_collectives(dist)
prescribe._state["dist"] = dist
watched = dist.all_reduce is not all_reduce or bool(prescribe._observed)
gpu_lazy_parts.end_first_steps()
print("watched", watched, "after", dist.all_reduce is not all_reduce or bool(prescribe._observed))
"#;
    let out = common::stdout_of_success(
        Command::new("python3")
            .args(["-c", script])
            .arg(common::repo("src/shim"))
            .arg(common::repo("benches"))
            .env_remove("CUDA_INJECTION64_PATH")
            .env("PREWARM_DOCTOR_DIR", tempfile::tempdir().unwrap().path()),
    );
    assert_eq!(out.trim(), "watched True after False");
}
