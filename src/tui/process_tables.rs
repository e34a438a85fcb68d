//! A process of the report model in the drawing form the dashboard filters,
//! sorts, steps through and plots: every event of its account flattened into
//! one table (the Events tab), its timeline markers with their detail (the
//! Timeline's cursor), and its memory series. Derived from the model's
//! account and timeline of each process on the loader thread, once per load,
//! so that drawing a frame or changing the selection only clips and formats
//! (a process can hold a million events); the wording of a what-if or a fix
//! is the one every format uses (`crate::report`).

use crate::analysis::account::{
    AutotuneAccount, CommAccount, CompileEvent, ExceptionEvent, Exposure, Forensic,
    LocalMemoryEvent, ProcessAccount,
};
use crate::analysis::phases::Phase;
use crate::analysis::timeline::{Marker, MarkerKind, Point, Timeline, value_at};
use crate::report::model::RankView;
use crate::report::{bytes, seconds, signed_bytes, verdict_text};

/// One process's events, markers and series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessTables {
    /// Every event the account holds, time-ordered (the events table).
    pub events: Vec<EventRow>,
    /// The timeline's markers, time-ordered (the timeline's cursor).
    pub markers: Vec<EventRow>,
    /// Device used, pool reserved, out of pool (allocations and
    /// local-memory growth together).
    pub series: Vec<Series>,
}

impl ProcessTables {
    /// No process (nothing selected yet).
    pub const EMPTY: ProcessTables = ProcessTables {
        events: Vec::new(),
        markers: Vec::new(),
        series: Vec::new(),
    };

    /// One process of the model in drawing form.
    pub fn of(rank: &RankView) -> ProcessTables {
        ProcessTables {
            events: events_of(&rank.account),
            markers: rank
                .timeline
                .markers
                .iter()
                .map(|m| marker_row(m).named(rank.no_step()))
                .collect(),
            series: series_of(&rank.timeline),
        }
    }
}

/// A memory series: (seconds since process start, bytes), time-ordered; the
/// value holds until the next point.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: &'static str,
    pub points: Vec<(f64, f64)>,
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

fn series_of(t: &Timeline) -> Vec<Series> {
    let mut outside: Vec<&[Point]> = t.out_of_pool.iter().map(|s| &s.points[..]).collect();
    outside.push(&t.local_memory);
    vec![
        Series {
            name: "device used",
            points: to_f(&t.device_used),
        },
        Series {
            name: "pool reserved",
            points: to_f(&t.pool_reserved),
        },
        Series {
            name: "out of pool",
            points: sum_series(&outside),
        },
    ]
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
fn events_of(p: &ProcessAccount) -> Vec<EventRow> {
    let mut rows: Vec<EventRow> = p
        .exposures
        .iter()
        .filter(|e| e.kind != "local memory")
        .map(exposure_row)
        .collect();
    rows.extend(p.local_memory.iter().map(local_memory_row));
    rows.extend(p.nccl.iter().map(comm_row));
    rows.extend(p.autotune.iter().map(autotune_row));
    rows.extend(p.compiles.iter().map(compile_row));
    rows.extend(p.exceptions.iter().map(exception_row));
    rows.extend(p.forensics.iter().map(oom_row));
    rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let no_step = crate::report::no_step(p);
    rows.into_iter().map(|r| r.named(no_step)).collect()
}

/// An out-of-pool allocation (local-memory growth has its own row).
fn exposure_row(e: &Exposure) -> EventRow {
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
    .indexed()
}

/// A growth of the local-memory reservation.
fn local_memory_row(l: &LocalMemoryEvent) -> EventRow {
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
    .indexed()
}

/// An NCCL communicator, named by its id as every format names it.
fn comm_row(c: &CommAccount) -> EventRow {
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
        kv(
            "init",
            c.init_seconds
                .map_or("not recorded".into(), crate::report::nccl_seconds),
        ),
        kv("allocated", bytes(c.bytes)),
        kv("inferred (no allocation call)", bytes(c.inferred_bytes)),
    ];
    detail.extend(c.timings.iter().map(|(k, v)| kv(k, seconds(*v))));

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
    .indexed()
}

/// A Triton autotune run.
fn autotune_row(a: &AutotuneAccount) -> EventRow {
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
    .indexed()
}

/// A Triton compile.
fn compile_row(c: &CompileEvent) -> EventRow {
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
    .indexed()
}

/// A Python exception: its type, message, thread and the frames it was
/// raised in.
fn exception_row(e: &ExceptionEvent) -> EventRow {
    let mut detail = vec![
        kv("exception", e.kind.clone()),
        kv("message", e.message.clone()),
    ];
    detail.extend(e.thread.clone().map(|t| kv("thread", t)));
    detail.extend(
        crate::report::step_text::raised_at(e)
            .map(|at| kv("raised at (most recent call last)", at)),
    );
    EventRow {
        t_s: e.t_s,
        phase: e.phase,
        step: e.step,
        kind: EventKind::Exception,
        library: "python".into(),
        bytes: None,
        key: e.kind.clone(),
        seconds: None,
        failed: true,
        detail,
        phase_name: String::new(),
        search: String::new(),
    }
    .indexed()
}

/// An out-of-memory failure with its what-ifs and fix, worded as the terminal words them.
fn oom_row(f: &Forensic) -> EventRow {
    let mut detail = vec![
        kv("request", verdict_text::request_text(f)),
        kv("source", f.source.clone()),
        kv("library", f.library.clone()),
        kv("bytes", bytes(f.bytes)),
        kv("free before", opt_bytes(f.device_free_before)),
        kv("device total", opt_bytes(f.device_total)),
    ];
    if !f.preceded_by.is_empty() {
        let parts = verdict_text::preceded_by_texts(f);
        detail.push(kv("lazy init before it", parts.join(", ")));
    }
    if !f.prewarms.is_empty() {
        detail.push(kv("prewarms that would move it", f.prewarms.join(", ")));
    }
    // The what-if of each prewarm and the fix, as the terminal says them.
    for g in crate::report::forensics_text::projection_texts(f) {
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
        detail.push(kv("the fix", crate::report::forensics_text::remedy_text(r)));
    }
    if let Some(m) = &f.message {
        detail.push(kv("message", m.clone()));
    }

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
    .indexed()
}
