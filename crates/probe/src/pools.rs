//! Stream-ordered allocations, counted per memory pool instead of recorded
//! one by one, and only until every pool in use is attributed.
//!
//! With PyTorch's `backend:cudaMallocAsync` (and RAPIDS, and anything using
//! `cudaMallocAsync`), every tensor allocation and free is a driver call the
//! probe sees: thousands per training step. Even a callback that only bumps a
//! counter costs ~1.4 us per call on an H200, nearly all of it CUPTI's own
//! dispatch of the enter and exit callbacks. So the rule is:
//!
//! - while traced, an allocation adds to its pool's counters (calls, bytes,
//!   failures), a free to its context's device pool (the free call does not
//!   name a pool); no cuMemGetInfo, no stack walk, no record per call;
//! - a pool is attributed as a whole to its owner: the library that created
//!   it (`cuMemPoolCreate`, traced always: rare) or, for a device's pool, the
//!   library of its first allocation (one stack walk per pool). One allocation
//!   in 1024 walks the stack again; another library found using the pool gets
//!   one notice and the pool stays with its first owner;
//! - once a whole training step used only pools already seen (the shim says
//!   where steps end: [`Pools::step_ended`]), or [`DEFAULT_QUIET_CALLS`]
//!   stream-ordered calls in a row did (for a process without step ends;
//!   `PREWARM_DOCTOR_POOL_CALLS=N` keeps only this count, with N calls,
//!   `all` never stops), the writer thread switches the stream-ordered
//!   callbacks off with `cuptiEnableCallback(0, ...)`: from then on these
//!   calls cost the probe nothing, their counts are unknown (`UNKNOWN` in the
//!   records) and failed pool allocations are not seen;
//! - the writer thread reads every live pool's size from the driver (reserved,
//!   high-water, used) every tick, 10 ms while kernel records are on (setup,
//!   first steps), 100 ms after, and writes a `Pool` record when it changed;
//!   also when kernel records are switched off (a step end) and at exit;
//! - a destroyed pool (`cuMemPoolDestroy`, traced always) is no longer read
//!   and gets a last record with zero sizes;
//! - while traced, a failed pool allocation still gets the full treatment: a
//!   `MemCall` record with its caller and the device's free memory, at once.
//!
//! docs/event-format.md states the same rule for readers of the file.

use crate::cupti::{Driver, PoolSizes};
use crate::guard::lock;
use prewarm_events::{PoolUse, Record, UNKNOWN_BYTES};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Mutex, TryLockError};

/// Pools tracked separately; beyond that they are counted together in the last one.
pub const MAX_POOLS: usize = 32;
/// One allocation in this many checks the pool's owner again.
pub const RECHECK_EVERY: u64 = 1024;
/// Stream-ordered calls in a row on pools already seen after which they are
/// no longer traced (about two training steps of a 96-layer model).
pub const DEFAULT_QUIET_CALLS: u64 = 4096;

/// Stream-ordered calls are traced and counted.
const TRACING: u8 = 0;
/// Enough calls without a new pool: the writer thread switches tracing off.
const SWITCH_DUE: u8 = 1;
/// No longer traced: counts are unknown from here on.
const OFF: u8 = 2;

const KEY_DEVICE_POOL: u64 = 1 << 62;
const KEY_EXPLICIT_POOL: u64 = 2 << 62;
const KEY_OVERFLOW: u64 = 3 << 62;
const KEY_ADDRESS: u64 = (1 << 62) - 1;

/// Which pool a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKey {
    /// The current pool of the device of this context (`cuMemAllocAsync`, frees).
    Device { context: u64 },
    /// A pool the call names (`cuMemAllocFromPoolAsync`).
    Explicit { handle: u64 },
}

impl PoolKey {
    fn code(self) -> u64 {
        match self {
            PoolKey::Device { context } => KEY_DEVICE_POOL | (context & KEY_ADDRESS),
            PoolKey::Explicit { handle } => KEY_EXPLICIT_POOL | (handle & KEY_ADDRESS),
        }
    }
}

