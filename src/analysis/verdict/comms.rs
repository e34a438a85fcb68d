//! A communicator prewarm's verdict per process group: which groups it moved
//! out of the training steps into setup, which it missed (still created lazily
//! in a step), and which it created needlessly (groups the baseline never
//! creates a communicator for). The class-level verdict (verdict/judge.rs) says how
//! much NCCL init left step 1; this says where, so an incomplete prewarm
//! (the expert or pipeline group it did not know about) or an over-eager one
//! (a pair group training never uses) is named. Data only; docs/verdicts.md.

use super::targets_of;
use crate::analysis::AttemptAccount;
use crate::analysis::account::{CommAccount, CommGroup, ProcessAccount};
use crate::analysis::phases::Phase;
use crate::analysis::ranks::{first_highest, is_rank, most_step1_out_of_pool};
use crate::analysis::summary::VariantSummary;
use crate::prewarm::catalog::EventClass;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a prewarm did to one group's communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupOutcome {
    /// Created in a step in the baseline, only at setup with the prewarm.
    Moved,
    /// Fewer step-time creations than the baseline, but some remain.
    PartlyMoved,
    /// Still created in a step as often as in the baseline.
    Missed,
    /// Created at setup by the prewarm; the baseline never creates it.
    Needless,
    /// Already created at setup in the baseline: nothing to move.
    AlreadyAtSetup,
    /// Created in a step with the prewarm only (the prewarm changed training).
    NewInSteps,
}

/// One group's communicators on one side (variant), over the ranks and
/// attempts that count: creations are the most any rank made in one attempt,
/// bytes and init time the median over attempts of one rank's (see
/// `attempt_sides`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GroupSide {
    /// Communicators created during setup.
    pub at_setup: u32,
    /// Communicators created after setup (in a step or teardown).
    pub in_steps: u32,
    /// The first step that created one (None: none after setup).
    pub first_step: Option<u32>,
    /// NCCL's device bytes for this group's communicators on the worst rank
    /// (allocations in the init windows plus the inferred growth).
    pub bytes: u64,
    /// NCCL's init time for them on the worst rank, seconds.
    pub init_s: f64,
    /// Ranks that created one.
    pub ranks: u32,
}

/// One group's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupVerdict {
    pub group: CommGroup,
    pub outcome: GroupOutcome,
    /// Communicators of this group the variant creates beyond the baseline's
    /// count: needless ones where a group cannot be told apart from another
    /// of the same members (no torch name, e.g. the default group and a clip
    /// group of one rank).
    pub extra: u32,
    pub baseline: GroupSide,
    pub variant: GroupSide,
}

/// NCCL's allocations outside every communicator's init on one side, the
/// worst rank's (docs/verdicts.md §1), median over attempts: in the NCCL
/// class's bytes, in no group's, so the difference between the two is said
/// (on the H200 recordings a 2 MiB allocation before the first init).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct OutsideComms {
    pub at_setup: u64,
    /// In a step or after the last one.
    pub after_setup: u64,
}

/// A communicator prewarm's verdict per group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommVerdict {
    pub variant: String,
    pub prewarms: Vec<String>,
    pub groups: Vec<GroupVerdict>,
    pub outside_baseline: OutsideComms,
    pub outside_variant: OutsideComms,
}

impl CommVerdict {
    /// The groups with this outcome.
    pub fn with(&self, outcome: GroupOutcome) -> impl Iterator<Item = &GroupVerdict> {
        self.groups.iter().filter(move |g| g.outcome == outcome)
    }
}

type Key = (Option<String>, Vec<u32>);

fn key_of(g: &CommGroup) -> Key {
    (g.desc.clone(), g.ranks.clone())
}

type Sides = BTreeMap<Key, (CommGroup, GroupSide)>;

