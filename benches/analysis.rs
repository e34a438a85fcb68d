//! Analysis speed on a large run: N ranks × M allocation events each, written
//! in the real event format by a synthetic generator (these are benchmark
//! inputs, not recordings). Target (DESIGN.md §8): 8 ranks × 1M events
//! analysed and reported in a couple of seconds on a 2-core machine.
//!
//! `cargo bench --bench analysis` (set PD_BENCH_EVENTS to change M).

use criterion::{Criterion, criterion_group, criterion_main};
#[path = "common/big_run.rs"]
mod big_run;

use big_run::make_run;

fn bench(c: &mut Criterion) {
    let events: u64 = std::env::var("PD_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    make_run(dir.path(), 8, events);
    let mut g = c.benchmark_group("analysis");
    g.sample_size(10);
    g.bench_function(
        format!("8 ranks x {events} events: load + analyse + render"),
        |b| {
            b.iter(|| {
                let run = prewarm_doctor::pipeline::Analysed::load(dir.path()).unwrap();
                let text = prewarm_doctor::report::terminal::Terminal::default()
                    .text(&run.into_model())
                    .unwrap();
                assert!(text.contains("rank 7"));
            })
        },
    );
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
