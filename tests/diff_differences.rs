//! `diff` says, first and in every format it writes (text, Markdown, JSON),
//! when the two runs are not alike: different commands, different sets of
//! variants, a variant of the same name defined otherwise; and each run's
//! damaged files. The JSON carries both commands.

mod common;

use common::{copy_tree, repo};
use std::path::Path;
use std::process::{Command, Output};

fn diff(old: &Path, new: &Path, format: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .arg("diff")
        .arg(old)
        .arg(new)
        .args(["--format", format])
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The lines before the first variant's section, joined (wrapping undone).
fn opening_text(text: &str) -> String {
    text.lines()
        .skip(1)
        .take_while(|l| !l.contains(" attempts)") && !l.contains(": only in the"))
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The quoted paragraphs before the first variant's heading, unescaped.
fn opening_md(md: &str) -> Vec<String> {
    md.split("\n### ")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("> **")?.strip_suffix("**"))
        .map(|l| l.replace('\\', ""))
        .collect()
}

const CUBLAS: &str = "python3 examples/cublas_first_backward.py --steps 4";
const TRITON: &str = "python3 examples/triton_spill_autotune.py --steps 4";

#[test]
fn runs_of_two_scripts_say_so_first_in_every_format() {
    let (old, new) = (
        repo("tests/fixtures/h200/repeat-cublas"),
        repo("tests/fixtures/h200/repeat-triton"),
    );
    let commands = format!("these runs ran different commands: old: {CUBLAS}; new: {TRITON}");
    let variants = "these runs have different variants: old: baseline, cublas; new: baseline, \
                    triton_autotune";

    let text = diff(&old, &new, "text");
    assert_eq!(text.status.code(), Some(0));
    let t = stdout(&text);
    assert_eq!(opening_text(&t), format!("{commands} {variants}"), "{t}");

    let md = stdout(&diff(&old, &new, "md"));
    assert_eq!(
        opening_md(&md),
        vec![commands.clone(), variants.to_string()],
        "{md}"
    );

    let j = json(&diff(&old, &new, "json"));
    let words = |v: &serde_json::Value| -> String {
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(words(&j["old_command"]), CUBLAS);
    assert_eq!(words(&j["new_command"]), TRITON);
    assert_eq!(
        j["differences"],
        serde_json::json!([commands, variants]),
        "{j}"
    );
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&j["old_variants"]), ["baseline", "cublas"]);
    assert_eq!(names(&j["new_variants"]), ["baseline", "triton_autotune"]);
}

#[test]
fn two_runs_of_one_command_and_matrix_say_nothing_of_it() {
    let run = repo("tests/fixtures/h200/repeat-cublas");
    let t = stdout(&diff(&run, &run, "text"));
    assert_eq!(opening_text(&t), "", "{t}");
    assert!(opening_md(&stdout(&diff(&run, &run, "md"))).is_empty());
    let j = json(&diff(&run, &run, "json"));
    assert_eq!(j["differences"], serde_json::json!([]));
    assert_eq!(j["old_command"], j["new_command"]);
    assert_eq!(j["old_incomplete_data"], serde_json::json!([]));
}

/// The same command and variant names, one variant's arguments changed.
#[test]
fn a_variant_defined_otherwise_is_named_with_both_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new");
    copy_tree(&repo("tests/fixtures/h200/repeat-cublas"), &new);
    let meta = new.join("run.json");
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    doc["variants"][1]["args"] = serde_json::json!(["--prewarm-cublas", "--fast"]);
    std::fs::write(&meta, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let old = repo("tests/fixtures/h200/repeat-cublas");
    let expected = "variant 'cublas' is defined differently: old: args: --prewarm-cublas; \
                    prewarms: cublas; new: args: --prewarm-cublas --fast; prewarms: cublas";
    assert_eq!(opening_text(&stdout(&diff(&old, &new, "text"))), expected);
    assert_eq!(opening_md(&stdout(&diff(&old, &new, "md"))), vec![expected]);
    let j = json(&diff(&old, &new, "json"));
    assert_eq!(j["differences"], serde_json::json!([expected]));
    assert_eq!(j["old_command"], j["new_command"]);
}

/// A damaged file of one run: the diff opens with it too, and exits 4.
#[test]
fn a_damaged_run_is_said_first_in_the_diff_too() {
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new");
    copy_tree(&repo("tests/fixtures/h200/repeat-cublas"), &new);
    let nvml = new.join("cublas/1/vm/nvml.events");
    let len = std::fs::metadata(&nvml).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&nvml)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let old = repo("tests/fixtures/h200/repeat-cublas");
    let warning = "new run: these verdicts rest on incomplete data: cublas/1/vm/nvml.events, ";
    let text = diff(&old, &new, "text");
    assert_eq!(text.status.code(), Some(4));
    let opening = opening_text(&stdout(&text));
    assert!(opening.starts_with(warning), "{opening}");
    let md = diff(&old, &new, "md");
    assert_eq!(md.status.code(), Some(4));
    let lines = opening_md(&stdout(&md));
    assert!(
        lines.len() == 1 && lines[0].starts_with(warning),
        "{lines:?}"
    );
    let j = diff(&old, &new, "json");
    assert_eq!(j.status.code(), Some(4));
    let j = json(&j);
    assert_eq!(j["old_incomplete_data"], serde_json::json!([]));
    assert_eq!(
        j["new_incomplete_data"][0]["file"],
        "cublas/1/vm/nvml.events"
    );
}
