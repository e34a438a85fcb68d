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
    for flag in ["--processes", "--series"] {
        assert_refused(&[flag, "-1"], "--processes and --series at least 0");
    }
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
