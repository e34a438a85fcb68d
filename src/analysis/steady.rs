//! The steady step: what a training step costs once nothing is left to
//! initialise, the figure step 1 is held against (docs/step-rule.md). A step
//! 2..N that autotuned a new shape, created a communicator or loaded modules
//! is itself a step with lazy initialisation: its duration would make the
//! steady figure, and so step 1's ratio to it, say less than the truth.

use super::account::{LocalMemoryEvent, SteadyBasis};
use super::framework_joins::StallWindows;
use super::phases::Boundaries;
use super::stats::Stat;

/// The steady step of one process and what it was taken over.
#[derive(Debug, Clone, PartialEq)]
pub struct Steady {
    /// The median duration, in seconds (the mean of the middle two for an
    /// even count).
    pub seconds: f64,
    /// How many steps the median is over.
    pub steps: u32,
    pub basis: SteadyBasis,
    /// Steps 2..N that held lazy initialisation, in order.
    pub lazy_steps: Vec<u32>,
    /// The (begin, end) of each step the median is over, so a figure per
    /// step (the shim's own time) can be taken over the same steps.
    pub windows: Vec<(u64, u64)>,
}

/// The steady step over the finished steps 2..N: the median of those that
/// held no lazy initialisation (no compile, autotune, NCCL, cuBLAS or
/// module-load window overlaps them, no local-memory growth in them); of
/// all of them, said so, when none was free of it. None without a finished
/// step 2.
pub fn steady_step(
    bounds: &Boundaries,
    stalls: &StallWindows,
    local: &[LocalMemoryEvent],
) -> Option<Steady> {
    let steps = bounds.later_steps();
    let grew = |k: u32| local.iter().any(|l| !l.failed && l.step == Some(k));
    let lazy = |(k, (a, b)): &(u32, (u64, u64))| stalls.overlaps(*a, *b) || grew(*k);
    let (lazy_steps, free): (Vec<_>, Vec<_>) = steps.iter().partition(|s| lazy(s));
    let (basis, over) = match (lazy_steps.is_empty(), free.is_empty()) {
        (true, _) => (SteadyBasis::EveryStep, &free),
        (false, false) => (SteadyBasis::FreeSteps, &free),
        (false, true) => (SteadyBasis::NoStepFree, &lazy_steps),
    };
    let durations: Vec<f64> = over
        .iter()
        .map(|(_, (a, b))| b.saturating_sub(*a) as f64 / 1e9)
        .collect();
    let median = Stat::of(&durations)?;
    Some(Steady {
        seconds: median.median,
        steps: median.n,
        basis,
        lazy_steps: lazy_steps.iter().map(|s| s.0).collect(),
        windows: over.iter().map(|(_, w)| *w).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::phases::Phase;

    /// Step 1 ends at 100 ms, steps 2..5 take 10, 40, 12, 30 ms.
    fn five_steps() -> Boundaries {
        Boundaries {
            start: 0,
            step1_begin: Some(0),
            step_ends: vec![100, 110, 150, 162, 192]
                .into_iter()
                .map(|ms| ms * 1_000_000)
                .collect(),
            end: 200_000_000,
            rule: "test".into(),
            died: None,
        }
    }

    fn growth(step: u32, failed: bool) -> LocalMemoryEvent {
        LocalMemoryEvent {
            t_s: 0.0,
            phase: Phase::Steady,
            step: Some(step),
            kernel: "k".into(),
            before: 0,
            after: 1,
            device_growth: 1,
            registers: 0,
            per_thread: 0,
            failed,
            autotune_config: None,
        }
    }

    #[test]
    fn steps_with_lazy_initialisation_are_left_out_of_the_median() {
        // An autotune inside step 3 (110-150 ms), a local-memory growth in step 5.
        let stalls = StallWindows {
            autotune: vec![(120_000_000, 140_000_000)],
            ..Default::default()
        };
        let s = steady_step(&five_steps(), &stalls, &[growth(5, false)]).unwrap();
        assert_eq!(s.basis, SteadyBasis::FreeSteps);
        assert_eq!(s.lazy_steps, vec![3, 5]);
        assert_eq!(s.steps, 2);
        // A true median: (10 + 12) / 2, not the upper of the two.
        assert!((s.seconds - 0.011).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn without_lazy_initialisation_every_step_counts() {
        // A failed growth grew nothing; a window touching a step's end
        // without overlapping it is not in the step.
        let stalls = StallWindows {
            module: vec![(192_000_000, 195_000_000)],
            ..Default::default()
        };
        let s = steady_step(&five_steps(), &stalls, &[growth(4, true)]).unwrap();
        assert_eq!((s.basis, s.steps), (SteadyBasis::EveryStep, 4));
        assert!(s.lazy_steps.is_empty());
        assert!((s.seconds - 0.021).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn when_every_later_step_held_lazy_initialisation_all_of_them_count() {
        let stalls = StallWindows {
            cublas: vec![(105_000_000, 191_000_000)],
            ..Default::default()
        };
        let s = steady_step(&five_steps(), &stalls, &[]).unwrap();
        assert_eq!((s.basis, s.steps), (SteadyBasis::NoStepFree, 4));
        assert_eq!(s.lazy_steps, vec![2, 3, 4, 5]);
        assert!((s.seconds - 0.021).abs() < 1e-12, "{s:?}");
        // One step, or none after step 1: no steady step.
        let mut one = five_steps();
        one.step_ends.truncate(1);
        assert_eq!(steady_step(&one, &stalls, &[]), None);
    }
}
