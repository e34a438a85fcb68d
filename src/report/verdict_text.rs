//! Phrasing of the structured verdicts (docs/verdicts.md) for every text
//! renderer: one headline sentence per prewarm (what it moved, what it cost),
//! its class with the confidence, then evidence lines. Plain text; callers
//! escape for their format.

use super::{bytes, fine_seconds, plural, seconds};
use crate::analysis::account::{
    FailedRequest, Forensic, GapAccount, GapPart, PartSource, PhaseAccount,
};
use crate::analysis::matrix::MatrixNote;
use crate::analysis::noise::{Change, Outcome, Quantity};
use crate::analysis::stats::Stat;
use crate::analysis::summary::{Exclusion, HeldSource};
use crate::analysis::verdict::Side;
use crate::analysis::verdict::costs::Costs;
use crate::analysis::verdict::{
    ClassComparison, Confidence, LaterComparison, Reason, Recommendation, Verdict, VerdictClass,
};
use crate::prewarm::catalog::EventClass;

/// The class as users read it.
pub fn class_label(c: VerdictClass) -> &'static str {
    match c {
        VerdictClass::Works => "works",
        VerdictClass::Partial => "partial",
        VerdictClass::NoEffect => "no effect",
        VerdictClass::Regression => "regression",
        VerdictClass::Inconclusive => "inconclusive",
    }
}

fn plus_bytes(d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    format!("{sign}{}", bytes(d.abs() as u64))
}

fn plus_seconds(d: f64) -> String {
    let sign = if d < 0.0 { "-" } else { "+" };
    format!("{sign}{}", seconds(d.abs()))
}

fn value(q: Quantity, v: f64) -> String {
    match q {
        Quantity::Bytes | Quantity::InferredBytes | Quantity::DeviceBytes => {
            bytes(v.max(0.0) as u64)
        }
        Quantity::Seconds if v == 0.0 => "0 s".into(),
        Quantity::Seconds => seconds(v),
        Quantity::Events => format!("{v:.0}"),
    }
}

fn delta(q: Quantity, d: f64) -> String {
    match q {
        Quantity::Bytes | Quantity::InferredBytes | Quantity::DeviceBytes => plus_bytes(d),
        Quantity::Seconds => plus_seconds(d),
        Quantity::Events => format!("{d:+.0}"),
    }
}

/// "median ±half-spread" for repeats, the median alone for one attempt.
fn stat(q: Quantity, s: Stat) -> String {
    if s.n > 1 && s.spread() > 0.0 {
        format!("{} ±{}", value(q, s.median), value(q, s.spread() / 2.0))
    } else {
        value(q, s.median)
    }
}

/// "10.45 s -> 9.02 s (-1.43 s, within noise 3.91 s)".
pub fn change_text(c: &Change) -> String {
    let q = c.quantity;
    let noise = match c.outcome {
        Outcome::Within => format!("within noise {}", value(q, c.noise)),
        Outcome::Up | Outcome::Down => format!("beyond noise {}", value(q, c.beyond())),
        Outcome::Unsure => format!(
            "noise {}-{} with one attempt: cannot tell",
            value(q, c.noise),
            value(q, c.noise * q.model().grey_factor)
        ),
    };
    format!(
        "{} -> {} ({}, {noise})",
        stat(q, c.baseline),
        stat(q, c.variant),
        delta(q, c.delta)
    )
}

fn targets_text(targets: &[EventClass]) -> String {
    let labels: Vec<&str> = targets.iter().map(|t| t.label()).collect();
    labels.join(", ")
}

/// What a verdict moved, as every format says it: "moved 128.3 MiB of
/// cuBLAS init out of step 1" (a figure within noise left out), or for an
/// inconclusive verdict "shows … less … but cannot be judged".
pub fn moved_text(v: &Verdict) -> String {
    // The classes that moved, not every class it targets (a prewarm that
    // targets NCCL init moves none where there is none).
    let moved_classes = if v.moved.classes.is_empty() {
        targets_text(&v.targets)
    } else {
        targets_text(&v.moved.classes)
    };
    let mut parts = Vec::new();
    if v.moved.bytes > 0.0 {
        parts.push(bytes(v.moved.bytes as u64));
    }
    if v.moved.seconds > 0.0 {
        parts.push(seconds(v.moved.seconds));
    }
    if !parts.is_empty() && v.class == VerdictClass::Inconclusive {
        return format!(
            "shows {} less of {moved_classes} in step 1 but cannot be judged on this run",
            parts.join(" and ")
        );
    }
    if !parts.is_empty() {
        return format!(
            "moved {} of {moved_classes} out of step 1",
            parts.join(" and ")
        );
    }
    if v.reasons.contains(&Reason::NothingToMove) {
        format!(
            "had nothing to move ({} is not in the baseline's step 1)",
            targets_text(&v.targets)
        )
    } else if v.class == VerdictClass::Inconclusive {
        "cannot be judged on this run".into()
    } else {
        "moved nothing out of step 1".into()
    }
}

