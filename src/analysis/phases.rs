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
    /// When the process died: its first uncaught exception on the main
    /// thread ([`died_at`]). A death after the last step end falls in the
    /// step that never finished, not after the last step.
    pub died: Option<u64>,
}

/// When the process died: the first uncaught exception the shim recorded on
/// the main thread (one in another thread ends that thread, not the
/// process). None when it recorded none (it ended normally, or was killed
/// without Python's exception hook running).
pub fn died_at(events: &[ShimEvent]) -> Option<u64> {
    events.iter().find_map(|e| match e {
        ShimEvent::Exception {
            t, thread: None, ..
        } => Some(*t),
        _ => None,
    })
}

/// Seconds from `start` to `t` (0 before it): how the account places an
/// event for a reader.
pub fn secs(t: u64, start: u64) -> f64 {
    t.saturating_sub(start) as f64 / 1e9
}

impl Boundaries {
    /// Seconds from the process's start to `t`.
    pub fn seconds_in(&self, t: u64) -> f64 {
        secs(t, self.start)
    }

    /// For tests: step 1 from 1 s, steps ending at 2.5 s and 4 s, the end at 5 s.
    #[cfg(test)]
    pub fn two_steps() -> Boundaries {
        Boundaries {
            start: 0,
            step1_begin: Some(1_000_000_000),
            step_ends: vec![2_500_000_000, 4_000_000_000],
            end: 5_000_000_000,
            rule: "synthetic".into(),
            died: None,
        }
    }

    /// Finds boundaries from shim events (or explicit markers when given).
    pub fn from_events(
        events: &[ShimEvent],
        use_markers: bool,
        start: u64,
        end: u64,
    ) -> Boundaries {
        let died = died_at(events);
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
                    died,
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
        let first_end = step_ends.first().map(|s| s.1);
        let (step1_begin, rule) = match (begin, placed_from_records(events, first_end)) {
            (Some((t, rule)), _) => (Some(t), rule),
            (None, Some((t, rule))) => (Some(t), rule),
            (None, None) if first_end.is_some() => (
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
            died,
        }
    }

    /// The step the process died in: the one in progress at its death
    /// (after the last step end, or in step 1 before any), which never
    /// finished. None when it did not die, or died in setup.
    pub fn died_in_step(&self) -> Option<u32> {
        let d = self.died?;
        let after_last = self.step_ends.last().is_none_or(|&l| d > l);
        self.step_of(d).filter(|_| after_last)
    }

    /// True when the process died after step 1 ended, before its next step
    /// end: steps 2..N then run to the process's end (the step it died in
    /// included), and there is no "after the last step".
    pub fn died_mid_step(&self) -> bool {
        self.died_in_step().is_some_and(|k| k >= 2)
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
            (Some(_), Some(&last)) if t <= last || self.died_mid_step() => Phase::Steady,
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

    /// The step in progress at `t`: [`Boundaries::step_of`], but None after
    /// the last step end (no step runs then, unless the process died in the
    /// next one: [`Boundaries::died_mid_step`]).
    pub fn step_in_progress(&self, t: u64) -> Option<u32> {
        self.step_of(t)
            .filter(|_| self.phase_of(t) != Phase::Teardown)
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
                (Some(e1), _) if self.died_mid_step() => Some((e1, self.end)),
                (Some(e1), Some(last)) if last > e1 => Some((e1, last)),
                _ => None,
            },
            Phase::Teardown => last
                .filter(|_| !self.died_mid_step())
                .map(|l| (l, self.end))
                .filter(|(a, b)| b > a),
        }
    }

    /// Each finished step 2..N with its window (the previous step's end,
    /// its own end]: the steps the steady step is taken over (steady.rs).
    pub fn later_steps(&self) -> Vec<(u32, (u64, u64))> {
        (2..)
            .zip(self.step_ends.windows(2))
            .map(|(k, w)| (k, (w[0], w[1])))
            .collect()
    }
}

