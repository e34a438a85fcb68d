//! Fuzz targets for every parser of untrusted input, shared by the
//! coverage-guided entry points (`fuzz/fuzz_targets/*.rs`, cargo-fuzz on a
//! nightly toolchain) and the stable mutation driver (`tests/fuzz_stable.rs`,
//! which includes this file). Each target must never panic, and checks the
//! properties its parser promises; a violated property panics, which both
//! drivers report as a crash with the input that caused it.

use prewarm_doctor::load::nccl::parse_nccl_log;
use prewarm_doctor::load::shim::{ShimEvent, parse_step_file};
use prewarm_doctor::load::shim_from_bytes;
use prewarm_doctor::prewarm::variants;
use prewarm_doctor::report::escape;
use prewarm_events::{Record, encode_header, encode_record, read_file_bytes};
use std::path::Path;

/// The event decoder (crates/events) and the load layer's problems for it:
/// decoding never panics; what decodes re-encodes to a file that decodes to
/// the same header and records (after the one normalisation encoding does:
/// strings cut to 4096 bytes, replacement characters for bad UTF-8); a
/// problem always names a byte offset inside the file.
pub fn event_decoder(data: &[u8]) {
    let streamed = prewarm_doctor::load::stream_records(data, |_| {});
    for p in streamed.problems(Path::new(""), Path::new("f.events")) {
        if let Some(offset) = p.offset {
            assert!(
                offset <= data.len() as u64,
                "offset {offset} past the end: {p}"
            );
        }
    }
    let Ok(first) = read_file_bytes(data) else {
        assert!(streamed.error.is_some() || streamed.header.is_none());
        return;
    };
    assert_eq!(first.records.len() as u64, streamed.records);
    let second = read_file_bytes(&reencode(&first.header.fields, &first.records))
        .expect("re-encoded records decode");
    assert_eq!(second.records.len(), first.records.len());
    let third = read_file_bytes(&reencode(&second.header.fields, &second.records))
        .expect("re-encoded records decode");
    assert_eq!(third.header, second.header);
    assert_eq!(third.records, second.records);
}

fn reencode(fields: &[(String, String)], records: &[Record]) -> Vec<u8> {
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let mut out = encode_header(&fields);
    for r in records {
        encode_record(r, &mut out);
    }
    out
}

/// The shim JSON-lines reader (src/load/shim.rs via the load layer): never
/// panics; at most one problem per file, at a line and byte offset inside it
/// where a line starts.
pub fn shim_jsonl(data: &[u8]) {
    let (_lines, problems) = shim_from_bytes("p.shim.jsonl", data);
    assert!(problems.len() <= 1, "{problems:?}");
    for p in &problems {
        let offset = p.offset.expect("a shim problem has an offset") as usize;
        let line = p.line.expect("a shim problem has a line") as usize;
        assert!(offset <= data.len(), "{p}");
        assert!(offset == 0 || data[offset - 1] == b'\n', "{p}");
        assert_eq!(
            data[..offset].iter().filter(|&&b| b == b'\n').count() + 1,
            line,
            "{p}"
        );
    }
}

/// The step file parser (src/load/shim.rs, `parse_step_file`): never
/// panics; what it gives is one step end per record, in rising steps (a
/// slot holds only its own step), each with its own-time sample.
pub fn step_file(data: &[u8]) {
    let Ok(lines) = parse_step_file(data) else {
        return;
    };
    assert_eq!(lines.events.len(), lines.own_time.len());
    let steps: Vec<u32> = lines
        .events
        .iter()
        .map(|e| match e {
            ShimEvent::StepEnd { step, .. } => *step,
            other => panic!("not a step end: {other:?}"),
        })
        .collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
}

/// The NCCL log parser (src/load/nccl.rs): never panics; every communicator
/// has the pointer NCCL printed (a word of the input).
pub fn nccl_log(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for c in parse_nccl_log(&text, "nccl.h.1.log") {
        assert!(!c.comm.is_empty() && text.contains(&c.comm), "{c:?}");
    }
}

/// The variants TOML (src/prewarm/variants.rs): never panics; a file that is
/// accepted yields uniquely named variants and a baseline among them.
pub fn variants_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok((mut declared, baseline)) = variants::from_toml(text, "matrix.toml") else {
        return;
    };
    assert!(!declared.is_empty());
    if let Ok(base) = variants::finish(&mut declared, baseline.as_deref()) {
        assert!(declared.iter().any(|v| v.name == base), "{base}");
        let mut names: Vec<&str> = declared.iter().map(|v| v.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), declared.len());
    }
}

