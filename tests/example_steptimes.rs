//! The examples' timed loop (examples/common.py, EXAMPLE_STEPTIMES=1), as
//! the footprint bench runs it: step 1 cut into parts (`common.cut`), and
//! the step windows (`StepWindows`): what a process and its threads did
//! over step 1 and over the steady steps, so that a slower step 1, or a
//! process that runs every steady step slower (fsdp2, 2026-12-07's call
//! 60), can be told apart: more CPU on the same work, a wait for a CPU,
//! switches, or a busier thread of its own.
//! Both are driven here through the examples' real training loop against a
//! stand-in torch, with sleeps and threads that burn known CPU time; the
//! summary's PART_PAIRED, PROCESS, THREADS and STATE lines are read from
//! rows with known figures.

mod common;

use std::process::Command;

/// A stand-in torch: what `examples/common.py` touches at import and in
/// `train` and `print_steptimes`.
const TORCH: &str = "bfloat16 = 'bf16'\nfrom . import cuda  # noqa\n";
const TORCH_CUDA: &str = "def synchronize(): pass\n\
def mem_get_info(): return (1 << 30, 2 << 30)\n\
def memory_reserved(): return 0\n\
def get_allocator_backend(): return 'native'\n";

/// The training: 30 steps. Step 1 spins 300 ms of CPU on the main thread
/// and has the thread named `burner` spin 60 ms; each later step spins
/// MAIN_MS of the main thread's CPU time, has the burner spin BURN_MS of
/// its own (the step waits for it), and sleeps 2 ms (a voluntary switch).
/// The sizes keep the figures readable where the kernel gives thread times
/// only in 10 ms ticks (no schedstat): a tick at each end of a window.
const DRIVE: &str = r#"
import ctypes, os, sys, threading, time
sys.path.insert(0, os.environ["EXAMPLES"])
import common
BURN_MS, MAIN_MS = 15.0, 10.0
def spin(ms):
    t = time.thread_time()
    while time.thread_time() - t < ms / 1000:
        pass
go, finished, done = threading.Event(), threading.Event(), threading.Event()
burn = [60.0]
def burner():
    ctypes.CDLL(None).prctl(15, b"burner", 0, 0, 0)
    while not done.is_set():
        if go.wait(0.01):
            go.clear()
            spin(burn[0])
            finished.set()
t = threading.Thread(target=burner, daemon=True)  # a failing drive ends
t.start()
class Opt:
    def zero_grad(self, set_to_none=True): pass
    def step(self): pass
class Args:
    steps, hidden, batch = 30, 1, 1
# What ran when: each calibration, each window's opening and each step's
# start, printed as one ORDER line after the run.
order = []
calibration, window_open = common.calibration, common.Window.open
def calibrated(*counters):
    order.append("calibration")
    return calibration(*counters)
def opened(self):
    order.append("window")
    window_open(self)
common.calibration, common.Window.open = calibrated, opened
def step_fn(step):
    order.append(f"step{step}")
    if step == 1:
        spin(300)
    time.sleep(0.03 if step == 1 else 0)
    common.cut("forward")
    time.sleep(0.05 if step == 1 else 0)
    common.cut("backward")
    burn[0] = 60.0 if step == 1 else BURN_MS
    go.set()
    spin(MAIN_MS)
    time.sleep(0.002)
    finished.wait()
    finished.clear()
common.crosscheck = lambda step: None
common.train(Args, step_fn, Opt())
done.set()
t.join()
print("ORDER", " ".join(order))
"#;

/// The drive's STEPTIMES row; `cuts`: with EXAMPLE_STEP1_CUTS=1.
fn steptimes_of_the_drive(cuts: bool) -> serde_json::Value {
    steptimes_counting(cuts, None)
}

/// The same, the main thread's counters named by EXAMPLE_THREAD_COUNTERS
/// where `counters` says (else the default, instructions and cycles).
fn steptimes_counting(cuts: bool, counters: Option<&str>) -> serde_json::Value {
    let out = output_of_the_drive(cuts, counters);
    let row = out
        .lines()
        .find_map(|l| l.strip_prefix("STEPTIMES "))
        .unwrap_or_else(|| panic!("no STEPTIMES in\n{out}"));
    serde_json::from_str(row).unwrap()
}

