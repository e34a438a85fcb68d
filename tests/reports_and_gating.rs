//! `report`, `diff` and `--fail-if` on real recordings: formats, exit codes,
//! and damaged or foreign input.

mod common;

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn doctor() -> Command {
    Command::cargo_bin("prewarm-doctor").unwrap()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rank_file(run: &Path) -> PathBuf {
    let host = run.join("default/1/vm");
    std::fs::read_dir(&host)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rank-")
                && p.extension().is_some_and(|x| x == "events")
        })
        .or_else(|| {
            std::fs::read_dir(&host)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().to_string();
                    n.ends_with(".events") && n != "nvml.events"
                })
        })
        .unwrap()
}

#[test]
fn the_bundled_example_renders_its_matrix_and_verdicts() {
    doctor()
        .args(["report", "reports/h200-matrix"])
        .current_dir(root())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "-- evidence (each prewarm against 'baseline'; rules: docs/verdicts.md)",
        ))
        .stdout(predicate::str::contains(
            "triton_autotune WORKS: moved 282.0 MiB and 9.52 s of Triton autotune",
        ))
        .stdout(predicate::str::contains(
            "triton_autotune: WORKS (noise measured over 2 baseline and 2 variant attempts)",
        ))
        .stdout(predicate::str::contains(
            "excluded: baseline/3: interrupted",
        ))
        .stdout(predicate::str::contains("step 1 took"));
}

#[test]
fn json_is_versioned_and_holds_the_account() {
    let out = doctor()
        .args([
            "report",
            "tests/fixtures/h200/oom-nccl-baseline",
            "--format",
            "json",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema_version"], 4);
    assert_eq!(v["tool"], "prewarm-doctor");
    let p = &v["attempts"][0]["processes"][0];
    assert_eq!(p["forensics"][0]["source"], "torch pool");
    assert_eq!(p["forensics"][0]["preceded_by"][0][0], "nccl_comm");
    assert!(p["phases"][1]["gap_end"]["parts"].as_array().unwrap().len() >= 3);
    assert!(
        p["late_warmups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["class"] == "nccl_comm")
    );
    let m = doctor()
        .args(["report", "reports/h200-matrix", "--format", "json"])
        .current_dir(root())
        .output()
        .unwrap();
    let m: serde_json::Value = serde_json::from_slice(&m.stdout).unwrap();
    let cublas = &m["matrix"]["verdicts"][0];
    assert_eq!(cublas["class"], "works");
    assert_eq!(cublas["confidence"], "measured");
    assert_eq!(cublas["by_class"][0]["class"], "cublas");
    assert_eq!(cublas["by_class"][0]["bytes"]["baseline"]["n"], 2);
    assert_eq!(cublas["by_class"][0]["bytes"]["outcome"], "down");
    assert!(cublas["costs"]["setup_s"]["baseline"]["min"].is_number());
    let nccl = &m["matrix"]["verdicts"][2];
    assert_eq!(nccl["variant"], "nccl_comm");
    // The charge is the total held at step-1 end; the split explains it.
    assert_eq!(nccl["costs"]["held_extra"], 390.0 * 1048576.0);
    assert_eq!(nccl["costs"]["held_total_step1_end"]["outcome"], "up");
    let held = nccl["costs"]["held_step1_end"].as_array().unwrap();
    let mut up: Vec<&serde_json::Value> = held
        .iter()
        .filter(|h| h["delta"].as_f64().unwrap() > 0.0)
        .collect();
    up.sort_by(|a, b| {
        b["delta"]
            .as_f64()
            .unwrap()
            .total_cmp(&a["delta"].as_f64().unwrap())
    });
    assert_eq!(up[0]["source"]["kind"], "library");
    assert_eq!(up[0]["source"]["name"], "nccl");
    assert_eq!(up[0]["delta"], 388.0 * 1048576.0);
    assert_eq!(
        m["matrix"]["variants"][0]["excluded"][0]["reasons"][0]["reason"],
        "interrupted"
    );
}

#[test]
fn attempts_can_be_selected() {
    doctor()
        .args(["report", "reports/h200-matrix", "--attempt", "nccl_comm/2"])
        .current_dir(root())
        .assert()
        .success()
        .stdout(predicate::str::contains("variant 'nccl_comm', attempt 2"));
    doctor()
        .args(["report", "reports/h200-matrix", "--attempt", "nope"])
        .current_dir(root())
        .assert()
        .code(5)
        .stderr(predicate::str::contains("--attempt nope: no such attempt"));
}

#[test]
fn gating_exit_codes() {
    let run = |args: &[&str]| {
        doctor()
            .args(args)
            .current_dir(root())
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "cublas:verdict!=works"
        ]),
        Some(0)
    );
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "nccl_comm:verdict==works"
        ]),
        Some(11)
    );
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "verdict==regression"
        ]),
        Some(0)
    );
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "all:step1_oop>0"
        ]),
        Some(0)
    );
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "baseline:step1_oop>0"
        ]),
        Some(11)
    );
    assert_eq!(
        run(&[
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "step1_peak>+5%"
        ]),
        Some(2)
    );
    assert_eq!(
        run(&["report", "reports/h200-matrix", "--fail-if", "peak>1"]),
        Some(2)
    );
    assert_eq!(
        run(&[
            "diff",
            "tests/fixtures/h200/shared-cache",
            "reports/h200-matrix",
            "--fail-if",
            "step1_oop>+5%"
        ]),
        Some(0)
    );
    assert_eq!(
        run(&[
            "diff",
            "tests/fixtures/h200/shared-cache",
            "reports/h200-matrix",
            "--fail-if",
            "cublas:step1_time>+50%"
        ]),
        Some(11)
    );
    assert_eq!(
        run(&[
            "diff",
            "tests/fixtures/h200/examples-cublas-prewarm",
            "tests/fixtures/h200/examples-cublas-baseline",
            "--fail-if",
            "step1_oop>+64MiB"
        ]),
        Some(11)
    );
}

