//! Dashboard frame time on a large run: one rank with 1M allocation events
//! (a tenth of them by NCCL, outside the pool), written in the real event
//! format by the same synthetic generator as benches/analysis.rs (benchmark
//! input, not a recording). Target (issue 12): every frame of every view
//! ≤ 16 ms, and a keystroke in the events filter too. The run is loaded and
//! analysed once; what is timed is what happens per frame or per key.
//!
//! `cargo bench --bench tui` (set PD_BENCH_EVENTS to change the count).

#[path = "common/big_run.rs"]
mod big_run;

use big_run::make_run;
use criterion::{Criterion, criterion_group, criterion_main};
use prewarm_doctor::tui::app::App;
use prewarm_doctor::tui::loader::load_once;
use prewarm_doctor::tui::shared::RunState;
use prewarm_doctor::tui::theme::Theme;
use prewarm_doctor::tui::views::Tab;
use prewarm_doctor::tui::views::timeline::Zoom;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn bench(c: &mut Criterion) {
    let events: u64 = std::env::var("PD_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    make_run(dir.path(), 1, events);
    let data = load_once(dir.path(), false).unwrap();
    let mut app = App::new(data, Theme::from_env(), RunState::Replay);
    let rows = app.shared.tables().events.len();
    let mut g = c.benchmark_group(format!(
        "tui frame, 1 rank x {events} events ({rows} in the table)"
    ));
    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        for (tab, zoom) in [
            (Tab::Matrix, Zoom::All),
            (Tab::Timeline, Zoom::All),
            (Tab::Timeline, Zoom::Step1),
            (Tab::Events, Zoom::All),
            (Tab::Ranks, Zoom::All),
            (Tab::Account, Zoom::All),
        ] {
            app.tab = tab;
            app.views.timeline.zoom = zoom;
            g.bench_function(format!("{w}x{h} {tab:?} {}", zoom.label()), |b| {
                b.iter(|| {
                    term.draw(|f| app.draw(f)).unwrap();
                })
            });
        }
    }
    app.tab = Tab::Events;
    app.on_key(KeyEvent::new(KeyCode::Char('/'), KeyModifiers::NONE));
    g.bench_function("events filter keystroke (type + erase)", |b| {
        b.iter(|| {
            app.on_key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::NONE));
            app.on_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE));
        })
    });
    g.bench_function("events sort keystroke", |b| {
        app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        b.iter(|| app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
