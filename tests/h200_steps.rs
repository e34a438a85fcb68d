//! The step structure on real H200 recordings (tests/fixtures/h200/README.md
//! says how each was made): a process that died in a step has that step as
//! its last phase.

mod common;

use common::terminal_text;
use prewarm_doctor::analysis::account::ProcessAccount;
use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::load::load_run;
use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::html::Html;
use prewarm_doctor::report::markdown::Markdown;
use prewarm_doctor::report::renderer::{Renderer, render_to_vec};
use prewarm_doctor::report::select::Selection;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    common::repo("tests/fixtures/h200").join(name)
}

/// The first process of the first attempt of a run folder.
fn process(path: &Path) -> ProcessAccount {
    analyse_run(&load_run(path).unwrap())
        .remove(0)
        .processes
        .remove(0)
}

/// A format's text with whitespace collapsed (wrapped lines read as one).
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn rendered(path: &Path, renderer: &dyn Renderer) -> String {
    let model = Analysed::load(path).unwrap().model();
    flat(&String::from_utf8(render_to_vec(renderer, &model).unwrap()).unwrap())
}

fn markdown(path: &Path) -> String {
    let md = Markdown {
        selection: Selection::All,
    };
    rendered(path, &md).replace('\\', "")
}

/// oom-nccl-baseline ran out of memory in step 2 (after step 1 ended,
/// before step 2's end): its last phase is step 2, where both failed calls
/// are, and no "after last step" follows.
#[test]
fn a_process_that_died_in_step_two_ends_in_step_two() {
    let path = fixture("oom-nccl-baseline");
    let p = process(&path);
    assert_eq!((p.steps.count, p.steps.died_in_step), (1, Some(2)));
    let phases: Vec<Phase> = p.phases.iter().map(|ph| ph.phase).collect();
    assert_eq!(phases, [Phase::Setup, Phase::Step1, Phase::Steady]);
    let steady = &p.phases[2];
    assert_eq!(steady.failed_requests, 2);
    assert_eq!(
        (p.forensics[0].phase, p.forensics[0].step),
        (Phase::Steady, Some(2))
    );
    let text = terminal_text(&path);
    let row = text
        .lines()
        .find(|l| l.starts_with("   step 2 (died) "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.ends_with(" 2"), "{row}");
    assert!(!text.contains("after last step"), "{text}");
    assert!(flat(&text).contains("step 1 took 1.07 s; setup 15.23 s; 1 step, then died in step 2"));
    assert!(text.contains("OUT OF MEMORY in step 2 at 16.31s"));
    let md = markdown(&path);
    assert!(md.contains("| step 2 (died) |"), "{md}");
    assert!(md.contains("1 step, then died in step 2"));
    assert!(rendered(&path, &Html).contains("1 step, then died in step 2"));
}
