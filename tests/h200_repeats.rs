//! Verdicts and accounts asserted on the repeated cold A/B matrices recorded
//! on an H200 on 2026-12-01 (tests/fixtures/h200/README.md says how): each
//! example with `--repeat 3`, and the bundled matrix recorded under the live
//! dashboard (`run --tui`), whose training output went to each attempt's
//! output.log.

use prewarm_doctor::analysis::matrix::{MatrixAccount, compare};
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::summary::{Exclusion, HeldSource};
use prewarm_doctor::analysis::verdict::{Confidence, Verdict, VerdictClass};
use prewarm_doctor::analysis::{AttemptAccount, analyse_run};
use prewarm_doctor::load::load_run;
use prewarm_doctor::prewarm::catalog::EventClass;
use std::path::{Path, PathBuf};

const MIB: f64 = (1u64 << 20) as f64;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200")
        .join(name)
}

fn analysed(name: &str) -> (Vec<AttemptAccount>, MatrixAccount) {
    let run = load_run(&fixture(name)).unwrap();
    let attempts = analyse_run(&run);
    let m = compare(run.meta.as_ref(), &attempts).expect("a matrix");
    (attempts, m)
}

fn verdict<'a>(m: &'a MatrixAccount, variant: &str) -> &'a Verdict {
    m.verdicts.iter().find(|v| v.variant == variant).unwrap()
}

fn near(actual: f64, expected_mib: f64) -> bool {
    (actual / MIB - expected_mib).abs() < 0.5
}

#[test]
fn the_cublas_prewarm_moves_its_workspaces_and_their_init_time_measured_over_three_repeats() {
    let (_, m) = analysed("repeat-cublas");
    let v = verdict(&m, "cublas");
    assert_eq!(v.class, VerdictClass::Works);
    assert_eq!(v.confidence, Confidence::Measured);
    assert_eq!((v.attempts.baseline, v.attempts.variant), (3, 3));
    assert!(near(v.moved.bytes, 128.3), "{}", v.moved.bytes);
    // cuBLAS init is time too (handles, workspaces, its module loads): about
    // 0.18 s of each baseline step 1 on the H200, moved to setup.
    assert!(v.moved.seconds > 0.1, "{}", v.moved.seconds);
    assert_eq!(v.costs.held_extra, 0.0);
}

#[test]
fn the_triton_prewarm_moves_autotune_compile_and_local_memory_and_costs_setup_time() {
    let (_, m) = analysed("repeat-triton");
    let v = verdict(&m, "triton_autotune");
    assert_eq!(v.class, VerdictClass::Works);
    assert_eq!(v.confidence, Confidence::Measured);
    assert!(near(v.moved.bytes, 282.0), "{}", v.moved.bytes);
    assert!(v.moved.seconds > 8.0, "{}", v.moved.seconds);
    let setup = v.costs.setup_s.unwrap();
    assert!(setup.is_up() && setup.delta > 5.0, "{setup:?}");
    // Compile time is not cuBLAS's doing, and none of it is blamed on the
    // step-1 total: that is context only.
    let compile = v
        .by_class
        .iter()
        .find(|c| c.class == EventClass::Compile)
        .unwrap();
    assert!(compile.seconds.is_down());
}

#[test]
fn the_over_eager_nccl_prewarm_works_and_its_extra_communicator_is_its_cost() {
    let (_, m) = analysed("repeat-nccl");
    let v = verdict(&m, "nccl_comm");
    assert_eq!(v.class, VerdictClass::Works);
    assert_eq!(v.confidence, Confidence::Measured);
    assert!(near(v.moved.bytes, 558.0), "{}", v.moved.bytes);
    // 115-405 ms of communicator init in the baseline's step 1, none with
    // the prewarm: with three repeats a side the ranges do not overlap.
    assert!(v.moved.seconds > 0.1, "{}", v.moved.seconds);
    // It warms the default group too, which training never uses: the total
    // held at step-1 end grows by 390 MiB (charged), 388 MiB of it the extra
    // communicator's NCCL buffers, and one more communicator.
    assert!(near(v.costs.held_extra, 390.0), "{}", v.costs.held_extra);
    let nccl = v
        .costs
        .held_explained()
        .into_iter()
        .find(|h| h.source == HeldSource::Library("nccl".into()))
        .expect("nccl holds more");
    assert!(near(nccl.delta, 388.0));
    let comms = v.costs.nccl_communicators.unwrap();
    assert_eq!((comms.baseline.median, comms.variant.median), (1.0, 2.0));
}

