//! The doctor's own time inside a window of the run: the probe's, read off
//! its cumulative self-cost records (callbacks, activity buffers, the writer
//! thread), and the shim's, read off the `own_ns` its lines carry (its hooks
//! on the training's threads), so a phase's stalls can be read beside what
//! the profiler itself spent there.

use crate::load::shim::{ShimEvent, ShimOwnTime};
use prewarm_events::ProbeCost;
use serde::Serialize;
use std::collections::BTreeMap;

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

/// Where the probe's callbacks' time in a window went (probe 0.2.2 on):
/// the parts the step-1 cost is looked for in.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct CallbackSplit {
    /// The launch callbacks: the first-launch watch, kernel records
    /// switched around each function's first launch.
    pub launches_s: f64,
    /// The module and library load and unload calls' callbacks.
    pub module_loads_s: f64,
    /// The probe's `cuMemGetInfo` readings (two around each traced
    /// allocation, free and module load; inside the callbacks above and
    /// the others).
    pub readings_s: f64,
    /// The probe's caller walks (which library made each traced call;
    /// inside the allocation and module callbacks); None for a probe that
    /// did not time them (before 0.2.3).
    pub caller_walks_s: Option<f64>,
    /// The longest single callback the cost records around the window
    /// name; None for a probe that did not name them (before 0.2.3) or a
    /// window no callback ran in.
    pub longest_callback: Option<LongestCallback>,
}

/// One callback that took long: a cost record names the longest since the
/// record before, so a rare slow one is not spread over its 10 ms tick.
/// It lies in the window or in the tick that reaches into it (10 ms while
/// the first-launch watch runs, a second after).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LongestCallback {
    pub seconds: f64,
    /// The probe's id for it (`slowest_callback_id`: CUPTI's callback id,
    /// a resource id plus 0x8000, or the probe's own work).
    pub id: u64,
    /// What ran: a driver entry point, a resource callback or the probe's
    /// own work (prewarm_events::callback_ids).
    pub name: &'static str,
}

/// The longest callback named by a cost record whose tick (from the record
/// before, or `origin`) overlaps `a..b`.
fn longest_callback(costs: &[ProbeCost], origin: u64, a: u64, b: u64) -> Option<LongestCallback> {
    let starts = std::iter::once(origin).chain(costs.iter().map(|c| c.t));
    costs
        .iter()
        .zip(starts)
        .filter(|(c, start)| c.slowest_callback_ns > 0 && c.t > a && *start < b)
        .max_by_key(|(c, _)| c.slowest_callback_ns)
        .map(|(c, _)| LongestCallback {
            seconds: c.slowest_callback_ns as f64 / 1e9,
            id: c.slowest_callback_id,
            name: prewarm_events::callback_ids::callback_name(c.slowest_callback_id),
        })
}

/// The doctor's own time inside a window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct OwnTime {
    /// The probe's, on every thread.
    pub total_s: f64,
    /// Of `total_s`, its callbacks: inside the training's calls.
    pub callbacks_s: f64,
    /// Of `callbacks_s`, its parts; None for a probe that did not count
    /// them (before 0.2.2).
    pub callback_split: Option<CallbackSplit>,
    /// The shim's hooks, on the training's threads; None when no line of
    /// the shim's says its time at or after the window's end (an older
    /// shim, no shim, or a window past its last line).
    pub shim_s: Option<f64>,
}

/// [`OwnTime`] between `a` and `b` (zeros without records).
pub fn own_time_between(
    costs: &[ProbeCost],
    shim: &[ShimOwnTime],
    origin: u64,
    a: u64,
    b: u64,
) -> OwnTime {
    let probe = |value: fn(&ProbeCost) -> u64| {
        let samples: Vec<(u64, u64)> = costs.iter().map(|c| (c.t, value(c))).collect();
        seconds_between(&samples, origin, a, b)
    };
    let shim_known = shim.last().is_some_and(|last| last.t >= b);
    let shim_samples: Vec<(u64, u64)> = shim.iter().map(|s| (s.t, s.own_ns)).collect();
    let split_counted = costs
        .iter()
        .any(|c| c.launch_ns > 0 || c.module_ns > 0 || c.reading_ns > 0);
    let walks_timed = costs.iter().any(|c| c.walk_ns > 0);
    OwnTime {
        total_s: probe(spent),
        callbacks_s: probe(in_callbacks),
        callback_split: split_counted.then(|| CallbackSplit {
            launches_s: probe(|c| c.launch_ns),
            module_loads_s: probe(|c| c.module_ns),
            readings_s: probe(|c| c.reading_ns),
            caller_walks_s: walks_timed.then(|| probe(|c| c.walk_ns)),
            longest_callback: longest_callback(costs, origin, a, b),
        }),
        shim_s: shim_known.then(|| seconds_between(&shim_samples, origin, a, b)),
    }
}