/// One rank's communicators by group: how many at setup and after it, the
/// first step that created one, their bytes and init time.
fn rank_sides(comms: &[CommAccount]) -> Sides {
    let mut mine: Sides = BTreeMap::new();
    for c in comms {
        let Some(g) = &c.group else { continue };
        let s = &mut mine
            .entry(key_of(g))
            .or_insert_with(|| (g.clone(), GroupSide::default()))
            .1;
        if c.phase == Some(Phase::Setup) {
            s.at_setup += 1;
        } else {
            s.in_steps += 1;
            s.first_step = earliest(s.first_step, c.step);
        }
        s.bytes += c.bytes + c.inferred_bytes;
        s.init_s += c.init_seconds.unwrap_or(0.0);
    }
    mine
}

/// The earlier of two first steps (None: no step created one).
fn earliest(a: Option<u32>, b: Option<u32>) -> Option<u32> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Folds one side's creations into `out`'s entry for group `k`: the most
/// of each count, the earliest first step; the entry, for the rest.
fn merge_counts<'a>(
    out: &'a mut Sides,
    k: &Key,
    g: &CommGroup,
    s: &GroupSide,
) -> &'a mut GroupSide {
    let t = &mut out
        .entry(k.clone())
        .or_insert_with(|| (g.clone(), GroupSide::default()))
        .1;
    t.at_setup = t.at_setup.max(s.at_setup);
    t.in_steps = t.in_steps.max(s.in_steps);
    t.first_step = earliest(t.first_step, s.first_step);
    t
}

/// Per group, one attempt's figures from each rank's communicators (`ranks`,
/// in process order; `worst` indexes the attempt's worst rank, §1):
/// creations the most any rank made; bytes and init time one rank's, never
/// a mix: the worst rank's where it created one of the group's, else the
/// member's with the most of the group's bytes (the first of equals), so a
/// group's figures come from the rank its class figures come from.
fn attempt_sides(ranks: &[&[CommAccount]], worst: Option<usize>) -> Sides {
    let per_rank: Vec<Sides> = ranks.iter().map(|c| rank_sides(c)).collect();
    let mut out: Sides = BTreeMap::new();
    for (k, (g, s)) in per_rank.iter().flatten() {
        merge_counts(&mut out, k, g, s).ranks += 1;
    }
    for (k, (_, t)) in out.iter_mut() {
        let of = |i: usize| per_rank[i].get(k).map(|x| &x.1);
        let members = (0..per_rank.len()).filter(|&i| of(i).is_some());
        let pick = worst
            .filter(|&w| w < per_rank.len() && of(w).is_some())
            .or_else(|| first_highest(members, |i| of(i).map(|s| s.bytes)));
        if let Some(s) = pick.and_then(of) {
            (t.bytes, t.init_s) = (s.bytes, s.init_s);
        }
    }
    out
}

/// Where among an attempt's processes its worst rank (§1) is.
fn worst_index(a: &AttemptAccount) -> Option<usize> {
    let ranks: Vec<&ProcessAccount> = a.processes.iter().filter(|p| is_rank(p)).collect();
    let worst = most_step1_out_of_pool(&ranks)?;
    a.processes.iter().position(|p| std::ptr::eq(p, worst))
}

/// One attempt's NCCL allocations outside every communicator's init, on its
/// worst rank.
fn attempt_outside(a: &AttemptAccount) -> OutsideComms {
    let mut out = OutsideComms::default();
    let Some(p) = worst_index(a).map(|i| &a.processes[i]) else {
        return out;
    };
    for ph in &p.phases {
        match ph.phase {
            Phase::Setup => out.at_setup += ph.nccl_outside_comms,
            _ => out.after_setup += ph.nccl_outside_comms,
        }
    }
    out
}

/// The median of `v` (0 for none), as every summary takes it.
fn median(v: Vec<f64>) -> f64 {
    crate::analysis::stats::Stat::of(&v).map_or(0.0, |s| s.median)
}

/// A variant's attempts that count.
fn counted_attempts<'a>(
    s: &'a VariantSummary,
    attempts: &'a [AttemptAccount],
) -> impl Iterator<Item = &'a AttemptAccount> {
    attempts
        .iter()
        .filter(|a| a.variant == s.name && s.attempts.iter().any(|h| h.attempt == a.attempt))
}