/// The account's remainder as users read it: signed, and where it is above
/// 64 MiB, said to be not understood (never put into a part); where the
/// parts exceed the device beyond the floor, said to be over-explained.
pub fn unexplained_label(g: &GapAccount) -> String {
    let text = format!("unexplained {}", crate::units::signed_bytes(g.unexplained));
    match remainder_note(g) {
        Some(note) => format!("{text} ({note})"),
        None => text,
    }
}

/// What a remainder outside its bounds means, in the words every format
/// uses; None for one within them.
pub fn remainder_note(g: &GapAccount) -> Option<&'static str> {
    if g.not_understood {
        Some("not understood: device memory that no record explains")
    } else if g.over_explained() {
        Some(
            "over-explained: the parts add up to more than the device shows, so one of \
             their figures is off; other processes on the GPU changing their memory can do this",
        )
    } else {
        None
    }
}

/// One part of the memory outside the pool as users read it: "CUDA context
/// (incl. 148.5 MiB initial local memory)", "nccl", "module code (lazy
/// loading)" (the analysis gives the kind and the figures, never words).
pub fn part_label(p: &GapPart) -> String {
    match &p.source {
        PartSource::Context => {
            let d = p.context.unwrap_or_default();
            // 0: no first launch was seen (none happened, or kernel
            // records were off), so its reservation is not known.
            if d.initial_local_memory == 0 {
                return "CUDA context".into();
            }
            format!(
                "CUDA context (incl. {} initial local memory)",
                bytes(d.initial_local_memory)
            )
        }
        PartSource::Library(name) => name.clone(),
        PartSource::LocalMemoryGrowth => "local-memory growth".into(),
        PartSource::LocalMemoryDropped => {
            "local-memory reservation dropped by the failed launch".into()
        }
        PartSource::ReleasedAtFailure => {
            "other device memory released at the failed launch (not named)".into()
        }
        PartSource::NcclWithoutAllocations => {
            "NCCL init without allocation calls (kernel code)".into()
        }
        PartSource::ModuleCode => "module code (lazy loading)".into(),
        PartSource::Untraced => "untraced while CUPTI was detached".into(),
    }
}

/// The lazy initialisation that came before an out-of-memory failure, one
/// item per class ("cuBLAS init 128.3 MiB"), as every format lists it.
pub fn preceded_by_texts(f: &Forensic) -> Vec<String> {
    f.preceded_by
        .iter()
        .map(|(c, b)| {
            let outside = f.preceded_nccl_outside_comms;
            match c {
                EventClass::NcclComm if outside > 0 => format!(
                    "{} {} ({})",
                    c.label(),
                    bytes(*b),
                    super::comm_text::outside_comms_text(outside)
                ),
                _ => format!("{} {}", c.label(), bytes(*b)),
            }
        })
        .collect()
}

/// The failing request of an out-of-memory failure as users read it:
/// "cuMemAlloc_v2 of 128.0 MiB by torch pool", "local-memory growth of
/// 2.5 GiB for kernel rowwise_mix".
pub fn request_text(f: &Forensic) -> String {
    match &f.request {
        FailedRequest::LocalMemoryGrowth { kernel } => {
            format!(
                "local-memory growth of {} for kernel {kernel}",
                bytes(f.bytes)
            )
        }
        FailedRequest::Allocation { api } => {
            format!("{api} of {} by {}", bytes(f.bytes), f.source)
        }
        FailedRequest::NotSeen => "not seen by the probe (only the exception)".into(),
    }
}

fn source_label(s: &HeldSource) -> String {
    match s {
        HeldSource::Context => "CUDA context".into(),
        HeldSource::LocalMemory => "local memory".into(),
        HeldSource::LocalMemoryDropped => "dropped local-memory reservation".into(),
        HeldSource::WithoutRecords => {
            "device growth without allocation records (NCCL code, unexplained)".into()
        }
        HeldSource::Library(name) => name.clone(),
    }
}

