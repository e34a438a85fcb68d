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

/// The cumulative own time at `t`, interpolated linearly between the records
/// around it (from zero at `origin`, the process's start); the last record's
/// figure after it. `costs` are in file order, which is time order for the
/// writer thread that writes them.
fn spent_at(costs: &[ProbeCost], origin: u64, t: u64) -> f64 {
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

/// Seconds of the probe's own time between `a` and `b` (0 without records).
pub fn seconds_between(costs: &[ProbeCost], origin: u64, a: u64, b: u64) -> f64 {
    if costs.is_empty() || b <= a {
        return 0.0;
    }
    ((spent_at(costs, origin, b) - spent_at(costs, origin, a)) / 1e9).max(0.0)
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
        let s = |a, b| seconds_between(&costs, 0, a, b);
        assert!((s(0, 100) - 0.010).abs() < 1e-12);
        assert!((s(100, 200) - 0.020).abs() < 1e-12);
        // Half of each interval.
        assert!((s(50, 150) - 0.015).abs() < 1e-12);
        // After the last record: nothing more is known.
        assert_eq!(s(200, 500), 0.0);
        assert_eq!(seconds_between(&[], 0, 0, 100), 0.0);
    }
}
