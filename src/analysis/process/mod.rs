//! The account of one process: phases, memory by source reconciled with device
//! truth, exposure, framework joins, stalls, late warmups and forensics.
//!
//! [`analyse_process`] runs named stages, each a function with its own unit
//! test: the process's phases ([`process_boundaries`], here), the instants
//! the replay must answer ([`QueryPlan`], `query_plan.rs`), the replay
//! (`memory`), the context's bytes, each communicator's inferred bytes and
//! the phases with the out-of-pool account at their end (`phase_accounts.rs`),
//! and the process's own facts (capture status, versions, probe health,
//! torch's step-end figures: `facts.rs`).

use super::account::*;
use super::device::{DeviceView, device_view};
use super::forensics::forensics;
use super::framework_joins::{self, CommWindow, StallWindows};
use super::phases::Boundaries;
use crate::analysis::memory::{Replay, replay};
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;
use crate::load::{HostData, ProcessFiles};
use prewarm_events::NoticeLevel;

mod facts;
mod phase_accounts;
mod query_plan;
#[cfg(test)]
mod tests;

use facts::*;
use phase_accounts::*;
use query_plan::*;

/// Builds the account of one process; None for processes that never created
/// a CUDA context and never stepped (launchers, tools).
pub fn analyse_process(
    host: &HostData,
    files: &ProcessFiles,
    mut r: ProcessRecords,
    host_tag: &str,
) -> Option<ProcessAccount> {
    if !deserves_account(&r) {
        return None;
    }
    let use_markers = host
        .meta
        .as_ref()
        .is_some_and(|m| m.env.contains_key("PREWARM_DOCTOR_STEP_MARKER"));
    let bounds = process_boundaries(&r, use_markers);
    let bus = r
        .contexts
        .first()
        .map(|c| c.pci_bus_id.clone())
        .filter(|b| !b.is_empty());
    let (device, baseline) = device_view(host, files.pid, bus.as_deref(), &r);
    let clock = host
        .meta
        .as_ref()
        .map(|m| (m.started_unix_ns, m.t_start_ns))
        .filter(|c| c.0 > 0);
    let comm_windows = framework_joins::comm_windows(&host.nccl, files.pid, clock);
    let plan = QueryPlan::new(&r, &bounds, &comm_windows);
    let rp = replay(&r, &bounds, &device, &plan.queries, &plan.comm_exclusions());
    let context_bytes = context_bytes(&r, &device, baseline);
    let comm_inferred = comm_inferred_bytes(&plan, &comm_windows, &rp.states, &device);
    let problems = std::mem::take(&mut r.problems);
    Some(account_of(Found {
        host_tag,
        files,
        gpu: bus,
        problems,
        r: &r,
        bounds: &bounds,
        device: &device,
        plan: &plan,
        comm_windows: &comm_windows,
        comm_inferred: &comm_inferred,
        context_bytes,
        rp,
    }))
}

/// What the first stages found, for the rest of the account.
struct Found<'a> {
    host_tag: &'a str,
    files: &'a ProcessFiles,
    /// The PCI bus id of the process's first context.
    gpu: Option<String>,
    problems: Vec<crate::load::Problem>,
    r: &'a ProcessRecords,
    bounds: &'a Boundaries,
    device: &'a DeviceView,
    plan: &'a QueryPlan,
    comm_windows: &'a [CommWindow],
    comm_inferred: &'a [(u64, u64)],
    context_bytes: Option<u64>,
    rp: Replay,
}

/// The account from the replay on: communicators, autotunes, compiles,
/// phases, forensics, late warmups, exposure, the timeline.
fn account_of(f: Found) -> ProcessAccount {
    let Found {
        host_tag,
        files,
        gpu,
        problems,
        r,
        bounds,
        device,
        plan,
        comm_windows,
        comm_inferred,
        context_bytes,
        mut rp,
    } = f;
    let joins = framework_joins(r, bounds, plan, comm_windows, comm_inferred, &mut rp);
    let inputs = PhaseInputs {
        r,
        bounds,
        device,
        rp: &rp,
        context_bytes,
        nccl: &joins.nccl,
        nccl_outside: &joins.nccl_outside,
        comm_inferred,
        stall_windows: &joins.stall_windows,
    };
    let phases = phase_accounts(plan, &inputs);
    let exceptions = exceptions(r, bounds);
    let forensics = forensics(&rp, &joins.nccl, &joins.nccl_outside, &exceptions, bounds);
    let failed_calls = super::forensics::failed_calls(&rp, bounds);
    let late_warmups = late_warmups(r, bounds, &joins, &rp, &phases);
    let timeline = super::timeline_build::build(
        std::mem::take(&mut rp.timeline),
        device,
        bounds,
        super::timeline_build::Found {
            context: r.contexts.first().map(|c| c.t).zip(context_bytes),
            local: &rp.local_events,
            nccl: &joins.nccl,
            autotune: &joins.autotune,
            compiles: &joins.compiles,
            forensics: &forensics,
        },
    );
    let header_u32 = |k: &str| r.header.get(k).and_then(|v| v.parse::<u32>().ok());
    ProcessAccount {
        host: host_tag.to_string(),
        pid: files.pid,
        rank: files.rank.or(header_u32("RANK")),
        local_rank: header_u32("LOCAL_RANK"),
        world_size: header_u32("WORLD_SIZE"),
        device: r.contexts.first().map(|c| c.device),
        gpu,
        capture: capture_status(r, files.events.is_some(), bounds),
        versions: versions(r),
        steps: step_info(
            bounds,
            &joins.stall_windows,
            &rp.local_events,
            &r.shim_own_time,
            &detailed_step_ends(&r.shim),
        ),
        memory_source: device.used_source.clone(),
        context_bytes,
        phases,
        tightest: tightest(&rp.exposures),
        min_capacity_bytes: min_capacity(&rp.exposures),
        local_memory: rp.local_events,
        exposures: rp.exposures,
        nccl: joins.nccl,
        autotune: joins.autotune,
        compiles: joins.compiles,
        late_warmups,
        forensics,
        failed_calls,
        exceptions,
        health: probe_health(r),
        shim_hooks: crate::analysis::own_time::shim_hook_costs(&r.shim),
        shim_writes: crate::analysis::own_time::shim_writes(&r.shim),
        step_checks: step_checks(&plan.step_ends, &rp.states[plan.first_step_query()..]),
        prescription_failures: prescription_failures(&r.shim),
        problems,
        timeline,
    }
}

