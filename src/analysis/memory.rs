//! Replaying a process's allocation calls and local-memory growth in time
//! order: per-phase totals by source, the state at chosen instants, and the
//! exposure of every out-of-pool request.

use super::account::{Exposure, LocalMemoryEvent, SourceBytes};
use super::device::{DeviceView, Series};
use super::names::kernel_display;
use super::phases::{Boundaries, Phase};
use super::sources::{SourceName, UNKNOWN, classify};
use crate::load::records::ProcessRecords;
use prewarm_events::{MemApi, MemCall, MemEffect, PoolUse, UNKNOWN_BYTES};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// Running totals at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub pool: u64,
    pub oop: BTreeMap<SourceName, u64>,
    pub local_growth: u64,
    /// Reservation the driver dropped when a growth failed (measured), at
    /// most the local memory held then.
    pub local_released: u64,
    /// The rest of the device's drop across a failed growth (measured, not
    /// named: see `PartSource::ReleasedAtFailure`).
    pub released_other: u64,
    /// Context memory the driver committed only at the context's first kernel
    /// launch (its initial local-memory reservation; measured, often 0).
    pub context_late: u64,
    /// Device growth at lazy module loading (inferred; see `module_code_growth`).
    pub module_code: u64,
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
    /// Device growth at lazy module loading in this phase (inferred).
    pub module_code: u64,
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
    /// PyTorch's pool when it failed.
    pub pool: u64,
    /// No CUDA context was current on the calling thread (the probe could
    /// not read a device there).
    pub no_context: bool,
}

/// An out-of-pool allocation that succeeded, for joins with framework windows.
#[derive(Debug, Clone)]
pub struct OopAlloc {
    pub t: u64,
    pub source: SourceName,
    pub bytes: u64,
    /// When it was given back, if it was.
    pub freed: Option<u64>,
}

