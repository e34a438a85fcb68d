//! The account the analysis produces: plain serialisable structs that every
//! output format renders. Byte figures are bytes; times are seconds relative to
//! the process's start (`_s`) unless named otherwise. The JSON form of these
//! structs is documented in docs/json-schema.md.

use super::phases::Phase;
use crate::load::Problem;
use crate::prewarm::catalog::EventClass;
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
    /// Module/library loads this source made (lazy code loading shows here).
    pub module_loads: u32,
    /// Wall time inside this source's allocation and free calls.
    pub alloc_seconds: f64,
    /// Wall time inside this source's module/library load calls.
    pub load_seconds: f64,
}

/// One named part of the memory outside PyTorch's pool.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GapPart {
    pub name: String,
    /// Negative for memory given back (a reservation the driver dropped).
    pub bytes: i64,
    /// True when the bytes were inferred from timing (device growth inside a
    /// known window with no allocation call), not from allocation records.
    pub inferred: bool,
}

/// Device memory not in PyTorch's pool, split by what holds it, at one instant.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GapAccount {
    pub at_s: f64,
    pub device_used: u64,
    pub pool_reserved: u64,
    /// device_used − pool_reserved: everything outside PyTorch's pool.
    pub out_of_pool: u64,
    pub parts: Vec<GapPart>,
    /// out_of_pool − Σ parts (negative when parts over-count).
    pub unexplained: i64,
}

/// Time inside one phase spent on lazy initialisation, by kind (seconds).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StallBreakdown {
    pub wall_s: f64,
    pub compile_s: f64,
    pub autotune_s: f64,
    pub nccl_init_s: f64,
    pub module_load_s: f64,
    pub other_s: f64,
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
    pub module_image_bytes: u64,
    pub kernels_first_launched: u32,
    pub host_pinned_allocated: u64,
    pub failed_requests: u32,
    pub stall: StallBreakdown,
    pub gap_end: Option<GapAccount>,
}

/// A launch that grew (or failed to grow) the local-memory reservation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LocalMemoryEvent {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    pub kernel: String,
    /// CUPTI's local-memory reservation before and after (per context).
    pub before: u64,
    pub after: u64,
    /// What the device actually gained (measured on the device timeline).
    pub device_growth: u64,
    pub registers: u16,
    /// The launch failed: the driver could not grow the reservation.
    pub failed: bool,
    /// The Triton autotune candidate being benchmarked when it happened.
    pub autotune_config: Option<String>,
}

/// How exposed one out-of-pool request or local-memory growth was.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Exposure {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    /// "allocation" or "local memory".
    pub kind: String,
    pub source: String,
    pub what: String,
    pub bytes: u64,
    pub device_used_before: Option<u64>,
    pub pool_reserved: u64,
    pub device_free_before: Option<u64>,
    /// Free device memory left after it (negative: it could not fit).
    pub headroom_after: Option<i64>,
    pub succeeded: bool,
}

/// One NCCL communicator as this rank saw it come up.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CommAccount {
    pub comm: String,
    pub comm_id: Option<String>,
    pub rank: Option<u32>,
    pub nranks: Option<u32>,
    pub phase: Option<Phase>,
    pub step: Option<u32>,
    pub start_s: Option<f64>,
    pub init_seconds: Option<f64>,
    /// Device bytes NCCL allocated during the init window.
    pub bytes: u64,
    /// Device growth during the init window not explained by any allocation
    /// call (NCCL loading its kernels), inferred from the memory timeline.
    pub inferred_bytes: u64,
    pub timings: BTreeMap<String, f64>,
}

/// One Triton autotune (kernel, key).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AutotuneAccount {
    pub kernel: String,
    pub key: String,
    pub phase: Phase,
    pub step: Option<u32>,
    pub start_s: f64,
    pub seconds: f64,
    pub configs: u32,
    pub benchmarked: u32,
    pub chosen: String,
    pub source: String,
    pub local_memory_growth: u64,
    pub out_of_pool_bytes: u64,
    /// Candidates during whose benchmark the local-memory reservation grew.
    pub spilling_configs: Vec<String>,
}

/// One JIT compile.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompileEvent {
    pub kernel: String,
    pub phase: Phase,
    pub step: Option<u32>,
    pub start_s: f64,
    pub seconds: f64,
    pub cache_hit: Option<bool>,
}

/// Something first used after setup: the warmup a user still needs.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LateWarmup {
    pub class: EventClass,
    pub what: String,
    pub phase: Phase,
    pub step: Option<u32>,
    pub seconds: f64,
    pub bytes: u64,
}

/// An out-of-memory failure and what led to it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Forensic {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    /// The failing request ("cuMemAlloc of 128 MiB by torch pool", "local-memory growth for rowwise_mix").
    pub request: String,
    pub source: String,
    pub library: String,
    pub bytes: u64,
    /// CUresult of the failing call (2 = CUDA_ERROR_OUT_OF_MEMORY).
    pub result: u32,
    pub device_free_before: Option<u64>,
    pub device_total: Option<u64>,
    /// The exception the process died with, if the shim saw one.
    pub message: Option<String>,
    /// Lazy-init memory that landed after setup (during setup, for a setup
    /// failure) and before the failure, by class.
    pub preceded_by: Vec<(EventClass, u64)>,
    /// Event classes a prewarm would have moved out of the step, most bytes first.
    pub movable: Vec<EventClass>,
    /// Catalog prewarms that target those classes.
    pub prewarms: Vec<String>,
}

/// An uncaught exception recorded by the shim.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExceptionEvent {
    pub t_s: f64,
    pub phase: Phase,
    pub kind: String,
    pub message: String,
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

/// The step structure of a process.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepInfo {
    pub count: u32,
    pub rule: String,
    pub setup_s: Option<f64>,
    pub step1_s: Option<f64>,
    pub steady_step_s: Option<f64>,
}

/// Pool and device figures torch reported at a step end, beside the doctor's.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepCheck {
    pub step: u32,
    pub torch_reserved: Option<u64>,
    pub doctor_pool_reserved: u64,
    pub torch_device_used: Option<u64>,
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
    pub steps: StepInfo,
    pub memory_source: String,
    pub context_bytes: Option<u64>,
    pub phases: Vec<PhaseAccount>,
    pub local_memory: Vec<LocalMemoryEvent>,
    pub exposures: Vec<Exposure>,
    /// Per phase, the out-of-pool moment with the least headroom.
    pub tightest: Vec<Exposure>,
    /// The smallest device on which every out-of-pool request and local-memory
    /// growth of this process would still have fit.
    pub min_capacity_bytes: Option<u64>,
    pub nccl: Vec<CommAccount>,
    pub autotune: Vec<AutotuneAccount>,
    pub compiles: Vec<CompileEvent>,
    pub late_warmups: Vec<LateWarmup>,
    pub forensics: Vec<Forensic>,
    pub exceptions: Vec<ExceptionEvent>,
    pub health: ProbeHealth,
    pub step_checks: Vec<StepCheck>,
    pub problems: Vec<Problem>,
    /// Down-sampled memory timeline for pictures; carried by the report
    /// model, not by the JSON account (it would dwarf it at scale).
    #[serde(skip)]
    pub timeline: super::timeline::Timeline,
}
