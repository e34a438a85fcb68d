//! The self-contained HTML report (`report RUN --format html`): one file that
//! opens offline (CSS inline, charts as inline SVG, no script, no font or
//! image fetched; a Content-Security-Policy forbids any fetch). The page is an
//! askama template (templates/report.html): checked at compile time, and
//! every value it prints is HTML-escaped; the charts are SVG written by
//! plotters and svg.rs, which escape their own text.

use super::charts::{Chart, hex, marker_color};
use super::model::{
    AttemptView, Figure, HostInfo, RankView, ReportModel, RunInfo, SHOWN_RANKS, Spread,
    VariantInfo, costs_text, marker_kind_label, marker_text, moved_text,
};
use super::ranks_text::spread_lines;
use super::renderer::{Renderer, ReportError};
use super::svg::{chart_svg, inert, kind_class};
use super::verdict_text::doctor_in_step1;
use super::{bytes, seconds, signed_bytes};
use crate::analysis::ranks::step1;
use crate::analysis::timeline::MarkerKind;
use askama::Template;
use std::io::Write;

/// The HTML renderer.
pub struct Html;

/// A headline sentence with its verdict class for colouring.
struct Sentence {
    css: String,
    text: String,
}

struct VariantLine {
    name: String,
    prewarms: String,
    baseline: bool,
    runs: String,
    peak: String,
    oop: String,
    headroom: String,
    step1: String,
    setup: String,
    verdict: String,
    verdict_css: String,
}

struct VerdictBlock {
    variant: String,
    prewarms: String,
    label: String,
    css: String,
    moved: String,
    costs: String,
    confidence: Option<String>,
    still: Vec<String>,
    evidence: Vec<String>,
}

struct EventLine {
    t: String,
    phase: String,
    kind: String,
    css: String,
    bytes: String,
    text: String,
}

struct TimelineBlock {
    variant: String,
    subtitle: String,
    svg: String,
    events: Vec<EventLine>,
    merged: u64,
    waterfall: Option<String>,
    /// When the account is taken: "the end of step 1", or "the end of the
    /// run, before any step".
    account_when: String,
    unexplained: Option<String>,
}

struct RankLine {
    attempt: String,
    label: String,
    worst: bool,
    /// Whether it reached step 1 (else its step-1 cells say it did not,
    /// instead of figures of a step that never was).
    reached: bool,
    peak: String,
    oop: String,
    step1: String,
    /// The steady step and what it is the median of (`step_text`).
    steady: String,
    /// The steps that ended, and the one the process died in.
    steps: String,
    setup: String,
    comms: String,
    /// The doctor's own time in step 1 (the probe's callbacks and threads
    /// beside, the shim's hooks).
    doctor: String,
    exit: String,
}

struct SpreadText {
    attempt: String,
    lines: Vec<String>,
}

struct DistLine {
    attempt: String,
    figure: String,
    n: u32,
    cells: Vec<String>,
    worst: String,
}

struct ForensicLine {
    place: String,
    when: String,
    request: String,
    library: String,
    free: String,
    message: String,
    preceded: String,
    /// "would a prewarm have saved it?": one line per group of prewarms
    /// with the same outcome ("still short by 1.6 GiB") and why.
    what_ifs: Vec<WhatIf>,
    /// The fixes that remove the demand (prune an autotune candidate).
    remedies: Vec<String>,
}

/// An exception a process recorded: where and when, what, and the frames
/// it was raised in.
struct ExceptionLine {
    place: String,
    when: String,
    exception: String,
    /// An out-of-memory exception whose message the forensics table shows:
    /// the number of that failure (its row is `oom-N`), and the exception
    /// only named here, so the message is printed once.
    oom: Option<usize>,
    kind: String,
    raised_at: String,
}

struct WhatIf {
    prewarms: String,
    outcome: String,
    why: String,
}