/// Remembers which library files a source's calls came from (once each).
fn note_library(by_source: &mut BTreeMap<String, Vec<String>>, source: &str, library: &str) {
    if library.is_empty() {
        return;
    }
    let libs = by_source.entry(source.to_string()).or_default();
    if !libs.iter().any(|l| l == library) {
        libs.push(library.to_string());
    }
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
    /// Device growth at lazy module loading: (when, bytes), in time order.
    pub module_code: Vec<(u64, u64)>,
    /// The down-sampled series for the timeline (see timeline_build.rs).
    pub timeline: super::timeline_build::Recorder,
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

/// One thing the replay walks over, at its instant.
enum Item<'a> {
    Mem(&'a MemCall),
    Pool(&'a PoolUse),
    Local(usize),
    First,
    ModuleCode(u64),
    Query(usize),
}

/// Where a failed kernel launch (zero timestamps) is placed: when the process
/// died (its exception), else at its last event.
pub fn failed_launch_time(r: &ProcessRecords) -> u64 {
    super::phases::died_at(&r.shim).unwrap_or(r.last_t)
}

/// Each local-memory growth's measurement window (the launch ±20 ms, never
/// before its context came up; the context's first launch included): the
/// device may show the growth anywhere inside it (the driver grows the
/// reservation in the launch call, before CUPTI's kernel start, where the
/// replay counts it). Failed growths (no timestamps) are left out.
pub fn growth_windows(r: &ProcessRecords) -> Vec<(u64, u64)> {
    (0..r.local.len())
        .filter(|&i| r.local[i].t_start != 0)
        .map(|i| {
            (
                growth_window_start(r, i),
                r.local[i].t_end + GROWTH_WINDOW_NS,
            )
        })
        .collect()
}

/// Longest time between two readings of the pools by the probe's writer
/// thread (its tick is 10 ms while kernel records are on, 100 ms after), with
/// slack for a writer delayed by a busy CPU.
const POOL_READING_EVERY_MAX_NS: u64 = 200_000_000;

/// What allocation calls explain of the device's memory, for the inferences
/// (module code, a first-launch commit, a local-memory growth measured on the
/// device) that take device growth "no allocation explains".
///
/// A stream-ordered pool grows at an allocation call the probe only counts;
/// the writer thread reads the pool's new size up to one tick later, while
/// the probe's free-memory readings show the growth at once. So each pool
/// growth is known to have happened somewhere after the pool's previous
/// reading (at most one tick before its record) and no later than its record.
/// Module code counts every growth a pair of readings may hold as explained,
/// and no first-launch commit is claimed in a window where a pool grew: seen
/// on the H200 with `backend:cudaMallocAsync`, the pool's first growth read as
/// a 72 MiB commit and later growth as 32 MiB of module code, a remainder of
/// -35 MiB. Such an inference may under-count, which leaves bytes in the
/// remainder, never below zero.
struct KnownAllocations {
    /// Pool plus out-of-pool bytes live after each allocation call and each
    /// recorded change of a pool's size, at the record.
    live: Series,
    /// Each pool growth: (earliest it can have happened, its record, bytes).
    pool_growths: Vec<(u64, u64, u64)>,
}

impl KnownAllocations {
    /// Bytes known live at `t` (pool changes at their records).
    fn at(&self, t: u64) -> Option<u64> {
        self.live.at(t)
    }

    /// The change of live bytes over (t0, t1], pool changes at their records.
    fn change(&self, t0: u64, t1: u64) -> i64 {
        self.at(t1).unwrap_or(0) as i64 - self.at(t0).unwrap_or(0) as i64
    }

    /// The most allocations can explain of the device's change over
    /// (t0, t1]: the change of live bytes plus every pool growth recorded
    /// after t1 that can have happened before it.
    fn change_at_most(&self, t0: u64, t1: u64) -> i64 {
        let live = self.change(t0, t1);
        let pending: u64 = self
            .pool_growths
            .iter()
            .filter(|&&(from, record, _)| from < t1 && t1 < record && t0 < record)
            .map(|g| g.2)
            .sum();
        live + pending as i64
    }

    /// Whether any call or recorded pool change lies in [a, b].
    fn any_in(&self, a: u64, b: u64) -> bool {
        let points = &self.live.points;
        points.partition_point(|p| p.0 <= b) > points.partition_point(|p| p.0 < a)
    }

    /// Whether a stream-ordered pool may have grown in [a, b].
    fn pool_may_grow_in(&self, a: u64, b: u64) -> bool {
        self.pool_growths
            .iter()
            .any(|&(from, record, _)| from <= b && a <= record)
    }
}

/// When each pool growth can have happened: after the pool's previous reading,
/// at most one writer tick (with slack) before its record.
fn pool_growth_intervals(pools: &[PoolUse]) -> Vec<(u64, u64, u64)> {
    let mut sorted = pools.to_vec();
    sorted.sort_by_key(|p| p.t);
    let mut previous: HashMap<u32, u64> = HashMap::new();
    pool_size_changes(&sorted)
        .filter_map(|(t, p, change)| {
            let earliest = t.saturating_sub(POOL_READING_EVERY_MAX_NS);
            let from = previous
                .insert(p.pool_id, t)
                .map_or(earliest, |prev| prev.max(earliest));
            (change > 0).then_some((from, t, change as u64))
        })
        .collect()
}

fn known_allocations(r: &ProcessRecords) -> KnownAllocations {
    KnownAllocations {
        live: live_allocations(r),
        pool_growths: pool_growth_intervals(&r.pools),
    }
}

/// Pool plus out-of-pool bytes live after each allocation call (and each
/// change of a stream-ordered pool's size), as a series.
fn live_allocations(r: &ProcessRecords) -> Series {
    let mut calls: Vec<(u64, Option<&MemCall>, i64)> = r
        .mem
        .iter()
        .filter(|m| m.result == 0)
        .map(|m| (m.t_end, Some(m), 0))
        .collect();
    calls.extend(pool_size_changes(&r.pools).map(|(t, _, d)| (t, None, d)));
    calls.sort_by_key(|c| c.0);
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut total = 0u64;
    let mut points = Vec::new();
    for (t, call, pool_change) in calls {
        match call.map(|m| (m, m.api.effect())) {
            None => total = total.saturating_add_signed(pool_change),
            Some((m, MemEffect::DeviceAlloc)) => {
                live.insert(m.address, m.bytes);
                total += m.bytes;
            }
            Some((m, MemEffect::DeviceFree)) => {
                if let Some(b) = live.remove(&m.address) {
                    total = total.saturating_sub(b);
                }
            }
            _ => continue,
        }
        points.push((t, total));
    }
    Series { points }
}

/// Each pool summary that measured the pool, with the change of the pool's
/// reserved bytes since that pool's previous measurement.
fn pool_size_changes(pools: &[PoolUse]) -> impl Iterator<Item = (u64, &PoolUse, i64)> {
    let mut last: HashMap<u32, u64> = HashMap::new();
    pools
        .iter()
        .filter(|p| p.reserved != UNKNOWN_BYTES)
        .map(move |p| {
            let before = last.insert(p.pool_id, p.reserved).unwrap_or(0);
            (p.t, p, p.reserved as i64 - before as i64)
        })
}

/// Smallest first-launch commit reported as such (device pages are 2 MiB).
const LATE_COMMIT_MIN: u64 = 4 << 20;

/// Window around a launch inside which its reservation growth shows on the device.
const GROWTH_WINDOW_NS: u64 = 20_000_000;

/// Longest wait for the probe's next free-memory reading after a launch.
const PROBE_READING_WITHIN_NS: u64 = 2_000_000_000;

/// Where the device is read "before" a local-memory record's growth: the
/// start of its measurement window, never before its context came up.
fn growth_window_start(r: &ProcessRecords, i: usize) -> u64 {
    let l = &r.local[i];
    let ctx_up = r
        .contexts
        .iter()
        .filter(|c| c.context_id == l.context_id)
        .map(|c| c.t)
        .min()
        .unwrap_or(0);
    l.t_start.saturating_sub(GROWTH_WINDOW_NS).max(ctx_up)
}

/// Device growth over [a, b] that no allocation call explains.
///
/// A window without allocation calls is measured on the device timeline
/// (NVML between the probe's readings), unless `exact`. NVML lags
/// allocations by milliseconds, so a window with allocation calls (or an
/// `exact` one) is measured on the probe's own cuMemGetInfo readings
/// instead: the last before the window and the first after the launch,
/// minus the known allocations between them. `exact` is for the context's
/// first launch: an NVML sample that lags what came just before the window
/// (the context itself, an allocation) would read as a commit.
fn measured_growth(
    device: &DeviceView,
    known: &KnownAllocations,
    (a, launch_end, b): (u64, u64, u64),
    exact: bool,
) -> Option<u64> {
    let readings = &device.probe_free.points;
    let before = readings[..readings.partition_point(|p| p.0 <= a)].last();
    let after = readings
        .get(readings.partition_point(|p| p.0 < launch_end))
        .filter(|p| p.0 <= launch_end + PROBE_READING_WITHIN_NS);
    let probe_pair = before.is_some() && after.is_some();
    if !(known.any_in(a, b) || exact && probe_pair && device.own_device) {
        let before = device.used.at(a)?;
        let after = device.used.at(b)?;
        return Some(after.saturating_sub(before));
    }
    let known_change = |t0: u64, t1: u64| known.change(t0, t1);
    let change = match (before, after) {
        (Some(&(t0, free0)), Some(&(t1, free1))) => {
            free0 as i64 - free1 as i64 - known_change(t0, t1)
        }
        // No reading after the launch: the device timeline, best effort.
        _ => device.used.at(b)? as i64 - device.used.at(a)? as i64 - known_change(a, b),
    };
    Some(change.max(0) as u64)
}

/// Longest stretch between two of the probe's free-memory readings over which
/// device growth is put down to module loading: longer stretches hold too much
/// else to name the cause.
const MODULE_INTERVAL_MAX_NS: u64 = 1_000_000_000;

/// Smallest device growth attributed to module loading (one device page).
const MODULE_GROWTH_MIN: u64 = 2 << 20;

/// Device growth at lazy module loading, which no allocation call shows: with
/// lazy loading (CUDA's default) the driver puts a module's code (and what it
/// needs with it) on the device when a kernel of it first runs.
///
/// Measured on the probe's own `cuMemGetInfo` readings (taken around every
/// tracked driver call, so no allocation call falls between two consecutive
/// ones): for each pair of consecutive readings at most 1 s apart with a
/// module-load call, a CUPTI module-loaded record or a kernel's first launch
/// between them, the drop in free memory minus the allocations that completed
/// in between. Stretches that overlap a local-memory growth (measured on its
/// own, as is the context's first-launch commit) or an `exclude` window (the
/// NCCL communicator spans, whose growth without allocation calls is NCCL's
/// own inferred figure) are left out, so nothing is counted twice. Only when
/// the readings are this process's own (alone on its GPU). Returns (when,
/// bytes): when = the reading that first shows the growth (the device
/// timeline the account is checked against shows it no earlier).
fn module_code_growth(
    r: &ProcessRecords,
    device: &DeviceView,
    known: &KnownAllocations,
    exclude: &[(u64, u64)],
) -> Vec<(u64, u64)> {
    if !device.own_device {
        return Vec::new();
    }
    let mut events: Vec<u64> = r
        .modules
        .iter()
        .map(|m| m.t)
        .chain(r.first_launches.iter().map(|k| k.t_start))
        .chain(
            r.mem
                .iter()
                .filter(|m| {
                    m.result == 0
                        && m.api.effect() == MemEffect::Module
                        && !matches!(m.api, MemApi::ModuleUnload | MemApi::LibraryUnload)
                })
                .map(|m| m.t_end),
        )
        .collect();
    events.sort_unstable();
    let mut busy: Vec<(u64, u64)> = r
        .local
        .iter()
        .filter(|l| l.t_start != 0)
        .map(|l| {
            (
                l.t_start.saturating_sub(GROWTH_WINDOW_NS),
                l.t_end + GROWTH_WINDOW_NS,
            )
        })
        .chain(
            exclude
                .iter()
                .map(|w| (w.0.saturating_sub(GROWTH_WINDOW_NS), w.1)),
        )
        .collect();
    busy.sort_unstable();
    let ctx_up = r.contexts.iter().map(|c| c.t).min().unwrap_or(0);
    let readings = &device.probe_free.points;
    let mut out = Vec::new();
    for pair in readings.windows(2) {
        let ((t0, free0), (t1, free1)) = (pair[0], pair[1]);
        if t1 <= t0 || t1 - t0 > MODULE_INTERVAL_MAX_NS || t0 < ctx_up {
            continue;
        }
        let loaded = events[events.partition_point(|&e| e < t0)..]
            .first()
            .is_some_and(|&e| e <= t1);
        if !loaded {
            continue;
        }
        if busy.iter().any(|w| w.0 <= t1 && t0 <= w.1) {
            continue;
        }
        let allocated = known.change_at_most(t0, t1);
        let grew = free0 as i64 - free1 as i64 - allocated;
        if grew >= MODULE_GROWTH_MIN as i64 {
            out.push((t1, grew as u64));
        }
    }
    out
}

/// How much device memory disappeared across a failed launch: from the last
/// compile or allocation call before the failure to the failure itself.
fn released_by_failure(
    r: &ProcessRecords,
    device: &DeviceView,
    known: &KnownAllocations,
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

/// Shares a window's measured device growth among its local-memory records.
/// A reservation growth is new device memory, so the growing records are
/// served first, in proportion to CUPTI's reservation increases and never
/// beyond them; a context's initial reservation (`initial`) gets only what
/// they leave: the commit at the first launch counts device growth that no
/// other record in the window explains.
fn split_growth(
    r: &ProcessRecords,
    cluster: &[usize],
    total: u64,
    initial: &HashSet<usize>,
    commit_known: bool,
) -> Vec<(usize, u64)> {
    let weight = |i: usize| {
        r.local[i]
            .total_after
            .saturating_sub(r.local[i].total_before)
            .max(1)
    };
    let (first, growing): (Vec<usize>, Vec<usize>) =
        cluster.iter().partition(|&&i| initial.contains(&i));
    let caps: Vec<u64> = growing.iter().map(|&i| weight(i)).collect();
    let sum: u64 = caps.iter().sum();
    // The device cannot gain more than the driver reserved: anything beyond
    // is someone else's growth inside the window.
    let to_growing = total.min(sum);
    let mut out = Vec::new();
    let mut given = 0u64;
    for (k, &i) in growing.iter().enumerate() {
        let share = if k + 1 == growing.len() {
            to_growing - given
        } else {
            (to_growing as u128 * caps[k] as u128 / sum as u128) as u64
        };
        given += share;
        out.push((i, share));
    }
    let mut left = if commit_known { total - to_growing } else { 0 };
    for &i in &first {
        let share = left.min(weight(i));
        left -= share;
        out.push((i, share));
    }
    out
}

/// Measured device growth for each local-memory record (index-aligned with
/// `r.local`). Launches whose windows overlap are measured together and the
/// growth is shared in proportion to CUPTI's reservation increases.
fn measured_growths(
    r: &ProcessRecords,
    device: &DeviceView,
    known: &KnownAllocations,
) -> Vec<Option<u64>> {
    let mut out = vec![None; r.local.len()];
    let mut idx: Vec<usize> = (0..r.local.len())
        .filter(|&i| r.local[i].t_start != 0)
        .collect();
    idx.sort_by_key(|&i| r.local[i].t_start);
    // Each context's first record from an empty reservation: the reservation
    // every context starts with, which some drivers commit at this launch.
    let mut initial: HashSet<usize> = HashSet::new();
    let mut seen_ctx: HashSet<u32> = HashSet::new();
    for &i in &idx {
        if r.local[i].total_before == 0 && seen_ctx.insert(r.local[i].context_id) {
            initial.insert(i);
        }
    }
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
        let exact = cluster.iter().any(|i| initial.contains(i));
        if let Some(total) = measured_growth(device, known, (a, launch_end, b), exact) {
            // The pool's first growth cannot be told from a commit.
            let commit_known = !known.pool_may_grow_in(a, b);
            for (i, share) in split_growth(r, cluster, total, &initial, commit_known) {
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
///
/// `exclude` are windows whose device growth without allocation calls is
/// another part's (the NCCL communicator spans): module-code growth is not
/// measured across them.
///
/// Stages: the device growth measured around each local-memory record and at
/// lazy module loading, the records and queries in time order
/// ([`replay_items`]), then one walk that applies each ([`Replayer`]).
pub fn replay(
    r: &ProcessRecords,
    bounds: &Boundaries,
    device: &DeviceView,
    queries: &[u64],
    exclude: &[(u64, u64)],
) -> Replay {
    let known = known_allocations(r);
    let measured = measured_growths(r, device, &known);
    let module_code = module_code_growth(r, device, &known, exclude);
    let items = replay_items(r, queries, &module_code);
    let mut replayer = Replayer::new(r, bounds, device, &known, &measured, queries.len());
    replayer.out.module_code = module_code;
    for (t, _, item) in &items {
        replayer.apply(*t, item);
    }
    replayer.out
}

/// Every record the replay walks and every query, in time order; at one
/// instant, records before queries (a query sees what happened then) and
/// records in this order: calls, pool summaries, local-memory records, first
/// launches, module-code growth. A failed launch (no timestamps) is placed
/// at [`failed_launch_time`].
fn replay_items<'a>(
    r: &'a ProcessRecords,
    queries: &[u64],
    module_code: &[(u64, u64)],
) -> Vec<(u64, u8, Item<'a>)> {
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
    for p in &r.pools {
        items.push((p.t, 0, Item::Pool(p)));
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
    for &(t, bytes) in module_code {
        items.push((t, 0, Item::ModuleCode(bytes)));
    }
    items.sort_by_key(|x| (x.0, x.1));
    items
}

/// Who called: the source name, whether it is PyTorch's pool, and the
/// library's file name.
type Caller = (SourceName, bool, SourceName);

/// The calling libraries, each classified once (not per event), and which
/// of them the replay has met.
struct Libraries {
    classified: HashMap<u32, Caller>,
    unknown: Caller,
    seen: HashSet<u32>,
}

impl Libraries {
    fn of(r: &ProcessRecords) -> Libraries {
        let classified = r
            .libraries
            .iter()
            .map(|(id, path)| {
                let (s, pool) = classify(path);
                let file = path.rsplit('/').next().unwrap_or(path);
                (*id, (Arc::from(s.as_str()), pool, Arc::from(file)))
            })
            .collect();
        Libraries {
            classified,
            unknown: (Arc::from(UNKNOWN), false, Arc::from("")),
            seen: HashSet::new(),
        }
    }

    /// The caller of library `id` (an unknown caller for an id the probe did
    /// not name); the first time, its file is noted under its source.
    fn caller(&mut self, id: u32, by_source: &mut BTreeMap<String, Vec<String>>) -> Caller {
        let caller = self.classified.get(&id).unwrap_or(&self.unknown).clone();
        if self.seen.insert(id) {
            note_library(by_source, &caller.0, &caller.2);
        }
        caller
    }
}

/// The replay's walk: the running state and everything gathered so far.
struct Replayer<'a> {
    r: &'a ProcessRecords,
    bounds: &'a Boundaries,
    device: &'a DeviceView,
    /// Pool plus out-of-pool bytes after each call ([`known_allocations`]).
    known: &'a KnownAllocations,
    /// Measured device growth per local-memory record ([`measured_growths`]).
    measured: &'a [Option<u64>],
    libraries: Libraries,
    state: State,
    /// Live allocations by address: (bytes, source, in PyTorch's pool).
    live: HashMap<u64, (u64, SourceName, bool)>,
    /// Where each live out-of-pool allocation is in `out.oop_allocs`.
    oop_index: HashMap<u64, usize>,
    /// Per context, its initial local-memory reservation once seen.
    first_local: HashMap<u32, u64>,
    /// Per context, the largest reservation so far.
    max_local: HashMap<u32, u64>,
    pools_seen: HashMap<u32, PoolSeen>,
    out: Replay,
}

impl<'a> Replayer<'a> {
    /// A walk from nothing live, with room for `queries` answers.
    fn new(
        r: &'a ProcessRecords,
        bounds: &'a Boundaries,
        device: &'a DeviceView,
        known: &'a KnownAllocations,
        measured: &'a [Option<u64>],
        queries: usize,
    ) -> Replayer<'a> {
        Replayer {
            r,
            bounds,
            device,
            known,
            measured,
            libraries: Libraries::of(r),
            state: State::default(),
            live: HashMap::with_capacity(1024),
            oop_index: HashMap::new(),
            first_local: HashMap::new(),
            max_local: HashMap::new(),
            pools_seen: HashMap::new(),
            out: Replay {
                states: vec![State::default(); queries],
                timeline: super::timeline_build::Recorder::new(bounds),
                ..Default::default()
            },
        }
    }

    /// Applies one item at its instant `t`.
    fn apply(&mut self, t: u64, item: &Item) {
        let phase = self.bounds.phase_of(t);
        match item {
            Item::Query(i) => self.out.states[*i] = self.state.clone(),
            Item::First => self.out.phases.entry(phase).or_default().first_launches += 1,
            Item::ModuleCode(bytes) => {
                self.state.module_code += bytes;
                self.out.phases.entry(phase).or_default().module_code += bytes;
            }
            Item::Local(i) => self.local_memory(t, *i),
            Item::Pool(p) => self.pool_summary(t, p),
            Item::Mem(m) => self.mem_call(t, m),
        }
    }

    /// A local-memory record: a context's initial reservation, a growth of
    /// the reservation (with its exposure), or a launch that failed to grow it.
    fn local_memory(&mut self, t: u64, i: usize) {
        let r = self.r;
        let l = &r.local[i];
        let failed = l.t_start == 0;
        if !failed && l.total_before == 0 && !self.first_local.contains_key(&l.context_id) {
            self.initial_reservation(i);
            return;
        }
        let cur = self
            .max_local
            .get(&l.context_id)
            .copied()
            .unwrap_or(l.total_before);
        let reserved_grow = l.total_after.saturating_sub(cur);
        if reserved_grow == 0 && !failed {
            return;
        }
        // What the device really gained: the driver's reservation change is
        // not always the difference of CUPTI's totals, so measure it on the
        // device timeline around the launch, minus known allocations there.
        let grow = if failed {
            reserved_grow
        } else {
            self.measured
                .get(i)
                .copied()
                .flatten()
                .unwrap_or(reserved_grow)
        };
        let free = self.growth_exposure(t, i, grow);
        let (phase, step) = (self.bounds.phase_of(t), self.bounds.step_of(t));
        self.out.local_events.push(LocalMemoryEvent {
            t_s: secs(t, self.bounds.start),
            phase,
            step,
            kernel: kernel_display(&l.kernel),
            before: cur,
            after: l.total_after,
            device_growth: grow,
            registers: l.registers,
            per_thread: l.per_thread,
            failed,
            autotune_config: None,
        });
        if failed {
            self.failed_growth(t, i, grow, free);
        } else {
            self.max_local.insert(l.context_id, l.total_after);
            self.state.local_growth += grow;
            self.out.phases.entry(phase).or_default().local_growth += grow;
            self.observe(t);
        }
    }

    /// The reservation every context starts with (default stack), seen at its
    /// first launch: part of the context, though some drivers commit it only
    /// at this launch (what the device gained then, from a few pages on).
    fn initial_reservation(&mut self, i: usize) {
        let r = self.r;
        let l = &r.local[i];
        self.first_local.insert(l.context_id, l.total_after);
        self.max_local.insert(l.context_id, l.total_after);
        self.out.initial_local += l.total_after;
        // Below a few device pages this is sampling noise, not a commit.
        let late = self
            .measured
            .get(i)
            .copied()
            .flatten()
            .filter(|&g| g >= LATE_COMMIT_MIN)
            .unwrap_or(0);
        self.state.context_late += late;
        self.out.context_late += late;
    }

    /// Records how exposed a local-memory growth of `grow` bytes was; returns
    /// the free device memory just before it.
    ///
    /// The device strictly before the request: the last reading before the
    /// launch's measurement window (the growth lands during the launch call,
    /// before CUPTI's kernel start, and a reading after it already holds it),
    /// less what was allocated since. A failed growth never landed: read at
    /// the failure.
    fn growth_exposure(&mut self, t: u64, i: usize, grow: u64) -> Option<u64> {
        let (device, r) = (self.device, self.r);
        let l = &r.local[i];
        let failed = l.t_start == 0;
        let before_t = if failed {
            t
        } else {
            growth_window_start(self.r, i)
        };
        let allocated_since = self
            .known
            .at(t)
            .unwrap_or(0)
            .saturating_sub(self.known.at(before_t).unwrap_or(0));
        let free = device
            .free_at(before_t)
            .map(|f| f.saturating_sub(allocated_since));
        self.out.exposures.push(Exposure {
            t_s: secs(t, self.bounds.start),
            phase: self.bounds.phase_of(t),
            step: self.bounds.step_of(t),
            kind: "local memory".into(),
            source: "local memory".into(),
            what: kernel_display(&l.kernel),
            bytes: grow,
            device_used_before: device
                .cuda_total
                .zip(free)
                .map(|(tot, f)| tot.saturating_sub(f)),
            process_used_before: free.and_then(|f| device.own_from_free(before_t, f)),
            pool_reserved: self.state.pool,
            device_free_before: free,
            headroom_after: free.map(|f| f as i64 - grow as i64),
            succeeded: !failed,
        });
        free
    }

    /// A launch that could not grow the reservation: an out-of-memory
    /// failure, and the old reservation the driver dropped with it.
    fn failed_growth(&mut self, t: u64, i: usize, grow: u64, free: Option<u64>) {
        if let Some(dropped) = released_by_failure(self.r, self.device, self.known, t) {
            // The old reservation is at most the local memory the account
            // holds: the initial reservations and the growths, less what
            // earlier failures dropped. A larger drop came out of something
            // no record names.
            let held = (self.out.initial_local + self.state.local_growth)
                .saturating_sub(self.state.local_released);
            let local = dropped.min(held);
            self.state.local_released += local;
            self.out.local_released += local;
            self.state.released_other += dropped - local;
        }
        let phase = self.bounds.phase_of(t);
        self.out.phases.entry(phase).or_default().failed += 1;
        self.out.failures.push(Failure {
            t,
            api: "kernel launch (local-memory growth)".into(),
            bytes: grow,
            source: "local memory".into(),
            library: String::new(),
            result: 2,
            free_before: free,
            total: self.device.cuda_total,
            local_kernel: Some(kernel_display(&self.r.local[i].kernel)),
            pool: self.state.pool,
            no_context: false,
        });
    }

    /// A stream-ordered pool's summary ([`PoolSeen::apply`]); an out-of-pool
    /// pool that grew is an out-of-pool allocation of the growth.
    fn pool_summary(&mut self, t: u64, p: &PoolUse) {
        let (source, in_pool, _) = self
            .libraries
            .caller(p.library, &mut self.out.libraries_by_source);
        let phase = self.bounds.phase_of(t);
        let seen = self.pools_seen.entry(p.pool_id).or_default();
        let acc = self.out.phases.entry(phase).or_default();
        let change = seen.apply(p, &source, in_pool, &mut self.state, acc);
        if change > 0 && !in_pool {
            self.out.oop_allocs.push(OopAlloc {
                t,
                source,
                bytes: change as u64,
                // A pool keeps its reservation until trimmed; a shrink shows
                // as a later, smaller Pool record.
                freed: None,
            });
        }
    }

    /// A tracked driver call: a failed request, an allocation, a free, a
    /// pinned host allocation or a module load, and its time in the call.
    fn mem_call(&mut self, t: u64, m: &MemCall) {
        let caller = self
            .libraries
            .caller(m.library, &mut self.out.libraries_by_source);
        let phase = self.bounds.phase_of(t);
        let effect = m.api.effect();
        self.out.phases.entry(phase).or_default();
        if m.result != 0 {
            if effect == MemEffect::DeviceAlloc {
                self.failed_request(t, m, &caller);
            }
            return;
        }
        match effect {
            MemEffect::DeviceAlloc => self.allocation(t, m, &caller),
            MemEffect::DeviceFree => self.free(t, m),
            MemEffect::HostAlloc => self.phase(phase).pinned += m.bytes,
            MemEffect::Module if !matches!(m.api, MemApi::ModuleUnload | MemApi::LibraryUnload) => {
                let acc = self.phase(phase);
                acc.module_loads += 1;
                source_entry(&mut acc.by_source, &caller.0).module_loads += 1;
            }
            _ => {}
        }
        let pool = self.state.pool;
        let acc = self.phase(phase);
        // Time spent inside the library's tracked driver calls.
        if let Some(sb) = acc.by_source.get_mut(&caller.0) {
            let secs = m.t_end.saturating_sub(m.t_start) as f64 / 1e9;
            match effect {
                MemEffect::Module => sb.load_seconds += secs,
                MemEffect::DeviceAlloc | MemEffect::DeviceFree => sb.alloc_seconds += secs,
                _ => {}
            }
        }
        acc.pool_peak = acc.pool_peak.max(pool);
        if matches!(effect, MemEffect::DeviceAlloc | MemEffect::DeviceFree) {
            self.observe(t);
        }
    }

    /// The totals of one phase (created on first use).
    fn phase(&mut self, phase: Phase) -> &mut PhaseTotals {
        self.out.phases.entry(phase).or_default()
    }

    /// Notes the running totals on the timeline.
    fn observe(&mut self, t: u64) {
        let s = &self.state;
        self.out.timeline.observe(t, s.pool, s.local_growth, &s.oop);
    }

    /// A device allocation that failed: a failure for forensics, and an
    /// exposure when it was out of pool.
    fn failed_request(&mut self, t: u64, m: &MemCall, (source, in_pool, library): &Caller) {
        let phase = self.bounds.phase_of(t);
        self.phase(phase).failed += 1;
        self.out.failures.push(Failure {
            t,
            api: m.api.name().to_string(),
            bytes: m.bytes,
            source: source.to_string(),
            library: library.to_string(),
            result: m.result,
            free_before: opt(m.free_before),
            total: opt(m.total),
            local_kernel: None,
            pool: self.state.pool,
            no_context: m.device < 0,
        });
        if !in_pool {
            self.request_exposure(m, source, false);
        }
    }

    /// A device allocation: into PyTorch's pool, or out of pool (with its
    /// exposure, an entry for framework joins and a timeline marker).
    fn allocation(&mut self, t: u64, m: &MemCall, (source, in_pool, library): &Caller) {
        self.live
            .insert(m.address, (m.bytes, source.clone(), *in_pool));
        let phase = self.bounds.phase_of(t);
        if *in_pool {
            self.state.pool += m.bytes;
        } else {
            self.request_exposure(m, source, true);
            *self.state.oop.entry(source.clone()).or_default() += m.bytes;
            self.phase(phase).oop_alloc += m.bytes;
            self.oop_index.insert(m.address, self.out.oop_allocs.len());
            self.out.oop_allocs.push(OopAlloc {
                t,
                source: source.clone(),
                bytes: m.bytes,
                freed: None,
            });
            self.out
                .timeline
                .allocation(t, source, library, m.api.name(), m.bytes);
        }
        let sb = source_entry(&mut self.phase(phase).by_source, source);
        sb.calls += 1;
        sb.allocated += m.bytes;
    }

    /// A device free: the allocation at that address stops being live (an
    /// address the replay never saw allocated frees nothing).
    fn free(&mut self, t: u64, m: &MemCall) {
        if let Some(i) = self.oop_index.remove(&m.address) {
            self.out.oop_allocs[i].freed = Some(t);
        }
        let Some((bytes, src, pool)) = self.live.remove(&m.address) else {
            return;
        };
        let phase = self.bounds.phase_of(t);
        let acc = self.out.phases.entry(phase).or_default();
        if pool {
            self.state.pool = self.state.pool.saturating_sub(bytes);
        } else {
            let e = self.state.oop.entry(src.clone()).or_default();
            *e = e.saturating_sub(bytes);
            acc.oop_freed += bytes;
        }
        source_entry(&mut acc.by_source, &src).freed += bytes;
    }

    /// Records how exposed an out-of-pool allocation call was.
    fn request_exposure(&mut self, m: &MemCall, source: &str, succeeded: bool) {
        let t = m.t_end;
        let free = opt(m.free_before);
        let total = opt(m.total);
        self.out.exposures.push(Exposure {
            t_s: secs(t, self.bounds.start),
            phase: self.bounds.phase_of(t),
            step: self.bounds.step_of(t),
            kind: "allocation".into(),
            source: source.to_string(),
            what: m.api.name().to_string(),
            bytes: m.bytes,
            device_used_before: total.zip(free).map(|(t, f)| t.saturating_sub(f)),
            // cuMemGetInfo inside the call, before the driver allocated.
            process_used_before: free.and_then(|f| self.device.own_from_free(m.t_start, f)),
            pool_reserved: self.state.pool,
            device_free_before: free,
            headroom_after: free.map(|f| f as i64 - m.bytes as i64),
            succeeded,
        });
    }
}

/// What the previous summary of a stream-ordered pool said.
#[derive(Default)]
struct PoolSeen {
    allocs: u64,
    alloc_bytes: u64,
    used: Option<u64>,
    reserved: Option<u64>,
    reserved_high: u64,
}

impl PoolSeen {
    /// Applies one pool summary: the pool's reserved bytes (the device memory
    /// it holds, attributed as a whole to its owner's source) replace its
    /// previous value in the running state; the calls and bytes since the
    /// previous summary go to the phase. Returns the change of reserved bytes.
    fn apply(
        &mut self,
        p: &PoolUse,
        source: &SourceName,
        in_pool: bool,
        state: &mut State,
        acc: &mut PhaseTotals,
    ) -> i64 {
        let known = |v: u64| (v != UNKNOWN_BYTES).then_some(v);
        let sb = source_entry(&mut acc.by_source, source);
        // Counters are cumulative: a summary older than the last one adds
        // nothing. Once the probe stops tracing the pool's calls they are
        // UNKNOWN: calls and bytes stop there, the sizes go on.
        if known(p.allocs).is_some() && known(p.alloc_bytes).is_some() {
            let allocated = p.alloc_bytes.saturating_sub(self.alloc_bytes);
            sb.calls += p.allocs.saturating_sub(self.allocs);
            sb.allocated += allocated;
            if let (Some(before), Some(now)) = (self.used, known(p.used)) {
                // Freed = allocated − growth of the bytes in use.
                sb.freed += (allocated as i64 - (now as i64 - before as i64)).max(0) as u64;
            }
            self.allocs = self.allocs.max(p.allocs);
            self.alloc_bytes = self.alloc_bytes.max(p.alloc_bytes);
        }
        self.used = known(p.used).or(self.used);
        let Some(reserved) = known(p.reserved) else {
            return 0;
        };
        let change = reserved as i64 - self.reserved.unwrap_or(0) as i64;
        self.reserved = Some(reserved);
        if in_pool {
            state.pool = state.pool.saturating_add_signed(change);
            // The high-water mark shows a peak between two summaries.
            let high = known(p.reserved_high).unwrap_or(reserved);
            if high > self.reserved_high {
                acc.pool_peak = acc
                    .pool_peak
                    .max(state.pool.saturating_add(high.saturating_sub(reserved)));
            }
            acc.pool_peak = acc.pool_peak.max(state.pool);
        } else {
            let live = state.oop.entry(source.clone()).or_default();
            *live = live.saturating_add_signed(change);
            if change > 0 {
                acc.oop_alloc += change as u64;
            } else {
                acc.oop_freed += change.unsigned_abs();
            }
        }
        self.reserved_high = self.reserved_high.max(known(p.reserved_high).unwrap_or(0));
        change
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn series(points: &[(u64, u64)]) -> Series {
        Series {
            points: points.to_vec(),
        }
    }

    const MIB: u64 = 1 << 20;
    const FREE: u64 = 100_000 * MIB;

    /// A tracked driver call with the device's free memory around it.
    fn call(t: u64, api: MemApi, bytes: u64, free_before: u64, free_after: u64) -> MemCall {
        MemCall {
            t_start: t,
            t_end: t + MS,
            api,
            thread: 1,
            device: 0,
            bytes,
            address: t,
            result: 0,
            library: 0,
            free_before,
            free_after,
            total: 2 * FREE,
        }
    }

    /// Synthetic records (not a recording): a module load at 10 ms whose code
    /// the device shows by the next reading (a pool allocation at 300 ms).
    fn lazy_load() -> ProcessRecords {
        ProcessRecords {
            contexts: vec![prewarm_events::ContextCreated {
                t: 0,
                device: 0,
                context_id: 1,
                pci_bus_id: String::new(),
                free: FREE,
                total: 2 * FREE,
            }],
            mem: vec![
                call(10 * MS, MemApi::LibraryLoadData, 0, FREE, FREE),
                call(
                    300 * MS,
                    MemApi::MemAlloc,
                    64 * MIB,
                    FREE - 70 * MIB,
                    FREE - 134 * MIB,
                ),
            ],
            ..Default::default()
        }
    }

    fn probe_view(r: &ProcessRecords) -> DeviceView {
        let mut points: Vec<(u64, u64)> = r
            .mem
            .iter()
            .flat_map(|m| [(m.t_start, m.free_before), (m.t_end, m.free_after)])
            .collect();
        points.sort();
        DeviceView {
            probe_free: Series { points },
            cuda_total: Some(2 * FREE),
            own_device: true,
            ..Default::default()
        }
    }

    #[test]
    fn growth_after_a_module_load_is_module_code_counted_where_the_device_shows_it() {
        let r = lazy_load();
        let known = known_allocations(&r);
        let grown = module_code_growth(&r, &probe_view(&r), &known, &[]);
        // 70 MiB between the load (11 ms) and the allocation's first reading;
        // the allocation's own 64 MiB is not module code.
        assert_eq!(grown, vec![(300 * MS, 70 * MIB)]);
    }

    #[test]
    fn module_code_is_never_counted_twice_or_guessed() {
        let r = lazy_load();
        let known = known_allocations(&r);
        // Inside a communicator's span: NCCL's inferred figure owns it.
        let span = [(200 * MS, 400 * MS)];
        assert!(module_code_growth(&r, &probe_view(&r), &known, &span).is_empty());
        // A local-memory growth in the stretch is measured on its own.
        let mut with_local = lazy_load();
        with_local.local.push(prewarm_events::LocalMemoryGrowth {
            t_start: 150 * MS,
            t_end: 151 * MS,
            device: 0,
            context_id: 1,
            correlation_id: 1,
            kernel: "spills".into(),
            total_before: 10 * MIB,
            total_after: 80 * MIB,
            per_thread: 0,
            registers: 255,
            grid: [1, 1, 1],
            block: [1, 1, 1],
        });
        let known = known_allocations(&with_local);
        assert!(module_code_growth(&with_local, &probe_view(&with_local), &known, &[]).is_empty());
        // Readings more than a second apart hold too much else to name a cause.
        let mut slow = lazy_load();
        slow.mem[1] = call(
            1_500 * MS,
            MemApi::MemAlloc,
            64 * MIB,
            FREE - 70 * MIB,
            FREE - 134 * MIB,
        );
        let known = known_allocations(&slow);
        assert!(module_code_growth(&slow, &probe_view(&slow), &known, &[]).is_empty());
        // Device-wide readings on a shared GPU include other processes.
        let r = lazy_load();
        let known = known_allocations(&r);
        let shared = DeviceView {
            own_device: false,
            ..probe_view(&r)
        };
        assert!(module_code_growth(&r, &shared, &known, &[]).is_empty());
        // Without a module event in the stretch, growth stays unexplained.
        let mut no_load = lazy_load();
        no_load.mem[0].api = MemApi::MemHostAlloc;
        let known = known_allocations(&no_load);
        assert!(module_code_growth(&no_load, &probe_view(&no_load), &known, &[]).is_empty());
    }

    #[test]
    fn growth_in_a_window_without_allocations_comes_from_the_device_timeline() {
        let device = DeviceView {
            used: series(&[(0, 500), (100 * MS, 600)]),
            ..Default::default()
        };
        let known = live_only(series(&[(10 * MS, 64)]));
        assert_eq!(
            measured_growth(&device, &known, (80 * MS, 110 * MS, 130 * MS), false),
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
        let known = live_only(series(&[(0, 0), (95 * MS, 64)]));
        assert_eq!(
            measured_growth(&device, &known, (92 * MS, 110 * MS, 130 * MS), false),
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
        let known = live_only(series(&[(0, 0), (95 * MS, 64)]));
        assert_eq!(
            measured_growth(&device, &known, (92 * MS, 110 * MS, 130 * MS), false),
            Some(90)
        );
        // An allocation the device does not show yet never makes growth negative.
        let lagging = DeviceView {
            used: series(&[(0, 500)]),
            ..Default::default()
        };
        assert_eq!(
            measured_growth(&lagging, &known, (92 * MS, 110 * MS, 130 * MS), false),
            Some(0)
        );
    }

    #[test]
    fn stream_ordered_pools_count_as_a_whole_at_their_reserved_size() {
        const MIB: u64 = 1 << 20;
        const U: u64 = UNKNOWN_BYTES;
        #[allow(clippy::too_many_arguments)]
        fn pool(
            t: u64,
            id: u32,
            library: u32,
            allocs: u64,
            bytes: u64,
            reserved: u64,
            high: u64,
            used: u64,
        ) -> PoolUse {
            PoolUse {
                t: t * MS,
                pool_id: id,
                device: 0,
                handle: 0x1000 * id as u64,
                library,
                allocs,
                alloc_bytes: bytes,
                frees: allocs,
                failed: 0,
                reserved,
                reserved_high: high,
                used,
            }
        }
        let r = ProcessRecords {
            libraries: [
                (1, "/venv/torch/lib/libc10_cuda.so".to_string()),
                (2, "/x/librmm.so".to_string()),
            ]
            .into_iter()
            .collect(),
            pools: vec![
                pool(10, 1, 1, 100, 1000, 32 * MIB, 32 * MIB, 0),
                // Counters only (no driver reading at that instant).
                pool(20, 1, 1, 200, 2000, U, U, U),
                // Step 1: the pool grew; its high-water mark says it peaked higher in between.
                pool(30, 1, 1, 300, 3000, 64 * MIB, 96 * MIB, 500),
                // Another library's pool: outside PyTorch's pool.
                pool(35, 2, 2, 10, 4 * MIB, 8 * MIB, 8 * MIB, 4 * MIB),
                pool(60, 1, 1, 400, 4000, 64 * MIB, 96 * MIB, 0),
                // The probe stopped tracing the pool's calls: sizes only.
                pool(75, 1, 1, U, U, 128 * MIB, 128 * MIB, 100),
            ],
            ..Default::default()
        };
        let bounds = Boundaries {
            start: 0,
            step1_begin: Some(25 * MS),
            step_ends: vec![40 * MS, 70 * MS],
            end: 80 * MS,
            rule: String::new(),
            died: None,
        };
        let rp = replay(
            &r,
            &bounds,
            &DeviceView::default(),
            &[24 * MS, 40 * MS, 70 * MS],
            &[],
        );
        assert_eq!(rp.states[0].pool, 32 * MIB);
        assert_eq!(rp.states[1].pool, 64 * MIB);
        assert_eq!(rp.states[1].oop.get("rmm"), Some(&(8 * MIB)));
        assert_eq!(rp.states[2].pool, 64 * MIB);
        let torch =
            |phase: Phase| rp.phases[&phase].by_source[super::super::sources::TORCH_POOL].clone();
        assert_eq!(
            (torch(Phase::Setup).calls, torch(Phase::Setup).allocated),
            (200, 2000)
        );
        assert_eq!(
            (torch(Phase::Step1).calls, torch(Phase::Step1).allocated),
            (100, 1000)
        );
        // Freed = allocated − growth of the bytes in use (0 → 500, then 500 → 0).
        assert_eq!(torch(Phase::Step1).freed, 500);
        assert_eq!(torch(Phase::Steady).freed, 1500);
        // After the probe stopped counting: no calls or bytes added, the size tracked.
        assert_eq!(
            (torch(Phase::Steady).calls, torch(Phase::Steady).allocated),
            (100, 1000)
        );
        assert_eq!(known_allocations(&r).at(76 * MS), Some(136 * MIB));
        assert_eq!(rp.phases[&Phase::Setup].pool_peak, 32 * MIB);
        assert_eq!(rp.phases[&Phase::Step1].pool_peak, 96 * MIB);
        assert_eq!(rp.phases[&Phase::Step1].oop_alloc, 8 * MIB);
        assert_eq!(rp.oop_allocs.len(), 1);
        assert_eq!(rp.oop_allocs[0].bytes, 8 * MIB);
        // The device-memory series used to explain growth includes both pools.
        let known = known_allocations(&r);
        assert_eq!(known.at(61 * MS), Some(72 * MIB));
    }

    fn spill(t: u64, before: u64, after: u64) -> prewarm_events::LocalMemoryGrowth {
        prewarm_events::LocalMemoryGrowth {
            t_start: t,
            t_end: t + MS,
            device: 0,
            context_id: 1,
            correlation_id: 1,
            kernel: "spills".into(),
            total_before: before,
            total_after: after,
            per_thread: 0,
            registers: 255,
            grid: [1, 1, 1],
            block: [1, 1, 1],
        }
    }

    const GIB: u64 = 1024 * MIB;

    /// Synthetic samplings (not a recording): a 1 GiB local-memory growth at
    /// a launch whose kernel starts at 500 ms. The driver grows the
    /// reservation in the launch call, so the device timeline may show it
    /// before CUPTI's kernel start (`lands` 488 ms, sampled at 493 ms) or after (505 ms). The
    /// others' memory (`others`: another process on the GPU) is on the
    /// device, not this process's. Returns (headroom after, process used
    /// before, smallest device).
    fn growth_exposure(lands: u64, others: u64) -> (i64, u64, u64) {
        let own_before = 3 * GIB;
        let total = 2 * FREE;
        let r = ProcessRecords {
            contexts: vec![prewarm_events::ContextCreated {
                t: 0,
                device: 0,
                context_id: 1,
                pci_bus_id: String::new(),
                free: total - own_before - others,
                total,
            }],
            local: vec![spill(500 * MS, 10 * MIB, 10 * MIB + GIB)],
            ..Default::default()
        };
        let own = |t: u64| own_before + if t >= lands { GIB } else { 0 };
        let samples: Vec<u64> = (0..100).map(|k| k * 10 * MS + 3 * MS).collect();
        let device = DeviceView {
            used: series(&samples.iter().map(|&t| (t, own(t))).collect::<Vec<_>>()),
            device_used: series(
                &samples
                    .iter()
                    .map(|&t| (t, own(t) + others))
                    .collect::<Vec<_>>(),
            ),
            cuda_total: Some(total),
            probe_free: series(&[(0, total - own_before - others)]),
            own_device: others == 0,
            ..Default::default()
        };
        let bounds = Boundaries {
            start: 0,
            step1_begin: Some(400 * MS),
            step_ends: vec![600 * MS],
            end: 1000 * MS,
            rule: String::new(),
            died: None,
        };
        let rp = replay(&r, &bounds, &device, &[], &[]);
        assert_eq!(rp.local_events.len(), 1);
        assert_eq!(rp.local_events[0].device_growth, GIB);
        let e = &rp.exposures[0];
        let cap = e.process_used_before.unwrap() + e.bytes;
        (
            e.headroom_after.unwrap(),
            e.process_used_before.unwrap(),
            cap,
        )
    }

    #[test]
    fn headroom_is_read_before_the_growth_wherever_the_sampling_puts_it() {
        let free_before = (2 * FREE - 3 * GIB) as i64;
        for lands in [488 * MS, 505 * MS] {
            let (headroom, own, cap) = growth_exposure(lands, 0);
            // Counted once: the device before, less the growth.
            assert_eq!(headroom, free_before - GIB as i64, "lands at {lands}");
            assert_eq!(own, 3 * GIB);
            // Never above what was seen (3 GiB + the 1 GiB that landed).
            assert_eq!(cap, 4 * GIB);
        }
    }

    #[test]
    fn on_a_shared_gpu_the_smallest_device_is_this_process_own_need() {
        let others = 20 * GIB;
        for lands in [488 * MS, 505 * MS] {
            let (headroom, own, cap) = growth_exposure(lands, others);
            // Headroom is the device's: the other process's memory is not free.
            assert_eq!(headroom, (2 * FREE - 3 * GIB - others - GIB) as i64);
            assert_eq!(own, 3 * GIB);
            assert_eq!(cap, 4 * GIB);
        }
    }

    /// The shapes of two H200 recordings, synthetic here: the context's first
    /// launch together with a 90.75 MiB reservation growth, 92 MiB measured
    /// (hf-llama: the growth explains it, the context commits nothing); the
    /// first launch alone with 92 MiB measured (2-GPU FSDP2: a real commit).
    #[test]
    fn the_first_launch_commit_is_what_no_growing_record_explains() {
        let growing = 95_158_272;
        let r = ProcessRecords {
            local: vec![
                spill(100 * MS, 0, 155_713_536),
                spill(101 * MS, 155_713_536, 155_713_536 + growing),
            ],
            ..Default::default()
        };
        let initial: HashSet<usize> = [0].into_iter().collect();
        let shares = split_growth(&r, &[0, 1], 92 * MIB, &initial, true);
        let share = |i: usize| shares.iter().find(|s| s.0 == i).unwrap().1;
        assert_eq!(share(1), growing);
        assert_eq!(share(0), 92 * MIB - growing);
        assert!(share(0) < LATE_COMMIT_MIN);
        let alone = split_growth(&r, &[0], 92 * MIB, &initial, true);
        assert_eq!(alone, vec![(0, 92 * MIB)]);
        // Never more than the reservation: beyond it is someone else's.
        let capped = split_growth(&r, &[1], 200 * MIB, &initial, true);
        assert_eq!(capped, vec![(1, growing)]);
    }

    /// The shape of an H200 recording with `backend:cudaMallocAsync`
    /// (synthetic here): the context's first launch lands while the
    /// stream-ordered pool makes its first growths, and the device grew 72 MiB
    /// beyond what the pool's records say. That cannot be told from the pool's
    /// own growth, so it is no commit; without a pool it is one.
    #[test]
    fn no_first_launch_commit_is_claimed_where_a_pool_grew() {
        let r = ProcessRecords {
            local: vec![spill(100 * MS, 0, 155_713_536)],
            ..Default::default()
        };
        let initial: HashSet<usize> = [0].into_iter().collect();
        assert_eq!(
            split_growth(&r, &[0], 72 * MIB, &initial, false),
            vec![(0, 0)]
        );
        assert_eq!(
            split_growth(&r, &[0], 72 * MIB, &initial, true),
            vec![(0, 72 * MIB)]
        );
        let grown = KnownAllocations {
            live: Series::default(),
            pool_growths: pool_growth_intervals(&[pool_at(95 * MS, 64 * MIB)]),
        };
        assert!(grown.pool_may_grow_in(80 * MS, 130 * MS));
        assert!(!grown.pool_may_grow_in(100 * MS, 130 * MS));
    }

    fn pool_at(t: u64, reserved: u64) -> PoolUse {
        PoolUse {
            t,
            pool_id: 1,
            device: 0,
            handle: 0x1000,
            library: 1,
            allocs: 1,
            alloc_bytes: reserved,
            frees: 0,
            failed: 0,
            reserved,
            reserved_high: reserved,
            used: reserved,
        }
    }

    /// Synthetic records (not a recording): lazy_load's 70 MiB between the
    /// module load and the next reading, with a stream-ordered pool that grew
    /// 32 MiB (recorded at 150 ms) and 70 MiB more (recorded 6 ms after the
    /// reading at 300 ms, so it may have happened before it). The pool's
    /// growth is never module code; a growth recorded too late to fall in the
    /// pair (one writer tick and slack) does not hide the module's code.
    #[test]
    fn a_pool_growth_the_writer_read_after_a_pair_of_readings_is_not_module_code() {
        let mut r = lazy_load();
        r.pools = vec![pool_at(150 * MS, 32 * MIB), pool_at(306 * MS, 102 * MIB)];
        let known = known_allocations(&r);
        assert_eq!(module_code_growth(&r, &probe_view(&r), &known, &[]), vec![]);
        r.pools[1].t = 900 * MS;
        let known = known_allocations(&r);
        let grown = module_code_growth(&r, &probe_view(&r), &known, &[]);
        assert_eq!(grown, vec![(300 * MS, 38 * MIB)]);
    }

    /// A pool's growth can have happened from its previous reading, at most
    /// one writer tick (with slack) before its record; a shrink is no growth.
    #[test]
    fn a_pool_growth_is_placed_between_its_previous_reading_and_its_record() {
        let later = 150 * MS + 2 * POOL_READING_EVERY_MAX_NS;
        let pools = [
            pool_at(150 * MS, 32 * MIB),
            pool_at(160 * MS, 96 * MIB),
            pool_at(later, 128 * MIB),
            pool_at(later + MS, 64 * MIB),
        ];
        assert_eq!(
            pool_growth_intervals(&pools),
            vec![
                (0, 150 * MS, 32 * MIB),
                (150 * MS, 160 * MS, 64 * MIB),
                (later - POOL_READING_EVERY_MAX_NS, later, 32 * MIB),
            ]
        );
    }

    fn live_only(live: Series) -> KnownAllocations {
        KnownAllocations {
            live,
            pool_growths: Vec::new(),
        }
    }

    /// Synthetic samplings (not a recording): the context comes up at 0 ms
    /// holding 500 MiB, and NVML shows it only from its 30 ms sample. The
    /// context's first launch at 10 ms is measured on the probe's own
    /// readings (the context's, and one after the launch), so the lag is
    /// never read as a first-launch commit; a real commit still is.
    #[test]
    fn the_first_launch_commit_is_measured_on_the_probe_readings() {
        let commit_of = |drop: u64| {
            let total = 2 * FREE;
            let after = total - 500 * MIB - drop;
            let r = ProcessRecords {
                contexts: vec![prewarm_events::ContextCreated {
                    t: 0,
                    device: 0,
                    context_id: 1,
                    pci_bus_id: String::new(),
                    free: total - 500 * MIB,
                    total,
                }],
                mem: vec![call(12 * MS, MemApi::ModuleLoadData, 0, after, after)],
                local: vec![spill(10 * MS, 0, 148 * MIB)],
                ..Default::default()
            };
            let mut device = probe_view(&r);
            device.probe_free.points.insert(0, (0, total - 500 * MIB));
            device.used = series(&[(0, 0), (30 * MS, 500 * MIB + drop)]);
            device.device_used = device.used.clone();
            let bounds = Boundaries {
                start: 0,
                step1_begin: Some(400 * MS),
                step_ends: vec![600 * MS],
                end: 1000 * MS,
                rule: String::new(),
                died: None,
            };
            replay(&r, &bounds, &device, &[], &[]).context_late
        };
        assert_eq!(commit_of(0), 0);
        assert_eq!(commit_of(92 * MIB), 92 * MIB);
    }

    // ---- The replay's stages, each on its own.

    /// Setup [0, 100 ms), step 1 [100, 200 ms], steady to 300 ms.
    fn stage_bounds() -> Boundaries {
        Boundaries {
            start: 0,
            step1_begin: Some(100 * MS),
            step_ends: vec![200 * MS, 300 * MS],
            end: 400 * MS,
            rule: "test".into(),
            died: None,
        }
    }

    /// Library 1 is PyTorch's pool, library 2 NCCL.
    fn stage_records() -> ProcessRecords {
        ProcessRecords {
            libraries: HashMap::from([
                (1, "/venv/torch/lib/libc10_cuda.so".to_string()),
                (2, "/usr/lib/libnccl.so.2".to_string()),
            ]),
            ..Default::default()
        }
    }

    fn from(mut m: MemCall, library: u32, address: u64) -> MemCall {
        m.library = library;
        m.address = address;
        m
    }

    fn item_label(item: &Item) -> String {
        match item {
            Item::Mem(m) => format!("mem@{}", m.t_end),
            Item::Pool(p) => format!("pool@{}", p.t),
            Item::Local(i) => format!("local{i}"),
            Item::First => "first".into(),
            Item::ModuleCode(b) => format!("code{b}"),
            Item::Query(i) => format!("query{i}"),
        }
    }

    #[test]
    fn items_come_in_time_order_with_queries_after_the_records_of_their_instant() {
        let mut r = ProcessRecords {
            mem: vec![call(9, MemApi::MemAlloc, 1, FREE, FREE)],
            pools: vec![PoolUse {
                t: 10,
                pool_id: 1,
                device: 0,
                handle: 0,
                library: 0,
                allocs: 0,
                alloc_bytes: 0,
                frees: 0,
                failed: 0,
                reserved: 0,
                reserved_high: 0,
                used: 0,
            }],
            local: vec![spill(5, 0, 1), spill(0, 1, 2)],
            first_launches: vec![prewarm_events::KernelFirstLaunch {
                t_start: 10,
                t_end: 11,
                device: 0,
                context_id: 1,
                kernel: "k".into(),
                local_total: 0,
            }],
            last_t: 50,
            ..Default::default()
        };
        r.mem[0].t_end = 10;
        let labels = |r: &ProcessRecords| -> Vec<String> {
            replay_items(r, &[10, 0], &[(10, 7)])
                .iter()
                .map(|(_, _, i)| item_label(i))
                .collect()
        };
        // The failed launch (no timestamps) goes to the last event.
        assert_eq!(
            labels(&r),
            [
                "query1", "local0", "mem@10", "pool@10", "first", "code7", "query0", "local1"
            ]
        );
        // ...or to the exception the process died with.
        r.shim.push(crate::load::shim::ShimEvent::Exception {
            t: 1,
            kind: String::new(),
            message: String::new(),
            where_: Vec::new(),
            thread: None,
            pool_reserved: None,
            pool_allocated: None,
        });
        assert_eq!(labels(&r)[..2], ["query1", "local1"]);
    }

    #[test]
    fn each_library_is_named_once_and_an_unnamed_one_is_an_unknown_caller() {
        let r = stage_records();
        let mut libs = Libraries::of(&r);
        let mut by_source = BTreeMap::new();
        let (source, in_pool, file) = libs.caller(2, &mut by_source);
        assert_eq!((&*source, in_pool, &*file), ("nccl", false, "libnccl.so.2"));
        libs.caller(2, &mut by_source);
        let (pool, in_pool, _) = libs.caller(1, &mut by_source);
        assert_eq!((&*pool, in_pool), (super::super::sources::TORCH_POOL, true));
        let (unknown, in_pool, file) = libs.caller(99, &mut by_source);
        assert_eq!((&*unknown, in_pool, &*file), (UNKNOWN, false, ""));
        assert_eq!(by_source["nccl"], ["libnccl.so.2"], "noted once");
        assert!(!by_source.contains_key(UNKNOWN), "no file to note");
    }

    #[test]
    fn allocations_and_frees_move_the_pool_and_the_out_of_pool_sources() {
        let r = stage_records();
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let mut w = Replayer::new(&r, &b, &device, &known, &[], 1);
        let pool_alloc = from(call(10 * MS, MemApi::MemAlloc, 100, 900, 800), 1, 0xa);
        let nccl_alloc = from(call(110 * MS, MemApi::MemAlloc, 30, 800, 770), 2, 0xb);
        w.mem_call(pool_alloc.t_end, &pool_alloc);
        w.mem_call(nccl_alloc.t_end, &nccl_alloc);
        w.apply(150 * MS, &Item::Query(0));
        let nccl_free = from(call(210 * MS, MemApi::MemFree, 0, 770, 800), 2, 0xb);
        let stray_free = from(call(220 * MS, MemApi::MemFree, 0, 800, 800), 2, 0xdead);
        w.mem_call(nccl_free.t_end, &nccl_free);
        w.mem_call(stray_free.t_end, &stray_free);
        let held = &w.out.states[0];
        assert_eq!((held.pool, held.oop_total()), (100, 30));
        assert_eq!((w.state.pool, w.state.oop_total()), (100, 0));
        let step1 = &w.out.phases[&Phase::Step1];
        assert_eq!((step1.oop_alloc, step1.by_source["nccl"].calls), (30, 1));
        assert_eq!(w.out.phases[&Phase::Steady].oop_freed, 30);
        assert_eq!(w.out.phases[&Phase::Steady].by_source["nccl"].freed, 30);
        assert_eq!(w.out.phases[&Phase::Setup].pool_peak, 100);
        // Only the out-of-pool request is exposed, and kept for joins.
        assert_eq!(w.out.exposures.len(), 1);
        let e = &w.out.exposures[0];
        assert_eq!(
            (e.source.as_str(), e.bytes, e.headroom_after),
            ("nccl", 30, Some(770))
        );
        assert_eq!(e.device_used_before, Some(2 * FREE - 800));
        assert_eq!(w.out.oop_allocs.len(), 1);
        assert_eq!(w.out.oop_allocs[0].freed, Some(nccl_free.t_end));
    }

    #[test]
    fn a_failed_allocation_is_a_failure_and_an_exposure_but_holds_nothing() {
        let r = stage_records();
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
        let mut oom = from(call(120 * MS, MemApi::MemAlloc, 500, 200, 200), 2, 0xc);
        oom.result = 2;
        w.mem_call(oom.t_end, &oom);
        let mut in_pool = from(call(130 * MS, MemApi::MemAlloc, 500, 200, 200), 1, 0xd);
        in_pool.result = 2;
        w.mem_call(in_pool.t_end, &in_pool);
        assert_eq!(w.state, State::default());
        assert_eq!(w.out.phases[&Phase::Step1].failed, 2);
        let f = &w.out.failures[0];
        assert_eq!(
            (f.source.as_str(), f.library.as_str(), f.result),
            ("nccl", "libnccl.so.2", 2)
        );
        assert_eq!((f.free_before, f.bytes), (Some(200), 500));
        assert_eq!(
            w.out.exposures.len(),
            1,
            "the pool's own request is torch's to report"
        );
        assert_eq!(w.out.exposures[0].headroom_after, Some(-300));
        assert!(!w.out.exposures[0].succeeded);
    }

    #[test]
    fn pinned_host_memory_and_module_loads_count_with_the_time_in_their_calls() {
        let r = stage_records();
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
        let host = from(call(10 * MS, MemApi::MemHostAlloc, 64, FREE, FREE), 2, 0x1);
        let load = from(call(20 * MS, MemApi::ModuleLoadData, 0, FREE, FREE), 2, 0x2);
        let unload = from(call(30 * MS, MemApi::ModuleUnload, 0, FREE, FREE), 2, 0x3);
        for m in [&host, &load, &unload] {
            w.mem_call(m.t_end, m);
        }
        let setup = &w.out.phases[&Phase::Setup];
        assert_eq!((setup.pinned, setup.module_loads), (64, 1));
        let nccl = &setup.by_source["nccl"];
        assert_eq!(nccl.module_loads, 1);
        assert!(
            (nccl.load_seconds - 0.002).abs() < 1e-12,
            "{}",
            nccl.load_seconds
        );
        assert_eq!(nccl.alloc_seconds, 0.0);
        assert_eq!(w.state, State::default());
    }

    #[test]
    fn a_stream_ordered_pool_out_of_pool_that_grew_is_an_allocation_for_joins() {
        let r = stage_records();
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
        let summary = |t: u64, library: u32, reserved: u64| PoolUse {
            pool_id: library,
            handle: 0,
            library,
            ..pool_at(t, reserved)
        };
        w.pool_summary(110 * MS, &summary(110 * MS, 2, 40));
        w.pool_summary(120 * MS, &summary(120 * MS, 2, 10));
        w.pool_summary(130 * MS, &summary(130 * MS, 1, 70));
        assert_eq!((w.state.pool, w.state.oop_total()), (70, 10));
        let joins: Vec<(u64, &str, u64)> = w
            .out
            .oop_allocs
            .iter()
            .map(|a| (a.t, &*a.source, a.bytes))
            .collect();
        assert_eq!(joins, [(110 * MS, "nccl", 40)], "a shrink is no allocation");
        assert_eq!(w.out.libraries_by_source["nccl"], ["libnccl.so.2"]);
    }

    #[test]
    fn a_contexts_first_reservation_is_the_context_and_a_late_commit_counts_from_a_few_pages() {
        let r = ProcessRecords {
            local: vec![spill(10 * MS, 0, 3 * MIB), spill(20 * MS, 0, MIB)],
            ..Default::default()
        };
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let measured = [Some(6 * MIB), Some(9 * MIB)];
        let mut w = Replayer::new(&r, &b, &device, &known, &measured, 0);
        w.local_memory(10 * MS, 0);
        assert_eq!(
            (w.out.initial_local, w.out.context_late),
            (3 * MIB, 6 * MIB)
        );
        assert_eq!(w.state.context_late, 6 * MIB);
        // The same context again from 0: no second initial reservation, and
        // nothing grew beyond the largest so far.
        w.local_memory(20 * MS, 1);
        assert_eq!(w.out.initial_local, 3 * MIB);
        assert!(w.out.local_events.is_empty() && w.out.exposures.is_empty());
        // Below LATE_COMMIT_MIN the device's gain is sampling noise.
        let small = [Some(LATE_COMMIT_MIN - 1)];
        let mut w = Replayer::new(&r, &b, &device, &known, &small, 0);
        w.local_memory(10 * MS, 0);
        assert_eq!((w.out.initial_local, w.out.context_late), (3 * MIB, 0));
    }

    #[test]
    fn a_growth_counts_what_the_device_gained_and_is_exposed_before_its_window() {
        let r = ProcessRecords {
            local: vec![
                spill(10 * MS, 0, 2 * MIB),
                spill(150 * MS, 2 * MIB, 10 * MIB),
            ],
            ..Default::default()
        };
        let b = stage_bounds();
        let device = DeviceView {
            probe_free: series(&[(0, 1_000 * MIB), (140 * MS, 900 * MIB)]),
            cuda_total: Some(2_000 * MIB),
            own_device: true,
            ..Default::default()
        };
        // 5 MiB allocated between the reading before the window and the launch.
        let known = live_only(series(&[(0, 0), (131 * MS, 5 * MIB)]));
        let measured = [None, Some(12 * MIB)];
        let mut w = Replayer::new(&r, &b, &device, &known, &measured, 0);
        w.local_memory(10 * MS, 0);
        w.local_memory(150 * MS, 1);
        let ev = &w.out.local_events[0];
        assert_eq!(
            (ev.before, ev.after, ev.device_growth),
            (2 * MIB, 10 * MIB, 12 * MIB)
        );
        assert_eq!(
            (ev.phase, ev.step, ev.failed),
            (Phase::Step1, Some(1), false)
        );
        assert_eq!(w.state.local_growth, 12 * MIB);
        assert_eq!(w.out.phases[&Phase::Step1].local_growth, 12 * MIB);
        // Read at the window's start (130 ms): 1000 MiB free, less 5 MiB since.
        let e = &w.out.exposures[0];
        assert_eq!(e.device_free_before, Some(995 * MIB));
        assert_eq!(e.headroom_after, Some((995 - 12) as i64 * MIB as i64));
        assert_eq!(e.device_used_before, Some(1_005 * MIB));
        assert!(w.out.failures.is_empty());
    }

    #[test]
    fn a_launch_that_could_not_grow_the_reservation_is_an_oom_and_drops_the_old_one() {
        let mut failed = spill(0, 2 * MIB, 50 * MIB);
        failed.t_end = 0;
        let r = ProcessRecords {
            local: vec![spill(10 * MS, 0, 2 * MIB), failed],
            mem: vec![call(100 * MS, MemApi::MemAlloc, 0, FREE, FREE)],
            ..Default::default()
        };
        let b = stage_bounds();
        // The device held 300 MiB of this process's own until the failure at
        // 150 ms, then 200 MiB: 100 MiB gone, of which the old reservation
        // can be 2 MiB (all the local memory held); the other 98 MiB came
        // out of something no record names.
        let device = DeviceView {
            used: series(&[(0, 300 * MIB), (150 * MS, 200 * MIB)]),
            probe_free: series(&[(0, 40 * MIB)]),
            cuda_total: Some(2_000 * MIB),
            ..Default::default()
        };
        let known = live_only(Series::default());
        let mut w = Replayer::new(&r, &b, &device, &known, &[None, None], 0);
        w.local_memory(10 * MS, 0);
        w.local_memory(150 * MS, 1);
        assert_eq!(w.state.local_growth, 0, "a failed growth never landed");
        assert_eq!(
            (w.state.local_released, w.out.local_released),
            (2 * MIB, 2 * MIB)
        );
        assert_eq!(w.state.released_other, 98 * MIB);
        let f = &w.out.failures[0];
        assert_eq!(
            (f.bytes, f.result, f.free_before),
            (48 * MIB, 2, Some(40 * MIB))
        );
        assert_eq!(f.local_kernel.as_deref(), Some("spills"));
        assert_eq!(w.out.phases[&Phase::Step1].failed, 1);
        assert!(w.out.local_events[0].failed && !w.out.exposures[0].succeeded);
    }

    #[test]
    fn queries_first_launches_and_module_code_apply_at_their_instant() {
        let r = ProcessRecords::default();
        let b = stage_bounds();
        let (device, known) = (DeviceView::default(), live_only(Series::default()));
        let mut w = Replayer::new(&r, &b, &device, &known, &[], 2);
        w.apply(10 * MS, &Item::First);
        w.apply(120 * MS, &Item::ModuleCode(8));
        w.apply(130 * MS, &Item::Query(1));
        w.apply(140 * MS, &Item::ModuleCode(1));
        assert_eq!(w.out.phases[&Phase::Setup].first_launches, 1);
        assert_eq!(w.out.phases[&Phase::Step1].module_code, 9);
        assert_eq!(
            (w.out.states[0].module_code, w.out.states[1].module_code),
            (0, 8)
        );
    }
}
