//! The words for a communicator prewarm's per-group verdict
//! (analysis/verdict/comms.rs): one evidence line per process group, added to
//! the prewarm's verdict evidence, so every format that shows the evidence
//! (terminal, Markdown, HTML, dashboard) names the groups it moved, missed or
//! created needlessly; and what NCCL allocated outside every communicator's
//! init, which the NCCL class's figures hold and no group's do, wherever the
//! two stand side by side.

use super::{bytes, seconds};
use crate::analysis::account::{CommGroup, NamedBy, PhaseAccount};
use crate::analysis::verdict::comms::{CommVerdict, GroupOutcome, GroupSide, OutsideComms};

/// Ranks as a short list: `0,1,2` or, for a contiguous run of four or more,
/// `0-7`.
fn ranks_text(ranks: &[u32]) -> String {
    let contiguous = ranks.windows(2).all(|w| w[1] == w[0] + 1);
    match ranks {
        [] => "not recorded".into(),
        [first, .., last] if contiguous && ranks.len() >= 4 => format!("{first}-{last}"),
        _ => ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// A group as the reports name it: torch's description (`mesh_ep`,
/// `clip_expert`), else torch's group number, else only its members.
pub fn group_label(g: &CommGroup) -> String {
    let members = format!("ranks {}", ranks_text(&g.ranks));
    let members = match (g.named_by, g.nranks) {
        // Members from commId are the ranks captured; say when some are missing.
        (NamedBy::CommId, Some(n)) if (g.ranks.len() as u32) < n => {
            format!("{members} of {n}")
        }
        _ => members,
    };
    match (&g.desc, &g.name) {
        (Some(d), _) if d == "default_pg" => format!("default group ({members})"),
        (Some(d), _) => format!("{d} ({members})"),
        (None, Some(n)) => format!("group {n} ({members})"),
        (None, None) => members,
    }
}

fn side_text(s: &GroupSide) -> String {
    let mut parts = Vec::new();
    if s.in_steps > 0 {
        let when = s
            .first_step
            .map_or("after setup".to_string(), |n| format!("from step {n}"));
        parts.push(format!("{} in the steps ({when})", s.in_steps));
    }
    if s.at_setup > 0 {
        parts.push(format!("{} at setup", s.at_setup));
    }
    if parts.is_empty() {
        return "none".into();
    }
    format!(
        "{}; {}, {} init",
        parts.join(", "),
        bytes(s.bytes),
        seconds(s.init_s)
    )
}

fn outcome_text(o: GroupOutcome) -> &'static str {
    match o {
        GroupOutcome::Moved => "moved to setup",
        GroupOutcome::PartlyMoved => "partly moved",
        GroupOutcome::Missed => "MISSED (still created lazily in a step)",
        GroupOutcome::Needless => "created needlessly (training never creates it)",
        GroupOutcome::AlreadyAtSetup => "already at setup in the baseline",
        GroupOutcome::NewInSteps => "new in the steps (the baseline never creates it)",
    }
}

/// NCCL's bytes outside every communicator's init, beside a figure that
/// includes them: "2.0 MiB of it outside any communicator's init".
pub fn outside_comms_text(b: u64) -> String {
    format!("{} of it outside any communicator's init", bytes(b))
}

/// What a phase's out-of-pool figure of `source` holds outside every
/// communicator's init: the `nccl` source's, when it has any.
pub fn outside_note(ph: &PhaseAccount, source: &str) -> Option<String> {
    (source == "nccl" && ph.nccl_outside_comms > 0)
        .then(|| outside_comms_text(ph.nccl_outside_comms))
}

/// One side of the outside line: "2.0 MiB in the steps", "none".
fn outside_side_text(o: &OutsideComms) -> String {
    let mut parts = Vec::new();
    if o.after_setup > 0 {
        parts.push(format!("{} in the steps", bytes(o.after_setup)));
    }
    if o.at_setup > 0 {
        parts.push(format!("{} at setup", bytes(o.at_setup)));
    }
    if parts.is_empty() {
        return "none".into();
    }
    parts.join(", ")
}

/// The line that says what the NCCL class's bytes hold beyond its groups'
/// (NCCL's allocations outside every communicator's init), when either
/// side has any.
fn outside_line(v: &CommVerdict) -> Option<String> {
    let (b, w) = (&v.outside_baseline, &v.outside_variant);
    if *b == OutsideComms::default() && *w == OutsideComms::default() {
        return None;
    }
    Some(format!(
        "NCCL allocations outside any communicator's init (in the NCCL class's bytes, in no \
         group's): {} -> {}",
        outside_side_text(b),
        outside_side_text(w)
    ))
}

/// One line per group: what the prewarm did to it, baseline -> variant;
/// then NCCL's allocations outside every communicator's init, if any.
pub fn group_lines(v: &CommVerdict) -> Vec<String> {
    let mut lines = per_group_lines(v);
    lines.extend(outside_line(v));
    lines
}

/// One line per group (see [`group_lines`]).
fn per_group_lines(v: &CommVerdict) -> Vec<String> {
    v.groups
        .iter()
        .map(|g| {
            let extra = match (g.outcome, g.extra) {
                (GroupOutcome::Needless, _) | (_, 0) => String::new(),
                (_, n) => format!(", {n} more than the baseline creates (needless)"),
            };
            format!(
                "NCCL group {}: {}{extra}; communicators: {} -> {}",
                group_label(&g.group),
                outcome_text(g.outcome),
                side_text(&g.baseline),
                side_text(&g.variant)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::comms::GroupVerdict;

    fn group(desc: Option<&str>, ranks: &[u32], by: NamedBy, nranks: u32) -> CommGroup {
        CommGroup {
            desc: desc.map(str::to_string),
            name: None,
            ranks: ranks.to_vec(),
            nranks: Some(nranks),
            named_by: by,
        }
    }

    #[test]
    fn labels_name_the_mesh_dimension_or_the_members() {
        assert_eq!(
            group_label(&group(Some("mesh_ep"), &[0, 1], NamedBy::Torch, 2)),
            "mesh_ep (ranks 0,1)"
        );
        assert_eq!(
            group_label(&group(
                None,
                &(0..8).collect::<Vec<_>>(),
                NamedBy::CommId,
                8
            )),
            "ranks 0-7"
        );
        // A node whose capture is missing: the members seen, of how many.
        assert_eq!(
            group_label(&group(None, &[0], NamedBy::CommId, 2)),
            "ranks 0 of 2"
        );
    }

    #[test]
    fn a_missed_group_says_so_with_its_cost() {
        let v = CommVerdict {
            variant: "nccl_comm".into(),
            prewarms: vec!["nccl_comm".into()],
            groups: vec![GroupVerdict {
                group: group(Some("clip_expert"), &[0, 1], NamedBy::Torch, 2),
                outcome: GroupOutcome::Missed,
                extra: 0,
                baseline: GroupSide {
                    in_steps: 1,
                    first_step: Some(1),
                    bytes: 558 << 20,
                    init_s: 0.33,
                    ranks: 2,
                    ..GroupSide::default()
                },
                variant: GroupSide {
                    in_steps: 1,
                    first_step: Some(1),
                    bytes: 558 << 20,
                    init_s: 0.31,
                    ranks: 2,
                    ..GroupSide::default()
                },
            }],
            outside_baseline: OutsideComms::default(),
            outside_variant: OutsideComms::default(),
        };
        let lines = group_lines(&v);
        assert_eq!(
            lines,
            [
                "NCCL group clip_expert (ranks 0,1): MISSED (still created lazily in a step); communicators: 1 in the steps (from step 1); 558.0 MiB, 330.0 ms init -> 1 in the steps (from step 1); 558.0 MiB, 310.0 ms init"
            ]
        );
    }

    #[test]
    fn allocations_outside_every_init_are_said_after_the_groups() {
        let v = CommVerdict {
            variant: "nccl_comm".into(),
            prewarms: vec!["nccl_comm".into()],
            groups: Vec::new(),
            outside_baseline: OutsideComms {
                at_setup: 0,
                after_setup: 2 << 20,
            },
            outside_variant: OutsideComms {
                at_setup: 2 << 20,
                after_setup: 0,
            },
        };
        assert_eq!(
            group_lines(&v),
            [
                "NCCL allocations outside any communicator's init (in the NCCL class's bytes, in no group's): 2.0 MiB in the steps -> 2.0 MiB at setup"
            ]
        );
    }
}
