//! `diff` output: the same variants in two runs, side by side, with changes;
//! one table per variant, written aligned (terminal) or as a Markdown table.
//! It opens with what makes the two runs not alike — different commands,
//! different variants — and each run's damaged files, in every format.

use super::escape::command_line;
use super::format::Format;
use super::json::IncompleteJson;
use super::model::{IncompleteData, VariantInfo, opening_lines};
use super::text_layout::{Align, Table, WIDTH};
use super::{bytes, seconds, signed_bytes};
use crate::analysis::matrix::MatrixAccount;
use crate::analysis::noise::{Outcome, Quantity, assess};
use crate::analysis::stats::Stat;
use crate::analysis::summary::VariantSummary;
use serde::Serialize;
use std::fmt::Write;

/// What "within noise (<= T)" means beside a time change.
pub const NOISE_FOOTNOTE: &str = "within noise (<= T): the change of the medians is no larger than T, the noise threshold of the two runs (docs/verdicts.md §3): with 2 attempts on a side the ranges (max - min) of both runs' repeats added, with 3 or more the two half-ranges that face each other, with one attempt on a side the model; T is a bound on the change, not a ± around a median. A gate fails only beyond it with --fail-if 'step1_time>+10% beyond noise' (docs/gating.md)";

/// How one run of a diff was made: its command, the variants it declared
/// (run.json), and its damaged files.
#[derive(Debug, Clone, Default)]
pub struct RunHow {
    pub command: Vec<String>,
    pub variants: Vec<VariantInfo>,
    pub incomplete: Vec<IncompleteData>,
}

/// Two runs' variants, ready to render.
pub struct Diff<'a> {
    pub old_run: String,
    pub new_run: String,
    pub old: &'a [VariantSummary],
    pub new: &'a [VariantSummary],
    pub old_matrix: Option<&'a MatrixAccount>,
    pub new_matrix: Option<&'a MatrixAccount>,
    pub old_how: RunHow,
    pub new_how: RunHow,
}

fn med(s: Option<Stat>) -> Option<f64> {
    s.map(|x| x.median)
}

fn pct(old: f64, new: f64) -> String {
    if old.abs() < 1e-12 {
        if new.abs() < 1e-12 {
            "±0%".into()
        } else {
            "new".into()
        }
    } else {
        format!("{:+.1}%", (new - old) / old.abs() * 100.0)
    }
}

/// A figure of both runs: label, old, new, how to show a value, and the
/// noise model its change is judged with (wall times: they vary run to run).
type FigureRow<'f> = (
    &'static str,
    Option<Stat>,
    Option<Stat>,
    &'f dyn Fn(f64) -> String,
    Option<Quantity>,
);

/// ", within noise (<= 4.29 s)" when a change is no larger than the noise
/// threshold of the two runs (docs/verdicts.md §3: their repeats' ranges,
/// or with one attempt on a side the model); nothing when it is beyond it.
fn noise_note(q: Quantity, old: Stat, new: Stat, fmt: &dyn Fn(f64) -> String) -> String {
    let c = assess(q, old, new);
    match c.outcome {
        Outcome::Within | Outcome::Unsure if c.delta != 0.0 => {
            format!(", within noise (<= {})", fmt(c.noise))
        }
        _ => String::new(),
    }
}