/// Per group, a variant's figures over its attempts that count.
fn variant_sides(s: &VariantSummary, attempts: &[AttemptAccount]) -> Sides {
    let per: Vec<Sides> = counted_attempts(s, attempts)
        .map(|a| {
            let ranks: Vec<&[CommAccount]> =
                a.processes.iter().map(|p| p.nccl.as_slice()).collect();
            attempt_sides(&ranks, worst_index(a))
        })
        .collect();
    over_attempts(&per)
}

/// A variant's NCCL allocations outside every communicator's init: the
/// median over its attempts that count.
fn variant_outside(s: &VariantSummary, attempts: &[AttemptAccount]) -> OutsideComms {
    let all: Vec<OutsideComms> = counted_attempts(s, attempts).map(attempt_outside).collect();
    let med =
        |f: fn(&OutsideComms) -> u64| median(all.iter().map(|o| f(o) as f64).collect()) as u64;
    OutsideComms {
        at_setup: med(|o| o.at_setup),
        after_setup: med(|o| o.after_setup),
    }
}

/// Per group, the figures over a variant's attempts: the most creations, the
/// median bytes and init time.
fn over_attempts(counted: &[Sides]) -> Sides {
    let mut out: Sides = BTreeMap::new();
    let mut bytes: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    let mut secs: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for per in counted {
        for (k, (g, side)) in per {
            let t = merge_counts(&mut out, k, g, side);
            t.ranks = t.ranks.max(side.ranks);
            bytes.entry(k.clone()).or_default().push(side.bytes as f64);
            secs.entry(k.clone()).or_default().push(side.init_s);
        }
    }
    for (k, (_, t)) in out.iter_mut() {
        t.bytes = median(bytes.remove(k).unwrap_or_default()) as u64;
        t.init_s = median(secs.remove(k).unwrap_or_default());
    }
    out
}

/// The outcome for one group from the two sides.
pub fn outcome(base: &GroupSide, var: &GroupSide) -> Option<GroupOutcome> {
    let base_total = base.at_setup + base.in_steps;
    Some(if base.in_steps > 0 {
        if var.in_steps == 0 {
            GroupOutcome::Moved
        } else if var.in_steps < base.in_steps {
            GroupOutcome::PartlyMoved
        } else {
            GroupOutcome::Missed
        }
    } else if base_total == 0 && var.at_setup > 0 {
        GroupOutcome::Needless
    } else if base_total == 0 && var.in_steps > 0 {
        GroupOutcome::NewInSteps
    } else if base.at_setup > 0 {
        GroupOutcome::AlreadyAtSetup
    } else {
        return None;
    })
}

/// The per-group verdict of every variant whose prewarms target NCCL
/// communicators, against the baseline; groups ordered as the outcome matters
/// (missed, partly moved, new in steps, needless, moved, already at setup).
pub fn comm_verdicts(
    baseline: &str,
    variants: &[VariantSummary],
    attempts: &[AttemptAccount],
) -> Vec<CommVerdict> {
    // A side without an attempt that counts (none ran, or all were
    // excluded) created nothing we saw: no group was moved, missed or made.
    let Some(base) = variants
        .iter()
        .find(|v| v.name == baseline && !v.attempts.is_empty())
    else {
        return Vec::new();
    };
    let base_sides = variant_sides(base, attempts);
    let outside_baseline = variant_outside(base, attempts);
    let mut out = Vec::new();
    for v in variants
        .iter()
        .filter(|v| v.name != baseline && !v.attempts.is_empty())
    {
        let (targets, _) = targets_of(&v.prewarms);
        if v.prewarms.is_empty() || !targets.contains(&EventClass::NcclComm) {
            continue;
        }
        out.push(CommVerdict {
            variant: v.name.clone(),
            prewarms: v.prewarms.clone(),
            groups: group_verdicts(&base_sides, &variant_sides(v, attempts)),
            outside_baseline,
            outside_variant: variant_outside(v, attempts),
        });
    }
    out
}

