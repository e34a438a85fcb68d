//! Framework events joined to CUDA events on the one clock: Triton autotune
//! and compile windows (from the shim), NCCL communicator creation (from NCCL's
//! INIT log, wall-clock converted to CLOCK_MONOTONIC), the step-1 stall
//! breakdown and the list of warmups that still land after setup.

use super::memory::{OopAlloc, Replay};
use super::model::*;
use super::phases::{Boundaries, Phase};
use super::records::ProcessRecords;
use crate::load::nccl::NcclComm;
use crate::load::shim::ShimEvent;
use crate::prewarm::catalog::EventClass;
use prewarm_events::MemEffect;
use std::collections::BTreeMap;

/// A time window [t0, t1] on the monotonic clock.
pub type Window = (u64, u64);

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

/// Converts a wall-clock Unix time (seconds) to CLOCK_MONOTONIC ns using the
/// pair the doctor read together at start.
pub fn unix_to_mono(unix_s: f64, started_unix_ns: u64, t_start_ns: u64) -> u64 {
    let unix_ns = (unix_s * 1e9) as i128;
    (t_start_ns as i128 + unix_ns - started_unix_ns as i128).max(0) as u64
}

/// NCCL communicators of one process with their windows on the monotonic clock.
pub fn comm_windows(
    comms: &[NcclComm],
    pid: u32,
    clock: Option<(u64, u64)>,
) -> Vec<(NcclComm, Option<Window>)> {
    comms
        .iter()
        .filter(|c| c.pid == Some(pid))
        .map(|c| {
            let w = clock.and_then(|(unix0, mono0)| {
                let end = c
                    .complete_unix
                    .or(c.start_unix.zip(c.init_seconds).map(|(s, d)| s + d))?;
                // NCCL's total includes work before its "Init START" line (loading its kernels).
                let by_total = c.init_seconds.map(|d| end - d);
                let start = match (c.start_unix, by_total) {
                    (Some(s), Some(t)) => s.min(t),
                    (Some(s), None) => s,
                    (None, Some(t)) => t,
                    (None, None) => end,
                };
                Some((
                    unix_to_mono(start, unix0, mono0),
                    unix_to_mono(end, unix0, mono0),
                ))
            });
            (c.clone(), w)
        })
        .collect()
}

/// How far a communicator's span reaches before its window (the device
/// timeline may show its first growth a little early) and after it (NVML lags).
const SPAN_BEFORE_NS: u64 = 5_000_000;
const SPAN_AFTER_NS: u64 = 20_000_000;

/// The stretch of the device timeline each communicator's inferred bytes are
/// measured over (index-aligned with `windows`): its window widened a little,
/// never into a neighbour's. Windows that overlap (NCCL's reported total can
/// start a new communicator's window before the previous one completed) are
/// first made disjoint, so no device growth is counted for two communicators.
pub fn comm_spans(windows: &[Option<Window>]) -> Vec<Option<Window>> {
    let mut order: Vec<usize> = (0..windows.len())
        .filter(|&i| windows[i].is_some())
        .collect();
    order.sort_by_key(|&i| windows[i]);
    let mut disjoint: Vec<Option<Window>> = windows.to_vec();
    let mut reached = 0u64;
    for &i in &order {
        if let Some((a, b)) = disjoint[i] {
            let a = a.max(reached);
            let b = b.max(a);
            disjoint[i] = Some((a, b));
            reached = b;
        }
    }
    let sorted: Vec<Window> = order.iter().filter_map(|&i| disjoint[i]).collect();
    disjoint
        .iter()
        .map(|w| {
            let (a, b) = (*w)?;
            let prev_end = sorted.iter().filter(|o| o.1 <= a && **o != (a, b)).map(|o| o.1).max();
            let next_start = sorted
                .iter()
                .filter(|o| o.0 >= b && **o != (a, b))
                .map(|o| o.0)
                .min();
            let before = prev_end.map_or(a.saturating_sub(SPAN_BEFORE_NS), |p| {
                a.saturating_sub(((a - p) / 2).min(SPAN_BEFORE_NS))
            });
            let after = next_start.map_or(b + SPAN_AFTER_NS, |n| b + ((n - b) / 2).min(SPAN_AFTER_NS));
            Some((before, after))
        })
        .collect()
}

