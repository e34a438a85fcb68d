//! Replaying a process's allocation calls and local-memory growth in time
//! order: per-phase totals by source, the state at chosen instants, and the
//! exposure of every out-of-pool request.

use super::model::{Exposure, LocalMemoryEvent, SourceBytes};
use super::phases::{Boundaries, Phase};
use super::records::{ProcessRecords, kernel_display};
use super::sources::{UNKNOWN, classify};
use prewarm_events::{MemApi, MemCall, MemEffect, UNKNOWN_BYTES};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// A source name shared cheaply across millions of events.
pub type SourceName = Arc<str>;

/// A time series of (t, bytes), queried at or before an instant.
#[derive(Debug, Clone, Default)]
pub struct Series {
    pub points: Vec<(u64, u64)>,
}

impl Series {
    /// The last value at or before `t`.
    pub fn at(&self, t: u64) -> Option<u64> {
        let i = self.points.partition_point(|p| p.0 <= t);
        (i > 0).then(|| self.points[i - 1].1)
    }
    /// The largest value in force during [a, b].
    pub fn peak(&self, a: u64, b: u64) -> Option<u64> {
        let lo = self.points.partition_point(|p| p.0 < a);
        // A window that ends before it starts (damaged timestamps) holds nothing.
        let hi = self.points.partition_point(|p| p.0 <= b).max(lo);
        self.points[lo..hi]
            .iter()
            .map(|p| p.1)
            .chain(self.at(a))
            .max()
    }
}

/// Device memory views of one process: what the process holds (NVML per
/// process, or the device minus what was used before the run) and the
/// device-level free memory (cuMemGetInfo at probe events, NVML between).
#[derive(Debug, Clone, Default)]
pub struct DeviceView {
    pub used: Series,
    pub used_source: String,
    pub device_used: Series,
    pub cuda_total: Option<u64>,
    pub probe_free: Series,
}

impl DeviceView {
    /// Free device memory at `t`: the most recent of cuMemGetInfo (probe) and NVML.
    pub fn free_at(&self, t: u64) -> Option<u64> {
        let probe = self.probe_free.points[..self.probe_free.points.partition_point(|p| p.0 <= t)]
            .last()
            .copied();
        let nvml_i = self.device_used.points.partition_point(|p| p.0 <= t);
        let nvml = (nvml_i > 0).then(|| self.device_used.points[nvml_i - 1]);
        match (probe, nvml, self.cuda_total) {
            (Some(p), Some(n), Some(total)) if n.0 > p.0 => Some(total.saturating_sub(n.1)),
            (Some(p), _, _) => Some(p.1),
            (None, Some(n), Some(total)) => Some(total.saturating_sub(n.1)),
            _ => None,
        }
    }
}

/// Running totals at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub pool: u64,
    pub oop: BTreeMap<SourceName, u64>,
    pub local_growth: u64,
    /// Reservation the driver dropped when a growth failed (measured).
    pub local_released: u64,
    /// Context memory the driver committed only at the context's first kernel
    /// launch (its initial local-memory reservation; measured, often 0).
    pub context_late: u64,
}

impl State {
    /// All live out-of-pool allocations.
    pub fn oop_total(&self) -> u64 {
        self.oop.values().sum()
    }
}

/// Per-phase totals gathered while replaying.
#[derive(Debug, Clone, Default)]
pub struct PhaseTotals {
    pub by_source: BTreeMap<SourceName, SourceBytes>,
    pub pool_peak: u64,
    pub oop_alloc: u64,
    pub oop_freed: u64,
    pub local_growth: u64,
    pub module_loads: u32,
    pub first_launches: u32,
    pub pinned: u64,
    pub failed: u32,
}

/// A failed device request, before forensics interprets it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub t: u64,
    pub api: String,
    pub bytes: u64,
    pub source: String,
    pub library: String,
    pub result: u32,
    pub free_before: Option<u64>,
    pub total: Option<u64>,
    pub local_kernel: Option<String>,
}

/// An out-of-pool allocation that succeeded, for joins with framework windows.
#[derive(Debug, Clone)]
pub struct OopAlloc {
    pub t: u64,
    pub source: SourceName,
    pub bytes: u64,
}

