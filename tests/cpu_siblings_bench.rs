//! benches/cpu_siblings.py, run here on this machine's CPUs: which CPUs,
//! busy, slow the measured one's work (the cores a virtual machine hides).
//! What can be checked anywhere is the method, not the ratios: every other
//! CPU gets its line, its spinner really ran there and nowhere else, and
//! the closing line ranks them all; bad flags are refused by name.

mod common;

use std::process::Command;

fn bench() -> Command {
    let mut command = Command::new("python3");
    command.arg(common::repo("benches/cpu_siblings.py"));
    command
}

/// The CPUs this test process may run on, as the bench sees them.
fn allowed_cpus() -> Vec<u64> {
    let out = common::stdout_of_success(Command::new("python3").args([
        "-c",
        "import os; print(' '.join(map(str, sorted(os.sched_getaffinity(0)))))",
    ]));
    out.split_whitespace().map(|c| c.parse().unwrap()).collect()
}

/// The value of `key=` in one of the bench's lines.
fn field(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .to_string()
}

#[test]
fn each_other_cpu_spins_where_it_was_put_and_is_ranked() {
    let cpus = allowed_cpus();
    let measured = *cpus.last().unwrap();
    let out = common::stdout_of_success(bench().args(["--rounds", "1", "--loop", "20000"]));
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("SIBLING ")).collect();
    assert_eq!(lines.len(), cpus.len() - 1, "{out}");
    for (line, other) in lines.iter().zip(cpus.iter().filter(|&&c| c != measured)) {
        assert_eq!(field(line, "cpu"), measured.to_string(), "{line}");
        assert_eq!(field(line, "with"), other.to_string(), "{line}");
        // The spinner's affinity held: it saw only its own CPU.
        assert_eq!(field(line, "spinner_cpus"), other.to_string(), "{line}");
        assert!(
            field(line, "spinner_cpu_s").parse::<f64>().unwrap() > 0.0,
            "{line}"
        );
        assert!(
            field(line, "idle_ms").parse::<f64>().unwrap() > 0.0,
            "{line}"
        );
    }
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "SIBLINGS cpu={measured} others={} ",
            cpus.len() - 1
        )),
        "{out}"
    );
    let ranked = field(last, "by_ratio");
    if cpus.len() == 1 {
        assert_eq!(ranked, "none", "{last}");
    } else {
        let mut named: Vec<u64> = ranked
            .split(',')
            .map(|p| p.split(':').next().unwrap().parse().unwrap())
            .collect();
        named.sort();
        let others: Vec<u64> = cpus.iter().copied().filter(|&c| c != measured).collect();
        assert_eq!(named, others, "{last}");
    }
}

/// `--cpu all`: every CPU measured in turn, one SIBLINGS line each.
#[test]
fn all_measures_every_cpu_in_turn() {
    let cpus = allowed_cpus();
    let out = common::stdout_of_success(
        bench().args(["--cpu", "all", "--rounds", "1", "--loop", "20000"]),
    );
    let measured: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("SIBLINGS cpu="))
        .map(|rest| rest.split(' ').next().unwrap().to_string())
        .collect();
    let want: Vec<String> = cpus.iter().map(u64::to_string).collect();
    assert_eq!(measured, want, "{out}");
    let pairs = out.lines().filter(|l| l.starts_with("SIBLING ")).count();
    assert_eq!(pairs, cpus.len() * (cpus.len() - 1), "{out}");
}

/// Asserts the bench refuses `args` with a message holding `says`.
fn assert_refused(args: &[&str], says: &str) {
    let out = bench().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(says), "{args:?}: {err}");
}

#[test]
fn a_cpu_it_may_not_run_on_is_refused_by_name() {
    assert_refused(
        &["--cpu", "100000"],
        "--cpu 100000: not a CPU this process may run on",
    );
}

/// `--processes`: each fresh interpreter gets its line, its median between
/// its fastest and slowest timing, and the closing line lists exactly those
/// medians, sorted.
#[test]
fn processes_are_timed_one_by_one_and_their_medians_listed() {
    let cpus = allowed_cpus();
    let measured = *cpus.last().unwrap();
    let out = common::stdout_of_success(bench().args([
        "--processes",
        "3",
        "--rounds",
        "3",
        "--loop",
        "20000",
    ]));
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("PROCESS_SPEED "))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    let number = |line: &str, key: &str| field(line, key).parse::<f64>().unwrap();
    let mut medians = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        assert_eq!(field(line, "cpu"), measured.to_string(), "{line}");
        assert_eq!(field(line, "process"), (n + 1).to_string(), "{line}");
        let median = number(line, "loop_ms");
        assert!(number(line, "fastest_ms") <= median, "{line}");
        assert!(median <= number(line, "slowest_ms"), "{line}");
        assert!(median > 0.0, "{line}");
        medians.push(format!("{median:.2}"));
    }
    let last = out.lines().last().unwrap();
    assert!(
        last.starts_with(&format!(
            "PROCESS_SPEEDS cpu={measured} processes=3 rounds=3 "
        )),
        "{last}"
    );
    let mut listed: Vec<String> = field(last, "medians_ms")
        .split(',')
        .map(String::from)
        .collect();
    let as_number = |m: &String| m.parse::<f64>().unwrap();
    assert!(
        listed
            .windows(2)
            .all(|w| as_number(&w[0]) <= as_number(&w[1])),
        "{last}"
    );
    listed.sort();
    medians.sort();
    assert_eq!(listed, medians, "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("SIBLING")).count(), 0);
}

