//! Markdown for pull requests and GitHub job summaries: the comparison table,
//! the verdicts, and each rank's step-1 headline. Every name that comes from
//! the run (kernels, commands, variants) is escaped.

use super::{bytes, seconds, signed_bytes, verdict_text};
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
    for v in &m.variants {
        for e in &v.excluded {
            let why: Vec<String> = e.reasons.iter().map(verdict_text::exclusion_text).collect();
            let _ = writeln!(
                o,
                "\n> excluded: {}/{}: {}",
                escape(&v.name),
                escape(&e.attempt),
                escape(&why.join("; "))
            );
        }
    }
    verdicts(o, m);
    for n in &m.notes {
        let _ = writeln!(o, "\n> {}", escape(&verdict_text::note_text(n)));
    }
}

/// Per prewarm: the headline (what it moved, what it cost), the class, the evidence.
fn verdicts(o: &mut String, m: &MatrixAccount) {
    if m.verdicts.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n### Verdicts\n");
    for v in &m.verdicts {
        let _ = writeln!(
            o,
            "- **{}** ({}): {}",
            escape(&v.variant),
            escape(&v.prewarms.join(", ")),
            escape(&verdict_text::headline(v))
        );
        let _ = writeln!(o, "  - **{}**", escape(&verdict_text::class_line(v)));
        for e in verdict_text::evidence_lines(v) {
            let _ = writeln!(o, "  - {}", escape(&e));
        }
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
            if ph.phase == Phase::Setup && p.steps.step1_s.is_none() {
                "before any step"
            } else {
                ph.phase.label()
            },
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
        let _ = writeln!(o, "\nStill lands after setup (costliest first):\n");
        for w in p.late_warmups.iter().filter(|w| !w.minor) {
            let t = super::warmup_text(w);
            let keys = if t.keys.is_empty() {
                String::new()
            } else {
                let k: Vec<String> = t
                    .keys
                    .iter()
                    .map(|k| format!("`{}`", k.replace('`', "'")))
                    .collect();
                format!(" — keys {}", k.join(", "))
            };
            let cost = if t.cost.is_empty() {
                String::new()
            } else {
                format!("{}; ", t.cost)
            };
            let _ = writeln!(
                o,
                "- [{}] {}: {cost}{}{keys}",
                t.class,
                escape(&t.what),
                t.when
            );
        }
        if let Some(line) = super::minor_warmups_line(&p.late_warmups) {
            let _ = writeln!(o, "- {line}");
        }
    }
    for f in &p.forensics {
        let _ = writeln!(
            o,
            "\n**Out of memory**{} at {:.2}s{}: {} with {} free.",
            if f.recovered {
                " (recovered: the allocator retried and training went on)"
            } else {
                ""
            },
            f.t_s,
            f.step.map(|n| format!(" in step {n}")).unwrap_or_default(),
            escape(&f.request),
            f.device_free_before
                .map(bytes)
                .unwrap_or_else(|| "?".into()),
        );
        let groups = super::projection_texts(f);
        if !groups.is_empty() {
            let _ = writeln!(
                o,
                "\nWould a prewarm have saved it (at the failure point, if the step needs the same memory)?\n"
            );
            for g in groups {
                let _ = writeln!(
                    o,
                    "- {}: **{}** — {}",
                    escape(&g.prewarms.join(", ")),
                    g.outcome,
                    escape(&g.why.join("; "))
                );
            }
        }
        for r in &f.remedies {
            let _ = writeln!(o, "\nFix: {}.", escape(&super::remedy_text(r)));
        }
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
