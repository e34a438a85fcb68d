//! What the dashboard shows, gathered once per load so that drawing a frame
//! only clips and formats. Built from the analysis account (the same account
//! every report renders); events are flattened into one table per process,
//! and every series is already in seconds since the process started.

use crate::analysis::AttemptAccount;
use crate::analysis::matrix::{MatrixAccount, Stat, Verdict, VerdictClass};
use crate::analysis::model::ProcessAccount;
use crate::analysis::phases::Phase;
use crate::analysis::ranks::{is_rank, step1_comm_count, step1_out_of_pool, step1_peak};
use crate::report::{bytes, seconds, signed_bytes};
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
    pub runs: String,
    pub step1_peak: Option<Stat>,
    pub step1_out_of_pool: Option<Stat>,
    pub step1_headroom: Option<Stat>,
    pub step1_s: Option<Stat>,
    pub setup_s: Option<Stat>,
    pub verdict: Option<VerdictView>,
    /// Index of the variant's first attempt in `Dashboard::attempts`.
    pub first_attempt: Option<usize>,
}

/// A verdict as the dashboard shows it: a short label and the full story.
#[derive(Debug, Clone, PartialEq)]
pub struct VerdictView {
    pub label: String,
    pub tone: Tone,
    /// One line: what it moved and what it cost.
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

/// What kind of event a row of the events table is.
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

/// One row of the events table (and one marker on the timeline).
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
}

/// The memory account at one instant: device used split by holder.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountView {
    pub phase: Phase,
    pub at_s: f64,
    pub device_used: u64,
    /// (name, bytes, inferred); the pool first.
    pub parts: Vec<(String, i64, bool)>,
    pub unexplained: i64,
}

