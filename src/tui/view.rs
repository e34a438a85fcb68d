//! What the dashboard shows, gathered once per load so that drawing a frame
//! only clips and formats. Built from the report model
//! ([`crate::report::model::ReportModel`]), the same model the HTML, PNG and
//! Perfetto reports read: the dashboard adds only what a terminal needs —
//! every event of a process flattened into one table, the timeline's markers
//! with their detail, and the series in drawing form.

use crate::analysis::account::ProcessAccount;
use crate::analysis::phases::Phase;
use crate::analysis::timeline::{Marker, MarkerKind, Point, Timeline, value_at};
use crate::report::model::{self, ReportModel, Spread};
use crate::report::{bytes, seconds, signed_bytes, verdict_text};
use crate::tui::theme::Tone;
use std::path::PathBuf;

/// Everything the dashboard draws, for one load of a run folder.
#[derive(Debug, Clone, Default)]
pub struct Dashboard {
    /// The run's name (run.json) or its folder name.
    pub title: String,
    pub root: PathBuf,
    pub matrix: Option<MatrixView>,
    pub attempts: Vec<AttemptView>,
    /// Progress of a run still being written (None when it has finished).
    pub live: Option<LiveView>,
    /// Damaged or truncated files, one line each.
    pub problems: Vec<String>,
}

/// The A/B comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixView {
    pub baseline: String,
    pub cache: String,
    pub isolated: bool,
    pub rows: Vec<VariantRow>,
    pub notes: Vec<String>,
}

/// One variant over its repeats, with its prewarm's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantRow {
    pub name: String,
    pub prewarms: Vec<String>,
    pub is_baseline: bool,
    /// "2/3": attempts that count, of those planned.
    pub runs: String,
    pub step1_peak: Option<Spread>,
    pub step1_out_of_pool: Option<Spread>,
    pub step1_headroom: Option<Spread>,
    pub step1_s: Option<Spread>,
    pub setup_s: Option<Spread>,
    pub verdict: Option<VerdictView>,
    /// Index of the variant's first attempt in `Dashboard::attempts`.
    pub first_attempt: Option<usize>,
}

/// A verdict as the dashboard shows it: a short label and the full story.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictView {
    pub label: String,
    pub tone: Tone,
    /// What it moved and what it cost, in one line.
    pub summary: String,
    /// Evidence, costs and what still lands in step 1.
    pub lines: Vec<String>,
}

/// One attempt (variant × repeat) across hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptView {
    pub variant: String,
    pub attempt: String,
    /// "exit 0", "exit 1", "interrupted", "running".
    pub status: String,
    pub status_tone: Tone,
    pub ranks: Vec<RankView>,
    /// Worst rank and skew lines: (figure, owner, value, skew).
    pub spread: Vec<(String, String, String, String)>,
    pub notes: Vec<String>,
}

impl AttemptView {
    /// "variant/attempt".
    pub fn name(&self) -> String {
        format!("{}/{}", self.variant, self.attempt)
    }
}

/// A phase's extent on the process's clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Band {
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
}

/// What kind of event a row of the events table (or a marker) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    Allocation,
    LocalMemory,
    Nccl,
    Autotune,
    Compile,
    Exception,
    OutOfMemory,
}

impl EventKind {
    /// Column text.
    pub fn label(self) -> &'static str {
        match self {
            EventKind::Allocation => "alloc",
            EventKind::LocalMemory => "local mem",
            EventKind::Nccl => "nccl comm",
            EventKind::Autotune => "autotune",
            EventKind::Compile => "compile",
            EventKind::Exception => "exception",
            EventKind::OutOfMemory => "OOM",
        }
    }
}

/// One row of the events table, or one marker on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    pub kind: EventKind,
    /// The library or source that asked.
    pub library: String,
    pub bytes: Option<u64>,
    /// Kernel, communicator or autotune key.
    pub key: String,
    /// Seconds the event took, when it has a duration.
    pub seconds: Option<f64>,
    pub failed: bool,
    /// Every field, for the detail panel.
    pub detail: Vec<(String, String)>,
    /// The phase as every format names it ("steps 2..N", "before any step"
    /// for a process without a step: `crate::report::phase_word`).
    pub phase_name: String,
    /// Kind, phase, library and key in lower case, for the `/` filter.
    pub search: String,
}

