//! The doctor's own time in a report, end to end: `prewarm-doctor run` of a
//! training against the stand-in torch (tests/shim/fake_torch) whose step-end
//! pool query takes 60 ms and whose prescription's warmup takes 300 ms; the
//! report gives the shim's hooks per phase — the query inside each step, the
//! prescription (the prewarm's work) and the training's own sleeps not.

mod common;

use common::python;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::csv_out::Csv;
use prewarm_doctor::report::html::Html;
use prewarm_doctor::report::json::Json;
use prewarm_doctor::report::markdown::Markdown;
use prewarm_doctor::report::model::ReportModel;
use prewarm_doctor::report::renderer::{Renderer, render_to_vec};
use prewarm_doctor::report::select::Selection;
use prewarm_doctor::report::verdict_text::doctor_in_step1;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const TRAIN: &str = r#"
import time, torch
net = torch.nn.Module()
opt = torch.optim.Optimizer(net.parameters())
for step in range(3):
    opt.zero_grad()
    net(1)
    time.sleep(0.4)
    opt.step()
print("TRAINED", flush=True)
"#;

const PRESCRIPTION: &str = r#"
import time
FINGERPRINT = None
def mismatch(fp):
    return None
def warm_group(torch, index, group, ranks, force):
    return None
def warm_at_step1(torch):
    time.sleep(0.3)
    return [("cublas:torch.float32", None)]
"#;

fn render(renderer: &dyn Renderer, model: &ReportModel) -> String {
    String::from_utf8(render_to_vec(renderer, model).unwrap()).unwrap()
}

fn recorded_run(dir: &Path) -> PathBuf {
    let script = dir.join("train.py");
    std::fs::write(&script, TRAIN).unwrap();
    let prescription = dir.join("p.py");
    std::fs::write(&prescription, PRESCRIPTION).unwrap();
    let out = dir.join("run");
    let r = assert_cmd::Command::cargo_bin("prewarm-doctor")
        .unwrap()
        .arg("run")
        .arg("--out")
        .arg(&out)
        .arg("--prescribe")
        .arg(&prescription)
        .arg("--")
        .arg(python())
        .arg(&script)
        .env("PREWARM_DOCTOR_CACHE", dir.join("cache"))
        .env("PYTHONPATH", root().join("tests/shim/fake_torch"))
        .env("FAKE_TORCH_CUDA", "1")
        .env("FAKE_TORCH_SLOW_STATS_MS", "60")
        .output()
        .unwrap();
    assert_eq!(
        r.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&r.stdout), "TRAINED\n");
    out
}

