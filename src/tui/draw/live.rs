//! The Live tab: how far the matrix is (attempt i/N, elapsed, estimate left),
//! each rank's phase and step, a memory sparkline per GPU, and the training's
//! output as it comes.

use super::{clip, clock, now_label, short_bytes};
use crate::report::model::RankView;
use crate::tui::dashboard::LiveView;
use crate::tui::shared::{RunState, Shared};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph, Sparkline};
use std::collections::VecDeque;
use unicode_width::UnicodeWidthStr;

/// The live view, with the training's output (`log`) scrolled `back`
/// lines from its newest.
pub fn draw(frame: &mut Frame, shared: &Shared, log: &VecDeque<String>, back: usize, area: Rect) {
    let none = LiveView::default();
    let live = shared.data.live.as_ref().unwrap_or(&none);
    let ranks: Vec<_> = shared
        .data
        .model
        .attempts
        .iter()
        .find(|a| live.current.as_deref() == Some(&a.id()))
        .map(|a| {
            a.ranks
                .iter()
                .filter(|r| r.is_rank || a.ranks.len() == 1)
                .collect()
        })
        .unwrap_or_default();
    let rank_rows = (ranks.len() as u16).clamp(1, 4);
    let gpu_rows = (live.gpus.len() as u16).min(4);
    let [progress, rank_area, gpu_area, log_head, log_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(rank_rows),
        Constraint::Length(gpu_rows),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(area);
    draw_progress(frame, shared, live, progress);
    draw_ranks(frame, shared, &ranks, rank_rows, rank_area);
    draw_gpus(frame, shared, live, gpu_rows, gpu_area);
    draw_log(frame, shared, log, back, log_head, log_area);
}

/// Attempt i/N, elapsed and the estimate left, over a gauge.
fn draw_progress(frame: &mut Frame, shared: &Shared, live: &LiveView, progress: Rect) {
    let t = shared.theme;
    let ratio = if live.total > 0 {
        (live.done as f64 / live.total as f64).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let running = live
        .current
        .as_ref()
        .map(|c| {
            format!(
                "attempt {}/{} {c}",
                (live.done + 1).min(live.total.max(1)),
                live.total
            )
        })
        .unwrap_or_else(|| format!("{}/{} attempts done", live.done, live.total));
    let eta = live
        .eta_s
        .map(|s| format!(" · about {} left", clock(s)))
        .unwrap_or_default();
    let [text, gauge] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(progress);
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(running, t.heading()),
            Span::styled(
                format!(" · elapsed {}{eta}", clock(live.elapsed_s)),
                t.dim(),
            ),
        ])),
        text,
    );
    frame.render_widget(
        Gauge::default()
            .ratio(ratio)
            .label(format!("{}/{}", live.done, live.total))
            .gauge_style(t.series(1)),
        gauge,
    );
}

/// Each rank of the running attempt: where it is and its step-1 figures.
fn draw_ranks(
    frame: &mut Frame,
    shared: &Shared,
    ranks: &[&RankView],
    rank_rows: u16,
    rank_area: Rect,
) {
    let t = shared.theme;

    let rank_lines: Vec<Line> = if ranks.is_empty() {
        vec![Line::from(Span::styled(
            "no rank has started CUDA yet in this attempt",
            t.dim(),
        ))]
    } else {
        let shown = usize::from(rank_rows);
        let mut v: Vec<Line> = ranks
            .iter()
            .take(if ranks.len() > shown {
                shown - 1
            } else {
                shown
            })
            .map(|r| {
                Line::from(vec![
                    Span::styled(format!("{:<10}", r.process_name()), t.heading()),
                    Span::styled(format!("{:<14}", now_label(r, true)), t.text()),
                    Span::styled(
                        format!(
                            "step-1 peak {}  outside pool {}",
                            r.step1_peak.map_or("-".into(), |b| short_bytes(b as f64)),
                            short_bytes(r.step1_out_of_pool as f64)
                        ),
                        t.dim(),
                    ),
                ])
            })
            .collect();
        if ranks.len() > shown {
            v.push(Line::from(Span::styled(
                format!("… and {} more ranks (Ranks tab)", ranks.len() - (shown - 1)),
                t.dim(),
            )));
        }
        v
    };
    frame.render_widget(Paragraph::new(rank_lines), rank_area);
}

/// A memory sparkline per GPU of the running attempt.
fn draw_gpus(frame: &mut Frame, shared: &Shared, live: &LiveView, gpu_rows: u16, gpu_area: Rect) {
    let t = shared.theme;

    for (i, g) in live.gpus.iter().take(usize::from(gpu_rows)).enumerate() {
        let row = Rect {
            y: gpu_area.y + i as u16,
            height: 1,
            ..gpu_area
        };
        let peak = g.history.iter().copied().max().unwrap_or(0);
        let label = format!(
            "GPU{} {:>5}/{:<5} last min ≤{:<5} ",
            g.index,
            short_bytes(g.used as f64),
            short_bytes(g.total as f64),
            short_bytes(peak as f64)
        );
        let [l, s] =
            Layout::horizontal([Constraint::Length(label.width() as u16), Constraint::Min(1)])
                .areas(row);
        frame.render_widget(Paragraph::new(Span::styled(label, t.heading())), l);
        let take = usize::from(s.width);
        let hist = &g.history[g.history.len().saturating_sub(take)..];
        // Scaled to the last minute's peak, so a few GiB on a 140 GiB device still show their shape.
        let peak = hist.iter().copied().max().unwrap_or(0);
        frame.render_widget(
            Sparkline::default()
                .data(hist)
                .max(peak.max(1))
                .style(t.series(0)),
            s,
        );
    }
}

/// The training's output, following its tail unless scrolled back.
fn draw_log(
    frame: &mut Frame,
    shared: &Shared,
    lines: &VecDeque<String>,
    back: usize,
    log_head: Rect,
    log: Rect,
) {
    let t = shared.theme;

    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("training output", t.heading()),
            Span::styled(
                if back > 0 {
                    format!(" · {back} lines back (G: follow)")
                } else {
                    " · also in output.log in each attempt's folder".into()
                },
                t.dim(),
            ),
        ])),
        log_head,
    );
    let h = usize::from(log.height);
    let end = lines.len().saturating_sub(back);
    let start = end.saturating_sub(h);
    let shown: Vec<Line> = if lines.is_empty() {
        vec![Line::from(Span::styled(
            if shared.run == RunState::Watching {
                "another doctor runs this command: its output is on that terminal"
            } else {
                "no output yet"
            },
            t.dim(),
        ))]
    } else {
        lines
            .range(start..end)
            .map(|l| Line::from(clip(l, usize::from(log.width))))
            .collect()
    };
    frame.render_widget(Paragraph::new(shown), log);
}
