//! The dashboard on the real H200 recordings: every view drawn on
//! ratatui's `TestBackend` (insta snapshots, 80×24 and 120×40), and what
//! each key does to the state.

mod common;

use prewarm_doctor::tui::app::{App, Effect};
use prewarm_doctor::tui::dashboard::Dashboard;
use prewarm_doctor::tui::draw::overlay::Overlay;
use prewarm_doctor::tui::loader::load_once;
use prewarm_doctor::tui::process_tables::EventKind;
use prewarm_doctor::tui::shared::RunState;
use prewarm_doctor::tui::theme::Theme;
use prewarm_doctor::tui::views::Tab;
use prewarm_doctor::tui::views::timeline::Zoom;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use std::path::Path;

fn dashboard(rel: &str) -> Dashboard {
    load_once(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel), false).unwrap()
}

fn app(rel: &str) -> App {
    App::new(dashboard(rel), Theme::plain(), RunState::Replay)
}

/// The screen as text, one line per row (trailing blanks trimmed).
fn screen(app: &App, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| app.draw(f)).unwrap();
    let buf = term.backend().buffer();
    let mut out = String::new();
    for y in 0..h {
        let mut line = String::new();
        for x in 0..w {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn key(app: &mut App, code: KeyCode) -> Effect {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn keys(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn ctrl_c(app: &mut App) -> Effect {
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL))
}

const MATRIX: &str = "reports/h200-matrix";

// ---- snapshots of every view ----

#[test]
fn matrix_view() {
    let a = app(MATRIX);
    assert_eq!(a.tab, Tab::Matrix);
    insta::assert_snapshot!("matrix_80x24", screen(&a, 80, 24));
    insta::assert_snapshot!("matrix_120x40", screen(&a, 120, 40));
}

#[test]
fn matrix_verdict_evidence() {
    let mut a = app(MATRIX);
    for _ in 0..3 {
        key(&mut a, KeyCode::Down);
    }
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.overlay(), Some(Overlay::Verdict(3)));
    let s = screen(&a, 120, 40);
    assert!(s.contains("nccl_comm WORKS"), "{s}");
    assert!(s.contains("+390.0 MiB held at step-1 end"), "{s}");
    insta::assert_snapshot!("matrix_verdict_nccl_comm", s);
}

#[test]
fn timeline_view() {
    let mut a = app(MATRIX);
    key(&mut a, KeyCode::Tab);
    assert_eq!(a.tab, Tab::Timeline);
    insta::assert_snapshot!("timeline_everything_80x24", screen(&a, 80, 24));
    key(&mut a, KeyCode::Char('2'));
    assert_eq!(a.views.timeline.zoom, Zoom::Step1);
    // Step to the spilling autotune candidate's local-memory growth.
    let markers = a.shared.tables().markers.clone();
    let spill = markers
        .iter()
        .position(|m| m.kind == EventKind::LocalMemory && m.bytes.unwrap_or(0) > 100 << 20)
        .expect("the recording's +192 MiB local-memory growth is a marker");
    while a.views.timeline.cursor != Some(spill) {
        let before = a.views.timeline.cursor;
        key(&mut a, KeyCode::Char('l'));
        assert_ne!(
            a.views.timeline.cursor, before,
            "the cursor reaches the growth"
        );
    }
    let s = screen(&a, 120, 40);
    assert!(s.contains("BLOCK: 4096"), "the candidate is shown: {s}");
    insta::assert_snapshot!("timeline_step1_spill_120x40", s);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.overlay(), Some(Overlay::Marker(spill)));
    insta::assert_snapshot!("timeline_marker_detail", screen(&a, 100, 30));
}

#[test]
fn events_view() {
    let mut a = app(MATRIX);
    a.tab = Tab::Events;
    insta::assert_snapshot!("events_80x24", screen(&a, 80, 24));
    key(&mut a, KeyCode::Char('/'));
    keys(&mut a, "nccl");
    key(&mut a, KeyCode::Enter);
    let rank = a.shared.tables();
    assert!(!a.views.events.rows.is_empty());
    assert!(a.views.events.rows.iter().all(|&i| {
        format!("{:?}", rank.events[i])
            .to_lowercase()
            .contains("nccl")
    }));
    // Sort by bytes, largest first.
    while prewarm_doctor::tui::draw::events::Column::ALL[a.views.events.sort]
        != prewarm_doctor::tui::draw::events::Column::Bytes
    {
        key(&mut a, KeyCode::Char('s'));
    }
    key(&mut a, KeyCode::Char('r'));
    let rank = a.shared.tables();
    let b: Vec<u64> = a
        .views
        .events
        .rows
        .iter()
        .map(|&i| rank.events[i].bytes.unwrap_or(0))
        .collect();
    assert!(b.windows(2).all(|w| w[0] >= w[1]), "{b:?}");
    insta::assert_snapshot!("events_nccl_by_bytes_80x24", screen(&a, 80, 24));
    key(&mut a, KeyCode::Enter);
    insta::assert_snapshot!("events_detail", screen(&a, 120, 30));
}