#[test]
fn the_report_gives_the_shims_hooks_per_phase() {
    let tmp = tempfile::tempdir().unwrap();
    let run = recorded_run(tmp.path());
    let analysed = Analysed::load(&run).unwrap();
    let model = analysed.model();
    let attempt = &model.attempts[0];
    let process = &attempt.ranks[0].account;
    let shim = |phase: Phase| {
        process
            .phases
            .iter()
            .find(|p| p.phase == phase)
            .unwrap_or_else(|| panic!("no {phase:?} phase"))
            .shim_s
    };
    let ms = |s: Option<f64>| s.map(|s| s * 1e3);
    // Step 1 and each later step hold their step-end query (60 ms), not the
    // training's 400 ms a step; setup holds neither the query nor the
    // prescription's 300 ms (the bounds leave room for a loaded machine,
    // where the shim's own installation alone can take 100 ms).
    let step1 = ms(shim(Phase::Step1)).expect("the shim's time in step 1");
    assert!((60.0..400.0).contains(&step1), "step 1: {step1} ms");
    let steady = ms(shim(Phase::Steady)).expect("the shim's time in steps 2..N");
    assert!((120.0..800.0).contains(&steady), "steps 2..N: {steady} ms");
    let setup = ms(shim(Phase::Setup)).expect("the shim's time in setup");
    assert!(
        setup < 300.0,
        "setup: {setup} ms (the prescription's 300 ms counted?)"
    );
    // Every format that says the probe's step-1 time says the shim's.
    let step1_phase = process
        .phases
        .iter()
        .find(|p| p.phase == Phase::Step1)
        .unwrap();
    let said = doctor_in_step1(step1_phase);
    assert!(said.contains("; the shim: hooks "), "{said}");
    let markdown = render(
        &Markdown {
            selection: Selection::All,
        },
        &model,
    );
    assert!(markdown.contains(&said), "{markdown}");
    let html = common::html_as_read(&render(&Html, &model));
    assert!(html.contains(&said.replace('\'', "&#39;")), "{html}");
    // The JSON says it too, as docs/report.schema.json describes it.
    let json: serde_json::Value = serde_json::from_str(&render(&Json, &model)).unwrap();
    let phases = &json["attempts"][0]["processes"][0]["phases"];
    let step1_json = phases
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "step1")
        .unwrap();
    assert!((step1_json["shim_s"].as_f64().unwrap() * 1e3 - step1).abs() < 1e-6);
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/report.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&json)
        .take(5)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let csv = render(&Csv, &model);
    let row = csv
        .lines()
        .find(|l| l.contains(",step1,shim_time,hooks,"))
        .unwrap_or_else(|| panic!("no step-1 shim_time row: {csv}"));
    let csv_s: f64 = row.split(',').nth(8).unwrap().parse().unwrap();
    assert!((csv_s * 1e3 - step1).abs() < 1e-6, "{row}");
    let text = common::terminal_text(&run);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "inside step 1's time, CUPTI's own work in the driver not counted; the shim: hooks "
        ),
        "{text}"
    );
    // Beside the probe's line, the run's whole and a steady step's share
    // (setup, step 1 and steps 2..N all known; a step's query is 60 ms).
    let whole = words
        .split(" shim: hooks ")
        .nth(2)
        .unwrap_or_else(|| panic!("no shim line: {text}"));
    let per_step: f64 = whole
        .split(" ms a step in steps 2..N")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no per-step figure: {whole}"));
    assert!((60.0..400.0).contains(&per_step), "{whole}");
    // ... the lines it wrote and the time the file system took for them ...
    let w = process.shim_writes.expect("shim_writes");
    assert!(w.lines > u64::from(process.steps.count), "{w:?}");
    assert!(
        whole.contains(&format!("; writing its {} lines ", w.lines)),
        "{whole}"
    );
    // ... and its median over the steady step's own steps, beside that step;
    // this run's 3 steps are all among the shim's first (detailed) ones,
    // which read memory statistics at their ends, and the line says so.
    let median_ms = process.steps.steady_shim_s.expect("steady_shim_s") * 1e3;
    assert!((60.0..400.0).contains(&median_ms), "{median_ms}");
    let steady_ms = process.steps.steady_step_s.unwrap() * 1e3;
    assert_eq!(
        process.steps.steady_shim_first_steps,
        process.steps.steady_steps
    );
    assert!(
        whole.contains(&format!(
            "(median {median_ms:.1} ms of a {steady_ms:.1} ms steady step, every one of them among its first steps, which read memory statistics at their ends; a later step pays its end alone)"
        )),
        "{whole}"
    );
    // The hooks cover the whole process, the shim's installation before
    // its first line included: the line says both totals, the phases' the
    // smaller, so no hook outgrows what the line calls the total.
    let over_process: f64 = whole
        .split(" on the training's threads over the process (")
        .next()
        .and_then(|n| n.trim().strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no whole-process total: {whole}"));
    let hooks_ms: f64 = process.shim_hooks.iter().map(|h| h.seconds * 1e3).sum();
    assert!((over_process - hooks_ms).abs() < 0.06, "{whole}");
    // ... and which hook it went to: the step-end hook, with its query, the
    // costliest of them, once a step (the account and the text alike).
    let costliest = &process.shim_hooks[0];
    assert_eq!(
        costliest.name, "_StepTracker.post_step",
        "{:?}",
        process.shim_hooks
    );
    assert_eq!(costliest.calls, u64::from(process.steps.count));
    assert!(
        whole.contains("; costliest hooks: _StepTracker.post_step "),
        "{whole}"
    );
    assert_eq!(
        json["attempts"][0]["processes"][0]["shim_hooks"][0]["name"],
        "_StepTracker.post_step"
    );
    // ... inside step 1's time indeed: the step holds the query (400 + 60 ms).
    let step1_s = process.steps.step1_s.expect("step 1's time");
    assert!(step1_s >= 0.460, "step 1 took {step1_s} s");
}