/// A gate naming something the run does not have is an error listing what it
/// has, never a silent pass; results print human units.
#[test]
fn gates_name_real_things_and_print_human_units() {
    let out = |args: &[&str]| {
        let o = doctor().args(args).current_dir(root()).output().unwrap();
        (o.status.code(), String::from_utf8(o.stderr).unwrap())
    };
    let (code, err) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "cublsa:step1_peak>1GiB",
    ]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no variant or prewarm named 'cublsa' in this run (variants: baseline, cublas, triton_autotune, nccl_comm, all; prewarms: cublas, nccl_comm, triton_autotune)"),
        "{err}"
    );
    let (code, err) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "baseline:verdict!=works",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("variant 'baseline' has no verdict"), "{err}");
    let (code, err) = out(&[
        "report",
        "tests/fixtures/h200/examples-cublas-baseline",
        "--fail-if",
        "verdict!=works",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("this run has no verdicts"), "{err}");
    let (code, err) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "nccl_comm:step1_peak>2.3GiB",
    ]);
    assert_eq!(code, Some(11));
    assert!(
        err.contains(
            "--fail-if 'nccl_comm:step1_peak>2.3GiB' on 'nccl_comm': FAILED: 2.4 GiB > 2.3 GiB"
        ),
        "{err}"
    );
    let (code, err) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "nccl_comm:step1_peak>2.5GB",
    ]);
    assert_eq!(code, Some(11));
    assert!(err.contains("FAILED: 2.53 GB > 2.50 GB"), "{err}");
    assert!(err.contains("GB/MB/kB are decimal"), "{err}");
    let (code, _) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "nccl_comm:step1_peak>2.6GB",
    ]);
    assert_eq!(code, Some(0));
    let (code, err) = out(&[
        "report",
        "reports/h200-matrix",
        "--fail-if",
        "step1_peak>1.5s",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("a byte limit takes"), "{err}");
}

