//! Splitting a process's life into setup, step 1, steps 2..N and teardown.
//!
//! Rule (docs/step-rule.md): step N ends when the primary optimizer finishes
//! its N-th `step()`. Step 1 begins where the shim placed it (first grad-enabled
//! forward of an optimizer-owned module after the last `zero_grad()` before the
//! first step). Explicit markers (`--step-marker`) override both: the k-th
//! matching range is step k.

use crate::load::shim::ShimEvent;
use serde::Serialize;

/// A phase of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Setup,
    Step1,
    Steady,
    Teardown,
}

impl Phase {
    /// The label used in reports.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Step1 => "step 1",
            Phase::Steady => "steps 2..N",
            Phase::Teardown => "after last step",
        }
    }

    /// All phases in order.
    pub const ALL: [Phase; 4] = [Phase::Setup, Phase::Step1, Phase::Steady, Phase::Teardown];
}

/// Phase boundaries on the monotonic clock (ns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Boundaries {
    pub start: u64,
    pub step1_begin: Option<u64>,
    /// End time of every step, in order (step 1 first).
    pub step_ends: Vec<u64>,
    pub end: u64,
    /// How step 1's start was found.
    pub rule: String,
}

impl Boundaries {
    /// Finds boundaries from shim events (or explicit markers when given).
    pub fn from_events(
        events: &[ShimEvent],
        use_markers: bool,
        start: u64,
        end: u64,
    ) -> Boundaries {
        if use_markers {
            let mut marks: Vec<(u64, u64)> = events
                .iter()
                .filter_map(|e| match e {
                    ShimEvent::Marker { t0, t1, .. } => Some((*t0, *t1)),
                    _ => None,
                })
                .collect();
            marks.sort();
            if !marks.is_empty() {
                return Boundaries {
                    start,
                    step1_begin: Some(marks[0].0),
                    step_ends: marks.iter().map(|m| m.1).collect(),
                    end: end.max(marks.last().map_or(0, |m| m.1)),
                    rule: "explicit step markers (--step-marker)".into(),
                };
            }
        }
        let mut step_ends: Vec<(u32, u64)> = events
            .iter()
            .filter_map(|e| match e {
                ShimEvent::StepEnd { t, step, .. } => Some((*step, *t)),
                _ => None,
            })
            .collect();
        step_ends.sort();
        let begin = events.iter().find_map(|e| match e {
            ShimEvent::Step1Begin { t, rule } => Some((*t, rule.clone())),
            _ => None,
        });
        let (step1_begin, rule) = match (begin, step_ends.first()) {
            (Some((t, rule)), _) => (Some(t), rule),
            (None, Some(_)) => (
                Some(start),
                "no step-1 start recorded: step 1 taken from process start".into(),
            ),
            (None, None) => (None, "no optimizer step seen".into()),
        };
        let last = step_ends.last().map_or(0, |s| s.1);
        Boundaries {
            start,
            step1_begin,
            step_ends: step_ends.into_iter().map(|s| s.1).collect(),
            end: end.max(last),
            rule,
        }
    }

    /// The phase a timestamp falls in.
    pub fn phase_of(&self, t: u64) -> Phase {
        let Some(b) = self.step1_begin else {
            return Phase::Setup;
        };
        if t < b {
            return Phase::Setup;
        }
        match (self.step_ends.first(), self.step_ends.last()) {
            (Some(&e1), _) if t <= e1 => Phase::Step1,
            (Some(_), Some(&last)) if t <= last => Phase::Steady,
            (Some(_), _) => Phase::Teardown,
            (None, _) => Phase::Step1,
        }
    }

    /// The step in progress at `t` (1-based), or None during setup. After the
    /// last recorded step end this is the step that never finished.
    pub fn step_of(&self, t: u64) -> Option<u32> {
        let b = self.step1_begin?;
        if t < b {
            return None;
        }
        let done = self.step_ends.partition_point(|&e| e < t);
        Some(done as u32 + 1)
    }

    /// Setup's wall time in ns (process start to step 1's start).
    pub fn setup_ns(&self) -> Option<u64> {
        self.step1_begin.map(|b| b.saturating_sub(self.start))
    }

    /// [start, end] of a phase, if it exists in this process.
    pub fn window(&self, phase: Phase) -> Option<(u64, u64)> {
        let b = self.step1_begin;
        let e1 = self.step_ends.first().copied();
        let last = self.step_ends.last().copied();
        match phase {
            Phase::Setup => Some((self.start, b.unwrap_or(self.end))),
            Phase::Step1 => b.map(|b| (b, e1.unwrap_or(self.end))),
            Phase::Steady => match (e1, last) {
                (Some(e1), Some(last)) if last > e1 => Some((e1, last)),
                _ => None,
            },
            Phase::Teardown => last.map(|l| (l, self.end)).filter(|(a, b)| b > a),
        }
    }

    /// Median duration of steps 2..N in ns (the steady-state step time).
    pub fn steady_step_ns(&self) -> Option<u64> {
        let mut d: Vec<u64> = self
            .step_ends
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .collect();
        if d.is_empty() {
            return None;
        }
        d.sort();
        Some(d[d.len() / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events() -> Vec<ShimEvent> {
        vec![
            ShimEvent::Step1Begin {
                t: 100,
                rule: "first-forward-after-zero-grad".into(),
            },
            ShimEvent::StepEnd {
                t: 200,
                step: 1,
                reserved: None,
                allocated: None,
                max_reserved: None,
                device_free: None,
                device_total: None,
            },
            ShimEvent::StepEnd {
                t: 230,
                step: 2,
                reserved: None,
                allocated: None,
                max_reserved: None,
                device_free: None,
                device_total: None,
            },
            ShimEvent::StepEnd {
                t: 270,
                step: 3,
                reserved: None,
                allocated: None,
                max_reserved: None,
                device_free: None,
                device_total: None,
            },
            ShimEvent::Marker {
                t0: 50,
                t1: 60,
                name: "step".into(),
            },
        ]
    }

    #[test]
    fn phases_follow_the_step_rule() {
        let b = Boundaries::from_events(&events(), false, 0, 300);
        assert_eq!(b.phase_of(99), Phase::Setup);
        assert_eq!(b.phase_of(100), Phase::Step1);
        assert_eq!(b.phase_of(200), Phase::Step1);
        assert_eq!(b.phase_of(201), Phase::Steady);
        assert_eq!(b.phase_of(271), Phase::Teardown);
        assert_eq!(b.window(Phase::Steady), Some((200, 270)));
        assert_eq!(b.steady_step_ns(), Some(40));
        assert_eq!(b.step_of(50), None);
        assert_eq!(b.step_of(150), Some(1));
        assert_eq!(b.step_of(201), Some(2));
        assert_eq!(b.step_of(280), Some(4));
    }

    #[test]
    fn markers_override() {
        let b = Boundaries::from_events(&events(), true, 0, 300);
        assert_eq!(b.step1_begin, Some(50));
        assert_eq!(b.step_ends, vec![60]);
        assert!(b.rule.contains("markers"));
    }

    #[test]
    fn no_steps_means_everything_is_setup() {
        let b = Boundaries::from_events(&[], false, 0, 300);
        assert_eq!(b.phase_of(250), Phase::Setup);
        assert_eq!(b.window(Phase::Step1), None);
    }
}
