//! A process's steps and the exceptions it died with, in the words every
//! format uses (terminal, Markdown, HTML, the dashboard): how many steps ran
//! and the one it died in, the steady step and what it is the median of,
//! and each exception with where it was raised. One wording, so that
//! tests/parity.rs finds the same fact in each.

use super::verdict_text::steps_text;
use super::{BEFORE_ANY_STEP, phase_word, seconds};
use crate::analysis::account::{ExceptionEvent, SteadyBasis, StepInfo};

/// Longest exception message a report quotes, ending in … when cut (the
/// JSON keeps it whole; torch names the pool's unused cache after its first
/// 200 characters).
pub const MESSAGE_WIDTH: usize = 700;

/// "5 steps", "1 step", "1 step, then died in step 2": the steps that ended,
/// and the one the process died in (docs/step-rule.md).
pub fn steps_done(s: &StepInfo) -> String {
    let done = match s.count {
        0 => "no optimizer step finished".to_string(),
        1 => "1 step".to_string(),
        n => format!("{n} steps"),
    };
    match s.died_in_step {
        Some(k) if k >= 2 => format!("{done}, then died in step {k}"),
        _ => done,
    }
}

/// "8.6 ms per steady step (217x; the median of 2 of 4 steps 2..N: steps 3
/// and 5 held lazy init)": the steady step, step 1's ratio to it, and which
/// steps it is the median of when not every step 2..N. None without one.
pub fn steady_text(s: &StepInfo) -> Option<String> {
    let steady = s.steady_step_s?;
    let ratio = s.step1_s.map(|s1| ratio_text(s1 / steady.max(1e-9)));
    let parts: Vec<String> = ratio.into_iter().chain(steady_basis(s)).collect();
    let paren = if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    };
    Some(format!("{} per steady step{paren}", seconds(steady)))
}

/// "217x", "6.3x", "0.8x": one decimal below 10, where a whole number
/// would say 0x or 1x for a step 1 no slower than a steady step.
fn ratio_text(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.1}x")
    } else {
        format!("{r:.0}x")
    }
}

/// Which steps the steady step is the median of, when not all of 2..N.
fn steady_basis(s: &StepInfo) -> Option<String> {
    let later = s.count.saturating_sub(1);
    match s.steady_basis? {
        SteadyBasis::EveryStep => None,
        SteadyBasis::FreeSteps => Some(format!(
            "the median of {} of {later} steps 2..N: {} held lazy init",
            s.steady_steps,
            steps_text(&s.lazy_steps)
        )),
        SteadyBasis::NoStepFree => Some(format!(
            "no step 2..N was free of lazy init: the median of all {later}"
        )),
    }
}

/// "RuntimeError: OrderedDict mutated during iteration": the exception's
/// type and the first line of its message (at most [`MESSAGE_WIDTH`]).
pub fn exception_text(e: &ExceptionEvent) -> String {
    let first = e.message.lines().next().unwrap_or_default().trim();
    let first = super::shorten(first, MESSAGE_WIDTH);
    match (e.kind.is_empty(), first.is_empty()) {
        (_, true) => e.kind.clone(),
        (true, false) => first,
        (false, false) => format!("{}: {first}", e.kind),
    }
}

/// "in step 3 at 4.45s", "before any step at 123.13s" (a thread's: "in
/// thread pin_memory, step 3 at 4.45s"): where an exception was raised, by
/// phase and time.
pub fn exception_place(no_step: bool, e: &ExceptionEvent) -> String {
    let phase = phase_word(no_step, e.phase, e.step);
    let place = match &e.thread {
        Some(t) => format!("in thread {t}, {phase}"),
        None if phase == BEFORE_ANY_STEP => phase,
        None => format!("in {phase}"),
    };
    format!("{place} at {:.2}s", e.t_s)
}

/// The traceback's frames as recorded, most recent call last ("a.py:44
/// <module> > b.py:39 main"); None when the shim recorded none.
pub fn raised_at(e: &ExceptionEvent) -> Option<String> {
    (!e.where_.is_empty()).then(|| e.where_.join(" > "))
}

/// "setup", "step 3", ... — or, for a process that never reached an
/// optimizer step, "the run (no step placed)" (it may have died in step 1).
pub fn step_label_in(
    p: &crate::analysis::account::ProcessAccount,
    phase: crate::analysis::phases::Phase,
    step: Option<u32>,
) -> String {
    use crate::analysis::phases::Phase;
    match (phase, step) {
        (Phase::Setup, _) if p.steps.step1_s.is_none() => "the run (no step placed)".into(),
        (Phase::Setup, _) => "setup".into(),
        (_, Some(n)) => format!("step {n}"),
        (ph, None) => ph.label().into(),
    }
}

