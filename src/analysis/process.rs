//! The account of one process: phases, memory by source reconciled with device
//! truth, exposure, framework joins, stalls, late warmups and forensics.
//!
//! [`analyse_process`] runs named stages, each a function below with its own
//! unit test: the process's phases ([`process_boundaries`]), the instants the
//! replay must answer ([`QueryPlan`]), the replay (`memory`), the context's
//! bytes, each communicator's inferred bytes, the phases with the out-of-pool
//! account at their end, and the process's own facts (capture status,
//! versions, probe health, torch's step-end figures).

use super::account::*;
use super::device::{DeviceView, device_view};
use super::forensics::forensics;
use super::framework_joins::{self, CommWindow, StallWindows, Window};
use super::memory::{Replay, State, replay};
use super::phases::{Boundaries, Phase};
use super::sources::TORCH_POOL;
use super::stats::Stat;
use crate::load::records::ProcessRecords;
use crate::load::shim::{ShimEvent, ShimOwnTime};
use crate::load::{HostData, ProcessFiles};
use prewarm_events::{MemApi, NoticeLevel, UNKNOWN_BYTES};
use std::collections::{BTreeMap, HashSet};

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

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
        shim_hooks: super::own_time::shim_hook_costs(&r.shim),
        shim_writes: super::own_time::shim_writes(&r.shim),
        step_checks: step_checks(&plan.step_ends, &rp.states[plan.first_step_query()..]),
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
        stall_windows: StallWindows::collect(r, comm_windows, |id| cublas_ids.contains(&id)),
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

/// torch's own figures at one step end, put beside the doctor's pool.
#[derive(Debug, Clone, PartialEq)]
struct StepEndReading {
    step: u32,
    t: u64,
    /// torch's pool reserve.
    reserved: Option<u64>,
    /// Device total minus free, as torch read it.
    device_used: Option<u64>,
}

/// Every step end the shim recorded, with torch's figures.
fn step_end_readings(r: &ProcessRecords) -> Vec<StepEndReading> {
    r.shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd {
                t,
                step,
                reserved,
                device_free,
                device_total,
                ..
            } => Some(StepEndReading {
                step: *step,
                t: *t,
                reserved: *reserved,
                device_used: device_total
                    .zip(*device_free)
                    .map(|(a, b)| a.saturating_sub(b)),
            }),
            _ => None,
        })
        .collect()
}

/// The instants whose memory state the account needs, in the order the
/// replay answers them: each phase's accounting instant, both ends of each
/// communicator's measurement span, then each step end.
#[derive(Debug)]
struct QueryPlan {
    phase_windows: Vec<(Phase, Window)>,
    /// When the process died (its exception), if it did.
    died_at: Option<u64>,
    /// Each communicator's init window, made disjoint (framework_joins::comm_spans).
    spans: Vec<Option<Window>>,
    /// Where each communicator's inferred bytes are read: span ends outside
    /// any local-memory growth's window (framework_joins::comm_measure_spans).
    read_at: Vec<Option<Window>>,
    /// Where each communicator's allocation calls count: from its Init START
    /// line to its span's end (framework_joins::comm_alloc_windows).
    alloc_at: Vec<Option<Window>>,
    step_ends: Vec<StepEndReading>,
    queries: Vec<u64>,
}

impl QueryPlan {
    fn new(r: &ProcessRecords, bounds: &Boundaries, comm_windows: &[CommWindow]) -> QueryPlan {
        let phase_windows: Vec<(Phase, Window)> = Phase::ALL
            .iter()
            .filter_map(|p| bounds.window(*p).map(|w| (*p, w)))
            .collect();
        let spans =
            framework_joins::comm_spans(&comm_windows.iter().map(|c| c.window).collect::<Vec<_>>());
        let read_at =
            framework_joins::comm_measure_spans(&spans, &super::memory::growth_windows(r));
        let alloc_at = framework_joins::comm_alloc_windows(comm_windows, &spans);
        let mut plan = QueryPlan {
            phase_windows,
            died_at: bounds.died,
            spans,
            read_at,
            alloc_at,
            step_ends: step_end_readings(r),
            queries: Vec::new(),
        };
        let phase_instants: Vec<u64> = plan
            .phase_windows
            .iter()
            .map(|(_, w)| plan.gap_instant(*w))
            .collect();
        let comm_instants = plan.read_at.iter().flatten().flat_map(|s| [s.0, s.1]);
        let mut queries: Vec<u64> = phase_instants.into_iter().chain(comm_instants).collect();
        queries.extend(plan.step_ends.iter().map(|s| s.t));
        plan.queries = queries;
        plan
    }

