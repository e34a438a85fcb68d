//! What every chart shares: the embedded font, the palette, pixel and text
//! helpers, label wrapping and the page's common byte scale.

use crate::analysis::phases::Phase;
use crate::analysis::timeline::MarkerKind;
use crate::report::renderer::ReportError;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::sync::Once;

/// A backend pixel made relative to `area` (chart coordinates map to the
/// whole image; drawing on a sub-area is relative to its corner).
pub(super) fn rel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: (i32, i32)) -> (i32, i32) {
    let (bx, by) = area.get_base_pixel();
    (p.0 - bx, p.1 - by)
}

/// A text style of the embedded font, anchored as given.
pub(super) fn text(size: u32, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, v))
}

/// The font every chart is drawn with, embedded so charts render on machines
/// without system fonts (assets/fonts/LICENSE-DejaVu.txt).
pub(crate) static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-subset.ttf");

/// Room left of each plot for axis labels and lane names.
pub(super) const LEFT: u32 = 96;

/// Registers the embedded font with plotters (once per process).
pub fn ensure_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse; a failure here would
        // only show as missing text, never as a panic in the report.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, FONT);
    });
}

/// A marker to draw, in pixels of the whole image.
#[derive(Debug, Clone, PartialEq)]
pub struct Glyph {
    pub kind: MarkerKind,
    pub x0: i32,
    pub x1: i32,
    pub y: i32,
    pub failed: bool,
    /// The hover text.
    pub title: String,
}

/// Colour of a marker kind.
pub fn marker_color(k: MarkerKind) -> RGBColor {
    match k {
        MarkerKind::Allocation => RGBColor(0xf2, 0x8e, 0x2b),
        MarkerKind::LocalMemory => RGBColor(0x8e, 0x5a, 0xa8),
        MarkerKind::NcclComm => RGBColor(0x2a, 0x9d, 0x8f),
        MarkerKind::Autotune => RGBColor(0x3a, 0x6e, 0xa5),
        MarkerKind::Compile => RGBColor(0x6c, 0x75, 0x7d),
        MarkerKind::Oom => RGBColor(0xd6, 0x28, 0x28),
    }
}

/// Hex form of a colour (for CSS and SVG written by hand).
pub fn hex(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

pub(super) const CONTEXT: RGBColor = RGBColor(0xb8, 0xb8, 0xb8);

pub(super) const POOL: RGBColor = RGBColor(0x4e, 0x79, 0xa7);

pub(super) const LOCAL: RGBColor = RGBColor(0xb0, 0x7a, 0xa1);

pub(super) const DEVICE: RGBColor = RGBColor(0x11, 0x11, 0x11);

pub(super) const MOVED: RGBColor = RGBColor(0x3c, 0x9a, 0x4f);

pub(super) const COST: RGBColor = RGBColor(0xe0, 0x6c, 0x1f);

pub(super) const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);

/// Colour of an out-of-pool source (known libraries keep theirs).
pub fn source_color(source: &str, index: usize) -> RGBColor {
    const CYCLE: [RGBColor; 6] = [
        RGBColor(0x76, 0xb7, 0xb2),
        RGBColor(0xed, 0xc9, 0x48),
        RGBColor(0xff, 0x9d, 0xa7),
        RGBColor(0x9c, 0x75, 0x5f),
        RGBColor(0x86, 0xbc, 0xb6),
        RGBColor(0xd3, 0x72, 0x95),
    ];
    match source {
        "nccl" => RGBColor(0xf2, 0x8e, 0x2b),
        "cublas" => RGBColor(0xe1, 0x57, 0x59),
        "triton" => RGBColor(0x59, 0xa1, 0x4f),
        "cudnn" => RGBColor(0x76, 0xb7, 0xb2),
        _ => CYCLE[index % CYCLE.len()],
    }
}

pub(super) fn phase_fill(p: Phase) -> RGBColor {
    match p {
        Phase::Setup => RGBColor(0xf4, 0xf4, 0xf4),
        Phase::Step1 => RGBColor(0xff, 0xf1, 0xcc),
        Phase::Steady => RGBColor(0xe9, 0xf4, 0xe9),
        Phase::Teardown => RGBColor(0xf4, 0xf4, 0xf4),
    }
}

pub(super) fn chart_err<E: std::fmt::Display>(chart: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Chart {
        chart: chart.to_string(),
        what: e.to_string(),
    }
}

/// A unit for a byte axis: GiB from 2 GiB up, else MiB.
pub(super) fn byte_unit(max: f64) -> (f64, &'static str) {
    if max >= 2.0 * (1u64 << 30) as f64 {
        ((1u64 << 30) as f64, "GiB")
    } else {
        ((1u64 << 20) as f64, "MiB")
    }
}

pub(super) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let cut: String = s.chars().take(n - 1).collect();
        format!("{cut}…")
    }
}

/// Line spacing of wrapped chart labels, px.
pub(super) const LINE: i32 = 13;

/// Splits a label into lines of at most `width` characters, at spaces, or
/// at `_`/`-` inside a long identifier (kept at the end of the line); a
/// label is wrapped, never cut.
pub fn wrap_label(label: &str, width: usize) -> Vec<String> {
    let width = width.max(4);
    let mut pieces: Vec<String> = Vec::new();
    for word in label.split(' ').filter(|w| !w.is_empty()) {
        if word.chars().count() <= width {
            pieces.push(word.to_string());
            continue;
        }
        // A long identifier: break after `_` or `-`, else every `width` chars.
        let mut part = String::new();
        for c in word.chars() {
            part.push(c);
            let n = part.chars().count();
            if (matches!(c, '_' | '-') && n >= width / 2) || n == width {
                pieces.push(std::mem::take(&mut part) + "\u{0}");
            }
        }
        if !part.is_empty() {
            pieces.push(part);
        }
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let mut glued = false;
    for piece in pieces {
        let (text, glue_next) = match piece.strip_suffix('\u{0}') {
            Some(t) => (t.to_string(), true),
            None => (piece, false),
        };
        let sep = if line.is_empty() || glued { "" } else { " " };
        if !line.is_empty() && line.chars().count() + sep.len() + text.chars().count() > width {
            lines.push(std::mem::take(&mut line));
            line.push_str(&text);
        } else {
            line.push_str(sep);
            line.push_str(&text);
        }
        glued = glue_next;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The byte scale the comparable charts of one page share (every
/// waterfall and timeline of a report): one unit, and for the waterfalls
/// one range, so two variants' charts read side by side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageScale {
    pub unit: f64,
    pub unit_name: &'static str,
    /// The waterfalls' range, bytes.
    pub lo: f64,
    pub hi: f64,
}

impl PageScale {
    /// The scale of a range of bytes (one chart alone, or a whole page's).
    pub(super) fn spanning(lo: f64, hi: f64) -> PageScale {
        let (unit, unit_name) = byte_unit(hi);
        PageScale {
            unit,
            unit_name,
            lo,
            hi,
        }
    }
}

/// A bar's label, its lines centred on the bar and right-aligned 8 px left
/// of `at` (the bar's start, in pixels of `area`).
pub(super) fn draw_row_label<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lines: &[String],
    at: (i32, i32),
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (lx, ly) = at;
    let first = ly - (lines.len() as i32 - 1) * LINE / 2;
    for (k, line) in lines.iter().enumerate() {
        area.draw_text(
            line,
            &text(12, HPos::Right, VPos::Center),
            (lx - 8, first + k as i32 * LINE),
        )?;
    }
    Ok(())
}