/// In `diff`, a variant on one side only fails the gates unless allowed.
#[test]
fn diff_gates_fail_on_variants_present_on_one_side() {
    let out = |extra: &[&str]| {
        let mut args = vec![
            "diff",
            "tests/fixtures/h200/examples-cublas-baseline",
            "reports/h200-matrix",
            "--fail-if",
            "step1_oop>+5%",
        ];
        args.extend_from_slice(extra);
        let o = doctor().args(&args).current_dir(root()).output().unwrap();
        (
            o.status.code(),
            String::from_utf8(o.stdout).unwrap(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    let (code, stdout, stderr) = out(&[]);
    assert_eq!(code, Some(11));
    assert!(stdout.contains("default: only in the old run"), "{stdout}");
    assert!(stdout.contains("cublas: only in the new run"), "{stdout}");
    assert!(
        stderr.contains("on 'cublas': FAILED: variant 'cublas' is only in the new run (pass --allow-missing to accept that)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("variant 'default' is only in the old run"),
        "{stderr}"
    );
    let (code, _, stderr) = out(&["--allow-missing"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("ok: variant 'cublas' is only in the new run (--allow-missing)"));
}

#[test]
fn diff_shows_changes_side_by_side() {
    doctor()
        .args([
            "diff",
            "tests/fixtures/h200/examples-cublas-baseline",
            "tests/fixtures/h200/examples-cublas-prewarm",
        ])
        .current_dir(root())
        .assert()
        .success()
        .stdout(predicate::str::contains("step-1 out-of-pool"))
        .stdout(predicate::str::contains("->"));
}

#[test]
fn a_foreign_folder_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello").unwrap();
    doctor()
        .arg("report")
        .arg(dir.path())
        .assert()
        .code(3)
        .stderr(predicate::str::contains(
            "is not a prewarm-doctor run directory",
        ));
}

/// The recording's command exited 0, so a rank file that stops mid-record
/// was cut after it was written: damage (exit 4), read up to the cut.
#[test]
fn a_truncated_rank_file_is_read_up_to_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    common::copy_tree(
        &root().join("tests/fixtures/h200/examples-cublas-baseline"),
        &run,
    );
    let f = rank_file(&run);
    let len = std::fs::metadata(&f).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
    file.set_len(len - 7).unwrap();
    doctor()
        .arg("report")
        .arg(&run)
        .assert()
        .code(4)
        .stdout(predicate::str::contains("at byte offset"))
        .stdout(predicate::str::contains("ends mid-record"))
        .stdout(predicate::str::contains("step 1 took"));
}

#[test]
fn a_corrupt_rank_file_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    common::copy_tree(
        &root().join("tests/fixtures/h200/examples-cublas-baseline"),
        &run,
    );
    let f = rank_file(&run);
    let mut bytes = std::fs::read(&f).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&f, bytes).unwrap();
    let name = f.file_name().unwrap().to_string_lossy().to_string();
    doctor()
        .arg("report")
        .arg(&run)
        .assert()
        .code(4)
        .stdout(predicate::str::contains(name))
        .stdout(predicate::str::contains("at byte offset"));
}

#[test]
fn a_garbage_shim_file_and_bad_host_json_do_not_panic() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("r");
    common::copy_tree(
        &root().join("tests/fixtures/h200/examples-cublas-baseline"),
        &run,
    );
    let host = run.join("default/1/vm");
    for e in std::fs::read_dir(&host).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".shim.jsonl") {
            std::fs::write(
                &p,
                b"\x00\xff{not json\n{\"ev\":\"step_end\",\"t\":\"x\"}\n",
            )
            .unwrap();
        }
    }
    std::fs::write(host.join("nvml.events"), b"garbage").unwrap();
    doctor()
        .arg("report")
        .arg(&run)
        .assert()
        .code(4)
        .stdout(predicate::str::contains("line 1 (byte offset 0):"));
    std::fs::write(host.join("host.json"), b"{").unwrap();
    doctor()
        .arg("report")
        .arg(&run)
        .assert()
        .code(4)
        .stdout(predicate::str::contains("not a valid host.json"));
}

#[test]
fn dump_prints_records_and_survives_a_closed_pipe() {
    let f = rank_file(&root().join("tests/fixtures/h200/examples-cublas-baseline"));
    doctor()
        .arg("dump")
        .arg(&f)
        .assert()
        .success()
        .stdout(predicate::str::contains("Context(ContextCreated"));
    doctor()
        .arg("dump")
        .arg(root().join("Cargo.toml"))
        .assert()
        .code(4)
        .stderr(predicate::str::contains("not a prewarm-doctor event file"));
}

