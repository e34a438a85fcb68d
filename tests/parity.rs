//! Every format says the same thing. Facts are taken from the report model
//! — each verdict's class, what it moved and what it cost; each
//! out-of-memory failure's request, what-if per prewarm and remedy; the
//! phase a process without a step is in; the warmups still landing after
//! setup; the probe's own time in step 1; the communicator ids; what NCCL
//! allocated outside every communicator's init; each rank's steady step and
//! what it is the median of, its steps and the step it died in, its
//! exceptions — and each is looked for in the terminal
//! report, the Markdown, the HTML as headless Chromium shows it (DOM text),
//! the dashboard (ratatui's TestBackend), and where the fact has a place
//! there, the PNG charts (their drawn text) and the Perfetto trace, on every
//! recording under tests/fixtures/h200 and reports/h200-matrix.
//!
//! The facts' text is made by the renderers' own wording functions
//! (`verdict_text`, `step_text`, `comm_text`, …): this checks that every
//! format says what the others say, not that the wording is right. What the
//! recordings themselves hold is checked literally, per kind of fact, by
//! `every_format_states_what_the_recording_itself_holds` below (and by the
//! h200_* tests against the scripts' own readings).
//!
//! Needs Debian's `chromium` for the HTML (as tests/html_chromium.rs; set
//! PD_SKIP_CHROMIUM=1 to leave the HTML out knowingly).

mod common;

use common::{model_of, repo};
use prewarm_doctor::report::charts::Chart;
use prewarm_doctor::report::html::Html;
use prewarm_doctor::report::markdown::Markdown;
use prewarm_doctor::report::model::{ReportModel, costs_text};
use prewarm_doctor::report::perfetto::Perfetto;
use prewarm_doctor::report::renderer::render_to_vec;
use prewarm_doctor::report::select::Selection;
use prewarm_doctor::report::terminal::Terminal;
use prewarm_doctor::tui::app::App;
use prewarm_doctor::tui::shared::RunState;
use prewarm_doctor::tui::theme::Theme;
use prewarm_doctor::tui::views::Tab;
use ratatui::Terminal as Tty;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::{Path, PathBuf};

/// Where a fact must be found: a report format that states facts to a
/// reader, or the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Terminal,
    Markdown,
    Html,
    Dashboard,
    Png,
    Perfetto,
}

/// The surface each report format is checked as (None: JSON and CSV, the
/// machine formats, checked against the schema and their own tests). A new
/// format of `report` makes the compiler ask for it here.
fn surface(f: prewarm_doctor::report::format::Format) -> Option<Format> {
    use prewarm_doctor::report::format::Format as F;
    match f {
        F::Text => Some(Format::Terminal),
        F::Md => Some(Format::Markdown),
        F::Html => Some(Format::Html),
        F::Png => Some(Format::Png),
        F::Perfetto => Some(Format::Perfetto),
        F::Json | F::Csv => None,
    }
}

#[test]
fn every_report_format_that_states_facts_is_a_checked_surface() {
    let checked: Vec<Format> = prewarm_doctor::report::format::Format::ALL
        .into_iter()
        .filter_map(surface)
        .collect();
    assert_eq!(
        checked,
        [
            Format::Terminal,
            Format::Markdown,
            Format::Html,
            Format::Png,
            Format::Perfetto
        ]
    );
}

const TEXT: &[Format] = &[
    Format::Terminal,
    Format::Markdown,
    Format::Html,
    Format::Dashboard,
];

/// One fact of the model: text that must appear, or a pair that must
/// appear close together ("cublas" then "works" within a few words).
#[derive(Debug)]
struct Fact {
    what: String,
    text: String,
    /// When set, `text` must be followed by this within 90 characters.
    then: Option<String>,
    formats: Vec<Format>,
}

fn fact(what: &str, text: impl Into<String>, formats: &[Format]) -> Fact {
    Fact {
        what: what.into(),
        text: text.into(),
        then: None,
        formats: formats.to_vec(),
    }
}

