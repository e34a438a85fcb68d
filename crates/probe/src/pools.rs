//! Stream-ordered allocations, counted per memory pool instead of recorded
//! one by one.
//!
//! With PyTorch's `backend:cudaMallocAsync` (and RAPIDS, and anything using
//! `cudaMallocAsync`), every tensor allocation and free is a driver call the
//! probe sees: thousands per training step. Giving each one the full treatment
//! (cuMemGetInfo before and after, a stack walk for the caller, a record) made
//! steps twice as long on an H200. So these calls take the pool path:
//!
//! - an allocation adds to its pool's counters (calls, bytes, failures), a
//!   free to its context's device pool (the free call does not name a pool);
//!   nothing else happens per call: no cuMemGetInfo, no stack walk, no record;
//! - the pool is attributed as a whole to its owner, the library that made its
//!   first allocation (one stack walk per pool). One allocation in 1024 walks
//!   the stack again; if another library uses the same pool, a notice says so
//!   and the pool stays with its first owner;
//! - a `Pool` record with the cumulative counters and the pool's own size
//!   from the driver (reserved, high-water, used) is written for every pool
//!   used since its last record: every 100 ms by the writer thread, every
//!   10 ms from the pool calls themselves while kernel records are on (setup
//!   and the first steps), right before a failed pool allocation, when kernel
//!   records are switched off (a step end) and at exit;
//! - a failed pool allocation still gets the full treatment: a `MemCall` record
//!   with its caller and the device's free memory, written at once.
//!
//! docs/event-format.md states the same rule for readers of the file.

use crate::cupti::{Driver, PoolSizes};
use crate::guard::lock;
use prewarm_events::{PoolUse, Record, UNKNOWN_BYTES};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};

/// Pools tracked separately; beyond that they are counted together in the last one.
pub const MAX_POOLS: usize = 32;
/// One allocation in this many checks the pool's owner again.
pub const RECHECK_EVERY: u64 = 1024;
/// Shortest time between two summaries from pool calls (while kernel records
/// are on; the writer thread writes them every 100 ms in any case).
const SUMMARY_EVERY_NS: u64 = 10_000_000;

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
    emitted: Mutex<[Emitted; MAX_POOLS]>,
    last_summary: AtomicU64,
}

impl Pools {
    /// No pools yet.
    pub fn new() -> Pools {
        Pools {
            slots: [const { Slot::empty() }; MAX_POOLS],
            len: AtomicUsize::new(0),
            claim: Mutex::new(()),
            emitted: Mutex::new([NOTHING_YET; MAX_POOLS]),
            last_summary: AtomicU64::new(0),
        }
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

    /// Claims the next summary from a pool call if one is due at `now`.
    pub fn summary_due(&self, now: u64) -> bool {
        let last = self.last_summary.load(Ordering::Relaxed);
        now.saturating_sub(last) >= SUMMARY_EVERY_NS
            && self
                .last_summary
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// A `PoolUse` record for every pool that changed since its last one. With
    /// a driver, the pools' sizes are read from it (call only where the driver
    /// is known to be alive); without, the records carry the counters only.
    /// `now` is read once the summary is this thread's to write, so records
    /// of one pool are in time order.
    pub fn summarize(&self, now: impl FnOnce() -> u64, driver: Option<&Driver>) -> Vec<Record> {
        let mut emitted = match self.emitted.try_lock() {
            Ok(e) => e,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Vec::new(), // another thread is at it
        };
        let t = now();
        if driver.is_some() {
            // A full summary restarts the periodic clock; a counters-only one does not.
            self.last_summary.fetch_max(t, Ordering::Relaxed);
        }
        let n = self.len.load(Ordering::Acquire);
        let mut out = Vec::new();
        for (i, (slot, last)) in self
            .slots
            .iter()
            .zip(emitted.iter_mut())
            .take(n)
            .enumerate()
        {
            let counts = (
                slot.allocs.load(Ordering::Relaxed),
                slot.alloc_bytes.load(Ordering::Relaxed),
                slot.frees.load(Ordering::Relaxed),
                slot.failed.load(Ordering::Relaxed),
            );
            let measured = last.sizes != NOTHING_YET.sizes;
            if counts == (last.allocs, last.alloc_bytes, last.frees, last.failed)
                && (measured || driver.is_none())
            {
                // Unused since its last record (its size changes only with calls).
                continue;
            }
            let key = slot.key.load(Ordering::Relaxed);
            let device = slot.device();
            let handle = match key & !KEY_ADDRESS {
                KEY_EXPLICIT_POOL => slot.explicit_handle.load(Ordering::Relaxed),
                KEY_DEVICE_POOL => driver
                    .and_then(|d| d.pool_of_device(device))
                    .unwrap_or(last.handle),
                _ => 0,
            };
            let sizes = match driver {
                Some(d) if handle != 0 => d.pool_sizes(handle),
                _ => NOTHING_YET.sizes,
            };
            let now = Emitted {
                allocs: counts.0,
                alloc_bytes: counts.1,
                frees: counts.2,
                failed: counts.3,
                handle,
                sizes,
            };
            let counts_same = counts == (last.allocs, last.alloc_bytes, last.frees, last.failed);
            if counts_same && (sizes == NOTHING_YET.sizes || sizes == last.sizes) {
                continue;
            }
            out.push(Record::Pool(PoolUse {
                t,
                pool_id: i as u32 + 1,
                device,
                handle,
                library: slot.library.load(Ordering::Relaxed),
                allocs: now.allocs,
                alloc_bytes: now.alloc_bytes,
                frees: now.frees,
                failed: now.failed,
                reserved: sizes.reserved,
                reserved_high: sizes.reserved_high,
                used: sizes.used,
            }));
            *last = Emitted {
                sizes: if sizes == NOTHING_YET.sizes {
                    last.sizes
                } else {
                    sizes
                },
                ..now
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_pool(context: u64) -> PoolKey {
        PoolKey::Device { context }
    }

    #[test]
    fn pools_are_found_again_by_key_and_kind() {
        let pools = Pools::new();
        let (a, _) = pools.slot(device_pool(0x1000), || 0);
        let (b, _) = pools.slot(PoolKey::Explicit { handle: 0x1000 }, || 0);
        let (a2, slot) = pools.slot(device_pool(0x1000), || panic!("not asked again"));
        assert_eq!((a, b, a2), (1, 2, 1));
        assert_eq!(slot.device(), 0);
    }

    #[test]
    fn pools_beyond_the_table_share_the_last_slot() {
        let pools = Pools::new();
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
        let pools = Pools::new();
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
    fn summaries_carry_cumulative_counts_and_skip_unchanged_pools() {
        let pools = Pools::new();
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
    fn summaries_from_pool_calls_are_rate_limited() {
        let pools = Pools::new();
        let ms = 1_000_000;
        assert!(pools.summary_due(100 * ms));
        assert!(!pools.summary_due(105 * ms));
        assert!(pools.summary_due(111 * ms));
        // A counters-only summary leaves the clock alone.
        pools.summarize(|| 115 * ms, None);
        assert!(pools.summary_due(121 * ms));
    }
}