/// The total held at step-1 end against the baseline, with its split by
/// source as the explanation: "+388.0 MiB held at step-1 end that the
/// baseline does not hold (nccl +388.0 MiB)", "no more out-of-pool memory
/// held at step-1 end than the baseline (+1.0 MiB, within noise 16.0 MiB;
/// CUDA context +70.0 MiB, without records -70.0 MiB)", or that it is
/// unknown. The charged figure is the total's; the parts never add to it.
fn held_text(c: &Costs) -> String {
    let Some(total) = &c.held_total_step1_end else {
        return "memory held at step-1 end unknown (no step-1 account on a side)".into();
    };
    let parts: Vec<String> = c
        .held_explained()
        .iter()
        .map(|h| format!("{} {}", source_label(&h.source), plus_bytes(h.delta)))
        .collect();
    let over_eager = c
        .nccl_communicators
        .filter(|n| n.is_up())
        .map(|n| {
            let extra = (n.variant.median - n.baseline.median).round();
            format!(
                "; over-eager: {extra:.0} NCCL communicator{} the training never creates",
                if extra == 1.0 { "" } else { "s" }
            )
        })
        .unwrap_or_default();
    if c.held_extra > 0.0 {
        return format!(
            "{} held at step-1 end that the baseline does not hold ({}{over_eager})",
            plus_bytes(c.held_extra),
            parts.join(", ")
        );
    }
    let why = if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join(", "))
    };
    let noise = match total.outcome {
        Outcome::Down => format!("beyond noise {}", value(total.quantity, total.beyond())),
        _ => format!("within noise {}", value(total.quantity, total.noise)),
    };
    format!(
        "no more out-of-pool memory held at step-1 end than the baseline ({}, {noise}{why}{over_eager})",
        plus_bytes(total.delta)
    )
}

/// The setup-time cost as the noise allows it to be stated: a change within
/// the noise of the two sides, or in the one-attempt model's grey zone, says so.
fn setup_text(c: &Costs) -> String {
    match &c.setup_s {
        Some(s) if s.outcome == Outcome::Within => {
            format!("setup {} (within noise)", plus_seconds(s.delta))
        }
        Some(s) if s.outcome == Outcome::Unsure => format!(
            "setup {} (in the noise model's grey zone)",
            plus_seconds(s.delta)
        ),
        Some(s) => format!("setup {}", plus_seconds(s.delta)),
        None => "setup time unknown".into(),
    }
}

/// One sentence: what it moved, what it cost.
pub fn headline(v: &Verdict) -> String {
    // What it left comes after its costs: the costs are the prewarm's,
    // not the left work's.
    let left: Vec<String> = v
        .reasons
        .iter()
        .filter_map(|r| {
            class_left_text(r)
                .or_else(|| left_after_text(r))
                .or_else(|| prescription_failed_text(r))
        })
        .collect();
    let left = if left.is_empty() {
        String::new()
    } else {
        format!("; {}", left.join("; "))
    };
    format!(
        "{}, at a cost of {} and {}{left}.",
        moved_text(v),
        setup_text(&v.costs),
        held_text(&v.costs)
    )
}

/// "steps 3 and 5", "step 2", "steps 2..N" (no step known).
pub fn steps_text(steps: &[u32]) -> String {
    let names: Vec<String> = steps.iter().map(|s| s.to_string()).collect();
    match names.split_last() {
        None => "steps 2..N".into(),
        Some((last, [])) => format!("step {last}"),
        Some((last, rest)) => format!("steps {} and {last}", rest.join(", ")),
    }
}

/// What a prewarm left after step 1 that it could have moved, as the
/// headline and the evidence say it: "2 Triton autotune keys still first
/// tuned at steps 3 and 5" (None for other reasons).
pub fn left_after_text(r: &Reason) -> Option<String> {
    let Reason::StillAfterStep1 {
        class,
        events,
        steps,
        ..
    } = r
    else {
        return None;
    };
    let n = events.variant.median.round().max(0.0) as u32;
    let what = match class {
        _ if n == 0 => format!("{} still lands", class.label()),
        EventClass::TritonAutotune => format!(
            "{} still first tuned",
            plural(n, "Triton autotune key", "Triton autotune keys")
        ),
        EventClass::Compile => format!("{} still", plural(n, "compile", "compiles")),
        EventClass::LocalMemory => format!(
            "{} still",
            plural(n, "local-memory growth", "local-memory growths")
        ),
        EventClass::NcclComm => format!(
            "{} still created",
            plural(n, "NCCL communicator", "NCCL communicators")
        ),
        EventClass::ModuleLoad => {
            format!("{} still first launched", plural(n, "kernel", "kernels"))
        }
        EventClass::Cublas => format!("{} still lands", class.label()),
    };
    Some(format!("{what} at {}", steps_text(steps)))
}

