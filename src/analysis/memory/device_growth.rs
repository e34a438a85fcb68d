//! What explains the device's memory growth besides allocation calls: the
//! bytes allocation calls account for at each instant, the growth measured
//! on the device around each local-memory record, and module code loaded
//! lazily.

use crate::analysis::device::{DeviceView, Series};
use crate::analysis::phases;
use crate::load::records::ProcessRecords;
use prewarm_events::{MemApi, MemCall, MemEffect, PoolUse, UNKNOWN_BYTES};
use std::collections::{HashMap, HashSet};

/// Where a failed kernel launch (zero timestamps) is placed: when the process
/// died (its exception), else at its last event.
pub fn failed_launch_time(r: &ProcessRecords) -> u64 {
    phases::died_at(&r.shim).unwrap_or(r.last_t)
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
pub(super) const POOL_READING_EVERY_MAX_NS: u64 = 200_000_000;

/// What allocation calls explain of the device's memory, for the inferences
/// (module code, the first module at a context's first launch, a local-memory growth measured on the
/// device) that take device growth "no allocation explains".
///
/// A stream-ordered pool grows at an allocation call the probe only counts;
/// the writer thread reads the pool's new size up to one tick later, while
/// the probe's free-memory readings show the growth at once. So each pool
/// growth is known to have happened somewhere after the pool's previous
/// reading (at most one tick before its record) and no later than its record.
/// Module code counts every growth a pair of readings may hold as explained,
/// and no first module is claimed in a window where a pool grew: seen
/// on the H200 with `backend:cudaMallocAsync`, the pool's first growth read as
/// a 72 MiB commit and later growth as 32 MiB of module code, a remainder of
/// -35 MiB. Such an inference may under-count, which leaves bytes in the
/// remainder, never below zero.
pub(super) struct KnownAllocations {
    /// Pool plus out-of-pool bytes live after each allocation call and each
    /// recorded change of a pool's size, at the record.
    pub(super) live: Series,
    /// Each pool growth: (earliest it can have happened, its record, bytes).
    pub(super) pool_growths: Vec<(u64, u64, u64)>,
}

impl KnownAllocations {
    /// Bytes known live at `t` (pool changes at their records).
    pub(super) fn at(&self, t: u64) -> Option<u64> {
        self.live.at(t)
    }

    /// The change of live bytes over (t0, t1], pool changes at their records.
    pub(super) fn change(&self, t0: u64, t1: u64) -> i64 {
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
    pub(super) fn pool_may_grow_in(&self, a: u64, b: u64) -> bool {
        self.pool_growths
            .iter()
            .any(|&(from, record, _)| from <= b && a <= record)
    }
}

/// When each pool growth can have happened: after the pool's previous reading,
/// at most one writer tick (with slack) before its record.
pub(super) fn pool_growth_intervals(pools: &[PoolUse]) -> Vec<(u64, u64, u64)> {
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

pub(super) fn known_allocations(r: &ProcessRecords) -> KnownAllocations {
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

/// Smallest growth at a context's first launch counted as the first
/// module's code (device pages are 2 MiB).
pub(super) const FIRST_MODULE_MIN: u64 = 4 << 20;

/// Window around a launch inside which its reservation growth shows on the device.
const GROWTH_WINDOW_NS: u64 = 20_000_000;

/// Longest wait for the probe's next free-memory reading after a launch.
const PROBE_READING_WITHIN_NS: u64 = 2_000_000_000;

/// Where the device is read "before" a local-memory record's growth: the
/// start of its measurement window, never before its context came up.
pub(super) fn growth_window_start(r: &ProcessRecords, i: usize) -> u64 {
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
/// (the context itself, an allocation) would read as growth.
pub(super) fn measured_growth(
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

/// How late NVML's per-process samples may show another process's change
/// (the sampler writes each process when it changes, and at least every
/// ~110 ms on the H100 recordings): on a shared GPU a pair of device-wide
/// readings counts only when no other process changed this much around it.
const NEIGHBOURS_LAG_NS: u64 = 250_000_000;

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
/// own, as is the first module at a context's first launch), an `exclude` window (the
/// NCCL communicator spans, whose growth without allocation calls is NCCL's
/// own inferred figure) or an untraced stretch (its own part) are left out,
/// so nothing is counted twice. On a
/// shared GPU only pairs around which no other process's NVML figure
/// changed (the readings are device-wide). Returns (when,
/// bytes): when = the reading that first shows the growth (the device
/// timeline the account is checked against shows it no earlier).
pub(super) fn module_code_growth(
    r: &ProcessRecords,
    device: &DeviceView,
    known: &KnownAllocations,
    exclude: &[(u64, u64)],
) -> Vec<(u64, u64)> {
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
        .chain(r.untraced.iter().map(|u| (u.t_start, u.t_end)))
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
        // Alone on the GPU the others are always quiet.
        let quiet =
            device.others_quiet(t0.saturating_sub(NEIGHBOURS_LAG_NS), t1 + NEIGHBOURS_LAG_NS);
        if !quiet {
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
pub(super) fn released_by_failure(
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
/// beyond them; a context's first record (`initial`) gets only what they
/// leave, up to its total: device growth at the first launch that no other
/// record in the window explains (the reservation growing there, or the
/// first module's code: the replay tells them apart).
pub(super) fn split_growth(
    r: &ProcessRecords,
    cluster: &[usize],
    total: u64,
    initial: &HashSet<usize>,
    first_module_known: bool,
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
    let mut left = if first_module_known {
        total - to_growing
    } else {
        0
    };
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
pub(super) fn measured_growths(
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
    // every context starts with, already on the device with the context.
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
            // The pool's first growth cannot be told from the first module.
            let first_module_known = !known.pool_may_grow_in(a, b);
            for (i, share) in split_growth(r, cluster, total, &initial, first_module_known) {
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
