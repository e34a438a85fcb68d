//! The words for a communicator prewarm's per-group verdict
//! (analysis/verdict_comms.rs): one evidence line per process group, added to
//! the prewarm's verdict evidence, so every format that shows the evidence
//! (terminal, Markdown, HTML, dashboard) names the groups it moved, missed or
//! created needlessly.

use super::{bytes, seconds};
use crate::analysis::account::{CommGroup, NamedBy};
use crate::analysis::verdict_comms::{CommVerdict, GroupOutcome, GroupSide};

/// Ranks as a short list: `0,1,2` or, for a contiguous run of four or more,
/// `0-7`.
fn ranks_text(ranks: &[u32]) -> String {
    let contiguous = ranks.windows(2).all(|w| w[1] == w[0] + 1);
    match ranks {
        [] => "?".into(),
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

/// One line per group: what the prewarm did to it, baseline -> variant.
pub fn group_lines(v: &CommVerdict) -> Vec<String> {
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
    use crate::analysis::verdict_comms::GroupVerdict;

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
        };
        let lines = group_lines(&v);
        assert_eq!(
            lines,
            [
                "NCCL group clip_expert (ranks 0,1): MISSED (still created lazily in a step); communicators: 1 in the steps (from step 1); 558.0 MiB, 330.0 ms init -> 1 in the steps (from step 1); 558.0 MiB, 310.0 ms init"
            ]
        );
    }
}
