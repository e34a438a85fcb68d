//! The per-process account the analysis produces: plain serialisable structs
//! (phases, memory by source, communicators, autotunes, late warmups, OOM
//! forensics). The report model (src/report/model/), which the renderers
//! read, is built from them. Byte figures are bytes; times are
//! seconds relative to the process's start (`_s`) unless named otherwise. The
//! JSON form is documented in docs/json-schema.md.

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

/// What holds one part of the memory outside PyTorch's pool. Typed from the
/// replay on, so that the verdict's costs and the report key on the kind of a
/// part, never on words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum PartSource {
    /// The CUDA context, with its initial local-memory reservation (see
    /// [`ContextDetail`]).
    Context,
    /// Live allocations of one library (`nccl`, `cublas`, `torch (outside pool)`, ...).
    Library(String),
    /// The local-memory reservation growing at a launch, for what a kernel
    /// or its newly loaded module needs (spills, stacks, local arrays);
    /// never given back.
    LocalMemoryGrowth,
    /// Reservation the driver dropped when a launch failed (negative bytes),
    /// at most the local memory the account held then.
    LocalMemoryDropped,
    /// What else the device gave up across a failed launch, beyond the local
    /// memory the account held (negative, measured): no record says which
    /// part it came out of.
    ReleasedAtFailure,
    /// Device growth inside NCCL communicator init windows with no allocation
    /// call (NCCL loading its kernels); inferred.
    NcclWithoutAllocations,
    /// Device growth at lazy module loading; inferred.
    ModuleCode,
    /// What the device's use changed by across the stretches the probe
    /// traced nothing in (CUPTI detached after the first steps and attached
    /// again), less what the records there show; measured by the probe's
    /// readings at both ends, not split by library (PyTorch's pool may hold
    /// some of it). Signed: the training may have freed more than it took.
    Untraced,
}

/// The figures that go with the CUDA context part (the report words them).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ContextDetail {
    /// The local-memory reservation every context starts with: CUPTI's
    /// total at its first kernel launch, less what the device gained at
    /// that launch when below it (the reservation grew there); 0 when none
    /// was seen (no kernel launched while kernel records were on): not
    /// known, not zero. Already on the device when the context came up (the
    /// H200 experiment in docs/accounting.md): the context's own figure
    /// holds it.
    pub initial_local_memory: u64,
}

/// What failed in an out-of-memory failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FailedRequest {
    /// A driver allocation call (`cuMemAlloc_v2`, ...).
    Allocation { api: String },
    /// A launch that needed the context's local-memory reservation to grow.
    LocalMemoryGrowth { kernel: String },
    /// The probe saw no failing request, only the process's exception.
    NotSeen,
}

/// One part of the memory outside PyTorch's pool.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GapPart {
    pub source: PartSource,
    /// Set on the context part only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextDetail>,
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
    /// The remainder is above [`NOT_UNDERSTOOD_BYTES`]: device memory no
    /// record explains, which the report says it does not understand rather
    /// than put into a part.
    pub not_understood: bool,
}

/// A remainder above this (32 device pages) is more than sampling noise and
/// the probe's own memory: shown as not understood (docs/accounting.md).
pub const NOT_UNDERSTOOD_BYTES: i64 = 64 << 20;

/// A remainder below minus this (eight device pages, the floor of
/// docs/accounting.md) means the parts add up to more than the device showed:
/// one of their figures is off, which the report says rather than show a
/// plain negative number.
pub const OVER_EXPLAINED_BYTES: i64 = 16 << 20;

impl GapAccount {
    /// The parts add up to more than the device showed, beyond the floor.
    pub fn over_explained(&self) -> bool {
        self.unexplained < -OVER_EXPLAINED_BYTES
    }