/// The drive's stdout.
fn output_of_the_drive(cuts: bool, counters: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let torch = dir.path().join("torch");
    std::fs::create_dir_all(torch.join("cuda")).unwrap();
    std::fs::write(torch.join("__init__.py"), TORCH).unwrap();
    std::fs::write(torch.join("cuda/__init__.py"), TORCH_CUDA).unwrap();
    std::fs::write(dir.path().join("drive.py"), DRIVE).unwrap();
    let mut command = Command::new("python3");
    command
        .arg(dir.path().join("drive.py"))
        .env("EXAMPLES", common::repo("examples"))
        .env("EXAMPLE_STEPTIMES", "1")
        .env("EXAMPLE_STEP1_CUTS", if cuts { "1" } else { "0" })
        .env("PYTHONPATH", dir.path())
        .env_remove("EXAMPLE_THREAD_COUNTERS");
    if let Some(names) = counters {
        command.env("EXAMPLE_THREAD_COUNTERS", names);
    }
    common::stdout_of_success(&mut command)
}

/// The main thread's counters over each window, a step's worth, and over
/// the calibration's loop: counted with the software task clock (the
/// thread's CPU time, which a machine without a hardware PMU still
/// gives), they agree with the thread's CPU time the kernel's schedstat
/// gives for the same window, 10 ms of the main thread's spin a steady
/// step and 300 ms in step 1.
#[test]
fn the_main_threads_counters_count_each_window_a_step_at_a_time() {
    let row = steptimes_counting(false, Some("task_clock"));
    let get = |key: &str| row[key].as_f64().unwrap_or_else(|| panic!("{key}: {row}"));
    assert!(row.get("main_counters_unavailable").is_none(), "{row}");
    for window in ["first", "steady"] {
        let counted_ms = get(&format!("{window}_main_task_clock")) / 1e6;
        let cpu_ms = get(&format!("{window}_main_cpu_ms"));
        assert!(
            (counted_ms - cpu_ms).abs() <= 0.15 * cpu_ms + 1.0,
            "{window}: task clock {counted_ms} ms against {cpu_ms} ms: {row}"
        );
    }
    assert!(get("first_main_task_clock") / 1e6 >= 280.0, "{row}");
    for calibration in ["calib0", "calib"] {
        let counted_ms = get(&format!("{calibration}_python_task_clock")) / 1e6;
        let ms = get(&format!("{calibration}_python_ms"));
        assert!(
            (counted_ms - ms).abs() <= 0.3 * ms,
            "{calibration}: {counted_ms} against {ms}: {row}"
        );
    }
    // The copy is not counted (only the loop is a fixed count of work).
    assert!(row.get("calib_memory_task_clock").is_none(), "{row}");
}

