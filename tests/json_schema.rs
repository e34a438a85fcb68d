//! docs/report.schema.json describes `report --format json`: every H200
//! recording's output, a damaged run's and a synthetic hostile run's
//! validate against it, and it is strict enough to notice a field it does
//! not describe.

mod common;

use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::json::Json;
use prewarm_doctor::report::renderer::render_to_vec;
use serde_json::Value;
use std::path::Path;

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(common::repo("docs/report.schema.json")).unwrap();
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::meta::validate(&schema).expect("the schema is a valid JSON Schema");
    jsonschema::validator_for(&schema).expect("the schema compiles")
}

fn json_of(path: &Path) -> Value {
    let model = Analysed::load(path).unwrap().model();
    serde_json::from_slice(&render_to_vec(&Json, &model).unwrap()).unwrap()
}

fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc)
        .take(5)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_recording_matches_the_schema() {
    let v = validator();
    let mut paths = vec![common::repo("reports/h200-matrix")];
    for dir in [
        "tests/fixtures/h200",
        "tests/fixtures/h200-zoo",
        "tests/fixtures/h200-zoo/first-use",
        "tests/fixtures/h100-shared-gpu",
        "tests/fixtures/h100-detached",
        "tests/fixtures/h100-callback-split",
    ] {
        for e in std::fs::read_dir(common::repo(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.join("run.json").is_file() {
                paths.push(p);
            }
        }
    }
    assert!(paths.len() > 40);
    for p in paths {
        let doc = json_of(&p);
        assert_eq!(errors(&v, &doc), Vec::<String>::new(), "{}", p.display());
    }
}

/// A damaged event file: problems with offsets, an excluded attempt.
#[test]
fn a_damaged_run_matches_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::repo("tests/fixtures/h200/examples-cublas-baseline");
    common::copy_tree(&src, dir.path());
    let events = find(dir.path(), ".events").expect("an event file");
    let mut bytes = std::fs::read(&events).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&events, bytes).unwrap();
    let doc = json_of(dir.path());
    assert!(
        doc.to_string().contains("\"damaged\":true"),
        "the damage shows in the document"
    );
    assert_eq!(errors(&validator(), &doc), Vec::<String>::new());
}

/// SYNTHETIC (tests/common/synthetic.rs): hostile names, an OOM, 8 ranks.
#[test]
fn a_synthetic_hostile_run_matches_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    common::synthetic::write_run(
        dir.path(),
        common::synthetic::Shape {
            ranks: 8,
            events: 200,
            hostile: true,
        },
    );
    let doc = json_of(dir.path());
    assert_eq!(errors(&validator(), &doc), Vec::<String>::new());
}

#[test]
fn the_schema_notices_what_it_does_not_describe() {
    let v = validator();
    let good = json_of(&common::repo("tests/fixtures/h200/examples-nccl-baseline"));
    assert!(v.is_valid(&good));
    let mut extra = good.clone();
    extra["attempts"][0]["processes"][0]["surprise"] = Value::from(1);
    assert!(!v.is_valid(&extra), "an undocumented field fails");
    let mut wrong = good.clone();
    wrong["attempts"][0]["processes"][0]["phases"][0]["phase"] = Value::from("step7");
    assert!(!v.is_valid(&wrong), "a phase outside the enumeration fails");
    let mut missing = good;
    missing["attempts"][0]
        .as_object_mut()
        .unwrap()
        .remove("exit_code");
    assert!(!v.is_valid(&missing), "a required field missing fails");
}

fn find(dir: &Path, suffix: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()? {
        let p = e.ok()?.path();
        if p.is_dir() {
            if let Some(f) = find(&p, suffix) {
                return Some(f);
            }
        } else if p.to_string_lossy().ends_with(suffix)
            && !p.to_string_lossy().ends_with("nvml.events")
        {
            return Some(p);
        }
    }
    None
}
