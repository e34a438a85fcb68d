//! Markdown for pull requests and GitHub job summaries: the headline (one
//! sentence per prewarm), the verdict table, the variants, then one folded
//! `<details>` per attempt. Always under [`BUDGET`] bytes (a PR comment holds
//! 65,536 characters): attempts that would not fit are counted, not cut off
//! mid-table. Every name that comes from the run is escaped.

use super::escape;
use super::model::{AttemptView, MatrixView, ReportModel};
use super::renderer::{Renderer, ReportError};
use super::select::Selection;
use super::verdict_text::doctor_in_step1;
use super::{account_tables, bytes, seconds};
use crate::analysis::account::ProcessAccount;
use crate::analysis::ranks::step1;
use std::fmt::Write;

/// Most bytes the summary takes (GitHub's comment limit is 65,536
/// characters; the rest is room for a comment's own heading).
pub const BUDGET: usize = 60_000;

/// The Markdown summary of the attempts `selection` picks (by default every
/// attempt, each folded).
#[derive(Debug, Clone, Copy, Default)]
pub struct Markdown<'a> {
    pub selection: Selection<'a>,
}

impl Renderer for Markdown<'_> {
    fn render(&self, model: &ReportModel, out: &mut dyn std::io::Write) -> Result<(), ReportError> {
        out.write_all(self.text(model)?.as_bytes())?;
        Ok(())
    }
}

fn md(text: &str) -> String {
    escape::markdown(text)
}