/// `python3 examples/thread_counters.py NAMES` (the GPU zoo's first lines)
/// says for each counter whether this machine gives it: the task clock
/// with its count over the fixed loop, three times; an unknown name and an
/// unavailable counter with their reasons; instructions, where counted,
/// the same count each time within 1% (work, not time).
#[test]
fn the_counter_check_says_what_this_machine_counts() {
    let out = common::stdout_of_success(
        Command::new("python3")
            .arg(common::repo("examples/thread_counters.py"))
            .args(["instructions", "task_clock", "bogus"]),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(
        lines[2],
        "COUNTER name=bogus available=no reason='unknown counter (known: cycles, instructions, task_clock)'"
    );
    let counts = |l: &str| -> Vec<f64> {
        let list = l
            .split(" loop_counts=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        list.split(',').map(|c| c.parse().unwrap()).collect()
    };
    assert!(
        lines[1].starts_with("COUNTER name=task_clock available=yes "),
        "{out}"
    );
    let clock = counts(lines[1]);
    assert!(
        clock.len() == 3 && clock.iter().all(|&ns| ns > 0.0),
        "{out}"
    );
    if lines[0].contains(" available=no ") {
        assert!(
            lines[0].starts_with("COUNTER name=instructions available=no reason='E"),
            "{out}"
        );
    } else {
        let work = counts(lines[0]);
        let (lo, hi) = (
            work.iter().cloned().fold(f64::MAX, f64::min),
            work.iter().cloned().fold(0.0, f64::max),
        );
        assert!(lo > 0.0 && (hi - lo) / hi < 0.01, "{out}");
    }
}

/// A counter the machine cannot give is named with its reason, and its
/// figures are left out; the row is still written. An unknown name says
/// which are known; the instructions counter is either counted or refused
/// with the kernel's errno (a virtual machine without a PMU: ENOENT).
#[test]
fn a_counter_the_machine_lacks_is_named_with_its_reason() {
    let row = steptimes_counting(false, Some("instructions retired_bananas"));
    let unavailable = &row["main_counters_unavailable"];
    assert_eq!(
        unavailable["retired_bananas"], "unknown counter (known: cycles, instructions, task_clock)",
        "{row}"
    );
    assert!(row.get("first_main_retired_bananas").is_none(), "{row}");
    match unavailable["instructions"].as_str() {
        Some(reason) => {
            let errno = reason.split(':').next().unwrap();
            assert!(
                errno.starts_with('E') && errno.chars().all(|c| c.is_ascii_uppercase()),
                "{reason}"
            );
            assert!(row.get("first_main_instructions").is_none(), "{row}");
        }
        None => assert!(
            row["first_main_instructions"].as_f64().unwrap() > 0.0,
            "{row}"
        ),
    }
    assert!(row["step1"].as_f64().unwrap() > 0.0, "{row}");
}

/// A run calibrates its speed twice, each outside every window: before
/// step 1's window opens and after the last step. The row holds both.
#[test]
fn the_calibrations_run_before_step_1s_window_and_after_the_last_step() {
    let out = output_of_the_drive(false, None);
    let order = out
        .lines()
        .find_map(|l| l.strip_prefix("ORDER "))
        .unwrap_or_else(|| panic!("no ORDER in\n{out}"));
    let steps: Vec<String> = (1..=30).map(|s| format!("step{s}")).collect();
    // Step 1's window, then the steady window opened after step 10.
    let want = ["calibration", "window"]
        .into_iter()
        .map(str::to_string)
        .chain(steps[..10].iter().cloned())
        .chain(["window".to_string()])
        .chain(steps[10..].iter().cloned())
        .chain(["calibration".to_string()])
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(order, want);
    let row: serde_json::Value = serde_json::from_str(
        out.lines()
            .find_map(|l| l.strip_prefix("STEPTIMES "))
            .unwrap(),
    )
    .unwrap();
    for key in [
        "calib0_python_ms",
        "calib0_memory_ms",
        "calib_python_ms",
        "calib_memory_ms",
    ] {
        assert!(row[key].as_f64().unwrap() > 0.0, "{key}: {row}");
    }
}

/// The steady window counts the steady steps only (step 1's 300 ms spin
/// would add 15 ms a step), and step 1's its own; each finds the main
/// thread's own spin and the burner's, each by its thread, and the main
/// thread's sleep as a voluntary switch. Uncut, the row has no step-1
/// parts and does not say it was cut.
#[test]
fn the_window_finds_each_threads_cpu_over_the_steady_steps_only() {
    let row = steptimes_of_the_drive(false);
    let object = row.as_object().unwrap();
    assert!(
        !object
            .keys()
            .any(|k| k.starts_with("step1_") || k == "cut_step1"),
        "{row}"
    );
    let ms = |key: &str| row[key].as_f64().unwrap_or_else(|| panic!("{key}: {row}"));
    // Two ticks over 20 steady steps: 1 ms a step.
    let main = ms("steady_main_cpu_ms");
    assert!((9.0..14.0).contains(&main), "main thread {main} ms: {row}");
    let burner = row["steady_threads_ms"]["burner"].as_f64().unwrap();
    assert!(burner >= 15.0 - 1.0, "burner {burner} ms: {row}");
    // Step 1's window: its 300 ms spin on the main thread, the burner's
    // 60 ms (two ticks: 20 ms).
    assert!(ms("first_main_cpu_ms") >= 280.0, "{row}");
    assert!(
        row["first_threads_ms"]["burner"].as_f64().unwrap() >= 40.0,
        "{row}"
    );
    // The threads' sum holds the burner's (its figure rounded to 0.1 µs).
    assert!(ms("steady_others_cpu_ms") >= burner - 1e-4, "{row}");
    assert!(ms("steady_vol_switches") >= 1.0, "{row}");
    // The CPUs the main thread ended steps on are this machine's.
    let online = std::thread::available_parallelism().unwrap().get() as u64;
    let cpus = row["steady_main_cpus"].as_array().unwrap();
    assert!(!cpus.is_empty(), "{row}");
    let max_cpu = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|t| t.trim().rsplit(['-', ',']).next()?.parse::<u64>().ok())
        .unwrap_or(online - 1);
    assert!(cpus.iter().all(|c| c.as_u64().unwrap() <= max_cpu), "{row}");
    // The main thread and the burner kept at least one CPU busy most of
    // the window; no more CPUs than the machine has.
    let busy = ms("steady_busy_cpus");
    assert!(busy >= 0.5 && busy <= online as f64 + 1e-9, "{row}");
    // Where the burner ran last, and each busy CPU's share: a part of
    // the busy CPUs, on CPUs of this machine.
    let burner_cpu = row["steady_threads_cpu"]["burner"].as_u64().unwrap();
    assert!(burner_cpu <= max_cpu, "{row}");
    let shares = row["steady_cpu_busy"].as_object().unwrap();
    assert!(!shares.is_empty(), "{row}");
    let mut shown = 0.0;
    for (cpu, share) in shares {
        let (cpu, share) = (cpu.parse::<u64>().unwrap(), share.as_f64().unwrap());
        assert!(cpu <= max_cpu && (0.05..=1.0).contains(&share), "{row}");
        shown += share;
    }
    assert!(shown <= busy + 0.01, "{row}");
    // The calibration ran, after the last step: outside the steady window,
    // whose main-thread figure above would hold its ~100 ms otherwise.
    assert!(
        ms("calib_python_ms") > 0.0 && ms("calib_memory_ms") > 0.0,
        "{row}"
    );
}

fn summary(rows: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("steptimes.txt");
    std::fs::write(&file, rows).unwrap();
    common::stdout_of_success(
        Command::new("python3")
            .arg(common::repo("benches/gpu_overhead_summary.py"))
            .args(["fsdp2", "default", "0"])
            .arg(&file),
    )
}

/// Rows of 9 rounds: the doctor's main thread takes 0.2 ms more CPU a step
/// than plain's in every round, and its `prewarm-probe` thread 0.05 ms a
/// step that plain has no thread of; steady steps grow with the main
/// thread's CPU across processes.
fn window_rows(with_window: bool) -> String {
    let mut rows = String::new();
    for round in 1..=9 {
        for (mode, main_extra, probe) in [("plain", 0.0, None), ("doctor", 0.2, Some(0.05))] {
            let main = 28.0 + f64::from(round) + main_extra;
            let steady = main / 1000.0 + 0.001;
            let mut threads = serde_json::json!({"pt_autograd_0": 1.5});
            if let Some(p) = probe {
                threads["prewarm-probe"] = serde_json::json!(p);
            }
            let window = serde_json::json!({
                "steady_main_cpu_ms": main,
                "steady_main_wait_ms": 0.01,
                "steady_vol_switches": 3.0,
                "steady_invol_switches": if mode == "doctor" { 0.5 } else { 0.25 },
                "steady_others_cpu_ms": 1.5 + probe.unwrap_or(0.0),
                "steady_threads_ms": threads,
                "steady_main_cpus": [3],
                "steady_migrations": 0,
                // Autograd's thread on CPU 7 in rounds 1-4, on 5 after.
                "steady_threads_cpu": {"pt_autograd_0": if round <= 4 { 7 } else { 5 }},
            });
            // Step 1: the doctor's main thread 30 ms more CPU, and a
            // CUPTI thread of 5 ms plain has none of.
            let first_main = 900.0 + f64::from(round) + if probe.is_some() { 30.0 } else { 0.0 };
            let mut first_threads = serde_json::json!({});
            if probe.is_some() {
                first_threads["cuptiworker"] = serde_json::json!(5.0);
            }
            let first = serde_json::json!({
                "first_main_cpu_ms": first_main,
                "first_others_cpu_ms": if probe.is_some() { 5.0 } else { 0.0 },
                "first_threads_ms": first_threads,
            });
            let mut row = serde_json::json!({"step1": first_main / 1000.0 + 0.1,
                "steady_median": steady, "device_used": 1});
            if with_window {
                // The calibration: the doctor's interpreter loop 50 µs
                // slower in every round, its copy the same.
                let python =
                    8.0 + f64::from(round) / 10.0 + if probe.is_some() { 0.05 } else { 0.0 };
                row["calib_python_ms"] = serde_json::json!(python);
                row["calib_memory_ms"] = serde_json::json!(12.0);
                // Before step 1: a loop as fast as step 1 is long, and the
                // doctor's copy 0.3 ms slower.
                row["calib0_python_ms"] = serde_json::json!(first_main / 100.0);
                row["calib0_memory_ms"] =
                    serde_json::json!(12.0 + if probe.is_some() { 0.3 } else { 0.0 });
                for (k, v) in window
                    .as_object()
                    .unwrap()
                    .iter()
                    .chain(first.as_object().unwrap())
                {
                    row[k] = v.clone();
                }
            }
            rows += &format!("{mode} round={round} STEPTIMES {row}\n");
        }
    }
    rows
}

/// Asserts that `line` holds every one of `wants`.
fn contains_all(line: &str, wants: &[&str]) {
    for want in wants {
        assert!(line.contains(want), "{want} in {line}");
    }
}

fn line<'a>(out: &'a str, start: &str, has: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start) && l.contains(has))
        .unwrap_or_else(|| panic!("no {start} line with {has:?} in\n{out}"))
}

