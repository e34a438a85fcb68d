//! A time window on the monotonic clock, the unit every join is made of.

/// A time window [t0, t1] on the monotonic clock.
pub type Window = (u64, u64);
