//! The terminal summary's exact wording on real recordings (insta snapshots):
//! any change to what users read shows up in review.

use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::markdown::Markdown;
use prewarm_doctor::report::terminal::Terminal;
use std::path::Path;

fn model(rel: &str) -> prewarm_doctor::report::model::ReportModel {
    Analysed::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap()
        .model()
}

fn text(rel: &str) -> String {
    Terminal::default().text(&model(rel)).unwrap()
}

/// The pull-request summary of the bundled matrix, as GitHub receives it.
#[test]
fn bundled_matrix_markdown() {
    insta::assert_snapshot!(
        Markdown::default()
            .text(&model("reports/h200-matrix"))
            .unwrap()
    );
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