/// Rows of 9 rounds with the main thread's counters over step 1: the
/// doctor's retires exactly 2% more instructions and runs 5% more cycles,
/// and its step 1 is 5% longer.
fn counted_rows() -> String {
    let mut rows = String::new();
    for round in 1..=9 {
        let instructions = 1e9 + f64::from(round) * 1e7;
        let step1 = 1.0 + f64::from(round) / 100.0;
        for (mode, more, longer) in [("plain", 1.0, 1.0), ("doctor", 1.02, 1.05)] {
            let row = serde_json::json!({
                "step1": step1 * longer, "steady_median": 0.03, "device_used": 1,
                "first_main_cpu_ms": 900.0 * longer,
                "first_main_instructions": instructions * more,
                "first_main_cycles": instructions / 1.5 * longer,
            });
            rows += &format!("{mode} round={round} STEPTIMES {row}\n");
        }
    }
    rows
}

/// WORK sets the instructions the main thread retired in step 1 (its work,
/// whatever the machine's speed) beside the cycles and the time, each the
/// doctor's over plain's within rounds; PROCESS gives the instructions in
/// millions. A window without counters (the steady one here), and rows
/// without any, give no WORK line.
#[test]
fn the_summary_sets_the_work_beside_the_time() {
    let out = summary(&counted_rows());
    let work = line(&out, "WORK ", " window=first ");
    assert_eq!(
        work,
        "WORK workload=fsdp2 allocator=default mode=doctor window=first rounds=9 \
         instructions_ratio=1.0200 instructions_ratio_90=1.020-1.020 instructions_more=9/9 \
         cycles_ratio=1.0500 cycles_ratio_90=1.050-1.050 ipc_plain=1.500 ipc_doctor=1.457 \
         time_ratio=1.0500 time_ratio_90=1.050-1.050"
    );
    assert!(
        !out.contains("WORK workload=fsdp2 allocator=default mode=doctor window=steady"),
        "{out}"
    );
    // The median round's 1.05e9 instructions, 2% of them added.
    contains_all(
        line(&out, "PROCESS ", " window=first "),
        &[
            "instructions_plain_M=1050.000 ",
            "instructions_doctor_M=1071.000 ",
            "instructions_added_M=21.000 ",
        ],
    );
    assert!(!summary(&window_rows(true)).contains("WORK "));
    // A machine without the counters says so, once, with every process.
    let lacking = window_rows(true).replace(
        "\"device_used\":1",
        "\"device_used\":1,\"main_counters_unavailable\":{\"instructions\":\"ENOENT: No such file or directory\"}",
    );
    assert_eq!(
        line(&summary(&lacking), "COUNTERS ", ""),
        "COUNTERS workload=fsdp2 allocator=default processes=18 unavailable=instructions:ENOENT:18"
    );
}