/// One pool's counters; all updated with relaxed atomics from any thread.
pub struct Slot {
    key: AtomicU64,
    device: AtomicI32,
    explicit_handle: AtomicU64,
    library: AtomicU32,
    owner_checked: AtomicBool,
    shared_reported: AtomicBool,
    /// Destroyed (`cuMemPoolDestroy`): its handle must not be read again.
    retired: AtomicBool,
    pub allocs: AtomicU64,
    pub alloc_bytes: AtomicU64,
    pub frees: AtomicU64,
    pub failed: AtomicU64,
}

impl Slot {
    const fn empty() -> Slot {
        Slot {
            key: AtomicU64::new(0),
            device: AtomicI32::new(-1),
            explicit_handle: AtomicU64::new(0),
            library: AtomicU32::new(0),
            owner_checked: AtomicBool::new(false),
            shared_reported: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            allocs: AtomicU64::new(0),
            alloc_bytes: AtomicU64::new(0),
            frees: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Whether this allocation should walk the stack for the owner: the
    /// pool's first allocation, then one in [`RECHECK_EVERY`].
    pub fn owner_check_due(&self, allocs_so_far: u64) -> bool {
        !self.owner_checked.load(Ordering::Relaxed) || allocs_so_far.is_multiple_of(RECHECK_EVERY)
    }

    /// Records the caller found by an owner check. Returns `Some((owner, other))`
    /// the first time a library other than the owner is seen using the pool.
    pub fn saw_caller(&self, library: u32) -> Option<(u32, u32)> {
        if !self.owner_checked.swap(true, Ordering::Relaxed) {
            self.library.store(library, Ordering::Relaxed);
            return None;
        }
        let owner = self.library.load(Ordering::Relaxed);
        (library != 0 && library != owner && !self.shared_reported.swap(true, Ordering::Relaxed))
            .then_some((owner, library))
    }

    /// Makes `library` the pool's owner (its creator).
    pub fn set_owner(&self, library: u32) {
        self.library.store(library, Ordering::Relaxed);
        self.owner_checked.store(true, Ordering::Relaxed);
    }

    /// The pool's device ordinal (-1 when unknown).
    pub fn device(&self) -> i32 {
        self.device.load(Ordering::Relaxed)
    }
}

/// What the last summary of a pool said, to skip unchanged ones.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Emitted {
    allocs: u64,
    alloc_bytes: u64,
    frees: u64,
    failed: u64,
    handle: u64,
    sizes: PoolSizes,
}

const NOTHING_YET: Emitted = Emitted {
    allocs: 0,
    alloc_bytes: 0,
    frees: 0,
    failed: 0,
    handle: 0,
    sizes: PoolSizes {
        reserved: UNKNOWN_BYTES,
        reserved_high: UNKNOWN_BYTES,
        used: UNKNOWN_BYTES,
    },
};

/// Every pool seen in this process.
pub struct Pools {
    slots: [Slot; MAX_POOLS],
    len: AtomicUsize,
    claim: Mutex<()>,
    /// Held while pools are read from the driver, and by `cuMemPoolDestroy`
    /// to retire a pool: no handle is read once its destruction began.
    emitted: Mutex<[Emitted; MAX_POOLS]>,
    tracing: AtomicU8,
    /// Stream-ordered calls since the last new pool.
    quiet_calls: AtomicU64,
    /// `quiet_calls` at which tracing stops (`u64::MAX`: never).
    quiet_limit: AtomicU64,
    /// Whether a step that used only known pools stops tracing too.
    step_rule: AtomicBool,
    /// Pools seen when the last step ended (`usize::MAX`: no step yet).
    pools_at_step_end: AtomicUsize,
    /// The step whose end made the switch due (0: the call count did).
    quiet_step: AtomicU32,
}

impl Pools {
    /// No pools yet; stream-ordered calls are traced until `quiet_limit`
    /// calls in a row used only known pools (`u64::MAX`: always traced).
    pub fn new(quiet_limit: u64) -> Pools {
        Pools {
            slots: [const { Slot::empty() }; MAX_POOLS],
            len: AtomicUsize::new(0),
            claim: Mutex::new(()),
            emitted: Mutex::new([NOTHING_YET; MAX_POOLS]),
            tracing: AtomicU8::new(TRACING),
            quiet_calls: AtomicU64::new(0),
            quiet_limit: AtomicU64::new(quiet_limit.max(1)),
            step_rule: AtomicBool::new(false),
            pools_at_step_end: AtomicUsize::new(usize::MAX),
            quiet_step: AtomicU32::new(0),
        }
    }