/// What one targeted class left in step 1, as the headline and the evidence
/// say it: "Triton autotune: 10 of 13 keys, 13.4 s of 19.3 s still in step
/// 1" (None for other reasons).
pub fn class_left_text(r: &Reason) -> Option<String> {
    let Reason::ClassStillInStep1 {
        class,
        bytes: b,
        seconds: s,
        events: e,
        ..
    } = r
    else {
        return None;
    };
    let count = |x: f64| x.round().max(0.0) as u32;
    let (left, of) = (count(e.variant.median), count(e.baseline.median));
    let noun = match class {
        EventClass::TritonAutotune => "keys",
        EventClass::Compile => "compiles",
        EventClass::LocalMemory => "growths",
        EventClass::NcclComm => "communicators",
        EventClass::ModuleLoad => "kernels first launched",
        EventClass::Cublas => "calls",
    };
    let mut figures = Vec::new();
    if of > 0 {
        figures.push(format!("{left} of {of} {noun}"));
    }
    let of_text = |q: Quantity, c: &Change| {
        format!(
            "{} of {}",
            value(q, c.variant.median),
            value(q, c.baseline.median)
        )
    };
    if b.baseline.median > 0.0 {
        figures.push(of_text(Quantity::Bytes, b));
    }
    if s.baseline.median > 0.0 {
        figures.push(of_text(Quantity::Seconds, s));
    }
    Some(format!(
        "{}: {} still in step 1",
        class.label(),
        figures.join(", ")
    ))
}

/// "the prescription failed 10 time(s) (each listed under the run's
/// problems)" (None for other reasons).
pub fn prescription_failed_text(r: &Reason) -> Option<String> {
    let Reason::PrescriptionFailed { failures } = r else {
        return None;
    };
    Some(format!(
        "the prescription failed {failures} time(s): not all it says was warmed (each failure is listed with the run's problems)"
    ))
}

/// The class, with how far it can be trusted (and what to run when it cannot).
pub fn class_line(v: &Verdict) -> String {
    let label = class_label(v.class).to_uppercase();
    let a = &v.attempts;
    let how = match v.confidence {
        Confidence::Measured => format!(
            "noise measured over {} baseline and {} variant attempts",
            a.baseline_step1, a.variant_step1
        ),
        Confidence::Modelled => format!(
            "{} baseline and {} variant attempt(s): noise from the model in docs/verdicts.md (--repeat {} measures it)",
            a.baseline_step1,
            a.variant_step1,
            crate::analysis::verdict::rules::RECOMMENDED_REPEAT
        ),
        Confidence::Unknown => match v.recommendation {
            Some(r) => recommendation_text(r),
            None => "cannot be judged".into(),
        },
    };
    format!("{label} ({how})")
}

/// What to run to settle an inconclusive verdict.
pub fn recommendation_text(r: Recommendation) -> String {
    match r {
        Recommendation::Repeat { attempts } => {
            format!("run the matrix again with --repeat {attempts} to settle it")
        }
        Recommendation::IsolateCaches => "run the matrix again with --cache cold".into(),
    }
}

fn side(s: Side) -> &'static str {
    match s {
        Side::Baseline => "baseline",
        Side::Variant => "variant",
    }
}

fn quantity_word(q: Quantity) -> &'static str {
    match q {
        Quantity::Bytes | Quantity::InferredBytes | Quantity::DeviceBytes => "bytes",
        Quantity::Seconds => "time",
        Quantity::Events => "events",
    }
}

