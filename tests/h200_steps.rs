//! The step structure on real H200 recordings (tests/fixtures/h200/README.md
//! says how each was made): the steady step is the median of the steps 2..N
//! without lazy initialisation, a process that died in a step has that step
//! as its last phase, and the exception it died with is shown in the
//! terminal, the Markdown and the HTML whatever phase it was in.

mod common;

use common::{copy_tree, terminal_text};
use prewarm_doctor::analysis::account::{ProcessAccount, SteadyBasis};
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
    let text = String::from_utf8(render_to_vec(renderer, &model).unwrap()).unwrap();
    flat(&common::html_as_read(&text))
}

fn markdown(path: &Path) -> String {
    let md = Markdown {
        selection: Selection::All,
    };
    rendered(path, &md).replace('\\', "")
}

/// Steps 3 and 5 of shape_buckets.py each autotune a new shape bucket
/// (~330 ms); steps 2 and 4 take 8.28 and 8.82 ms.
#[test]
fn the_steady_step_leaves_out_the_steps_that_autotuned_a_new_shape() {
    let path = fixture("prescribe-shape-recording");
    let s = process(&path).steps;
    assert_eq!(s.steady_basis, Some(SteadyBasis::FreeSteps));
    assert_eq!((s.steady_steps, s.lazy_steps.clone()), (2, vec![3, 5]));
    // The mean of the middle two (8.55 ms), not the upper one (8.82 ms).
    let ms = s.steady_step_s.unwrap() * 1e3;
    assert!((ms - 8.55).abs() < 0.01, "{ms}");
    let steady = "8.6 ms per steady step (217x; the median of 2 of 4 steps 2..N: \
                  steps 3 and 5 held lazy init)";
    let said = format!("step 1 took 1.86 s vs {steady}; setup 4.27 s; 5 steps");
    assert!(flat(&terminal_text(&path)).contains(&said), "{said}");
    let md = markdown(&path);
    assert!(
        md.contains(&format!("Step 1 took **1.86 s** vs {steady}; 5 steps")),
        "{md}"
    );
    let html = rendered(&path, &Html);
    assert!(html.contains(steady), "{html}");
    // The matrix's first-bucket prewarm: the same two steps left out.
    let text = flat(&terminal_text(&fixture("prescribe-shape-matrix")));
    assert!(
        text.contains("step 1 took 247.1 ms vs 6.3 ms per steady step (39x; the median of 2 of 4"),
        "{text}"
    );
}

/// The same recording without the step ends of steps 2 and 4 (SYNTHETIC:
/// the two lines removed here): each of the two steps left after step 1
/// (the recorded steps 2-3 and 4-5) holds an autotune, so the steady step
/// is the median of them both, and the report says no step was free of
/// lazy initialisation.
#[test]
fn without_a_step_free_of_lazy_initialisation_the_median_of_all_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("prescribe-shape-recording"), dir.path());
    let shim = dir.path().join("default/1/vm/proc.pid-1582.shim.jsonl");
    let text = std::fs::read_to_string(&shim).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            !(l.contains("\"step_end\"")
                && (l.contains("\"step\": 2,") || l.contains("\"step\": 4,")))
        })
        .collect();
    assert_eq!(kept.len() + 2, text.lines().count());
    std::fs::write(&shim, kept.join("\n") + "\n").unwrap();
    let s = process(dir.path()).steps;
    assert_eq!(s.steady_basis, Some(SteadyBasis::NoStepFree));
    assert_eq!((s.steady_steps, s.lazy_steps.len()), (2, 2));
    let text = flat(&terminal_text(dir.path()));
    assert!(
        text.contains("no step 2..N was free of lazy init: the median of all 2"),
        "{text}"
    );
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

/// shared-gpu-2 (`--steps 3`) died in step 3's `optimizer.step()` of
/// `RuntimeError: OrderedDict mutated during iteration`, after steps 1 and
/// 2 ended: no out-of-memory failure, and the exception is shown anyway.
#[test]
fn an_exception_outside_step_one_is_shown_with_where_it_was_raised() {
    let path = fixture("shared-gpu-2");
    let p = process(&path);
    assert_eq!(p.steps.died_in_step, Some(3));
    let e = &p.exceptions[0];
    assert_eq!((e.phase, e.step), (Phase::Steady, Some(3)));
    assert_eq!(e.where_.len(), 4);
    let frame =
        "/opt/torch/.venv/lib/python3.12/site-packages/torch/optim/optimizer.py:537 wrapper";
    let text = flat(&terminal_text(&path));
    for said in [
        "2 steps, then died in step 3",
        "UNCAUGHT EXCEPTION in step 3 at 4.45s: RuntimeError: OrderedDict mutated during iteration",
        "exception in step 3 at 4.45s: RuntimeError: OrderedDict mutated during iteration",
        frame,
        "steps 2..3 (died)",
    ] {
        assert!(text.contains(said), "{said}: {text}");
    }
    let md = markdown(&path);
    assert!(
        md.contains(
            "**Uncaught exception** in step 3 at 4.45s: RuntimeError: OrderedDict mutated during iteration."
        ),
        "{md}"
    );
    assert!(md.contains(frame), "{md}");
    let html = rendered(&path, &Html);
    for said in [
        "in step 3 at 4.45s",
        "RuntimeError: OrderedDict mutated during iteration",
        frame,
    ] {
        assert!(html.contains(said), "{said}");
    }
}
