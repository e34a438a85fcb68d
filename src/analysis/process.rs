//! The account of one process: replay its allocation calls in time order,
//! split them by phase and source, and reconcile them with device truth (NVML).

use super::model::*;
use super::phases::{Boundaries, Phase};
use super::sources::{UNKNOWN, classify};
use crate::load::shim::ShimEvent;
use crate::load::{HostData, ProcessFiles, Problem, read_shim, stream_records};
use prewarm_events::*;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

/// Everything read from one process's files.
#[derive(Default)]
pub struct ProcessRecords {
    pub header: BTreeMap<String, String>,
    pub libraries: HashMap<u32, String>,
    pub mem: Vec<MemCall>,
    pub local: Vec<LocalMemoryGrowth>,
    pub first_launches: Vec<KernelFirstLaunch>,
    pub contexts: Vec<ContextCreated>,
    pub modules: Vec<ModuleLoad>,
    pub notices: Vec<Notice>,
    pub dropped: Option<RecordsDropped>,
    pub cost: Option<ProbeCost>,
    pub last_t: u64,
    pub shim: Vec<ShimEvent>,
    pub problems: Vec<Problem>,
}

/// Streams the probe file and reads the shim file of one process.
pub fn read_process(root: &Path, files: &ProcessFiles) -> ProcessRecords {
    let mut r = ProcessRecords::default();
    if let Some(path) = &files.events {
        match File::open(path) {
            Ok(f) => {
                let outcome = stream_records(BufReader::new(f), |rec| {
                    if let Some(t) = rec.time() {
                        r.last_t = r.last_t.max(t);
                    }
                    match rec {
                        Record::Library(l) => {
                            r.libraries.insert(l.id, l.path);
                        }
                        Record::Mem(m) => {
                            r.last_t = r.last_t.max(m.t_end);
                            r.mem.push(m)
                        }
                        Record::LocalMemory(l) => r.local.push(l),
                        Record::KernelFirst(k) => r.first_launches.push(k),
                        Record::Context(c) => r.contexts.push(c),
                        Record::Module(m) => r.modules.push(m),
                        Record::Notice(n) => r.notices.push(n),
                        Record::Dropped(d) => r.dropped = Some(d),
                        Record::Cost(c) => r.cost = Some(c),
                        _ => {}
                    }
                });
                if let Some(h) = &outcome.header {
                    r.header = h.fields.iter().cloned().collect();
                }
                if let Some(p) = outcome.problem(root, path) {
                    r.problems.push(p);
                }
            }
            Err(e) => r.problems.push(Problem { file: path.display().to_string(), what: e.to_string(), damaged: true }),
        }
    }
    if let Some(path) = &files.shim {
        let (events, problems) = read_shim(root, path);
        r.shim = events;
        r.problems.extend(problems);
    }
    r
}

/// Normalises PCI bus ids ("00000000:19:00.0" vs "0000:19:00.0").
pub fn bus_key(id: &str) -> String {
    let lower = id.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) => format!("{:x}:{rest}", u64::from_str_radix(domain, 16).unwrap_or(0)),
        None => lower,
    }
}

/// Device memory used by this process over time, from the best source available.
struct UsedSeries {
    points: Vec<(u64, u64)>,
    source: String,
}

impl UsedSeries {
    fn at(&self, t: u64) -> Option<u64> {
        let i = self.points.partition_point(|p| p.0 <= t);
        if i == 0 { None } else { Some(self.points[i - 1].1) }
    }
    fn peak(&self, a: u64, b: u64) -> Option<u64> {
        let lo = self.points.partition_point(|p| p.0 < a);
        let hi = self.points.partition_point(|p| p.0 <= b);
        let inside = self.points[lo..hi].iter().map(|p| p.1).max();
        // The value holding at `a` counts too.
        inside.into_iter().chain(self.at(a)).max()
    }
}

fn used_series(host: &HostData, pid: u32, bus: Option<&str>) -> UsedSeries {
    let procs: Vec<(u64, u64)> = host.nvml.processes.iter().filter(|s| s.pid == pid).map(|s| (s.t, s.used)).collect();
    if !procs.is_empty() {
        return UsedSeries { points: procs, source: "NVML per-process used memory".into() };
    }
    let gpu = bus.and_then(|b| {
        host.meta.as_ref()?.gpus.iter().find(|g| bus_key(&g.pci_bus_id) == bus_key(b)).map(|g| (g.index, g.used_before_bytes))
    });
    if let Some((index, baseline)) = gpu {
        if let Some(samples) = host.nvml.devices.get(&index) {
            return UsedSeries {
                points: samples.iter().map(|s| (s.t, s.used.saturating_sub(baseline))).collect(),
                source: "NVML device used memory minus what was in use before the run".into(),
            };
        }
    }
    UsedSeries { points: Vec::new(), source: "none (no NVML timeline for this process's GPU)".into() }
}

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

