//! Communicators named by group and the per-group verdict, on the real 2-GPU
//! H200 recordings (tests/fixtures/h200/README.md): they predate the shim's
//! `comm_group` records, so their communicators are named by their members
//! (the ranks whose NCCL logs share the commId). Naming after torch's groups
//! and the missed / needless outcomes are covered by the unit tests in
//! src/analysis/{comm_groups,verdict_comms}.rs and tests/shim_python.rs.

mod common;

use common::terminal_text;
use prewarm_doctor::analysis::comm_groups::NamedBy;
use prewarm_doctor::analysis::matrix::compare;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::verdict_comms::GroupOutcome;
use prewarm_doctor::analysis::{AttemptAccount, analyse_run};
use prewarm_doctor::load::load_run;
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
