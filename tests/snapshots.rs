//! The terminal summary's exact wording on real recordings (insta snapshots):
//! any change to what users read shows up in review.

use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::analysis::matrix::compare;
use prewarm_doctor::commands::{Selection, render_text};
use prewarm_doctor::load::load_run;
use std::path::Path;

fn text(rel: &str) -> String {
    let run = load_run(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
    let attempts = analyse_run(&run);
    let matrix = compare(run.meta.as_ref(), &attempts);
    render_text(&attempts, matrix.as_ref(), Selection::Default).unwrap()
}

#[test]
fn nccl_first_collective_story() {
    insta::assert_snapshot!(text("tests/fixtures/h200/examples-nccl-baseline"));
}

#[test]
fn triton_oom_story() {
    insta::assert_snapshot!(text("tests/fixtures/h200/oom-triton-baseline"));
}

#[test]
fn bundled_matrix() {
    insta::assert_snapshot!(text("reports/h200-matrix"));
}

/// Multi-rank rendering: the recorded rank plus a copy of it posing as a
/// second rank on another host with a higher step-1 peak (layout test only).
#[test]
fn rank_table_shows_worst_rank_and_skew() {
    let run = load_run(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200/examples-nccl-baseline"),
    )
    .unwrap();
    let mut attempt = analyse_run(&run).remove(0);
    let mut other = attempt.processes[0].clone();
    other.rank = Some(1);
    other.host = "node-b".into();
    for ph in other.phases.iter_mut() {
        ph.device_used_peak = ph.device_used_peak.map(|p| p + (512 << 20));
    }
    other.steps.step1_s = other.steps.step1_s.map(|s| s + 0.25);
    attempt.processes.push(other);
    attempt.ranks = prewarm_doctor::analysis::ranks::spread(&attempt.processes);
    let spread = attempt.ranks.as_ref().expect("two ranks have a spread");
    assert_eq!(spread.step1_peak_skew, Some(512 << 20));
    assert_eq!(spread.worst_step1_peak.as_ref().unwrap().rank, Some(1));
    assert_eq!(spread.hosts.len(), 2);
    assert!((spread.step1_skew_s.unwrap() - 0.25).abs() < 1e-9);
    assert_eq!(spread.step1_out_of_pool_skew, Some(0));
    let text = prewarm_doctor::report::terminal::render_attempt(&attempt);
    assert!(
        text.contains("worst step-1 peak: rank 1 on node-b"),
        "{text}"
    );
    assert!(text.contains("skew across ranks 512.0 MiB"), "{text}");
    assert!(text.contains("slowest step 1: rank 1 on node-b"), "{text}");
}