/// Everything the replay produces.
#[derive(Debug, Default)]
pub struct Replay {
    pub phases: BTreeMap<Phase, PhaseTotals>,
    /// State at each requested query instant, in the order asked.
    pub states: Vec<State>,
    pub exposures: Vec<Exposure>,
    pub failures: Vec<Failure>,
    pub local_events: Vec<LocalMemoryEvent>,
    pub oop_allocs: Vec<OopAlloc>,
    /// Local-memory reservation each context had at its first kernel (part of the context).
    pub initial_local: u64,
    /// Of that, what the device gained only at the first launch (measured).
    pub context_late: u64,
    /// Reservation released when a growth failed (the driver drops the old one).
    pub local_released: u64,
    pub libraries_by_source: BTreeMap<String, Vec<String>>,
}

/// The per-phase entry of a source, created on first use.
fn source_entry<'a>(
    by_source: &'a mut BTreeMap<SourceName, SourceBytes>,
    source: &SourceName,
) -> &'a mut SourceBytes {
    by_source
        .entry(source.clone())
        .or_insert_with(|| SourceBytes {
            source: source.to_string(),
            ..Default::default()
        })
}

fn opt(v: u64) -> Option<u64> {
    (v != UNKNOWN_BYTES).then_some(v)
}

fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

enum Item<'a> {
    Mem(&'a MemCall),
    Local(usize),
    First,
    Query(usize),
}

/// Where a failed kernel launch (zero timestamps) is placed: when the process
/// died (its exception), else at its last event.
pub fn failed_launch_time(r: &ProcessRecords) -> u64 {
    use crate::load::shim::ShimEvent;
    r.shim
        .iter()
        .find_map(|e| match e {
            ShimEvent::Exception { t, .. } => Some(*t),
            _ => None,
        })
        .unwrap_or(r.last_t)
}

/// Pool plus out-of-pool bytes live after each allocation call, as a series.
fn known_allocations(r: &ProcessRecords) -> Series {
    let mut calls: Vec<&MemCall> = r.mem.iter().filter(|m| m.result == 0).collect();
    calls.sort_by_key(|m| m.t_end);
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut total = 0u64;
    let mut points = Vec::new();
    for m in calls {
        match m.api.effect() {
            MemEffect::DeviceAlloc => {
                live.insert(m.address, m.bytes);
                total += m.bytes;
            }
            MemEffect::DeviceFree => {
                if let Some(b) = live.remove(&m.address) {
                    total = total.saturating_sub(b);
                }
            }
            _ => continue,
        }
        points.push((m.t_end, total));
    }
    Series { points }
}

/// Smallest first-launch commit reported as such (device pages are 2 MiB).
const LATE_COMMIT_MIN: u64 = 4 << 20;

/// Window around a launch inside which its reservation growth shows on the device.
const GROWTH_WINDOW_NS: u64 = 20_000_000;

/// Longest wait for the probe's next free-memory reading after a launch.
const PROBE_READING_WITHIN_NS: u64 = 2_000_000_000;

/// Device growth over [a, b] that no allocation call explains.
///
/// A window without allocation calls is measured on the device timeline
/// (NVML between the probe's readings). NVML lags allocations by
/// milliseconds, so a window with allocation calls is measured on the
/// probe's own cuMemGetInfo readings instead: the last before the window and
/// the first after the launch, minus the known allocations between them.
fn measured_growth(
    device: &DeviceView,
    known: &Series,
    a: u64,
    launch_end: u64,
    b: u64,
) -> Option<u64> {
    let lo = known.points.partition_point(|p| p.0 < a);
    let hi = known.points.partition_point(|p| p.0 <= b);
    if hi == lo {
        let before = device.used.at(a)?;
        let after = device.used.at(b)?;
        return Some(after.saturating_sub(before));
    }
    let readings = &device.probe_free.points;
    let before = readings[..readings.partition_point(|p| p.0 <= a)].last();
    let after = readings
        .get(readings.partition_point(|p| p.0 < launch_end))
        .filter(|p| p.0 <= launch_end + PROBE_READING_WITHIN_NS);
    let known_change =
        |t0: u64, t1: u64| known.at(t1).unwrap_or(0) as i64 - known.at(t0).unwrap_or(0) as i64;
    let change = match (before, after) {
        (Some(&(t0, free0)), Some(&(t1, free1))) => {
            free0 as i64 - free1 as i64 - known_change(t0, t1)
        }
        // No reading after the launch: the device timeline, best effort.
        _ => device.used.at(b)? as i64 - device.used.at(a)? as i64 - known_change(a, b),
    };
    Some(change.max(0) as u64)
}

