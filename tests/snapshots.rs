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

/// Two nodes of one torchrun job in one run folder: the rank table with the
/// worst rank and the skew, each node's ranks, the verdict across nodes.
#[test]
fn multinode_story() {
    insta::assert_snapshot!(text("tests/fixtures/h200/multinode-fsdp2"));
}
