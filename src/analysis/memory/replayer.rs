//! The replay's walk: every record and query in time order, applied one by
//! one to the running state.

use super::device_growth::failed_launch_time;
use super::device_growth::{
    FIRST_MODULE_MIN, KnownAllocations, growth_window_start, released_by_failure,
};
use super::state::*;
use crate::analysis::account::{Exposure, LocalMemoryEvent};
use crate::analysis::device::DeviceView;
use crate::analysis::names::kernel_display;
use crate::analysis::phases::secs;
use crate::analysis::phases::{Boundaries, Phase};
use crate::analysis::sources::{SourceName, UNKNOWN, classify};
use crate::load::records::ProcessRecords;
use prewarm_events::{MemApi, MemCall, MemEffect, PoolUse, UNKNOWN_BYTES, UntracedSpan};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

/// One thing the replay walks over, at its instant.
pub(super) enum Item<'a> {
    Mem(&'a MemCall),
    Pool(&'a PoolUse),
    Local(usize),
    First,
    ModuleCode(u64),
    Untraced(&'a UntracedSpan),
    Query(usize),
}

/// Every record the replay walks and every query, in time order; at one
/// instant, records before queries (a query sees what happened then) and
/// records in this order: calls, pool summaries, local-memory records, first
/// launches, module-code growth, untraced stretches (at their end, where
/// the device's reading shows what they changed). A failed launch (no timestamps) is placed
/// at [`failed_launch_time`].
pub(super) fn replay_items<'a>(
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
    for u in &r.untraced {
        items.push((u.t_end, 0, Item::Untraced(u)));
    }
    items.sort_by_key(|x| (x.0, x.1));
    items
}

/// Who called: the source name, whether it is PyTorch's pool, and the
/// library's file name.
pub(super) type Caller = (SourceName, bool, SourceName);

/// The calling libraries, each classified once (not per event), and which
/// of them the replay has met.
pub(super) struct Libraries {
    classified: HashMap<u32, Caller>,
    unknown: Caller,
    seen: HashSet<u32>,
}

impl Libraries {
    pub(super) fn of(r: &ProcessRecords) -> Libraries {
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
    pub(super) fn caller(
        &mut self,
        id: u32,
        by_source: &mut BTreeMap<String, Vec<String>>,
    ) -> Caller {
        let caller = self.classified.get(&id).unwrap_or(&self.unknown).clone();
        if self.seen.insert(id) {
            note_library(by_source, &caller.0, &caller.2);
        }
        caller
    }
}

/// The replay's walk: the running state and everything gathered so far.
pub(super) struct Replayer<'a> {
    r: &'a ProcessRecords,
    bounds: &'a Boundaries,
    device: &'a DeviceView,
    /// Pool plus out-of-pool bytes after each call ([`known_allocations`]).
    known: &'a KnownAllocations,
    /// Measured device growth per local-memory record ([`measured_growths`]).
    measured: &'a [Option<u64>],
    libraries: Libraries,
    pub(super) state: State,
    /// Live allocations by address: (bytes, source, in PyTorch's pool).
    live: HashMap<u64, (u64, SourceName, bool)>,
    /// Every address an allocation produced, live or freed since: a free
    /// of one of them (NCCL releases a handle twice) is never memory an
    /// untraced stretch allocated.
    ever_allocated: HashSet<u64>,
    /// Where each live out-of-pool allocation is in `out.oop_allocs`.
    oop_index: HashMap<u64, usize>,
    /// Per context, its initial local-memory reservation once seen.
    first_local: HashMap<u32, u64>,
    /// Per context, the largest reservation so far.
    max_local: HashMap<u32, u64>,
    pools_seen: HashMap<u32, PoolSeen>,
    pub(super) out: Replay,
}

impl<'a> Replayer<'a> {
    /// A walk from nothing live, with room for `queries` answers.
    pub(super) fn new(
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
            ever_allocated: HashSet::new(),
            oop_index: HashMap::new(),
            first_local: HashMap::new(),
            max_local: HashMap::new(),
            pools_seen: HashMap::new(),
            out: Replay {
                states: vec![State::default(); queries],
                timeline: crate::analysis::timeline_build::Recorder::new(bounds),
                ..Default::default()
            },
        }
    }

    /// Applies one item at its instant `t`.
    pub(super) fn apply(&mut self, t: u64, item: &Item) {
        let phase = self.bounds.phase_of(t);
        match item {
            Item::Query(i) => self.out.states[*i] = self.state.clone(),
            Item::First => self.out.phases.entry(phase).or_default().first_launches += 1,
            Item::ModuleCode(bytes) => self.module_code(t, *bytes),
            Item::Untraced(u) => self.untraced(u),
            Item::Local(i) => self.local_memory(t, *i),
            Item::Pool(p) => self.pool_summary(t, p),
            Item::Mem(m) => self.mem_call(t, m),
        }
    }

    /// A local-memory record: a context's initial reservation, a growth of
    /// the reservation (with its exposure), or a launch that failed to grow it.
    pub(super) fn local_memory(&mut self, t: u64, i: usize) {
        let r = self.r;
        let l = &r.local[i];
        let failed = l.t_start == 0;
        if !failed && l.total_before == 0 && !self.first_local.contains_key(&l.context_id) {
            self.initial_reservation(t, i);
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
        self.growth(t, i, cur, grow);
    }

    /// One growth of a context's reservation from `before` to the record's
    /// total, `grow` bytes on the device (or a launch that failed to grow
    /// it): its event, its exposure, and the account's part.
    fn growth(&mut self, t: u64, i: usize, before: u64, grow: u64) {
        let l = &self.r.local[i];
        let failed = l.t_start == 0;
        let free = self.growth_exposure(t, i, grow);
        let (phase, step) = (self.bounds.phase_of(t), self.bounds.step_of(t));
        self.out.local_events.push(LocalMemoryEvent {
            t_s: secs(t, self.bounds.start),
            phase,
            step,
            kernel: kernel_display(&l.kernel),
            before,
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

    /// A context's first kernel record: CUPTI reports the reservation after
    /// the launch, not the one the context came up with. What the device
    /// gains in that launch's window (from a few device pages on), when no
    /// more than CUPTI's total, is the reservation growing for the module
    /// loaded for it; the rest of the total was on the device with the
    /// context, part of its own figure. Contexts of one GPU model start with
    /// one reservation whatever the script (on an H100 and an H200, 148.5
    /// MiB), where the first record's total is 148.5 MiB in one script and
    /// 239.2 MiB in another: the first launch of a kernel of a newly loaded
    /// module grows it, as a later one does (docs/accounting.md, *What the
    /// first-use experiment showed*). A context never starts from an empty
    /// reservation, so a gain as large as the total (the measurement caps
    /// it there) holds module code the reservation cannot (with
    /// `CUDA_MODULE_LOADING=EAGER`, every module's): the two are not told
    /// apart there, and the gain is module code, the total the context's.
    fn initial_reservation(&mut self, t: u64, i: usize) {
        let (context, total) = (self.r.local[i].context_id, self.r.local[i].total_after);
        // Below a few device pages this is sampling noise.
        let gained = self
            .measured
            .get(i)
            .copied()
            .flatten()
            .filter(|&g| g >= FIRST_MODULE_MIN)
            .unwrap_or(0);
        let grown = if gained < total { gained } else { 0 };
        let initial = total - grown;
        self.first_local.insert(context, initial);
        self.out.initial_local += initial;
        if grown > 0 {
            self.growth(t, i, initial, grown);
        }
        self.max_local.insert(context, total);
        self.module_code(t, gained - grown);
    }

    /// Module code the device gained at `t` (inferred or measured).
    fn module_code(&mut self, t: u64, bytes: u64) {
        let phase = self.bounds.phase_of(t);
        self.state.module_code += bytes;
        self.out.phases.entry(phase).or_default().module_code += bytes;
    }

    /// A stretch the probe traced nothing in: what the device's free memory
    /// says changed across it, less what the records there show (a pool's
    /// reading, a call traced as the probe attached again) and less the
    /// other processes' own change on a shared GPU. Both readings are the
    /// probe's own cuMemGetInfo; without either, the change stays in the
    /// remainder.
    fn untraced(&mut self, u: &UntracedSpan) {
        if u.free_before == UNKNOWN_BYTES || u.free_after == UNKNOWN_BYTES {
            return;
        }
        let device = u.free_before as i64 - u.free_after as i64;
        let recorded = self.known.change(u.t_start, u.t_end);
        let others = self.device.others_change(u.t_start, u.t_end);
        self.state.untraced += device - recorded - others;
    }

    /// Records how exposed a local-memory growth of `grow` bytes was; returns
    /// the free device memory just before it.
    ///
    /// The device strictly before the request: the last reading before the
    /// launch's measurement window (the growth lands during the launch call,
    /// before CUPTI's kernel start, and a reading after it already holds it),
    /// less what was allocated since. A failed growth never landed: read at
    /// the failure.
    pub(super) fn growth_exposure(&mut self, t: u64, i: usize, grow: u64) -> Option<u64> {
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
    pub(super) fn pool_summary(&mut self, t: u64, p: &PoolUse) {
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
    pub(super) fn mem_call(&mut self, t: u64, m: &MemCall) {
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
    pub(super) fn phase(&mut self, phase: Phase) -> &mut PhaseTotals {
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
    pub(super) fn allocation(&mut self, t: u64, m: &MemCall, (source, in_pool, library): &Caller) {
        self.live
            .insert(m.address, (m.bytes, source.clone(), *in_pool));
        self.ever_allocated.insert(m.address);
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
    pub(super) fn free(&mut self, t: u64, m: &MemCall) {
        if let Some(i) = self.oop_index.remove(&m.address) {
            self.out.oop_allocs[i].freed = Some(t);
        }
        let Some((bytes, src, pool)) = self.live.remove(&m.address) else {
            self.free_of_untraced(m);
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

    /// A free of an address the replay never saw allocated (not one freed
    /// before: NCCL releases a handle twice), while an untraced stretch
    /// holds bytes: what may have been allocated there.
    /// The device's reading across the free says what it gave back; that
    /// much (at most what the stretch holds) leaves the stretch's part, so
    /// the remainder does not drop below zero by it.
    fn free_of_untraced(&mut self, m: &MemCall) {
        if self.state.untraced <= 0
            || m.free_before == UNKNOWN_BYTES
            || m.free_after == UNKNOWN_BYTES
            || self.ever_allocated.contains(&m.address)
        {
            return;
        }
        let given_back = m.free_after as i64 - m.free_before as i64;
        if given_back > 0 {
            self.state.untraced -= given_back.min(self.state.untraced);
        }
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
    pub(super) fn apply(
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
