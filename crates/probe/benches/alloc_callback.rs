//! Criterion bench of the probe's allocation callback path under contention:
//! 1, 8 and 32 threads make cuMemAlloc/cuMemFree pairs through the stand-in
//! libcuda/libcupti of the harness (tests/support), without the probe and
//! with the real probe cdylib injected. Each sample is one run of the
//! stand-in program, which times its own loop; the figure is process CPU time
//! per traced call (cuMemAlloc or cuMemFree, each an enter and an exit
//! callback), so the probe's cost per call is `probe - plain`. CPU time rather
//! than wall time: the machines this runs on may be shared, and a thread
//! waiting descheduled is the scheduler's time, not the probe's (time spent
//! spinning on, or in futex calls for, a contended lock does count).
//!
//! `cargo bench -p prewarm-probe --bench alloc_callback`;
//! `PREWARM_PROBE_UNDER_TEST=/path/libprewarm_probe.so` measures another build
//! (e.g. the previous probe) in the same conditions.

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::time::Duration;

/// Pairs per thread in one run: enough for a stable loop time, few enough that
/// the probe's buffers never fill between two flushes (no dropped records,
/// which would make the probe look cheaper).
const PAIRS_PER_RUN: u64 = 20_000;

/// CPU ns per traced call, from one run of the stand-in program.
fn call_cpu_ns(threads: usize, pairs: u64, probe: Option<&std::path::Path>) -> f64 {
    let run = support::run(
        &["bench-threads", &threads.to_string(), &pairs.to_string()],
        probe,
    );
    assert!(run.status.success(), "bench run failed: {:?}", run.status);
    let text = String::from_utf8_lossy(&run.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("BENCH "))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix("call_cpu_ns="))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no call_cpu_ns in {text:?}"))
}

fn alloc_callback(c: &mut Criterion) {
    let probe = support::probe_library();
    eprintln!("probe under test: {}", probe.display());
    let mut group = c.benchmark_group("alloc_callback");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(3));
    for threads in [1usize, 8, 32] {
        for (side, with) in [("plain", None), ("probe", Some(probe.as_path()))] {
            let pairs = PAIRS_PER_RUN * 8 / (threads as u64).max(8);
            group.bench_with_input(BenchmarkId::new(side, threads), &threads, |b, &threads| {
                // One run per sample, whatever criterion's iteration count:
                // the per-call figure is scaled to the iterations asked for.
                b.iter_custom(|iters| {
                    let ns = call_cpu_ns(threads, pairs, with);
                    Duration::from_secs_f64(ns * iters as f64 / 1e9)
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, alloc_callback);
criterion_main!(benches);