#[test]
fn a_negative_count_is_refused() {
    for flag in ["--processes", "--series", "--steps"] {
        assert_refused(
            &[flag, "-1"],
            "--processes, --series and --steps at least 0",
        );
    }
    assert_refused(&["--steps", "2"], "--steps: 3 at least");
}

/// `--series`: every timing in order, the levels among them, and stretches
/// that cover no more time than the timings themselves.
#[test]
fn a_series_lists_every_timing_and_its_stretches() {
    let out = common::stdout_of_success(bench().args(["--series", "12", "--loop", "20000"]));
    let series = out.lines().find(|l| l.starts_with("SERIES ")).unwrap();
    let times: Vec<f64> = field(series, "ms")
        .split(',')
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(times.len(), 12, "{series}");
    let speeds = out
        .lines()
        .find(|l| l.starts_with("SERIES_SPEEDS "))
        .unwrap();
    let number = |key: &str| field(speeds, key).parse::<f64>().unwrap();
    let (fast, slow) = (number("fast_ms"), number("slow_ms"));
    assert!(fast <= slow, "{speeds}");
    for level in [fast, slow] {
        assert!(
            times.iter().any(|t| (t - level).abs() <= 0.0051),
            "{level} not among {series}"
        );
    }
    let stretches = number("stretches");
    assert!((1.0..=12.0).contains(&stretches), "{speeds}");
    let total_s: f64 = times.iter().sum::<f64>() / 1e3;
    assert!(number("longest_s") <= total_s + 0.01, "{speeds}");
}

#[test]
fn processes_and_a_series_are_not_asked_together() {
    assert_refused(
        &["--series", "2", "--processes", "2"],
        "--processes and --series: one at a time",
    );
}

/// The value of `key=` in `line` as a number.
fn number(line: &str, key: &str) -> f64 {
    field(line, key)
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {line}"))
}

/// The lines of `out` that start with `prefix`.
fn lines_of<'a>(out: &'a str, prefix: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// The grain's method on planted timings: 300 ms of a 2 µs loop whose
/// middle 100 ms take 4 µs, and three 1 ms timings (the CPU taken away).
/// The gaps are counted apart, the slow milliseconds are exactly the middle
/// ones, and lined-up sides agree as counted by hand.
#[test]
fn the_grain_splits_planted_timings_into_levels_stretches_and_gaps() {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import cpu_siblings as b
ends, durations, t = [], [], 0
for ms in range(300):
    d = 4000 if 100 <= ms < 200 else 2000
    while t + d < (ms + 1) * 1_000_000:
        t += d
        ends.append(t); durations.append(d)
    if ms in (50, 150, 250):
        ends.append(ms * 1_000_000 + 999_999); durations.append(1_000_000)
gaps, means = b.millisecond_means(ends, durations)
fast, middle, slow = b.levels_of(means.values())
side = b.sides_of(means, fast, slow)
first = {ms: ms < 100 for ms in range(200)}
second = {ms: 50 <= ms < 150 for ms in range(200)}
print(json.dumps({"gaps": len(gaps), "levels": [fast, slow], "slow": sorted(s for s, v in side.items() if v),
                  "stretches": b.slow_stretches(side), "one_level": b.sides_of(means, 2000, 2100) is None,
                  "crossed": b.agreement(first, second), "same": b.agreement(first, first),
                  "none": b.agreement(first, None)}))
"#;
    let out = common::stdout_of_success(
        Command::new("python3")
            .args(["-c", script])
            .arg(common::repo("benches")),
    );
    let found: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(found["gaps"], 3, "{out}");
    assert_eq!(
        found["levels"],
        serde_json::json!([2000.0, 4000.0]),
        "{out}"
    );
    let slow: Vec<u64> = (100..200).collect();
    assert_eq!(found["slow"], serde_json::json!(slow), "{out}");
    assert_eq!(found["stretches"], serde_json::json!([3, 100]), "{out}");
    assert_eq!(found["one_level"], true, "{out}");
    // Slow together in 50 ms, fast together in 50: half agree, as two
    // independent CPUs slow half the time would.
    assert_eq!(
        found["crossed"],
        serde_json::json!([200, 0.5, 0.5, 0.5, 0.5]),
        "{out}"
    );
    assert_eq!(
        found["same"],
        serde_json::json!([200, 0.5, 0.5, 1.0, 0.5]),
        "{out}"
    );
    assert!(found["none"].is_null(), "{out}");
}