/// A cumulative counter at `t`, interpolated linearly between the samples
/// around it (from zero at `origin`, the process's start); the last sample's
/// figure after it. `samples` are (time, cumulative value) in time order:
/// the probe's writer thread writes its records so, and the shim's lines are
/// sorted when read. A binary search: a run's every step asks it.
fn value_at(samples: &[(u64, u64)], origin: u64, t: u64) -> f64 {
    let k = samples.partition_point(|&(ts, _)| ts < t);
    let before = if k == 0 { (origin, 0) } else { samples[k - 1] };
    let Some(&(ts, v1)) = samples.get(k) else {
        return before.1 as f64;
    };
    let (t0, v0) = before;
    if ts <= t0 {
        return v1 as f64;
    }
    let f = t.saturating_sub(t0) as f64 / (ts - t0) as f64;
    v0 as f64 + f * v1.saturating_sub(v0) as f64
}

/// The shim's own seconds in each of `windows` (the steps), from one pass
/// over its lines; None unless its lines state it past the last window's
/// end (as [`OwnTime::shim_s`]).
pub fn shim_seconds_in(
    shim: &[ShimOwnTime],
    origin: u64,
    windows: &[(u64, u64)],
) -> Option<Vec<f64>> {
    let end = windows.iter().map(|w| w.1).max()?;
    if shim.last().is_none_or(|last| last.t < end) {
        return None;
    }
    let samples: Vec<(u64, u64)> = shim.iter().map(|s| (s.t, s.own_ns)).collect();
    Some(
        windows
            .iter()
            .map(|&(a, b)| seconds_between(&samples, origin, a, b))
            .collect(),
    )
}

/// Seconds of one cumulative counter between `a` and `b` (0 without samples).
fn seconds_between(samples: &[(u64, u64)], origin: u64, a: u64, b: u64) -> f64 {
    if samples.is_empty() || b <= a {
        return 0.0;
    }
    ((value_at(samples, origin, b) - value_at(samples, origin, a)) / 1e9).max(0.0)
}

/// One of the shim's entry points and what it cost over the run: which hook
/// the shim's own time went to, so a costly one can be named.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShimHookCost {
    /// The observed or wrapped function (`Autotuner.run`), or the hook
    /// (`_StepTracker.post_step`).
    pub name: String,
    pub calls: u64,
    pub seconds: f64,
}

/// The shim's line writes over the run: how much of its time the file
/// system took (a slow run folder shows here, not as a costly hook).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ShimWrites {
    pub lines: u64,
    pub seconds: f64,
}

/// A `shim_own` line's (calls, ns) by entry point.
type ByHook = BTreeMap<String, (u64, u64)>;

/// The last `shim_own` line's figures: the hooks by entry point, the writes.
fn last_shim_own(shim: &[ShimEvent]) -> Option<(&ByHook, Option<(u64, u64)>)> {
    shim.iter()
        .filter_map(|e| match e {
            ShimEvent::ShimOwn { t, by, writes } => Some((*t, by, *writes)),
            _ => None,
        })
        .max_by_key(|(t, _, _)| *t)
        .map(|(_, by, writes)| (by, writes))
}

/// The shim's line writes from its last `shim_own` line (None from a shim
/// that did not time them).
pub fn shim_writes(shim: &[ShimEvent]) -> Option<ShimWrites> {
    let (lines, ns) = last_shim_own(shim)?.1?;
    Some(ShimWrites {
        lines,
        seconds: ns as f64 / 1e9,
    })
}