fn near(what: &str, a: impl Into<String>, b: impl Into<String>, formats: &[Format]) -> Fact {
    Fact {
        then: Some(b.into()),
        ..fact(what, a, formats)
    }
}

/// The facts of a model.
fn facts(m: &ReportModel) -> Vec<Fact> {
    use Format::*;
    let mut out = Vec::new();
    if let Some(matrix) = &m.matrix {
        for v in &matrix.verdicts {
            out.push(near(
                "verdict class",
                &v.variant,
                &v.label,
                &[Terminal, Markdown, Html, Dashboard, Png],
            ));
            out.push(fact(
                "what it moved",
                prewarm_doctor::report::model::moved_text(v),
                &[Terminal, Markdown, Html],
            ));
            let costs = costs_text(&v.costs);
            let setup = costs.split(", ").next().unwrap_or_default().to_string();
            if setup.starts_with("setup ") {
                out.push(fact("setup cost", setup, &[Terminal, Markdown, Html]));
            }
            if v.costs.held_extra_bytes > 0.0 {
                let held = costs.split(", ").last().unwrap_or_default().to_string();
                out.push(fact("memory cost", held, TEXT));
            }
            for e in v
                .evidence
                .iter()
                .filter(|e| e.contains("outside any communicator"))
            {
                out.push(fact("NCCL outside every communicator's init", e, TEXT));
            }
        }
    }
    for (_, r, f) in m.forensics() {
        out.push(fact(
            "failing request",
            prewarm_doctor::report::verdict_text::request_text(f),
            TEXT,
        ));
        for g in prewarm_doctor::report::forensics_text::projection_texts(f) {
            out.push(near("what-if", g.prewarms.join(", "), &g.outcome, TEXT));
        }
        for remedy in &f.remedies {
            out.push(fact(
                "remedy",
                prewarm_doctor::report::forensics_text::remedy_text(remedy),
                TEXT,
            ));
        }
        if r.no_step() {
            out.push(fact(
                "phase of a run without a step",
                "before any step",
                TEXT,
            ));
        }
    }
    for v in m.variants() {
        let Some((_, r)) = m.representative(v) else {
            continue;
        };
        if r.no_step() {
            out.push(fact(
                "phase of a run without a step",
                "before any step",
                &[Terminal, Markdown, Html, Dashboard, Perfetto],
            ));
        }
        let step1 = prewarm_doctor::analysis::ranks::step1(&r.account);
        if let Some(ph) = step1.filter(|_| !r.no_step()) {
            out.push(fact(
                "the doctor's own step-1 time",
                prewarm_doctor::report::verdict_text::doctor_in_step1(ph),
                &[Terminal, Markdown, Html],
            ));
            if let Some(note) = prewarm_doctor::report::comm_text::outside_note(ph, "nccl") {
                out.push(fact(
                    "NCCL's step-1 allocation outside every communicator's init",
                    note,
                    &[Terminal, Markdown],
                ));
            }
        }
        out.extend(step_facts(r));
        for w in r.late_warmups().iter().filter(|w| !w.minor) {
            let text = prewarm_doctor::report::warmup_text::warmup_text(w);
            out.push(fact("late warmup", text.what, &[Terminal, Markdown, Html]));
        }
        for c in &r.account.nccl {
            let id = c.comm_id.clone().unwrap_or_else(|| c.comm.clone());
            out.push(fact(
                "communicator id",
                id,
                &[Terminal, Html, Dashboard, Perfetto],
            ));
        }
    }
    out
}

