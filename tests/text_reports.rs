//! The text formats on every H200 recording and at scale: the terminal
//! summary fits 100 columns and opens with the answer, the Markdown summary
//! stays under GitHub's comment limit, and hundreds of ranks show as the
//! worst ranks plus the distribution while the JSON keeps every rank.

mod common;

use common::synthetic::{self, Shape};
use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::markdown::{BUDGET, Markdown};
use prewarm_doctor::report::model::ReportModel;
use prewarm_doctor::report::renderer::render_to_vec;
use prewarm_doctor::report::select::Selection;
use prewarm_doctor::report::terminal::{Terminal, WIDTH};
use std::path::Path;

fn model(path: &Path) -> ReportModel {
    Analysed::load(path).unwrap().model()
}

fn too_wide(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.chars().count() > WIDTH).collect()
}

#[test]
fn the_terminal_summary_fits_100_columns_on_every_recording() {
    for path in common::recordings() {
        let m = model(&path);
        for selection in [Selection::Default, Selection::All] {
            let text = Terminal { selection }.text(&m).unwrap();
            assert!(
                too_wide(&text).is_empty(),
                "{}: {:#?}",
                path.display(),
                too_wide(&text)
            );
        }
    }
}

/// The first screen of a matrix answers "did each prewarm work, and what did
/// it cost": one entry per prewarm before the table; single runs open with
/// step 1's time and where it went.
#[test]
fn the_first_lines_answer_the_question() {
    let text = Terminal::default()
        .text(&model(&common::repo("reports/h200-matrix")))
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, prewarm) in ["cublas", "triton_autotune", "nccl_comm"]
        .iter()
        .enumerate()
    {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("   {prewarm} WORKS: moved ")))
            .unwrap_or_else(|| panic!("{prewarm}: {text}"));
        assert!(
            at < 12,
            "{prewarm}'s verdict is on the first screen: line {at}"
        );
        assert!(i == 0 || at > 1);
    }
    let table = lines
        .iter()
        .position(|l| l.starts_with("   variant "))
        .unwrap();
    assert!(table < 24, "{text}");
    let story = lines
        .iter()
        .position(|l| l.starts_with("== prewarm-doctor: variant 'baseline'"))
        .unwrap();
    assert!(story > table);

    let single = Terminal::default()
        .text(&model(&common::repo(
            "tests/fixtures/h200/examples-nccl-baseline",
        )))
        .unwrap();
    // The story's head, the step-1 time line (with the doctor's own time
    // and what it does not count), then what landed, first.
    let first: Vec<&str> = single.lines().take(7).collect();
    assert!(
        first[1].starts_with("   step 1 took 1.02 s vs "),
        "{single}"
    );
    assert!(first[2].starts_with("   step-1 time: "), "{single}");
    assert!(
        first
            .iter()
            .any(|l| l.contains("[NCCL communicator init]") && l.contains("556.0 MiB")),
        "what landed in step 1, with its cost, comes first: {single}"
    );
}

#[test]
fn an_out_of_memory_message_is_quoted_to_the_pools_unused_cache() {
    // torch names the pool's unused cache after its first 200 characters:
    // the fragmentation fact a user acts on (expandable_segments).
    let text = common::terminal_text(&common::repo("tests/fixtures/h200/oom-nccl-baseline"));
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("this process has 139.68 GiB memory in use. Of the allocated memory 138.11 GiB is allocated by PyTorch, and 99.22 MiB is reserved by PyTorch but unallocated."),
        "{text}"
    );
}

#[test]
fn markdown_stays_under_the_comment_limit_on_every_recording() {
    for path in common::recordings() {
        let m = model(&path);
        for selection in [Selection::Default, Selection::All] {
            let md = render_to_vec(&Markdown { selection }, &m).unwrap();
            assert!(
                md.len() < BUDGET,
                "{}: {} bytes of Markdown",
                path.display(),
                md.len()
            );
            let md = String::from_utf8(md).unwrap();
            assert_eq!(
                md.matches("<details").count(),
                md.matches("</details>").count()
            );
        }
    }
}