/// Shortens a (possibly mangled) kernel name for display.
pub fn kernel_display(name: &str) -> String {
    let demangled = cpp_demangle::Symbol::new(name)
        .ok()
        .and_then(|s| s.demangle(&cpp_demangle::DemangleOptions::default().no_params().no_return_type()).ok())
        .unwrap_or_else(|| name.to_string());
    if demangled.chars().count() > 120 {
        let cut: String = demangled.chars().take(117).collect();
        format!("{cut}...")
    } else {
        demangled
    }
}

#[derive(Default)]
struct PhaseAcc {
    by_source: BTreeMap<String, SourceBytes>,
    pool_peak: u64,
    oop_alloc: u64,
    oop_freed: u64,
    local_growth: u64,
    module_loads: u32,
    module_bytes: u64,
    first_launches: u32,
    pinned: u64,
    failed: u32,
}

struct Live {
    bytes: u64,
    source: String,
    in_pool: bool,
}

/// The running totals while replaying.
#[derive(Default)]
struct State {
    live: HashMap<u64, Live>,
    pool: u64,
    oop: BTreeMap<String, u64>,
    local_by_ctx: HashMap<u32, u64>,
    module_bytes: u64,
}

impl State {
    fn oop_total(&self) -> u64 {
        self.oop.values().sum()
    }
    fn local_total(&self) -> u64 {
        self.local_by_ctx.values().sum()
    }
}