/// One reason as a sentence (None for one the headline already says).
pub fn reason_text(r: &Reason) -> Option<String> {
    Some(match r {
        Reason::MovedOut { .. } => return None,
        Reason::UnknownPrewarm { name } => {
            format!("'{name}' is not in the prewarm catalog: judged on every event class")
        }
        Reason::NoUsableAttempts { side: s } => format!(
            "no {} attempt counts (all were excluded, or none reached step 1)",
            side(*s)
        ),
        Reason::NewFailures {
            variant_failed,
            variant_attempts,
            ..
        } => format!(
            "new failures: {variant_failed} of {variant_attempts} attempt(s) of this variant failed, no baseline attempt did"
        ),
        Reason::FailuresFixed {
            baseline_failed,
            baseline_attempts,
        } => format!(
            "{baseline_failed} of {baseline_attempts} baseline attempt(s) failed; none of this variant's did"
        ),
        Reason::CachesNotIsolated { classes } => format!(
            "the caches were not isolated and it targets {}, which a warm cache changes",
            targets_text(classes)
        ),
        Reason::TargetedIncrease { change } => format!(
            "more of what it targets lands in step 1: targeted {} {}",
            quantity_word(change.quantity),
            change_text(change)
        ),
        Reason::NetMemoryLoss {
            held_extra,
            moved_bytes,
            ..
        } => format!(
            "net memory loss: it keeps {} at step-1 end that the baseline does not, more than the {} of requests it moved out of step 1",
            bytes(*held_extra as u64),
            bytes(*moved_bytes as u64)
        ),
        Reason::NoiseUnknown { change } => {
            format!("targeted time {}", change_text(change))
        }
        Reason::NothingToMove => {
            "none of what it targets lands in the baseline's step 1: nothing to move".into()
        }
        Reason::MovedNothing {
            bytes: b,
            seconds: s,
        } => format!(
            "enabled but moved nothing: targeted bytes {}; targeted time {}",
            change_text(b),
            change_text(s)
        ),
        Reason::StillInStep1 { change, share } => format!(
            "{} of the targeted {} still lands in step 1 ({:.0}% of the baseline's)",
            value(change.quantity, change.variant.median),
            quantity_word(change.quantity),
            share * 100.0
        ),
        Reason::ClassStillInStep1 { .. } => class_left_text(r).unwrap_or_default(),
        Reason::PrescriptionFailed { .. } => prescription_failed_text(r).unwrap_or_default(),
        Reason::StillAfterStep1 {
            class,
            bytes: b,
            seconds: s,
            share,
            ..
        } => {
            let mut figures = Vec::new();
            if b.variant.median > 0.0 {
                figures.push(value(Quantity::Bytes, b.variant.median));
            }
            if s.variant.median > 0.0 {
                figures.push(value(Quantity::Seconds, s.variant.median));
            }
            format!(
                "{} left after step 1 that the baseline has too: {} ({}, {:.0}% of the baseline's in steps 2..N)",
                class.label(),
                left_after_text(r).unwrap_or_default(),
                figures.join(", "),
                share * 100.0
            )
        }
        Reason::ClassIncreased { class, change } => format!(
            "{} rose in step 1: {} {}",
            class.label(),
            quantity_word(change.quantity),
            change_text(change)
        ),
    })
}

/// One side of a class row: "128.3 MiB, 116.3 ms, 6 events" (bytes and time
/// only where either side has some).
fn side_text(
    bytes: &Change,
    seconds: &Change,
    events: &Change,
    pick: fn(&Change) -> Stat,
) -> String {
    let some = |x: &Change| x.baseline.max > 0.0 || x.variant.max > 0.0;
    let mut parts = Vec::new();
    if some(bytes) {
        parts.push(stat(Quantity::Bytes, pick(bytes)));
    }
    if some(seconds) {
        parts.push(stat(Quantity::Seconds, pick(seconds)));
    }
    let events = pick(events);
    let unit = if events.median == 1.0 && events.spread() == 0.0 {
        "event"
    } else {
        "events"
    };
    parts.push(format!("{} {unit}", stat(Quantity::Events, events)));
    parts.join(", ")
}

/// "cuBLAS init in step 1: 128.3 MiB, 6 events -> 0 B, 0 events".
fn class_row(c: &ClassComparison) -> String {
    let side = |pick: fn(&Change) -> Stat| side_text(&c.bytes, &c.seconds, &c.events, pick);
    format!(
        "{} in step 1: {} -> {}",
        c.class.label(),
        side(|x| x.baseline),
        side(|x| x.variant)
    )
}

/// "Triton autotune in steps 2..N: 631.0 ms, 2 events (steps 3 and 5) ->
/// 619.2 ms, 2 events (steps 3 and 5)" (None when neither side has any).
fn later_row(c: &LaterComparison) -> Option<String> {
    let some = |x: &Change| x.baseline.max > 0.0 || x.variant.max > 0.0;
    if !some(&c.bytes) && !some(&c.seconds) && !some(&c.events) {
        return None;
    }
    let side = |pick: fn(&Change) -> Stat, steps: &[u32]| {
        let at = if steps.is_empty() {
            String::new()
        } else {
            format!(" ({})", steps_text(steps))
        };
        format!("{}{at}", side_text(&c.bytes, &c.seconds, &c.events, pick))
    };
    Some(format!(
        "{} in steps 2..N: {} -> {}",
        c.class.label(),
        side(|x| x.baseline, &c.baseline_steps),
        side(|x| x.variant, &c.variant_steps)
    ))
}