#[test]
fn markdown_goes_to_stdout_and_the_github_step_summary() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "existing\n").unwrap();
    let out = doctor()
        .args(["report", "reports/h200-matrix", "--format", "md"])
        .env("GITHUB_STEP_SUMMARY", &summary)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("| variant | runs | step-1 peak |"));
    assert!(md.contains("- **triton\\_autotune** WORKS: moved 282.0 MiB"));
    assert!(md.contains(
        "- **triton\\_autotune**: WORKS (noise measured over 2 baseline and 2 variant attempts)"
    ));
    assert!(
        md.contains("<details><summary>baseline/1 — exit code 0: step 1 took 12.02 s</summary>")
    );
    assert!(md.contains("> excluded: baseline/3: interrupted"));
    assert!(md.contains("#### rank 0 on vm"));
    let appended = std::fs::read_to_string(&summary).unwrap();
    assert!(appended.starts_with("existing\n") && appended.ends_with(&md));
    let diff = doctor()
        .args([
            "diff",
            "tests/fixtures/h200/examples-cublas-baseline",
            "tests/fixtures/h200/examples-cublas-prewarm",
            "--format",
            "md",
        ])
        .env_remove("GITHUB_STEP_SUMMARY")
        .current_dir(root())
        .output()
        .unwrap();
    let diff = String::from_utf8(diff.stdout).unwrap();
    assert!(diff.starts_with("## prewarm-doctor diff\n\n"), "{diff}");
    assert!(
        !diff.contains("```"),
        "real tables, not a code block: {diff}"
    );
    assert!(
        diff.contains("| figure (medians) | old | new | change |\n| --- | ---: | ---: | ---: |\n"),
        "{diff}"
    );
    assert!(
        diff.contains("| step-1 out-of-pool | 218.3 MiB | 0 B | -100.0% |"),
        "{diff}"
    );
}

#[test]
fn csv_is_tidy_and_holds_the_per_phase_sources() {
    let out = doctor()
        .args([
            "report",
            "tests/fixtures/h200/examples-nccl-baseline",
            "--format",
            "csv",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "variant,attempt,host,rank,pid,phase,metric,source,value,unit"
    );
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let mut rows = 0;
    for record in reader.records() {
        let record = record.expect("valid CSV");
        assert_eq!(record.len(), 10, "every row has 10 fields: {record:?}");
        rows += 1;
    }
    assert!(rows > 20, "{rows} rows");
    assert!(
        text.lines()
            .any(|l| l.contains(",step1,allocated,nccl,408944640,B")),
        "{text}"
    );
    // The probe's own time per phase, as the terminal's step-1 line says it
    // ("the probe 16.9 ms (16.8 ms in its callbacks)").
    let probe = |key: &str| -> f64 {
        let prefix = format!(",step1,probe_time,{key},");
        let line = text.lines().find(|l| l.contains(&prefix)).expect(key);
        line.split(',').nth(8).unwrap().parse().unwrap()
    };
    assert_eq!(
        (
            (probe("all") * 1e4).round(),
            (probe("callbacks") * 1e4).round()
        ),
        (169.0, 168.0)
    );
    doctor()
        .args([
            "diff",
            "tests/fixtures/h200/examples-nccl-baseline",
            "tests/fixtures/h200/examples-nccl-prewarm",
            "--format",
            "csv",
        ])
        .current_dir(root())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("possible values: text, json, md"));
}

#[test]
fn markdown_names_the_worst_rank_across_nodes() {
    let out = doctor()
        .args([
            "report",
            "tests/fixtures/h200/multinode-fsdp2",
            "--format",
            "md",
        ])
        .env_remove("GITHUB_STEP_SUMMARY")
        .current_dir(root())
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("2 ranks on 2 host(s)."), "{text}");
    assert!(
        text.contains("- slowest step 1: **1.47 s** on rank 0 on node0; skew 85.4 ms"),
        "{text}"
    );
    assert!(text.contains("#### rank 1 on node1"), "{text}");
}

