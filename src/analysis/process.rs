//! The account of one process: phases, memory by source reconciled with device
//! truth, exposure, framework joins, stalls, late warmups and forensics.

use super::account::*;
use super::device::device_view;
use super::forensics::forensics;
use super::framework::{self, StallWindows};
use super::memory::replay;
use super::phases::{Boundaries, Phase};
use super::sources::TORCH_POOL;
use crate::load::records::ProcessRecords;
use crate::load::shim::ShimEvent;
use crate::load::{HostData, ProcessFiles};
use prewarm_events::{MemApi, NoticeLevel};
use std::collections::BTreeMap;

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

/// Builds the account of one process; None for processes that never created
/// a CUDA context and never stepped (launchers, tools).
pub fn analyse_process(
    host: &HostData,
    files: &ProcessFiles,
    r: ProcessRecords,
    host_tag: &str,
) -> Option<ProcessAccount> {
    let stepped = r
        .shim
        .iter()
        .any(|e| matches!(e, ShimEvent::StepEnd { .. }));
    let disabled = r.notices.iter().any(|n| n.level == NoticeLevel::Disabled)
        || r.header.get("status").is_some_and(|s| s != "active");
    if r.contexts.is_empty() && !stepped && !disabled {
        return None;
    }
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
    let use_markers = host
        .meta
        .as_ref()
        .is_some_and(|m| m.env.contains_key("PREWARM_DOCTOR_STEP_MARKER"));
    let bounds = Boundaries::from_events(&r.shim, use_markers, start, end);

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
    let comm_windows = framework::comm_windows(&host.nccl, files.pid, clock);

    // Instants whose memory state is needed: phase ends and communicator windows.
    let mut queries = Vec::new();
    let phase_windows: Vec<(Phase, (u64, u64))> = Phase::ALL
        .iter()
        .filter_map(|p| bounds.window(*p).map(|w| (*p, w)))
        .collect();
    // A process that died: its last phase is accounted just before the
    // exception (teardown frees memory and would hide what was held).
    let died_at = r.shim.iter().find_map(|e| match e {
        ShimEvent::Exception { t, .. } => Some(*t),
        _ => None,
    });
    let gap_instant = |a: u64, b: u64| match died_at {
        Some(d) if d >= a && d <= b => d,
        _ => b,
    };
    for (_, (a, b)) in &phase_windows {
        queries.push(gap_instant(*a, *b));
    }
    let spans = framework::comm_spans(&comm_windows.iter().map(|c| c.1).collect::<Vec<_>>());
    // Each communicator's inferred bytes are read at ends outside any
    // local-memory growth's window (framework::comm_measure_spans).
    let read_at = framework::comm_measure_spans(&spans, &super::memory::growth_windows(&r));
    for s in read_at.iter().flatten() {
        queries.push(s.0);
        queries.push(s.1);
    }
    // torch's own view at step ends, beside the doctor's pool tracking.
    let step_times: Vec<(u32, u64, Option<u64>, Option<u64>)> = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd {
                t,
                step,
                reserved,
                device_free,
                device_total,
                ..
            } => Some((
                *step,
                *t,
                *reserved,
                device_total
                    .zip(*device_free)
                    .map(|(a, b)| a.saturating_sub(b)),
            )),
            _ => None,
        })
        .collect();
    let step_query_start = queries.len();
    queries.extend(step_times.iter().map(|s| s.1));
    let mut rp = replay(
        &r,
        &bounds,
        &device,
        &queries,
        &spans.iter().flatten().copied().collect::<Vec<_>>(),
    );

    // The CUDA context: device memory held right after it came up (cuMemGetInfo
    // at creation, minus what the device held before), including the
    // local-memory reservation every context starts with.
    let context_bytes = r.contexts.first().and_then(|c| {
        if c.free == prewarm_events::UNKNOWN_BYTES || c.total == prewarm_events::UNKNOWN_BYTES {
            return None;
        }
        let call_start = r
            .mem
            .iter()
            .filter(|m| {
                matches!(m.api, MemApi::PrimaryCtxRetain | MemApi::CtxCreate) && m.t_end >= c.t
            })
            .map(|m| m.t_start)
            .min()
            .unwrap_or(c.t);
        let before = device.device_used.at(call_start).or(baseline).unwrap_or(0);
        Some((c.total - c.free).saturating_sub(before))
    });

    let remainder = |t: u64, state: &super::memory::State| -> Option<i64> {
        device.used.at(t).map(|u| {
            u as i64
                - (state.pool
                    + state.oop_total()
                    + state.local_growth
                    + state.context_late
                    + state.module_code) as i64
        })
    };
    let mut qi = phase_windows.len();
    // (when NCCL reported the communicator complete, inferred bytes): a phase
    // end after that instant holds them.
    let mut comm_inferred = Vec::new();
    for (span, (_, window)) in read_at.iter().zip(&comm_windows) {
        match (span, window) {
            (Some((a, b)), Some(w)) => {
                let before = remainder(*a, &rp.states[qi]);
                let after = remainder(*b, &rp.states[qi + 1]);
                qi += 2;
                comm_inferred.push((
                    w.1,
                    before.zip(after).map_or(0, |(x, y)| (y - x).max(0) as u64),
                ));
            }
            _ => comm_inferred.push((0, 0)),
        }
    }
    let mut nccl = framework::comm_accounts(
        &comm_windows,
        &spans,
        &rp.oop_allocs,
        &bounds,
        &comm_inferred,
    );
    super::comm_groups::name_from_torch(&mut nccl, &r.shim);
    let autotune = framework::autotune_accounts(&r, &mut rp, &bounds);
    let compiles = framework::compile_events(&r, &bounds);
    let cublas_ids: std::collections::HashSet<u32> = r
        .libraries
        .iter()
        .filter(|(_, path)| super::sources::classify(path).0 == "cublas")
        .map(|(id, _)| *id)
        .collect();
    let stall_windows = StallWindows::collect(&r, &comm_windows, |id| cublas_ids.contains(&id));

    let mut phases = Vec::new();
    for (i, (p, (a, b))) in phase_windows.iter().enumerate() {
        let totals = rp.phases.get(p).cloned().unwrap_or_default();
        let state = &rp.states[i];
        let mut by_source: Vec<SourceBytes> = totals.by_source.into_values().collect();
        for sb in by_source.iter_mut() {
            sb.live_end = if sb.source == TORCH_POOL {
                state.pool
            } else {
                state.oop.get(sb.source.as_str()).copied().unwrap_or(0)
            };
            sb.libraries = rp
                .libraries_by_source
                .get(&sb.source)
                .cloned()
                .unwrap_or_default();
        }
        by_source.sort_by_key(|x| std::cmp::Reverse(x.allocated));
        let gap_t = gap_instant(*a, *b);
        let gap_end = device.own_used_at(gap_t).map(|device_used| {
            let out_of_pool = device_used.saturating_sub(state.pool);
            let mut parts = Vec::new();
            let part = |source: PartSource, bytes: i64, inferred: bool| GapPart {
                source,
                context: None,
                bytes,
                inferred,
            };
            if let Some(c) = context_bytes {
                parts.push(GapPart {
                    context: Some(ContextDetail {
                        initial_local_memory: rp.initial_local,
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
            let nccl_code: u64 = nccl
                .iter()
                .zip(&comm_inferred)
                .filter(|(_, ci)| ci.0 > 0 && ci.0 <= gap_t)
                .map(|(c, _)| c.inferred_bytes)
                .sum();
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
            let named: i64 = parts.iter().map(|p| p.bytes).sum();
            GapAccount {
                at_s: secs(gap_t, start),
                device_used,
                pool_reserved: state.pool,
                out_of_pool,
                parts,
                unexplained: out_of_pool as i64 - named,
            }
        });
        let module_image_bytes = r
            .modules
            .iter()
            .filter(|m| m.t >= *a && m.t <= *b)
            .map(|m| m.cubin_bytes)
            .sum();
        phases.push(PhaseAccount {
            phase: *p,
            start_s: secs(*a, start),
            end_s: secs(*b, start),
            duration_s: b.saturating_sub(*a) as f64 / 1e9,
            steps: match p {
                Phase::Step1 => 1,
                Phase::Steady => bounds.step_ends.len().saturating_sub(1) as u32,
                _ => 0,
            },
            device_used_peak: device.used.peak(*a, *b),
            pool_reserved_peak: totals.pool_peak.max(state.pool),
            pool_reserved_end: state.pool,
            out_of_pool_allocated: totals.oop_alloc,
            out_of_pool_freed: totals.oop_freed,
            out_of_pool_live_end: state.oop_total(),
            by_source,
            local_memory_growth: totals.local_growth,
            module_code_bytes: totals.module_code,
            module_loads: totals.module_loads,
            module_image_bytes,
            kernels_first_launched: totals.first_launches,
            host_pinned_allocated: totals.pinned,
            failed_requests: totals.failed,
            stall: stall_windows.breakdown(*a, *b),
            probe_s: super::probe_cost::seconds_between(&r.costs, start, *a, *b),
            gap_end,
        });
    }

    let exceptions: Vec<ExceptionEvent> = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Exception {
                t,
                kind,
                message,
                pool_reserved,
                pool_allocated,
                ..
            } => Some(ExceptionEvent {
                t_s: secs(*t, start),
                phase: bounds.phase_of(*t),
                kind: kind.clone(),
                message: message.clone(),
                pool_reserved: *pool_reserved,
                pool_allocated: *pool_allocated,
            }),
            _ => None,
        })
        .collect();
    let forensics = forensics(&rp, &nccl, &exceptions, &bounds);
    let failed_calls = super::forensics::failed_calls(&rp, &bounds);

    let first_launches: Vec<u64> = r.first_launches.iter().map(|k| k.t_start).collect();
    let late_warmups = framework::late_warmups(&framework::LateInputs {
        bounds: &bounds,
        autotune: &autotune,
        compiles: &compiles,
        comms: &nccl,
        local: &rp.local_events,
        phases: &phases,
        first_launches: &first_launches,
        cublas: &stall_windows.cublas,
        oop_allocs: &rp.oop_allocs,
    });

    let mut tightest: BTreeMap<Phase, Exposure> = BTreeMap::new();
    for e in &rp.exposures {
        let Some(h) = e.headroom_after else { continue };
        let better = tightest
            .get(&e.phase)
            .is_none_or(|cur| cur.headroom_after.is_none_or(|c| h < c));
        if better {
            tightest.insert(e.phase, e.clone());
        }
    }
    let min_capacity_bytes = rp
        .exposures
        .iter()
        .filter_map(|e| e.process_used_before.map(|u| u + e.bytes))
        .max();

    let status = r.header.get("status").cloned().unwrap_or_else(|| {
        if files.events.is_none() {
            "no probe file (CUDA never initialised, or injection was not possible)".into()
        } else {
            "unknown".into()
        }
    });
    let disabled_note = r
        .notices
        .iter()
        .find(|n| n.level == NoticeLevel::Disabled)
        .map(|n| n.text.clone());
    let capture = CaptureStatus {
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
    };
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
    let health = ProbeHealth {
        callbacks: r.cost.as_ref().map_or(0, |c| c.callbacks),
        callback_seconds: r.cost.as_ref().map_or(0.0, |c| c.callback_ns as f64 / 1e9),
        activity_records: r.cost.as_ref().map_or(0, |c| c.activity_records),
        activity_seconds: r.cost.as_ref().map_or(0.0, |c| c.activity_ns as f64 / 1e9),
        host_buffer_bytes: r.cost.as_ref().map_or(0, |c| c.activity_buffer_bytes),
        bytes_written: r.cost.as_ref().map_or(0, |c| c.bytes_written),
        dropped_probe_events: r.dropped.as_ref().map_or(0, |d| d.probe_events),
        dropped_cupti_records: r.dropped.as_ref().map_or(0, |d| d.cupti_records),
    };
    let step_checks = step_times
        .iter()
        .zip(&rp.states[step_query_start..])
        .map(|(s, st)| StepCheck {
            step: s.0,
            torch_reserved: s.2,
            doctor_pool_reserved: st.pool,
            torch_device_used: s.3,
        })
        .collect();
    let header_u32 = |k: &str| r.header.get(k).and_then(|v| v.parse::<u32>().ok());
    let timeline = super::timeline_build::build(
        std::mem::take(&mut rp.timeline),
        &device,
        &bounds,
        super::timeline_build::Found {
            context: r.contexts.first().map(|c| c.t).zip(context_bytes),
            local: &rp.local_events,
            nccl: &nccl,
            autotune: &autotune,
            compiles: &compiles,
            forensics: &forensics,
        },
    );
    Some(ProcessAccount {
        host: host_tag.to_string(),
        pid: files.pid,
        rank: files.rank.or(header_u32("RANK")),
        local_rank: header_u32("LOCAL_RANK"),
        world_size: header_u32("WORLD_SIZE"),
        device: r.contexts.first().map(|c| c.device),
        gpu: bus,
        capture,
        versions,
        steps: StepInfo {
            count: bounds.step_ends.len() as u32,
            rule: bounds.rule.clone(),
            setup_s: bounds.setup_ns().map(|n| n as f64 / 1e9),
            step1_s: bounds
                .window(Phase::Step1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
            steady_step_s: bounds.steady_step_ns().map(|n| n as f64 / 1e9),
        },
        memory_source: device.used_source.clone(),
        context_bytes,
        phases,
        local_memory: rp.local_events,
        exposures: rp.exposures,
        tightest: tightest.into_values().collect(),
        min_capacity_bytes,
        nccl,
        autotune,
        compiles,
        late_warmups,
        forensics,
        failed_calls,
        exceptions,
        health,
        step_checks,
        problems: r.problems,
        timeline,
    })
}
