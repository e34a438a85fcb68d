//! The process's own facts beside its account: exceptions, the tightest
//! exposures, capture status and the probe's notes, versions, probe health,
//! torch's step-end checks and the steady step's shim time.

use super::query_plan::StepEndReading;
use crate::analysis::account::*;
use crate::analysis::framework_joins::StallWindows;
use crate::analysis::memory::State;
use crate::analysis::phases::secs;
use crate::analysis::phases::{Boundaries, Phase};
use crate::analysis::stats::Stat;
use crate::load::records::ProcessRecords;
use crate::load::shim::{ShimEvent, ShimOwnTime};
use prewarm_events::NoticeLevel;
use std::collections::BTreeMap;

/// The uncaught exceptions the shim recorded.
pub(super) fn exceptions(r: &ProcessRecords, bounds: &Boundaries) -> Vec<ExceptionEvent> {
    r.shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Exception {
                t,
                kind,
                message,
                where_,
                thread,
                pool_reserved,
                pool_allocated,
            } => Some(ExceptionEvent {
                t_s: secs(*t, bounds.start),
                phase: bounds.phase_of(*t),
                step: bounds.step_in_progress(*t),
                thread: thread.clone(),
                kind: kind.clone(),
                message: message.clone(),
                where_: where_.clone(),
                pool_reserved: *pool_reserved,
                pool_allocated: *pool_allocated,
            }),
            _ => None,
        })
        .collect()
}

/// Per phase, the exposure with the least headroom (the first on ties), in
/// phase order.
pub(super) fn tightest(exposures: &[Exposure]) -> Vec<Exposure> {
    let mut tightest: BTreeMap<Phase, Exposure> = BTreeMap::new();
    for e in exposures {
        let Some(h) = e.headroom_after else { continue };
        let better = tightest
            .get(&e.phase)
            .is_none_or(|cur| cur.headroom_after.is_none_or(|c| h < c));
        if better {
            tightest.insert(e.phase, e.clone());
        }
    }
    tightest.into_values().collect()
}

/// The smallest device on which every exposure would still have fit: the
/// largest of the process's own memory before a request plus the request.
pub(super) fn min_capacity(exposures: &[Exposure]) -> Option<u64> {
    exposures
        .iter()
        .filter_map(|e| e.process_used_before.map(|u| u + e.bytes))
        .max()
}

/// How the probe's notice that capture started begins (crates/probe's
/// `initialise`): the header's CUPTI fields say the same.
const CAPTURE_ACTIVE: &str = "capture active: ";

/// Whether the probe captured, and why not: the header's status (or why
/// there is none), overridden by a notice that disabled it.
pub(super) fn capture_status(
    r: &ProcessRecords,
    has_events_file: bool,
    bounds: &Boundaries,
) -> CaptureStatus {
    let status = r.header.get("status").cloned().unwrap_or_else(|| {
        if has_events_file {
            "unknown".into()
        } else {
            "no probe file (CUDA never initialised, or injection was not possible)".into()
        }
    });
    let disabled_note = r
        .notices
        .iter()
        .find(|n| n.level == NoticeLevel::Disabled)
        .map(|n| n.text.clone());
    CaptureStatus {
        active: status == "active" && disabled_note.is_none(),
        detail: disabled_note.unwrap_or(status),
        cupti: r
            .header
            .get("cupti_path")
            .filter(|v| !v.is_empty())
            .map(|p| {
                format!(
                    "{p} (API {})",
                    r.header.get("cupti_version").cloned().unwrap_or_default()
                )
            }),
        notices: r
            .notices
            .iter()
            .filter(|n| n.level != NoticeLevel::Disabled)
            .map(|n| n.text.clone())
            .collect(),
        warnings: placed(r, bounds, |n| n.level == NoticeLevel::Warning),
        notes: placed(r, bounds, |n| {
            n.level == NoticeLevel::Info && !n.text.starts_with(CAPTURE_ACTIVE)
        }),
    }
}

/// The probe's notices that `keep` keeps, each placed in its phase and step.
fn placed(
    r: &ProcessRecords,
    bounds: &Boundaries,
    keep: impl Fn(&prewarm_events::Notice) -> bool,
) -> Vec<ProbeNote> {
    r.notices
        .iter()
        .filter(|n| keep(n))
        .map(|n| ProbeNote {
            t_s: bounds.seconds_in(n.t),
            phase: bounds.phase_of(n.t),
            step: bounds.step_of(n.t),
            text: n.text.clone(),
        })
        .collect()
}