    /// The account of `out_of_pool` bytes split into `parts`, with its
    /// remainder and whether that remainder is understood.
    pub fn new(at_s: f64, device_used: u64, pool_reserved: u64, parts: Vec<GapPart>) -> GapAccount {
        let out_of_pool = device_used.saturating_sub(pool_reserved);
        let named: i64 = parts.iter().map(|p| p.bytes).sum();
        let unexplained = out_of_pool as i64 - named;
        GapAccount {
            at_s,
            device_used,
            pool_reserved,
            out_of_pool,
            parts,
            unexplained,
            not_understood: unexplained > NOT_UNDERSTOOD_BYTES,
        }
    }
}

/// Time inside one phase spent on lazy initialisation, by kind (seconds).
/// Each instant counts once, for the first kind active then in this order:
/// compile, autotune, NCCL init, cuBLAS init, module loading (so cuBLAS's own
/// module loads are cuBLAS init, not module loading).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StallBreakdown {
    pub wall_s: f64,
    pub compile_s: f64,
    pub autotune_s: f64,
    pub nccl_init_s: f64,
    /// cuBLAS/cuBLASLt handle and workspace creation and their module loads:
    /// bursts of driver calls made from cuBLAS (docs/accounting.md).
    pub cublas_init_s: f64,
    pub module_load_s: f64,
    pub other_s: f64,
}

/// What one event class cost in one phase of one process: bytes that landed
/// (allocations, local-memory growth, inferred growth), seconds of the phase's
/// wall time (from the stall breakdown: never counted for two classes) and
/// the number of events.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct ClassCost {
    pub bytes: u64,
    pub seconds: f64,
    pub events: u32,
}

/// What one event class cost in steps 2..N (a [`ClassCost`] of that phase)
/// and the steps its events landed in.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LaterCost {
    pub bytes: u64,
    pub seconds: f64,
    pub events: u32,
    /// Steps (2..N) where its events landed, ascending.
    pub steps: Vec<u32>,
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
    /// Of the `nccl` source's allocations in this phase, those outside every
    /// communicator's init: counted with NCCL's out-of-pool figure and the
    /// NCCL class, in no communicator's bytes (on the H200 recordings NCCL's
    /// 2 MiB allocation before its first communicator's init).
    pub nccl_outside_comms: u64,
    pub local_memory_growth: u64,
    /// Device growth at lazy module loading in this phase, which no allocation
    /// call shows (inferred from the device timeline; docs/accounting.md).
    pub module_code_bytes: u64,
    pub module_loads: u32,
    pub module_image_bytes: u64,
    pub kernels_first_launched: u32,
    pub host_pinned_allocated: u64,
    pub failed_requests: u32,
    pub stall: StallBreakdown,
    /// The probe's own time in this phase (its callbacks, activity buffers
    /// and writer thread, summed over threads): what the profiler itself may
    /// have added to the stalls above. 0 without self-cost records.
    pub probe_s: f64,
    /// Of `probe_s`, the callbacks: time spent inside the training's own
    /// driver calls, so the training waited for it (the rest ran on the
    /// probe's and CUPTI's threads beside it).
    pub probe_callbacks_s: f64,
    /// Of `probe_callbacks_s`, the first-launch watch's, the module loads'
    /// and the free-memory readings' (absent for probes before 0.2.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_callbacks_split: Option<crate::analysis::own_time::CallbackSplit>,
    /// The shim's own time in this phase: its hooks on the training's
    /// threads (inside the training's time, like the probe's callbacks).
    /// None for a shim that did not time itself or a phase past its last line.
    pub shim_s: Option<f64>,
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
    /// Local memory per thread, as CUPTI's record gives it: 0 in every
    /// record on the drivers recorded here, spilling kernels included, so 0
    /// is not "no spills".
    pub per_thread: u32,
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
    /// In use on the device just before (every process).
    pub device_used_before: Option<u64>,
    /// This process's own device memory just before (what a device of its
    /// own would need to hold before this request).
    pub process_used_before: Option<u64>,
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
    /// Device bytes NCCL allocated for it: its allocation calls from its
    /// "Init START" line to its span's end, each counted for one
    /// communicator only (framework_joins::comm_alloc_windows).
    pub bytes: u64,
    /// Device growth during the init window not explained by any allocation
    /// call (NCCL loading its kernels), inferred from the memory timeline.
    pub inferred_bytes: u64,
    pub timings: BTreeMap<String, f64>,
    /// The process group it serves (mesh dimension or members), when known
    /// (src/analysis/comm_groups.rs).
    pub group: Option<CommGroup>,
}

