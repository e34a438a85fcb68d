//! Markdown for pull requests and GitHub job summaries: the comparison table,
//! the verdicts, and each rank's step-1 headline. Every name that comes from
//! the run (kernels, commands, variants) is escaped.

use super::{bytes, seconds, signed_bytes};
use crate::analysis::AttemptAccount;
use crate::analysis::matrix::{MatrixAccount, Stat};
use crate::analysis::model::ProcessAccount;
use crate::analysis::phases::Phase;
use crate::analysis::ranks::RankSpread;
use std::fmt::Write;

/// Escapes text for a Markdown table cell or line (see [`super::escape::markdown`]).
pub fn escape(text: &str) -> String {
    super::escape::markdown(text)
}

fn stat_bytes(s: Option<Stat>) -> String {
    s.map_or("–".into(), |s| bytes(s.median.max(0.0) as u64))
}

fn stat_secs(s: Option<Stat>) -> String {
    s.map_or("–".into(), |s| seconds(s.median))
}

fn matrix(o: &mut String, m: &MatrixAccount) {
    let _ = writeln!(
        o,
        "### Variants (medians; cache: {}{})\n",
        escape(&m.cache),
        if m.isolated {
            ", isolated"
        } else {
            ", NOT isolated"
        }
    );
    let _ = writeln!(
        o,
        "| variant | runs | step-1 peak | step-1 out-of-pool | step-1 time | setup time |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for v in &m.variants {
        let base = if v.name == m.baseline && v.name != "baseline" {
            " (baseline)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "| {}{} | {}/{} | {} | {} | {} | {} |",
            escape(&v.name),
            base,
            v.attempts.len(),
            v.expected_attempts,
            stat_bytes(v.step1_device_peak),
            stat_bytes(v.step1_out_of_pool),
            stat_secs(v.step1_s),
            stat_secs(v.setup_s)
        );
    }
    if !m.verdicts.is_empty() {
        let _ = writeln!(o, "\n### Verdicts\n");
        for v in &m.verdicts {
            let _ = writeln!(
                o,
                "- **{}** ({}): **{}**",
                escape(&v.variant),
                escape(&v.prewarms.join(", ")),
                v.class.label()
            );
            for e in &v.evidence {
                let _ = writeln!(o, "  - {}", escape(e));
            }
        }
    }
    for n in &m.notes {
        let _ = writeln!(o, "\n> {}", escape(n));
    }
}

fn process(o: &mut String, p: &ProcessAccount) {
    let who = p
        .rank
        .map_or(format!("process {}", p.pid), |r| format!("rank {r}"));
    let _ = writeln!(o, "\n#### {} on {}\n", escape(&who), escape(&p.host));
    if let (Some(s1), Some(ss)) = (p.steps.step1_s, p.steps.steady_step_s) {
        let _ = writeln!(
            o,
            "Step 1 took **{}** vs {} per steady step.\n",
            seconds(s1),
            seconds(ss)
        );
    }
    let _ = writeln!(
        o,
        "| phase | time | device peak | pool peak | out-of-pool + | local memory + | unexplained at end |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    for ph in &p.phases {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            ph.phase.label(),
            seconds(ph.duration_s),
            ph.device_used_peak.map(bytes).unwrap_or_else(|| "?".into()),
            bytes(ph.pool_reserved_peak),
            bytes(ph.out_of_pool_allocated),
            bytes(ph.local_memory_growth),
            ph.gap_end
                .as_ref()
                .map_or("–".into(), |g| signed_bytes(g.unexplained))
        );
    }
    if let Some(s1) = p.phases.iter().find(|ph| ph.phase == Phase::Step1) {
        let sources: Vec<String> = s1
            .by_source
            .iter()
            .filter(|s| s.source != crate::analysis::sources::TORCH_POOL && s.allocated > 0)
            .map(|s| format!("{} {}", escape(&s.source), bytes(s.allocated)))
            .collect();
        if !sources.is_empty() {
            let _ = writeln!(o, "\nOut of pool in step 1: {}.", sources.join(", "));
        }
    }
    if !p.late_warmups.is_empty() {
        let _ = writeln!(o, "\nStill lands after setup:\n");
        for w in &p.late_warmups {
            let _ = writeln!(o, "- [{}] {}", w.class.label(), escape(&w.what));
        }
    }
    for f in &p.forensics {
        let _ = writeln!(
            o,
            "\n**Out of memory** at {:.2}s: {} with {} free. Prewarms that move what preceded it: {}.",
            f.t_s,
            escape(&f.request),
            f.device_free_before
                .map(bytes)
                .unwrap_or_else(|| "?".into()),
            escape(&f.prewarms.join(", "))
        );
    }
}

/// The Markdown report: comparison first (matrices), then the shown attempts.
pub fn render(attempts: &[&AttemptAccount], m: Option<&MatrixAccount>) -> String {
    let mut o = String::from("## prewarm-doctor\n\n");
    if let Some(m) = m {
        matrix(&mut o, m);
    }
    for a in attempts {
        let _ = writeln!(
            o,
            "\n### Variant {} attempt {} (exit code {})",
            escape(&a.variant),
            escape(&a.attempt),
            a.exit_code.map_or("?".into(), |c| c.to_string())
        );
        if let Some(spread) = &a.ranks {
            ranks(&mut o, spread);
        }
        for p in &a.processes {
            process(&mut o, p);
        }
    }
    o
}

/// The worst rank and the skew, one line per figure.
fn ranks(o: &mut String, s: &RankSpread) {
    let _ = writeln!(o, "\n{} ranks on {} host(s).\n", s.ranks, s.hosts.len());
    if let Some(line) = super::missing_ranks_line(s) {
        let _ = writeln!(o, "> **{}**\n", escape(&line));
    }
    for l in super::spread_lines(s) {
        let _ = writeln!(
            o,
            "- {}: **{}** on {}; skew {}",
            l.label,
            l.value,
            escape(&l.owner),
            l.skew
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_names_cannot_break_tables_or_inject_markup() {
        assert_eq!(escape("a|b"), "a\\|b");
        assert_eq!(escape("<script>"), "\\<script\\>");
        assert_eq!(
            escape("kernel<float, 4>\n[x](y)"),
            "kernel\\<float, 4\\> \\[x\\](y)"
        );
    }
}
