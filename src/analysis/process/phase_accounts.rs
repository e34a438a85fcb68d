//! The phases with the out-of-pool account at their end: the context's
//! bytes, each communicator's inferred bytes, the sources live at the end and
//! the gap account that adds up to the device's own figure.

use super::query_plan::QueryPlan;
use crate::analysis::account::*;
use crate::analysis::device::DeviceView;
use crate::analysis::framework_joins::{CommWindow, StallWindows, Window};
use crate::analysis::memory::{Replay, State};
use crate::analysis::phases::secs;
use crate::analysis::phases::{Boundaries, Phase};
use crate::analysis::sources::TORCH_POOL;
use crate::load::records::ProcessRecords;
use prewarm_events::{MemApi, UNKNOWN_BYTES};
use std::collections::{BTreeMap, HashSet};

/// The CUDA context: device memory held right after it came up (cuMemGetInfo
/// at creation, minus what the device held before the call that created it,
/// or before the run), including the local-memory reservation every context
/// starts with. None when the probe could not read the device.
///
/// On a shared GPU the device-wide difference also holds what the other
/// processes allocated or freed while the context came up: their own NVML
/// figures' change across the call is taken out (on an H100 beside a
/// neighbour that grew 56 MiB across the creation call, that growth had gone
/// into the context: a setup remainder of -63.6 MiB).
pub(super) fn context_bytes(
    r: &ProcessRecords,
    device: &DeviceView,
    baseline: Option<u64>,
) -> Option<u64> {
    let c = r.contexts.first()?;
    if c.free == UNKNOWN_BYTES || c.total == UNKNOWN_BYTES {
        return None;
    }
    let call_start = r
        .mem
        .iter()
        .filter(|m| matches!(m.api, MemApi::PrimaryCtxRetain | MemApi::CtxCreate) && m.t_end >= c.t)
        .map(|m| m.t_start)
        .min()
        .unwrap_or(c.t);
    let before = device.device_used.at(call_start).or(baseline).unwrap_or(0);
    let grown = (c.total - c.free) as i64 - before as i64;
    // Alone on the GPU there are no others: their change is 0.
    let others = device.others_change(call_start, c.t);
    Some((grown - others).max(0) as u64)
}

/// The device's reading of the process at `t` minus everything the replay
/// holds then (None without a reading).
fn remainder(device: &DeviceView, t: u64, state: &State) -> Option<i64> {
    device.used.at(t).map(|u| {
        u as i64
            - (state.pool + state.oop_total() + state.local_growth + state.module_code) as i64
            - state.untraced
    })
}

/// Per communicator, (when NCCL reported it complete, inferred bytes): the
/// growth of the unexplained remainder across its measurement span (never
/// negative); (0, 0) for one without a span. A phase end after that instant
/// holds the bytes.
pub(super) fn comm_inferred_bytes(
    plan: &QueryPlan,
    comm_windows: &[CommWindow],
    states: &[State],
    device: &DeviceView,
) -> Vec<(u64, u64)> {
    let mut qi = plan.first_comm_query();
    let mut out = Vec::new();
    for (span, c) in plan.read_at.iter().zip(comm_windows) {
        match (span, c.window) {
            (Some((a, b)), Some(w)) => {
                let before = remainder(device, *a, &states[qi]);
                let after = remainder(device, *b, &states[qi + 1]);
                qi += 2;
                out.push((
                    w.1,
                    before.zip(after).map_or(0, |(x, y)| (y - x).max(0) as u64),
                ));
            }
            _ => out.push((0, 0)),
        }
    }
    out
}

/// Library ids whose path classifies as cuBLAS (their driver-call bursts are
/// cuBLAS initialisation).
pub(super) fn cublas_libraries(r: &ProcessRecords) -> HashSet<u32> {
    r.libraries
        .iter()
        .filter(|(_, path)| crate::analysis::sources::classify(path).0 == "cublas")
        .map(|(id, _)| *id)
        .collect()
}

/// What every phase's account reads besides its window and state.
pub(super) struct PhaseInputs<'a> {
    pub(super) r: &'a ProcessRecords,
    pub(super) bounds: &'a Boundaries,
    pub(super) device: &'a DeviceView,
    pub(super) rp: &'a Replay,
    pub(super) context_bytes: Option<u64>,
    pub(super) nccl: &'a [CommAccount],
    pub(super) nccl_outside: &'a [(u64, u64)],
    pub(super) comm_inferred: &'a [(u64, u64)],
    pub(super) stall_windows: &'a StallWindows,
}

/// The account of every phase, in phase order.
pub(super) fn phase_accounts(plan: &QueryPlan, inp: &PhaseInputs) -> Vec<PhaseAccount> {
    plan.phase_windows
        .iter()
        .enumerate()
        .map(|(i, (p, w))| phase_account(*p, *w, plan.gap_instant(*w), &inp.rp.states[i], inp))
        .collect()
}