#[test]
fn ranks_view_on_two_nodes() {
    let mut a = app("tests/fixtures/h200/multinode-fsdp2");
    a.tab = Tab::Ranks;
    let s = screen(&a, 80, 24);
    assert!(s.contains("rank 1"), "{s}");
    insta::assert_snapshot!("ranks_multinode_80x24", s);
    // Selecting rank 1 drives the other views.
    key(&mut a, KeyCode::Down);
    assert_eq!(a.shared.rank, 1);
    key(&mut a, KeyCode::Enter);
    assert_eq!(a.tab, Tab::Timeline);
    assert!(screen(&a, 80, 24).contains("rank 1"));
}

#[test]
fn account_view() {
    let mut a = app(MATRIX);
    a.tab = Tab::Account;
    let s = screen(&a, 80, 24);
    assert!(
        s.contains("unexplained") && s.contains("= device used"),
        "{s}"
    );
    insta::assert_snapshot!("account_80x24", s);
}

#[test]
fn single_run_lists_its_attempts() {
    let a = app("tests/fixtures/h200/examples-nccl-baseline");
    assert!(a.shared.data.model.matrix.is_none());
    insta::assert_snapshot!("single_run_80x24", screen(&a, 80, 24));
}

#[test]
fn out_of_memory_events() {
    let mut a = app("tests/fixtures/h200/oom-triton-baseline");
    a.tab = Tab::Events;
    let oom = a
        .shared
        .tables()
        .events
        .iter()
        .any(|e| e.kind == EventKind::OutOfMemory);
    assert!(oom, "the failed request is an event");
    insta::assert_snapshot!("events_oom_triton_80x24", screen(&a, 80, 24));
}

#[test]
fn help_lists_the_keys() {
    let mut a = app(MATRIX);
    key(&mut a, KeyCode::Char('?'));
    let s = screen(&a, 80, 24);
    for k in ["q / Esc", "Tab / Shift-Tab", "g / G", "Ctrl-C"] {
        assert!(s.contains(k), "{k}: {s}");
    }
    insta::assert_snapshot!("help_80x24", s);
}

/// The dashboard's key table (docs/reports.md, "The dashboard", moved there
/// from the README) lists what the help panel lists.
#[test]
fn the_dashboard_doc_lists_every_key() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reports.md"))
            .unwrap()
            .replace('`', "");
    for (k, _) in prewarm_doctor::tui::draw::overlay::KEYS {
        assert!(
            doc.contains(&format!("| {k} |")),
            "docs/reports.md lacks the key {k}"
        );
    }
}

/// A run still being written: a copy of a real recording whose last attempt
/// has no exit status yet (as `host.json` looks while the command runs), and
/// the training's real console output in the log pane.
#[test]
fn live_view_of_a_run_in_progress() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(MATRIX);
    let dir = tempfile::tempdir().unwrap();
    common::copy_tree(&src, dir.path());
    let host = dir.path().join("all/2/vm/host.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&host).unwrap()).unwrap();
    meta["exit"] = serde_json::Value::Null;
    std::fs::write(&host, meta.to_string()).unwrap();
    let mut d = load_once(dir.path(), false).unwrap();
    let live = d
        .live
        .as_mut()
        .expect("an attempt without exit status is live");
    assert_eq!(live.current.as_deref(), Some("all/2"));
    assert_eq!(live.total, 15);
    assert_eq!(live.done, 10);
    assert!(!live.gpus.is_empty() && !live.gpus[0].history.is_empty());
    // The clock is the only thing that depends on when the test runs.
    live.elapsed_s = 754.0;
    live.eta_s = Some(377.0);
    let mut a = App::new(d, Theme::plain(), RunState::Running);
    assert_eq!(a.tab, Tab::Live);
    assert_eq!(
        a.shared.attempt().unwrap().id(),
        "all/2",
        "follows the running attempt"
    );
    let console = std::fs::read_to_string(src.join("console-stdout.txt")).unwrap();
    for line in console.lines() {
        a.views.live.push(line.to_string());
    }
    insta::assert_snapshot!("live_80x24", screen(&a, 80, 24));
    insta::assert_snapshot!("live_120x40", screen(&a, 120, 40));
}