/// What the framework's records joined with the replay give: communicator
/// accounts (named after their torch groups), Triton autotunes, JIT
/// compiles, and the windows of each kind of stall.
struct Joins {
    nccl: Vec<CommAccount>,
    /// NCCL's allocation calls outside every communicator's init (time, bytes).
    nccl_outside: Vec<(u64, u64)>,
    autotune: Vec<AutotuneAccount>,
    compiles: Vec<CompileEvent>,
    stall_windows: StallWindows,
}

/// Joins the framework's records with the replay (see [`Joins`]); the
/// autotunes mark the local-memory events of their candidates in `rp`.
fn framework_joins(
    r: &ProcessRecords,
    bounds: &Boundaries,
    plan: &QueryPlan,
    comm_windows: &[CommWindow],
    comm_inferred: &[(u64, u64)],
    rp: &mut Replay,
) -> Joins {
    let mut nccl = framework_joins::comm_accounts(
        comm_windows,
        &plan.alloc_at,
        &rp.oop_allocs,
        bounds,
        comm_inferred,
    );
    super::comm_groups::name_from_torch(&mut nccl, &r.shim);
    let cublas_ids = cublas_libraries(r);
    Joins {
        nccl,
        nccl_outside: framework_joins::nccl_outside_comms(&rp.oop_allocs, &plan.alloc_at),
        autotune: framework_joins::autotune_accounts(r, rp, bounds),
        compiles: framework_joins::compile_events(r, bounds),
        stall_windows: StallWindows::collect(
            r,
            comm_windows,
            |id| cublas_ids.contains(&id),
            bounds.end,
        ),
    }
}

/// What to warm that was first used after setup (framework_joins::late_warmups).
fn late_warmups(
    r: &ProcessRecords,
    bounds: &Boundaries,
    joins: &Joins,
    rp: &Replay,
    phases: &[PhaseAccount],
) -> Vec<LateWarmup> {
    let first_launches: Vec<u64> = r.first_launches.iter().map(|k| k.t_start).collect();
    framework_joins::late_warmups(&framework_joins::LateInputs {
        bounds,
        autotune: &joins.autotune,
        compiles: &joins.compiles,
        comms: &joins.nccl,
        local: &rp.local_events,
        phases,
        first_launches: &first_launches,
        cublas: &joins.stall_windows.cublas,
        oop_allocs: &rp.oop_allocs,
    })
}

/// Whether a process deserves an account: it created a CUDA context, stepped,
/// or had its capture disabled (which the report must say). Launchers and
/// tools do none of these.
fn deserves_account(r: &ProcessRecords) -> bool {
    let stepped = r
        .shim
        .iter()
        .any(|e| matches!(e, ShimEvent::StepEnd { .. }));
    let disabled = r.notices.iter().any(|n| n.level == NoticeLevel::Disabled)
        || r.header.get("status").is_some_and(|s| s != "active");
    !r.contexts.is_empty() || stepped || disabled
}

/// The process's phases: from its start (the earlier of the probe header's
/// `start_ns` and the shim's process record) to its last record of either
/// kind, split by the step rule (explicit step markers when `use_markers`).
fn process_boundaries(r: &ProcessRecords, use_markers: bool) -> Boundaries {
    let header_start = r.header.get("start_ns").and_then(|v| v.parse::<u64>().ok());
    let shim_times = r.shim.iter().filter_map(|e| match e {
        ShimEvent::Process { t, .. }
        | ShimEvent::StepEnd { t, .. }
        | ShimEvent::Step1Begin { t, .. }
        | ShimEvent::Exception { t, .. } => Some(*t),
        ShimEvent::Marker { t1, .. }
        | ShimEvent::Autotune { t1, .. }
        | ShimEvent::AutotuneConfig { t1, .. }
        | ShimEvent::Compile { t1, .. } => Some(*t1),
        _ => None,
    });
    let shim_first = r.shim.iter().find_map(|e| match e {
        ShimEvent::Process { t, .. } => Some(*t),
        _ => None,
    });
    let start = [header_start, shim_first]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
    let end = shim_times.chain([r.last_t, start]).max().unwrap_or(start);
    Boundaries::from_events(&r.shim, use_markers, start, end)
}

/// How many items of an injected prescription failed in this process: the
/// shim's count when the prescription ran (the most it reported).
fn prescription_failures(shim: &[crate::load::shim::ShimEvent]) -> u32 {
    shim.iter()
        .filter_map(|e| match e {
            crate::load::shim::ShimEvent::Prescription { failed, .. } => Some(*failed),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The ends of the steps at which the shim read torch's memory statistics
/// (its first, detailed steps, and every hundredth after them).
fn detailed_step_ends(shim: &[ShimEvent]) -> Vec<u64> {
    shim.iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd {
                t,
                reserved: Some(_),
                ..
            } => Some(*t),
            _ => None,
        })
        .collect()
}