/// Builds the communicator accounts. `spans` are the widened windows (device
/// timeline), `inferred` the device growth over each span not explained by
/// allocation calls (NCCL loading its kernels), both index-aligned with `windows`.
pub fn comm_accounts(
    windows: &[(NcclComm, Option<Window>)],
    spans: &[Option<Window>],
    oop: &[OopAlloc],
    bounds: &Boundaries,
    inferred: &[(u64, u64)],
) -> Vec<CommAccount> {
    windows
        .iter()
        .enumerate()
        .map(|(i, (c, w))| {
            let span = spans.get(i).copied().flatten();
            let bytes = match (w, span) {
                (Some((a, _)), Some((_, b))) => oop
                    .iter()
                    .filter(|x| &*x.source == "nccl" && x.t >= *a && x.t <= b)
                    .map(|x| x.bytes)
                    .sum(),
                _ => 0,
            };
            CommAccount {
                comm: c.comm.clone(),
                comm_id: c.comm_id.clone(),
                rank: c.rank,
                nranks: c.nranks,
                phase: w.map(|w| bounds.phase_of(w.0)),
                step: w.and_then(|w| bounds.step_of(w.0)),
                start_s: w.map(|w| secs(w.0, bounds.start)),
                init_seconds: c.init_seconds.or(w.map(|w| (w.1 - w.0) as f64 / 1e9)),
                bytes,
                inferred_bytes: inferred.get(i).map_or(0, |x| x.1),
                timings: c.timings.clone(),
            }
        })
        .collect()
}

