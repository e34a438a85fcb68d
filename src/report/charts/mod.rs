//! The report's charts, drawn with plotters on any backend (SVG for HTML,
//! bitmap for PNG): the memory timeline of one process, the waterfall of the
//! account at step-1 end, and what each prewarm moved against what it cost.
//!
//! Event markers are returned as [`Glyph`]s in pixel coordinates instead of
//! being drawn here, so the SVG writer can give each one its hover text
//! (`<title>`) and the PNG writer draws the same shapes.

use super::model::ReportModel;
use super::renderer::ReportError;
use crate::analysis::phases::Phase;
use plotters::coord::Shift;
use plotters::prelude::*;

mod moved;
mod style;
#[cfg(test)]
mod tests;
mod timeline;
mod waterfall;

pub use moved::*;
pub use style::*;
pub use timeline::*;
pub use waterfall::*;
use waterfall::{waterfall_lines, waterfall_span};

/// Pixel size of a timeline chart.
pub const TIMELINE_SIZE: (u32, u32) = (1100, 470);
/// Pixel size of the moved-vs-cost chart.
pub const MOVED_SIZE: (u32, u32) = (1100, 360);
/// Pixel width of a waterfall chart (height grows with its rows).
pub const WATERFALL_WIDTH: u32 = 1100;

/// The charts a report draws, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Chart {
    /// What each prewarm moved against what it cost (matrices with a
    /// measured figure only).
    MovedVsCost,
    /// The step-1 timeline of a variant's representative rank.
    Timeline { variant: String },
    /// The account at step-1 end of a variant's representative rank.
    Waterfall { variant: String },
}

impl Chart {
    /// Every chart the model has data for.
    pub fn all(model: &ReportModel) -> Vec<Chart> {
        let mut out = Vec::new();
        if model
            .matrix
            .as_ref()
            .is_some_and(|m| moved_vs_cost_measured(&m.verdicts))
        {
            out.push(Chart::MovedVsCost);
        }
        for v in model.variants() {
            if let Some((_, r)) = model.representative(v) {
                if !r.timeline.is_empty() {
                    out.push(Chart::Timeline {
                        variant: v.to_string(),
                    });
                }
                if r.step1_account().is_some() {
                    out.push(Chart::Waterfall {
                        variant: v.to_string(),
                    });
                }
            }
        }
        out
    }

    /// A file name for the chart (variant names made safe).
    pub fn file_stem(&self) -> String {
        let safe = |v: &str| -> String {
            v.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(64)
                .collect()
        };
        match self {
            Chart::MovedVsCost => "moved-vs-cost".into(),
            Chart::Timeline { variant } => format!("timeline-{}", safe(variant)),
            Chart::Waterfall { variant } => format!("account-{}", safe(variant)),
        }
    }

    /// Pixel size of the chart.
    pub fn size(&self, model: &ReportModel) -> (u32, u32) {
        match self {
            Chart::MovedVsCost => {
                let verdicts = model.matrix.as_ref().map_or(&[][..], |m| &m.verdicts);
                (
                    MOVED_SIZE.0,
                    MOVED_SIZE.1.max(MovedLayout::of(verdicts).height()),
                )
            }
            Chart::Timeline { .. } => TIMELINE_SIZE,
            Chart::Waterfall { variant } => {
                let (rows, lines) = model
                    .representative(variant)
                    .and_then(|(_, r)| r.step1_account())
                    .map_or((3, 1), |g| (waterfall_rows(g).len(), waterfall_lines(g)));
                (WATERFALL_WIDTH, waterfall_height(rows, lines))
            }
        }
    }

    /// Draws the chart; returns the timeline's markers (empty for others).
    pub fn draw<DB: DrawingBackend>(
        &self,
        model: &ReportModel,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<Vec<Glyph>, ReportError> {
        let missing = |what: &str| ReportError::Chart {
            chart: what.to_string(),
            what: "the model has no data for it".into(),
        };
        match self {
            Chart::MovedVsCost => {
                let verdicts = model
                    .matrix
                    .as_ref()
                    .map(|m| m.verdicts.as_slice())
                    .unwrap_or(&[]);
                draw_moved_vs_cost(area, verdicts)?;
                Ok(Vec::new())
            }
            Chart::Timeline { variant } => {
                let (a, r) = model
                    .representative(variant)
                    .ok_or_else(|| missing("timeline"))?;
                let span = if r
                    .timeline
                    .phase(Phase::Step1)
                    .is_some_and(|s| s.end_s > 0.0)
                {
                    "memory through step 1"
                } else {
                    "memory over the whole process (step 1 never finished)"
                };
                let title = format!("{variant}: {span} ({}, {})", a.id(), r.label);
                // The phases as the text's phase table names them.
                let name = |p: Phase| crate::report::account_tables::phase_label(&r.account, p);
                draw_timeline(area, &title, &r.timeline, Some(page_scale(model)), &name)
            }
            Chart::Waterfall { variant } => {
                let (a, r) = model
                    .representative(variant)
                    .ok_or_else(|| missing("waterfall"))?;
                let g = r.step1_account().ok_or_else(|| missing("waterfall"))?;
                let title = format!(
                    "{variant}: device memory at {} ({}, {}, {:.2} s)",
                    r.account_when(),
                    a.id(),
                    r.label,
                    g.at_s
                );
                draw_waterfall(area, &title, g, Some(page_scale(model)))?;
                Ok(Vec::new())
            }
        }
    }
}

/// The scale every comparable chart of `model` shares.
fn page_scale(model: &ReportModel) -> PageScale {
    let mut hi = 1.0f64;
    let mut lo = 0.0f64;
    for v in model.variants() {
        let Some((_, r)) = model.representative(v) else {
            continue;
        };
        if let Some(g) = r.step1_account() {
            let (row_lo, row_hi) = waterfall_span(&waterfall_rows(g));
            hi = hi.max(row_hi);
            lo = lo.min(row_lo);
        }
        let t = &r.timeline;
        for series in [&t.device_used, &t.pool_reserved] {
            hi = hi.max(series.iter().map(|p| p.1 as f64).fold(0.0, f64::max));
        }
    }
    PageScale::spanning(lo, hi)
}