/// PROCESS gives each figure's medians and the paired difference with its
/// interval and sign, for step 1's window and the steady one; THREADS names
/// the doctor's own threads with the CPU they add and puts the thread both
/// sides share at 0; STATE finds step 1 and the steady step ranked exactly
/// as the main thread's CPU; each calibration reads as a window of its own
/// (`calib0` before step 1, `calib` after the last step, no THREADS); rows without the windows (those before them)
/// give none of these lines.
#[test]
fn the_summary_reads_the_window_against_plain() {
    let out = summary(&window_rows(true));
    contains_all(
        line(&out, "PROCESS ", " window=steady "),
        &[
            "mode=doctor window=steady rounds=9 ",
            "main_cpu_plain_ms=33.000 main_cpu_doctor_ms=33.200 main_cpu_added_us=200.0 ",
            "main_cpu_slower=9/9 ",
            "invol_plain=0.250 invol_doctor=0.500 invol_added_n=0.25 ",
            "others_cpu_added_us=50.0 ",
        ],
    );
    let first = line(&out, "PROCESS ", " window=first ");
    assert!(
        first.contains("main_cpu_added_us=30000.0 ") && first.contains("main_cpu_slower=9/9"),
        "{first}"
    );
    line(
        &out,
        "THREADS ",
        " window=first thread='cuptiworker' added_us=5000.0 ",
    );
    assert!(
        out.contains("STATE workload=fsdp2 allocator=default window=first processes=18 step1_vs_main_cpu_rho=1.00"),
        "{out}"
    );
    let threads: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("THREADS ") && l.contains(" window=steady "))
        .collect();
    assert_eq!(threads.len(), 2, "{out}");
    assert!(
        threads[0].contains("window=steady thread='prewarm-probe' added_us=50.0 ")
            && threads[0].contains(" slower=9/9 "),
        "{threads:?}"
    );
    assert!(
        threads[1].contains("thread='pt_autograd_0' added_us=0.0 "),
        "{threads:?}"
    );
    let state = line(&out, "STATE ", " window=steady ");
    assert!(state.contains(" window=steady processes=18 "), "{state}");
    assert!(
        state.contains(" steady_median_vs_main_cpu_rho=1.00 "),
        "{state}"
    );
    contains_all(
        line(&out, "PROCESS ", " window=calib "),
        &[
            " rounds=9 python_plain_ms=8.500 python_doctor_ms=8.550 python_added_us=50.0 ",
            " python_slower=9/9 ",
            " memory_added_us=0.0 ",
        ],
    );
    assert!(
        !out.contains("THREADS workload=fsdp2 allocator=default mode=doctor window=calib"),
        "{out}"
    );
    let calib_state = line(&out, "STATE ", " window=calib processes=18 steady_median_");
    assert!(
        calib_state.contains(" steady_median_vs_python_rho=1.00 "),
        "{calib_state}"
    );
    contains_all(
        line(&out, "PROCESS ", " window=calib0 "),
        &[
            " python_added_us=300.0 ",
            " memory_added_us=300.0 ",
            " memory_slower=9/9",
        ],
    );
    line(
        &out,
        "STATE ",
        " window=calib0 processes=18 step1_vs_python_rho=1.00 ",
    );
    // PLACEMENT: the busiest other thread (autograd's, not the probe's
    // 0.05 ms) by the CPU it ran on, most processes first; the medians of
    // rounds 5-9's and 1-4's steady steps.
    let placed: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("PLACEMENT "))
        .collect();
    assert_eq!(
        placed,
        [
            "PLACEMENT workload=fsdp2 allocator=default window=steady main_cpu=3 busiest='pt_autograd_0' its_cpu=5 processes=10 plain=5 doctor=5 steady_median_ms=36.100",
            "PLACEMENT workload=fsdp2 allocator=default window=steady main_cpu=3 busiest='pt_autograd_0' its_cpu=7 processes=8 plain=4 doctor=4 steady_median_ms=31.600",
        ]
    );
    let older = summary(&window_rows(false));
    for absent in ["PROCESS ", "THREADS ", "STATE ", "PLACEMENT "] {
        assert!(!older.contains(absent), "{absent} in\n{older}");
    }
}