fn cost_lines(c: &Costs) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(s) = &c.setup_s {
        out.push(format!("cost: setup time {}", change_text(s)));
    }
    out.push(format!("cost: {}", held_text(c)));
    if let Some(n) = c.nccl_communicators.filter(|n| n.is_up()) {
        out.push(format!(
            "cost: NCCL communicators {:.0} -> {:.0}: it creates {:.0} the baseline never does",
            n.baseline.median, n.variant.median, n.delta
        ));
    }
    if let Some(p) = c.pool_reserved_step1_end.filter(|p| p.is_up()) {
        out.push(format!(
            "cost: PyTorch pool reserve at step-1 end {} (cached blocks the pool gives back under pressure)",
            change_text(&p)
        ));
    }
    out
}

fn context_line(c: &Costs) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(s) = &c.step1_s {
        parts.push(format!("step-1 time {}", change_text(s)));
    }
    if let Some(p) = &c.step1_device_peak {
        parts.push(format!("step-1 device peak {}", change_text(p)));
    }
    (!parts.is_empty()).then(|| {
        format!(
            "context, not judged (includes classes it does not target): {}",
            parts.join("; ")
        )
    })
}

/// The evidence under the class line: per targeted class, reasons, costs, context.
pub fn evidence_lines(v: &Verdict) -> Vec<String> {
    let mut out: Vec<String> = v.by_class.iter().map(class_row).collect();
    out.extend(v.later_by_class.iter().filter_map(later_row));
    out.extend(v.reasons.iter().filter_map(reason_text));
    out.extend(cost_lines(&v.costs));
    out.extend(context_line(&v.costs));
    out
}

/// Why an attempt was left out.
pub fn exclusion_text(e: &Exclusion) -> String {
    match e {
        Exclusion::Warmup => "cache warm-up run (untimed)".into(),
        Exclusion::Interrupted => {
            "interrupted (a signal stopped it, or it recorded no exit status)".into()
        }
        Exclusion::NotStarted => "the command could not be started".into(),
        Exclusion::Damaged { problems } => {
            let files: Vec<String> = problems
                .iter()
                .map(|p| format!("{}: {}", p.file, p.what))
                .collect();
            format!("damaged files: {}", files.join("; "))
        }
    }
}

/// A matrix note as a sentence.
pub fn note_text(n: &MatrixNote) -> String {
    match n {
        MatrixNote::CachesNotIsolated { cache } => format!(
            "cache mode '{cache}': variants did not run on isolated caches, so earlier variants warmed later ones; prewarms of classes a cache changes are not judged (use --cache cold or warm)"
        ),
        MatrixNote::AttemptsMissing {
            variant,
            recorded,
            expected,
        } => format!(
            "variant '{variant}' has {recorded} of {expected} attempts (the run was stopped early)"
        ),
        MatrixNote::AttemptsFailed { variant, failed } => format!(
            "variant '{variant}': {failed} attempt(s) exited with an error; their figures count up to the failure"
        ),
        MatrixNote::NotJudged { variant } => format!(
            "variant '{variant}' names no known prewarm (see `prewarm-doctor run --help`): compared, but not judged"
        ),
    }
}

/// The matrix notes as sentences, variants with the same number of missing
/// attempts named in one sentence ("variants 'a' and 'b' have 2 of 3 attempts").
pub fn note_texts(notes: &[MatrixNote]) -> Vec<String> {
    let mut out = Vec::new();
    let mut missing: Vec<((u32, u32), Vec<&str>)> = Vec::new();
    for n in notes {
        match n {
            MatrixNote::AttemptsMissing {
                variant,
                recorded,
                expected,
            } => match missing
                .iter_mut()
                .find(|(k, _)| *k == (*recorded, *expected))
            {
                Some((_, names)) => names.push(variant),
                None => missing.push(((*recorded, *expected), vec![variant])),
            },
            other => out.push(note_text(other)),
        }
    }
    let mut first = Vec::new();
    for ((recorded, expected), names) in missing {
        let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        let text = match quoted.split_last() {
            Some((last, [])) => format!("variant {last} has"),
            Some((last, rest)) => format!("variants {} and {last} have", rest.join(", ")),
            None => continue,
        };
        first.push(format!(
            "{text} {recorded} of {expected} attempts (the run was stopped early)"
        ));
    }
    first.extend(out);
    first
}