    /// Where a phase [a, b] is accounted: its end, or the exception when the
    /// process died inside it (teardown frees memory and would hide what was
    /// held).
    fn gap_instant(&self, (a, b): Window) -> u64 {
        match self.died_at {
            Some(d) if d >= a && d <= b => d,
            _ => b,
        }
    }

    /// Windows across which the replay does not measure module code: the
    /// communicators' spans (their growth is NCCL's inferred figure).
    fn comm_exclusions(&self) -> Vec<Window> {
        self.spans.iter().flatten().copied().collect()
    }

    /// The replay state of the first communicator query.
    fn first_comm_query(&self) -> usize {
        self.phase_windows.len()
    }

    /// The replay state of the first step-end query.
    fn first_step_query(&self) -> usize {
        self.first_comm_query() + 2 * self.read_at.iter().flatten().count()
    }
}

/// The CUDA context: device memory held right after it came up (cuMemGetInfo
/// at creation, minus what the device held before the call that created it,
/// or before the run), including the local-memory reservation every context
/// starts with. None when the probe could not read the device.
fn context_bytes(r: &ProcessRecords, device: &DeviceView, baseline: Option<u64>) -> Option<u64> {
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
    Some((c.total - c.free).saturating_sub(before))
}

/// The device's reading of the process at `t` minus everything the replay
/// holds then (None without a reading).
fn remainder(device: &DeviceView, t: u64, state: &State) -> Option<i64> {
    device.used.at(t).map(|u| {
        u as i64
            - (state.pool
                + state.oop_total()
                + state.local_growth
                + state.context_late
                + state.module_code) as i64
    })
}

/// Per communicator, (when NCCL reported it complete, inferred bytes): the
/// growth of the unexplained remainder across its measurement span (never
/// negative); (0, 0) for one without a span. A phase end after that instant
/// holds the bytes.
fn comm_inferred_bytes(
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
fn cublas_libraries(r: &ProcessRecords) -> HashSet<u32> {
    r.libraries
        .iter()
        .filter(|(_, path)| super::sources::classify(path).0 == "cublas")
        .map(|(id, _)| *id)
        .collect()
}

/// What every phase's account reads besides its window and state.
struct PhaseInputs<'a> {
    r: &'a ProcessRecords,
    bounds: &'a Boundaries,
    device: &'a DeviceView,
    rp: &'a Replay,
    context_bytes: Option<u64>,
    nccl: &'a [CommAccount],
    nccl_outside: &'a [(u64, u64)],
    comm_inferred: &'a [(u64, u64)],
    stall_windows: &'a StallWindows,
}

/// The account of every phase, in phase order.
fn phase_accounts(plan: &QueryPlan, inp: &PhaseInputs) -> Vec<PhaseAccount> {
    plan.phase_windows
        .iter()
        .enumerate()
        .map(|(i, (p, w))| phase_account(*p, *w, plan.gap_instant(*w), &inp.rp.states[i], inp))
        .collect()
}

/// One phase: its totals from the replay, `state` at its accounting instant
/// `gap_t`, its stalls and probe time, and the out-of-pool account there.
fn phase_account(
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
    let own = super::own_time::own_time_between(&inp.r.costs, &inp.r.shim_own_time, start, a, b);
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
fn sources_at_end(
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
fn nccl_code_held(nccl: &[CommAccount], comm_inferred: &[(u64, u64)], gap_t: u64) -> u64 {
    nccl.iter()
        .zip(comm_inferred)
        .filter(|(_, ci)| ci.0 > 0 && ci.0 <= gap_t)
        .map(|(c, _)| c.inferred_bytes)
        .sum()
}

/// The memory outside PyTorch's pool when the process held `device_used`,
/// split by what holds it: the context (with its first-launch commit), each
/// library's live allocations, local-memory growth and what a failed launch
/// dropped, NCCL's and module loading's inferred growth; the rest is
/// unexplained.
fn gap_account(
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
                committed_at_first_launch: state.context_late,
            }),
            ..part(PartSource::Context, (c + state.context_late) as i64, false)
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
    let out_of_pool = device_used.saturating_sub(state.pool);
    let named: i64 = parts.iter().map(|p| p.bytes).sum();
    GapAccount {
        at_s,
        device_used,
        pool_reserved: state.pool,
        out_of_pool,
        parts,
        unexplained: out_of_pool as i64 - named,
    }
}