/// Where a communicator's group came from (src/analysis/comm_groups.rs names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NamedBy {
    /// torch's process group, matched on the communicator pointer.
    Torch,
    /// Only the members: the ranks whose NCCL logs share its `commId`.
    CommId,
}

/// The process group a communicator serves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CommGroup {
    /// torch's group description (`mesh_<dim>` for a DeviceMesh dimension, or
    /// what `new_group(group_desc=...)` was given); None when torch has none.
    pub desc: Option<String>,
    /// torch's group name (a number in creation order), when known.
    pub name: Option<String>,
    /// The group's global ranks (complete from torch; from `commId`, only the
    /// ranks whose capture is in the run folder).
    pub ranks: Vec<u32>,
    /// The group's size as NCCL reported it.
    pub nranks: Option<u32>,
    pub named_by: NamedBy,
}

impl CommGroup {
    /// What identifies the group across attempts and variants: its
    /// description (or, without one, nothing) and its members. torch's group
    /// name is left out: it numbers groups in creation order, which a prewarm
    /// that creates a group of its own shifts.
    pub fn key(&self) -> (Option<&str>, &[u32]) {
        (self.desc.as_deref(), &self.ranks)
    }
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
    /// Still compiling when the process ended (killed, or died): `seconds`
    /// runs to the process's end, and whether it hit the cache is unknown.
    pub unfinished: bool,
}

/// Something first used after setup: the warmup a user still needs, grouped
/// by what to warm (a Triton kernel, a communicator, a library, the kernels
/// lazy loading brought in). Costliest first in `ProcessAccount::late_warmups`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LateWarmup {
    pub class: EventClass,
    /// What to warm: a kernel name, a communicator id, a library, or empty
    /// for lazy module loading as a whole.
    pub subject: String,
    /// The Triton autotune keys (shapes) first tuned after setup, in full.
    pub keys: Vec<String>,
    /// Events folded into this item: autotunes, compiles, growths, kernels
    /// first launched, allocation calls.
    pub events: u32,
    /// Of `events`, the JIT compiles (a Triton kernel's item holds both).
    pub compiles: u32,
    pub seconds: f64,
    pub bytes: u64,
    /// Phase and step where it first appeared.
    pub phase: Phase,
    pub step: Option<u32>,
    /// Every step it appeared in (a new shape at step N is the same problem).
    pub steps: Vec<u32>,
    /// Below the list's threshold (under 50 ms and under 1 MiB): reports fold
    /// it into a count.
    pub minor: bool,
}

/// The device's memory budget at an out-of-memory failure (bytes).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OomBudget {
    pub device_total: u64,
    /// In use on the device just before the failing request (every process).
    pub device_used: u64,
    /// The failing request.
    pub request: u64,
    /// request − free memory: how much was missing (positive at an OOM).
    pub shortfall: i64,
    /// PyTorch's pool at the failure, and its highest in the failing phase.
    pub pool_reserved: u64,
    pub pool_peak: u64,
    /// Of the pool, bytes reserved but not allocated, when torch said (its
    /// OOM message, or the shim as the process died): cache the pool could
    /// have given back to an out-of-pool request made earlier.
    pub pool_cache: Option<u64>,
}

