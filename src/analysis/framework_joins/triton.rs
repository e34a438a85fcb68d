//! Triton autotunes and compiles joined to the device events inside
//! their windows.

use crate::analysis::account::*;
use crate::analysis::memory::Replay;
use crate::analysis::phases::Boundaries;
use crate::analysis::phases::secs;
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;

/// Triton autotunes with the device events inside their candidate windows.
pub fn autotune_accounts(
    r: &ProcessRecords,
    replay: &mut Replay,
    bounds: &Boundaries,
) -> Vec<AutotuneAccount> {
    name_benchmarked_candidates(r, replay, bounds);
    let mut out: Vec<AutotuneAccount> = r
        .shim
        .iter()
        .filter_map(|e| autotune_account(e, replay, bounds))
        .collect();
    out.extend(interrupted_autotunes(&out, replay, bounds));
    out
}

/// Names the candidate being benchmarked for every local-memory event (a
/// failed launch up to 2 s after its candidate's window, which the failure
/// cut short).
fn name_benchmarked_candidates(r: &ProcessRecords, replay: &mut Replay, bounds: &Boundaries) {
    let configs: Vec<(&str, &str, u64, u64)> = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::AutotuneConfig {
                kernel,
                config,
                t0,
                t1,
                ..
            } => Some((kernel.as_str(), config.as_str(), *t0, *t1)),
            _ => None,
        })
        .collect();
    for ev in replay.local_events.iter_mut() {
        let t = bounds.start + (ev.t_s * 1e9) as u64;
        ev.autotune_config = configs
            .iter()
            .filter(|c| {
                ev.kernel.contains(c.0)
                    && c.2 <= t + 1_000
                    && (t <= c.3 + 1_000 || ev.failed && t <= c.3 + 2_000_000_000)
            })
            .map(|c| c.1.to_string())
            .next_back();
    }
}

/// One autotune the shim saw finish: its window's local-memory growth by
/// the kernel, its spilling candidates and the out-of-pool bytes inside it.
fn autotune_account(
    e: &ShimEvent,
    replay: &Replay,
    bounds: &Boundaries,
) -> Option<AutotuneAccount> {
    let ShimEvent::Autotune {
        kernel,
        key,
        t0,
        t1,
        configs: n,
        benchmarked,
        chosen,
        source,
    } = e
    else {
        return None;
    };
    let inside = |t: u64| t >= *t0 && t <= *t1;
    let mut spilling = Vec::new();
    let mut local = 0;
    for ev in &replay.local_events {
        let t = bounds.start + (ev.t_s * 1e9) as u64;
        if inside(t) && ev.kernel.contains(kernel.as_str()) {
            if !ev.failed {
                local += ev.device_growth;
            }
            if let Some(c) = &ev.autotune_config
                && !spilling.contains(c)
            {
                spilling.push(c.clone());
            }
        }
    }
    Some(AutotuneAccount {
        kernel: kernel.clone(),
        key: key.clone(),
        phase: bounds.phase_of(*t0),
        step: bounds.step_of(*t0),
        start_s: secs(*t0, bounds.start),
        seconds: t1.saturating_sub(*t0) as f64 / 1e9,
        configs: *n,
        benchmarked: *benchmarked,
        chosen: chosen.clone(),
        source: source.clone(),
        local_memory_growth: local,
        out_of_pool_bytes: replay
            .oop_allocs
            .iter()
            .filter(|a| inside(a.t))
            .map(|a| a.bytes)
            .sum(),
        spilling_configs: spilling,
    })
}

/// An autotune interrupted by a failure has no "autotune" line: one account
/// for each failed candidate no finished autotune already names.
fn interrupted_autotunes(
    finished: &[AutotuneAccount],
    replay: &Replay,
    bounds: &Boundaries,
) -> Vec<AutotuneAccount> {
    let mut out: Vec<AutotuneAccount> = Vec::new();
    for ev in replay.local_events.iter().filter(|e| e.failed) {
        let Some(c) = &ev.autotune_config else {
            continue;
        };
        if finished
            .iter()
            .chain(&out)
            .any(|a| a.spilling_configs.contains(c))
        {
            continue;
        }
        let t = bounds.start + (ev.t_s * 1e9) as u64;
        out.push(AutotuneAccount {
            kernel: ev.kernel.clone(),
            key: "(interrupted by the failure)".into(),
            phase: ev.phase,
            step: ev.step,
            start_s: secs(t, bounds.start),
            seconds: 0.0,
            configs: 0,
            benchmarked: 0,
            chosen: String::new(),
            source: "benchmark (failed)".into(),
            local_memory_growth: 0,
            out_of_pool_bytes: 0,
            spilling_configs: vec![c.clone()],
        });
    }
    out
}

/// Every JIT compile the shim saw, and those it saw start and never end (to
/// the process's end).
pub fn compile_events(r: &ProcessRecords, bounds: &Boundaries) -> Vec<CompileEvent> {
    let event = |kernel: &str, t0: u64, t1: u64, cache_hit, unfinished| CompileEvent {
        kernel: kernel.to_string(),
        phase: bounds.phase_of(t0),
        step: bounds.step_of(t0),
        start_s: secs(t0, bounds.start),
        seconds: t1.saturating_sub(t0) as f64 / 1e9,
        cache_hit,
        unfinished,
    };
    let mut out: Vec<CompileEvent> = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Compile {
                kernel,
                t0,
                t1,
                cache_hit,
            } => Some(event(kernel, *t0, *t1, *cache_hit, false)),
            _ => None,
        })
        .collect();
    for (kernel, t0) in unfinished_compiles(&r.shim) {
        out.push(event(kernel, t0, bounds.end.max(t0), None, true));
    }
    out
}

/// The compiles the shim saw start (`CompileBegin`) and never end: the
/// process ended inside them. (kernel, start), in the order they began.
pub fn unfinished_compiles(shim: &[ShimEvent]) -> Vec<(&str, u64)> {
    let ended: std::collections::HashSet<(&str, u64)> = shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Compile { kernel, t0, .. } => Some((kernel.as_str(), *t0)),
            _ => None,
        })
        .collect();
    shim.iter()
        .filter_map(|e| match e {
            ShimEvent::CompileBegin { kernel, t0 } => Some((kernel.as_str(), *t0)),
            _ => None,
        })
        .filter(|begun| !ended.contains(begun))
        .collect()
}