/// Places step 1 by the documented rule from the shim's `zero_grad` and
/// `first_forward` records, for a process whose shim wrote no `step1_begin`
/// (it died before its first optimizer step without running Python's exception
/// hook). Only records before the first step end (`before`) count. The primary
/// optimizer is the one that called `zero_grad()` last, else the first whose
/// module ran a forward.
fn placed_from_records(events: &[ShimEvent], before: Option<u64>) -> Option<(u64, String)> {
    let early = |t: u64| before.is_none_or(|b| t < b);
    let zero_grads: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            ShimEvent::ZeroGrad { t, opt } if early(*t) => Some((*t, *opt)),
            _ => None,
        })
        .collect();
    let forwards: Vec<(u64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            ShimEvent::FirstForward { t, opt, .. } if early(*t) => Some((*t, *opt)),
            _ => None,
        })
        .collect();
    let last_zero = zero_grads.iter().max_by_key(|z| z.0).copied();
    let primary = last_zero
        .map(|z| z.1)
        .or_else(|| forwards.iter().min_by_key(|f| f.0).map(|f| f.1))?;
    let suffix = if before.is_some() {
        " (placed from the shim's forward and zero_grad records)"
    } else {
        " (no optimizer step finished; placed from the shim's forward and zero_grad records)"
    };
    let first_forward_from = |from: u64| {
        forwards
            .iter()
            .filter(|f| f.1 == primary && f.0 >= from)
            .map(|f| f.0)
            .min()
    };
    match last_zero {
        Some((z, _)) => Some(match first_forward_from(z) {
            Some(t) => (t, format!("first-forward-after-zero-grad{suffix}")),
            None => (z, format!("last-zero-grad{suffix}")),
        }),
        None => first_forward_from(0).map(|t| (t, format!("first-forward{suffix}"))),
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
            ShimEvent::step_end_at(200, 1),
            ShimEvent::step_end_at(230, 2),
            ShimEvent::step_end_at(270, 3),
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
        assert_eq!(b.later_steps(), vec![(2, (200, 230)), (3, (230, 270))]);
        assert_eq!(b.step_of(50), None);
        assert_eq!(b.step_of(150), Some(1));
        assert_eq!(b.step_of(201), Some(2));
        assert_eq!(b.step_of(280), Some(4));
        assert_eq!(b.step_in_progress(280), None);
        assert_eq!(b.step_in_progress(250), Some(3));
    }

    #[test]
    fn markers_override() {
        let b = Boundaries::from_events(&events(), true, 0, 300);
        assert_eq!(b.step1_begin, Some(50));
        assert_eq!(b.step_ends, vec![60]);
        assert!(b.rule.contains("markers"));
    }

    // Synthetic shim records (not a recording): a process that ran a prewarm
    // forward, zeroed its gradients, started step 1 and died in it before
    // any optimizer step, without a `step1_begin` line.
    fn died_in_step_one() -> Vec<ShimEvent> {
        vec![
            ShimEvent::FirstForward {
                t: 10,
                opt: 0,
                after_zero_grad: false,
            },
            ShimEvent::ZeroGrad { t: 40, opt: 0 },
            ShimEvent::FirstForward {
                t: 50,
                opt: 0,
                after_zero_grad: true,
            },
        ]
    }

    #[test]
    fn a_process_that_dies_before_its_first_step_still_gets_step_one() {
        let b = Boundaries::from_events(&died_in_step_one(), false, 0, 300);
        assert_eq!(b.step1_begin, Some(50));
        assert!(
            b.rule
                .starts_with("first-forward-after-zero-grad (no optimizer step finished")
        );
        assert_eq!(b.step_in_progress(299), Some(1), "step 1 runs to the end");
        assert_eq!(b.phase_of(45), Phase::Setup);
        assert_eq!(b.phase_of(200), Phase::Step1);
        assert_eq!(b.step_of(200), Some(1));
        assert_eq!(b.window(Phase::Setup), Some((0, 50)));
        assert_eq!(b.window(Phase::Step1), Some((50, 300)));
        assert_eq!(b.setup_ns(), Some(50));
    }

    #[test]
    fn the_fallback_follows_the_rule_order() {
        // zero_grad after the step pattern: no zero_grad before the death,
        // so the first owning forward places step 1.
        let only_forward = vec![ShimEvent::FirstForward {
            t: 10,
            opt: 1,
            after_zero_grad: false,
        }];
        let b = Boundaries::from_events(&only_forward, false, 0, 300);
        assert_eq!(b.step1_begin, Some(10));
        assert!(
            b.rule
                .starts_with("first-forward (no optimizer step finished")
        );
        // A functional model: zero_grad but no module forward.
        let only_zero = vec![ShimEvent::ZeroGrad { t: 70, opt: 0 }];
        let b = Boundaries::from_events(&only_zero, false, 0, 300);
        assert_eq!(b.step1_begin, Some(70));
        assert!(b.rule.starts_with("last-zero-grad"));
        // The optimizer that zeroed last is the primary: another optimizer's
        // forward after it does not place step 1.
        let two = vec![
            ShimEvent::ZeroGrad { t: 40, opt: 0 },
            ShimEvent::FirstForward {
                t: 45,
                opt: 1,
                after_zero_grad: false,
            },
            ShimEvent::FirstForward {
                t: 60,
                opt: 0,
                after_zero_grad: true,
            },
        ];
        assert_eq!(
            Boundaries::from_events(&two, false, 0, 300).step1_begin,
            Some(60)
        );
    }

    #[test]
    fn the_shims_own_placement_wins_over_the_records() {
        let mut ev = died_in_step_one();
        ev.push(ShimEvent::Step1Begin {
            t: 55,
            rule:
                "first-forward-after-zero-grad (the process died before its first optimizer step)"
                    .into(),
        });
        let b = Boundaries::from_events(&ev, false, 0, 300);
        assert_eq!(b.step1_begin, Some(55));
        assert!(b.rule.contains("died before"));
    }

    fn exception(t: u64, thread: Option<&str>) -> ShimEvent {
        ShimEvent::Exception {
            t,
            kind: "OutOfMemoryError".into(),
            message: "CUDA out of memory".into(),
            where_: Vec::new(),
            thread: thread.map(str::to_string),
            pool_reserved: None,
            pool_allocated: None,
        }
    }

    #[test]
    fn a_process_that_dies_after_a_step_dies_in_the_next_one() {
        // Steps 1-3 end at 200, 230, 270; the exception at 280 is in step 4.
        let mut ev = events();
        ev.push(exception(280, None));
        let b = Boundaries::from_events(&ev, false, 0, 300);
        assert_eq!(b.died_in_step(), Some(4));
        assert!(b.died_mid_step());
        assert_eq!(b.phase_of(280), Phase::Steady);
        assert_eq!(b.phase_of(299), Phase::Steady);
        assert_eq!(b.step_in_progress(299), Some(4));
        assert_eq!(b.window(Phase::Steady), Some((200, 300)));
        assert_eq!(b.window(Phase::Teardown), None);
        // Only step 1 ended: steps 2..N is the step it died in.
        let mut ev = events();
        ev.retain(|e| !matches!(e, ShimEvent::StepEnd { step, .. } if *step > 1));
        ev.push(exception(250, None));
        let b = Boundaries::from_events(&ev, false, 0, 300);
        assert_eq!(b.died_in_step(), Some(2));
        assert_eq!(b.window(Phase::Steady), Some((200, 300)));
        assert_eq!(b.phase_of(250), Phase::Steady);
        assert_eq!(b.step_of(250), Some(2));
    }

    #[test]
    fn a_thread_that_dies_after_the_last_step_leaves_the_teardown() {
        let mut ev = events();
        ev.push(exception(280, Some("pin_memory")));
        let b = Boundaries::from_events(&ev, false, 0, 300);
        assert_eq!(b.died, None);
        assert_eq!(b.died_in_step(), None);
        assert_eq!(b.phase_of(280), Phase::Teardown);
        assert_eq!(b.window(Phase::Teardown), Some((270, 300)));
        // A death in step 1 is the unfinished step 1, not steps 2..N.
        let mut ev = died_in_step_one();
        ev.push(exception(250, None));
        let b = Boundaries::from_events(&ev, false, 0, 300);
        assert_eq!((b.died_in_step(), b.died_mid_step()), (Some(1), false));
        assert_eq!(b.window(Phase::Steady), None);
    }

    #[test]
    fn no_steps_means_everything_is_setup() {
        let b = Boundaries::from_events(&[], false, 0, 300);
        assert_eq!(b.phase_of(250), Phase::Setup);
        assert_eq!(b.window(Phase::Step1), None);
    }
}