/// The shim's hooks by their own time, costliest first, from its last
/// `shim_own` line (empty for a shim that wrote none).
pub fn shim_hook_costs(shim: &[ShimEvent]) -> Vec<ShimHookCost> {
    let mut hooks: Vec<ShimHookCost> = last_shim_own(shim)
        .map(|(by, _)| {
            by.iter()
                .map(|(name, &(calls, ns))| ShimHookCost {
                    name: name.clone(),
                    calls,
                    seconds: ns as f64 / 1e9,
                })
                .collect()
        })
        .unwrap_or_default();
    hooks.sort_by(|a, b| {
        b.seconds
            .total_cmp(&a.seconds)
            .then_with(|| a.name.cmp(&b.name))
    });
    hooks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(t: u64, callback_ns: u64, flush_ns: u64) -> ProbeCost {
        ProbeCost {
            t,
            callback_ns,
            flush_ns,
            ..ProbeCost::default()
        }
    }

    #[test]
    fn a_window_gets_its_interpolated_share_of_the_counters() {
        // 10 ms of own time by t=100, 30 ms by t=200 (from 0 at t=0).
        let costs = [
            cost(100, 8_000_000, 2_000_000),
            cost(200, 20_000_000, 10_000_000),
        ];
        let s = |a, b| own_time_between(&costs, &[], 0, a, b).total_s;
        assert!((s(0, 100) - 0.010).abs() < 1e-12);
        assert!((s(100, 200) - 0.020).abs() < 1e-12);
        // Half of each interval.
        assert!((s(50, 150) - 0.015).abs() < 1e-12);
        // After the last record: nothing more is known.
        assert_eq!(s(200, 500), 0.0);
        assert_eq!(own_time_between(&[], &[], 0, 0, 100), OwnTime::default());
        // The callbacks' share: 8 ms of the first 10, 12 ms of the next 20.
        let c = |a, b| own_time_between(&costs, &[], 0, a, b).callbacks_s;
        assert!((c(0, 100) - 0.008).abs() < 1e-12);
        assert!((c(100, 200) - 0.012).abs() < 1e-12);
        // A probe before 0.2.2 counted no parts of its callbacks: not zeros.
        assert_eq!(
            own_time_between(&costs, &[], 0, 0, 200).callback_split,
            None
        );
    }

    #[test]
    fn the_callbacks_parts_are_read_off_their_own_counters() {
        let with = |t, launch_ns, module_ns, reading_ns| ProbeCost {
            launch_ns,
            module_ns,
            reading_ns,
            ..cost(t, 9_000_000, 0)
        };
        // By t=100: 1 ms of launches, 2 of module loads, 3 of readings;
        // by t=200: 4, 2 and 7.
        let costs = [
            with(100, 1_000_000, 2_000_000, 3_000_000),
            with(200, 4_000_000, 2_000_000, 7_000_000),
        ];
        let split = own_time_between(&costs, &[], 0, 100, 200)
            .callback_split
            .expect("counted");
        assert!((split.launches_s - 0.003).abs() < 1e-12);
        assert_eq!(split.module_loads_s, 0.0);
        assert!((split.readings_s - 0.004).abs() < 1e-12);
        // A probe before 0.2.3 did not time its caller walks: not zero.
        assert_eq!(split.caller_walks_s, None);
        let walked = [
            ProbeCost {
                walk_ns: 500_000,
                ..costs[0].clone()
            },
            ProbeCost {
                walk_ns: 2_500_000,
                ..costs[1].clone()
            },
        ];
        let split = own_time_between(&walked, &[], 0, 100, 200)
            .callback_split
            .expect("counted");
        assert!((split.caller_walks_s.expect("timed") - 0.002).abs() < 1e-12);
    }

    #[test]
    fn the_longest_callback_is_the_longest_named_by_a_tick_reaching_into_the_window() {
        let named = |t, ns, id| ProbeCost {
            slowest_callback_ns: ns,
            slowest_callback_id: id,
            launch_ns: 1,
            ..cost(t, 9_000_000, 0)
        };
        // Ticks (0,100], (100,200], (200,300], (300,400].
        let costs = [
            named(100, 9_000, 307),
            named(200, 2_000_000, 678),
            named(300, 0, 0),
            named(400, 30_000, 386),
        ];
        let longest = |a, b| {
            own_time_between(&costs, &[], 0, a, b)
                .callback_split
                .expect("counted")
                .longest_callback
        };
        let l = longest(150, 250).expect("one named");
        assert_eq!((l.id, l.name), (678, "cuLibraryLoadData"));
        assert!((l.seconds - 0.002).abs() < 1e-15);
        // (200,300] named none; (300,400] names cuDevicePrimaryCtxRetain.
        assert_eq!(longest(210, 290), None);
        assert_eq!(longest(250, 350).map(|l| l.id), Some(386));
        // The first tick runs from the process's start.
        assert_eq!(longest(0, 50).map(|l| l.id), Some(307));
        // Past the last record nothing is named.
        assert_eq!(longest(400, 500), None);
    }

    #[test]
    fn the_shims_time_is_its_lines_difference_and_unknown_past_its_last_line() {
        // 2 ms of hooks by step 1's start (t=100), 5 ms by its end (t=300).
        let shim = [
            ShimOwnTime {
                t: 100,
                own_ns: 2_000_000,
            },
            ShimOwnTime {
                t: 300,
                own_ns: 5_000_000,
            },
        ];
        let s = |a, b| own_time_between(&[], &shim, 0, a, b).shim_s;
        let close = |x: Option<f64>, want: f64| x.is_some_and(|x| (x - want).abs() < 1e-12);
        assert!(close(s(0, 100), 0.002));
        assert!(close(s(100, 300), 0.003));
        assert!(close(s(200, 300), 0.0015));
        // After its last line the shim's time is not known (not zero).
        assert_eq!(s(300, 400), None);
        assert_eq!(own_time_between(&[], &[], 0, 0, 100).shim_s, None);
        // The probe's figures do not depend on the shim's.
        assert_eq!(own_time_between(&[], &shim, 0, 100, 300).total_s, 0.0);
    }
}