/// How much device memory disappeared across a failed launch: from the last
/// compile or allocation call before the failure to the failure itself.
fn released_by_failure(
    r: &ProcessRecords,
    device: &DeviceView,
    known: &Series,
    t_fail: u64,
) -> Option<u64> {
    use crate::load::shim::ShimEvent;
    let last_compile = r.shim.iter().filter_map(|e| match e {
        ShimEvent::Compile { t1, .. } if *t1 < t_fail => Some(*t1),
        _ => None,
    });
    let last_call = r.mem.iter().map(|m| m.t_end).filter(|t| *t < t_fail);
    let a = last_compile.chain(last_call).max()?;
    let before = device.used.at(a)? as i64 - known.at(a).unwrap_or(0) as i64;
    let after = device.used.at(t_fail)? as i64 - known.at(t_fail).unwrap_or(0) as i64;
    (before - after > 0).then(|| (before - after) as u64)
}

/// Measured device growth for each local-memory record (index-aligned with
/// `r.local`). Launches whose windows overlap are measured together and the
/// growth is shared in proportion to CUPTI's reservation increases.
fn measured_growths(r: &ProcessRecords, device: &DeviceView, known: &Series) -> Vec<Option<u64>> {
    let mut out = vec![None; r.local.len()];
    let mut idx: Vec<usize> = (0..r.local.len())
        .filter(|&i| r.local[i].t_start != 0)
        .collect();
    idx.sort_by_key(|&i| r.local[i].t_start);
    let mut cluster: Vec<usize> = Vec::new();
    let flush = |cluster: &mut Vec<usize>, out: &mut Vec<Option<u64>>| {
        if cluster.is_empty() {
            return;
        }
        // Never reach back before the context came up: what it took then is
        // the context's own figure.
        let ctx_up = r
            .contexts
            .iter()
            .filter(|c| c.context_id == r.local[cluster[0]].context_id)
            .map(|c| c.t)
            .min()
            .unwrap_or(0);
        let a = r.local[cluster[0]]
            .t_start
            .saturating_sub(GROWTH_WINDOW_NS)
            .max(ctx_up);
        let launch_end = cluster.iter().map(|&i| r.local[i].t_end).max().unwrap_or(0);
        let b = launch_end + GROWTH_WINDOW_NS;
        if let Some(total) = measured_growth(device, known, a, launch_end, b) {
            let weights: Vec<u64> = cluster
                .iter()
                .map(|&i| {
                    r.local[i]
                        .total_after
                        .saturating_sub(r.local[i].total_before)
                        .max(1)
                })
                .collect();
            let sum: u64 = weights.iter().sum();
            // The device cannot gain more than the driver reserved: anything
            // beyond is someone else's growth inside the window.
            let total = total.min(sum);
            let mut given = 0u64;
            for (k, &i) in cluster.iter().enumerate() {
                let share = if k + 1 == cluster.len() {
                    total - given
                } else {
                    (total as u128 * weights[k] as u128 / sum as u128) as u64
                };
                given += share;
                out[i] = Some(share);
            }
        }
        cluster.clear();
    };
    for i in idx {
        if let Some(&last) = cluster.last()
            && r.local[i].t_start.saturating_sub(GROWTH_WINDOW_NS)
                > r.local[last].t_end + GROWTH_WINDOW_NS
        {
            flush(&mut cluster, &mut out);
        }
        cluster.push(i);
    }
    flush(&mut cluster, &mut out);
    out
}

