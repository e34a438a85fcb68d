//! benches/rounds_needed.py: the chance that N alternated rounds resolve a
//! footprint target at a given true cost, drawn from the stored rounds'
//! own noise. Checked against the summary's pairing of the same stored
//! rounds, against binomial arithmetic on planted rounds, and on bad input.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn bench() -> Command {
    let mut command = Command::new("python3");
    command.arg(common::repo("benches/rounds_needed.py"));
    command
}

/// The value of `key=` in one of the bench's lines.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

fn line<'a>(out: &'a str, prefix: &str, having: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(prefix) && l.contains(having))
        .unwrap_or_else(|| panic!("no {prefix} line with {having} in {out}"))
}

/// The README's fsdp2 default rounds (docs/footprint.md names the calls).
fn fsdp2_default_files() -> Vec<PathBuf> {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-07-h100");
    [40, 41, 42, 51, 55, 60, 62, 64]
        .iter()
        .map(|c| folder.join(format!("fsdp2-default-call{c}.txt")))
        .collect()
}

/// The stored rounds it reads are the summary's: the same count, median
/// ratio and exact interval as the summary's PAIRED line, which pairs
/// the rows by its own code.
#[test]
fn the_stored_rounds_are_the_summarys() {
    let files = fsdp2_default_files();
    let out = common::stdout_of_success(
        bench()
            .args(["--costs", "1.0", "--rounds", "79", "--draws", "50"])
            .args(&files),
    );
    let summary = common::stdout_of_success(
        Command::new("python3")
            .arg(common::repo("benches/gpu_overhead_summary.py"))
            .args(["fsdp2", "default", "0"])
            .args(&files),
    );
    let stored = line(&out, "STORED ", "");
    let paired = line(&summary, "PAIRED ", "mode=doctor");
    assert_eq!(field(stored, "rounds"), field(paired, "rounds"), "{stored}");
    assert_eq!(
        field(stored, "ratio"),
        field(paired, "step1_ratio"),
        "{stored}"
    );
    // Printed to 0.0001 here and 0.001 there: equal within the rounding.
    let bounds = |text: &str, sep: char| -> Vec<f64> {
        text.split(sep).map(|v| v.parse().unwrap()).collect()
    };
    let ours = bounds(field(stored, "ratio_90"), '-');
    let theirs = bounds(field(paired, "step1_ratio_90"), '-');
    for (a, b) in ours.iter().zip(&theirs) {
        assert!((a - b).abs() <= 0.00051, "{stored} against {paired}");
    }
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("ROUNDS_NEEDED "))
            .count(),
        1
    );
}

/// A STEPTIMES file `name` of `ratios.len()` rounds: plain's step 1 1.0 s,
/// the doctor's the round's ratio.
fn planted(dir: &Path, name: &str, ratios: &[f64]) -> PathBuf {
    let mut text = String::new();
    for (r, ratio) in ratios.iter().enumerate() {
        for (mode, step1) in [("plain", 1.0), ("doctor", *ratio)] {
            text += &format!(
                "{mode} round={} STEPTIMES {{\"step1\": {step1}, \"steady_median\": 0.02, \"steps\": 30, \"workload\": \"planted.py\"}}\n",
                r + 1
            );
        }
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// P(Binomial(n, 1/2) < k).
fn below(n: u64, k: u64) -> f64 {
    let choose = |n: u64, i: u64| (0..i).fold(1.0, |c, j| c * (n - j) as f64 / (j + 1) as f64);
    (0..k).map(|i| choose(n, i)).sum::<f64>() / 2f64.powi(n as i32)
}

/// Half the planted rounds read 0.9, half 1.1 (median 1.0). Twenty rounds
/// drawn from them say `met` only when the exact interval's top is a 0.9:
/// at least 20 - k + 1 draws of 0.9, where k is the largest order statistic
/// whose interval covers 90% — binomial arithmetic done here. Scaled by
/// 1.2 every round is above 1.03 (always over); by 0.9, every one within.
#[test]
fn planted_rounds_resolve_as_the_binomial_says() {
    let dir = tempfile::tempdir().unwrap();
    let ratios: Vec<f64> = (0..40)
        .map(|i| if i % 2 == 0 { 0.9 } else { 1.1 })
        .collect();
    let file = planted(dir.path(), "planted.txt", &ratios);
    let out = common::stdout_of_success(
        bench()
            .args([
                "--costs",
                "1.0,1.2,0.9",
                "--rounds",
                "20",
                "--draws",
                "4000",
            ])
            .arg(&file),
    );
    let n = 20;
    let k = (1..=n / 2)
        .take_while(|&k| 1.0 - 2.0 * below(n, k) >= 0.90)
        .last()
        .unwrap();
    assert_eq!(k, 6, "the 90% interval of 20 rounds");
    let expected = below(n, k);
    let even = line(&out, "ROUNDS_NEEDED ", "cost=1 ");
    for key in ["met", "over"] {
        let share: f64 = field(even, key).parse().unwrap();
        assert!(
            (share - expected).abs() < 0.02,
            "{key} {share} against {expected}: {even}"
        );
    }
    let high = line(&out, "ROUNDS_NEEDED ", "cost=1.2 ");
    assert_eq!(
        (field(high, "met"), field(high, "over")),
        ("0.000", "1.000")
    );
    let low = line(&out, "ROUNDS_NEEDED ", "cost=0.9 ");
    assert_eq!((field(low, "met"), field(low, "over")), ("1.000", "0.000"));
    assert_eq!(field(line(&out, "STORED ", ""), "rounds"), "40");
}

fn refused(args: &[&str], files: &[&Path], says: &str) {
    let out = bench().args(args).args(files).output().unwrap();
    assert!(!out.status.success(), "{args:?} ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(says), "{args:?}: {err}");
}

#[test]
fn bad_input_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let few = planted(dir.path(), "few.txt", &[1.0; 19]);
    refused(
        &[],
        &[&few],
        "19 stored rounds pair doctor with plain on step1: draws from so few values plan nothing (20 at least)",
    );
    let file = planted(dir.path(), "planted.txt", &[1.0; 20]);
    refused(&["--rounds", "3"], &[&file], "--rounds: 5 or more each");
    refused(
        &["--costs", "a,b"],
        &[&file],
        "--costs a,b: not a comma list of numbers",
    );
    refused(
        &["--key", "step2"],
        &[&file],
        "--key step2: no target known for it; give --limit",
    );
    // Rounds of two shapes are not pooled: the file and line are named.
    let other = dir.path().join("other.txt");
    std::fs::write(
        &other,
        "plain round=1 STEPTIMES {\"step1\": 1.0, \"steps\": 12, \"workload\": \"planted.py\"}\n",
    )
    .unwrap();
    refused(
        &[],
        &[&file, &other],
        "other.txt:1: steps=12, but earlier rows have 30",
    );
    // The same file twice is the same runs twice.
    refused(&[], &[&file, &file], "a run already read");
}
