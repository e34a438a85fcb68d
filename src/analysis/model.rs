//! The account the analysis produces: plain serialisable structs that every
//! output format (terminal, JSON) renders. Byte figures are bytes; times are
//! seconds relative to the process's start unless named `_ns`.

use super::phases::Phase;
use crate::load::Problem;
use serde::Serialize;
use std::collections::BTreeMap;

/// Bytes one source asked for in one phase.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct SourceBytes {
    pub source: String,
    pub libraries: Vec<String>,
    pub calls: u64,
    pub allocated: u64,
    pub freed: u64,
    pub live_end: u64,
}

/// Device memory not in PyTorch's pool, split by what holds it, at one instant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GapAccount {
    pub at_s: f64,
    pub device_used: u64,
    pub pool_reserved: u64,
    /// device_used − pool_reserved: everything outside PyTorch's pool.
    pub out_of_pool: u64,
    /// Named parts: "CUDA context", each library, "local memory", "module code".
    pub parts: Vec<(String, u64)>,
    /// out_of_pool − Σ parts (negative when parts over-count).
    pub unexplained: i64,
}

/// One phase of one process.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PhaseAccount {
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
    pub duration_s: f64,
    pub steps: u32,
    pub device_used_peak: Option<u64>,
    pub pool_reserved_peak: u64,
    pub pool_reserved_end: u64,
    pub out_of_pool_allocated: u64,
    pub out_of_pool_freed: u64,
    pub out_of_pool_live_end: u64,
    pub by_source: Vec<SourceBytes>,
    pub local_memory_growth: u64,
    pub module_loads: u32,
    pub module_bytes: u64,
    pub kernels_first_launched: u32,
    pub host_pinned_allocated: u64,
    pub failed_requests: u32,
    pub gap_end: Option<GapAccount>,
}

/// A launch that grew the local-memory reservation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LocalMemoryEvent {
    pub t_s: f64,
    pub phase: Phase,
    pub kernel: String,
    pub before: u64,
    pub after: u64,
    pub per_thread: u32,
    pub registers: u16,
}

/// A device request that failed (out of memory or otherwise).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailedRequest {
    pub t_s: f64,
    pub phase: Phase,
    pub api: String,
    pub bytes: u64,
    pub result: u32,
    pub source: String,
    pub library: String,
    pub free_before: Option<u64>,
    pub total: Option<u64>,
}

/// Whether the probe captured in this process, and why not.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CaptureStatus {
    pub active: bool,
    pub detail: String,
    pub cupti: Option<String>,
    pub notices: Vec<String>,
}

/// Probe self-cost and losses, as the probe counted them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProbeHealth {
    pub callbacks: u64,
    pub callback_seconds: f64,
    pub activity_records: u64,
    pub activity_seconds: f64,
    pub host_buffer_bytes: u64,
    pub bytes_written: u64,
    pub dropped_probe_events: u64,
    pub dropped_cupti_records: u64,
}

/// One process (a rank, or a helper process that used CUDA).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProcessAccount {
    pub host: String,
    pub pid: u32,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    pub device: Option<i32>,
    pub gpu: Option<String>,
    pub capture: CaptureStatus,
    pub versions: BTreeMap<String, String>,
    pub step_rule: String,
    pub steps: u32,
    pub step1_s: Option<f64>,
    pub steady_step_s: Option<f64>,
    pub memory_source: String,
    pub context_bytes: Option<u64>,
    pub phases: Vec<PhaseAccount>,
    pub local_memory: Vec<LocalMemoryEvent>,
    pub failures: Vec<FailedRequest>,
    pub health: ProbeHealth,
    /// What the shim read from torch at step ends: (step, reserved, device used).
    pub torch_step_stats: Vec<(u32, Option<u64>, Option<u64>)>,
    pub problems: Vec<Problem>,
}