/// Replays the process; `queries` are instants whose state the caller needs.
pub fn replay(
    r: &ProcessRecords,
    bounds: &Boundaries,
    device: &DeviceView,
    queries: &[u64],
) -> Replay {
    let start = bounds.start;
    // Classify each calling library once, not per event.
    let unknown: (SourceName, bool, SourceName) = (Arc::from(UNKNOWN), false, Arc::from(""));
    let classified: HashMap<u32, (SourceName, bool, SourceName)> = r
        .libraries
        .iter()
        .map(|(id, path)| {
            let (s, pool) = classify(path);
            (
                *id,
                (
                    Arc::from(s.as_str()),
                    pool,
                    Arc::from(path.rsplit('/').next().unwrap_or(path)),
                ),
            )
        })
        .collect();
    let lib = |id: u32| classified.get(&id).unwrap_or(&unknown).clone();
    let mut seen_libraries: HashSet<u32> = HashSet::new();
    let crash_t = failed_launch_time(r);
    let local_t = |i: usize| {
        if r.local[i].t_start == 0 {
            crash_t
        } else {
            r.local[i].t_start
        }
    };

    let mut items: Vec<(u64, u8, Item)> =
        Vec::with_capacity(r.mem.len() + r.local.len() + queries.len());
    for m in &r.mem {
        items.push((m.t_end, 0, Item::Mem(m)));
    }
    for i in 0..r.local.len() {
        items.push((local_t(i), 0, Item::Local(i)));
    }
    for k in &r.first_launches {
        items.push((k.t_start, 0, Item::First));
    }
    for (i, q) in queries.iter().enumerate() {
        items.push((*q, 1, Item::Query(i)));
    }
    items.sort_by_key(|x| (x.0, x.1));

    let known = known_allocations(r);
    let measured = measured_growths(r, device, &known);
    let mut out = Replay {
        states: vec![State::default(); queries.len()],
        ..Default::default()
    };
    let mut state = State::default();
    let mut live: HashMap<u64, (u64, SourceName, bool)> = HashMap::with_capacity(1024);
    let mut first_local: HashMap<u32, u64> = HashMap::new();
    let mut max_local: HashMap<u32, u64> = HashMap::new();

    for (t, _, item) in &items {
        let phase = bounds.phase_of(*t);
        let step = bounds.step_of(*t);
        match item {
            Item::Query(i) => {
                out.states[*i] = state.clone();
                continue;
            }
            Item::First => {
                out.phases.entry(phase).or_default().first_launches += 1;
                continue;
            }
            Item::Local(i) => {
                let l = &r.local[*i];
                let failed = l.t_start == 0;
                if !failed && l.total_before == 0 && !first_local.contains_key(&l.context_id) {
                    // The reservation every context starts with (default stack): part of
                    // the context, though some drivers commit it only at this launch.
                    first_local.insert(l.context_id, l.total_after);
                    max_local.insert(l.context_id, l.total_after);
                    out.initial_local += l.total_after;
                    // Below a few device pages this is sampling noise, not a commit.
                    let late = measured
                        .get(*i)
                        .copied()
                        .flatten()
                        .filter(|&g| g >= LATE_COMMIT_MIN)
                        .unwrap_or(0);
                    state.context_late += late;
                    out.context_late += late;
                    continue;
                }
                let cur = max_local
                    .get(&l.context_id)
                    .copied()
                    .unwrap_or(l.total_before);
                let reserved_grow = l.total_after.saturating_sub(cur);
                if reserved_grow == 0 && !failed {
                    continue;
                }
                // What the device really gained: the driver's reservation change is
                // not always the difference of CUPTI's totals, so measure it on the
                // device timeline around the launch, minus known allocations there.
                let grow = if failed {
                    reserved_grow
                } else {
                    measured.get(*i).copied().flatten().unwrap_or(reserved_grow)
                };
                let free = device.free_at(*t);
                out.exposures.push(Exposure {
                    t_s: secs(*t, start),
                    phase,
                    step,
                    kind: "local memory".into(),
                    source: "local memory".into(),
                    what: kernel_display(&l.kernel),
                    bytes: grow,
                    device_used_before: device
                        .cuda_total
                        .zip(free)
                        .map(|(tot, f)| tot.saturating_sub(f)),
                    pool_reserved: state.pool,
                    device_free_before: free,
                    headroom_after: free.map(|f| f as i64 - grow as i64),
                    succeeded: !failed,
                });
                out.local_events.push(LocalMemoryEvent {
                    t_s: secs(*t, start),
                    phase,
                    step,
                    kernel: kernel_display(&l.kernel),
                    before: cur,
                    after: l.total_after,
                    device_growth: grow,
                    registers: l.registers,
                    failed,
                    autotune_config: None,
                });
                if failed {
                    if let Some(dropped) = released_by_failure(r, device, &known, *t) {
                        state.local_released += dropped;
                        out.local_released += dropped;
                    }
                    out.phases.entry(phase).or_default().failed += 1;
                    out.failures.push(Failure {
                        t: *t,
                        api: "kernel launch (local-memory growth)".into(),
                        bytes: grow,
                        source: "local memory".into(),
                        library: String::new(),
                        result: 2,
                        free_before: free,
                        total: device.cuda_total,
                        local_kernel: Some(kernel_display(&l.kernel)),
                    });
                } else {
                    max_local.insert(l.context_id, l.total_after);
                    state.local_growth += grow;
                    out.phases.entry(phase).or_default().local_growth += grow;
                }
                continue;
            }
            Item::Mem(m) => {
                let (source, in_pool, library) = lib(m.library);
                if seen_libraries.insert(m.library) && !library.is_empty() {
                    let libs = out
                        .libraries_by_source
                        .entry(source.to_string())
                        .or_default();
                    if !libs.iter().any(|l| **l == *library) {
                        libs.push(library.to_string());
                    }
                }
                let effect = m.api.effect();
                let acc = out.phases.entry(phase).or_default();
                if m.result != 0 {
                    if effect == MemEffect::DeviceAlloc {
                        acc.failed += 1;
                        out.failures.push(Failure {
                            t: *t,
                            api: m.api.name().to_string(),
                            bytes: m.bytes,
                            source: source.to_string(),
                            library: library.to_string(),
                            result: m.result,
                            free_before: opt(m.free_before),
                            total: opt(m.total),
                            local_kernel: None,
                        });
                        if !in_pool {
                            push_request_exposure(
                                &mut out.exposures,
                                m,
                                &source,
                                phase,
                                step,
                                start,
                                state.pool,
                                false,
                            );
                        }
                    }
                    continue;
                }
                match effect {
                    MemEffect::DeviceAlloc => {
                        live.insert(m.address, (m.bytes, source.clone(), in_pool));
                        if in_pool {
                            state.pool += m.bytes;
                        } else {
                            push_request_exposure(
                                &mut out.exposures,
                                m,
                                &source,
                                phase,
                                step,
                                start,
                                state.pool,
                                true,
                            );
                            *state.oop.entry(source.clone()).or_default() += m.bytes;
                            acc.oop_alloc += m.bytes;
                            out.oop_allocs.push(OopAlloc {
                                t: *t,
                                source: source.clone(),
                                bytes: m.bytes,
                            });
                        }
                        let sb = source_entry(&mut acc.by_source, &source);
                        sb.calls += 1;
                        sb.allocated += m.bytes;
                    }
                    MemEffect::DeviceFree => {
                        if let Some((bytes, src, pool)) = live.remove(&m.address) {
                            if pool {
                                state.pool = state.pool.saturating_sub(bytes);
                            } else {
                                let e = state.oop.entry(src.clone()).or_default();
                                *e = e.saturating_sub(bytes);
                                acc.oop_freed += bytes;
                            }
                            let sb = source_entry(&mut acc.by_source, &src);
                            sb.freed += bytes;
                        }
                    }
                    MemEffect::HostAlloc => acc.pinned += m.bytes,
                    MemEffect::Module
                        if !matches!(m.api, MemApi::ModuleUnload | MemApi::LibraryUnload) =>
                    {
                        acc.module_loads += 1;
                        source_entry(&mut acc.by_source, &source).module_loads += 1;
                    }
                    _ => {}
                }
                // Time spent inside the library's tracked driver calls.
                if let Some(sb) = acc.by_source.get_mut(&source) {
                    let secs = m.t_end.saturating_sub(m.t_start) as f64 / 1e9;
                    match effect {
                        MemEffect::Module => sb.load_seconds += secs,
                        MemEffect::DeviceAlloc | MemEffect::DeviceFree => sb.alloc_seconds += secs,
                        _ => {}
                    }
                }
                acc.pool_peak = acc.pool_peak.max(state.pool);
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn push_request_exposure(
    out: &mut Vec<Exposure>,
    m: &MemCall,
    source: &str,
    phase: Phase,
    step: Option<u32>,
    start: u64,
    pool: u64,
    ok: bool,
) {
    let free = opt(m.free_before);
    let total = opt(m.total);
    out.push(Exposure {
        t_s: secs(m.t_end, start),
        phase,
        step,
        kind: "allocation".into(),
        source: source.to_string(),
        what: m.api.name().to_string(),
        bytes: m.bytes,
        device_used_before: total.zip(free).map(|(t, f)| t.saturating_sub(f)),
        pool_reserved: pool,
        device_free_before: free,
        headroom_after: free.map(|f| f as i64 - m.bytes as i64),
        succeeded: ok,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_queries() {
        let s = Series {
            points: vec![(10, 1), (20, 5), (30, 2)],
        };
        assert_eq!(s.at(5), None);
        assert_eq!(s.at(25), Some(5));
        assert_eq!(s.peak(21, 29), Some(5));
        assert_eq!(s.peak(0, 35), Some(5));
        assert_eq!(s.peak(31, 40), Some(2));
    }

    #[test]
    fn free_memory_prefers_the_most_recent_view() {
        let d = DeviceView {
            device_used: Series {
                points: vec![(10, 100), (50, 300)],
            },
            cuda_total: Some(1000),
            probe_free: Series {
                points: vec![(20, 850)],
            },
            ..Default::default()
        };
        assert_eq!(d.free_at(15), Some(900));
        assert_eq!(d.free_at(30), Some(850));
        assert_eq!(d.free_at(60), Some(700));
    }

    const MS: u64 = 1_000_000;

    fn series(points: &[(u64, u64)]) -> Series {
        Series {
            points: points.to_vec(),
        }
    }

    #[test]
    fn growth_in_a_window_without_allocations_comes_from_the_device_timeline() {
        let device = DeviceView {
            used: series(&[(0, 500), (100 * MS, 600)]),
            ..Default::default()
        };
        let known = series(&[(10 * MS, 64)]);
        assert_eq!(
            measured_growth(&device, &known, 80 * MS, 110 * MS, 130 * MS),
            Some(100)
        );
    }

    #[test]
    fn growth_next_to_allocations_uses_the_probes_readings_minus_the_allocations() {
        // NVML lags: it still shows the old value after a 64-byte allocation
        // and a 90-byte growth; the probe's readings around the calls do not.
        let device = DeviceView {
            used: series(&[(0, 500)]),
            cuda_total: Some(10_000),
            probe_free: series(&[(90 * MS, 9_500), (120 * MS, 9_346)]),
            ..Default::default()
        };
        let known = series(&[(0, 0), (95 * MS, 64)]);
        assert_eq!(
            measured_growth(&device, &known, 92 * MS, 110 * MS, 130 * MS),
            Some(90)
        );
    }

    #[test]
    fn without_a_reading_after_the_launch_the_device_timeline_minus_allocations_is_used() {
        let device = DeviceView {
            used: series(&[(0, 500), (100 * MS, 654)]),
            probe_free: series(&[(90 * MS, 9_500)]),
            ..Default::default()
        };
        let known = series(&[(0, 0), (95 * MS, 64)]);
        assert_eq!(
            measured_growth(&device, &known, 92 * MS, 110 * MS, 130 * MS),
            Some(90)
        );
        // An allocation the device does not show yet never makes growth negative.
        let lagging = DeviceView {
            used: series(&[(0, 500)]),
            ..Default::default()
        };
        assert_eq!(
            measured_growth(&lagging, &known, 92 * MS, 110 * MS, 130 * MS),
            Some(0)
        );
    }
}