/// The doctor's own time in step 1, as every format says it. The probe's
/// callbacks and the shim's hooks run inside the training's calls, so they
/// are inside step 1's time and its parts (the training waited for them),
/// not a part of their own; the rest of the probe's ran on its threads
/// beside the training (said from 0.5 ms on). CUPTI's own work in the
/// driver is in neither and no record times it, so the line says so: on an
/// H100 the doctor's whole step-1 cost measured several times these
/// (docs/footprint.md). The shim's is said where its lines give it.
pub fn doctor_in_step1(ph: &PhaseAccount) -> String {
    let mut text = format!(
        "the probe: callbacks {} inside step 1's time",
        seconds(ph.probe_callbacks_s)
    );
    if let Some(s) = &ph.probe_callbacks_split {
        text += &callback_split_text(s);
    }
    let beside = ph.probe_s - ph.probe_callbacks_s;
    if beside >= 0.5e-3 {
        text += &format!(", {} on its threads beside the training", seconds(beside));
    }
    text += ", CUPTI's own work in the driver not counted";
    if let Some(shim) = ph.shim_s {
        text += &format!("; the shim: hooks {} inside step 1's time", seconds(shim));
    }
    text
}

/// The callbacks' parts in words: the watch's and the module loads'
/// callbacks, then what runs inside callbacks of every kind (the caller
/// walks only where the probe timed them, 0.2.3 on), then the longest
/// single callback where the probe named it (0.2.3 on).
fn callback_split_text(s: &crate::analysis::own_time::CallbackSplit) -> String {
    let walks = s.caller_walks_s.map_or(String::new(), |w| {
        format!(" and caller walks {}", seconds(w))
    });
    let longest = s.longest_callback.map_or(String::new(), |l| {
        format!("; the longest one {}, {}", fine_seconds(l.seconds), l.name)
    });
    format!(
        " (first-launch watch {}, module loads {}; free-memory readings {}{walks} across \
         them{longest})",
        seconds(s.launches_s),
        seconds(s.module_loads_s),
        seconds(s.readings_s)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::account::ContextDetail;

    #[test]
    fn the_caller_walks_are_said_only_where_the_probe_timed_them() {
        let mut split = crate::analysis::own_time::CallbackSplit {
            launches_s: 0.0007,
            module_loads_s: 0.0043,
            readings_s: 0.0039,
            caller_walks_s: None,
            longest_callback: None,
        };
        assert_eq!(
            callback_split_text(&split),
            " (first-launch watch 0.7 ms, module loads 4.3 ms; free-memory readings 3.9 ms across them)"
        );
        split.caller_walks_s = Some(0.0101);
        assert_eq!(
            callback_split_text(&split),
            " (first-launch watch 0.7 ms, module loads 4.3 ms; free-memory readings 3.9 ms \
             and caller walks 10.1 ms across them)"
        );
        split.longest_callback = Some(crate::analysis::own_time::LongestCallback {
            seconds: 0.000_762,
            id: 386,
            name: "cuDevicePrimaryCtxRetain",
        });
        assert_eq!(
            callback_split_text(&split),
            " (first-launch watch 0.7 ms, module loads 4.3 ms; free-memory readings 3.9 ms \
             and caller walks 10.1 ms across them; the longest one 762 µs, cuDevicePrimaryCtxRetain)"
        );
    }
    use crate::analysis::verdict::tests::{arb_case, buckets_verdict, judge_case, phantom_verdict};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Every verdict is phrased with its costs, whatever the class, and
        /// the memory held is never called "none extra" where it is unknown.
        #[test]
        fn every_verdict_is_phrased_with_its_costs_and_never_contradicts(
            (base, var, prewarm, isolated) in arb_case()
        ) {
            let v = judge_case(&base, &var, prewarm, isolated);
            let text = headline(&v);
            prop_assert!(text.contains("at a cost of"), "{}", text);
            let lines = evidence_lines(&v);
            prop_assert!(lines.iter().any(|l| l.starts_with("cost: ")), "{:?}", lines);
            if v.costs.held_total_step1_end.is_none() {
                prop_assert!(text.contains("memory held at step-1 end unknown"), "{}", text);
                prop_assert!(!text.contains("no more out-of-pool"), "{}", text);
            }
            // A setup change is never stated as a plain cost where the noise
            // does not carry it.
            if let Some(c) = v.costs.setup_s {
                let said = plus_seconds(c.delta);
                match c.outcome {
                    Outcome::Within => prop_assert!(
                        text.contains(&format!("setup {said} (within noise)")), "{}", text
                    ),
                    Outcome::Unsure => prop_assert!(
                        text.contains(&format!("setup {said} (in the noise model's grey zone)")),
                        "{}", text
                    ),
                    _ => {}
                }
            }
        }
    }

    /// Parts over the device beyond the floor are said to be off; a few MiB
    /// over (NVML's per-process figure on a shared GPU) is shown signed,
    /// plainly, and a large remainder is not understood.
    #[test]
    fn a_remainder_outside_its_bounds_is_worded_as_what_it_means() {
        let with_parts = |named_mib: u64| {
            let part = GapPart {
                source: PartSource::Library("cublas".into()),
                context: None,
                bytes: (named_mib << 20) as i64,
                inferred: false,
            };
            GapAccount::new(1.0, 1100 << 20, 500 << 20, vec![part])
        };
        let over = unexplained_label(&with_parts(664));
        assert!(
            over.starts_with("unexplained -64.0 MiB (over-explained: the parts add up"),
            "{over}"
        );
        assert_eq!(unexplained_label(&with_parts(608)), "unexplained -8.0 MiB");
        let large = unexplained_label(&with_parts(500));
        assert!(large.contains("(not understood: "), "{large}");
    }

    #[test]
    fn a_context_whose_first_launch_was_not_seen_claims_no_reservation() {
        let context = |initial_local_memory| GapPart {
            source: PartSource::Context,
            context: Some(ContextDetail {
                initial_local_memory,
            }),
            bytes: 535 << 20,
            inferred: false,
        };
        assert_eq!(
            part_label(&context(148 << 20)),
            "CUDA context (incl. 148.0 MiB initial local memory)"
        );
        assert_eq!(part_label(&context(0)), "CUDA context");
    }

    /// Issue 15's phantom: one part +70 MiB, another −70 MiB. The text says
    /// the total did not grow and shows the split as its explanation.
    #[test]
    fn a_relabelled_part_is_explained_not_charged() {
        let v = phantom_verdict();
        let text = headline(&v);
        assert!(text.contains("no more out-of-pool memory held at step-1 end than the baseline (+0 B, within noise"), "{text}");
        assert!(text.contains("CUDA context +70.0 MiB"), "{text}");
        assert!(text.contains("without allocation records"), "{text}");
        assert!(!text.contains("that the baseline does not hold"), "{text}");
    }

    /// The shape-bucket defect: a prewarm that warms only the first bucket
    /// says what it left and where, in the headline and the evidence; one
    /// that names NCCL among its targets never claims to have moved it.
    #[test]
    fn a_class_left_in_step1_is_named_with_what_is_left() {
        let v = crate::analysis::verdict::tests::keys_left_verdict();
        let said = "Triton autotune: 10 of 13 keys, 13.40 s of 19.30 s still in step 1";
        let text = headline(&v);
        assert!(text.ends_with(&format!("; {said}.")), "{text}");
        assert!(
            evidence_lines(&v).iter().any(|l| l == said),
            "{:#?}",
            evidence_lines(&v)
        );
    }

    #[test]
    fn work_left_after_step1_is_said_with_its_steps() {
        let v = buckets_verdict(&["triton_autotune"], 0.619);
        assert_eq!(v.class, VerdictClass::Partial);
        let text = headline(&v);
        assert!(
            text.contains("; 2 Triton autotune keys still first tuned at steps 3 and 5."),
            "{text}"
        );
        let lines = evidence_lines(&v);
        assert!(
            lines.iter().any(|l| l
                == "Triton autotune in steps 2..N: 631.0 ms, 2 events (steps 3 and 5) -> 619.0 ms, 2 events (steps 3 and 5)"),
            "{lines:#?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with(
                "Triton autotune left after step 1 that the baseline has too: 2 Triton autotune keys still first tuned at steps 3 and 5 (619.0 ms, 98% of the baseline's"
            )),
            "{lines:#?}"
        );
        let v = buckets_verdict(&["triton_autotune", "nccl_comm"], 0.0);
        assert_eq!(v.class, VerdictClass::Works);
        let text = moved_text(&v);
        assert!(
            text.ends_with("of Triton autotune, local-memory growth, compile out of step 1"),
            "{text}"
        );
        assert!(!text.contains("NCCL"), "{text}");
        assert_eq!(steps_text(&[2]), "step 2");
        assert_eq!(steps_text(&[2, 3, 5]), "steps 2, 3 and 5");
        assert_eq!(steps_text(&[]), "steps 2..N");
    }
}
