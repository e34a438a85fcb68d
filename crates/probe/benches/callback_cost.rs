//! What the probe costs per traced driver call, on CPU, with the stand-in
//! libcuda/libcupti of the harness (tests/support): the stand-in program times
//! allocation/free pairs (CPU time of the calling threads, so a busy machine
//! disturbs it less) without the probe and with the real probe cdylib
//! injected, alternating, and this prints the fastest and the median round and
//! the difference per call. The stand-in driver itself costs almost nothing (its cuMemGetInfo is a
//! load, not an ioctl), so this is the probe's own work: the callback, the
//! caller lookup, the encoding. `PREWARM_PROBE_UNDER_TEST=/path/libprewarm_probe.so`
//! measures another build (e.g. the previous probe) the same way.
//!
//! Stream-ordered calls are measured twice under the probe: as shipped (their
//! callbacks are switched off after 4096 calls on known pools, so the first
//! calls of a run cost and the rest do not) and with
//! `PREWARM_DOCTOR_POOL_CALLS=all` (every call traced and counted).
//!
//! Kernel launches are timed too: a kernel launched before passes through
//! the first-launch watch's launch callbacks (enter and exit; the watch stays
//! on here, as no training step ends), its cost per launch on CPU.
//!
//! `cargo bench -p prewarm-probe --bench callback_cost` (PAIRS, ROUNDS tune it).

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;

fn parse(stdout: &[u8]) -> BTreeMap<String, f64> {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("BENCH "))
        .unwrap_or_else(|| panic!("no BENCH line in {text:?}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// One way of running the bench program: its name, the probe (if any), extra environment.
type Side<'a> = (
    &'a str,
    Option<&'a std::path::Path>,
    &'a [(&'a str, &'a str)],
);

/// (fastest, median) of the rounds.
fn summary(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[0], v[v.len() / 2])
}

fn main() {
    let pairs = std::env::var("PAIRS").unwrap_or_else(|_| "200000".into());
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let probe = support::probe_library();
    // Plain; the probe as shipped (stream-ordered calls switched off after
    // 4096); the probe tracing every stream-ordered call (their counting cost).
    let sides: [Side; 3] = [
        ("plain", None, &[]),
        ("probe", Some(probe.as_path()), &[]),
        (
            "probe, POOL_CALLS=all",
            Some(probe.as_path()),
            &[("PREWARM_DOCTOR_POOL_CALLS", "all")],
        ),
    ];
    let mut results: Vec<BTreeMap<String, Vec<f64>>> = vec![BTreeMap::new(); sides.len()];
    for _ in 0..rounds {
        for ((_, with, env), side) in sides.iter().zip(results.iter_mut()) {
            let run = support::run_with(&["bench", &pairs], *with, env);
            assert!(run.status.success(), "bench run failed: {:?}", run.status);
            for (k, v) in parse(&run.stdout) {
                side.entry(k).or_default().push(v);
            }
        }
    }
    println!("probe: {}", probe.display());
    println!(
        "pairs per run: {pairs}, rounds: {rounds}; CPU ns per pair (2 calls), fastest / median round; cost = per call, vs plain"
    );
    // (key, label, traced calls a row's figure covers)
    for (key, label, calls) in [
        (
            "async_pair_ns",
            "cuMemAllocAsync+cuMemFreeAsync, 1 thread",
            2.0,
        ),
        (
            "async_pair_4threads_ns",
            "cuMemAllocAsync+cuMemFreeAsync, 4 threads",
            2.0,
        ),
        ("sync_pair_ns", "cuMemAlloc+cuMemFree, 1 thread", 2.0),
        (
            "launch_ns",
            "cuLaunchKernel of a kernel launched before (first-launch watch on)",
            1.0,
        ),
    ] {
        let (a_min, a_med) = summary(results[0][key].clone());
        println!("{label}: plain {a_min:.1} / {a_med:.1}");
        for ((name, _, _), side) in sides.iter().zip(&results).skip(1) {
            let (b_min, b_med) = summary(side[key].clone());
            println!(
                "    {name:<24} {b_min:>8.1} / {b_med:>8.1}   cost per call {:>7.1} / {:>7.1} ns",
                (b_min - a_min) / calls,
                (b_med - a_med) / calls
            );
        }
    }
}