/// The facts of a rank's steps: the steady step with what it is the median
/// of, the steps that ended and the one it died in (its phase as the phase
/// tables name it), and each exception with where it was raised.
fn step_facts(r: &prewarm_doctor::report::model::RankView) -> Vec<Fact> {
    use Format::*;
    use prewarm_doctor::report::step_text::{
        exception_place, exception_text, raised_at, steady_text, steps_done,
    };
    let s = &r.account.steps;
    let mut out = Vec::new();
    if let Some(t) = steady_text(s) {
        out.push(fact("steady step", t, &[Terminal, Markdown, Html]));
    }
    if s.step1_s.is_some() {
        out.push(fact("steps", steps_done(s), &[Terminal, Markdown, Html]));
    }
    if s.died_in_step.is_some_and(|k| k >= 2) {
        let label = prewarm_doctor::report::account_tables::phase_label(
            &r.account,
            prewarm_doctor::analysis::phases::Phase::Steady,
        );
        out.push(fact(
            "phase it died in",
            label,
            &[Terminal, Markdown, Perfetto],
        ));
    }
    for e in &r.account.exceptions {
        let formats = [Terminal, Markdown, Html];
        out.push(fact("exception", exception_text(e), &formats));
        out.push(fact(
            "exception's place",
            exception_place(r.no_step(), e),
            &formats,
        ));
        out.extend(raised_at(e).map(|at| fact("where it was raised", at, &formats)));
        // The dashboard's detail wraps long words (a URL) at its border: its
        // message's opening words are looked for there.
        let first: String = e
            .message
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .chars()
            .take(60)
            .collect();
        out.push(fact("exception's message", first, &[Dashboard]));
    }
    out
}

/// Whitespace collapsed, Markdown's escapes and emphasis and the
/// dashboard's box borders removed, so wrapped text reads as one line.
fn normalise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|n| n.is_ascii_punctuation()) => {
                out.push(chars.next().unwrap());
            }
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
            }
            '│' | '┃' | '║' => out.push(' '),
            c => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn holds(f: &Fact, hay: &str) -> bool {
    let hay_l = hay.to_lowercase();
    let text = normalise(&f.text).to_lowercase();
    // A word longer than a line (a URL in an exception) is broken where it
    // meets the edge: without whitespace the two still read the same.
    let bare = |s: &str| s.split_whitespace().collect::<String>();
    match &f.then {
        None => hay_l.contains(&text) || bare(&hay_l).contains(&bare(&text)),
        Some(then) => {
            let then = normalise(then).to_lowercase();
            hay_l.match_indices(&text).any(|(i, _)| {
                let rest: String = hay_l[i + text.len()..].chars().take(90).collect();
                rest.contains(&then)
            })
        }
    }
}

fn terminal(m: &ReportModel) -> String {
    Terminal {
        selection: Selection::All,
    }
    .text(m)
    .unwrap()
}

fn markdown(m: &ReportModel) -> String {
    String::from_utf8(
        render_to_vec(
            &Markdown {
                selection: Selection::All,
            },
            m,
        )
        .unwrap(),
    )
    .unwrap()
}

/// The HTML's text as Chromium shows it (the DOM after parsing, tags out,
/// entities decoded by the browser).
fn html_dom_text(m: &ReportModel, dir: &Path) -> Option<String> {
    let bin = chromium()?;
    let page = dir.join("report.html");
    std::fs::write(&page, render_to_vec(&Html, m).unwrap()).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    Some(dom_text(&dom))
}

/// Text nodes of a serialised DOM (charts and styles left out: the
/// charts are checked as PNG).
fn dom_text(dom: &str) -> String {
    let mut out = String::new();
    let mut rest = dom;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("<wbr>") {
            // A break opportunity inside a word: no character.
            rest = after;
            continue;
        }
        let end_tag = ["svg", "style", "script"]
            .iter()
            .find(|t| tail.starts_with(&format!("<{t}")))
            .map(|t| format!("</{t}>"));
        rest = match end_tag {
            Some(close) => tail.find(&close).map_or("", |j| &tail[j + close.len()..]),
            None => tail.find('>').map_or("", |j| &tail[j + 1..]),
        };
        out.push(' ');
    }
    out.push_str(rest);
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