#[test]
fn the_live_matrix_judges_every_prewarm_and_names_the_attempt_it_left_out() {
    let (attempts, m) = analysed("matrix-live");
    for name in ["cublas", "triton_autotune", "nccl_comm", "all"] {
        assert_eq!(verdict(&m, name).class, VerdictClass::Works, "{name}");
    }
    // The device-time limit stopped the matrix during nccl_comm/3 (a
    // forwarded SIGINT), before all/3.
    let nccl = m.variants.iter().find(|v| v.name == "nccl_comm").unwrap();
    assert_eq!(nccl.attempts.len(), 2);
    assert!(
        nccl.excluded
            .iter()
            .any(|e| e.attempt == "3" && e.reasons.contains(&Exclusion::Interrupted))
    );
    assert_eq!(
        m.variants
            .iter()
            .find(|v| v.name == "all")
            .unwrap()
            .attempts
            .len(),
        2
    );
    // Every completed attempt: the doctor's out-of-pool bytes at the end of
    // step 1 agree with what the script measured itself (its output went to
    // output.log through the dashboard).
    let mut checked = 0;
    for a in attempts.iter().filter(|a| !a.interrupted) {
        let log = fixture("matrix-live")
            .join(&a.variant)
            .join(&a.attempt)
            .join("vm/output.log");
        let text = std::fs::read_to_string(&log).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("CROSSCHECK") && l.contains("\"step\": 1,"))
            .unwrap();
        let theirs: serde_json::Value =
            serde_json::from_str(line.trim_start_matches("CROSSCHECK ")).unwrap();
        let theirs = theirs["out_of_pool"].as_u64().unwrap() as f64;
        let p = a.processes.iter().find(|p| p.rank == Some(0)).unwrap();
        let ours = p
            .phases
            .iter()
            .find(|ph| ph.phase == Phase::Step1)
            .and_then(|ph| ph.gap_end.as_ref())
            .unwrap()
            .out_of_pool as f64;
        assert!(
            (ours - theirs).abs() <= (theirs * 0.02).max(16.0 * MIB),
            "{}/{}: doctor {ours} vs script {theirs}",
            a.variant,
            a.attempt
        );
        checked += 1;
    }
    assert_eq!(checked, 13);
}

#[test]
fn every_phase_end_of_the_new_recordings_is_accounted() {
    for name in [
        "repeat-cublas",
        "repeat-triton",
        "repeat-nccl",
        "matrix-live",
    ] {
        for a in analyse_run(&load_run(&fixture(name)).unwrap()) {
            for p in &a.processes {
                for ph in &p.phases {
                    let Some(g) = &ph.gap_end else { continue };
                    let limit = (g.out_of_pool as f64 * 0.02).max(64.0 * MIB);
                    assert!(
                        (g.unexplained.abs() as f64) <= limit,
                        "{name} {}/{} {:?}: unexplained {}",
                        a.variant,
                        a.attempt,
                        ph.phase,
                        g.unexplained
                    );
                }
            }
        }
    }
}

#[test]
fn the_shim_records_zero_grad_and_the_first_forward_on_the_gpu() {
    // What places step 1 in a process that dies before its first optimizer
    // step (docs/step-rule.md): present in every rank of the new recordings.
    let shim = std::fs::read_to_string(
        fixture("matrix-live").join("baseline/1/vm/rank-0.pid-745.shim.jsonl"),
    )
    .unwrap();
    assert!(shim.contains("\"ev\": \"zero_grad\""));
    assert!(shim.contains("\"ev\": \"first_forward\""));
}