/// What one candidate prewarm would leave at the failure point, from this
/// run's account, if the step needs the same memory with it (docs/accounting.md).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PrewarmProjection {
    pub prewarm: String,
    pub targets: Vec<EventClass>,
    /// The failing request is of a class it targets: it would be made in setup.
    pub moves_request: bool,
    /// Lazy-init bytes of its classes that landed before the failure (the
    /// request not included): what it would make in setup instead.
    pub moved_bytes: u64,
    /// Lazy-init bytes it would make in setup that stay held (local memory,
    /// communicator buffers, cuBLAS workspaces, module code): still there at
    /// the failure point, request included when it moves it.
    pub persistent_bytes: u64,
    /// Lazy-init bytes it would make in setup and give back before step 1
    /// (autotune scratch) that were held at the failure.
    pub transient_bytes: u64,
    /// Device demand at the failure point with the prewarm.
    pub projected_demand: u64,
    /// device_total − projected_demand: ≥ 0 fits with that much to spare,
    /// < 0 still short by that much (a lower bound while the step's rest is unknown).
    pub margin: i64,
    /// The same, if the pool gave its unused cache back (known cache, moved
    /// out-of-pool request only).
    pub margin_with_pool_cache: Option<i64>,
}

/// A fix that removes the demand instead of moving it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Remedy {
    /// Prune `config` from `kernel`'s autotune configs: the candidate whose
    /// spills grew the local-memory reservation is never launched, so the
    /// growth (never given back) does not happen; the autotuner chooses among
    /// the rest.
    PruneAutotuneConfig {
        kernel: String,
        config: String,
        /// CUPTI's local-memory reservation increase for the candidate's launch.
        local_bytes: u64,
        /// Local memory per thread the candidate needs, and its registers.
        per_thread: u32,
        registers: u16,
        /// device_total − demand at the failure point without that growth.
        margin: i64,
    },
}

/// A device allocation call that failed with a result other than
/// CUDA_ERROR_OUT_OF_MEMORY (2).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FailedCall {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    pub api: String,
    pub source: String,
    pub bytes: u64,
    /// The CUresult the driver returned.
    pub result: u32,
    /// CUDA_ERROR_INVALID_CONTEXT on a thread where no CUDA context was
    /// current: the calling library had not bound one yet (seen under
    /// PyTorch's cudaMallocAsync backend on the H200, which then went on).
    pub no_current_context: bool,
}

/// An out-of-memory failure and what led to it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Forensic {
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    /// The failing request, as data (the report words it with `bytes` and
    /// `source`).
    pub request: FailedRequest,
    /// The process finished a step after this failure: the allocator retried
    /// (after freeing its cache) and training went on. A near miss, not a crash.
    pub recovered: bool,
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
    /// Of the NCCL class's bytes in `preceded_by`, NCCL's allocations outside
    /// every communicator's init (in the class, in no communicator's bytes).
    pub preceded_nccl_outside_comms: u64,
    /// Event classes a prewarm would have moved out of the step, most bytes first.
    pub movable: Vec<EventClass>,
    /// Catalog prewarms that target those classes.
    pub prewarms: Vec<String>,
    /// The memory budget at the failure (when the probe saw the request).
    pub budget: Option<OomBudget>,
    /// Per candidate prewarm (any catalog prewarm targeting the request's
    /// class or a class that preceded it): what it would leave.
    pub projections: Vec<PrewarmProjection>,
    /// Fixes that remove the demand instead of moving it.
    pub remedies: Vec<Remedy>,
}

/// An uncaught exception recorded by the shim: what a process (or, with
/// `thread`, one of its threads) died with, which every report shows
/// whatever phase it was in.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExceptionEvent {
    pub t_s: f64,
    pub phase: Phase,
    /// The step in progress (the one it died in), None in setup or after
    /// the last step.
    pub step: Option<u32>,
    /// The thread it was raised in, when not the main thread.
    pub thread: Option<String>,
    pub kind: String,
    pub message: String,
    /// Where it was raised: the traceback's last frames as the shim wrote
    /// them ("file:line function", most recent call last).
    #[serde(rename = "where")]
    pub where_: Vec<String>,
    /// torch's pool as the process died (reserved, allocated), when the shim
    /// could read it.
    pub pool_reserved: Option<u64>,
    pub pool_allocated: Option<u64>,
}