/// 256 ranks per attempt (SYNTHETIC, tests/common/synthetic.rs): the
/// terminal and Markdown show the worst ranks and the distribution, not 256
/// rows; the JSON and CSV keep every rank.
#[test]
fn hundreds_of_ranks_show_as_worst_ranks_and_distribution() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_run(
        dir.path(),
        Shape {
            ranks: 256,
            events: 40,
            hostile: false,
        },
    );
    let m = model(dir.path());
    assert!(m.attempts.iter().all(|a| a.at_scale()));

    let text = Terminal {
        selection: Selection::All,
    }
    .text(&m)
    .unwrap();
    assert!(too_wide(&text).is_empty(), "{:#?}", too_wide(&text));
    assert!(
        text.contains("   256 processes; the worst of each figure"),
        "{text}"
    );
    assert!(text.contains("over ranks"), "{text}");
    assert!(text.contains("step-1 device peak (256)"), "{text}");
    // One story per attempt (its worst rank), not 256.
    assert_eq!(text.matches("\n-- rank ").count(), 2, "{text}");
    assert!(text.lines().count() < 200, "{} lines", text.lines().count());

    let md = String::from_utf8(render_to_vec(&Markdown::default(), &m).unwrap()).unwrap();
    assert!(md.len() < BUDGET, "{} bytes", md.len());
    eprintln!("256 ranks x 2 attempts: Markdown {} bytes", md.len());
    assert!(md.contains("| over ranks | min | median | p90 | p99 | max | worst ranks |"));
    assert_eq!(md.matches("\n#### rank ").count(), 2);

    let json = render_to_vec(&prewarm_doctor::report::json::Json, &m).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
    for a in doc["attempts"].as_array().unwrap() {
        assert_eq!(a["processes"].as_array().unwrap().len(), 256);
    }
}

/// When the attempts do not all fit, Markdown counts the ones it leaves out
/// instead of cutting a table in half.
#[test]
fn markdown_leaves_whole_attempts_out_past_the_budget() {
    let mut m = model(&common::repo("reports/h200-matrix"));
    let template = m.attempts.clone();
    while m.attempts.len() < 600 {
        m.attempts.extend(template.iter().cloned());
    }
    let md = Markdown::default().text(&m).unwrap();
    assert!(md.len() <= BUDGET, "{} bytes", md.len());
    assert!(
        md.contains("more attempt(s) left out to stay under GitHub's comment limit"),
        "{}",
        &md[md.len().saturating_sub(400)..]
    );
    assert_eq!(
        md.matches("<details").count(),
        md.matches("</details>").count()
    );
}

/// Hostile names (markup, escape sequences, a bidi override: SYNTHETIC) are
/// shown as escapes and still fit the width; none reaches the terminal raw.
#[test]
fn hostile_names_fit_the_width_as_escapes() {
    let dir = tempfile::tempdir().unwrap();
    synthetic::write_run(
        dir.path(),
        Shape {
            ranks: 4,
            events: 200,
            hostile: true,
        },
    );
    let m = model(dir.path());
    let mut out = Vec::new();
    prewarm_doctor::report::renderer::Renderer::render(
        &Terminal {
            selection: Selection::All,
        },
        &m,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(too_wide(&text).is_empty(), "{:#?}", too_wide(&text));
    assert!(
        !text
            .chars()
            .any(|c| c != '\n' && prewarm_doctor::report::escape::is_unsafe(c)),
        "{text}"
    );
    assert!(text.contains("\\x1b[31m"), "{text}");
}

/// NCCL's own init time ("Init timings ... total 0.53", two decimals of a
/// second) is shown at that resolution wherever the terminal report gives a
/// communicator's time: "530 ms", not "530.0 ms".
#[test]
fn nccl_init_times_are_shown_at_the_logs_resolution() {
    let run = common::repo("tests/fixtures/h200/examples-nccl-baseline");
    let log = std::fs::read_dir(run.join("default/1/vm"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("nccl.")
        })
        .unwrap();
    let log = std::fs::read_to_string(log).unwrap();
    let total = log
        .lines()
        .find_map(|l| {
            l.split_once("Init timings")?
                .1
                .split_once(" total ")?
                .1
                .split(' ')
                .next()
        })
        .unwrap();
    assert_eq!(total.split_once('.').unwrap().1.len(), 2, "{total}");
    let ms = format!("{} ms", (total.parse::<f64>().unwrap() * 1000.0).round());
    let text = Terminal {
        selection: Selection::Default,
    }
    .text(&model(&run))
    .unwrap();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for place in [
        format!("NCCL init {ms},"),
        format!("; {ms}, 556.0 MiB; step 1"),
        format!("created in step 1: {ms},"),
    ] {
        assert!(flat.contains(&place), "{place}: {text}");
    }
    assert!(!text.contains(".0 ms, 556.0 MiB"), "{text}");
}