/// One section of the diff: a variant in both runs, or in one of them.
enum Section<'a> {
    Both(&'a VariantSummary, &'a VariantSummary),
    OnlyNew(&'a VariantSummary),
    OnlyOld(&'a VariantSummary),
}

/// A command line as the diff shows it.
fn command_text(command: &[String]) -> String {
    if command.is_empty() {
        "not recorded".into()
    } else {
        command_line(command)
    }
}

impl<'a> Diff<'a> {
    /// A run's variant names: as declared, else as found on disk.
    fn variant_names<'s>(how: &'s RunHow, found: &'s [VariantSummary]) -> Vec<&'s str> {
        if how.variants.is_empty() {
            found.iter().map(|v| v.name.as_str()).collect()
        } else {
            how.variants.iter().map(|v| v.name.as_str()).collect()
        }
    }

    /// What makes the two runs not alike, one sentence each: their commands,
    /// their sets of variants, a variant of the same name defined otherwise.
    /// Empty when they ran the same command with the same variants.
    pub fn differences(&self) -> Vec<String> {
        let (o, n) = (&self.old_how, &self.new_how);
        let mut out = Vec::new();
        if o.command != n.command {
            out.push(format!(
                "these runs ran different commands: old: {}; new: {}",
                command_text(&o.command),
                command_text(&n.command)
            ));
        }
        let (old_names, new_names) = (
            Self::variant_names(o, self.old),
            Self::variant_names(n, self.new),
        );
        let mut old_set = old_names.clone();
        let mut new_set = new_names.clone();
        old_set.sort_unstable();
        new_set.sort_unstable();
        if old_set != new_set {
            out.push(format!(
                "these runs have different variants: old: {}; new: {}",
                old_names.join(", "),
                new_names.join(", ")
            ));
        }
        for ov in &o.variants {
            if let Some(nv) = n.variants.iter().find(|v| v.name == ov.name)
                && (ov.args != nv.args || ov.env != nv.env || ov.prewarms != nv.prewarms)
            {
                out.push(format!(
                    "variant '{}' is defined differently: old: {}; new: {}",
                    ov.name,
                    ov.spec(),
                    nv.spec()
                ));
            }
        }
        out
    }

    /// The lines a diff opens with: what differs, then each run's damaged
    /// files (at most three a run, then how many more).
    fn opening(&self) -> Vec<String> {
        let mut out = self.differences();
        for (side, how) in [("old", &self.old_how), ("new", &self.new_how)] {
            out.extend(
                opening_lines(&how.incomplete, 3)
                    .into_iter()
                    .map(|l| format!("{side} run: {l}")),
            );
        }
        out
    }

    fn sections(&self) -> Vec<Section<'a>> {
        let mut out: Vec<Section> = self
            .new
            .iter()
            .map(|n| match self.old.iter().find(|p| p.name == n.name) {
                Some(p) => Section::Both(p, n),
                None => Section::OnlyNew(n),
            })
            .collect();
        out.extend(
            self.old
                .iter()
                .filter(|p| !self.new.iter().any(|n| n.name == p.name))
                .map(Section::OnlyOld),
        );
        out
    }

    /// The figures of one variant in both runs, with the change.
    fn table(&self, p: &VariantSummary, n: &VariantSummary) -> Table {
        let mut t = Table::new(&[
            ("figure (medians)", Align::Text),
            ("old", Align::Number),
            ("new", Align::Number),
            ("change", Align::Number),
        ]);
        let b = |v: f64| bytes(v.max(0.0) as u64);
        let sb = |v: f64| signed_bytes(v as i64);
        let secs = Some(Quantity::Seconds);
        let rows: [FigureRow; 5] = [
            (
                "step-1 device peak",
                p.step1_device_peak,
                n.step1_device_peak,
                &b,
                None,
            ),
            (
                "step-1 out-of-pool",
                p.step1_out_of_pool,
                n.step1_out_of_pool,
                &b,
                None,
            ),
            (
                "step-1 tightest",
                p.step1_tightest_headroom,
                n.step1_tightest_headroom,
                &sb,
                None,
            ),
            ("step-1 time", p.step1_s, n.step1_s, &seconds, secs),
            ("setup time", p.setup_s, n.setup_s, &seconds, secs),
        ];
        for (label, old_stat, new_stat, fmt, quantity) in rows {
            let (old, new) = (med(old_stat), med(new_stat));
            let show = |v: Option<f64>| v.map(fmt).unwrap_or_else(|| "-".into());
            let change = match (old_stat, new_stat) {
                (Some(a), Some(b)) => {
                    let noise = quantity
                        .map(|q| noise_note(q, a, b, fmt))
                        .unwrap_or_default();
                    format!("{}{noise}", pct(a.median, b.median))
                }
                _ => String::new(),
            };
            t.row(vec![label.into(), show(old), show(new), change]);
        }
        let verdict = |m: Option<&MatrixAccount>| {
            m.and_then(|m| m.verdicts.iter().find(|v| v.variant == n.name))
                .map(|v| super::verdict_text::class_label(v.class))
        };
        if let (Some(a), Some(c)) = (verdict(self.old_matrix), verdict(self.new_matrix)) {
            let change = if a != c { "CHANGED" } else { "" };
            t.row(vec!["verdict".into(), a.into(), c.into(), change.into()]);
        }
        t
    }

    /// The comparison for the terminal.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "== prewarm-doctor diff (old -> new, medians over repeats)"
        );
        for line in self.opening() {
            for l in
                super::text_layout::wrap(&super::escape::terminal(&line), "   ", "     ", WIDTH)
            {
                let _ = writeln!(o, "{l}");
            }
        }
        for s in self.sections() {
            match s {
                Section::Both(p, n) => {
                    let _ = writeln!(
                        o,
                        "   {} ({} -> {} attempts)",
                        n.name,
                        p.attempts.len(),
                        n.attempts.len()
                    );
                    for line in self.table(p, n).text_lines("     ", WIDTH) {
                        let _ = writeln!(o, "{line}");
                    }
                }
                Section::OnlyNew(n) => {
                    let _ = writeln!(o, "   {}: only in the new run", n.name);
                }
                Section::OnlyOld(p) => {
                    let _ = writeln!(o, "   {}: only in the old run", p.name);
                }
            }
        }
        for line in super::text_layout::wrap(NOISE_FOOTNOTE, "   ", "     ", WIDTH) {
            let _ = writeln!(o, "{line}");
        }
        o
    }

    /// The comparison as Markdown: one table per variant.
    pub fn markdown(&self) -> String {
        let md = super::escape::markdown;
        let mut o = format!(
            "## prewarm-doctor diff\n\n{} (old) → {} (new), medians over repeats.\n",
            md(&self.old_run),
            md(&self.new_run)
        );
        for line in self.opening() {
            let _ = writeln!(o, "\n> **{}**", md(&line));
        }
        for s in self.sections() {
            match s {
                Section::Both(p, n) => {
                    let _ = writeln!(
                        o,
                        "\n### {} ({} → {} attempts)\n",
                        md(&n.name),
                        p.attempts.len(),
                        n.attempts.len()
                    );
                    o.push_str(&self.table(p, n).markdown());
                }
                Section::OnlyNew(n) => {
                    let _ = writeln!(o, "\n### {}\n\nOnly in the new run.", md(&n.name));
                }
                Section::OnlyOld(p) => {
                    let _ = writeln!(o, "\n### {}\n\nOnly in the old run.", md(&p.name));
                }
            }
        }
        let _ = writeln!(o, "\n{NOISE_FOOTNOTE}");
        o
    }

    /// Writes the comparison in `format` to `out`: the terminal text, JSON or
    /// Markdown, each escaped for where it is read; a format a comparison
    /// does not have (`Format::diffable`) is an error, never another format.
    pub fn render(&self, format: Format, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match format {
            Format::Text => out.write_all(super::escape::terminal_block(&self.text()).as_bytes()),
            Format::Json => out.write_all(&self.json()),
            Format::Md => out.write_all(self.markdown().as_bytes()),
            Format::Csv | Format::Html | Format::Png | Format::Perfetto => {
                Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "diff has no {} format (text, json or md; run `report --format {}` on each run)",
                        format.name(),
                        format.name()
                    ),
                ))
            }
        }
    }

    /// Machine-readable comparison (same schema version as `report --format json`).
    pub fn json(&self) -> Vec<u8> {
        let doc = DiffDoc {
            schema_version: super::json::SCHEMA_VERSION,
            tool: "prewarm-doctor",
            old_run: &self.old_run,
            new_run: &self.new_run,
            differences: self.differences(),
            old_command: &self.old_how.command,
            new_command: &self.new_how.command,
            old_variants: &self.old_how.variants,
            new_variants: &self.new_how.variants,
            old_incomplete_data: self
                .old_how
                .incomplete
                .iter()
                .map(IncompleteJson::from)
                .collect(),
            new_incomplete_data: self
                .new_how
                .incomplete
                .iter()
                .map(IncompleteJson::from)
                .collect(),
            old: self.old,
            new: self.new,
            old_matrix: self.old_matrix,
            new_matrix: self.new_matrix,
        };
        let mut v = Vec::new();
        super::escape::write_json_pretty(&mut v, &doc).expect("serialises");
        v.push(b'\n');
        v
    }
}

#[derive(Serialize)]
struct DiffDoc<'a> {
    schema_version: u32,
    tool: &'static str,
    old_run: &'a str,
    new_run: &'a str,
    /// What makes the runs not alike (the sentences the other formats open with).
    differences: Vec<String>,
    old_command: &'a [String],
    new_command: &'a [String],
    old_variants: &'a [VariantInfo],
    new_variants: &'a [VariantInfo],
    old_incomplete_data: Vec<IncompleteJson<'a>>,
    new_incomplete_data: Vec<IncompleteJson<'a>>,
    old: &'a [VariantSummary],
    new: &'a [VariantSummary],
    old_matrix: Option<&'a MatrixAccount>,
    new_matrix: Option<&'a MatrixAccount>,
}