impl EventRow {
    /// Fills `search` from the columns the filter looks at (the phase named
    /// as a process with a step names it; [`EventRow::named`] renames it).
    fn indexed(mut self) -> EventRow {
        if self.phase_name.is_empty() {
            self.phase_name = crate::report::phase_word(false, self.phase, None);
        }
        self.search = format!(
            "{} {} {} {}",
            self.kind.label(),
            self.phase_name,
            self.library,
            self.key
        )
        .to_lowercase();
        self
    }
}

impl EventRow {
    /// The row of a process without a step: its phase is "before any step".
    fn named(mut self, no_step: bool) -> EventRow {
        if no_step {
            self.phase_name = crate::report::phase_word(true, self.phase, None);
            self.search.clear();
            return self.indexed();
        }
        self
    }
}

/// The memory account at one instant: device used split by holder.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountView {
    pub phase: Phase,
    /// When it is taken: "the end of step 1", or "the end of the run,
    /// before any step" (`crate::report::model::RankView::account_when`).
    pub when: String,
    pub at_s: f64,
    pub device_used: u64,
    /// (name, bytes, inferred); the pool first.
    pub parts: Vec<(String, i64, bool)>,
    pub unexplained: i64,
}

/// A memory series: (seconds since process start, bytes), time-ordered; the
/// value holds until the next point.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesView {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One process (a rank or a helper that used CUDA).
#[derive(Debug, Clone, PartialEq)]
pub struct RankView {
    /// "rank 0 on node-b" or "pid 123 on node-b".
    pub label: String,
    /// "rank 0" or "pid 123".
    pub name: String,
    /// The process has a rank (RANK was set), even before its first step.
    pub has_rank: bool,
    pub host: String,
    pub pid: u32,
    pub is_rank: bool,
    pub step1_peak: Option<u64>,
    pub step1_out_of_pool: u64,
    pub step1_s: Option<f64>,
    pub step1_comms: u32,
    pub comms: u32,
    /// Where it is: "setup", "step 7", "done, 4 steps", "failed in step 1".
    pub now: String,
    pub bands: Vec<Band>,
    pub end_s: f64,
    /// Every event the account holds, time-ordered (the events table).
    pub events: Vec<EventRow>,
    /// The timeline's markers, time-ordered (the timeline's cursor).
    pub markers: Vec<EventRow>,
    /// The step-1 account (setup's when step 1 never came).
    pub account: Option<AccountView>,
    /// Device used, pool reserved, out of pool (allocations and local-memory growth).
    pub series: Vec<SeriesView>,
    pub oom: bool,
}

/// Progress of a run that is still being written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveView {
    /// Attempts planned (variants × repeats, warm-ups included).
    pub total: usize,
    /// Attempts finished.
    pub done: usize,
    /// The attempt running now ("cublas/2").
    pub current: Option<String>,
    pub elapsed_s: f64,
    pub eta_s: Option<f64>,
    pub gpus: Vec<GpuView>,
}

/// One GPU's memory in the running attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuView {
    pub index: u32,
    pub name: String,
    pub total: u64,
    pub used: u64,
    /// Device used over the last minute, oldest first, evenly spaced.
    pub history: Vec<u64>,
}

/// The dashboard's view of one verdict. The only place that reads the
/// verdict's structure: adapting to a richer verdict is a change here.
pub fn verdict_view(v: &model::VerdictView) -> VerdictView {
    let tone = match v.class.as_str() {
        "works" => Tone::Good,
        "regression" => Tone::Bad,
        "partial" | "no_effect" | "inconclusive" => Tone::Warn,
        _ => Tone::Neutral,
    };
    let mut lines = vec![
        format!("prewarms: {}", v.prewarms.join(", ")),
        v.class_line.clone(),
    ];
    lines.extend(v.evidence.iter().cloned());
    if !v.still_in_step1.is_empty() {
        let parts: Vec<String> = v
            .still_in_step1
            .iter()
            .map(|s| {
                let mut t = s.class.clone();
                if s.bytes > 0 {
                    t += &format!(" {}", bytes(s.bytes));
                }
                if s.seconds > 0.0 {
                    t += &format!(" {}", seconds(s.seconds));
                }
                t
            })
            .collect();
        lines.push(format!("still in step 1: {}", parts.join(", ")));
    }
    VerdictView {
        label: v.label.to_uppercase(),
        tone,
        summary: v.headline.clone(),
        lines,
    }
}