/// Every group either side created a communicator for, with its outcome.
fn group_verdicts(base: &Sides, var: &Sides) -> Vec<GroupVerdict> {
    let mut keys: Vec<&Key> = base.keys().chain(var.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut groups: Vec<GroupVerdict> = keys
        .into_iter()
        .filter_map(|k| {
            let b = base.get(k);
            let w = var.get(k);
            let group = b.or(w)?.0.clone();
            let baseline = b.map(|x| x.1.clone()).unwrap_or_default();
            let variant = w.map(|x| x.1.clone()).unwrap_or_default();
            let total = |s: &GroupSide| s.at_setup + s.in_steps;
            Some(GroupVerdict {
                outcome: outcome(&baseline, &variant)?,
                extra: total(&variant).saturating_sub(total(&baseline)),
                group,
                baseline,
                variant,
            })
        })
        .collect();
    groups.sort_by_key(|g| rank_of(g.outcome));
    groups
}

fn rank_of(o: GroupOutcome) -> u8 {
    match o {
        GroupOutcome::Missed => 0,
        GroupOutcome::PartlyMoved => 1,
        GroupOutcome::NewInSteps => 2,
        GroupOutcome::Needless => 3,
        GroupOutcome::Moved => 4,
        GroupOutcome::AlreadyAtSetup => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(at_setup: u32, in_steps: u32) -> GroupSide {
        GroupSide {
            at_setup,
            in_steps,
            ..GroupSide::default()
        }
    }

    use crate::analysis::account::NamedBy;

    fn comm(desc: &str, ranks: &[u32], phase: Phase, step: Option<u32>, mib: u64) -> CommAccount {
        CommAccount {
            comm: "0x1".into(),
            comm_id: None,
            rank: None,
            nranks: Some(ranks.len() as u32),
            phase: Some(phase),
            step,
            start_s: None,
            init_seconds: Some(0.1),
            bytes: mib << 20,
            inferred_bytes: 0,
            timings: BTreeMap::new(),
            group: Some(CommGroup {
                desc: Some(desc.into()),
                name: None,
                ranks: ranks.to_vec(),
                nranks: Some(ranks.len() as u32),
                named_by: NamedBy::Torch,
            }),
        }
    }

    /// The MoE layout's groups, two ranks: an incomplete prewarm warms the
    /// dense groups only, an over-eager one adds a pair group.
    #[test]
    fn an_incomplete_prewarm_misses_the_expert_group_and_an_eager_one_adds_a_needless_one() {
        use GroupOutcome::*;
        let lazy = |d: &str| comm(d, &[0, 1], Phase::Step1, Some(1), 300);
        let warm = |d: &str| comm(d, &[0, 1], Phase::Setup, None, 300);
        let base_rank = vec![lazy("clip_dense"), lazy("clip_expert"), lazy("mesh_ep")];
        let base = over_attempts(&[attempt_sides(
            &[base_rank.as_slice(), base_rank.as_slice()],
            None,
        )]);
        // Incomplete: clip_dense at setup, the expert groups still in step 1.
        let inc_rank = vec![warm("clip_dense"), lazy("clip_expert"), lazy("mesh_ep")];
        let inc = over_attempts(&[attempt_sides(&[inc_rank.as_slice()], None)]);
        let v = group_verdicts(&base, &inc);
        let of = |d: &str| {
            v.iter()
                .find(|g| g.group.desc.as_deref() == Some(d))
                .unwrap()
        };
        assert_eq!(of("clip_dense").outcome, Moved);
        assert_eq!(of("clip_expert").outcome, Missed);
        assert_eq!(of("mesh_ep").outcome, Missed);
        assert_eq!(v[0].outcome, Missed, "missed groups come first");
        assert_eq!(of("clip_expert").baseline.first_step, Some(1));
        assert_eq!(of("clip_expert").baseline.ranks, 2);
        assert_eq!(of("clip_expert").baseline.bytes, 300 << 20);
        // Eager: everything at setup plus a pair group training never uses.
        let eager_rank = vec![
            warm("clip_dense"),
            warm("clip_expert"),
            warm("mesh_ep"),
            warm("eager_pair"),
        ];
        let eager = over_attempts(&[attempt_sides(&[eager_rank.as_slice()], None)]);
        let v = group_verdicts(&base, &eager);
        let of = |d: &str| {
            v.iter()
                .find(|g| g.group.desc.as_deref() == Some(d))
                .unwrap()
        };
        assert_eq!(of("eager_pair").outcome, Needless);
        assert_eq!(of("eager_pair").variant.at_setup, 1);
        assert_eq!(of("eager_pair").extra, 1);
        assert_eq!(of("clip_dense").extra, 0);
        assert!(
            v.iter()
                .filter(|g| g.group.desc.as_deref() != Some("eager_pair"))
                .all(|g| g.outcome == Moved)
        );
    }

    #[test]
    fn bytes_and_time_are_medians_over_attempts_and_counts_the_most() {
        let one = |mib| vec![comm("mesh_pp", &[0, 1], Phase::Step1, Some(1), mib)];
        let (a, b, c) = (one(100), one(300), one(200));
        let two = [one(1)[0].clone(), one(1)[0].clone()];
        let sides: Vec<Sides> = [a.as_slice(), b.as_slice(), c.as_slice(), two.as_slice()]
            .into_iter()
            .map(|r| attempt_sides(&[r], None))
            .collect();
        let s = &over_attempts(&sides[..3]).into_values().next().unwrap().1;
        assert_eq!((s.bytes, s.in_steps), (200 << 20, 1));
        let s = &over_attempts(&sides).into_values().next().unwrap().1;
        assert_eq!(s.in_steps, 2, "the attempt that created two");
    }

    /// A group's bytes and init time are one rank's: the attempt's worst
    /// rank's where it is a member, else the member's with the most bytes
    /// (the first of equals); never one rank's bytes with another's time.
    #[test]
    fn a_group_figures_come_from_one_rank() {
        let lazy = |mib, s| CommAccount {
            init_seconds: Some(s),
            ..comm("mesh_pp", &[0, 1], Phase::Step1, Some(1), mib)
        };
        let (r0, r1) = ([lazy(300, 0.2)], [lazy(200, 0.5)]);
        let ranks: [&[CommAccount]; 2] = [&r0, &r1];
        let figures = |worst| {
            let s = attempt_sides(&ranks, worst).into_values().next().unwrap().1;
            (s.bytes >> 20, s.init_s, s.ranks)
        };
        assert_eq!(figures(None), (300, 0.2, 2));
        assert_eq!(figures(Some(1)), (200, 0.5, 2));
        // A worst rank that is no member (or no rank of these): the members' own.
        let other: [&[CommAccount]; 3] = [&r0, &r1, &[]];
        let s = attempt_sides(&other, Some(2))
            .into_values()
            .next()
            .unwrap()
            .1;
        assert_eq!((s.bytes >> 20, s.init_s), (300, 0.2));
        let tied = [lazy(200, 0.3)];
        let s = attempt_sides(&[&tied, &r1], None)
            .into_values()
            .next()
            .unwrap()
            .1;
        assert_eq!(s.init_s, 0.3, "the first of equals");
    }

    #[test]
    fn outcomes_follow_where_each_side_created_the_group() {
        use GroupOutcome::*;
        assert_eq!(outcome(&side(0, 1), &side(1, 0)), Some(Moved));
        assert_eq!(outcome(&side(0, 2), &side(1, 1)), Some(PartlyMoved));
        assert_eq!(outcome(&side(0, 1), &side(0, 1)), Some(Missed));
        // Warming a different group does not make this one's creation "moved".
        assert_eq!(outcome(&side(0, 1), &side(0, 2)), Some(Missed));
        assert_eq!(outcome(&side(0, 0), &side(1, 0)), Some(Needless));
        assert_eq!(outcome(&side(0, 0), &side(0, 1)), Some(NewInSteps));
        assert_eq!(outcome(&side(1, 0), &side(1, 0)), Some(AlreadyAtSetup));
        assert_eq!(outcome(&side(0, 0), &side(0, 0)), None);
    }
}