// ---- colours: readable on dark and light terminals, NO_COLOR honoured ----

#[test]
fn colours_are_foreground_accents_only_and_plain_has_none() {
    let mut a = app(MATRIX);
    for tab in [
        Tab::Matrix,
        Tab::Timeline,
        Tab::Events,
        Tab::Ranks,
        Tab::Account,
    ] {
        a.tab = tab;
        for (theme, coloured) in [(Theme { color: true }, true), (Theme::plain(), false)] {
            a.shared.theme = theme;
            let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
            term.draw(|f| a.draw(f)).unwrap();
            let buf = term.backend().buffer();
            let mut any_fg = false;
            for cell in buf.content() {
                assert_eq!(cell.bg, Color::Reset, "{tab:?}: no painted background");
                any_fg |= cell.fg != Color::Reset;
            }
            assert_eq!(any_fg, coloured, "{tab:?} coloured={coloured}");
        }
    }
}

/// A hostile kernel name (escape sequences, a bell) draws as inert text.
#[test]
fn hostile_names_cannot_drive_the_terminal() {
    let mut model = dashboard(MATRIX).model;
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J<script>x</script>\r\n";
    for r in model.attempts.iter_mut().flat_map(|a| a.ranks.iter_mut()) {
        for m in r.timeline.markers.iter_mut() {
            m.what = hostile.into();
            m.source = hostile.into();
            m.key = Some(hostile.into());
        }
        let p = &mut r.account;
        for e in p.exposures.iter_mut() {
            e.what = hostile.into();
            e.source = hostile.into();
        }
        for l in p.local_memory.iter_mut() {
            l.kernel = hostile.into();
        }
        for a in p.autotune.iter_mut() {
            a.kernel = hostile.into();
            a.source = hostile.into();
        }
        for c in p.compiles.iter_mut() {
            c.kernel = hostile.into();
        }
    }
    let d = Dashboard::new(model, None);
    let mut a = App::new(d, Theme::plain(), RunState::Replay);
    for tab in [Tab::Timeline, Tab::Events] {
        a.tab = tab;
        key(&mut a, KeyCode::Enter);
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        term.draw(|f| a.draw(f)).unwrap();
        let mut text = String::new();
        for cell in term.backend().buffer().content() {
            assert!(
                !cell.symbol().contains(char::is_control),
                "{tab:?}: {:?}",
                cell.symbol()
            );
            text.push_str(cell.symbol());
        }
        assert!(text.contains("pwned"), "{tab:?}: the hostile name is shown");
        key(&mut a, KeyCode::Esc);
    }
}

// ---- keys ----

#[test]
fn tabs_cycle_both_ways() {
    let mut a = app(MATRIX);
    let order = [
        Tab::Timeline,
        Tab::Events,
        Tab::Ranks,
        Tab::Account,
        Tab::Matrix,
    ];
    for t in order {
        key(&mut a, KeyCode::Tab);
        assert_eq!(a.tab, t);
    }
    key(&mut a, KeyCode::BackTab);
    assert_eq!(a.tab, Tab::Account);
}

#[test]
fn quitting_a_replay_is_immediate() {
    let mut a = app(MATRIX);
    assert_eq!(key(&mut a, KeyCode::Char('q')), Effect::Quit);
    assert_eq!(key(&mut a, KeyCode::Esc), Effect::Quit);
    assert_eq!(ctrl_c(&mut a), Effect::Quit);
}

#[test]
fn quitting_a_live_run_asks_first() {
    let mut a = App::new(dashboard(MATRIX), Theme::plain(), RunState::Running);
    assert_eq!(key(&mut a, KeyCode::Char('q')), Effect::None);
    assert_eq!(a.overlay(), Some(Overlay::ConfirmQuit));
    insta::assert_snapshot!("confirm_quit_80x24", screen(&a, 80, 24));
    assert_eq!(key(&mut a, KeyCode::Char('n')), Effect::None);
    assert_eq!(a.overlay(), None);
    assert_eq!(a.shared.run, RunState::Running, "nothing was stopped");
    key(&mut a, KeyCode::Esc);
    assert_eq!(key(&mut a, KeyCode::Char('d')), Effect::Detach);
    let mut a = App::new(dashboard(MATRIX), Theme::plain(), RunState::Running);
    key(&mut a, KeyCode::Char('q'));
    assert_eq!(key(&mut a, KeyCode::Char('y')), Effect::Stop);
    assert_eq!(a.shared.run, RunState::Stopping);
    // The dashboard closes once the stopped run has ended.
    assert_eq!(a.finished(130), Effect::Quit);
}