/// Triton autotunes with the device events inside their candidate windows.
pub fn autotune_accounts(
    r: &ProcessRecords,
    replay: &mut Replay,
    bounds: &Boundaries,
) -> Vec<AutotuneAccount> {
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
    // Name the candidate being benchmarked for every local-memory event.
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
    let mut out = Vec::new();
    for e in &r.shim {
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
            continue;
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
        out.push(AutotuneAccount {
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
        });
    }
    // An autotune interrupted by a failure has no "autotune" line: report its candidates.
    for ev in replay.local_events.iter().filter(|e| e.failed) {
        if let Some(c) = &ev.autotune_config
            && !out.iter().any(|a| a.spilling_configs.contains(c))
        {
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
    }
    out
}

/// Every JIT compile the shim saw.
pub fn compile_events(r: &ProcessRecords, bounds: &Boundaries) -> Vec<CompileEvent> {
    r.shim
        .iter()
        .filter_map(|e| match e {
            ShimEvent::Compile {
                kernel,
                t0,
                t1,
                cache_hit,
            } => Some(CompileEvent {
                kernel: kernel.clone(),
                phase: bounds.phase_of(*t0),
                step: bounds.step_of(*t0),
                start_s: secs(*t0, bounds.start),
                seconds: t1.saturating_sub(*t0) as f64 / 1e9,
                cache_hit: *cache_hit,
            }),
            _ => None,
        })
        .collect()
}

/// Windows of each stall kind, for the breakdown.
#[derive(Debug, Default, Clone)]
pub struct StallWindows {
    pub compile: Vec<Window>,
    pub autotune: Vec<Window>,
    pub nccl: Vec<Window>,
    pub cublas: Vec<Window>,
    pub module: Vec<Window>,
}

/// Driver calls from cuBLAS closer together than this belong to one burst of
/// cuBLAS initialisation (the host work between them is cuBLAS creating its
/// handle: measured gaps on the H200 recordings are 10-20 ms).
const CUBLAS_BURST_GAP_NS: u64 = 25_000_000;

/// cuBLAS initialisation windows: bursts of driver calls made from cuBLAS or
/// cuBLASLt (context retain, allocation, free, module load), each from its
/// first call's start to its last call's end. `cublas` says which calls came
/// from cuBLAS (the calling library's source).
pub fn cublas_windows(calls: &[(u64, u64)]) -> Vec<Window> {
    let mut sorted = calls.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<Window> = Vec::new();
    for (a, b) in sorted {
        match out.last_mut() {
            Some(w) if a <= w.1 + CUBLAS_BURST_GAP_NS => w.1 = w.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

impl StallWindows {
    /// Collects the windows from shim events, NCCL windows, cuBLAS's driver
    /// calls (`is_cublas` tells a call's library id apart) and module-load calls.
    pub fn collect(
        r: &ProcessRecords,
        comms: &[(NcclComm, Option<Window>)],
        is_cublas: impl Fn(u32) -> bool,
    ) -> StallWindows {
        let mut w = StallWindows::default();
        for e in &r.shim {
            match e {
                ShimEvent::Compile { t0, t1, .. } => w.compile.push((*t0, *t1)),
                ShimEvent::Autotune { t0, t1, .. } | ShimEvent::AutotuneConfig { t0, t1, .. } => {
                    w.autotune.push((*t0, *t1))
                }
                _ => {}
            }
        }
        w.nccl = comms.iter().filter_map(|c| c.1).collect();
        w.module = r
            .mem
            .iter()
            .filter(|m| m.api.effect() == MemEffect::Module)
            .map(|m| (m.t_start, m.t_end))
            .collect();
        let cublas_calls: Vec<Window> = r
            .mem
            .iter()
            .filter(|m| {
                is_cublas(m.library)
                    && matches!(
                        m.api.effect(),
                        MemEffect::Module
                            | MemEffect::DeviceAlloc
                            | MemEffect::DeviceFree
                            | MemEffect::Context
                    )
            })
            .map(|m| (m.t_start, m.t_end))
            .collect();
        w.cublas = cublas_windows(&cublas_calls);
        w
    }

    /// Splits [a, b] into compile > autotune > NCCL init > cuBLAS init >
    /// module loading > other (each instant counted once, for the
    /// highest-priority kind active then).
    pub fn breakdown(&self, a: u64, b: u64) -> StallBreakdown {
        let lists = [
            &self.compile,
            &self.autotune,
            &self.nccl,
            &self.cublas,
            &self.module,
        ];
        let mut cuts: Vec<u64> = vec![a, b];
        for l in lists {
            for (x, y) in l.iter() {
                for t in [*x, *y] {
                    if t > a && t < b {
                        cuts.push(t);
                    }
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut secs_by = [0u64; 6];
        for pair in cuts.windows(2) {
            let (x, y) = (pair[0], pair[1]);
            let mid = x + (y - x) / 2;
            let kind = lists
                .iter()
                .position(|l| l.iter().any(|(s, e)| *s <= mid && mid < *e))
                .unwrap_or(5);
            secs_by[kind] += y - x;
        }
        let f = |n: u64| n as f64 / 1e9;
        StallBreakdown {
            wall_s: f(b.saturating_sub(a)),
            compile_s: f(secs_by[0]),
            autotune_s: f(secs_by[1]),
            nccl_init_s: f(secs_by[2]),
            cublas_init_s: f(secs_by[3]),
            module_load_s: f(secs_by[4]),
            other_s: f(secs_by[5]),
        }
    }
}

/// What each lazy-initialisation class cost in one phase of one process
/// (classes with nothing are left out). Bytes: allocations made from the
/// class's libraries, local-memory growth, NCCL's inferred init bytes and
/// module code (all inferred parts included); seconds: the phase's stall
/// breakdown, so no instant counts for two classes (cuBLAS init includes
/// cuBLAS's own module loads; module loading is everyone else's); events:
/// allocation calls, growths, communicators, autotunes, compiles, first
/// kernel launches.
pub fn class_costs(p: &ProcessAccount, phase: Phase) -> BTreeMap<EventClass, ClassCost> {
    let mut m: BTreeMap<EventClass, ClassCost> = BTreeMap::new();
    let Some(ph) = p.phases.iter().find(|x| x.phase == phase) else {
        return m;
    };
    for sb in &ph.by_source {
        if let Some(c) = class_of_source(&sb.source) {
            let e = m.entry(c).or_default();
            e.bytes += sb.allocated;
            e.events += sb.calls as u32;
        }
    }
    m.entry(EventClass::Cublas).or_default().seconds += ph.stall.cublas_init_s;
    let local = m.entry(EventClass::LocalMemory).or_default();
    local.bytes += ph.local_memory_growth;
    local.events += p
        .local_memory
        .iter()
        .filter(|l| l.phase == phase && !l.failed)
        .count() as u32;
    let nccl = m.entry(EventClass::NcclComm).or_default();
    for c in p.nccl.iter().filter(|c| c.phase == Some(phase)) {
        nccl.bytes += c.inferred_bytes;
        nccl.events += 1;
    }
    nccl.seconds += ph.stall.nccl_init_s;
    let at = m.entry(EventClass::TritonAutotune).or_default();
    at.seconds += ph.stall.autotune_s;
    at.events += p.autotune.iter().filter(|a| a.phase == phase).count() as u32;
    let comp = m.entry(EventClass::Compile).or_default();
    comp.seconds += ph.stall.compile_s;
    comp.events += p.compiles.iter().filter(|c| c.phase == phase).count() as u32;
    let module = m.entry(EventClass::ModuleLoad).or_default();
    module.bytes += ph.module_code_bytes;
    module.seconds += ph.stall.module_load_s;
    module.events += ph.kernels_first_launched;
    m.retain(|_, c| c.bytes > 0 || c.seconds > 0.0 || c.events > 0);
    m
}

/// The event class of an out-of-pool source, for warmup lists and forensics.
pub fn class_of_source(source: &str) -> Option<EventClass> {
    match source {
        "nccl" => Some(EventClass::NcclComm),
        "cublas" | "cudnn" => Some(EventClass::Cublas),
        "triton" => Some(EventClass::TritonAutotune),
        "local memory" => Some(EventClass::LocalMemory),
        _ => None,
    }
}

/// What was first used after setup: the warmups a user still needs.
pub fn late_warmups(
    autotune: &[AutotuneAccount],
    compiles: &[CompileEvent],
    comms: &[CommAccount],
    replay: &Replay,
    kernels_after_setup: u32,
    first_kernel_step: Option<u32>,
) -> Vec<LateWarmup> {
    let mut out = Vec::new();
    for a in autotune
        .iter()
        .filter(|a| a.phase != Phase::Setup && a.source.starts_with("benchmark"))
    {
        out.push(LateWarmup {
            class: EventClass::TritonAutotune,
            what: format!("autotune {} for key {}", a.kernel, a.key),
            phase: a.phase,
            step: a.step,
            seconds: a.seconds,
            bytes: a.local_memory_growth + a.out_of_pool_bytes,
        });
    }
    let mut by_kernel: Vec<(String, Phase, Option<u32>, f64, u32)> = Vec::new();
    for c in compiles.iter().filter(|c| c.phase != Phase::Setup) {
        match by_kernel.iter_mut().find(|k| k.0 == c.kernel) {
            Some(k) => {
                k.3 += c.seconds;
                k.4 += 1;
            }
            None => by_kernel.push((c.kernel.clone(), c.phase, c.step, c.seconds, 1)),
        }
    }
    for (kernel, phase, step, seconds, n) in by_kernel {
        out.push(LateWarmup {
            class: EventClass::Compile,
            what: format!("compile {kernel} ({n}x)"),
            phase,
            step,
            seconds,
            bytes: 0,
        });
    }
    for c in comms
        .iter()
        .filter(|c| c.phase.is_some_and(|p| p != Phase::Setup))
    {
        out.push(LateWarmup {
            class: EventClass::NcclComm,
            what: format!(
                "NCCL communicator {} ({} ranks)",
                c.comm_id.clone().unwrap_or_else(|| c.comm.clone()),
                c.nranks.map_or("?".into(), |n| n.to_string())
            ),
            phase: c.phase.unwrap_or(Phase::Step1),
            step: c.step,
            seconds: c.init_seconds.unwrap_or(0.0),
            bytes: c.bytes + c.inferred_bytes,
        });
    }
    let setup_sources: Vec<&str> = replay
        .phases
        .get(&Phase::Setup)
        .map(|p| p.by_source.keys().map(|k| &**k).collect())
        .unwrap_or_default();
    for phase in [Phase::Step1, Phase::Steady, Phase::Teardown] {
        let Some(p) = replay.phases.get(&phase) else {
            continue;
        };
        for (src, sb) in &p.by_source {
            let src: &str = src;
            if setup_sources.contains(&src)
                || sb.allocated == 0
                || src == super::sources::TORCH_POOL
                || src == "nccl"
            {
                continue;
            }
            if out
                .iter()
                .any(|w| w.what.contains(&format!("library {src} ")))
            {
                continue;
            }
            if let Some(class) = class_of_source(src) {
                out.push(LateWarmup {
                    class,
                    what: format!("library {src} first used"),
                    phase,
                    step: None,
                    seconds: 0.0,
                    bytes: sb.allocated,
                });
            }
        }
    }
    for ev in replay
        .local_events
        .iter()
        .filter(|e| e.phase != Phase::Setup && !e.failed)
    {
        if autotune
            .iter()
            .any(|a| a.phase != Phase::Setup && ev.kernel.contains(&a.kernel))
        {
            continue; // already listed with its autotune
        }
        out.push(LateWarmup {
            class: EventClass::LocalMemory,
            what: format!("local-memory growth by {}", ev.kernel),
            phase: ev.phase,
            step: ev.step,
            seconds: 0.0,
            bytes: ev.device_growth,
        });
    }
    if kernels_after_setup > 0 {
        out.push(LateWarmup {
            class: EventClass::ModuleLoad,
            what: format!(
                "{kernels_after_setup} kernels first launched after setup (lazy module loading)"
            ),
            phase: Phase::Step1,
            step: first_kernel_step,
            seconds: 0.0,
            bytes: 0,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakdown_counts_each_instant_once_by_priority() {
        let w = StallWindows {
            compile: vec![(10, 20)],
            autotune: vec![(5, 30)],
            nccl: vec![(40, 50)],
            cublas: vec![(58, 70)],
            module: vec![(45, 60), (65, 68)],
        };
        let b = w.breakdown(0, 100);
        assert_eq!(b.compile_s, 10e-9);
        assert_eq!(b.autotune_s, 15e-9);
        assert_eq!(b.nccl_init_s, 10e-9);
        // cuBLAS's own module loads (65-68) are cuBLAS init.
        assert_eq!(b.cublas_init_s, 12e-9);
        assert_eq!(b.module_load_s, 8e-9);
        assert_eq!(b.other_s, 45e-9);
        assert!((b.wall_s - 100e-9).abs() < 1e-15);
    }

    #[test]
    fn communicator_spans_never_overlap() {
        const MS: u64 = 1_000_000;
        // The second window starts (by NCCL's total) before the first completed.
        let w = [
            Some((100 * MS, 400 * MS)),
            Some((395 * MS, 430 * MS)),
            None,
        ];
        let s = comm_spans(&w);
        assert_eq!(s[0], Some((95 * MS, 400 * MS)));
        assert_eq!(s[1], Some((400 * MS, 450 * MS)));
        assert_eq!(s[2], None);
        // Far apart: each widened by the full margins.
        let far = [Some((100 * MS, 200 * MS)), (Some((900 * MS, 950 * MS)))];
        let s = comm_spans(&far);
        assert_eq!(s[0], Some((95 * MS, 220 * MS)));
        assert_eq!(s[1], Some((895 * MS, 970 * MS)));
    }

    #[test]
    fn cublas_calls_close_together_are_one_initialisation() {
        const MS: u64 = 1_000_000;
        let calls = [
            (0, MS),
            (15 * MS, 16 * MS),
            (30 * MS, 34 * MS),
            (200 * MS, 201 * MS),
        ];
        assert_eq!(
            cublas_windows(&calls),
            vec![(0, 34 * MS), (200 * MS, 201 * MS)]
        );
    }

    #[test]
    fn wall_clock_maps_onto_the_monotonic_clock() {
        // started at unix 1000 s == mono 50 s
        assert_eq!(
            unix_to_mono(1001.5, 1_000_000_000_000, 50_000_000_000),
            51_500_000_000
        );
    }
}