/// Text inside an HTML element (`<summary>`): entities, not backslashes.
fn html(text: &str) -> String {
    escape::terminal(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

impl Markdown<'_> {
    /// The summary as a string.
    pub fn text(&self, model: &ReportModel) -> Result<String, ReportError> {
        let chosen: Vec<&AttemptView> = match self.selection {
            Selection::Default => model.attempts.iter().collect(),
            other => other.pick(model)?,
        };
        let mut o = String::from("## prewarm-doctor\n\n");
        for line in super::model::opening_lines(&model.incomplete, 3) {
            let _ = writeln!(o, "> **{}**\n", md(&line));
        }
        match &model.matrix {
            Some(m) => matrix(&mut o, m),
            None => {
                for h in &model.headline {
                    let _ = writeln!(o, "- {}", md(&h.text));
                }
            }
        }
        if chosen.is_empty() {
            return Ok(o);
        }
        let _ = writeln!(o, "\n### Attempts\n");
        let open = chosen.len() == 1;
        let closing = |left: usize| {
            format!(
                "\n{left} more attempt(s) left out to stay under GitHub's comment limit: `report RUN --attempt VARIANT/N --format md` shows one, `--format json` has them all.\n"
            )
        };
        for (i, a) in chosen.iter().enumerate() {
            let block = attempt(a, open);
            let reserve = if i + 1 < chosen.len() {
                closing(chosen.len()).len()
            } else {
                0
            };
            if o.len() + block.len() + reserve > BUDGET {
                o.push_str(&closing(chosen.len() - i));
                break;
            }
            o.push_str(&block);
        }
        Ok(o)
    }
}

/// Headline per prewarm, the verdict table, the evidence (folded), the
/// variants' medians and the notes.
fn matrix(o: &mut String, m: &MatrixView) {
    for v in &m.verdicts {
        let _ = writeln!(
            o,
            "- **{}** {}: {}",
            md(&v.variant),
            v.label.to_uppercase(),
            md(&v.headline)
        );
    }
    if !m.verdicts.is_empty() {
        let _ = writeln!(
            o,
            "\n### Verdicts (each prewarm against {})\n",
            md(&m.baseline)
        );
        o.push_str(&account_tables::verdict_table(m).markdown());
        let _ = writeln!(
            o,
            "\n<details><summary>Evidence (rules: docs/verdicts.md)</summary>\n"
        );
        for v in &m.verdicts {
            let _ = writeln!(o, "- **{}**: {}", md(&v.variant), md(&v.class_line));
            for e in &v.evidence {
                let _ = writeln!(o, "  - {}", md(e));
            }
        }
        let _ = writeln!(o, "\n</details>");
    }
    let _ = writeln!(
        o,
        "\n### Variants (medians ± half the range over repeats; cache {}{})\n",
        md(&m.cache),
        if m.isolated {
            ", isolated"
        } else {
            ", NOT isolated"
        }
    );
    o.push_str(&account_tables::variant_table(m).markdown());
    for e in &m.excluded {
        let _ = writeln!(o, "\n> excluded: {}", md(e));
    }
    for n in &m.notes {
        let _ = writeln!(o, "\n> {}", md(n));
    }
}

/// One attempt, folded: its worst rank's step 1 in the summary line; inside,
/// the late warmups, the ranks (worst ones and the distribution at scale)
/// and each shown rank's phases and failures.
fn attempt(a: &AttemptView, open: bool) -> String {
    let mut o = String::new();
    let worst = a.worst_rank();
    let step1 = worst
        .and_then(|r| r.step1_s)
        .map_or("step 1 not reached".to_string(), |s| {
            format!("step 1 took {}", seconds(s))
        });
    let _ = writeln!(
        o,
        "<details{}><summary>{} — exit code {}{}: {step1}</summary>\n",
        if open { " open" } else { "" },
        html(&a.id()),
        a.exit_code.map_or("not recorded".into(), |c| c.to_string()),
        a.status_suffix(),
    );
    if let Some(r) = worst {
        if a.ranks.len() > 1 {
            let _ = writeln!(o, "Worst rank: {}.\n", md(&r.label));
        }
        late_warmups(&mut o, &r.account);
    }
    for n in &a.notices {
        let _ = writeln!(o, "> {}\n", md(n));
    }
    if a.ranks.len() > 1 {
        ranks(&mut o, a);
    }
    let told = a.told_ranks();
    for r in &told {
        let summarised = worst.is_some_and(|w| std::ptr::eq(w, *r));
        process(&mut o, &r.account, summarised);
    }
    if told.len() < a.ranks.len() {
        let _ = writeln!(
            o,
            "\n{} other processes are in `report RUN --format json`.",
            a.ranks.len() - told.len()
        );
    }
    for p in &a.problems {
        let _ = writeln!(o, "\n> problem: {}", md(&p.to_string()));
    }
    let _ = writeln!(o, "\n</details>\n");
    o
}

/// The ranks side by side (the worst of each figure at scale), the
/// distribution over ranks at scale, the worst rank and the skew.
fn ranks(o: &mut String, a: &AttemptView) {
    let Some(s) = &a.spread else { return };
    let _ = writeln!(o, "{} ranks on {} host(s).\n", s.ranks, s.hosts.len());
    if let Some(line) = super::ranks_text::missing_ranks_line(s) {
        let _ = writeln!(o, "> **{}**\n", md(&line));
    }
    if a.at_scale() {
        let _ = writeln!(o, "The worst ranks of each figure:\n");
    }
    o.push_str(&account_tables::rank_table(a).markdown());
    if a.at_scale() {
        let _ = writeln!(o, "\nOver all ranks:\n");
        o.push_str(&account_tables::distribution_table(a).markdown());
    }
    o.push('\n');
    for l in super::ranks_text::spread_lines(s) {
        let _ = writeln!(
            o,
            "- {}: **{}** on {}; skew {}",
            l.label,
            l.value,
            md(&l.owner),
            l.skew
        );
    }
}

/// One process: its phases, what lay outside the pool in step 1, late
/// warmups (unless the attempt's summary already lists them), failures.
fn process(o: &mut String, p: &ProcessAccount, summarised: bool) {
    let who = p
        .rank
        .map_or(format!("process {}", p.pid), |r| format!("rank {r}"));
    let _ = writeln!(o, "\n#### {} on {}\n", md(&who), md(&p.host));
    for note in super::step_text::capture_notes(p) {
        let _ = writeln!(o, "> {}\n", md(&note));
    }
    let probe = step1(p)
        .map(|ph| format!("; {}", doctor_in_step1(ph)))
        .unwrap_or_default();
    let s = &p.steps;
    let done = super::step_text::steps_done(s);
    let took = match (s.step1_s, super::step_text::steady_text(s)) {
        (Some(s1), Some(steady)) => Some(format!(
            "Step 1 took **{}** vs {steady}; {done}",
            seconds(s1)
        )),
        (Some(s1), None) if s.count == 0 => Some(format!(
            "Step 1 ran **{}** until the process ended; {done}",
            seconds(s1)
        )),
        (Some(s1), None) => Some(format!("Step 1 took **{}**; {done}", seconds(s1))),
        _ => None,
    };
    if let Some(took) = took {
        let _ = writeln!(o, "{took}{}.\n", md(&probe));
    }
    o.push_str(&account_tables::phase_table(p).markdown());
    if let Some(s1) = step1(p) {
        let sources: Vec<String> = s1
            .by_source
            .iter()
            .filter(|s| s.source != crate::analysis::sources::TORCH_POOL && s.allocated > 0)
            .map(|s| {
                let note = super::comm_text::outside_note(s1, &s.source);
                let note = note.map_or(String::new(), |n| format!(" ({n})"));
                format!("{} {}{note}", md(&s.source), bytes(s.allocated))
            })
            .collect();
        if !sources.is_empty() {
            let _ = writeln!(o, "\nOut of pool in step 1: {}.", sources.join(", "));
        }
    }
    if !summarised {
        late_warmups(o, p);
    }
    exceptions(o, p);
    forensics(o, p);
}

/// Each exception the process recorded, whatever its phase: what, where
/// in the run, and the frames it was raised in.
fn exceptions(o: &mut String, p: &ProcessAccount) {
    use super::step_text::{exception_place, exception_text, raised_at};
    for e in &p.exceptions {
        let _ = writeln!(
            o,
            "\n**Uncaught exception** {}: {}.",
            md(&exception_place(super::no_step(p), e)),
            md(&exception_text(e))
        );
        if let Some(at) = raised_at(e) {
            let _ = writeln!(o, "\nRaised at (most recent call last): {}.", md(&at));
        }
    }
}

/// The warmups still landing after setup, costliest first.
fn late_warmups(o: &mut String, p: &ProcessAccount) {
    if p.late_warmups.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nStill lands after setup (costliest first):\n");
    for w in p.late_warmups.iter().filter(|w| !w.minor) {
        let t = super::warmup_text::warmup_text(w);
        let keys = if t.keys.is_empty() {
            String::new()
        } else {
            let k: Vec<String> = t
                .keys
                .iter()
                .map(|k| format!("`{}`", k.replace('`', "'")))
                .collect();
            format!("; keys {}", k.join(", "))
        };
        let cost = if t.cost.is_empty() {
            String::new()
        } else {
            format!("{}, ", t.cost)
        };
        let _ = writeln!(
            o,
            "- [{}] {} — {cost}{}{keys}",
            t.class,
            md(&t.what),
            t.when
        );
    }
    if let Some(line) = super::warmup_text::minor_warmups_line(&p.late_warmups) {
        let _ = writeln!(o, "- {line}");
    }
}

/// Out-of-memory failures: the request, whether a prewarm would have saved
/// the run, and the fix that removes the demand.
fn forensics(o: &mut String, p: &ProcessAccount) {
    for f in &p.forensics {
        let _ = writeln!(
            o,
            "\n**Out of memory**{} at {:.2}s{}: {} {}.",
            if f.recovered {
                " (recovered: the allocator retried and training went on)"
            } else {
                ""
            },
            f.t_s,
            f.step.map(|n| format!(" in step {n}")).unwrap_or_default(),
            md(&super::verdict_text::request_text(f)),
            f.device_free_before.map_or_else(
                || "free memory not recorded".to_string(),
                |b| format!("with {} free", bytes(b))
            ),
        );
        let groups = super::forensics_text::projection_texts(f);
        if !groups.is_empty() {
            let _ = writeln!(
                o,
                "\nWould a prewarm have saved it (at the failure point, if the step needs the same memory)?\n"
            );
            for g in groups {
                let _ = writeln!(
                    o,
                    "- {}: **{}** — {}",
                    md(&g.prewarms.join(", ")),
                    g.outcome,
                    md(&g.why.join("; "))
                );
            }
        }
        for r in &f.remedies {
            let _ = writeln!(o, "\nFix: {}.", md(&super::forensics_text::remedy_text(r)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_escape_html_not_markdown() {
        assert_eq!(html("a<b>&'\""), "a&lt;b&gt;&amp;&#39;&quot;");
        assert_eq!(html("x\u{1b}[31m"), "x\\x1b[31m");
    }
}