/// What every format says of a process's capture beside its figures: that
/// it was off, and why, each warning of its probe (what it saw less of),
/// then its notes (what it stopped tracing, and when).
pub fn capture_notes(p: &crate::analysis::account::ProcessAccount) -> Vec<String> {
    let mut notes = Vec::new();
    if !p.capture.active {
        notes.push(format!(
            "capture: OFF — {} (the run itself was not affected)",
            p.capture.detail
        ));
    }
    let placed = |kind: &str, n: &crate::analysis::account::ProbeNote| {
        format!(
            "probe {kind} ({}, at {:.2}s): {}",
            step_label_in(p, n.phase, n.step),
            n.t_s,
            n.text
        )
    };
    notes.extend(p.capture.warnings.iter().map(|w| placed("warning", w)));
    notes.extend(p.capture.notes.iter().map(|n| placed("note", n)));
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::phases::Phase;

    fn steps(count: u32, basis: SteadyBasis, lazy: &[u32]) -> StepInfo {
        StepInfo {
            count,
            rule: String::new(),
            setup_s: Some(1.0),
            step1_s: Some(1.0),
            steady_step_s: Some(0.01),
            steady_steps: count - 1 - lazy.len() as u32,
            steady_basis: Some(basis),
            steady_shim_s: None,
            steady_shim_first_steps: 0,
            lazy_steps: lazy.to_vec(),
            died_in_step: None,
        }
    }

    #[test]
    fn the_steady_step_says_which_steps_it_is_the_median_of() {
        let all = steps(5, SteadyBasis::EveryStep, &[]);
        assert_eq!(steady_text(&all).unwrap(), "10.0 ms per steady step (100x)");
        let some = steps(5, SteadyBasis::FreeSteps, &[3, 5]);
        assert_eq!(
            steady_text(&some).unwrap(),
            "10.0 ms per steady step (100x; the median of 2 of 4 steps 2..N: steps 3 and 5 held lazy init)"
        );
        let none = StepInfo {
            steady_steps: 4,
            ..steps(5, SteadyBasis::NoStepFree, &[2, 3, 4, 5])
        };
        let slow = StepInfo {
            steady_step_s: Some(1.25),
            ..all.clone()
        };
        assert_eq!(steady_text(&slow).unwrap(), "1.25 s per steady step (0.8x)");
        assert!(
            steady_text(&none)
                .unwrap()
                .ends_with("(100x; no step 2..N was free of lazy init: the median of all 4)")
        );
    }

    #[test]
    fn the_steps_say_the_one_a_process_died_in() {
        let mut s = steps(1, SteadyBasis::EveryStep, &[]);
        assert_eq!(steps_done(&s), "1 step");
        s.died_in_step = Some(2);
        assert_eq!(steps_done(&s), "1 step, then died in step 2");
        s.count = 4;
        s.died_in_step = None;
        assert_eq!(steps_done(&s), "4 steps");
    }

    #[test]
    fn an_exception_is_said_with_its_type_first_line_place_and_frames() {
        let e = ExceptionEvent {
            t_s: 4.449,
            phase: Phase::Steady,
            step: Some(3),
            thread: None,
            kind: "RuntimeError".into(),
            message: "OrderedDict mutated\nduring iteration".into(),
            where_: vec!["a.py:1 main".into(), "b.py:2 step".into()],
            pool_reserved: None,
            pool_allocated: None,
        };
        assert_eq!(exception_text(&e), "RuntimeError: OrderedDict mutated");
        assert_eq!(exception_place(false, &e), "in step 3 at 4.45s");
        assert_eq!(raised_at(&e).unwrap(), "a.py:1 main > b.py:2 step");
        let thread = ExceptionEvent {
            thread: Some("loader".into()),
            phase: Phase::Teardown,
            step: None,
            where_: Vec::new(),
            ..e
        };
        assert_eq!(
            exception_place(false, &thread),
            "in thread loader, after last step at 4.45s"
        );
        assert_eq!(raised_at(&thread), None);
        let no_step = ExceptionEvent {
            thread: None,
            phase: Phase::Setup,
            ..thread
        };
        assert_eq!(exception_place(true, &no_step), "before any step at 4.45s");
    }
}