fn chromium() -> Option<PathBuf> {
    if std::env::var_os("PD_SKIP_CHROMIUM").is_some_and(|v| v == "1") {
        return None;
    }
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|c| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|p| p.join(c))
                .find(|p| p.is_file())
        });
    Some(found.or_else(|| std::env::var_os("PD_CHROMIUM").map(PathBuf::from)).expect(
        "headless Chromium is needed (`bash scripts/test.sh` installs it: apt-get install -y chromium), or set PD_SKIP_CHROMIUM=1",
    ))
}

/// Every screen of the dashboard a reader would look at for the facts: the
/// matrix, and for each attempt and process its account, its events (all,
/// then the NCCL communicators alone), and the detail of each failed event.
fn dashboard_text(run: &Path) -> String {
    let data = prewarm_doctor::tui::loader::load_once(run, false).unwrap();
    let mut app = App::new(data, Theme::plain(), RunState::Replay);
    let mut text = screen(&app);
    // Each verdict's evidence (the matrix rows, Enter).
    app.tab = Tab::Matrix;
    for _ in 0..app.shared.matrix_rows() {
        press(&mut app, KeyCode::Enter);
        text.push_str(&overlay_screens(&mut app));
        press(&mut app, KeyCode::Down);
    }
    for a in 0..app.shared.data.model.attempts.len() {
        app.select_attempt(a as isize);
        for r in 0..app.shared.attempt().map_or(0, |a| a.ranks.len()) {
            app.select_rank(r as isize);
            app.tab = Tab::Account;
            text.push_str(&screen(&app));
            app.tab = Tab::Events;
            filter(&mut app, "");
            text.push_str(&screen(&app));
            filter(&mut app, "nccl comm");
            text.push_str(&screen(&app));
            filter(&mut app, "");
            let failed: Vec<usize> = (0..app.views.events.rows.len())
                .filter(|&k| app.shared.tables().events[app.views.events.rows[k]].failed)
                .collect();
            for k in failed {
                app.views.events.selected = k;
                press(&mut app, KeyCode::Enter);
                text.push_str(&overlay_screens(&mut app));
            }
        }
    }
    text
}

/// An open overlay drawn, scrolled through to its end, then closed: a
/// screen every 10 rows, fewer than an overlay that scrolls shows (a step
/// of 20 skipped a row of account-matrix's nccl_comm evidence, whose
/// overlay shows 19).
fn overlay_screens(app: &mut App) -> String {
    let mut text = String::new();
    if app.overlay().is_none() {
        return text;
    }
    for _ in 0..16 {
        text.push_str(&screen(app));
        for _ in 0..10 {
            press(app, KeyCode::Char('j'));
        }
    }
    press(app, KeyCode::Esc);
    text
}

/// Sets the events filter as a user types it.
fn filter(app: &mut App, what: &str) {
    press(app, KeyCode::Char('/'));
    press(app, KeyCode::Esc);
    if !what.is_empty() {
        press(app, KeyCode::Char('/'));
        for c in what.chars() {
            press(app, KeyCode::Char(c));
        }
        press(app, KeyCode::Enter);
    }
}

fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

