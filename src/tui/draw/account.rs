//! The Account tab: device memory at the end of step 1 as a waterfall — the
//! pool, the CUDA context, each library, local-memory growth, what NCCL loaded
//! without allocation calls — down to the unexplained remainder.

use super::{clip, short_bytes};
use crate::analysis::account::{GapAccount, OVER_EXPLAINED_BYTES};
use crate::report::verdict_text;
use crate::tui::shared::Shared;
use crate::tui::theme::Tone;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr;

/// Least width of the name column.
const NAME: usize = 26;
/// Width of the value column.
const VALUE: usize = 8;

/// The cells [start, end) a bar from `from` to `to` bytes covers, at `scale` bytes per cell.
fn bar_span(from: i64, to: i64, scale: f64, width: usize) -> (usize, usize) {
    let cell = |b: i64| ((b.max(0) as f64 / scale).round() as usize).min(width);
    let (a, b) = (cell(from.min(to)), cell(from.max(to)));
    if a == b && from != to {
        (
            a.min(width.saturating_sub(1)),
            a.min(width.saturating_sub(1)) + 1,
        )
    } else {
        (a, b)
    }
}

fn bar(from: i64, to: i64, scale: f64, width: usize, glyph: char) -> String {
    let (a, b) = bar_span(from, to, scale, width);
    let mut s = " ".repeat(a);
    s.extend(std::iter::repeat_n(glyph, b - a));
    s.extend(std::iter::repeat_n(' ', width - b));
    s
}

/// The bars of the waterfall: device used split by holder.
#[derive(Debug, Clone, PartialEq)]
pub struct Parts {
    pub device_used: u64,
    /// (name, bytes, inferred); the pool first.
    pub parts: Vec<(String, i64, bool)>,
    pub unexplained: i64,
    /// Above 64 MiB: shown as not understood (`GapAccount::not_understood`).
    pub not_understood: bool,
}

impl Parts {
    /// The model's account at one instant, named as every format names its
    /// parts (`verdict_text::part_label`), the pool first.
    pub fn of(g: &GapAccount) -> Parts {
        let mut parts = vec![("PyTorch pool".to_string(), g.pool_reserved as i64, false)];
        parts.extend(
            g.parts
                .iter()
                .map(|x| (verdict_text::part_label(x), x.bytes, x.inferred)),
        );
        Parts {
            device_used: g.device_used,
            parts,
            unexplained: g.unexplained,
            not_understood: g.not_understood,
        }
    }
}

/// A part's name as the waterfall shows it.
fn part_name(name: &str, inferred: bool) -> String {
    if inferred {
        format!("{name} (inferred)")
    } else {
        name.to_string()
    }
}

/// The name column's width at `width` columns: as wide as the longest name
/// needs, at least [`NAME`], at most three fifths of what the names and
/// bars share (the bars keep the rest).
pub fn name_width(acc: &Parts, width: usize) -> usize {
    let longest = acc
        .parts
        .iter()
        .map(|(n, _, inferred)| part_name(n, *inferred).width())
        .chain(["unexplained (not understood)".len()])
        .max()
        .unwrap_or(NAME);
    let most = (width.saturating_sub(VALUE + 2) * 3 / 5).max(NAME);
    longest.clamp(NAME, most)
}

/// The waterfall's lines: each part starts where the one before ended.
pub fn waterfall(acc: &Parts, width: usize) -> Vec<(String, String, String, Tone)> {
    let name_w = name_width(acc, width);
    let bar_w = width.saturating_sub(name_w + VALUE + 2).max(4);
    let named: i64 = acc.parts.iter().map(|p| p.1).sum();
    let top = (acc.device_used as i64).max(named).max(1);
    let scale = top as f64 / bar_w as f64;
    let mut out = Vec::new();
    let mut at = 0i64;
    for (name, bytes, inferred) in &acc.parts {
        out.push((
            clip(&part_name(name, *inferred), name_w),
            bar(
                at,
                at + bytes,
                scale,
                bar_w,
                if *bytes < 0 { '░' } else { '█' },
            ),
            short_bytes(*bytes as f64),
            Tone::Neutral,
        ));
        at += bytes;
    }
    let (label, tone) = if acc.not_understood {
        ("unexplained (not understood)", Tone::Warn)
    } else if acc.unexplained < -OVER_EXPLAINED_BYTES {
        ("unexplained (parts over the device)", Tone::Warn)
    } else {
        ("unexplained", Tone::Neutral)
    };
    out.push((
        label.into(),
        bar(at, at + acc.unexplained, scale, bar_w, '▒'),
        short_bytes(acc.unexplained as f64),
        tone,
    ));
    out.push((
        "= device used".into(),
        bar(0, acc.device_used as i64, scale, bar_w, '█'),
        short_bytes(acc.device_used as f64),
        Tone::Neutral,
    ));
    out
}

pub fn draw(frame: &mut Frame, shared: &Shared, area: Rect) {
    let t = shared.theme;
    let Some(rank) = shared.rank() else {
        frame.render_widget(
            Paragraph::new(Span::styled("no process in this attempt", t.dim())),
            area,
        );
        return;
    };
    let Some(gap) = rank.step1_account() else {
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!("{}: no device-memory figure at the end of step 1 (no NVML timeline and no probe reading)", rank.label),
                t.dim(),
            )),
            area,
        );
        return;
    };
    let [head, body] = Layout::vertical([Constraint::Length(2), Constraint::Min(1)]).areas(area);
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(vec![
                Span::styled(
                    format!("device memory at {} ", rank.account_when()),
                    t.heading(),
                ),
                Span::styled(
                    format!(
                        "({:.2} s): {}",
                        gap.at_s,
                        crate::report::bytes(gap.device_used)
                    ),
                    t.dim(),
                ),
            ]),
            Line::from(Span::styled(
                "each part starts where the one above ends; ░ given back, ▒ unexplained",
                t.dim(),
            )),
        ]),
        head,
    );
    let parts = Parts::of(gap);
    let name_w = name_width(&parts, usize::from(body.width));
    let lines: Vec<Line> = waterfall(&parts, usize::from(body.width))
        .into_iter()
        .map(|(name, bar, value, tone)| {
            Line::from(vec![
                Span::styled(format!("{name:<name_w$} "), t.text()),
                Span::styled(bar, t.series(0)),
                Span::styled(format!(" {value:>VALUE$}"), t.tone(tone)),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waterfall_steps_and_ends_at_device_used() {
        let acc = Parts {
            device_used: 100,
            parts: vec![("pool".into(), 50, false), ("ctx".into(), 40, false)],
            unexplained: 10,
            not_understood: false,
        };
        let rows = waterfall(&acc, NAME + VALUE + 2 + 10);
        assert_eq!(rows[0].1, "█████     ");
        assert_eq!(rows[1].1, "     ████ ");
        assert_eq!(rows[2].1, "         ▒");
        assert_eq!(rows[3].1, "██████████");
        assert_eq!(rows[2].0, "unexplained");
    }

    #[test]
    fn tiny_parts_stay_visible() {
        assert_eq!(bar_span(0, 1, 100.0, 10), (0, 1));
        assert_eq!(bar_span(500, 490, 100.0, 10), (5, 6));
        assert_eq!(bar_span(0, 5000, 100.0, 10), (0, 10));
    }
}