/// The matrix part of the dashboard.
fn matrix_view(m: &model::MatrixView, attempts: &[AttemptView]) -> MatrixView {
    let rows = m
        .variants
        .iter()
        .map(|v| VariantRow {
            name: v.name.clone(),
            prewarms: v.prewarms.clone(),
            is_baseline: v.is_baseline,
            runs: format!("{}/{}", v.runs, v.expected),
            step1_peak: v.step1_device_peak,
            step1_out_of_pool: v.step1_out_of_pool,
            step1_headroom: v.step1_tightest_headroom,
            step1_s: v.step1_s,
            setup_s: v.setup_s,
            verdict: m
                .verdicts
                .iter()
                .find(|x| x.variant == v.name)
                .map(verdict_view),
            first_attempt: attempts
                .iter()
                .position(|a| a.variant == v.name && a.status != "interrupted")
                .or_else(|| attempts.iter().position(|a| a.variant == v.name)),
        })
        .collect();
    MatrixView {
        baseline: m.baseline.clone(),
        cache: m.cache.clone(),
        isolated: m.isolated,
        rows,
        notes: m
            .notes
            .iter()
            .cloned()
            .chain(m.excluded.iter().map(|e| format!("excluded: {e}")))
            .collect(),
    }
}

/// The attempt part of the dashboard; `running` marks the attempt in progress.
fn attempt_view(a: &model::AttemptView, running: bool) -> AttemptView {
    let (status, status_tone) = if running {
        ("running".to_string(), Tone::Warn)
    } else if a.not_started {
        ("not started".to_string(), Tone::Bad)
    } else if a.interrupted {
        ("interrupted".to_string(), Tone::Warn)
    } else {
        match a.exit_code {
            Some(0) => ("exit 0".to_string(), Tone::Good),
            Some(c) => (format!("exit {c}"), Tone::Bad),
            None => ("no exit status".to_string(), Tone::Warn),
        }
    };
    let spread = a
        .spread
        .as_ref()
        .map(|s| {
            crate::report::spread_lines(s)
                .into_iter()
                .map(|l| (l.label.to_string(), l.owner, l.value, l.skew))
                .collect()
        })
        .unwrap_or_default();
    let mut notes: Vec<String> = a.notices.clone();
    if let Some(line) = a
        .spread
        .as_ref()
        .and_then(crate::report::missing_ranks_line)
    {
        notes.push(line);
    }
    AttemptView {
        variant: a.variant.clone(),
        attempt: a.attempt.clone(),
        status,
        status_tone,
        ranks: a.ranks.iter().map(|r| rank_view(r, running)).collect(),
        spread,
        notes,
    }
}

/// Where a process is: the step in progress, or how it ended.
fn now_label(p: &ProcessAccount, running: bool) -> String {
    let started = p.phases.iter().any(|ph| ph.phase == Phase::Step1);
    let failed = !p.forensics.is_empty() || !p.exceptions.is_empty();
    match (started, running) {
        (false, _) if failed => format!("failed, {}", crate::report::BEFORE_ANY_STEP),
        (false, true) => "setup".into(),
        (false, false) => "no step".into(),
        (true, true) => format!("step {}", p.steps.count + 1),
        (true, false) if failed => format!("failed in step {}", p.steps.count + 1),
        (true, false) => format!("done, {} steps", p.steps.count),
    }
}

fn rank_view(r: &model::RankView, running: bool) -> RankView {
    let t = &r.timeline;
    let bands: Vec<Band> = t
        .phases
        .iter()
        .map(|b| Band {
            phase: b.phase,
            start_s: b.start_s,
            end_s: b.end_s,
        })
        .collect();
    RankView {
        label: r.label.clone(),
        name: r
            .rank
            .map_or_else(|| format!("pid {}", r.pid), |n| format!("rank {n}")),
        has_rank: r.rank.is_some(),
        host: r.host.clone(),
        pid: r.pid,
        is_rank: r.is_rank,
        step1_peak: r.step1_peak,
        step1_out_of_pool: r.step1_out_of_pool,
        step1_s: r.step1_s,
        step1_comms: r.step1_comms,
        comms: r.account.nccl.len() as u32,
        now: now_label(&r.account, running),
        bands,
        end_s: t.end_s.max(bands_end(t)),
        events: events_of(&r.account),
        markers: t
            .markers
            .iter()
            .map(|m| marker_row(m).named(r.no_step()))
            .collect(),
        account: account_of(r),
        series: series_of(t),
        oom: !r.forensics().is_empty(),
    }
}