#[test]
fn ctrl_c_is_forwarded_during_a_live_run() {
    let mut a = App::new(dashboard(MATRIX), Theme::plain(), RunState::Running);
    assert_eq!(ctrl_c(&mut a), Effect::Interrupt);
    assert_eq!(a.shared.run, RunState::Stopping);
    assert!(a.status.as_deref().unwrap().contains("again kills"));
    assert_eq!(ctrl_c(&mut a), Effect::Interrupt);
    assert_eq!(a.interrupts, 2);
    assert!(a.status.as_deref().unwrap().contains("killed"));
    // A run that ended on its own leaves the dashboard open.
    let mut a = App::new(dashboard(MATRIX), Theme::plain(), RunState::Running);
    assert_eq!(a.finished(0), Effect::None);
    assert_eq!(key(&mut a, KeyCode::Char('q')), Effect::Quit);
}

#[test]
fn matrix_rows_select_their_attempt_and_brackets_step_through_attempts() {
    let mut a = app(MATRIX);
    assert_eq!(a.shared.attempt().unwrap().id(), "baseline/1");
    key(&mut a, KeyCode::Char('j'));
    assert_eq!(a.shared.attempt().unwrap().id(), "cublas/1");
    key(&mut a, KeyCode::Char('G'));
    assert_eq!(a.shared.attempt().unwrap().id(), "all/1");
    key(&mut a, KeyCode::Char('g'));
    key(&mut a, KeyCode::Char(']'));
    assert_eq!(a.shared.attempt().unwrap().id(), "baseline/2");
    for _ in 0..50 {
        key(&mut a, KeyCode::Char(']'));
    }
    assert_eq!(
        a.shared.attempt,
        a.shared.data.model.attempts.len() - 1,
        "clamped at the last"
    );
    for _ in 0..50 {
        key(&mut a, KeyCode::Char('['));
    }
    assert_eq!(a.shared.attempt, 0);
}

#[test]
fn the_timeline_cursor_stays_in_the_zoom_window() {
    let mut a = app(MATRIX);
    a.tab = Tab::Timeline;
    key(&mut a, KeyCode::Char('2'));
    let step1 = a.views.timeline.in_window(&a.shared);
    assert!(!step1.is_empty());
    key(&mut a, KeyCode::Char('G'));
    assert_eq!(a.views.timeline.cursor, Some(step1.end - 1));
    key(&mut a, KeyCode::Right);
    assert_eq!(
        a.views.timeline.cursor,
        Some(step1.end - 1),
        "no step past the window"
    );
    key(&mut a, KeyCode::Char('g'));
    assert_eq!(a.views.timeline.cursor, Some(step1.start));
    key(&mut a, KeyCode::Left);
    assert_eq!(a.views.timeline.cursor, Some(step1.start));
    key(&mut a, KeyCode::Char('3'));
    assert!(a.views.timeline.in_window(&a.shared).len() >= step1.len());
    key(&mut a, KeyCode::Char('z'));
    assert_eq!(a.views.timeline.zoom, Zoom::Setup);
}

#[test]
fn the_filter_is_edited_and_cleared() {
    let mut a = app(MATRIX);
    a.tab = Tab::Events;
    let all = a.views.events.rows.len();
    key(&mut a, KeyCode::Char('/'));
    assert!(a.views.events.editing);
    keys(&mut a, "q");
    assert!(
        a.views.events.editing,
        "q types into the filter, it does not quit"
    );
    key(&mut a, KeyCode::Backspace);
    keys(&mut a, "autotune");
    assert!(a.views.events.rows.len() < all && !a.views.events.rows.is_empty());
    key(&mut a, KeyCode::Esc);
    assert!(!a.views.events.editing && a.views.events.filter.is_empty());
    assert_eq!(a.views.events.rows.len(), all);
}

#[test]
fn new_data_keeps_the_selection() {
    let mut a = app(MATRIX);
    key(&mut a, KeyCode::Char(']'));
    key(&mut a, KeyCode::Char(']'));
    let name = a.shared.attempt().unwrap().id();
    a.set_data(dashboard(MATRIX));
    assert_eq!(a.shared.attempt().unwrap().id(), name);
}

