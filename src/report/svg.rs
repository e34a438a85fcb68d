//! Charts as inline SVG for the HTML report: plotters draws the chart body,
//! and each timeline marker is added as its own element with a `<title>`, so
//! hovering it shows the event's detail without any script.

use super::charts::{Chart, Glyph, hex, marker_color};
use super::model::ReportModel;
use super::renderer::ReportError;
use crate::analysis::timeline::MarkerKind;
use plotters::prelude::*;
use std::fmt::Write as _;

/// Text made safe for XML/HTML text and attribute values: markup characters
/// escaped, control characters (terminal escape sequences) and bidirectional
/// overrides replaced by visible stand-ins.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(inert(c)),
        }
    }
    out
}

pub use super::escape::inert;

/// One marker as an SVG element with its hover text.
fn glyph_svg(out: &mut String, g: &Glyph) {
    let c = hex(marker_color(g.kind));
    let _ = write!(
        out,
        "<g class=\"ev ev-{}\" tabindex=\"0\"><title>{}</title>",
        kind_class(g.kind),
        escape(&g.title)
    );
    if g.x1 - g.x0 >= 3 {
        let _ = write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"12\" rx=\"2\" fill=\"{c}\" fill-opacity=\"0.55\" stroke=\"{c}\"/>",
            g.x0,
            g.y - 6,
            g.x1 - g.x0
        );
    } else if g.kind == MarkerKind::Oom || g.failed {
        let (x, y) = (g.x0, g.y);
        let _ = write!(
            out,
            "<path d=\"M{} {}L{} {}M{} {}L{} {}\" stroke=\"{c}\" stroke-width=\"3\"/>",
            x - 6,
            y - 6,
            x + 6,
            y + 6,
            x - 6,
            y + 6,
            x + 6,
            y - 6
        );
    } else {
        let _ = write!(
            out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{c}\" fill-opacity=\"0.8\"/>",
            g.x0, g.y
        );
    }
    out.push_str("</g>");
}

/// CSS class suffix of a marker kind.
pub fn kind_class(k: MarkerKind) -> &'static str {
    match k {
        MarkerKind::Allocation => "alloc",
        MarkerKind::LocalMemory => "local",
        MarkerKind::NcclComm => "nccl",
        MarkerKind::Autotune => "autotune",
        MarkerKind::Compile => "compile",
        MarkerKind::Oom => "oom",
    }
}

/// Draws one chart as an SVG document (scales to its container).
pub fn chart_svg(model: &ReportModel, chart: &Chart) -> Result<String, ReportError> {
    let size = chart.size(model);
    let mut buf = String::new();
    let glyphs = {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        let glyphs = chart.draw(model, &root)?;
        root.present().map_err(|e| ReportError::Chart {
            chart: chart.file_stem(),
            what: e.to_string(),
        })?;
        glyphs
    };
    let mut overlay = String::new();
    for g in &glyphs {
        glyph_svg(&mut overlay, g);
    }
    let end = buf.rfind("</svg>").ok_or_else(|| ReportError::Chart {
        chart: chart.file_stem(),
        what: "plotters wrote no closing </svg>".into(),
    })?;
    buf.insert_str(end, &overlay);
    Ok(buf.replacen("<svg ", "<svg class=\"chart\" role=\"img\" ", 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_escape_sequences_are_inert() {
        assert_eq!(
            escape("<script>alert('x')</script>&\"\u{1b}[31m\u{202e}"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\u{241b}[31m\u{fffd}"
        );
        assert_eq!(inert('\u{7f}'), '\u{2421}');
        assert_eq!(inert('é'), 'é');
    }
}
