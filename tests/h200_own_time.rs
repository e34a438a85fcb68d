//! The doctor's own time on a real H200 recording (tests/fixtures/h200/
//! overhead-lazy-default, README there): the shim's time in a steady step is
//! the median of what its own step-end lines say each steady step cost, the
//! phases' shares never outgrow the whole process's hooks, and the terminal
//! says both the average over steps 2..N and that median.

mod common;

use prewarm_doctor::analysis::account::ProcessAccount;
use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::load::load_run;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    common::repo("tests/fixtures/h200/overhead-lazy-default")
}

fn rank0(path: &Path) -> ProcessAccount {
    analyse_run(&load_run(path).unwrap())
        .remove(0)
        .processes
        .into_iter()
        .find(|p| p.rank == Some(0))
        .expect("rank 0")
}

/// Each step's `own_ns` growth, read straight off the shim file's
/// `step_end` lines: (step, ns the shim spent since the previous step end).
fn shim_ns_per_step(path: &Path) -> Vec<(u32, u64)> {
    let file = path.join("default/1/vm/rank-0.pid-836.shim.jsonl");
    let mut ends: Vec<(u32, u64)> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["ev"] == "step_end")
        .map(|v| {
            (
                v["step"].as_u64().unwrap() as u32,
                v["own_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    ends.sort();
    ends.windows(2).map(|w| (w[1].0, w[1].1 - w[0].1)).collect()
}

#[test]
fn the_shims_steady_step_time_is_the_median_its_step_end_lines_say() {
    let path = fixture();
    let p = rank0(&path);
    assert_eq!(p.steps.count, 30);
    let steady: Vec<u64> = shim_ns_per_step(&path)
        .into_iter()
        .filter(|(k, _)| !p.steps.lazy_steps.contains(k))
        .map(|(_, ns)| ns)
        .collect();
    assert_eq!(steady.len() as u32, p.steps.steady_steps);
    let mut sorted = steady.clone();
    sorted.sort();
    let n = sorted.len();
    let median_ns = if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0
    };
    let got = p.steps.steady_shim_s.expect("steady_shim_s");
    assert!(
        (got * 1e9 - median_ns).abs() < 1e-3,
        "{got} vs {median_ns} ns"
    );
    // The first steps (memory and group snapshots) cost far more than a warm
    // one: the average over steps 2..N is not what a warm step pays.
    let steady_phase = p
        .phases
        .iter()
        .find(|ph| ph.phase == Phase::Steady)
        .unwrap();
    let average = steady_phase.shim_s.unwrap() / steady_phase.steps as f64;
    assert!(average > 2.0 * got, "average {average} vs median {got}");
    // On the H200 a warm step's hooks (one step-end line) took tens of µs.
    assert!((5e-6..100e-6).contains(&got), "{got}");
}

#[test]
fn the_phases_shim_time_stays_within_the_processes_hooks() {
    let p = rank0(&fixture());
    let phases: f64 = p.phases.iter().filter_map(|ph| ph.shim_s).sum();
    let hooks: f64 = p.shim_hooks.iter().map(|h| h.seconds).sum();
    assert!(
        phases > 0.0 && phases <= hooks + 1e-9,
        "{phases} vs {hooks}"
    );
    let step1 = p.phases.iter().find(|ph| ph.phase == Phase::Step1).unwrap();
    // The probe's callbacks and the shim's hooks in a 1.49 s step 1.
    assert!(
        (1e-3..30e-3).contains(&step1.probe_callbacks_s),
        "{step1:?}"
    );
    assert!(
        (0.2e-3..10e-3).contains(&step1.shim_s.unwrap()),
        "{step1:?}"
    );
    assert_eq!(p.shim_hooks[0].name, "install");
}

#[test]
fn the_terminal_says_the_average_and_the_warm_steps_median() {
    let path = fixture();
    let p = rank0(&path);
    let text = common::terminal_text(&path);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let median_us = p.steps.steady_shim_s.unwrap() * 1e6;
    let steady_ms = p.steps.steady_step_s.unwrap() * 1e3;
    let want = format!("(median {median_us:.0} µs of a {steady_ms:.1} ms steady step)");
    assert!(words.contains(&want), "{want} not in {text}");
    assert!(words.contains(" µs a step in steps 2..N "), "{text}");
    assert!(
        words.contains("(6.6 ms of it in 3 of its 4 phases)"),
        "{text}"
    );
}