/// A probe's warning reaches the dashboard too (the ranks view's notes),
/// on a run folder CRAFTED from a recording (tests/common `with_probe_notice`).
#[test]
fn the_ranks_view_shows_the_probes_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let run = common::with_probe_notice(
        dir.path(),
        prewarm_events::NoticeLevel::Warning,
        "could not switch kernel records off: CUPTI_ERROR_NOT_INITIALIZED \u{1b}]0;pwned\u{7}",
    );
    let mut a = App::new(
        load_once(&run, false).unwrap(),
        Theme::plain(),
        RunState::Replay,
    );
    a.tab = Tab::Ranks;
    let s = screen(&a, 120, 40);
    assert!(
        s.contains("rank 0 on vm: probe warning (step 4, at ")
            && s.contains("s): could not switch kernel records off"),
        "{s}"
    );
    // Its escape sequence is drawn inert.
    assert!(
        s.contains("pwned") && !s.contains(|c: char| c.is_control() && c != '\n'),
        "{s:?}"
    );
}

/// A matrix that captured nothing (`run --no-probe --preset nemo-automodel
/// -- true`): every verdict INCONCLUSIVE.
fn inconclusive_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .args(["run", "--no-probe", "--preset", "nemo-automodel", "--out"])
        .arg(dir.path().join("run"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    dir
}

/// Issue 38: "INCONCLUSIVE" was cut to "INCONCLUSI" with 40 columns free.
/// Each verdict's class is shown whole on its variant's row, at 120 and at
/// 80 columns (where the names give way first).
#[test]
fn the_verdict_column_holds_its_longest_class() {
    let dir = inconclusive_run();
    let a = App::new(
        load_once(&dir.path().join("run"), false).unwrap(),
        Theme::plain(),
        RunState::Replay,
    );
    let m = a.shared.data.model.matrix.clone().unwrap();
    for (w, h) in [(120, 40), (80, 24)] {
        let s = screen(&a, w, h);
        for v in &m.verdicts {
            // The name may give way (clipped with "…"), never the verdict.
            let opening: String = v.variant.chars().take(10).collect();
            let row = s
                .lines()
                .find(|l| l.starts_with(&opening))
                .unwrap_or_else(|| panic!("{w}x{h}: no row for {}:\n{s}", v.variant));
            assert!(
                row.split_whitespace()
                    .any(|word| word == v.label.to_uppercase()),
                "{w}x{h}: {row:?}"
            );
        }
    }
}

/// Issue 38: the Account view cut its labels at 26 columns ("CUDA context
/// (incl. 148.5…") while the bars had room. At 120 columns every part of
/// the account is named whole, as every format names it, on every
/// recording's first process; at 80 the bars keep room too.
#[test]
fn the_account_names_its_parts_whole_when_there_is_room() {
    let mut checked = 0;
    for run in common::recordings() {
        let mut a = App::new(
            load_once(&run, false).unwrap(),
            Theme::plain(),
            RunState::Replay,
        );
        a.tab = Tab::Account;
        let Some(gap) = a.shared.rank().and_then(|r| r.step1_account()).cloned() else {
            continue;
        };
        let s = screen(&a, 120, 40);
        for part in &gap.parts {
            let name = prewarm_doctor::report::verdict_text::part_label(part);
            assert!(
                s.contains(&name),
                "{}: {name:?} not whole:\n{s}",
                run.display()
            );
            checked += 1;
        }
        // At 80 columns the bars still have a third of the line.
        let s = screen(&a, 80, 24);
        let bar = s
            .lines()
            .find(|l| l.starts_with("= device used"))
            .unwrap_or_else(|| panic!("{}:\n{s}", run.display()));
        assert!(bar.matches('█').count() >= 24, "{}: {bar:?}", run.display());
    }
    assert!(checked > 50, "only {checked} parts");
}

/// Issue 38: a single-variant run's footer offered verdict keys. The
/// Matrix view's footer offers the verdict only where the run has verdicts
/// (the bundled matrix), not on a single run (examples-nccl-baseline, whose
/// rows are its attempts: Enter shows their ranks).
#[test]
fn the_footer_offers_verdicts_only_where_there_are_some() {
    let footer = |a: &App| screen(a, 80, 24).lines().last().unwrap().to_string();
    let matrix = app(MATRIX);
    assert!(
        !matrix
            .shared
            .data
            .model
            .matrix
            .as_ref()
            .unwrap()
            .verdicts
            .is_empty()
    );
    assert!(
        footer(&matrix).contains("Enter verdict"),
        "{}",
        footer(&matrix)
    );
    let mut single = app("tests/fixtures/h200/examples-nccl-baseline");
    assert!(single.shared.data.model.matrix.is_none());
    let f = footer(&single);
    assert!(!f.contains("verdict"), "{f}");
    // What it offers is what the key does.
    assert!(f.contains("Enter ranks"), "{f}");
    key(&mut single, KeyCode::Enter);
    assert_eq!(single.tab, Tab::Ranks);
}