/// A CPU taken away shows as gaps: a spinner pinned to the measured CPU
/// takes about half its time, in slices far longer than the loop.
#[test]
fn the_grain_sees_a_shared_cpu_as_gaps() {
    let measured = *allowed_cpus().last().unwrap();
    let mut spinner = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import os, time\nos.sched_setaffinity(0, {{{measured}}})\n\
                 end = time.time() + 20\nwhile time.time() < end: pass"
            ),
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = bench().args(["--grain", "1"]).output().unwrap();
    spinner.kill().unwrap();
    spinner.wait().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let line = lines_of(&out, "GRAIN ")[0];
    assert_eq!(field(line, "cpu"), measured.to_string(), "{line}");
    assert!(number(line, "gap_share") > 0.25, "{line}");
    assert!(number(line, "seconds") >= 1.0, "{line}");
    assert!(
        number(line, "fast_us") <= number(line, "median_us"),
        "{line}"
    );
    assert!(
        number(line, "median_us") <= number(line, "slow_us"),
        "{line}"
    );
}

/// `--cpu all --grain`: a GRAIN line for every CPU, and GRAINS listing each
/// once with its line's median, fastest first.
#[test]
fn grains_rank_every_cpu_by_its_median() {
    let cpus = allowed_cpus();
    let out = common::stdout_of_success(bench().args(["--cpu", "all", "--grain", "0.2"]));
    let lines = lines_of(&out, "GRAIN ");
    let measured: Vec<String> = lines.iter().map(|l| field(l, "cpu")).collect();
    let want: Vec<String> = cpus.iter().map(u64::to_string).collect();
    assert_eq!(measured, want, "{out}");
    if cpus.len() == 1 {
        assert!(lines_of(&out, "GRAINS ").is_empty(), "{out}");
        return;
    }
    let ranked = field(lines_of(&out, "GRAINS ")[0], "fastest_first");
    let listed: Vec<(String, f64)> = ranked
        .split(',')
        .map(|entry| {
            let (cpu, rest) = entry.split_once(':').unwrap();
            (
                cpu.to_string(),
                rest.split('/').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert!(listed.windows(2).all(|w| w[0].1 <= w[1].1), "{ranked}");
    // Each CPU once, with its line's median (printed to 0.001 there, 0.01 here).
    let mut named: Vec<&String> = listed.iter().map(|(c, _)| c).collect();
    named.sort();
    let mut want_sorted = want.iter().collect::<Vec<_>>();
    want_sorted.sort();
    assert_eq!(named, want_sorted, "{ranked}");
    for line in &lines {
        let (_, median) = listed
            .iter()
            .find(|(c, _)| *c == field(line, "cpu"))
            .unwrap();
        assert!(
            (median - number(line, "median_us")).abs() <= 0.0051,
            "{line} against {ranked}"
        );
    }
}

/// `--together`: each other CPU lined up with the measured one; the
/// expectation for independent CPUs and the excess are the arithmetic of
/// the printed shares, and TOGETHERS ranks exactly the lined-up CPUs.
#[test]
fn together_lines_up_each_other_cpu_with_the_measured_one() {
    let cpus = allowed_cpus();
    let measured = *cpus.last().unwrap();
    let out = common::stdout_of_success(bench().args(["--together", "0.3"]));
    let lines = lines_of(&out, "TOGETHER ");
    let others: Vec<String> = cpus
        .iter()
        .filter(|&&c| c != measured)
        .map(u64::to_string)
        .collect();
    let with: Vec<String> = lines.iter().map(|l| field(l, "with")).collect();
    assert_eq!(with, others, "{out}");
    let mut lined_up = Vec::new();
    for line in &lines {
        assert_eq!(field(line, "cpu"), measured.to_string(), "{line}");
        if field(line, "agree") == "none" {
            continue;
        }
        let shares: Vec<f64> = field(line, "slow_share")
            .split(',')
            .map(|s| s.parse().unwrap())
            .collect();
        let independent = shares[0] * shares[1] + (1.0 - shares[0]) * (1.0 - shares[1]);
        assert!(
            (number(line, "independent") - independent).abs() < 0.002,
            "{line}"
        );
        let excess = number(line, "agree") - number(line, "independent");
        assert!((number(line, "excess") - excess).abs() < 0.0015, "{line}");
        assert!(number(line, "milliseconds") <= 302.0, "{line}");
        lined_up.push(field(line, "with"));
    }
    let last = lines_of(&out, "TOGETHERS ")[0];
    assert_eq!(field(last, "others"), others.len().to_string(), "{last}");
    let ranked = field(last, "by_excess");
    let mut named: Vec<String> = if ranked == "none" {
        Vec::new()
    } else {
        ranked
            .split(',')
            .map(|p| p.split(':').next().unwrap().to_string())
            .collect()
    };
    named.sort();
    lined_up.sort();
    assert_eq!(named, lined_up, "{out}");
}

#[test]
fn the_fine_modes_are_refused_with_other_modes_and_negative_seconds() {
    assert_refused(
        &["--series", "2", "--grain", "1"],
        "--series and --grain: one at a time",
    );
    assert_refused(
        &["--together", "-1"],
        "--grain and --together: seconds, at least 0",
    );
}

/// `--steps`: a STEP line a step; STEPS gives their fastest, median and
/// slowest and their logs' spread as the lines say, and taking out what
/// the calibration before predicts (a least-squares slope) never widens
/// that spread: the slope of zero would leave it as it is.
#[test]
fn calibrated_steps_are_listed_and_the_adjustment_never_widens_them() {
    let out =
        common::stdout_of_success(bench().args(["--steps", "8", "--work", "3", "--loop", "20000"]));
    let steps: Vec<f64> = lines_of(&out, "STEP ")
        .iter()
        .map(|l| number(l, "step_ms"))
        .collect();
    assert_eq!(steps.len(), 8, "{out}");
    let last = lines_of(&out, "STEPS ")[0];
    let mut sorted = steps.clone();
    sorted.sort_by(f64::total_cmp);
    let spread: Vec<f64> = field(last, "step_ms")
        .split('/')
        .map(|v| v.parse().unwrap())
        .collect();
    let median = (sorted[3] + sorted[4]) / 2.0;
    for (printed, want) in spread.iter().zip([sorted[0], median, sorted[7]]) {
        assert!((printed - want).abs() <= 0.051, "{last}: {want}");
    }
    let logs: Vec<f64> = steps.iter().map(|s| s.ln()).collect();
    let mean = logs.iter().sum::<f64>() / 8.0;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 7.0).sqrt();
    assert!((number(last, "log_sd") - sd).abs() < 0.001, "{last}: {sd}");
    assert!(
        number(last, "log_sd_adjusted") <= number(last, "log_sd") + 0.0001,
        "{last}"
    );
    for rho in ["rho_before", "rho_after"] {
        assert!((-1.0..=1.0).contains(&number(last, rho)), "{last}");
    }
}

/// The GPU machine's `--cpu all --grain 1` lines (calls 67-69 on one lent
/// H100, tests/fixtures/h200-overhead/2026-12-07-h100): the CPUs at one
/// level for the whole second, slow and fast, that docs/footprint.md names,
/// gaps under 1% of the time, and GRAINS ranking the lines' medians.
#[test]
fn the_gpu_machines_grain_lines_are_what_the_docs_say() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-07-h100");
    for (call, slow, fast) in [
        (67, vec![0, 1, 5, 6, 9, 11, 12, 13, 15], vec![7]),
        (68, vec![6, 9], vec![7, 13]),
        (69, vec![0, 1, 2, 3, 4, 5, 6, 8, 11, 12, 13], vec![10]),
    ] {
        let out = std::fs::read_to_string(folder.join(format!("grain-call{call}.txt"))).unwrap();
        let lines = lines_of(&out, "GRAIN ");
        assert_eq!(lines.len(), 16, "call {call}");
        let one_level = |faster: bool| -> Vec<u64> {
            lines
                .iter()
                .filter(|l| field(l, "slow_share") == "none")
                .filter(|l| (number(l, "median_us") <= 2.5) == faster)
                .map(|l| field(l, "cpu").parse().unwrap())
                .collect()
        };
        assert_eq!(one_level(false), slow, "call {call}");
        assert_eq!(one_level(true), fast, "call {call}");
        assert!(
            lines.iter().all(|l| number(l, "gap_share") < 0.01),
            "call {call}"
        );
        let ranked = field(lines_of(&out, "GRAINS ")[0], "fastest_first");
        let medians: Vec<f64> = ranked
            .split(',')
            .map(|e| {
                e.split(':')
                    .nth(1)
                    .unwrap()
                    .split('/')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(
            medians.windows(2).all(|w| w[0] <= w[1]),
            "call {call}: {ranked}"
        );
    }
}
