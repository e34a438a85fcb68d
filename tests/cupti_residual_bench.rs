//! benches/gpu_cupti_residual.py, the bench that asks CUPTI alone what a
//! launch costs after kernel records were switched on and off, driven with a
//! stand-in worker interpreter: each round's processes share a drift (0.5 µs
//! a launch more every round), and a scenario adds a known cost. The summary
//! must find exactly each cost within rounds, say a dying worker round by
//! round, and read the same from the rows it stored.

mod common;

use std::path::Path;
use std::process::Command;

/// The stand-in interpreter: `python3 <bench> --worker S` prints the row a
/// worker prints. A launch takes 10 µs plus 0.5 µs a round (the n-th
/// process of SCENARIOS a round), plus the scenario's cost; `toggled` dies
/// as a crashed worker does; the CUPTI path must be the one the bench got.
const WORKER: &str = r#"#!/usr/bin/env python3
import json, os, sys
scenario = sys.argv[-1]
if os.environ.get("PREWARM_DOCTOR_CUPTI") != "/opt/cupti/libcupti.so.13":
    sys.exit("the worker got another libcupti")
counter = os.path.join(os.environ["STANDIN_DIR"], "count")
n = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(n + 1))
if scenario == "toggled":
    sys.stderr.write("Segmentation fault\n")
    sys.exit(139)
cost = {"subscribed": 0.05, "timed-on": 0.8, "other-on": 0.0}.get(scenario, 0.0)
launch = 10.0 + 0.5 * (n // int(os.environ["STANDIN_PER_ROUND"])) + cost
print("RESULT " + json.dumps({"launch_us": launch, "blocks_us": [launch] * 5, "launches": 5000,
                              "record_bytes": 4096 if scenario.endswith("-on") else 0, "toggles": 100}))
"#;

fn bench(dir: &Path, scenarios: &str, per_round: usize) -> Command {
    common::write_executable(dir, "python", WORKER);
    let mut c = Command::new("python3");
    c.arg(common::repo("benches/gpu_cupti_residual.py"))
        .arg("5")
        .env("CUPTI_RESIDUAL_PYTHON", dir.join("python"))
        .env("CUPTI_RESIDUAL_ROWS", dir.join("rows.txt"))
        .env("CUPTI_RESIDUAL_SCENARIOS", scenarios)
        .env("PREWARM_DOCTOR_CUPTI", "/opt/cupti/libcupti.so.13")
        .env("STANDIN_PER_ROUND", per_round.to_string())
        .env("STANDIN_DIR", dir);
    c
}

/// The CUPTI_RESIDUAL_PAIRED line of `scenario` against `against`.
fn pairing<'a>(out: &'a str, scenario: &str, against: &str) -> &'a str {
    line(
        out,
        "CUPTI_RESIDUAL_PAIRED",
        &format!("scenario={scenario} against={against} "),
    )
}

fn line<'a>(out: &'a str, start: &str, has: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start) && l.contains(has))
        .unwrap_or_else(|| panic!("no {start} line with {has:?} in\n{out}"))
}

/// Each scenario's own cost found in every round though the rounds drift
/// by 2 µs; nothing for the scenario that costs nothing; against the
/// subscriber, the records' share alone; which scenarios took records.
#[test]
fn each_scenarios_cost_is_found_within_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(&mut bench(
        dir.path(),
        "plain subscribed timed-on other-on",
        4,
    ));
    let on = pairing(&out, "timed-on", "plain");
    assert!(on.contains(" rounds=5 added_us=0.800 "), "{on}");
    assert!(on.contains(" slower=5/5 "), "{on}");
    let other = pairing(&out, "other-on", "plain");
    assert!(other.contains(" added_us=0.000 "), "{other}");
    assert!(other.contains(" slower=0/0 "), "{other}");
    let records = pairing(&out, "timed-on", "subscribed");
    assert!(records.contains(" added_us=0.750 "), "{records}");
    let subscribed = pairing(&out, "subscribed", "plain");
    assert!(subscribed.contains(" added_us=0.050 "), "{subscribed}");
    let plain = line(&out, "CUPTI_RESIDUAL ", "scenario=plain ");
    assert!(
        plain.contains(" range_us=10.000..12.000 records=no"),
        "{plain}"
    );
    assert!(line(&out, "CUPTI_RESIDUAL ", "scenario=other-on ").ends_with(" records=yes"));
}

/// A worker that dies is said round by round with its exit and last
/// stderr line, its scenario gets no pairing, the others are whole; the
/// stored rows give the very summary the run printed.
#[test]
fn a_dying_worker_is_named_and_the_stored_rows_give_the_same_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::stdout_of_success(&mut bench(dir.path(), "timed-on toggled", 3));
    let failed: Vec<&str> = out.lines().filter(|l| l.starts_with("FAILED")).collect();
    assert_eq!(failed.len(), 5, "{out}");
    assert!(
        failed
            .iter()
            .all(|l| l.starts_with("FAILED scenario=toggled round=")
                && l.ends_with(" exit=139: Segmentation fault")),
        "{failed:?}"
    );
    assert!(!out.contains("scenario=toggled against"), "{out}");
    let on = pairing(&out, "timed-on", "plain");
    assert!(on.contains(" rounds=5 added_us=0.800 "), "{on}");

    let rows = std::fs::read_to_string(dir.path().join("rows.txt")).unwrap();
    assert_eq!(rows.lines().count(), 10, "{rows}");
    common::stored_rows_give_the_printed_summary(
        "benches/gpu_cupti_residual.py",
        &dir.path().join("rows.txt"),
        "CUPTI_RESIDUAL",
        &out,
    );
}