/// Two recordings of the same recipe: gates print the digits that decide
/// them, say when a time change is within the noise of the two runs, and
/// `beyond noise` fails only on changes larger than that.
#[test]
fn diff_gates_show_their_digits_and_the_noise_of_both_runs() {
    let diff = |gates: &[&str]| {
        let mut c = doctor();
        c.args([
            "diff",
            "reports/h200-matrix",
            "tests/fixtures/h200/matrix-live",
        ]);
        for g in gates {
            c.args(["--fail-if", g]);
        }
        let o = c.current_dir(root()).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, _, err) = diff(&["step1_peak>2GiB"]);
    assert_eq!(code, Some(11));
    for line in err.lines() {
        // A verdict never stands beside two figures that print the same.
        if let Some((_, cmp)) = line.split_once(": FAILED: ") {
            let (a, b) = cmp.split_once(" > ").unwrap();
            assert_ne!(a, b, "{line}");
        }
        // A gate that passes states the relation that holds.
        if let Some((_, cmp)) = line.split_once(": ok: ") {
            let (a, b) = cmp.split_once(" <= ").unwrap();
            assert_ne!(a, b, "{line}");
        }
    }
    assert!(
        err.contains("on 'cublas': FAILED: 2,158,821,376 B > 2,147,483,648 B"),
        "{err}"
    );
    // The same recipe recorded twice: +31% on the baseline is within noise.
    let (code, out, err) = diff(&["baseline:step1_time>+10%"]);
    assert_eq!(code, Some(11));
    assert!(err.contains("within the noise of the two runs"), "{err}");
    assert!(out.contains("+31.4%, within noise"), "{out}");
    let (code, _, err) = diff(&["baseline:step1_time>+10% beyond noise"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("holds, but within the noise"), "{err}");
    // nccl_comm's +36.5% is beyond the noise of its repeats: still fails.
    let (code, _, err) = diff(&["nccl_comm:step1_time>+10% beyond noise"]);
    assert_eq!(code, Some(11), "{err}");
    // A change without a unit is refused, with the fix.
    let (code, _, err) = diff(&["step1_peak>+5"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("write '+5%' for a relative change"), "{err}");
}

/// A verdict gate that passes states the verdict it found: `verdict!=works`
/// on a prewarm that works reads "verdict works == works", never
/// "verdict works != works" beside "ok".
#[test]
fn a_passing_verdict_gate_states_what_holds() {
    let o = doctor()
        .current_dir(root())
        .args([
            "report",
            "reports/h200-matrix",
            "--fail-if",
            "cublas:verdict!=works",
            "--fail-if",
            "cublas:verdict==works",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(11));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--fail-if 'cublas:verdict!=works' on 'cublas': ok: verdict works == works\n"),
        "{err}"
    );
    assert!(
        err.contains(
            "--fail-if 'cublas:verdict==works' on 'cublas': FAILED: verdict works == works\n"
        ),
        "{err}"
    );
}

/// The diff's noise is the threshold the change of the medians is judged
/// against (docs/verdicts.md §3), written as a bound, not a ±: for the
/// bundled matrix's baseline (2 attempts) against matrix-live's (3), the two
/// runs' step-1 time ranges added, as each run's own JSON gives them.
#[test]
fn the_diffs_noise_is_a_bound_on_the_change_and_says_what_it_is() {
    let range = |run: &str| {
        let o = doctor()
            .current_dir(root())
            .args(["report", run, "--format", "json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let s = v["matrix"]["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == "baseline")
            .unwrap()["step1_s"]
            .clone();
        (
            s["max"].as_f64().unwrap() - s["min"].as_f64().unwrap(),
            s["median"].as_f64().unwrap(),
            s["n"].as_u64().unwrap(),
        )
    };
    let (old_range, old_median, old_n) = range("reports/h200-matrix");
    let (new_range, new_median, _) = range("tests/fixtures/h200/matrix-live");
    assert_eq!(old_n, 2, "two attempts on a side: the ranges are added");
    let threshold = old_range + new_range;
    assert!((new_median - old_median).abs() <= threshold);
    let o = doctor()
        .current_dir(root())
        .args([
            "diff",
            "reports/h200-matrix",
            "tests/fixtures/h200/matrix-live",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("step-1 time"))
        .unwrap();
    assert!(
        row.ends_with(&format!("within noise (<= {threshold:.2} s)")),
        "{row}"
    );
    assert!(!out.contains("within noise (±"), "{out}");
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("T is a bound on the change, not a ± around a median"),
        "{out}"
    );
}

/// A count of one takes the singular: the H200 transformers recording
/// loaded one torch module and first launched one kernel in setup, and its
/// module-loads line says so, naming libtorch's modules "torch".
#[test]
fn module_loads_count_one_kernel_in_the_singular() {
    let text = common::terminal_text(&common::repo(
        "tests/fixtures/h200-zoo/hf-decoder-first-launch-records",
    ));
    assert!(
        text.contains("module loads in setup: torch 1 (2.5 ms); 1 kernel first launched"),
        "{text}"
    );
    assert!(!text.contains(" 1 kernels "), "{text}");
}