/// Step 1's cuts, asked for: its parts (300 ms of spin and a 30 ms sleep,
/// then a 50 ms sleep, then the rest) are stored as `step1_forward`,
/// `step1_backward` and `step1_optimizer` and add up to step 1, and the
/// row says it was cut; the same cuts in later steps change nothing.
#[test]
fn step_1s_cuts_are_its_parts_and_add_up_to_it() {
    let row = steptimes_of_the_drive(true);
    assert_eq!(row["cut_step1"], 1, "{row}");
    let s = |key: &str| row[key].as_f64().unwrap_or_else(|| panic!("{key}: {row}"));
    assert!(s("step1_forward") >= 0.33, "{row}");
    assert!((0.05..0.3).contains(&s("step1_backward")), "{row}");
    let sum = s("step1_forward") + s("step1_backward") + s("step1_optimizer");
    assert!((sum - s("step1")).abs() < 1e-9, "{sum} against {row}");
    let parts: Vec<&String> = row
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("step1_"))
        .collect();
    assert_eq!(parts.len(), 3, "{row}");
}

/// PART_PAIRED: each step-1 part every row has, the doctor's less plain's
/// within rounds in ms (here +2 ms in `forward` every round, nothing in
/// `all_reduce`); a part one row lacks gets no line.
#[test]
fn the_summary_pairs_each_step_1_part() {
    let mut rows = String::new();
    for round in 1..=7 {
        for (mode, extra) in [("plain", 0.0), ("doctor", 0.002)] {
            let forward = 0.5 + f64::from(round) / 100.0 + extra;
            let mut row = serde_json::json!({"step1": forward + 0.3, "steady_median": 0.03,
                "device_used": 1, "step1_forward": forward, "step1_all_reduce": 0.3});
            if round != 3 {
                row["step1_backward"] = serde_json::json!(0.1);
            }
            rows += &format!("{mode} round={round} STEPTIMES {row}\n");
        }
    }
    let out = summary(&rows);
    let pairs: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("PART_PAIRED "))
        .collect();
    assert_eq!(pairs.len(), 2, "{out}");
    assert!(
        pairs[0].contains("part=forward rounds=7 added_ms=2.0 added_ms_90=2.0..2.0 ")
            && pairs[0].contains(" slower=7/7 "),
        "{pairs:?}"
    );
    assert!(
        pairs[1].contains("part=all_reduce rounds=7 added_ms=0.0 "),
        "{pairs:?}"
    );
}

