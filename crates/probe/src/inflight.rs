//! Tracked driver calls between their enter and exit callbacks: a fixed-size,
//! lock-free, open-addressed table keyed by CUPTI's correlation id (unique per
//! call). Not a thread-local: callbacks also arrive while threads and the
//! process are being torn down, when thread-locals may already be gone. Both
//! operations are O(1) (at most [`PROBES`] slots looked at) and allocate
//! nothing; when every slot a call may use is taken (more than [`SLOTS`]
//! calls in flight, or a cluster of them), the oldest-placed one is forgotten
//! and its exit then carries t_start = t_end, as before.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of the table (a power of two).
pub const SLOTS: usize = 4096;

/// Slots looked at from a call's home slot.
pub const PROBES: usize = 8;

/// A free slot.
const EMPTY: u64 = 0;
/// A slot being written (claimed, fields not yet valid).
const BUSY: u64 = u64::MAX;

/// One slot: its key (`1 << 32 | correlation` when in use) and the call's
/// start and free memory before it.
#[repr(align(32))]
struct Slot {
    key: AtomicU64,
    t_start: AtomicU64,
    free_before: AtomicU64,
}

/// The table (see the module docs).
pub struct InFlightTable {
    slots: Box<[Slot]>,
}

fn key_of(correlation: u32) -> u64 {
    1 << 32 | correlation as u64
}

impl Default for InFlightTable {
    fn default() -> Self {
        InFlightTable {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    key: AtomicU64::new(EMPTY),
                    t_start: AtomicU64::new(0),
                    free_before: AtomicU64::new(0),
                })
                .collect(),
        }
    }
}

impl InFlightTable {
    fn probe_slots(&self, correlation: u32) -> impl Iterator<Item = &Slot> {
        let home = correlation as usize;
        (0..PROBES).map(move |i| &self.slots[(home + i) % SLOTS])
    }

    /// Saves a call's start; false when an older call's entry had to be
    /// forgotten to make room.
    pub fn insert(&self, correlation: u32, t_start: u64, free_before: u64) -> bool {
        let claimed = self.probe_slots(correlation).find(|s| {
            s.key
                .compare_exchange(EMPTY, BUSY, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        let (slot, forgot) = match claimed {
            Some(slot) => (slot, false),
            None => {
                // Every slot taken: evict the home slot's call (unless it is
                // being written this instant, in which case this call is lost).
                let home = &self.slots[correlation as usize % SLOTS];
                let current = home.key.load(Ordering::Relaxed);
                if current == BUSY
                    || home
                        .key
                        .compare_exchange(current, BUSY, Ordering::Acquire, Ordering::Relaxed)
                        .is_err()
                {
                    return false;
                }
                (home, true)
            }
        };
        slot.t_start.store(t_start, Ordering::Relaxed);
        slot.free_before.store(free_before, Ordering::Relaxed);
        slot.key.store(key_of(correlation), Ordering::Release);
        !forgot
    }

    /// Takes the saved (t_start, free_before) of a call, if it is still there.
    pub fn take(&self, correlation: u32) -> Option<(u64, u64)> {
        let key = key_of(correlation);
        for slot in self.probe_slots(correlation) {
            if slot.key.load(Ordering::Acquire) != key {
                continue;
            }
            let t_start = slot.t_start.load(Ordering::Relaxed);
            let free_before = slot.free_before.load(Ordering::Relaxed);
            // Only the thread whose exchange succeeds owns what it read: an
            // eviction in between changed the key first, so this one fails.
            if slot
                .key
                .compare_exchange(key, EMPTY, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Some((t_start, free_before));
            }
            return None;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_found_once() {
        let t = InFlightTable::default();
        assert!(t.insert(7, 100, 5));
        assert_eq!(t.take(8), None);
        assert_eq!(t.take(7), Some((100, 5)));
        assert_eq!(t.take(7), None);
    }

    #[test]
    fn colliding_calls_share_the_home_slots_and_the_oldest_is_forgotten_beyond_them() {
        let t = InFlightTable::default();
        // Correlations with the same home slot.
        let ids: Vec<u32> = (0..=PROBES as u32).map(|i| 3 + i * SLOTS as u32).collect();
        for (i, &c) in ids.iter().enumerate().take(PROBES) {
            assert!(t.insert(c, i as u64, 0));
        }
        // One more than fits: the home slot's call (the first) is forgotten.
        assert!(!t.insert(ids[PROBES], 99, 0));
        assert_eq!(t.take(ids[0]), None);
        assert_eq!(t.take(ids[PROBES]), Some((99, 0)));
        for (i, &c) in ids.iter().enumerate().take(PROBES).skip(1) {
            assert_eq!(t.take(c), Some((i as u64, 0)));
        }
    }

    #[test]
    fn many_threads_match_their_own_calls() {
        let t = InFlightTable::default();
        std::thread::scope(|s| {
            for th in 0..8u32 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..20_000u32 {
                        let c = i * 8 + th + 1;
                        t.insert(c, c as u64 * 3, th as u64);
                        assert_eq!(t.take(c), Some((c as u64 * 3, th as u64)));
                    }
                });
            }
        });
        assert!(
            t.slots
                .iter()
                .all(|s| s.key.load(Ordering::Relaxed) == EMPTY)
        );
    }
}