/// Whether the probe captured in this process, and why not.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CaptureStatus {
    pub active: bool,
    pub detail: String,
    pub cupti: Option<String>,
    /// Every notice of the probe but the one that stopped it.
    pub notices: Vec<String>,
    /// The notices among them that say capture saw less than it should
    /// (an event dropped, kernel records not switched): every format shows them.
    pub warnings: Vec<ProbeNote>,
    /// The informative ones a reader needs beside the figures (stream-ordered
    /// tracing stopped, entry points not traced, a pool shared): every format
    /// shows them too. The one that says capture is active is `cupti`.
    pub notes: Vec<ProbeNote>,
}

/// A notice of the probe placed in the run, since its words ("until now")
/// mean nothing without their moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProbeNote {
    /// Seconds from the process's start.
    pub t_s: f64,
    pub phase: Phase,
    pub step: Option<u32>,
    pub text: String,
}

/// Probe self-cost and losses, as the probe counted them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProbeHealth {
    pub callbacks: u64,
    pub callback_seconds: f64,
    pub activity_records: u64,
    pub activity_seconds: f64,
    /// The probe's writer thread (reading pools, writing the file), beside
    /// the training; 0 from probes that did not measure it.
    pub writer_seconds: f64,
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
    /// What a step costs once warm: the median duration of the finished
    /// steps 2..N that held no lazy initialisation (steady.rs,
    /// docs/step-rule.md). None without a finished step 2.
    pub steady_step_s: Option<f64>,
    /// How many steps `steady_step_s` is the median of.
    pub steady_steps: u32,
    /// Which steps it is over (None without a finished step 2).
    pub steady_basis: Option<SteadyBasis>,
    /// The shim's own time in a steady step: its median over the same steps
    /// as `steady_step_s`, so it reads against that step (an average over
    /// steps 2..N holds its first steps' memory snapshots). None when the
    /// shim's lines do not state its time (an older shim, no shim).
    pub steady_shim_s: Option<f64>,
    /// How many of the steps `steady_shim_s` is over were among the shim's
    /// first steps, at whose ends it reads torch's memory statistics and the
    /// process groups (a short run): a later step pays its end alone, so
    /// when they are most of them the median overstates what a long run's
    /// warm step pays. 0 without `steady_shim_s`.
    pub steady_shim_first_steps: u32,
    /// The finished steps 2..N that held lazy initialisation: left out of
    /// `steady_step_s` unless every one did.
    pub lazy_steps: Vec<u32>,
    /// The step the process died in (its uncaught exception came after that
    /// step began, and it never ended): the phases run to the process's end
    /// in it (docs/step-rule.md). None when it did not die in a step.
    pub died_in_step: Option<u32>,
}

/// Which of the finished steps 2..N the steady step is the median of.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SteadyBasis {
    /// None of them held lazy initialisation: all of them.
    EveryStep,
    /// Those free of it (`StepInfo::lazy_steps` left out).
    FreeSteps,
    /// Every one held it: all of them, for want of a step free of it.
    NoStepFree,
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
    /// Allocation calls that failed for another reason than lack of memory
    /// (CUresult other than 2): listed, never called out of memory.
    pub failed_calls: Vec<FailedCall>,
    pub exceptions: Vec<ExceptionEvent>,
    pub health: ProbeHealth,
    /// The shim's hooks by their own time over the run, costliest first.
    pub shim_hooks: Vec<super::own_time::ShimHookCost>,
    /// The shim's line writes over the run (None from a shim that did not
    /// time them).
    pub shim_writes: Option<super::own_time::ShimWrites>,
    pub step_checks: Vec<StepCheck>,
    /// Items of an injected prescription that failed in this process (a
    /// replayed autotune key that tuned another key than the training's, a
    /// kernel not found, a group not warmed): 0 without a prescription.
    pub prescription_failures: u32,
    pub problems: Vec<Problem>,
    /// Down-sampled memory timeline for pictures; carried by the report
    /// model, not by the JSON account (it would dwarf it at scale).
    #[serde(skip)]
    pub timeline: super::timeline::Timeline,
}