/// A scenario the bench does not know is refused by name before anything
/// runs.
#[test]
fn an_unknown_scenario_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = bench(dir.path(), "timed-on toggeld", 2).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown scenario 'toggeld'"), "{err}");
    assert!(!dir.path().join("count").exists(), "nothing ran");
}

/// The CUPTI_RESIDUAL lines of `text`, in order.
fn residual_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("CUPTI_RESIDUAL"))
        .map(str::to_string)
        .collect()
}

/// The H200 calls' stored rows (tests/fixtures/h200-overhead/2026-12-06,
/// calls 32 to 35) summarise to exactly what each call printed on the GPU;
/// records came back only where a kernel was launched while they were on
/// (`once-idle` and `finalized` switched them on and off with nothing
/// launched between; the `early-` ones had them on as CUDA started), and
/// every scenario ran in every round (no worker failed; calls 34 and 35
/// stopped at their deadlines, which they say).
#[test]
fn the_h200_calls_rows_give_their_printed_summaries() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-06");
    for (call, rounds, scenarios) in [(32, 8, 7), (33, 24, 4), (34, 12, 6), (35, 11, 5)] {
        let rows = folder.join(format!("cupti-residual-call{call}.txt"));
        let stored = common::stdout_of_success(
            Command::new("python3")
                .arg(common::repo("benches/gpu_cupti_residual.py"))
                .arg("--summary")
                .arg(&rows),
        );
        let printed =
            std::fs::read_to_string(folder.join(format!("summary-call{call}.txt"))).unwrap();
        assert_eq!(
            residual_lines(&stored),
            residual_lines(&printed),
            "call {call}"
        );
        let text = std::fs::read_to_string(&rows).unwrap();
        assert_eq!(text.lines().count(), rounds * scenarios, "call {call}");
        for l in residual_lines(&stored)
            .iter()
            .filter(|l| !l.contains("PAIRED"))
        {
            assert!(l.contains(&format!(" runs={rounds} ")), "{l}");
            let took = [
                "timed-on",
                "other-on",
                "toggled",
                "in-callback",
                "early-once",
                "early-then-once",
            ]
            .iter()
            .any(|s| l.contains(&format!("scenario={s} ")));
            let records = if took { "records=yes" } else { "records=no" };
            assert!(l.ends_with(records), "{l}");
        }
    }
}

/// docs/footprint.md quotes the pooled pairings of calls 32 to 35: each
/// quoted line is what the bench's summary of every stored row prints.
#[test]
fn the_footprint_docs_pooled_pairings_are_the_stored_rows() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-06");
    let mut c = Command::new("python3");
    c.arg(common::repo("benches/gpu_cupti_residual.py"))
        .arg("--summary");
    for call in 32..=35 {
        c.arg(folder.join(format!("cupti-residual-call{call}.txt")));
    }
    let pooled = residual_lines(&common::stdout_of_success(&mut c));
    let docs = std::fs::read_to_string(common::repo("docs/footprint.md")).unwrap();
    let quoted: Vec<&str> = docs
        .lines()
        .filter(|l| l.starts_with("CUPTI_RESIDUAL_PAIRED"))
        .collect();
    assert_eq!(quoted.len(), 6, "{quoted:?}");
    for q in quoted {
        assert!(
            pooled.iter().any(|p| p == q),
            "not in the pooled summary: {q}"
        );
    }
}

/// Call 38 (an H100, tests/fixtures/h200-overhead/2026-12-06-h100) ran the
/// first rounds of `context-once`: records switched on and off for the
/// running context only (`cuptiActivityEnableContext`), never for the whole
/// process. Its stored rows give what the call printed (the zoo's log holds
/// each pairing twice: its summary and the bench's tail), every scenario
/// in all 24 rounds, no records taken; and that switch leaves the launch
/// cost the process-wide one leaves: its interval lies above zero.
#[test]
fn switching_records_for_one_context_leaves_the_launch_cost_too() {
    let folder = common::repo("tests/fixtures/h200-overhead/2026-12-06-h100");
    let rows = folder.join("cupti-residual-call38.txt");
    let stored = residual_lines(&common::stdout_of_success(
        Command::new("python3")
            .arg(common::repo("benches/gpu_cupti_residual.py"))
            .arg("--summary")
            .arg(&rows),
    ));
    let mut printed =
        residual_lines(&std::fs::read_to_string(folder.join("summary-call38.txt")).unwrap());
    let mut seen = std::collections::HashSet::new();
    printed.retain(|l| seen.insert(l.clone()));
    assert_eq!(stored, printed);
    assert_eq!(
        std::fs::read_to_string(&rows).unwrap().lines().count(),
        24 * 4
    );
    for l in stored.iter().filter(|l| !l.contains("PAIRED")) {
        assert!(l.contains(" runs=24 ") && l.ends_with(" records=no"), "{l}");
    }
    let context_once = pairing_line(&stored, "context-once");
    let low: f64 = context_once
        .split(" added_us_90=")
        .nth(1)
        .and_then(|r| r.split("..").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{context_once}"));
    assert!(low > 0.0, "{context_once}");
}

/// The pairing of `scenario` against the plain run among summary lines.
fn pairing_line<'a>(lines: &'a [String], scenario: &str) -> &'a str {
    let want = format!("CUPTI_RESIDUAL_PAIRED scenario={scenario} against=plain ");
    lines
        .iter()
        .find(|l| l.starts_with(&want))
        .unwrap_or_else(|| panic!("no {want} in {lines:#?}"))
}