fn screen(app: &App) -> String {
    let (w, h) = (200u16, 70u16);
    let mut term = Tty::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// The text drawn on every PNG chart, in drawing order.
fn png_text(m: &ReportModel) -> String {
    let mut out = String::new();
    for chart in Chart::all(m) {
        for b in prewarm_doctor::report::png::chart_text_boxes(m, &chart).unwrap() {
            out.push_str(&b.text);
            out.push(' ');
        }
    }
    out
}

fn perfetto_text(m: &ReportModel) -> String {
    String::from_utf8(render_to_vec(&Perfetto, m).unwrap()).unwrap()
}

#[test]
fn every_format_states_every_fact_of_the_model_on_every_recording() {
    let dir = tempfile::tempdir().unwrap();
    let mut missing = Vec::new();
    let mut checked = 0;
    for run in common::recordings() {
        let m = model_of(&run, &run.display().to_string());
        let facts = facts(&m);
        let html = html_dom_text(&m, dir.path());
        let texts: Vec<(Format, Option<String>)> = vec![
            (Format::Terminal, Some(terminal(&m))),
            (Format::Markdown, Some(markdown(&m))),
            (Format::Html, html),
            (Format::Dashboard, Some(dashboard_text(&run))),
            (Format::Png, Some(png_text(&m))),
            (Format::Perfetto, Some(perfetto_text(&m))),
        ];
        for (format, text) in &texts {
            let Some(text) = text else { continue };
            let hay = normalise(text);
            for f in facts.iter().filter(|f| f.formats.contains(format)) {
                checked += 1;
                if !holds(f, &hay) {
                    missing.push(format!(
                        "{}: {format:?} lacks the {} {:?}{}",
                        run.strip_prefix(repo("")).unwrap_or(&run).display(),
                        f.what,
                        f.text,
                        f.then
                            .as_ref()
                            .map_or(String::new(), |t| format!(" … {t:?}"))
                    ));
                }
            }
        }
    }
    assert!(
        checked > 200,
        "only {checked} checks: the facts are not being found"
    );
    assert!(
        missing.is_empty(),
        "{} facts missing:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn the_normalisation_reads_wrapped_escaped_and_boxed_text_as_one_line() {
    assert_eq!(normalise("a\n     b"), "a b");
    assert_eq!(
        normalise(r"triton\_autotune **WORKS**"),
        "triton_autotune WORKS"
    );
    assert_eq!(normalise("│ still short │\n│ by 1 │"), "still short by 1");
    let f = near("x", "cublas", "works", &[]);
    assert!(holds(&f, "cublas (works)"));
    assert!(!holds(&f, &format!("cublas {} works", "x".repeat(90))));
}

/// Literal facts of the bundled matrix, read off its own files rather than
/// made by the code under test: the communicator ids NCCL logged, the
/// cuBLAS workspace bytes (128.3 MiB, the allocation calls the probe
/// recorded from libcublas), the verdict classes (docs/verdicts.md §6), each
/// in the terminal report, the Markdown and the HTML as it reads.
#[test]
fn every_format_states_what_the_recording_itself_holds() {
    let run = repo("reports/h200-matrix");
    let mut ids = std::collections::BTreeSet::new();
    for e in walk_files(&run) {
        if e.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("nccl.")
        {
            let text = std::fs::read_to_string(&e).unwrap();
            for w in text.split_whitespace() {
                if let Some(id) = w
                    .strip_prefix("0x")
                    .filter(|_| text.contains(&format!("commId {w}")))
                {
                    ids.insert(format!("0x{id}"));
                }
            }
        }
    }
    assert!(!ids.is_empty());
    let model = model_of(&run, "h200-matrix");
    let terminal = common::terminal_text(&run);
    let markdown = String::from_utf8(
        render_to_vec(
            &Markdown {
                selection: Selection::All,
            },
            &model,
        )
        .unwrap(),
    )
    .unwrap();
    let html =
        common::html_as_read(&String::from_utf8(render_to_vec(&Html, &model).unwrap()).unwrap());
    for (name, text) in [
        ("terminal", &terminal),
        ("markdown", &markdown),
        ("html", &html),
    ] {
        for literal in ["cublas", "WORKS", "128.3 MiB", "558.0 MiB"] {
            let t = text.to_uppercase();
            assert!(
                t.contains(&literal.to_uppercase()),
                "{name} lacks {literal}"
            );
        }
        assert!(
            ids.iter().any(|id| text.contains(id.as_str())),
            "{name} names no logged communicator"
        );
    }
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