/// Library versions the shim and the probe saw (torch, triton, NCCL, CUPTI, ...).
pub(super) fn versions(r: &ProcessRecords) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    for e in &r.shim {
        match e {
            ShimEvent::Process { versions: v, .. } => {
                for (k, val) in v {
                    if let Some(val) = val {
                        versions.insert(k.clone(), val.clone());
                    }
                }
            }
            ShimEvent::ProcessGroup { nccl, .. } if !nccl.is_empty() => {
                versions.insert("nccl".into(), nccl.clone());
            }
            _ => {}
        }
    }
    if let Some(v) = r.header.get("cupti_version").filter(|v| !v.is_empty()) {
        versions.insert("cupti".into(), v.clone());
    }
    versions
}

/// The probe's self-cost and losses, as it counted them (zeros without).
pub(super) fn probe_health(r: &ProcessRecords) -> ProbeHealth {
    ProbeHealth {
        callbacks: r.cost.as_ref().map_or(0, |c| c.callbacks),
        callback_seconds: r.cost.as_ref().map_or(0.0, |c| c.callback_ns as f64 / 1e9),
        activity_records: r.cost.as_ref().map_or(0, |c| c.activity_records),
        activity_seconds: r.cost.as_ref().map_or(0.0, |c| c.activity_ns as f64 / 1e9),
        writer_seconds: r.cost.as_ref().map_or(0.0, |c| c.flush_ns as f64 / 1e9),
        host_buffer_bytes: r.cost.as_ref().map_or(0, |c| c.activity_buffer_bytes),
        bytes_written: r.cost.as_ref().map_or(0, |c| c.bytes_written),
        dropped_probe_events: r.dropped.as_ref().map_or(0, |d| d.probe_events),
        dropped_cupti_records: r.dropped.as_ref().map_or(0, |d| d.cupti_records),
    }
}

/// torch's figures at each step end beside the doctor's pool at that
/// instant (`states`: the replay's step-end states, in the same order).
pub(super) fn step_checks(readings: &[StepEndReading], states: &[State]) -> Vec<StepCheck> {
    readings
        .iter()
        .zip(states)
        .map(|(s, st)| StepCheck {
            step: s.step,
            torch_reserved: s.reserved,
            doctor_pool_reserved: st.pool,
            torch_device_used: s.device_used,
        })
        .collect()
}

/// The step structure: how many steps ended, the rule that placed step 1,
/// the setup and step-1 durations, the steady step (over the steps 2..N
/// without lazy initialisation: `stalls`' windows, `local` growths) and the
/// step the process died in; the shim's own time in the steady steps (from
/// its lines' `own_ns`), and how many of them were among its first,
/// detailed steps (`detailed_ends`: the ends at which it read memory
/// statistics).
pub(super) fn step_info(
    bounds: &Boundaries,
    stalls: &StallWindows,
    local: &[LocalMemoryEvent],
    shim: &[ShimOwnTime],
    detailed_ends: &[u64],
) -> StepInfo {
    let steady = crate::analysis::steady::steady_step(bounds, stalls, local);
    let steady_shim_s = steady
        .as_ref()
        .and_then(|s| steady_shim_seconds(&s.windows, shim, bounds.start));
    let steady_shim_first_steps = match (&steady, steady_shim_s) {
        (Some(s), Some(_)) => s
            .windows
            .iter()
            .filter(|w| detailed_ends.contains(&w.1))
            .count() as u32,
        _ => 0,
    };
    StepInfo {
        count: bounds.step_ends.len() as u32,
        rule: bounds.rule.clone(),
        setup_s: bounds.setup_ns().map(|n| n as f64 / 1e9),
        step1_s: bounds
            .window(Phase::Step1)
            .map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
        steady_step_s: steady.as_ref().map(|s| s.seconds),
        steady_steps: steady.as_ref().map_or(0, |s| s.steps),
        steady_basis: steady.as_ref().map(|s| s.basis),
        steady_shim_s,
        steady_shim_first_steps,
        lazy_steps: steady.map(|s| s.lazy_steps).unwrap_or_default(),
        died_in_step: bounds.died_in_step(),
    }
}

/// The median of the shim's own time over `windows` (steps); None unless
/// its lines state it for every one of them.
fn steady_shim_seconds(windows: &[(u64, u64)], shim: &[ShimOwnTime], origin: u64) -> Option<f64> {
    let per_step = crate::analysis::own_time::shim_seconds_in(shim, origin, windows)?;
    Some(Stat::of(&per_step)?.median)
}
