//! What the replay produces: the running state at an instant, the
//! per-phase totals by source, the failed requests and the out-of-pool
//! allocations.

use crate::analysis::account::{Exposure, LocalMemoryEvent, SourceBytes};
use crate::analysis::phases::Phase;
use crate::analysis::sources::SourceName;
use prewarm_events::UNKNOWN_BYTES;
use std::collections::BTreeMap;

/// Running totals at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    pub pool: u64,
    pub oop: BTreeMap<SourceName, u64>,
    pub local_growth: u64,
    /// Reservation the driver dropped when a growth failed (measured), at
    /// most the local memory held then.
    pub local_released: u64,
    /// The rest of the device's drop across a failed growth (measured, not
    /// named: see `PartSource::ReleasedAtFailure`).
    pub released_other: u64,
    /// Device growth at lazy module loading (inferred; see `module_code_growth`),
    /// the first module's included where a context's first launch gained as
    /// much as its reservation (below it, the reservation grew there).
    pub module_code: u64,
    /// The device's change across the stretches the probe traced nothing in
    /// (CUPTI detached and attached again), less what the records show
    /// there; signed: the training may have freed more than it took.
    pub untraced: i64,
}

impl State {
    /// All live out-of-pool allocations.
    pub fn oop_total(&self) -> u64 {
        self.oop.values().sum()
    }
}

/// Per-phase totals gathered while replaying.
#[derive(Debug, Clone, Default)]
pub struct PhaseTotals {
    pub by_source: BTreeMap<SourceName, SourceBytes>,
    pub pool_peak: u64,
    pub oop_alloc: u64,
    pub oop_freed: u64,
    pub local_growth: u64,
    pub module_loads: u32,
    pub first_launches: u32,
    pub pinned: u64,
    pub failed: u32,
    /// Device growth at lazy module loading in this phase (inferred).
    pub module_code: u64,
}

/// A failed device request, before forensics interprets it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub t: u64,
    pub api: String,
    pub bytes: u64,
    pub source: String,
    pub library: String,
    pub result: u32,
    pub free_before: Option<u64>,
    pub total: Option<u64>,
    pub local_kernel: Option<String>,
    /// PyTorch's pool when it failed.
    pub pool: u64,
    /// No CUDA context was current on the calling thread (the probe could
    /// not read a device there).
    pub no_context: bool,
}

/// An out-of-pool allocation that succeeded, for joins with framework windows.
#[derive(Debug, Clone)]
pub struct OopAlloc {
    pub t: u64,
    pub source: SourceName,
    pub bytes: u64,
    /// When it was given back, if it was.
    pub freed: Option<u64>,
}

/// Remembers which library files a source's calls came from (once each).
pub(super) fn note_library(
    by_source: &mut BTreeMap<String, Vec<String>>,
    source: &str,
    library: &str,
) {
    if library.is_empty() {
        return;
    }
    let libs = by_source.entry(source.to_string()).or_default();
    if !libs.iter().any(|l| l == library) {
        libs.push(library.to_string());
    }
}

/// Everything the replay produces.
#[derive(Debug, Default)]
pub struct Replay {
    pub phases: BTreeMap<Phase, PhaseTotals>,
    /// State at each requested query instant, in the order asked.
    pub states: Vec<State>,
    pub exposures: Vec<Exposure>,
    pub failures: Vec<Failure>,
    pub local_events: Vec<LocalMemoryEvent>,
    pub oop_allocs: Vec<OopAlloc>,
    /// Local-memory reservation each context had at its first kernel (part of the context).
    pub initial_local: u64,
    /// Reservation released when a growth failed (the driver drops the old one).
    pub local_released: u64,
    pub libraries_by_source: BTreeMap<String, Vec<String>>,
    /// Device growth at lazy module loading: (when, bytes), in time order.
    pub module_code: Vec<(u64, u64)>,
    /// The down-sampled series for the timeline (see timeline_build.rs).
    pub timeline: crate::analysis::timeline_build::Recorder,
}

/// The per-phase entry of a source, created on first use.
pub(super) fn source_entry<'a>(
    by_source: &'a mut BTreeMap<SourceName, SourceBytes>,
    source: &SourceName,
) -> &'a mut SourceBytes {
    by_source
        .entry(source.clone())
        .or_insert_with(|| SourceBytes {
            source: source.to_string(),
            ..Default::default()
        })
}

pub(super) fn opt(v: u64) -> Option<u64> {
    (v != UNKNOWN_BYTES).then_some(v)
}