/// One phase: its totals from the replay, `state` at its accounting instant
/// `gap_t`, its stalls and probe time, and the out-of-pool account there.
pub(super) fn phase_account(
    p: Phase,
    (a, b): Window,
    gap_t: u64,
    state: &State,
    inp: &PhaseInputs,
) -> PhaseAccount {
    let start = inp.bounds.start;
    let totals = inp.rp.phases.get(&p).cloned().unwrap_or_default();
    let by_source = sources_at_end(
        totals.by_source.into_values().collect(),
        state,
        &inp.rp.libraries_by_source,
    );
    let nccl_code = nccl_code_held(inp.nccl, inp.comm_inferred, gap_t);
    let gap_end = inp.device.own_used_at(gap_t).map(|device_used| {
        gap_account(
            secs(gap_t, start),
            device_used,
            state,
            inp.rp.initial_local,
            inp.context_bytes,
            nccl_code,
        )
    });
    let module_image_bytes = inp
        .r
        .modules
        .iter()
        .filter(|m| m.t >= a && m.t <= b)
        .map(|m| m.cubin_bytes)
        .sum();
    let own = crate::analysis::own_time::own_time_between(
        &inp.r.costs,
        &inp.r.shim_own_time,
        start,
        a,
        b,
    );
    PhaseAccount {
        phase: p,
        start_s: secs(a, start),
        end_s: secs(b, start),
        duration_s: b.saturating_sub(a) as f64 / 1e9,
        steps: match p {
            Phase::Step1 => 1,
            Phase::Steady => inp.bounds.step_ends.len().saturating_sub(1) as u32,
            _ => 0,
        },
        device_used_peak: inp.device.own_used_peak(a, b),
        pool_reserved_peak: totals.pool_peak.max(state.pool),
        pool_reserved_end: state.pool,
        out_of_pool_allocated: totals.oop_alloc,
        out_of_pool_freed: totals.oop_freed,
        out_of_pool_live_end: state.oop_total(),
        by_source,
        nccl_outside_comms: nccl_outside_in(p, inp),
        local_memory_growth: totals.local_growth,
        module_code_bytes: totals.module_code,
        module_loads: totals.module_loads,
        module_image_bytes,
        kernels_first_launched: totals.first_launches,
        host_pinned_allocated: totals.pinned,
        failed_requests: totals.failed,
        stall: inp.stall_windows.breakdown(a, b),
        probe_s: own.total_s,
        probe_callbacks_s: own.callbacks_s,
        probe_callbacks_split: own.callback_split,
        shim_s: own.shim_s,
        gap_end,
    }
}

/// NCCL's allocations in phase `p` outside every communicator's init: in
/// the phase's `nccl` source, in no communicator's bytes.
fn nccl_outside_in(p: Phase, inp: &PhaseInputs) -> u64 {
    inp.nccl_outside
        .iter()
        .filter(|(t, _)| inp.bounds.phase_of(*t) == p)
        .map(|x| x.1)
        .sum()
}

/// A phase's sources, most allocated first, each with what it still held at
/// the phase's accounting instant (`state`) and the libraries it called from.
pub(super) fn sources_at_end(
    mut by_source: Vec<SourceBytes>,
    state: &State,
    libraries: &BTreeMap<String, Vec<String>>,
) -> Vec<SourceBytes> {
    for sb in by_source.iter_mut() {
        sb.live_end = if sb.source == TORCH_POOL {
            state.pool
        } else {
            state.oop.get(sb.source.as_str()).copied().unwrap_or(0)
        };
        sb.libraries = libraries.get(&sb.source).cloned().unwrap_or_default();
    }
    by_source.sort_by_key(|x| std::cmp::Reverse(x.allocated));
    by_source
}

/// NCCL's inferred bytes (growth in init windows without allocation calls)
/// of the communicators complete by `gap_t`.
pub(super) fn nccl_code_held(
    nccl: &[CommAccount],
    comm_inferred: &[(u64, u64)],
    gap_t: u64,
) -> u64 {
    nccl.iter()
        .zip(comm_inferred)
        .filter(|(_, ci)| ci.0 > 0 && ci.0 <= gap_t)
        .map(|(c, _)| c.inferred_bytes)
        .sum()
}

/// The memory outside PyTorch's pool when the process held `device_used`,
/// split by what holds it: the context, each
/// library's live allocations, local-memory growth and what a failed launch
/// dropped, NCCL's and module loading's inferred growth, the change across
/// untraced stretches; the rest is unexplained.
pub(super) fn gap_account(
    at_s: f64,
    device_used: u64,
    state: &State,
    initial_local: u64,
    context_bytes: Option<u64>,
    nccl_code: u64,
) -> GapAccount {
    let part = |source: PartSource, bytes: i64, inferred: bool| GapPart {
        source,
        context: None,
        bytes,
        inferred,
    };
    let mut parts = Vec::new();
    if let Some(c) = context_bytes {
        parts.push(GapPart {
            context: Some(ContextDetail {
                initial_local_memory: initial_local,
            }),
            ..part(PartSource::Context, c as i64, false)
        });
    }
    for (s, bytes) in &state.oop {
        if *bytes > 0 {
            parts.push(part(
                PartSource::Library(s.to_string()),
                *bytes as i64,
                false,
            ));
        }
    }
    if state.local_growth > 0 {
        parts.push(part(
            PartSource::LocalMemoryGrowth,
            state.local_growth as i64,
            false,
        ));
    }
    if state.local_released > 0 {
        parts.push(part(
            PartSource::LocalMemoryDropped,
            -(state.local_released as i64),
            false,
        ));
    }
    if state.released_other > 0 {
        parts.push(part(
            PartSource::ReleasedAtFailure,
            -(state.released_other as i64),
            false,
        ));
    }
    if nccl_code > 0 {
        parts.push(part(
            PartSource::NcclWithoutAllocations,
            nccl_code as i64,
            true,
        ));
    }
    if state.module_code > 0 {
        parts.push(part(PartSource::ModuleCode, state.module_code as i64, true));
    }
    if state.untraced != 0 {
        parts.push(part(PartSource::Untraced, state.untraced, true));
    }
    GapAccount::new(at_s, device_used, state.pool, parts)
}