    /// Also stop tracing once a whole step used only known pools: a small
    /// model's step makes few stream-ordered calls (~114 a 3 ms step on the
    /// H200's lazy workload), so the call count alone would trace its first
    /// 36 steps at ~1.4 us a call (5% of the step).
    pub fn follow_steps(&self) {
        self.step_rule.store(true, Ordering::Relaxed);
    }

    /// Training step `step` ended (the shim says so). Under the step rule,
    /// a step in which no new pool appeared makes the switch due: the pools
    /// the training uses are known once a step repeated them.
    pub fn step_ended(&self, step: u32) {
        let seen = self.len.load(Ordering::Acquire);
        let before = self.pools_at_step_end.swap(seen, Ordering::Relaxed);
        let quiet_step = seen > 0 && before == seen && self.step_rule.load(Ordering::Relaxed);
        if quiet_step && self.tracing.load(Ordering::Relaxed) == TRACING {
            // Before the switch is due, so that its notice names the step.
            self.quiet_step.store(step, Ordering::Relaxed);
            let _ = self.tracing.compare_exchange(
                TRACING,
                SWITCH_DUE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// The step whose end made the switch due, if a step did (else the
    /// call count did).
    pub fn quiet_step(&self) -> Option<u32> {
        Some(self.quiet_step.load(Ordering::Relaxed)).filter(|&s| s > 0)
    }

    /// Whether stream-ordered calls are still counted (false once switched off).
    pub fn counting(&self) -> bool {
        self.tracing.load(Ordering::Relaxed) != OFF
    }

    /// Counts one traced stream-ordered call on a known pool; the call that
    /// completes the quiet stretch makes the switch due.
    pub fn count_call(&self) {
        let n = self.quiet_calls.fetch_add(1, Ordering::Relaxed) + 1;
        if n == self.quiet_limit.load(Ordering::Relaxed) {
            let _ = self.tracing.compare_exchange(
                TRACING,
                SWITCH_DUE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Whether the writer thread should switch tracing off now.
    pub fn switch_due(&self) -> bool {
        self.tracing.load(Ordering::Relaxed) == SWITCH_DUE
    }

    /// From now on counts are unknown (the callbacks are being switched off).
    pub fn stop_counting(&self) {
        self.tracing.store(OFF, Ordering::Relaxed);
    }

    /// Never switch tracing off (the pools' lifecycle cannot be followed).
    pub fn keep_tracing(&self) {
        self.quiet_limit.store(u64::MAX, Ordering::Relaxed);
        self.step_rule.store(false, Ordering::Relaxed);
    }

    /// The quiet stretch after which tracing stops (`u64::MAX`: never).
    pub fn quiet_limit(&self) -> u64 {
        self.quiet_limit.load(Ordering::Relaxed)
    }

    /// (allocations, frees) counted over all pools.
    pub fn totals(&self) -> (u64, u64) {
        let n = self.len.load(Ordering::Acquire);
        self.slots.iter().take(n).fold((0, 0), |(a, f), s| {
            (
                a + s.allocs.load(Ordering::Relaxed),
                f + s.frees.load(Ordering::Relaxed),
            )
        })
    }

    /// The pool's id and slot, created on first use (`device` is asked then).
    pub fn slot(&self, key: PoolKey, device: impl FnOnce() -> i32) -> (u32, &Slot) {
        let code = key.code();
        if let Some(found) = self.find(code) {
            return found;
        }
        let _claim = lock(&self.claim);
        if let Some(found) = self.find(code) {
            return found;
        }
        let n = self.len.load(Ordering::Acquire);
        let (i, code) = if n < MAX_POOLS - 1 {
            (n, code)
        } else if let Some((id, slot)) = self.find(KEY_OVERFLOW) {
            return (id, slot);
        } else {
            (MAX_POOLS - 1, KEY_OVERFLOW)
        };
        let Some(slot) = self.slots.get(i) else {
            // Unreachable: i < MAX_POOLS.
            return (0, &self.slots[0]);
        };
        if code != KEY_OVERFLOW {
            slot.device.store(device(), Ordering::Relaxed);
            if let PoolKey::Explicit { handle } = key {
                slot.explicit_handle.store(handle, Ordering::Relaxed);
            }
        }
        slot.key.store(code, Ordering::Relaxed);
        self.len.store(i + 1, Ordering::Release);
        self.quiet_calls.store(0, Ordering::Relaxed);
        (i as u32 + 1, slot)
    }

    fn find(&self, code: u64) -> Option<(u32, &Slot)> {
        let n = self.len.load(Ordering::Acquire);
        self.slots
            .iter()
            .take(n)
            .enumerate()
            .find(|(_, s)| s.key.load(Ordering::Relaxed) == code)
            .map(|(i, s)| (i as u32 + 1, s))
    }

    /// Stops reading a pool that is being destroyed (called at the entry of
    /// `cuMemPoolDestroy`, so no read of its handle runs or starts after it).
    /// Returns its id when it is tracked.
    pub fn retire(&self, handle: u64) -> Option<u32> {
        let (id, slot) = self.find(PoolKey::Explicit { handle }.code())?;
        let _reading = lock(&self.emitted);
        slot.retired.store(true, Ordering::Relaxed);
        Some(id)
    }

    /// The pool's destruction failed: it is read again.
    pub fn unretire(&self, handle: u64) {
        if let Some((_, slot)) = self.find(PoolKey::Explicit { handle }.code()) {
            slot.retired.store(false, Ordering::Relaxed);
        }
    }

    /// The last record of a destroyed pool: its memory went back to the device.
    pub fn destroyed(&self, handle: u64, t: u64) -> Option<Record> {
        let (id, slot) = self.find(PoolKey::Explicit { handle }.code())?;
        let mut emitted = lock(&self.emitted);
        let last = emitted.get_mut(id as usize - 1)?;
        let counts = self.counts(slot);
        *last = Emitted {
            allocs: counts.0,
            alloc_bytes: counts.1,
            frees: counts.2,
            failed: counts.3,
            handle,
            sizes: PoolSizes {
                reserved: 0,
                reserved_high: last.sizes.reserved_high,
                used: 0,
            },
        };
        Some(record(t, id, slot, last))
    }

    /// A pool created by `library` (`cuMemPoolCreate`): tracked from now on,
    /// owned by its creator. A handle reused after a destruction is a new pool.
    pub fn created(&self, handle: u64, device: impl FnOnce() -> i32, library: u32) {
        let (_, slot) = self.slot(PoolKey::Explicit { handle }, device);
        slot.retired.store(false, Ordering::Relaxed);
        slot.set_owner(library);
    }

    /// The slot's cumulative counters, or `UNKNOWN` once no longer counted.
    fn counts(&self, slot: &Slot) -> (u64, u64, u64, u64) {
        if !self.counting() {
            return (UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES);
        }
        (
            slot.allocs.load(Ordering::Relaxed),
            slot.alloc_bytes.load(Ordering::Relaxed),
            slot.frees.load(Ordering::Relaxed),
            slot.failed.load(Ordering::Relaxed),
        )
    }

    /// A `PoolUse` record for every live pool whose counters or size changed
    /// since its last one. With a driver, every live pool's size is read from
    /// it (call only where the driver is known to be alive); without, the
    /// records carry the counters only. `now` is read once the summary is
    /// this thread's to write, so records of one pool are in time order.
    /// Skipped (no records) while another thread writes one: a callback or
    /// the writer's tick never waits.
    pub fn summarize(&self, now: impl FnOnce() -> u64, driver: Option<&Driver>) -> Vec<Record> {
        let emitted = match self.emitted.try_lock() {
            Ok(e) => e,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Vec::new(), // another thread is at it
        };
        self.summarize_holding(emitted, now, driver)
    }

    /// As [`Pools::summarize`], waiting for another thread's summary to
    /// end instead of skipping: the last summary, at exit, must not be lost
    /// to the writer's tick running at that moment.
    pub fn summarize_final(
        &self,
        now: impl FnOnce() -> u64,
        driver: Option<&Driver>,
    ) -> Vec<Record> {
        let emitted = self.emitted.lock().unwrap_or_else(|e| e.into_inner());
        self.summarize_holding(emitted, now, driver)
    }

    fn summarize_holding(
        &self,
        mut emitted: std::sync::MutexGuard<'_, [Emitted; MAX_POOLS]>,
        now: impl FnOnce() -> u64,
        driver: Option<&Driver>,
    ) -> Vec<Record> {
        let t = now();
        let n = self.len.load(Ordering::Acquire);
        let mut out = Vec::new();
        for (i, (slot, last)) in self
            .slots
            .iter()
            .zip(emitted.iter_mut())
            .take(n)
            .enumerate()
        {
            if slot.retired.load(Ordering::Relaxed) {
                continue;
            }
            let counts = self.counts(slot);
            let counts_same = counts == (last.allocs, last.alloc_bytes, last.frees, last.failed);
            if counts_same && driver.is_none() {
                continue;
            }
            let key = slot.key.load(Ordering::Relaxed);
            let handle = match key & !KEY_ADDRESS {
                KEY_EXPLICIT_POOL => slot.explicit_handle.load(Ordering::Relaxed),
                KEY_DEVICE_POOL => driver
                    .and_then(|d| d.pool_of_device(slot.device()))
                    .unwrap_or(last.handle),
                _ => 0,
            };
            let sizes = match driver {
                Some(d) if handle != 0 => d.pool_sizes(handle),
                _ => NOTHING_YET.sizes,
            };
            if counts_same && (sizes == NOTHING_YET.sizes || sizes == last.sizes) {
                continue;
            }
            let sizes_read = sizes != NOTHING_YET.sizes;
            *last = Emitted {
                allocs: counts.0,
                alloc_bytes: counts.1,
                frees: counts.2,
                failed: counts.3,
                handle,
                // A counters-only record leaves the last sizes to compare with.
                sizes: if sizes_read { sizes } else { last.sizes },
            };
            let mut r = record(t, i as u32 + 1, slot, last);
            if !sizes_read && let Record::Pool(p) = &mut r {
                (p.reserved, p.reserved_high, p.used) =
                    (UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES);
            }
            out.push(r);
        }
        out
    }
}

/// The `Pool` record of a slot as last emitted.
fn record(t: u64, pool_id: u32, slot: &Slot, e: &Emitted) -> Record {
    Record::Pool(PoolUse {
        t,
        pool_id,
        device: slot.device(),
        handle: e.handle,
        library: slot.library.load(Ordering::Relaxed),
        allocs: e.allocs,
        alloc_bytes: e.alloc_bytes,
        frees: e.frees,
        failed: e.failed,
        reserved: e.sizes.reserved,
        reserved_high: e.sizes.reserved_high,
        used: e.sizes.used,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_pool(context: u64) -> PoolKey {
        PoolKey::Device { context }
    }

    #[test]
    fn pools_are_found_again_by_key_and_kind() {
        let pools = Pools::new(u64::MAX);
        let (a, _) = pools.slot(device_pool(0x1000), || 0);
        let (b, _) = pools.slot(PoolKey::Explicit { handle: 0x1000 }, || 0);
        let (a2, slot) = pools.slot(device_pool(0x1000), || panic!("not asked again"));
        assert_eq!((a, b, a2), (1, 2, 1));
        assert_eq!(slot.device(), 0);
    }

    #[test]
    fn pools_beyond_the_table_share_the_last_slot() {
        let pools = Pools::new(u64::MAX);
        for i in 0..(MAX_POOLS as u64 + 5) {
            let (id, slot) = pools.slot(
                PoolKey::Explicit {
                    handle: 0x100 * (i + 1),
                },
                || 1,
            );
            slot.allocs.fetch_add(1, Ordering::Relaxed);
            assert_eq!(id, (i as u32 + 1).min(MAX_POOLS as u32));
        }
        let records = pools.summarize(|| 5, None);
        assert_eq!(records.len(), MAX_POOLS);
        match records.last() {
            Some(Record::Pool(p)) => {
                assert_eq!((p.allocs, p.device, p.handle), (6, -1, 0));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn owner_is_the_first_caller_and_a_second_library_is_reported_once() {
        let pools = Pools::new(u64::MAX);
        let (_, slot) = pools.slot(device_pool(1), || 0);
        assert!(slot.owner_check_due(1));
        assert_eq!(slot.saw_caller(7), None);
        assert!(!slot.owner_check_due(2));
        assert!(slot.owner_check_due(RECHECK_EVERY));
        assert_eq!(slot.saw_caller(7), None);
        assert_eq!(slot.saw_caller(9), Some((7, 9)));
        assert_eq!(slot.saw_caller(9), None);
        assert_eq!(slot.library.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn the_final_summary_waits_for_another_threads_instead_of_skipping() {
        let pools = Pools::new(u64::MAX);
        let (_, a) = pools.slot(device_pool(1), || 0);
        a.frees.fetch_add(5, Ordering::Relaxed);
        // Another thread (the writer's tick) is writing a summary.
        let held = pools.emitted.lock().unwrap();
        std::thread::scope(|s| {
            assert!(
                s.spawn(|| pools.summarize(|| 1, None))
                    .join()
                    .unwrap()
                    .is_empty()
            );
            let last = s.spawn(|| pools.summarize_final(|| 2, None));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert!(!last.is_finished(), "the final summary must wait");
            drop(held);
            match &last.join().unwrap()[..] {
                [Record::Pool(p)] => assert_eq!((p.t, p.frees), (2, 5)),
                other => panic!("{other:?}"),
            }
        });
    }

    #[test]
    fn summaries_carry_cumulative_counts_and_skip_unchanged_pools() {
        let pools = Pools::new(u64::MAX);
        let (_, a) = pools.slot(device_pool(1), || 0);
        let (_, b) = pools.slot(PoolKey::Explicit { handle: 0x40 }, || 0);
        a.allocs.fetch_add(3, Ordering::Relaxed);
        a.alloc_bytes.fetch_add(300, Ordering::Relaxed);
        b.frees.fetch_add(1, Ordering::Relaxed);
        let first = pools.summarize(|| 10, None);
        assert_eq!(first.len(), 2);
        assert!(pools.summarize(|| 11, None).is_empty());
        a.allocs.fetch_add(1, Ordering::Relaxed);
        let third = pools.summarize(|| 12, None);
        assert_eq!(third.len(), 1);
        match &third[0] {
            Record::Pool(p) => {
                assert_eq!((p.pool_id, p.allocs, p.alloc_bytes), (1, 4, 300));
                assert_eq!(p.reserved, UNKNOWN_BYTES);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tracing_stops_after_a_quiet_stretch_and_counts_turn_unknown() {
        let pools = Pools::new(4);
        let (_, a) = pools.slot(device_pool(1), || 0);
        a.allocs.fetch_add(1, Ordering::Relaxed);
        for _ in 0..3 {
            pools.count_call();
        }
        assert!(!pools.switch_due());
        // A new pool restarts the stretch.
        let (_, b) = pools.slot(PoolKey::Explicit { handle: 0x40 }, || 0);
        b.frees.fetch_add(1, Ordering::Relaxed);
        for _ in 0..3 {
            pools.count_call();
        }
        assert!(!pools.switch_due());
        pools.count_call();
        assert!(pools.switch_due() && pools.counting());
        assert_eq!(pools.summarize(|| 1, None).len(), 2);
        pools.stop_counting();
        assert!(!pools.switch_due() && !pools.counting());
        let after = pools.summarize(|| 2, None);
        assert_eq!(after.len(), 2, "the switch itself is recorded per pool");
        for r in &after {
            match r {
                Record::Pool(p) => assert_eq!(
                    (p.allocs, p.alloc_bytes, p.frees, p.failed),
                    (UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES)
                ),
                other => panic!("{other:?}"),
            }
        }
        a.allocs.fetch_add(1, Ordering::Relaxed);
        assert!(
            pools.summarize(|| 3, None).is_empty(),
            "uncounted calls change nothing"
        );
    }

    #[test]
    fn a_step_on_known_pools_stops_tracing_and_a_new_pool_delays_it() {
        let pools = Pools::new(u64::MAX);
        pools.follow_steps();
        // Nothing stream-ordered yet: a step end changes nothing.
        pools.step_ended(1);
        pools.step_ended(2);
        assert!(!pools.switch_due());
        pools.slot(device_pool(1), || 0);
        pools.step_ended(3);
        assert!(!pools.switch_due(), "the step that found the pool");
        pools.slot(PoolKey::Explicit { handle: 0x40 }, || 0);
        pools.step_ended(4);
        assert!(!pools.switch_due(), "a new pool in step 4");
        assert_eq!(pools.quiet_step(), None);
        pools.step_ended(5);
        assert!(pools.switch_due());
        assert_eq!(pools.quiet_step(), Some(5));
        pools.stop_counting();
        pools.step_ended(6);
        assert_eq!(pools.quiet_step(), Some(5), "once");
    }

    #[test]
    fn steps_stop_nothing_without_the_step_rule() {
        for pools in [Pools::new(4096), {
            let p = Pools::new(4096);
            p.follow_steps();
            p.keep_tracing();
            p
        }] {
            pools.slot(device_pool(1), || 0);
            for step in 1..10 {
                pools.step_ended(step);
            }
            assert!(!pools.switch_due());
        }
    }

    #[test]
    fn never_stops_without_a_limit() {
        let pools = Pools::new(u64::MAX);
        pools.slot(device_pool(1), || 0);
        for _ in 0..10_000 {
            pools.count_call();
        }
        assert!(!pools.switch_due());
    }

    #[test]
    fn a_created_pool_is_owned_by_its_creator_and_a_destroyed_one_is_not_read() {
        let pools = Pools::new(u64::MAX);
        pools.created(0x80, || 2, 5);
        let (id, slot) = pools.slot(PoolKey::Explicit { handle: 0x80 }, || panic!("known"));
        assert_eq!(
            (id, slot.device(), slot.library.load(Ordering::Relaxed)),
            (1, 2, 5)
        );
        assert!(!slot.owner_check_due(1), "the creator is the owner");
        slot.allocs.fetch_add(1, Ordering::Relaxed);
        assert_eq!(pools.retire(0x80), Some(1));
        assert!(
            pools.summarize(|| 1, None).is_empty(),
            "a retiring pool is skipped"
        );
        match pools.destroyed(0x80, 7) {
            Some(Record::Pool(p)) => {
                assert_eq!((p.t, p.pool_id, p.library, p.allocs), (7, 1, 5, 1));
                assert_eq!((p.reserved, p.used), (0, 0));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(pools.retire(0x99), None);
        pools.created(0x80, || 2, 6);
        assert_eq!(
            slot.library.load(Ordering::Relaxed),
            6,
            "a reused handle is a new pool"
        );
        slot.allocs.fetch_add(1, Ordering::Relaxed);
        assert_eq!(pools.summarize(|| 8, None).len(), 1);
    }
}
