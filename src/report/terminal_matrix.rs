//! The first screen of a variant comparison in the terminal: one entry per
//! prewarm (class, what it moved, what it cost), the table of medians and
//! spreads, the notes, then each verdict's evidence (docs/verdicts.md).

use super::model::{MatrixView, VerdictView};
use super::text_layout::{print_text as lines, write_table};
use std::fmt::Write;

/// "cublas" or, when it enables others, "all [cublas, nccl_comm]".
fn subject(v: &VerdictView) -> String {
    if v.prewarms.len() == 1 && v.prewarms[0] == v.variant {
        v.variant.clone()
    } else {
        format!("{} [{}]", v.variant, v.prewarms.join(", "))
    }
}

/// Writes the comparison: headline per prewarm, table, notes, evidence.
pub fn write_matrix(o: &mut String, m: &MatrixView) {
    let title = format!(
        "== prewarm-doctor: {} variants, baseline '{}', cache '{}'{}",
        m.variants.len(),
        m.baseline,
        m.cache,
        if m.isolated {
            " (each variant on its own caches)"
        } else {
            " (NOT isolated)"
        }
    );
    lines(o, &title, "", "   ");
    for v in &m.verdicts {
        let text = format!("{} {}: {}", subject(v), v.label.to_uppercase(), v.headline);
        lines(o, &text, "   ", "     ");
    }
    write_table(o, &super::account_tables::variant_table(m));
    for e in &m.excluded {
        lines(o, e, "   excluded: ", "     ");
    }
    for n in &m.notes {
        lines(o, n, "   note: ", "     ");
    }
    if !m.verdicts.is_empty() {
        let _ = writeln!(
            o,
            "-- evidence (each prewarm against '{}'; rules: docs/verdicts.md)",
            m.baseline
        );
    }
    for v in &m.verdicts {
        let first = format!("   {}: ", subject(v));
        lines(o, &v.class_line, &first, "     ");
        for e in &v.evidence {
            lines(o, e, "     - ", "       ");
        }
    }
}
