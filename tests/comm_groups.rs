//! Communicators named by group and the per-group verdict, on the real 2-GPU
//! H200 recordings (tests/fixtures/h200/README.md): they predate the shim's
//! `comm_group` records, so their communicators are named by their members
//! (the ranks whose NCCL logs share the commId). Naming after torch's groups
//! and the missed / needless outcomes are covered by the unit tests in
//! src/analysis/comm_groups.rs, src/analysis/verdict/comms.rs and tests/shim_python.rs.

mod common;

use common::terminal_text;
use prewarm_doctor::analysis::account::NamedBy;
use prewarm_doctor::analysis::matrix::compare;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::verdict::VerdictClass;
use prewarm_doctor::analysis::verdict::comms::GroupOutcome;
use prewarm_doctor::analysis::{AttemptAccount, analyse_run};
use prewarm_doctor::load::load_run;
use prewarm_doctor::prewarm::catalog::EventClass;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200")
        .join(name)
}

fn attempts(name: &str) -> Vec<AttemptAccount> {
    analyse_run(&load_run(&fixture(name)).unwrap())
}

#[test]
fn every_communicator_of_the_fsdp2_job_is_named_by_its_members() {
    for name in ["multigpu-fsdp2-baseline", "multigpu-fsdp2-prewarm"] {
        let a = attempts(name).remove(0);
        assert_eq!(a.processes.len(), 2, "{name}");
        for p in &a.processes {
            assert_eq!(p.nccl.len(), 2, "{name} rank {:?}", p.rank);
            for c in &p.nccl {
                let g = c.group.as_ref().expect("named");
                assert_eq!(g.named_by, NamedBy::CommId);
                assert_eq!(g.ranks, [0, 1], "{name}: both ranks share every commId");
                assert_eq!(g.nranks, Some(2));
                assert_eq!(g.desc, None);
            }
        }
    }
}

/// A matrix stopped before the prewarm's attempt ran (the H200 cold matrix
/// of 2026-12-01 timed out after baseline/1 and cublas/1) says it cannot be
/// judged; no per-group line says its groups moved to setup.
#[test]
fn a_variant_without_an_attempt_moves_no_group() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("run");
    common::copy_tree(&fixture("multinode-fsdp2"), &root);
    std::fs::remove_dir_all(root.join("nccl_comm")).unwrap();
    let run = load_run(&root).unwrap();
    let m = compare(run.meta.as_ref(), &analyse_run(&run)).expect("a matrix");
    let v = m
        .verdicts
        .iter()
        .find(|v| v.variant == "nccl_comm")
        .unwrap();
    assert_eq!(v.class, VerdictClass::Inconclusive, "{v:?}");
    assert!(m.comm_groups.is_empty(), "{:?}", m.comm_groups);
    let text = terminal_text(&root);
    assert!(text.contains("nccl_comm INCONCLUSIVE"), "{text}");
    assert!(!text.contains("moved to setup"), "{text}");
}

#[test]
fn the_two_node_matrix_says_the_prewarm_moved_the_group_to_setup() {
    let run = load_run(&fixture("multinode-fsdp2")).unwrap();
    let a = analyse_run(&run);
    let m = compare(run.meta.as_ref(), &a).expect("a matrix");
    assert_eq!(m.comm_groups.len(), 1);
    let v = &m.comm_groups[0];
    assert_eq!(v.variant, "nccl_comm");
    assert_eq!(v.groups.len(), 1, "{:?}", v.groups);
    let g = &v.groups[0];
    // The members come from two nodes' logs: one rank each.
    assert_eq!(g.group.ranks, [0, 1]);
    assert_eq!(g.outcome, GroupOutcome::Moved);
    // The FSDP mesh's and the clip group's communicators, in step 1 on both
    // nodes, then both at setup.
    assert_eq!((g.baseline.in_steps, g.baseline.at_setup), (2, 0));
    assert_eq!(g.baseline.first_step, Some(1));
    assert_eq!(g.baseline.ranks, 2);
    assert_eq!((g.variant.in_steps, g.variant.at_setup), (0, 2));
    // Worst rank's NCCL bytes and init time, as the per-rank accounts say.
    let worst = a
        .iter()
        .filter(|x| x.variant == "baseline")
        .flat_map(|x| &x.processes)
        .map(|p| {
            p.nccl
                .iter()
                .filter(|c| c.phase == Some(Phase::Step1))
                .map(|c| c.bytes + c.inferred_bytes)
                .sum::<u64>()
        })
        .max()
        .unwrap();
    assert_eq!(g.baseline.bytes, worst);
    assert!(g.baseline.init_s > 0.1, "{}", g.baseline.init_s);
    let text = terminal_text(&fixture("multinode-fsdp2"));
    assert!(
        text.contains("NCCL group ranks 0,1: moved to setup"),
        "{text}"
    );
}