struct LateLine {
    place: String,
    /// The line that stands for the rank's minor warmups ("and 1 more under
    /// 50.0 ms / 1.0 MiB each (…)"), in `what`; the other cells empty.
    remainder: bool,
    class: String,
    what: String,
    when: String,
    seconds: String,
    bytes: String,
}

struct KeyValue {
    key: String,
    value: String,
}

#[derive(Template)]
#[template(path = "report.html")]
struct Page {
    title: String,
    /// The run's damaged files, said before anything else.
    incomplete: Vec<String>,
    legend: Vec<(String, String)>,
    headline: Vec<Sentence>,
    variants: Vec<VariantLine>,
    verdicts: Vec<VerdictBlock>,
    notes: Vec<String>,
    moved_chart: Option<String>,
    timelines: Vec<TimelineBlock>,
    ranks: Vec<RankLine>,
    ranks_hidden: usize,
    spreads: Vec<SpreadText>,
    distribution: Vec<DistLine>,
    forensics: Vec<ForensicLine>,
    exceptions: Vec<ExceptionLine>,
    late: Vec<LateLine>,
    /// What to say when nothing lands late.
    late_none: String,
    how: Vec<KeyValue>,
    variant_specs: Vec<KeyValue>,
    hosts: Vec<KeyValue>,
    problems: Vec<String>,
    tool: String,
}

fn spread_text(s: &Option<Spread>, fmt: &dyn Fn(f64) -> String) -> String {
    match s {
        Some(s) if s.n > 1 => format!("{} ±{}", fmt(s.median), fmt(s.range() / 2.0)),
        Some(s) => fmt(s.median),
        None => "–".into(),
    }
}

/// The CSS class of a verdict badge ("v-works", "v-no-effect").
pub fn class_css(class: crate::analysis::verdict::VerdictClass) -> String {
    format!("v-{}", class.key().replace('_', "-"))
}

fn opt_bytes(v: Option<u64>) -> String {
    v.map_or("–".into(), bytes)
}

fn opt_secs(v: Option<f64>) -> String {
    v.map_or("–".into(), seconds)
}

fn place(a: &AttemptView, r: &RankView) -> String {
    format!("{}, {}", a.id(), r.label)
}

fn timeline_block(
    model: &ReportModel,
    variant: &str,
) -> Result<Option<TimelineBlock>, ReportError> {
    let Some((a, r)) = model.representative(variant) else {
        return Ok(None);
    };
    if r.timeline.is_empty() {
        return Ok(None);
    }
    let svg = chart_svg(
        model,
        &Chart::Timeline {
            variant: variant.to_string(),
        },
    )?;
    let waterfall = match r.step1_account() {
        Some(_) => Some(chart_svg(
            model,
            &Chart::Waterfall {
                variant: variant.to_string(),
            },
        )?),
        None => None,
    };
    let events = r
        .timeline
        .markers
        .iter()
        .map(|m| EventLine {
            t: format!("{:.3}", m.t_s),
            phase: m
                .phase
                .map_or("–".into(), |p| super::phase_word(r.no_step(), p, None)),
            kind: marker_kind_label(m.kind).to_string(),
            css: kind_class(m.kind).to_string(),
            bytes: if m.bytes > 0 {
                bytes(m.bytes)
            } else {
                String::new()
            },
            text: marker_text(m, r.no_step()),
        })
        .collect();
    Ok(Some(TimelineBlock {
        variant: variant.to_string(),
        subtitle: format!(
            "{}, {} (the rank with the highest step-1 peak of the variant's first complete attempt)",
            a.id(),
            r.label
        ),
        svg,
        events,
        merged: r.timeline.merged_markers,
        waterfall,
        account_when: r.account_when(),
        unexplained: r.step1_account().map(|g| {
            format!(
                "{} of {} unexplained{}",
                signed_bytes(g.unexplained),
                bytes(g.device_used),
                super::verdict_text::remainder_note(g)
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            )
        }),
    }))
}

