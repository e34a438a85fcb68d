//! Which process group each NCCL communicator belongs to.
//!
//! NCCL's init log gives a communicator's pointer, its rank and size and a
//! `commId` shared by every member; it never names the group. Two sources name
//! it, best first: the shim's `comm_group` records (torch's group name,
//! description such as `mesh_ep` or `clip_expert`, global ranks, and the
//! communicator pointer from `ProcessGroupNCCL._comm_ptr()`), matched on the
//! pointer within one process; else the members, found across the attempt's
//! ranks by the shared `commId` (recordings made before the shim wrote groups,
//! and communicators torch keeps outside the group's own, such as P2P ones).

use super::account::{CommAccount, CommGroup, NamedBy, ProcessAccount};
use crate::load::shim::ShimEvent;
use std::collections::{BTreeMap, BTreeSet};

/// A pointer as NCCL and Python print it (`0x4a654200`), normalised.
fn pointer(text: &str) -> Option<u64> {
    let t = text.trim();
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u64::from_str_radix(hex, 16).ok()
}

/// A description torch uses for "none given".
fn informative(desc: &Option<String>) -> Option<String> {
    desc.as_ref()
        .filter(|d| !d.is_empty() && d.as_str() != "undefined")
        .cloned()
}

/// Names each communicator of one process after the torch group whose
/// communicator pointer it is (the shim's `comm_group` records).
pub fn name_from_torch(comms: &mut [CommAccount], shim: &[ShimEvent]) {
    let mut by_ptr: BTreeMap<u64, CommGroup> = BTreeMap::new();
    for e in shim {
        if let ShimEvent::CommGroup {
            name,
            desc,
            ranks,
            comm: Some(comm),
            ..
        } = e
            && let Some(p) = pointer(comm)
        {
            let mut ranks = ranks.clone();
            ranks.sort_unstable();
            by_ptr.insert(
                p,
                CommGroup {
                    desc: informative(desc),
                    name: Some(name.clone()).filter(|n| !n.is_empty()),
                    ranks,
                    nranks: None,
                    named_by: NamedBy::Torch,
                },
            );
        }
    }
    for c in comms.iter_mut() {
        if let Some(g) = pointer(&c.comm).and_then(|p| by_ptr.get(&p)) {
            let mut g = g.clone();
            g.nranks = c.nranks;
            c.group = Some(g);
        }
    }
}

/// Across an attempt's processes: the members of every communicator (the
/// global ranks whose logs share its `commId`), which name a communicator the
/// shim did not, and carry a torch name to the members that lack one (a rank
/// whose shim file is missing or damaged).
pub fn name_across_ranks(processes: &mut [ProcessAccount]) {
    let mut members: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut torch: BTreeMap<String, CommGroup> = BTreeMap::new();
    for p in processes.iter() {
        for c in &p.nccl {
            let Some(id) = &c.comm_id else { continue };
            if let Some(r) = p.rank {
                members.entry(id.clone()).or_default().insert(r);
            }
            if let Some(g) = c.group.as_ref().filter(|g| g.named_by == NamedBy::Torch) {
                torch.entry(id.clone()).or_insert_with(|| g.clone());
            }
        }
    }
    for p in processes.iter_mut() {
        for c in p.nccl.iter_mut() {
            if c.group.is_some() {
                continue;
            }
            let Some(id) = &c.comm_id else { continue };
            c.group = Some(match torch.get(id) {
                Some(g) => CommGroup {
                    nranks: c.nranks,
                    ..g.clone()
                },
                None => CommGroup {
                    desc: None,
                    name: None,
                    ranks: members
                        .get(id)
                        .map(|m| m.iter().copied().collect())
                        .unwrap_or_default(),
                    nranks: c.nranks,
                    named_by: NamedBy::CommId,
                },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn comm(ptr: &str, id: &str, rank: u32, nranks: u32) -> CommAccount {
        CommAccount {
            comm: ptr.into(),
            comm_id: Some(id.into()),
            rank: Some(rank),
            nranks: Some(nranks),
            phase: None,
            step: None,
            start_s: None,
            init_seconds: None,
            bytes: 0,
            inferred_bytes: 0,
            timings: BTreeMap::new(),
            group: None,
        }
    }

    fn group_event(name: &str, desc: Option<&str>, ranks: &[u32], ptr: Option<&str>) -> ShimEvent {
        ShimEvent::CommGroup {
            t: 1,
            step: Some(1),
            name: name.into(),
            desc: desc.map(str::to_string),
            ranks: ranks.to_vec(),
            comm: ptr.map(str::to_string),
        }
    }

    #[test]
    fn torch_names_a_communicator_by_its_pointer() {
        let mut comms = vec![
            comm("0x4a654200", "0xaa", 0, 2),
            comm("0x77e0", "0xbb", 0, 2),
        ];
        let shim = vec![
            group_event("1", Some("mesh_ep"), &[1, 0], None),
            group_event("1", Some("mesh_ep"), &[1, 0], Some("0x4A654200")),
            group_event("2", Some("undefined"), &[0, 1], Some("0x00077e0")),
            group_event("3", Some("clip"), &[0, 1], Some("0x0")),
        ];
        name_from_torch(&mut comms, &shim);
        let g = comms[0].group.as_ref().unwrap();
        assert_eq!(g.desc.as_deref(), Some("mesh_ep"));
        assert_eq!(g.ranks, [0, 1]);
        assert_eq!(g.nranks, Some(2));
        assert_eq!(g.named_by, NamedBy::Torch);
        // "undefined" is torch's "no description": the name and members stay.
        let g = comms[1].group.as_ref().unwrap();
        assert_eq!((g.desc.as_deref(), g.name.as_deref()), (None, Some("2")));
    }
}