/// A copy of the two-node recording with the shim's `comm_group` records
/// added as a torch >= 2.8 shim would write them (test input, not a
/// recording): the first communicator each rank brought up is FSDP's mesh
/// group, the second the clip group (examples/fsdp2_clip.py's order, in the
/// baseline's step 1 and in the prewarm alike). Named by torch, the two
/// groups of the same members become two groups, each moved.
#[test]
fn torch_names_split_groups_of_the_same_members() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("run");
    common::copy_tree(&fixture("multinode-fsdp2"), &root);
    for variant in ["baseline", "nccl_comm"] {
        for node in ["node0", "node1"] {
            let host = root.join(variant).join("1").join(node);
            let mut comms = Vec::new();
            let mut shim = None;
            for e in std::fs::read_dir(&host).unwrap() {
                let p = e.unwrap().path();
                let name = p.file_name().unwrap().to_string_lossy().to_string();
                if name.starts_with("nccl.") {
                    for line in std::fs::read_to_string(&p).unwrap().lines() {
                        if line.contains("Init START") {
                            let comm = line
                                .split(" comm ")
                                .nth(1)
                                .unwrap()
                                .split(' ')
                                .next()
                                .unwrap();
                            comms.push(comm.to_string());
                        }
                    }
                }
                if name.starts_with("rank-") && name.ends_with(".shim.jsonl") {
                    shim = Some(p);
                }
            }
            assert_eq!(comms.len(), 2, "{variant} {node}");
            let shim = shim.unwrap();
            let mut text = std::fs::read_to_string(&shim).unwrap();
            for (i, (desc, comm)) in [("mesh_fsdp", &comms[0]), ("clip_grad", &comms[1])]
                .into_iter()
                .enumerate()
            {
                text += &serde_json::json!({"ev": "comm_group", "t": 1, "step": 1, "name": (i + 1).to_string(),
                    "desc": desc, "ranks": [0, 1], "comm": comm})
                .to_string();
                text.push('\n');
            }
            std::fs::write(&shim, text).unwrap();
        }
    }
    let run = load_run(&root).unwrap();
    let a = analyse_run(&run);
    for p in a.iter().flat_map(|x| &x.processes) {
        let descs: Vec<_> = p
            .nccl
            .iter()
            .map(|c| {
                let g = c.group.as_ref().unwrap();
                assert_eq!(g.named_by, NamedBy::Torch);
                assert_eq!(g.ranks, [0, 1]);
                g.desc.clone().unwrap()
            })
            .collect();
        assert_eq!(descs, ["mesh_fsdp", "clip_grad"], "rank {:?}", p.rank);
    }
    // The baseline's late warmups name the group.
    let base = a.iter().find(|x| x.variant == "baseline").unwrap();
    assert!(
        base.processes[0]
            .late_warmups
            .iter()
            .any(|w| w.subject.starts_with("clip_grad 0x")),
        "{:?}",
        base.processes[0].late_warmups
    );
    let m = compare(run.meta.as_ref(), &a).unwrap();
    let v = &m.comm_groups[0];
    let descs: Vec<_> = v
        .groups
        .iter()
        .map(|g| g.group.desc.clone().unwrap())
        .collect();
    assert_eq!(descs.len(), 2, "{descs:?}");
    for g in &v.groups {
        assert_eq!(g.outcome, GroupOutcome::Moved);
        assert_eq!(
            (g.baseline.in_steps, g.variant.at_setup, g.extra),
            (1, 1, 0)
        );
    }
    let text = terminal_text(&root);
    assert!(
        text.contains("NCCL group clip_grad (ranks 0,1): moved to setup"),
        "{text}"
    );
    assert!(
        text.contains("of mesh_fsdp (ranks 0,1) (2 ranks) created in step 1"),
        "{text}"
    );
}

/// In every matrix, the NCCL class's step-1 bytes on the baseline are what
/// its per-group lines and the line of NCCL's allocations outside every
/// communicator's init add up to: one figure, told in parts (account-matrix
/// read "558.0 MiB" of NCCL communicator init beside its only group's
/// "556.0 MiB", the 2 MiB NCCL allocates before its first init said nowhere).
#[test]
fn the_class_figure_is_its_groups_plus_what_no_communicator_holds() {
    const MIB: f64 = (1u64 << 20) as f64;
    let mut checked = 0;
    for dir in common::recordings() {
        let run = load_run(&dir).unwrap();
        let Some(m) = compare(run.meta.as_ref(), &analyse_run(&run)) else {
            continue;
        };
        for cv in &m.comm_groups {
            let v = m.verdicts.iter().find(|v| v.variant == cv.variant).unwrap();
            let Some(c) = v.by_class.iter().find(|c| c.class == EventClass::NcclComm) else {
                continue;
            };
            let lazy = cv.groups.iter().filter(|g| g.baseline.at_setup == 0);
            let groups: u64 = lazy.map(|g| g.baseline.bytes).sum();
            let told = (groups + cv.outside_baseline.after_setup) as f64;
            assert!(
                (c.bytes.baseline.median - told).abs() < MIB,
                "{} {}: class {:.1} MiB, groups {:.1} MiB + outside {:.1} MiB",
                dir.display(),
                cv.variant,
                c.bytes.baseline.median / MIB,
                groups as f64 / MIB,
                cv.outside_baseline.after_setup as f64 / MIB
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked}");
    let text = terminal_text(&fixture("account-matrix"));
    for said in [
        "NCCL communicator init in step 1: 558.0 MiB",
        "556.0 MiB, 380.0 ms init -> 1 at setup",
        "NCCL allocations outside any communicator's init (in the NCCL class's bytes, in no group's): 2.0 MiB in the steps -> 2.0 MiB at setup",
        "nccl 390.0 MiB (195 calls, 4.0 ms; 2.0 MiB of it outside any communicator's init)",
    ] {
        assert!(
            text.split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(said),
            "{said}\n{text}"
        );
    }
}
