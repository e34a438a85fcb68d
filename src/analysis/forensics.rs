//! OOM forensics: for each failed request (or OOM exception), what failed, how
//! much was free, and which lazy-initialisation memory landed in the same step
//! before it — the part a prewarm would have moved to setup.

use super::framework::class_of_source;
use super::memory::{Failure, Replay};
use super::model::{CommAccount, ExceptionEvent, Forensic};
use super::phases::Boundaries;
use crate::prewarm::catalog::{CATALOG, EventClass};
use std::collections::BTreeMap;

/// True for exception texts that mean the device ran out of memory.
pub fn is_oom_text(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("out of memory")
        || m.contains("cuda failure 2")
        || m.contains("cuda_error_out_of_memory")
}

fn describe(f: &Failure) -> String {
    match &f.local_kernel {
        Some(k) => format!(
            "local-memory growth of {} for kernel {k}",
            crate::report::bytes(f.bytes)
        ),
        None => format!(
            "{} of {} by {}",
            f.api,
            crate::report::bytes(f.bytes),
            f.source
        ),
    }
}

/// Builds the forensics of one process.
pub fn forensics(
    replay: &Replay,
    comms: &[CommAccount],
    exceptions: &[ExceptionEvent],
    bounds: &Boundaries,
) -> Vec<Forensic> {
    let mut out: Vec<Forensic> = Vec::new();
    let oom_exception = exceptions.iter().find(|e| is_oom_text(&e.message));
    let mut last: Option<(u64, String)> = None;
    for f in &replay.failures {
        let key = describe(f);
        // Allocators retry after freeing caches: one failure, several calls.
        if let Some((t, k)) = &last
            && *k == key
            && f.t.saturating_sub(*t) < 50_000_000
        {
            continue;
        }
        last = Some((f.t, key.clone()));
        let step = bounds.step_of(f.t);
        // Lazy-init memory that landed after setup and before the failure is
        // what a prewarm would have moved out of the way.
        let step_start = match step {
            None => bounds.start,
            Some(_) => bounds.step1_begin.unwrap_or(bounds.start),
        };
        let mut preceded: BTreeMap<EventClass, u64> = BTreeMap::new();
        for a in replay
            .oop_allocs
            .iter()
            .filter(|a| a.t >= step_start && a.t <= f.t)
        {
            if let Some(c) = class_of_source(&a.source) {
                *preceded.entry(c).or_default() += a.bytes;
            }
        }
        for ev in replay.local_events.iter().filter(|e| !e.failed) {
            let t = bounds.start + (ev.t_s * 1e9) as u64;
            if t >= step_start && t <= f.t {
                *preceded.entry(EventClass::LocalMemory).or_default() += ev.device_growth;
            }
        }
        for c in comms {
            if let Some(s) = c.start_s {
                let t = bounds.start + (s * 1e9) as u64;
                if t >= step_start && t <= f.t {
                    *preceded.entry(EventClass::NcclComm).or_default() += c.inferred_bytes;
                }
            }
        }
        if let Some(own) = class_of_source(&f.source) {
            *preceded.entry(own).or_default() += 0;
        }
        let mut classes: Vec<(EventClass, u64)> = preceded.into_iter().collect();
        classes.sort_by_key(|c| std::cmp::Reverse(c.1));
        let mut movable: Vec<EventClass> = classes.iter().map(|c| c.0).collect();
        if let Some(own) = class_of_source(&f.source) {
            movable.retain(|c| *c != own);
            movable.insert(0, own);
        }
        // The failing request's own class decides; otherwise the biggest preceding one.
        let key_class = class_of_source(&f.source).or(movable.first().copied());
        let prewarms: Vec<String> = CATALOG
            .iter()
            .filter(|p| key_class.is_some_and(|c| p.targets.contains(&c)))
            .map(|p| p.name.to_string())
            .collect();
        out.push(Forensic {
            t_s: f.t.saturating_sub(bounds.start) as f64 / 1e9,
            phase: bounds.phase_of(f.t),
            step,
            request: key,
            source: f.source.clone(),
            library: f.library.clone(),
            bytes: f.bytes,
            result: f.result,
            device_free_before: f.free_before,
            device_total: f.total,
            message: oom_exception.map(|e| e.message.clone()),
            preceded_by: classes.into_iter().filter(|c| c.1 > 0).collect(),
            movable,
            prewarms,
        });
    }
    if out.is_empty()
        && let Some(e) = oom_exception
    {
        let t = bounds.start + (e.t_s * 1e9) as u64;
        out.push(Forensic {
            t_s: e.t_s,
            phase: e.phase,
            step: bounds.step_of(t),
            request: "not seen by the probe (only the exception)".into(),
            source: String::new(),
            library: String::new(),
            bytes: 0,
            result: 0,
            device_free_before: None,
            device_total: None,
            message: Some(e.message.clone()),
            preceded_by: Vec::new(),
            movable: Vec::new(),
            prewarms: Vec::new(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_texts() {
        assert!(is_oom_text("Triton Error [CUDA]: out of memory"));
        assert!(is_oom_text(
            "NCCL error: unhandled cuda error, NCCL version 2.21.5 ... Cuda failure 2 'out of memory'"
        ));
        assert!(is_oom_text(
            "CUDA out of memory. Tried to allocate 128.00 MiB"
        ));
        assert!(!is_oom_text("ValueError: bad shape"));
    }
}
