//! A process's steps in the words every format uses (terminal, Markdown,
//! HTML): how many steps ran and the one it died in. One wording, so that
//! tests/parity.rs finds the same fact in each.

use crate::analysis::account::StepInfo;

/// "5 steps", "1 step", "1 step, then died in step 2": the steps that ended,
/// and the one the process died in (docs/step-rule.md).
pub fn steps_done(s: &StepInfo) -> String {
    let done = match s.count {
        1 => "1 step".to_string(),
        n => format!("{n} steps"),
    };
    match s.died_in_step {
        Some(k) if k >= 2 => format!("{done}, then died in step {k}"),
        _ => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steps_say_the_one_a_process_died_in() {
        let mut s = StepInfo {
            count: 1,
            rule: String::new(),
            setup_s: Some(1.0),
            step1_s: Some(1.0),
            steady_step_s: None,
            died_in_step: None,
        };
        assert_eq!(steps_done(&s), "1 step");
        s.died_in_step = Some(2);
        assert_eq!(steps_done(&s), "1 step, then died in step 2");
        s.count = 4;
        s.died_in_step = None;
        assert_eq!(steps_done(&s), "4 steps");
    }
}