enum Step<'a> {
    Mem(&'a MemCall),
    Local(&'a LocalMemoryGrowth),
    First,
    PhaseEnd(Phase),
}

fn opt(v: u64) -> Option<u64> {
    (v != UNKNOWN_BYTES).then_some(v)
}

/// Builds the account of one process. Returns None for processes that never
/// initialised CUDA and never trained (nothing to say).
pub fn analyse_process(host: &HostData, files: &ProcessFiles, r: ProcessRecords, host_tag: &str) -> Option<ProcessAccount> {
    if files.events.is_none() && !r.shim.iter().any(|e| matches!(e, ShimEvent::StepEnd { .. })) {
        return None;
    }
    let header_start = r.header.get("start_ns").and_then(|v| v.parse::<u64>().ok());
    let shim_first = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Process { t, .. } => Some(*t),
            _ => None,
        })
        .min();
    let start = [header_start, shim_first].into_iter().flatten().min().unwrap_or(0);
    let shim_last = r
        .shim
        .iter()
        .map(|e| match e {
            ShimEvent::StepEnd { t, .. } | ShimEvent::Step1Begin { t, .. } | ShimEvent::Process { t, .. } => *t,
            ShimEvent::Marker { t1, .. } | ShimEvent::Autotune { t1, .. } | ShimEvent::AutotuneConfig { t1, .. } | ShimEvent::Compile { t1, .. } => *t1,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let end = r.last_t.max(shim_last).max(start);
    let use_markers = host.meta.as_ref().map(|m| m.env.contains_key("PREWARM_DOCTOR_STEP_MARKER")).unwrap_or(false);
    let bounds = Boundaries::from_events(&r.shim, use_markers, start, end);

    let lib_source = |id: u32| -> (String, bool, String) {
        match r.libraries.get(&id) {
            Some(path) => {
                let (s, pool) = classify(path);
                (s, pool, path.rsplit('/').next().unwrap_or(path).to_string())
            }
            None => (UNKNOWN.to_string(), false, String::new()),
        }
    };

    let bus = r.contexts.first().map(|c| c.pci_bus_id.clone()).filter(|b| !b.is_empty());
    let used = used_series(host, files.pid, bus.as_deref());

    // Replay in time order: calls take effect at their exit.
    let mut steps: Vec<(u64, Step)> = Vec::new();
    for m in &r.mem {
        steps.push((m.t_end, Step::Mem(m)));
    }
    for l in &r.local {
        steps.push((l.t_start, Step::Local(l)));
    }
    for k in &r.first_launches {
        steps.push((k.t_start, Step::First));
    }
    for p in Phase::ALL {
        if let Some((_, b)) = bounds.window(p) {
            steps.push((b, Step::PhaseEnd(p)));
        }
    }
    steps.sort_by_key(|s| (s.0, matches!(s.1, Step::PhaseEnd(_))));

    let mut acc: BTreeMap<Phase, PhaseAcc> = BTreeMap::new();
    let mut state = State::default();
    let mut ends: BTreeMap<Phase, (u64, u64, BTreeMap<String, u64>, u64, u64)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut local_events = Vec::new();
    let mut libs_by_source: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut context_bytes: Option<u64> = None;
    let ctx_t = r.contexts.first().map(|c| c.t);

    for (t, step) in &steps {
        let phase = bounds.phase_of(*t);
        if let (None, Some(ct)) = (context_bytes, ctx_t) {
            // The CUDA context: device memory held right after it came up, before
            // anything else was allocated (first device sample after creation).
            if *t > ct {
                if let Some(u) = used.at(*t).filter(|_| used.points.iter().any(|p| p.0 >= ct && p.0 <= *t)) {
                    context_bytes = Some(u.saturating_sub(state.pool + state.oop_total() + state.local_total() + state.module_bytes));
                }
            }
        }
        if let Step::PhaseEnd(p) = step {
            ends.insert(*p, (*t, state.pool, state.oop.clone(), state.local_total(), state.module_bytes));
            continue;
        }
        let a = acc.entry(phase).or_default();
        match step {
            Step::Mem(m) => {
                let (source, in_pool, lib) = lib_source(m.library);
                let libs = libs_by_source.entry(source.clone()).or_default();
                if !lib.is_empty() && !libs.contains(&lib) {
                    libs.push(lib.clone());
                }
                let effect = m.api.effect();
                if m.result != 0 {
                    if matches!(effect, MemEffect::DeviceAlloc | MemEffect::Module | MemEffect::Context) {
                        a.failed += 1;
                        failures.push(FailedRequest {
                            t_s: secs(m.t_end, start),
                            phase,
                            api: m.api.name().to_string(),
                            bytes: m.bytes,
                            result: m.result,
                            source: source.clone(),
                            library: lib,
                            free_before: opt(m.free_before),
                            total: opt(m.total),
                        });
                    }
                    continue;
                }
                match effect {
                    MemEffect::DeviceAlloc => {
                        state.live.insert(m.address, Live { bytes: m.bytes, source: source.clone(), in_pool });
                        if in_pool {
                            state.pool += m.bytes;
                        } else {
                            *state.oop.entry(source.clone()).or_default() += m.bytes;
                            a.oop_alloc += m.bytes;
                        }
                        let sb = a.by_source.entry(source.clone()).or_insert_with(|| SourceBytes { source: source.clone(), ..Default::default() });
                        sb.calls += 1;
                        sb.allocated += m.bytes;
                    }
                    MemEffect::DeviceFree => {
                        if let Some(live) = state.live.remove(&m.address) {
                            if live.in_pool {
                                state.pool = state.pool.saturating_sub(live.bytes);
                            } else {
                                let e = state.oop.entry(live.source.clone()).or_default();
                                *e = e.saturating_sub(live.bytes);
                                a.oop_freed += live.bytes;
                            }
                            let sb = a.by_source.entry(live.source.clone()).or_insert_with(|| SourceBytes { source: live.source.clone(), ..Default::default() });
                            sb.freed += live.bytes;
                        }
                    }
                    MemEffect::HostAlloc => a.pinned += m.bytes,
                    MemEffect::Module => {
                        if matches!(m.api, MemApi::ModuleUnload | MemApi::LibraryUnload) {
                            continue;
                        }
                        a.module_loads += 1;
                        if let (Some(b), Some(f)) = (opt(m.free_before), opt(m.free_after)) {
                            let delta = b.saturating_sub(f);
                            a.module_bytes += delta;
                            state.module_bytes += delta;
                        }
                    }
                    _ => {}
                }
                a.pool_peak = a.pool_peak.max(state.pool);
            }
            Step::Local(l) => {
                let cur = state.local_by_ctx.entry(l.context_id).or_default();
                if l.total_after > *cur {
                    a.local_growth += l.total_after - *cur;
                    *cur = l.total_after;
                }
                local_events.push(LocalMemoryEvent {
                    t_s: secs(l.t_start, start),
                    phase,
                    kernel: kernel_display(&l.kernel),
                    before: l.total_before,
                    after: l.total_after,
                    per_thread: l.per_thread,
                    registers: l.registers,
                });
            }
            Step::First => a.first_launches += 1,
            Step::PhaseEnd(_) => {}
        }
    }

    let mut phases = Vec::new();
    for p in Phase::ALL {
        let Some((a_t, b_t)) = bounds.window(p) else { continue };
        let pa = acc.remove(&p).unwrap_or_default();
        let (t_end, pool_end, oop_end, local_end, module_end) =
            ends.get(&p).cloned().unwrap_or((b_t, state.pool, state.oop.clone(), state.local_total(), state.module_bytes));
        let mut by_source: Vec<SourceBytes> = pa.by_source.into_values().collect();
        for sb in by_source.iter_mut() {
            sb.live_end = if sb.source == super::sources::TORCH_POOL { pool_end } else { oop_end.get(&sb.source).copied().unwrap_or(0) };
            sb.libraries = libs_by_source.get(&sb.source).cloned().unwrap_or_default();
        }
        by_source.sort_by(|a, b| b.allocated.cmp(&a.allocated));
        let gap_end = used.at(t_end).map(|device_used| {
            let out_of_pool = device_used.saturating_sub(pool_end);
            let mut parts = Vec::new();
            if let Some(c) = context_bytes {
                parts.push(("CUDA context".to_string(), c));
            }
            for (s, b) in &oop_end {
                if *b > 0 {
                    parts.push((s.clone(), *b));
                }
            }
            if local_end > 0 {
                parts.push(("local memory (spills)".to_string(), local_end));
            }
            if module_end > 0 {
                parts.push(("module code (explicit loads)".to_string(), module_end));
            }
            let named: u64 = parts.iter().map(|p| p.1).sum();
            GapAccount {
                at_s: secs(t_end, start),
                device_used,
                pool_reserved: pool_end,
                out_of_pool,
                parts,
                unexplained: out_of_pool as i64 - named as i64,
            }
        });
        let steps_in = match p {
            Phase::Step1 => 1,
            Phase::Steady => bounds.step_ends.len().saturating_sub(1) as u32,
            _ => 0,
        };
        phases.push(PhaseAccount {
            phase: p,
            start_s: secs(a_t, start),
            end_s: secs(b_t, start),
            duration_s: b_t.saturating_sub(a_t) as f64 / 1e9,
            steps: steps_in,
            device_used_peak: used.peak(a_t, b_t),
            pool_reserved_peak: pa.pool_peak.max(pool_end),
            pool_reserved_end: pool_end,
            out_of_pool_allocated: pa.oop_alloc,
            out_of_pool_freed: pa.oop_freed,
            out_of_pool_live_end: oop_end.values().sum(),
            by_source,
            local_memory_growth: pa.local_growth,
            module_loads: pa.module_loads,
            module_bytes: pa.module_bytes,
            kernels_first_launched: pa.first_launches,
            host_pinned_allocated: pa.pinned,
            failed_requests: pa.failed,
            gap_end,
        });
    }

    let status = r.header.get("status").cloned().unwrap_or_else(|| {
        if files.events.is_none() { "no probe file (CUDA never initialised, or injection was not possible)".into() } else { "unknown".into() }
    });
    let disabled = r.notices.iter().find(|n| n.level == NoticeLevel::Disabled).map(|n| n.text.clone());
    let capture = CaptureStatus {
        active: status == "active" && disabled.is_none(),
        detail: disabled.unwrap_or(status),
        cupti: r.header.get("cupti_path").filter(|v| !v.is_empty()).map(|p| format!("{p} (API {})", r.header.get("cupti_version").cloned().unwrap_or_default())),
        notices: r.notices.iter().filter(|n| n.level != NoticeLevel::Disabled).map(|n| n.text.clone()).collect(),
    };
    let mut versions = BTreeMap::new();
    for e in &r.shim {
        if let ShimEvent::Process { versions: v, .. } = e {
            for (k, val) in v {
                if let Some(val) = val {
                    versions.insert(k.clone(), val.clone());
                }
            }
        }
        if let ShimEvent::ProcessGroup { nccl, .. } = e {
            if !nccl.is_empty() {
                versions.insert("nccl".into(), nccl.clone());
            }
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
    let torch_step_stats = r
        .shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::StepEnd { step, reserved, device_free, device_total, .. } => {
                Some((*step, *reserved, device_total.zip(*device_free).map(|(t, f)| t.saturating_sub(f))))
            }
            _ => None,
        })
        .collect();
    let header_u32 = |k: &str| r.header.get(k).and_then(|v| v.parse::<u32>().ok());
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
        step_rule: bounds.rule.clone(),
        steps: bounds.step_ends.len() as u32,
        step1_s: bounds.window(Phase::Step1).map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
        steady_step_s: bounds.steady_step_ns().map(|n| n as f64 / 1e9),
        memory_source: used.source,
        context_bytes,
        phases,
        local_memory: local_events,
        failures,
        health,
        torch_step_stats,
        problems: r.problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_match_across_nvml_and_cuda_spellings() {
        assert_eq!(bus_key("00000000:19:00.0"), bus_key("0000:19:00.0"));
        assert_ne!(bus_key("00000000:1A:00.0"), bus_key("0000:19:00.0"));
    }

    #[test]
    fn kernel_names_are_demangled_and_shortened() {
        assert_eq!(kernel_display("_Z3fooi"), "foo");
        assert_eq!(kernel_display("rowwise_mix"), "rowwise_mix");
        assert!(kernel_display(&"x".repeat(500)).ends_with("..."));
    }
}
