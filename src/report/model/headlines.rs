//! The headline sentences every format opens with: a verdict's, or an
//! attempt's when there is no matrix.

use super::attempt::{AttemptView, RankView};
use super::matrix::VerdictView;
use crate::report::{bytes, seconds};
use serde::Serialize;

pub(super) fn headline_of_verdict(v: &VerdictView) -> HeadlineSentence {
    HeadlineSentence {
        subject: v.variant.clone(),
        class: Some(v.class),
        text: format!("{} ({}): {}", v.variant, v.label, v.headline),
    }
}

pub(super) fn headline_of_attempt(a: &AttemptView) -> Option<HeadlineSentence> {
    let r = a.worst_rank()?;
    if crate::report::no_step(&r.account) {
        return Some(headline_without_step(a, r));
    }
    let step1 = r.step1_s.map_or("step 1 was not reached".to_string(), |s| {
        format!("step 1 took {}", seconds(s))
    });
    let late = r.late_warmups().len();
    let oom = if r.forensics().is_empty() {
        String::new()
    } else {
        format!(
            "; it ran out of memory ({} failure(s))",
            r.forensics().len()
        )
    };
    Some(HeadlineSentence {
        subject: a.id(),
        class: None,
        text: format!(
            "{} ({}): {step1} with {} of lazy initialisation outside the pool; {late} warmup(s) still land after setup{oom}.",
            a.id(),
            r.label,
            bytes(r.step1_out_of_pool),
        ),
    })
}

/// The headline of a process whose step 1 could not be placed: its run is
/// one phase, "before any step" (docs/step-rule.md), not a setup with an
/// account "at the end of step 1".
fn headline_without_step(a: &AttemptView, r: &RankView) -> HeadlineSentence {
    let outside: u64 = r
        .account
        .phases
        .iter()
        .map(|p| p.out_of_pool_allocated + p.local_memory_growth)
        .sum();
    let oom = match r.forensics().len() {
        0 => String::new(),
        n => format!("; it ran out of memory ({n} failure(s))"),
    };
    HeadlineSentence {
        subject: a.id(),
        class: None,
        text: format!(
            "{} ({}): no step was placed, so the run is one phase, {}, with {} of lazy initialisation outside the pool{oom}.",
            a.id(),
            r.label,
            crate::report::BEFORE_ANY_STEP,
            bytes(outside),
        ),
    }
}

/// One sentence of the headline: what a prewarm moved and what it cost.
#[derive(Debug, Clone, Serialize)]
pub struct HeadlineSentence {
    /// The variant (matrix) or attempt ("variant/attempt") it is about.
    pub subject: String,
    /// The verdict's class, or None for a single run.
    pub class: Option<crate::analysis::verdict::VerdictClass>,
    /// The whole sentence.
    pub text: String,
}
