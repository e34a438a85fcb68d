//! The probe's own time inside a window of the run, read off its cumulative
//! self-cost records (callbacks, activity buffers, the writer thread), so a
//! phase's stalls can be read beside what the profiler itself spent there.

use prewarm_events::ProbeCost;

/// All of the probe's own time up to a record, in nanoseconds.
fn spent(c: &ProbeCost) -> u64 {
    c.callback_ns
        .saturating_add(c.activity_ns)
        .saturating_add(c.flush_ns)
}

/// The callbacks' time up to a record: the part that runs inside the
/// training's own driver calls (the rest runs on the probe's and CUPTI's
/// threads).
fn in_callbacks(c: &ProbeCost) -> u64 {
    c.callback_ns
}

/// The probe's own time inside a window, and the share of it its callbacks
/// spent inside the training's calls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OwnTime {
    pub total_s: f64,
    pub callbacks_s: f64,
}

/// [`OwnTime`] between `a` and `b` (zeros without records).
pub fn own_time_between(costs: &[ProbeCost], origin: u64, a: u64, b: u64) -> OwnTime {
    OwnTime {
        total_s: seconds_between(costs, origin, a, b, spent),
        callbacks_s: seconds_between(costs, origin, a, b, in_callbacks),
    }
}

/// The cumulative own time at `t`, interpolated linearly between the records
/// around it (from zero at `origin`, the process's start); the last record's
/// figure after it. `costs` are in file order, which is time order for the
/// writer thread that writes them.
fn spent_at(costs: &[ProbeCost], origin: u64, t: u64, spent: fn(&ProbeCost) -> u64) -> f64 {
    let mut before = (origin, 0u64);
    for c in costs {
        if c.t >= t {
            let (t0, v0) = before;
            let v1 = spent(c);
            if c.t <= t0 {
                return v1 as f64;
            }
            let f = t.saturating_sub(t0) as f64 / (c.t - t0) as f64;
            return v0 as f64 + f * v1.saturating_sub(v0) as f64;
        }
        before = (c.t, spent(c));
    }
    before.1 as f64
}

/// Seconds of one counter of the probe's own time between `a` and `b` (0
/// without records).
fn seconds_between(
    costs: &[ProbeCost],
    origin: u64,
    a: u64,
    b: u64,
    spent: fn(&ProbeCost) -> u64,
) -> f64 {
    if costs.is_empty() || b <= a {
        return 0.0;
    }
    ((spent_at(costs, origin, b, spent) - spent_at(costs, origin, a, spent)) / 1e9).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(t: u64, callback_ns: u64, flush_ns: u64) -> ProbeCost {
        ProbeCost {
            t,
            callbacks: 0,
            callback_ns,
            activity_records: 0,
            activity_ns: 0,
            activity_buffer_bytes: 0,
            bytes_written: 0,
            flush_ns,
        }
    }

    #[test]
    fn a_window_gets_its_interpolated_share_of_the_counters() {
        // 10 ms of own time by t=100, 30 ms by t=200 (from 0 at t=0).
        let costs = [
            cost(100, 8_000_000, 2_000_000),
            cost(200, 20_000_000, 10_000_000),
        ];
        let s = |a, b| own_time_between(&costs, 0, a, b).total_s;
        assert!((s(0, 100) - 0.010).abs() < 1e-12);
        assert!((s(100, 200) - 0.020).abs() < 1e-12);
        // Half of each interval.
        assert!((s(50, 150) - 0.015).abs() < 1e-12);
        // After the last record: nothing more is known.
        assert_eq!(s(200, 500), 0.0);
        assert_eq!(own_time_between(&[], 0, 0, 100), OwnTime::default());
        // The callbacks' share: 8 ms of the first 10, 12 ms of the next 20.
        let c = |a, b| own_time_between(&costs, 0, a, b).callbacks_s;
        assert!((c(0, 100) - 0.008).abs() < 1e-12);
        assert!((c(100, 200) - 0.012).abs() < 1e-12);
    }
}