fn bands_end(t: &Timeline) -> f64 {
    t.phases.iter().map(|b| b.end_s).fold(0.0, f64::max)
}

fn account_of(r: &model::RankView) -> Option<AccountView> {
    let phases = &r.account.phases;
    let ph = phases
        .iter()
        .find(|p| p.phase == Phase::Step1)
        .or(phases.iter().find(|p| p.phase == Phase::Setup))?;
    let g = ph.gap_end.as_ref()?;
    let mut parts = vec![("PyTorch pool".to_string(), g.pool_reserved as i64, false)];
    parts.extend(
        g.parts
            .iter()
            .map(|x| (verdict_text::part_label(x), x.bytes, x.inferred)),
    );
    Some(AccountView {
        phase: ph.phase,
        when: r.account_when(),
        at_s: g.at_s,
        device_used: g.device_used,
        parts,
        unexplained: g.unexplained,
    })
}

fn to_f(points: &[Point]) -> Vec<(f64, f64)> {
    points.iter().map(|p| (p.0, p.1 as f64)).collect()
}

/// The sum of step series, at every instant any of them changes.
fn sum_series(series: &[&[Point]]) -> Vec<(f64, f64)> {
    let mut times: Vec<f64> = series.iter().flat_map(|s| s.iter().map(|p| p.0)).collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    times
        .into_iter()
        .map(|t| (t, series.iter().map(|s| value_at(s, t)).sum::<u64>() as f64))
        .collect()
}

fn series_of(t: &Timeline) -> Vec<SeriesView> {
    let mut outside: Vec<&[Point]> = t.out_of_pool.iter().map(|s| &s.points[..]).collect();
    outside.push(&t.local_memory);
    vec![
        SeriesView {
            name: "device used".into(),
            points: to_f(&t.device_used),
        },
        SeriesView {
            name: "pool reserved".into(),
            points: to_f(&t.pool_reserved),
        },
        SeriesView {
            name: "out of pool".into(),
            points: sum_series(&outside),
        },
    ]
}