fn rank_lines(model: &ReportModel) -> (Vec<RankLine>, usize, Vec<SpreadText>, Vec<DistLine>) {
    let mut lines = Vec::new();
    let mut hidden = 0;
    let mut spreads = Vec::new();
    let mut dist = Vec::new();
    for a in model.attempts.iter().filter(|a| !a.warmup) {
        let shown = a.shown_ranks(SHOWN_RANKS);
        hidden += a.ranks.len() - shown.len();
        let worst = a.worst_rank().map(|w| (w.host.clone(), w.pid));
        for r in shown {
            lines.push(RankLine {
                attempt: a.id(),
                label: r.label.clone(),
                worst: a.ranks.len() > 1 && worst == Some((r.host.clone(), r.pid)),
                reached: r.step1_s.is_some(),
                peak: opt_bytes(r.step1_peak),
                oop: bytes(r.step1_out_of_pool),
                step1: opt_secs(r.step1_s),
                steady: super::step_text::steady_text(&r.account.steps)
                    .unwrap_or_else(|| "–".into()),
                steps: super::step_text::steps_done(&r.account.steps),
                setup: opt_secs(r.setup_s),
                comms: if r.step1_s.is_some() {
                    r.step1_comms.to_string()
                } else {
                    "–".into()
                },
                doctor: step1(&r.account).map_or_else(|| "–".into(), doctor_in_step1),
                exit: match (a.exit_code, a.interrupted) {
                    (_, true) => "interrupted".into(),
                    (Some(c), _) => c.to_string(),
                    (None, _) => "–".into(),
                },
            });
        }
        if let Some(s) = &a.spread {
            let mut text: Vec<String> = spread_lines(s)
                .into_iter()
                .map(|l| format!("{}: {} ({}), skew {}", l.label, l.owner, l.value, l.skew))
                .collect();
            text.extend(super::ranks_text::missing_ranks_line(s));
            if !text.is_empty() {
                spreads.push(SpreadText {
                    attempt: a.id(),
                    lines: text,
                });
            }
        }
        if a.at_scale() {
            for d in &a.distribution {
                let f = d.figure;
                dist.push(DistLine {
                    attempt: a.id(),
                    figure: f.label().to_string(),
                    n: d.n,
                    cells: [d.min, d.p25, d.p50, d.p75, d.p90, d.p99, d.max]
                        .iter()
                        .map(|v| f.format(*v))
                        .collect(),
                    worst: d
                        .worst
                        .iter()
                        .filter_map(|&i| a.ranks.get(i))
                        .map(|r| format!("{} ({})", r.label, f.format(f.of(r).unwrap_or(0.0))))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
    }
    let _ = Figure::ALL;
    (lines, hidden, spreads, dist)
}

fn forensic_lines(model: &ReportModel) -> Vec<ForensicLine> {
    model
        .forensics()
        .into_iter()
        .map(|(a, r, f)| ForensicLine {
            place: place(a, r),
            when: format!(
                "{:.3} s, {}",
                f.t_s,
                super::phase_word(r.no_step(), f.phase, f.step)
            ),
            request: super::verdict_text::request_text(f),
            library: if f.library.is_empty() {
                f.source.clone()
            } else {
                format!("{} ({})", f.library, f.source)
            },
            free: match (f.device_free_before, f.device_total) {
                (Some(free), Some(total)) => format!("{} of {}", bytes(free), bytes(total)),
                (Some(free), None) => bytes(free),
                _ => "–".into(),
            },
            // The exception it raised, as the text says it ("OutOfMemoryError:
            // CUDA out of memory. …"); the exceptions table refers here.
            message: match r
                .account
                .exceptions
                .iter()
                .find(|e| f.message.as_deref() == Some(e.message.as_str()))
            {
                Some(e) => super::step_text::exception_text(e),
                None => f.message.clone().unwrap_or_default(),
            },
            preceded: super::verdict_text::preceded_by_texts(f).join(", "),
            what_ifs: super::forensics_text::projection_texts(f)
                .into_iter()
                .map(|g| WhatIf {
                    prewarms: g.prewarms.join(", "),
                    outcome: g.outcome,
                    why: g.why.join("; "),
                })
                .collect(),
            remedies: f
                .remedies
                .iter()
                .map(super::forensics_text::remedy_text)
                .collect(),
        })
        .collect()
}

/// Every exception of every told process, in attempt order; one whose
/// message an out-of-memory forensic shows refers to that row instead.
fn exception_lines(model: &ReportModel) -> Vec<ExceptionLine> {
    let failures = model.forensics();
    let mut out = Vec::new();
    for a in model.attempts.iter().filter(|a| !a.warmup) {
        for r in &a.ranks {
            out.extend(r.account.exceptions.iter().map(|e| {
                let oom = failures.iter().position(|(fa, fr, f)| {
                    std::ptr::eq(*fa, a)
                        && std::ptr::eq(*fr, r)
                        && f.message.as_deref() == Some(e.message.as_str())
                });
                ExceptionLine {
                    place: place(a, r),
                    when: super::step_text::exception_place(r.no_step(), e),
                    exception: super::step_text::exception_text(e),
                    oom: oom.map(|i| i + 1),
                    kind: if e.kind.is_empty() {
                        "out-of-memory exception".into()
                    } else {
                        e.kind.clone()
                    },
                    raised_at: super::step_text::raised_at(e).unwrap_or_else(|| "–".into()),
                }
            }));
        }
    }
    out
}

/// "Nothing lazy lands after setup." — unless no process has a step placed:
/// then there is no setup to land after (its run is one phase, before any step).
fn late_none(model: &ReportModel) -> String {
    let ranks: Vec<&RankView> = model
        .variants()
        .into_iter()
        .filter_map(|v| model.representative(v).map(|(_, r)| r))
        .collect();
    if !ranks.is_empty() && ranks.iter().all(|r| r.no_step()) {
        format!(
            "No step was placed, so each run is one phase, {}: nothing can be said to land after setup.",
            super::BEFORE_ANY_STEP
        )
    } else {
        "Nothing lazy lands after setup.".into()
    }
}

fn late_lines(model: &ReportModel) -> Vec<LateLine> {
    let mut out = Vec::new();
    for v in model.variants() {
        let Some((a, r)) = model.representative(v) else {
            continue;
        };
        for w in r.late_warmups().iter().filter(|w| !w.minor) {
            let text = super::warmup_text::warmup_text(w);
            let keys = if text.keys.is_empty() {
                String::new()
            } else {
                format!(" (keys: {})", text.keys.join(", "))
            };
            out.push(LateLine {
                place: place(a, r),
                remainder: false,
                class: w.class.label().to_string(),
                what: format!("{}{keys}", text.what),
                when: super::phase_word(r.no_step(), w.phase, w.step),
                seconds: if w.seconds > 0.0 {
                    seconds(w.seconds)
                } else {
                    String::new()
                },
                bytes: if w.bytes > 0 {
                    bytes(w.bytes)
                } else {
                    String::new()
                },
            });
        }
        // The minor ones, folded into one line as the text says them.
        if let Some(line) = super::warmup_text::minor_warmups_line(r.late_warmups()) {
            let only = r.late_warmups().iter().all(|w| w.minor);
            out.push(LateLine {
                place: place(a, r),
                remainder: true,
                class: String::new(),
                what: if only {
                    format!("only minor ones: {line}")
                } else {
                    line
                },
                when: String::new(),
                seconds: String::new(),
                bytes: String::new(),
            });
        }
    }
    out
}

fn kv(key: &str, value: impl Into<String>) -> KeyValue {
    KeyValue {
        key: key.to_string(),
        value: value.into(),
    }
}

/// The "how it was run" section: the run's own lines, one per variant (what
/// it changed), one per host.
fn how_lines(model: &ReportModel) -> (Vec<KeyValue>, Vec<KeyValue>, Vec<KeyValue>) {
    let r = &model.run;
    let specs = r.variants.iter().map(variant_spec).collect();
    let hosts = r.hosts.iter().map(host_line).collect();
    (run_lines(r), specs, hosts)
}

/// The run folder, its command and settings, and the versions it recorded.
fn run_lines(r: &RunInfo) -> Vec<KeyValue> {
    let mut how = vec![kv("run folder", r.path.clone())];
    let mut some = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            how.push(kv(key, v));
        }
    };
    some("name", r.name.clone());
    some(
        "command",
        (!r.command.is_empty()).then(|| super::escape::shell_words(&r.command)),
    );
    some("started", r.created.clone());
    some("cache mode", r.cache.clone());
    some("repeats per variant", r.repeat.map(|n| n.to_string()));
    some("baseline", r.baseline.clone());
    some(
        "kernel records for",
        r.kernel_steps.map(|k| format!("{k} optimizer steps")),
    );
    some("step marker", r.step_marker.clone());
    some("prewarm-doctor", r.doctor_version.clone());
    for (k, v) in &r.versions {
        how.push(kv(k, v.clone()));
    }
    how
}

/// What a variant changed: its arguments, environment and prewarms.
fn variant_spec(v: &VariantInfo) -> KeyValue {
    kv(&v.name, v.spec())
}

/// A host: its name, driver, CUDA, each GPU and the CUPTI it used.
fn host_line(h: &HostInfo) -> KeyValue {
    let gpus: Vec<String> = h
        .gpus
        .iter()
        .map(|g| {
            format!(
                "GPU {} {} ({}, {} in use before)",
                g.index,
                g.name,
                bytes(g.total_bytes),
                bytes(g.used_before_bytes)
            )
        })
        .collect();
    kv(
        &h.host,
        format!(
            "{}; driver {}, CUDA {}; {}{}",
            h.hostname,
            h.driver_version.as_deref().unwrap_or("not recorded"),
            h.cuda_driver_version.as_deref().unwrap_or("not recorded"),
            if gpus.is_empty() {
                "no GPU listed".to_string()
            } else {
                gpus.join("; ")
            },
            h.cupti_path
                .as_ref()
                .map_or(String::new(), |c| format!("; CUPTI {c}"))
        ),
    )
}

fn page(model: &ReportModel) -> Result<Page, ReportError> {
    let moved_chart = if Chart::all(model).contains(&Chart::MovedVsCost) {
        Some(chart_svg(model, &Chart::MovedVsCost)?)
    } else {
        None
    };
    let mut timelines = Vec::new();
    for v in model.variants() {
        if let Some(t) = timeline_block(model, v)? {
            timelines.push(t);
        }
    }
    let (ranks, ranks_hidden, spreads, distribution) = rank_lines(model);
    let (how, variant_specs, hosts) = how_lines(model);
    Ok(Page {
        title: format!(
            "prewarm-doctor: {}",
            model
                .run
                .name
                .clone()
                .unwrap_or_else(|| model.run.path.clone())
        ),
        incomplete: super::model::opening_lines(&model.incomplete, 3),
        legend: MarkerKind::ALL
            .iter()
            .map(|k| (marker_kind_label(*k).to_string(), hex(marker_color(*k))))
            .collect(),
        headline: model
            .headline
            .iter()
            .map(|h| Sentence {
                css: h.class.map_or("v-none".into(), class_css),
                text: h.text.clone(),
            })
            .collect(),
        variants: variant_lines(model),
        verdicts: verdict_blocks(model),
        notes: model
            .matrix
            .iter()
            .flat_map(|m| {
                let excluded = m.excluded.iter().map(|e| format!("excluded: {e}"));
                m.notes.iter().cloned().chain(excluded)
            })
            .collect(),
        moved_chart,
        timelines,
        ranks,
        ranks_hidden,
        spreads,
        distribution,
        forensics: forensic_lines(model),
        exceptions: exception_lines(model),
        late: late_lines(model),
        late_none: late_none(model),
        how,
        variant_specs,
        hosts,
        problems: problem_lines(model),
        tool: format!("prewarm-doctor {}", env!("CARGO_PKG_VERSION")),
    })
}

/// The matrix table's rows: each variant's spreads and verdict.
fn variant_lines(model: &ReportModel) -> Vec<VariantLine> {
    let Some(m) = &model.matrix else {
        return Vec::new();
    };
    m.variants
        .iter()
        .map(|v| {
            let verdict = model.verdict(&v.name);
            let unjudged = if v.is_baseline {
                "baseline"
            } else {
                "not judged"
            };
            VariantLine {
                name: v.name.clone(),
                prewarms: v.prewarms.join(", "),
                baseline: v.is_baseline,
                runs: format!("{}/{}", v.runs, v.expected),
                peak: spread_text(&v.step1_device_peak, &|x| bytes(x.max(0.0) as u64)),
                oop: spread_text(&v.step1_out_of_pool, &|x| bytes(x.max(0.0) as u64)),
                headroom: spread_text(&v.step1_tightest_headroom, &|x| signed_bytes(x as i64)),
                step1: spread_text(&v.step1_s, &seconds),
                setup: spread_text(&v.setup_s, &seconds),
                verdict: verdict.map_or(unjudged.to_string(), |x| x.label.clone()),
                verdict_css: verdict.map_or("v-none".into(), |x| class_css(x.class)),
            }
        })
        .collect()
}

/// One block per judged prewarm: what it moved, what it cost, what is still
/// in step 1 and the evidence.
fn verdict_blocks(model: &ReportModel) -> Vec<VerdictBlock> {
    model
        .matrix
        .iter()
        .flat_map(|m| &m.verdicts)
        .map(|v| VerdictBlock {
            variant: v.variant.clone(),
            prewarms: v.prewarms.join(", "),
            label: v.label.clone(),
            css: class_css(v.class),
            moved: moved_text(v),
            costs: costs_text(&v.costs),
            confidence: v.confidence.clone(),
            still: v
                .still_in_step1
                .iter()
                .map(|s| {
                    format!(
                        "{}: {}, {} ({} events)",
                        s.class.label(),
                        bytes(s.bytes),
                        seconds(s.seconds),
                        s.events
                    )
                })
                .collect(),
            evidence: v.evidence.clone(),
        })
        .collect()
}

/// What each attempt could not read, and its notices.
fn problem_lines(model: &ReportModel) -> Vec<String> {
    let mut problems = Vec::new();
    for a in &model.attempts {
        for p in a
            .problems
            .iter()
            .chain(a.ranks.iter().flat_map(|r| &r.account.problems))
        {
            problems.push(format!(
                "{}: {}: {}{}",
                a.id(),
                p.file,
                p.what,
                if p.damaged { " (damaged)" } else { "" }
            ));
        }
        problems.extend(a.notices.iter().map(|n| format!("{}: {n}", a.id())));
        for r in &a.ranks {
            let notes = super::step_text::capture_notes(&r.account);
            problems.extend(
                notes
                    .iter()
                    .map(|n| format!("{}: {}: {n}", a.id(), r.label)),
            );
        }
    }
    problems
}

impl Renderer for Html {
    fn render(&self, model: &ReportModel, out: &mut dyn Write) -> Result<(), ReportError> {
        let html = page(model)?
            .render()
            .map_err(|e| ReportError::Template(e.to_string()))?;
        // Control characters and bidirectional overrides anywhere on the
        // page (kernel names, commands) are made visible and inert.
        let html: String = html.chars().map(inert).collect();
        // Text wraps at spaces only: a figure stays with its unit, a long
        // path breaks after its separators.
        let html = super::html_breaks::wrap_only_between_words(&html);
        out.write_all(html.as_bytes())?;
        Ok(())
    }
}