/// Rounds whose step 1 was cut (a synchronise at each cut) and rounds whose
/// step 1 was not are different measurements: the summary refuses to pool
/// them and names the field; rows without the field count as uncut.
#[test]
fn the_summary_refuses_to_pool_cut_and_uncut_step_1s() {
    let row = |mode: &str, round: u32, cut: bool| {
        let mut row = serde_json::json!({"step1": 1.0, "steady_median": 0.03, "device_used": 1});
        if cut {
            row["cut_step1"] = serde_json::json!(1);
        }
        format!("{mode} round={round} STEPTIMES {row}\n")
    };
    let dir = tempfile::tempdir().unwrap();
    let (uncut, cut) = (dir.path().join("uncut.txt"), dir.path().join("cut.txt"));
    let rows = |c: bool| {
        (1..=5)
            .flat_map(|r| [row("plain", r, c), row("doctor", r, c)])
            .collect::<String>()
    };
    std::fs::write(&uncut, rows(false)).unwrap();
    std::fs::write(&cut, rows(true)).unwrap();
    let out = Command::new("python3")
        .arg(common::repo("benches/gpu_overhead_summary.py"))
        .args(["fsdp2", "default", "0"])
        .args([&uncut, &cut])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("different cut_step1"), "{stderr}");
    let alone = summary(&rows(true));
    assert!(alone.contains("PAIRED workload=fsdp2"), "{alone}");
}