fn kv(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

fn opt_bytes(b: Option<u64>) -> String {
    b.map_or("?".into(), bytes)
}

/// A timeline marker as an event with its detail.
fn marker_row(m: &Marker) -> EventRow {
    let kind = match m.kind {
        MarkerKind::Allocation => EventKind::Allocation,
        MarkerKind::LocalMemory => EventKind::LocalMemory,
        MarkerKind::NcclComm => EventKind::Nccl,
        MarkerKind::Autotune => EventKind::Autotune,
        MarkerKind::Compile => EventKind::Compile,
        MarkerKind::Oom => EventKind::OutOfMemory,
    };
    // An NCCL marker's `what` is the communicator's handle; the text and
    // HTML name a communicator by its id (the key), and so does the dashboard.
    let what_label = if kind == EventKind::Nccl {
        "handle"
    } else {
        "what"
    };
    let mut detail = vec![
        kv(what_label, m.what.clone()),
        kv("source", m.source.clone()),
    ];
    if m.bytes > 0 {
        detail.push(kv("bytes", bytes(m.bytes)));
    }
    if m.count > 1 {
        detail.push(kv("events", format!("{} merged into this marker", m.count)));
    }
    if let Some(k) = &m.key {
        detail.push(kv(
            if kind == EventKind::Nccl {
                "communicator id"
            } else {
                "key"
            },
            k.clone(),
        ));
    }
    if let Some(c) = &m.config {
        detail.push(kv(
            if kind == EventKind::LocalMemory {
                "autotune candidate"
            } else {
                "chosen config"
            },
            c.clone(),
        ));
    }
    if !m.libraries.is_empty() {
        detail.push(kv("libraries", m.libraries.join(", ")));
    }
    if let Some(e) = m.end_s {
        detail.push(kv("took", seconds((e - m.t_s).max(0.0))));
    }
    if m.failed {
        detail.push(kv("failed", "yes"));
    }
    let key = match (&m.key, &m.config) {
        (Some(k), _) if kind == EventKind::Nccl => k.clone(),
        (Some(k), _) if kind == EventKind::Autotune => format!("{} {k}", m.what),
        (_, Some(c)) if kind == EventKind::LocalMemory => format!("{} [{c}]", m.what),
        _ => m.what.clone(),
    };
    EventRow {
        t_s: m.t_s,
        phase: m.phase.unwrap_or(Phase::Setup),
        step: m.step,
        kind,
        library: m.source.clone(),
        bytes: (m.bytes > 0).then_some(m.bytes),
        key,
        seconds: m.end_s.map(|e| (e - m.t_s).max(0.0)),
        failed: m.failed,
        detail,
        phase_name: String::new(),
        search: String::new(),
    }
    .indexed()
}

/// Every event of a process, time-ordered.
pub fn events_of(p: &ProcessAccount) -> Vec<EventRow> {
    let mut rows = Vec::new();
    for e in p.exposures.iter().filter(|e| e.kind != "local memory") {
        rows.push(
            EventRow {
                t_s: e.t_s,
                phase: e.phase,
                step: e.step,
                kind: EventKind::Allocation,
                library: e.source.clone(),
                bytes: Some(e.bytes),
                key: e.what.clone(),
                seconds: None,
                failed: !e.succeeded,
                detail: vec![
                    kv("what", e.what.clone()),
                    kv("source", e.source.clone()),
                    kv("bytes", bytes(e.bytes)),
                    kv("device used before", opt_bytes(e.device_used_before)),
                    kv("pool reserved", bytes(e.pool_reserved)),
                    kv("free before", opt_bytes(e.device_free_before)),
                    kv(
                        "headroom after",
                        e.headroom_after.map_or("?".into(), signed_bytes),
                    ),
                    kv("succeeded", if e.succeeded { "yes" } else { "NO" }),
                ],
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for l in &p.local_memory {
        let mut detail = vec![
            kv("kernel", l.kernel.clone()),
            kv(
                "reservation",
                format!("{} -> {}", bytes(l.before), bytes(l.after)),
            ),
            kv("device growth", bytes(l.device_growth)),
        ];
        if l.registers > 0 {
            detail.push(kv("registers", l.registers.to_string()));
        }
        if let Some(c) = &l.autotune_config {
            detail.push(kv("autotune candidate", c.clone()));
        }
        if l.failed {
            detail.push(kv("failed", "the driver could not grow the reservation"));
        }
        rows.push(
            EventRow {
                t_s: l.t_s,
                phase: l.phase,
                step: l.step,
                kind: EventKind::LocalMemory,
                library: "local memory".into(),
                bytes: Some(l.device_growth),
                key: match &l.autotune_config {
                    Some(c) => format!("{} [{c}]", l.kernel),
                    None => l.kernel.clone(),
                },
                seconds: None,
                failed: l.failed,
                detail,
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for c in &p.nccl {
        let id = c.comm_id.clone().unwrap_or_else(|| c.comm.clone());
        let mut detail = vec![
            kv("communicator id", id.clone()),
            kv("handle", c.comm.clone()),
            kv(
                "rank",
                format!(
                    "{} of {}",
                    c.rank.map_or("?".into(), |r| r.to_string()),
                    c.nranks.map_or("?".into(), |r| r.to_string())
                ),
            ),
            kv("init", c.init_seconds.map_or("?".into(), seconds)),
            kv("allocated", bytes(c.bytes)),
            kv("inferred (no allocation call)", bytes(c.inferred_bytes)),
        ];
        detail.extend(c.timings.iter().map(|(k, v)| kv(k, seconds(*v))));
        rows.push(
            EventRow {
                t_s: c.start_s.unwrap_or(0.0),
                phase: c.phase.unwrap_or(Phase::Setup),
                step: c.step,
                kind: EventKind::Nccl,
                library: "NCCL".into(),
                bytes: Some(c.bytes + c.inferred_bytes),
                key: id,
                seconds: c.init_seconds,
                failed: false,
                detail,
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for a in &p.autotune {
        let mut detail = vec![
            kv("kernel", a.kernel.clone()),
            kv("key", a.key.clone()),
            kv("time", seconds(a.seconds)),
            kv(
                "configs",
                format!("{} ({} benchmarked)", a.configs, a.benchmarked),
            ),
            kv("chosen", a.chosen.clone()),
            kv("local-memory growth", bytes(a.local_memory_growth)),
            kv("out-of-pool bytes", bytes(a.out_of_pool_bytes)),
        ];
        if !a.spilling_configs.is_empty() {
            detail.push(kv("spilling candidates", a.spilling_configs.join("; ")));
        }
        rows.push(
            EventRow {
                t_s: a.start_s,
                phase: a.phase,
                step: a.step,
                kind: EventKind::Autotune,
                library: a.source.clone(),
                bytes: Some(a.local_memory_growth + a.out_of_pool_bytes),
                key: format!("{} {}", a.kernel, a.key),
                seconds: Some(a.seconds),
                failed: false,
                detail,
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for c in &p.compiles {
        rows.push(
            EventRow {
                t_s: c.start_s,
                phase: c.phase,
                step: c.step,
                kind: EventKind::Compile,
                library: "triton".into(),
                bytes: None,
                key: c.kernel.clone(),
                seconds: Some(c.seconds),
                failed: false,
                detail: vec![
                    kv("kernel", c.kernel.clone()),
                    kv("time", seconds(c.seconds)),
                    kv(
                        "cache",
                        match c.cache_hit {
                            Some(true) => "hit",
                            Some(false) => "miss",
                            None => "?",
                        },
                    ),
                ],
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for e in &p.exceptions {
        rows.push(
            EventRow {
                t_s: e.t_s,
                phase: e.phase,
                step: None,
                kind: EventKind::Exception,
                library: "python".into(),
                bytes: None,
                key: e.kind.clone(),
                seconds: None,
                failed: true,
                detail: vec![
                    kv("exception", e.kind.clone()),
                    kv("message", e.message.clone()),
                ],
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    for f in &p.forensics {
        let mut detail = vec![
            kv("request", verdict_text::request_text(f)),
            kv("source", f.source.clone()),
            kv("library", f.library.clone()),
            kv("bytes", bytes(f.bytes)),
            kv("free before", opt_bytes(f.device_free_before)),
            kv("device total", opt_bytes(f.device_total)),
        ];
        if !f.preceded_by.is_empty() {
            let parts: Vec<String> = f
                .preceded_by
                .iter()
                .map(|(c, b)| format!("{} {}", c.label(), bytes(*b)))
                .collect();
            detail.push(kv("lazy init before it", parts.join(", ")));
        }
        if !f.prewarms.is_empty() {
            detail.push(kv("prewarms that would move it", f.prewarms.join(", ")));
        }
        // The what-if of each prewarm and the fix, as the terminal says them.
        for g in crate::report::projection_texts(f) {
            // The names go in the value: a long list of prewarms as the key
            // would push every value off the overlay.
            detail.push(kv(
                "would a prewarm save it?",
                format!(
                    "{}: {}; {}",
                    g.prewarms.join(", "),
                    g.outcome,
                    g.why.join("; ")
                ),
            ));
        }
        for r in &f.remedies {
            detail.push(kv("the fix", crate::report::remedy_text(r)));
        }
        if let Some(m) = &f.message {
            detail.push(kv("message", m.clone()));
        }
        rows.push(
            EventRow {
                t_s: f.t_s,
                phase: f.phase,
                step: f.step,
                kind: EventKind::OutOfMemory,
                library: f.library.clone(),
                bytes: Some(f.bytes),
                key: verdict_text::request_text(f),
                seconds: None,
                failed: true,
                detail,
                phase_name: String::new(),
                search: String::new(),
            }
            .indexed(),
        );
    }
    rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let no_step = crate::report::no_step(p);
    rows.into_iter().map(|r| r.named(no_step)).collect()
}

/// The dashboard of a run's report model; `running` is the attempt in
/// progress ("variant", "attempt"), if any.
pub fn dashboard(model: &ReportModel, root: PathBuf, running: Option<(&str, &str)>) -> Dashboard {
    let attempts: Vec<AttemptView> = model
        .attempts
        .iter()
        .map(|a| {
            attempt_view(
                a,
                running.is_some_and(|(v, n)| v == a.variant && n == a.attempt),
            )
        })
        .collect();
    let problems = model
        .attempts
        .iter()
        .flat_map(|a| {
            a.problems
                .iter()
                .chain(a.ranks.iter().flat_map(|r| r.account.problems.iter()))
        })
        .map(|p| format!("{}: {}", p.file, p.what))
        .collect();
    let title = model.run.name.clone().unwrap_or_else(|| {
        root.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned()
    });
    Dashboard {
        title,
        matrix: model.matrix.as_ref().map(|m| matrix_view(m, &attempts)),
        attempts,
        root,
        live: None,
        problems,
    }
}