/// The sanitisers (src/report/escape.rs): whatever the input, terminal
/// fields hold no unsafe character, blocks only newlines, Markdown no
/// newline and no unescaped table separator, CSV fields are no formulas, and
/// JSON keeps its value while losing its raw controls.
pub fn escape(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let field = escape::terminal(&text);
    assert!(!field.chars().any(escape::is_unsafe), "{field:?}");
    let block = escape::terminal_block(&text);
    assert!(
        !block.chars().any(|c| c != '\n' && escape::is_unsafe(c)),
        "{block:?}"
    );
    assert_eq!(block.matches('\n').count(), text.matches('\n').count());
    let md = escape::markdown(&text);
    assert!(!md.chars().any(escape::is_unsafe), "{md:?}");
    let mut backslashes = 0;
    for c in md.chars() {
        assert!(c != '|' || backslashes % 2 == 1, "bare | in {md:?}");
        backslashes = if c == '\\' { backslashes + 1 } else { 0 };
    }
    let csv = escape::csv_field(&text);
    assert!(!csv.starts_with(['=', '+', '-', '@']), "{csv:?}");
    let mut safe = Vec::new();
    escape::write_json_pretty(&mut safe, &serde_json::json!({ "s": text })).expect("serialises");
    let back: serde_json::Value = serde_json::from_slice(&safe).expect("still JSON");
    assert_eq!(back["s"].as_str(), Some(&*text));
    let safe_text = std::str::from_utf8(&safe).expect("UTF-8");
    // The pretty layout's newlines are the only raw controls.
    assert!(
        !safe_text.chars().any(|c| c != '\n' && escape::is_unsafe(c)),
        "{safe_text:?}"
    );
}

/// The host folder the pipeline target rewrites: a copy of the real H200
/// recording `examples-cublas-baseline`, made once per process.
const PIPELINE_FIXTURE: &str = "tests/fixtures/h200/examples-cublas-baseline";
const PIPELINE_FILES: [&str; 6] = [
    "default/1/vm/proc.pid-427.events",
    "default/1/vm/proc.pid-427.shim.jsonl",
    "default/1/vm/nvml.events",
    "default/1/vm/host.json",
    "default/1/vm/nccl.vm.427.log",
    "run.json",
];

struct Pipeline {
    run: std::path::PathBuf,
    pristine: Vec<(&'static str, Vec<u8>)>,
}

fn pipeline() -> &'static Pipeline {
    static ONCE: std::sync::OnceLock<Pipeline> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let fixture = [
            here.join(PIPELINE_FIXTURE),
            here.join("..").join(PIPELINE_FIXTURE),
        ]
        .into_iter()
        .find(|p| p.is_dir())
        .expect("the H200 fixture is in the repository");
        let base = Path::new("/dev/shm");
        let base = if base.is_dir() {
            base.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let run = base.join(format!("prewarm-fuzz-pipeline-{}", std::process::id()));
        let host = run.join("default/1/vm");
        std::fs::create_dir_all(&host).expect("a scratch folder");
        let pristine = PIPELINE_FILES
            .iter()
            .map(|name| {
                let bytes = std::fs::read(fixture.join(name)).unwrap_or_default();
                (*name, bytes)
            })
            .collect();
        Pipeline { run, pristine }
    })
}

/// Removes the pipeline target's scratch folder (the stable driver calls it
/// when done; a libFuzzer process leaves its small folder behind).
pub fn report_pipeline_cleanup() {
    let _ = std::fs::remove_dir_all(&pipeline().run);
}

/// The whole `report` path (load → analysis → matrix → every renderer →
/// gates) on the real recording with one of its files replaced by the input
/// (the first byte picks which: probe events, shim lines, NVML timeline,
/// host.json, an NCCL log, run.json). Never panics; every problem it reports
/// lies inside the file it names.
pub fn report_pipeline(data: &[u8]) {
    use prewarm_doctor::analysis::gate::{Gate, evaluate};
    use prewarm_doctor::report::renderer::Renderer;
    use prewarm_doctor::report::select::Selection;
    use prewarm_doctor::report::{csv_out, json, markdown, terminal};
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let p = pipeline();
    for (name, bytes) in &p.pristine {
        if !bytes.is_empty() {
            std::fs::write(p.run.join(name), bytes).expect("scratch write");
        } else {
            let _ = std::fs::remove_file(p.run.join(name));
        }
    }
    let target = PIPELINE_FILES[which as usize % PIPELINE_FILES.len()];
    std::fs::write(p.run.join(target), content).expect("scratch write");
    // The one pipeline every verb uses; every format reads its one model.
    let Ok(analysed) = prewarm_doctor::pipeline::Analysed::load(&p.run) else {
        return;
    };
    let model = analysed.model_named("run");
    let renderers: [&dyn Renderer; 6] = [
        &terminal::Terminal {
            selection: Selection::All,
        },
        &json::Json,
        &csv_out::Csv,
        &markdown::Markdown {
            selection: Selection::All,
        },
        &prewarm_doctor::report::html::Html,
        &prewarm_doctor::report::perfetto::Perfetto,
    ];
    for r in renderers {
        let _ = r.render(&model, &mut std::io::sink());
    }
    let sums = analysed.summaries();
    let gates: Vec<Gate> = ["step1_peak>+5%", "step1_oop>0", "default:setup_s>1"]
        .iter()
        .filter_map(|g| Gate::parse(g).ok())
        .collect();
    let runs = prewarm_doctor::analysis::gate::Runs {
        new: &sums,
        new_matrix: analysed.matrix.as_ref(),
        old: Some(&sums),
        allow_missing: false,
    };
    let _ = evaluate(&gates, &runs);
    for a in &analysed.attempts {
        for problem in a.all_problems() {
            if let Some(offset) = problem.offset {
                let len =
                    std::fs::metadata(p.run.join(&problem.file)).map_or(u64::MAX, |m| m.len());
                assert!(offset <= len, "{problem} (file is {len} bytes)");
            }
        }
    }
}