/// A memory series: (seconds since process start, bytes), time-ordered.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesView {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One process (a rank or a helper that used CUDA).
#[derive(Debug, Clone, PartialEq)]
pub struct RankView {
    /// "rank 0" or "pid 123".
    pub label: String,
    pub host: String,
    pub pid: u32,
    pub is_rank: bool,
    pub step1_peak: Option<u64>,
    pub step1_out_of_pool: u64,
    pub step1_s: Option<f64>,
    pub step1_comms: u32,
    pub comms: u32,
    /// Where it is now: "setup", "step 1", "step 7", "done".
    pub now: String,
    pub steps: u32,
    pub bands: Vec<Band>,
    pub end_s: f64,
    pub events: Vec<EventRow>,
    /// The step-1 account (setup's when step 1 never came).
    pub account: Option<AccountView>,
    /// Device used, pool reserved and out-of-pool over time.
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

/// The label and tone of a verdict class.
pub fn verdict_label(class: VerdictClass) -> (String, Tone) {
    let tone = match class {
        VerdictClass::Works => Tone::Good,
        VerdictClass::Partial => Tone::Warn,
        VerdictClass::NoEffect => Tone::Warn,
        VerdictClass::Regression => Tone::Bad,
    };
    (class.label().to_uppercase(), tone)
}

/// The dashboard's view of one verdict. The only place that reads the
/// verdict's structure: adapting to a richer verdict is a change here.
pub fn verdict_view(v: &Verdict) -> VerdictView {
    let (label, tone) = verdict_label(v.class);
    let mut summary = format!(
        "moved {} and {} out of step 1",
        signed_bytes(v.moved_bytes as i64),
        seconds(v.moved_seconds.max(0.0))
    );
    if let Some(c) = v.setup_cost_s {
        summary += &format!("; setup {c:+.2} s");
    }
    if let Some(d) = v.step1_peak_delta {
        summary += &format!("; step-1 peak {}", signed_delta(d));
    }
    let mut lines = vec![format!("prewarms: {}", v.prewarms.join(", "))];
    lines.extend(v.evidence.iter().cloned());
    if !v.still_in_step1.is_empty() {
        let parts: Vec<String> = v
            .still_in_step1
            .iter()
            .map(|(c, cost)| {
                let mut s = c.label().to_string();
                if cost.bytes > 0 {
                    s += &format!(" {}", bytes(cost.bytes));
                }
                if cost.seconds > 0.0 {
                    s += &format!(" {}", seconds(cost.seconds));
                }
                s
            })
            .collect();
        lines.push(format!("still in step 1: {}", parts.join(", ")));
    }
    VerdictView {
        label,
        tone,
        summary,
        lines,
    }
}

fn signed_delta(d: f64) -> String {
    if d >= 0.0 {
        format!("+{}", bytes(d as u64))
    } else {
        format!("-{}", bytes((-d) as u64))
    }
}

/// The matrix part of the dashboard.
pub fn matrix_view(m: &MatrixAccount, attempts: &[AttemptView]) -> MatrixView {
    let rows = m
        .variants
        .iter()
        .map(|v| VariantRow {
            name: v.name.clone(),
            prewarms: v.prewarms.clone(),
            runs: format!("{}/{}", v.attempts.len(), v.expected_attempts),
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
            first_attempt: attempts.iter().position(|a| a.variant == v.name),
        })
        .collect();
    MatrixView {
        baseline: m.baseline.clone(),
        cache: m.cache.clone(),
        isolated: m.isolated,
        rows,
        notes: m.notes.clone(),
    }
}

/// The attempt part of the dashboard; `running` marks the attempt in progress.
pub fn attempt_view(a: &AttemptAccount, running: bool) -> AttemptView {
    let (status, status_tone) = if running {
        ("running".to_string(), Tone::Warn)
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
        .ranks
        .as_ref()
        .map(|s| {
            crate::report::spread_lines(s)
                .into_iter()
                .map(|l| (l.label.to_string(), l.owner, l.value, l.skew))
                .collect()
        })
        .unwrap_or_default();
    let mut notes: Vec<String> = a.host_notices.clone();
    if let Some(line) = a
        .ranks
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
        ranks: a.processes.iter().map(|p| rank_view(p, running)).collect(),
        spread,
        notes,
    }
}

fn rank_label(p: &ProcessAccount) -> String {
    match p.rank {
        Some(r) => format!("rank {r}"),
        None => format!("pid {}", p.pid),
    }
}

/// Where a process is: the step in progress, or its phase.
fn now_label(p: &ProcessAccount, running: bool) -> String {
    let started = p.phases.iter().any(|ph| ph.phase == Phase::Step1);
    match (started, running) {
        (false, _) if !p.forensics.is_empty() => "failed in setup".into(),
        (false, true) => "setup".into(),
        (false, false) => "no step".into(),
        (true, true) => format!("step {}", p.steps.count + 1),
        (true, false) if !p.forensics.is_empty() => {
            format!("failed in step {}", p.steps.count + 1)
        }
        (true, false) => format!("done, {} steps", p.steps.count),
    }
}

fn rank_view(p: &ProcessAccount, running: bool) -> RankView {
    let bands: Vec<Band> = p
        .phases
        .iter()
        .map(|ph| Band {
            phase: ph.phase,
            start_s: ph.start_s,
            end_s: ph.end_s,
        })
        .collect();
    let end_s = bands.iter().map(|b| b.end_s).fold(0.0, f64::max);
    RankView {
        label: rank_label(p),
        host: p.host.clone(),
        pid: p.pid,
        is_rank: is_rank(p),
        step1_peak: step1_peak(p),
        step1_out_of_pool: step1_out_of_pool(p),
        step1_s: p.steps.step1_s,
        step1_comms: step1_comm_count(p),
        comms: p.nccl.len() as u32,
        now: now_label(p, running),
        steps: p.steps.count,
        bands,
        end_s,
        events: events_of(p),
        account: account_of(p),
        series: series_of(p),
        oom: !p.forensics.is_empty(),
    }
}

fn account_of(p: &ProcessAccount) -> Option<AccountView> {
    let ph = p
        .phases
        .iter()
        .find(|ph| ph.phase == Phase::Step1)
        .or_else(|| p.phases.first())?;
    let g = ph.gap_end.as_ref()?;
    let mut parts = vec![("PyTorch pool".to_string(), g.pool_reserved as i64, false)];
    parts.extend(g.parts.iter().map(|x| (x.name.clone(), x.bytes, x.inferred)));
    Some(AccountView {
        phase: ph.phase,
        at_s: g.at_s,
        device_used: g.device_used,
        parts,
        unexplained: g.unexplained,
    })
}

/// Memory series the account holds without the timeline model: the device
/// and pool at every out-of-pool request, and the phase ends.
fn series_of(p: &ProcessAccount) -> Vec<SeriesView> {
    let mut used = Vec::new();
    let mut pool = Vec::new();
    let mut oop = Vec::new();
    for e in &p.exposures {
        if let Some(d) = e.device_used_before {
            used.push((e.t_s, d as f64));
            oop.push((e.t_s, d.saturating_sub(e.pool_reserved) as f64));
        }
        pool.push((e.t_s, e.pool_reserved as f64));
    }
    for ph in &p.phases {
        if let Some(g) = &ph.gap_end {
            used.push((g.at_s, g.device_used as f64));
            pool.push((g.at_s, g.pool_reserved as f64));
            oop.push((g.at_s, g.out_of_pool as f64));
        }
    }
    let mut out = Vec::new();
    for (name, mut points) in [
        ("device used", used),
        ("pool reserved", pool),
        ("out of pool", oop),
    ] {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.push(SeriesView {
            name: name.to_string(),
            points,
        });
    }
    out
}

fn kv(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

fn opt_bytes(b: Option<u64>) -> String {
    b.map_or("?".into(), bytes)
}

/// Every event of a process, time-ordered.
pub fn events_of(p: &ProcessAccount) -> Vec<EventRow> {
    let mut rows = Vec::new();
    for e in p.exposures.iter().filter(|e| e.kind != "local memory") {
        rows.push(EventRow {
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
        });
    }
    for l in &p.local_memory {
        let mut detail = vec![
            kv("kernel", l.kernel.clone()),
            kv(
                "reservation",
                format!("{} -> {}", bytes(l.before), bytes(l.after)),
            ),
            kv("device growth", bytes(l.device_growth)),
            kv("registers", l.registers.to_string()),
        ];
        if let Some(c) = &l.autotune_config {
            detail.push(kv("autotune candidate", c.clone()));
        }
        if l.failed {
            detail.push(kv("failed", "the driver could not grow the reservation"));
        }
        rows.push(EventRow {
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
        });
    }
    for c in &p.nccl {
        let mut detail = vec![
            kv("communicator", c.comm.clone()),
            kv("id", c.comm_id.clone().unwrap_or_else(|| "?".into())),
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
        rows.push(EventRow {
            t_s: c.start_s.unwrap_or(0.0),
            phase: c.phase.unwrap_or(Phase::Setup),
            step: c.step,
            kind: EventKind::Nccl,
            library: "NCCL".into(),
            bytes: Some(c.bytes + c.inferred_bytes),
            key: c.comm.clone(),
            seconds: c.init_seconds,
            failed: false,
            detail,
        });
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
        rows.push(EventRow {
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
        });
    }
    for c in &p.compiles {
        rows.push(EventRow {
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
        });
    }
    for e in &p.exceptions {
        rows.push(EventRow {
            t_s: e.t_s,
            phase: e.phase,
            step: None,
            kind: EventKind::Exception,
            library: "python".into(),
            bytes: None,
            key: e.kind.clone(),
            seconds: None,
            failed: true,
            detail: vec![kv("exception", e.kind.clone()), kv("message", e.message.clone())],
        });
    }
    for f in &p.forensics {
        let mut detail = vec![
            kv("request", f.request.clone()),
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
        if let Some(m) = &f.message {
            detail.push(kv("message", m.clone()));
        }
        rows.push(EventRow {
            t_s: f.t_s,
            phase: f.phase,
            step: f.step,
            kind: EventKind::OutOfMemory,
            library: f.library.clone(),
            bytes: Some(f.bytes),
            key: f.request.clone(),
            seconds: None,
            failed: true,
            detail,
        });
    }
    rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    rows
}

/// The dashboard of an analysed run.
pub fn dashboard(
    title: String,
    root: PathBuf,
    attempts: &[AttemptAccount],
    matrix: Option<&MatrixAccount>,
    running: Option<(&str, &str)>,
) -> Dashboard {
    let views: Vec<AttemptView> = attempts
        .iter()
        .map(|a| {
            attempt_view(
                a,
                running.is_some_and(|(v, n)| v == a.variant && n == a.attempt),
            )
        })
        .collect();
    let problems = attempts
        .iter()
        .flat_map(|a| {
            a.problems
                .iter()
                .chain(a.processes.iter().flat_map(|p| p.problems.iter()))
        })
        .map(|p| format!("{}: {}", p.file, p.what))
        .collect();
    Dashboard {
        title,
        root,
        matrix: matrix.map(|m| matrix_view(m, &views)),
        attempts: views,
        live: None,
        problems,
    }
}