/// The uncaught exceptions the shim recorded.
fn exceptions(r: &ProcessRecords, bounds: &Boundaries) -> Vec<ExceptionEvent> {
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
fn tightest(exposures: &[Exposure]) -> Vec<Exposure> {
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
fn min_capacity(exposures: &[Exposure]) -> Option<u64> {
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
fn capture_status(r: &ProcessRecords, has_events_file: bool, bounds: &Boundaries) -> CaptureStatus {
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
fn versions(r: &ProcessRecords) -> BTreeMap<String, String> {
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
fn probe_health(r: &ProcessRecords) -> ProbeHealth {
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
fn step_checks(readings: &[StepEndReading], states: &[State]) -> Vec<StepCheck> {
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
/// its lines' `own_ns`).
fn step_info(
    bounds: &Boundaries,
    stalls: &StallWindows,
    local: &[LocalMemoryEvent],
    shim: &[ShimOwnTime],
) -> StepInfo {
    let steady = super::steady::steady_step(bounds, stalls, local);
    let steady_shim_s = steady
        .as_ref()
        .and_then(|s| steady_shim_seconds(&s.windows, shim, bounds.start));
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
        lazy_steps: steady.map(|s| s.lazy_steps).unwrap_or_default(),
        died_in_step: bounds.died_in_step(),
    }
}

/// The median of the shim's own time over `windows` (steps); None unless
/// its lines state it for every one of them.
fn steady_shim_seconds(windows: &[(u64, u64)], shim: &[ShimOwnTime], origin: u64) -> Option<f64> {
    let per_step = super::own_time::shim_seconds_in(shim, origin, windows)?;
    Some(Stat::of(&per_step)?.median)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::device::Series;
    use prewarm_events::{ContextCreated, MemCall, ModuleLoad, Notice, ProbeCost, RecordsDropped};
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    fn step_end(t: u64, step: u32) -> ShimEvent {
        ShimEvent::step_end_at(t, step)
    }

    fn exception(t: u64) -> ShimEvent {
        ShimEvent::Exception {
            t,
            kind: "OutOfMemoryError".into(),
            message: "CUDA out of memory".into(),
            where_: Vec::new(),
            thread: None,
            pool_reserved: Some(7),
            pool_allocated: Some(5),
        }
    }

    fn context(t: u64, free: u64, total: u64) -> ContextCreated {
        ContextCreated {
            t,
            device: 0,
            context_id: 1,
            pci_bus_id: "0000:19:00.0".into(),
            free,
            total,
        }
    }

    fn call(t_start: u64, t_end: u64, api: MemApi) -> MemCall {
        MemCall {
            t_start,
            t_end,
            api,
            thread: 0,
            device: 0,
            bytes: 0,
            address: 0,
            result: 0,
            library: 0,
            free_before: UNKNOWN_BYTES,
            free_after: UNKNOWN_BYTES,
            total: UNKNOWN_BYTES,
        }
    }

    fn series(points: &[(u64, u64)]) -> Series {
        Series {
            points: points.to_vec(),
        }
    }

    /// Setup [0, 100), step 1 [100, 200], steady (200, 400], teardown to 500.
    fn bounds() -> Boundaries {
        Boundaries {
            start: 0,
            step1_begin: Some(100),
            step_ends: vec![200, 300, 400],
            end: 500,
            rule: "test".into(),
            died: None,
        }
    }

    fn state(pool: u64, oop: &[(&str, u64)]) -> State {
        State {
            pool,
            oop: oop.iter().map(|(s, b)| (Arc::from(*s), *b)).collect(),
            ..Default::default()
        }
    }

    fn exposure(phase: Phase, headroom: Option<i64>, used: Option<u64>, bytes: u64) -> Exposure {
        Exposure {
            t_s: 0.0,
            phase,
            step: None,
            kind: "allocation".into(),
            source: "nccl".into(),
            what: format!("{headroom:?}"),
            bytes,
            device_used_before: None,
            process_used_before: used,
            pool_reserved: 0,
            device_free_before: None,
            headroom_after: headroom,
            succeeded: true,
        }
    }

    fn comm(inferred_bytes: u64) -> CommAccount {
        CommAccount {
            comm: "0x1".into(),
            comm_id: None,
            rank: None,
            nranks: None,
            phase: None,
            step: None,
            start_s: None,
            init_seconds: None,
            bytes: 0,
            inferred_bytes,
            timings: BTreeMap::new(),
            group: None,
        }
    }

    /// A communicator with this init window (no Init START line).
    fn comm_window(window: Option<Window>) -> CommWindow {
        CommWindow {
            comm: crate::load::nccl::NcclComm::seen("", Some(1), "0x1"),
            window,
            started: None,
        }
    }

    #[test]
    fn only_processes_that_used_cuda_stepped_or_were_disabled_get_an_account() {
        let mut r = ProcessRecords::default();
        assert!(!deserves_account(&r), "a launcher");
        r.header.insert("status".into(), "active".into());
        assert!(!deserves_account(&r), "an active probe that saw nothing");
        r.contexts.push(context(1, 0, 0));
        assert!(deserves_account(&r));
        let stepped = ProcessRecords {
            shim: vec![step_end(5, 1)],
            ..Default::default()
        };
        assert!(deserves_account(&stepped));
        let disabled = ProcessRecords {
            notices: vec![Notice {
                t: 1,
                level: NoticeLevel::Disabled,
                text: "stopped".into(),
            }],
            ..Default::default()
        };
        assert!(deserves_account(&disabled));
        let mut off = ProcessRecords::default();
        off.header.insert("status".into(), "no cupti".into());
        assert!(deserves_account(&off));
    }

    #[test]
    fn a_process_runs_from_its_earliest_start_to_its_last_record_of_either_kind() {
        let mut r = ProcessRecords {
            shim: vec![
                ShimEvent::Process {
                    t: 50,
                    versions: BTreeMap::new(),
                    argv: Vec::new(),
                },
                ShimEvent::Step1Begin {
                    t: 200,
                    rule: "first forward".into(),
                },
                step_end(300, 1),
                ShimEvent::Compile {
                    kernel: "k".into(),
                    t0: 400,
                    t1: 900,
                    cache_hit: None,
                },
            ],
            last_t: 600,
            ..Default::default()
        };
        r.header.insert("start_ns".into(), "100".into());
        let b = process_boundaries(&r, false);
        assert_eq!((b.start, b.end), (50, 900), "shim start, compile end");
        assert_eq!((b.step1_begin, b.step_ends.clone()), (Some(200), vec![300]));
        r.header.insert("start_ns".into(), "20".into());
        r.last_t = 2_000;
        let b = process_boundaries(&r, false);
        assert_eq!((b.start, b.end), (20, 2_000), "header start, probe end");
        // Explicit markers replace the step rule when asked for.
        r.shim.push(ShimEvent::Marker {
            t0: 1_000,
            t1: 1_100,
            name: "step".into(),
        });
        let b = process_boundaries(&r, true);
        assert_eq!((b.step1_begin, b.step_ends), (Some(1_000), vec![1_100]));
    }

    #[test]
    fn step_end_readings_take_torch_device_use_as_total_minus_free() {
        let r = ProcessRecords {
            shim: vec![
                ShimEvent::StepEnd {
                    t: 10,
                    step: 1,
                    reserved: Some(4),
                    allocated: None,
                    max_reserved: None,
                    device_free: Some(30),
                    device_total: Some(100),
                },
                step_end(20, 2),
            ],
            ..Default::default()
        };
        let got = step_end_readings(&r);
        assert_eq!(
            got[0],
            StepEndReading {
                step: 1,
                t: 10,
                reserved: Some(4),
                device_used: Some(70),
            }
        );
        assert_eq!((got[1].step, got[1].device_used), (2, None));
    }

    #[test]
    fn the_query_plan_asks_for_phase_ends_then_communicator_spans_then_step_ends() {
        let r = ProcessRecords {
            shim: vec![step_end(200, 1), step_end(300, 2), step_end(400, 3)],
            ..Default::default()
        };
        let comms = vec![comm_window(Some((120, 150))), comm_window(None)];
        let plan = QueryPlan::new(&r, &bounds(), &comms);
        let phases: Vec<Phase> = plan.phase_windows.iter().map(|p| p.0).collect();
        assert_eq!(phases, Phase::ALL);
        // The span is the window widened (5 ms before, never before 0; 20 ms
        // after); no growth window moves its ends.
        let span = (0, 150 + 20_000_000);
        assert_eq!(plan.read_at, vec![Some(span), None]);
        assert_eq!(
            plan.queries,
            [100, 200, 400, 500, span.0, span.1, 200, 300, 400]
        );
        assert_eq!((plan.first_comm_query(), plan.first_step_query()), (4, 6));
        assert_eq!(plan.comm_exclusions(), [span]);
        // A process that died in step 1 is accounted there at its exception.
        let died = Boundaries {
            died: Some(170),
            ..bounds()
        };
        let plan = QueryPlan::new(&r, &died, &[]);
        assert_eq!(plan.queries[..4], [100, 170, 400, 500]);
        assert_eq!(plan.gap_instant((0, 100)), 100);
        assert_eq!(plan.gap_instant((100, 200)), 170);
    }

    #[test]
    fn the_context_holds_what_the_device_gained_from_the_call_that_created_it() {
        let r = ProcessRecords {
            contexts: vec![context(50, 700 * MIB, 1_000 * MIB)],
            mem: vec![
                call(10, 20, MemApi::MemAlloc),
                call(30, 60, MemApi::PrimaryCtxRetain),
            ],
            ..Default::default()
        };
        let device = DeviceView {
            device_used: series(&[(0, 40 * MIB), (30, 100 * MIB), (55, 400 * MIB)]),
            ..Default::default()
        };
        // 300 MiB in use at creation, 100 MiB of it before the retain call.
        assert_eq!(context_bytes(&r, &device, Some(0)), Some(200 * MIB));
        // Without NVML, what the GPU held before the run.
        let no_nvml = DeviceView::default();
        assert_eq!(context_bytes(&r, &no_nvml, Some(50 * MIB)), Some(250 * MIB));
        assert_eq!(context_bytes(&r, &no_nvml, None), Some(300 * MIB));
        let unread = ProcessRecords {
            contexts: vec![context(50, UNKNOWN_BYTES, 1_000 * MIB)],
            ..Default::default()
        };
        assert_eq!(context_bytes(&unread, &device, None), None);
        assert_eq!(
            context_bytes(&ProcessRecords::default(), &device, None),
            None
        );
    }

    #[test]
    fn a_communicator_holds_the_growth_of_the_unexplained_remainder_across_its_span() {
        let plan = QueryPlan {
            phase_windows: vec![(Phase::Setup, (0, 500))],
            died_at: None,
            spans: vec![Some((100, 200)), None, Some((300, 400))],
            read_at: vec![Some((100, 200)), None, Some((300, 400))],
            alloc_at: vec![Some((100, 200)), None, Some((300, 400))],
            step_ends: Vec::new(),
            queries: Vec::new(),
        };
        let comms = vec![
            comm_window(Some((100, 180))),
            comm_window(None),
            comm_window(Some((300, 390))),
        ];
        let device = DeviceView {
            used: series(&[(100, 50), (200, 130), (300, 130), (400, 100)]),
            ..Default::default()
        };
        let states = vec![
            State::default(),
            state(10, &[]),
            state(10, &[("nccl", 20)]),
            state(10, &[("nccl", 20)]),
            state(10, &[("nccl", 20)]),
        ];
        // 50-10 = 40 before, 130-30 = 100 after: 60 inferred, complete at 180;
        // the third shrank: never negative.
        assert_eq!(
            comm_inferred_bytes(&plan, &comms, &states, &device),
            [(180, 60), (0, 0), (390, 0)]
        );
    }

    #[test]
    fn phase_sources_hold_what_was_live_at_the_phase_end_most_allocated_first() {
        let sb = |source: &str, allocated: u64| SourceBytes {
            source: source.into(),
            allocated,
            ..Default::default()
        };
        let libraries = BTreeMap::from([("nccl".to_string(), vec!["libnccl.so.2".to_string()])]);
        let got = sources_at_end(
            vec![sb(TORCH_POOL, 5), sb("nccl", 9), sb("cublas", 1)],
            &state(70, &[("nccl", 8)]),
            &libraries,
        );
        let rows: Vec<(&str, u64, usize)> = got
            .iter()
            .map(|s| (s.source.as_str(), s.live_end, s.libraries.len()))
            .collect();
        assert_eq!(
            rows,
            [("nccl", 8, 1), (TORCH_POOL, 70, 0), ("cublas", 0, 0)]
        );
    }

    #[test]
    fn nccl_code_counts_only_communicators_complete_by_the_instant() {
        let nccl = vec![comm(5), comm(7), comm(11)];
        let inferred = [(100, 5), (300, 7), (0, 0)];
        assert_eq!(nccl_code_held(&nccl, &inferred, 50), 0);
        assert_eq!(nccl_code_held(&nccl, &inferred, 100), 5);
        assert_eq!(
            nccl_code_held(&nccl, &inferred, 1_000),
            12,
            "never one without a span"
        );
    }

    #[test]
    fn the_out_of_pool_account_names_every_holder_and_leaves_the_rest_unexplained() {
        let mut s = state(400, &[("nccl", 30), ("cublas", 0), ("triton", 8)]);
        s.local_growth = 20;
        s.local_released = 4;
        s.context_late = 6;
        s.module_code = 3;
        let gap = gap_account(1.5, 1_000, &s, 2, Some(500), 9);
        let parts: Vec<(PartSource, i64, bool)> = gap
            .parts
            .iter()
            .map(|p| (p.source.clone(), p.bytes, p.inferred))
            .collect();
        assert_eq!(
            parts,
            [
                (PartSource::Context, 506, false),
                (PartSource::Library("nccl".into()), 30, false),
                (PartSource::Library("triton".into()), 8, false),
                (PartSource::LocalMemoryGrowth, 20, false),
                (PartSource::LocalMemoryDropped, -4, false),
                (PartSource::NcclWithoutAllocations, 9, true),
                (PartSource::ModuleCode, 3, true),
            ]
        );
        assert_eq!(
            gap.parts[0].context,
            Some(ContextDetail {
                initial_local_memory: 2,
                committed_at_first_launch: 6,
            })
        );
        assert_eq!(
            (gap.at_s, gap.out_of_pool, gap.pool_reserved),
            (1.5, 600, 400)
        );
        assert_eq!(gap.unexplained, 600 - (506 + 30 + 8 + 20 - 4 + 9 + 3));
        // Without a context figure and beyond the device's reading.
        let bare = gap_account(0.0, 100, &state(300, &[]), 0, None, 0);
        assert!(bare.parts.is_empty());
        assert_eq!((bare.out_of_pool, bare.unexplained), (0, 0));
    }

    #[test]
    fn a_phase_account_reads_its_window_its_state_and_its_accounting_instant() {
        let r = ProcessRecords {
            modules: vec![
                ModuleLoad {
                    t: 250,
                    context_id: 1,
                    module_id: 1,
                    cubin_bytes: 64,
                },
                ModuleLoad {
                    t: 450,
                    context_id: 1,
                    module_id: 2,
                    cubin_bytes: 1,
                },
            ],
            ..Default::default()
        };
        let b = bounds();
        let device = DeviceView {
            used: series(&[(0, 10), (250, 900), (390, 800)]),
            ..Default::default()
        };
        let mut rp = Replay::default();
        rp.phases.entry(Phase::Steady).or_default().oop_alloc = 77;
        rp.phases.entry(Phase::Steady).or_default().pool_peak = 50;
        let inputs = PhaseInputs {
            r: &r,
            bounds: &b,
            device: &device,
            rp: &rp,
            context_bytes: None,
            nccl: &[],
            nccl_outside: &[(150, 2), (250, 3)],
            comm_inferred: &[],
            stall_windows: &StallWindows::default(),
        };
        let s = state(60, &[("nccl", 5)]);
        let p = phase_account(Phase::Steady, (200, 400), 390, &s, &inputs);
        assert_eq!((p.steps, p.start_s, p.end_s), (2, 200e-9, 400e-9));
        assert_eq!((p.device_used_peak, p.module_image_bytes), (Some(900), 64));
        assert_eq!((p.pool_reserved_peak, p.pool_reserved_end), (60, 60));
        assert_eq!((p.out_of_pool_allocated, p.out_of_pool_live_end), (77, 5));
        let gap = p.gap_end.expect("the device was read");
        assert_eq!(
            (gap.at_s, gap.device_used, gap.out_of_pool),
            (390e-9, 800, 740)
        );
        let step1 = phase_account(Phase::Step1, (100, 200), 200, &s, &inputs);
        assert_eq!((step1.steps, step1.out_of_pool_allocated), (1, 0));
        // NCCL's allocations outside every communicator's init, by phase.
        assert_eq!((step1.nccl_outside_comms, p.nccl_outside_comms), (2, 3));
    }

    #[test]
    fn exceptions_are_placed_in_their_phase() {
        let r = ProcessRecords {
            shim: vec![step_end(200, 1), exception(150)],
            ..Default::default()
        };
        let got = exceptions(&r, &bounds());
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].phase, got[0].t_s), (Phase::Step1, 150e-9));
        assert_eq!(
            (got[0].pool_reserved, got[0].pool_allocated),
            (Some(7), Some(5))
        );
    }

    #[test]
    fn the_tightest_exposure_is_the_least_headroom_of_each_phase() {
        let es = vec![
            exposure(Phase::Step1, Some(50), Some(100), 10),
            exposure(Phase::Setup, Some(30), None, 10),
            exposure(Phase::Step1, Some(-5), Some(400), 20),
            exposure(Phase::Step1, Some(-5), Some(10), 1),
            exposure(Phase::Step1, None, Some(900), 5),
        ];
        let got: Vec<(Phase, Option<i64>, Option<u64>)> = tightest(&es)
            .iter()
            .map(|e| (e.phase, e.headroom_after, e.process_used_before))
            .collect();
        assert_eq!(
            got,
            [
                (Phase::Setup, Some(30), None),
                (Phase::Step1, Some(-5), Some(400)),
            ]
        );
        assert_eq!(min_capacity(&es), Some(905));
        assert_eq!(min_capacity(&es[1..2]), None);
    }

    #[test]
    fn capture_status_says_why_the_probe_did_not_capture() {
        let mut r = ProcessRecords::default();
        let bounds = Boundaries::two_steps();
        let none = capture_status(&r, false, &bounds);
        assert!(!none.active);
        assert!(none.detail.starts_with("no probe file"), "{}", none.detail);
        assert_eq!(capture_status(&r, true, &bounds).detail, "unknown");
        r.header.insert("status".into(), "active".into());
        r.header
            .insert("cupti_path".into(), "/x/libcupti.so".into());
        r.header.insert("cupti_version".into(), "24".into());
        r.notices.push(Notice {
            t: 1,
            level: NoticeLevel::Info,
            text: "hello".into(),
        });
        r.notices.push(Notice {
            t: 1,
            level: NoticeLevel::Info,
            text: "capture active: CUPTI 24 from /x/libcupti.so".into(),
        });
        let on = capture_status(&r, true, &bounds);
        assert!(on.active);
        // "hello" is a note; that capture is active is the cupti field.
        let texts = |notes: &[ProbeNote]| notes.iter().map(|n| n.text.clone()).collect::<Vec<_>>();
        assert_eq!(texts(&on.notes), ["hello"]);
        assert_eq!((on.notes[0].phase, on.notes[0].step), (Phase::Setup, None));
        assert_eq!(on.cupti.as_deref(), Some("/x/libcupti.so (API 24)"));
        assert_eq!(
            on.notices,
            ["hello", "capture active: CUPTI 24 from /x/libcupti.so"]
        );
        assert!(on.warnings.is_empty());
        r.notices.push(Notice {
            t: 3_000_000_000,
            level: NoticeLevel::Warning,
            text: "an event was dropped".into(),
        });
        let warned = capture_status(&r, true, &bounds);
        assert_eq!(warned.notices.len(), 3);
        assert_eq!(texts(&warned.warnings), ["an event was dropped"]);
        // Placed in the run: 3 s is in step 2.
        let w = &warned.warnings[0];
        assert_eq!((w.t_s, w.phase, w.step), (3.0, Phase::Steady, Some(2)));
        r.notices.push(Notice {
            t: 2,
            level: NoticeLevel::Disabled,
            text: "too many records".into(),
        });
        let off = capture_status(&r, true, &bounds);
        assert!(!off.active);
        assert_eq!(
            (off.detail.as_str(), off.notices.len()),
            ("too many records", 3)
        );
    }

    #[test]
    fn versions_come_from_the_shim_and_the_probe_header() {
        let mut r = ProcessRecords {
            shim: vec![
                ShimEvent::Process {
                    t: 0,
                    versions: BTreeMap::from([
                        ("torch".to_string(), Some("2.8".to_string())),
                        ("triton".to_string(), None),
                    ]),
                    argv: Vec::new(),
                },
                ShimEvent::ProcessGroup {
                    backend: "nccl".into(),
                    world: 2,
                    rank: 0,
                    nccl: "2.27.3".into(),
                },
            ],
            ..Default::default()
        };
        r.header.insert("cupti_version".into(), "24".into());
        let v = versions(&r);
        let got: Vec<(&str, &str)> = v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, [("cupti", "24"), ("nccl", "2.27.3"), ("torch", "2.8")]);
    }

    #[test]
    fn probe_health_is_what_the_probe_counted_and_zero_without() {
        assert_eq!(
            probe_health(&ProcessRecords::default()),
            ProbeHealth::default()
        );
        let r = ProcessRecords {
            cost: Some(ProbeCost {
                t: 0,
                callbacks: 3,
                callback_ns: 2_000_000_000,
                activity_records: 4,
                activity_ns: 500_000_000,
                activity_buffer_bytes: 8,
                bytes_written: 9,
                flush_ns: 1,
            }),
            dropped: Some(RecordsDropped {
                t: 0,
                probe_events: 1,
                cupti_records: 2,
            }),
            ..Default::default()
        };
        let h = probe_health(&r);
        assert_eq!(
            (h.callbacks, h.callback_seconds, h.activity_seconds),
            (3, 2.0, 0.5)
        );
        assert_eq!((h.host_buffer_bytes, h.bytes_written), (8, 9));
        assert_eq!((h.dropped_probe_events, h.dropped_cupti_records), (1, 2));
    }

    #[test]
    fn step_checks_put_torch_figures_beside_the_doctors_pool() {
        let readings = vec![
            StepEndReading {
                step: 1,
                t: 10,
                reserved: Some(100),
                device_used: Some(300),
            },
            StepEndReading {
                step: 2,
                t: 20,
                reserved: None,
                device_used: None,
            },
        ];
        let got = step_checks(&readings, &[state(90, &[]), state(95, &[])]);
        assert_eq!(
            got,
            [
                StepCheck {
                    step: 1,
                    torch_reserved: Some(100),
                    doctor_pool_reserved: 90,
                    torch_device_used: Some(300),
                },
                StepCheck {
                    step: 2,
                    torch_reserved: None,
                    doctor_pool_reserved: 95,
                    torch_device_used: None,
                },
            ]
        );
    }

    #[test]
    fn step_info_counts_steps_and_times_the_phases() {
        let b = Boundaries {
            start: 0,
            step1_begin: Some(1_000_000_000),
            step_ends: vec![3_000_000_000, 3_500_000_000, 4_000_000_000],
            end: 5_000_000_000,
            rule: "first forward".into(),
            died: None,
        };
        let s = step_info(&b, &StallWindows::default(), &[], &[]);
        assert_eq!((s.count, s.rule.as_str()), (3, "first forward"));
        assert_eq!(
            (s.setup_s, s.step1_s, s.steady_step_s),
            (Some(1.0), Some(2.0), Some(0.5))
        );
        assert_eq!(
            (s.steady_steps, s.steady_basis, s.died_in_step),
            (2, Some(SteadyBasis::EveryStep), None)
        );
    }

    #[test]
    fn the_shims_steady_time_is_its_median_over_the_steady_steps() {
        // Steps 2..4 end at 3.5, 4.0 and 4.5 s; the shim spends 600 us in
        // step 2 (its snapshots) and 20 us in each of steps 3 and 4.
        let b = Boundaries {
            start: 0,
            step1_begin: Some(1_000_000_000),
            step_ends: vec![3_000_000_000, 3_500_000_000, 4_000_000_000, 4_500_000_000],
            end: 5_000_000_000,
            rule: "first forward".into(),
            died: None,
        };
        let line = |t: u64, own_ns: u64| ShimOwnTime { t, own_ns };
        let shim = [
            line(3_000_000_000, 10_000_000),
            line(3_500_000_000, 10_600_000),
            line(4_000_000_000, 10_620_000),
            line(4_500_000_000, 10_640_000),
        ];
        let s = step_info(&b, &StallWindows::default(), &[], &shim);
        let m = s.steady_shim_s.unwrap();
        assert!((m - 20e-6).abs() < 1e-12, "{m}");
        // Without the shim's time past the last step, nothing is claimed.
        let s = step_info(&b, &StallWindows::default(), &[], &shim[..3]);
        assert_eq!(s.steady_shim_s, None);
        assert_eq!(
            step_info(&b, &StallWindows::default(), &[], &[]).steady_shim_s,
            None
        );
    }

    #[test]
    fn a_process_is_accounted_end_to_end_from_hand_built_records() {
        let host = HostData {
            dir: std::path::PathBuf::new(),
            meta: None,
            processes: Vec::new(),
            nvml: Default::default(),
            nccl: Vec::new(),
            problems: Vec::new(),
        };
        let files = ProcessFiles {
            pid: 42,
            rank: None,
            events: Some("events.bin".into()),
            shim: None,
        };
        assert!(analyse_process(&host, &files, ProcessRecords::default(), "h").is_none());
        let mut alloc = call(150, 160, MemApi::MemAlloc);
        (alloc.bytes, alloc.address, alloc.free_before, alloc.total) =
            (64 * MIB, 0x10, 600 * MIB, 1_000 * MIB);
        alloc.free_after = 536 * MIB;
        let mut r = ProcessRecords {
            contexts: vec![context(10, 700 * MIB, 1_000 * MIB)],
            libraries: std::collections::HashMap::from([(0, "/x/libnccl.so.2".to_string())]),
            mem: vec![alloc],
            shim: vec![
                ShimEvent::Step1Begin {
                    t: 100,
                    rule: "first forward".into(),
                },
                step_end(200, 1),
            ],
            last_t: 250,
            problems: vec![crate::load::Problem::whole_file(
                "x".into(),
                "damaged".into(),
                true,
            )],
            ..Default::default()
        };
        r.header.insert("status".into(), "active".into());
        r.header.insert("RANK".into(), "3".into());
        let p = analyse_process(&host, &files, r, "h").expect("a CUDA process");
        assert_eq!((p.host.as_str(), p.pid, p.rank), ("h", 42, Some(3)));
        assert_eq!(p.gpu.as_deref(), Some("0000:19:00.0"));
        assert_eq!((p.context_bytes, p.problems.len()), (Some(300 * MIB), 1));
        assert!(p.capture.active);
        let step1 = p.phases.iter().find(|x| x.phase == Phase::Step1).unwrap();
        assert_eq!(step1.out_of_pool_allocated, 64 * MIB);
        assert_eq!(step1.by_source[0].source, "nccl");
        assert_eq!(p.exposures.len(), 1);
        assert_eq!(p.exposures[0].headroom_after, Some(536 * MIB as i64));
    }
}
