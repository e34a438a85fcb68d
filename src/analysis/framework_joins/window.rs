//! A time window on the monotonic clock, the unit every join is made of.

/// A time window [t0, t1] on the monotonic clock.
pub type Window = (u64, u64);

/// Seconds from `start` to `t` (0 before it), as the account shows them.
pub(super) fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}
