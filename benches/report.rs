//! Rendering speed of every format (terminal, Markdown, JSON, CSV, HTML, PNG,
//! Perfetto) and of the report model they share. Targets (issue 11): every format of an 8-rank ×
//! 1M-event run in ≤ 3 s on 2 cores; 1,024 ranks of a real recording's size
//! in ≤ 2 s for every format.
//!
//! Inputs: a SYNTHETIC run (tests/common/synthetic.rs writes the real file
//! format; not a recording) and 1,024 copies of a real 170 KB H200 rank
//! (tests/fixtures/h200/multigpu-fsdp2-baseline). Loading and analysis are
//! done once outside the timings (benches/analysis.rs measures those).
//!
//! `cargo bench --bench report` (PD_BENCH_EVENTS changes the 1M).

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

use criterion::{Criterion, criterion_group, criterion_main};
use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::charts::Chart;
use prewarm_doctor::report::csv_out::Csv;
use prewarm_doctor::report::html::Html;
use prewarm_doctor::report::json::Json;
use prewarm_doctor::report::markdown::Markdown;
use prewarm_doctor::report::model::ReportModel;
use prewarm_doctor::report::perfetto::Perfetto;
use prewarm_doctor::report::png::PngChart;
use prewarm_doctor::report::renderer::Renderer;
use prewarm_doctor::report::terminal::Terminal;
use std::path::Path;

fn analyse(root: &Path) -> Analysed {
    Analysed::load(root).unwrap()
}

/// Copies one real rank `n` times into a fresh run folder.
fn copies_of_a_real_rank(root: &Path, n: u32) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200/multigpu-fsdp2-baseline/default/1/vm");
    let dst = root.join("default/1/vm");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(src.join("host.json"), dst.join("host.json")).unwrap();
    let events = std::fs::read(src.join("rank-0.pid-656.events")).unwrap();
    let shim = std::fs::read(src.join("rank-0.pid-656.shim.jsonl")).unwrap();
    for r in 0..n {
        let pid = 100_000 + r;
        std::fs::write(dst.join(format!("rank-{r}.pid-{pid}.events")), &events).unwrap();
        std::fs::write(dst.join(format!("rank-{r}.pid-{pid}.shim.jsonl")), &shim).unwrap();
    }
}

fn model(a: &Analysed) -> ReportModel {
    a.model_named("bench")
}

/// The text formats: terminal summary, Markdown, JSON, CSV.
fn text_formats(m: &ReportModel, out: &mut dyn std::io::Write) {
    let renderers: [&dyn Renderer; 4] = [&Terminal::default(), &Markdown::default(), &Json, &Csv];
    for r in renderers {
        r.render(m, out).unwrap();
    }
}

/// Every format: the model, the text formats, the HTML page, every PNG
/// chart, the trace.
fn all_formats(a: &Analysed) -> usize {
    let m = model(a);
    let mut sink = std::io::sink();
    let mut n = 0;
    let mut count = CountingSink(&mut sink, 0);
    text_formats(&m, &mut count);
    Html.render(&m, &mut count).unwrap();
    Perfetto.render(&m, &mut count).unwrap();
    for chart in Chart::all(&m) {
        PngChart(chart).render(&m, &mut count).unwrap();
        n += 1;
    }
    assert!(n > 0);
    count.1
}

/// Counts bytes written (the formats write to any `Write`).
struct CountingSink<'a>(&'a mut std::io::Sink, usize);

impl std::io::Write for CountingSink<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.1 += buf.len();
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn bench(c: &mut Criterion) {
    let events: u64 = std::env::var("PD_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let big = tempfile::tempdir().unwrap();
    synthetic::write_run(
        big.path(),
        synthetic::Shape {
            ranks: 8,
            events,
            hostile: false,
        },
    );
    let big = analyse(big.path());
    let wide = tempfile::tempdir().unwrap();
    copies_of_a_real_rank(wide.path(), 1024);
    let wide = analyse(wide.path());
    assert_eq!(wide.attempts[0].processes.len(), 1024);

    let mut g = c.benchmark_group("report");
    g.sample_size(10);
    for (name, a) in [
        (format!("2 variants x 8 ranks x {events} events"), &big),
        ("1024 copies of a 170 KB H200 rank".to_string(), &wide),
    ] {
        g.bench_function(format!("{name}: model"), |b| b.iter(|| model(a)));
        let m = model(a);
        g.bench_function(format!("{name}: model + text formats"), |b| {
            b.iter(|| {
                let m = model(a);
                let mut sink = std::io::sink();
                let mut out = CountingSink(&mut sink, 0);
                text_formats(&m, &mut out);
                out.1
            })
        });
        g.bench_function(format!("{name}: model + html"), |b| {
            b.iter(|| {
                let m = model(a);
                let mut out = Vec::new();
                Html.render(&m, &mut out).unwrap();
                out.len()
            })
        });
        g.bench_function(format!("{name}: model + png (every chart)"), |b| {
            b.iter(|| {
                let m = model(a);
                let mut out = Vec::new();
                for chart in Chart::all(&m) {
                    PngChart(chart).render(&m, &mut out).unwrap();
                }
                out.len()
            })
        });
        g.bench_function(format!("{name}: model + perfetto"), |b| {
            b.iter(|| {
                let m = model(a);
                let mut out = Vec::new();
                Perfetto.render(&m, &mut out).unwrap();
                out.len()
            })
        });
        g.bench_function(format!("{name}: every format"), |b| {
            b.iter(|| all_formats(a))
        });
        // Sizes, for the record.
        let mut html = Vec::new();
        Html.render(&m, &mut html).unwrap();
        let mut trace = Vec::new();
        Perfetto.render(&m, &mut trace).unwrap();
        eprintln!(
            "{name}: HTML {} KiB, Perfetto {} KiB",
            html.len() / 1024,
            trace.len() / 1024
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
