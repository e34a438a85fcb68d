//! The records a probe or sampler can write. Each record is small and flat so that
//! the probe can encode it without allocation-heavy machinery.

/// A driver API entry point the probe tracks. Stored as a `u16` so that new entry
/// points can be added without changing the format version; unknown codes decode
/// as [`MemApi::Unknown`] and are still counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemApi {
    MemAlloc,
    MemAllocPitch,
    MemAllocManaged,
    MemAllocAsync,
    MemAllocFromPoolAsync,
    MemCreate,
    MemRelease,
    MemMap,
    MemUnmap,
    MemFree,
    MemFreeAsync,
    MemHostAlloc,
    MemAllocHost,
    MemHostRegister,
    MemFreeHost,
    MemHostUnregister,
    ModuleLoad,
    ModuleLoadData,
    ModuleLoadDataEx,
    ModuleLoadFatBinary,
    LibraryLoadData,
    LibraryLoadFromFile,
    ModuleUnload,
    LibraryUnload,
    CtxCreate,
    PrimaryCtxRetain,
    Unknown(u16),
}

/// What a tracked call does to memory, which is what the analysis needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemEffect {
    /// Takes device memory (`address` is the pointer or, for `cuMemCreate`, the handle).
    DeviceAlloc,
    /// Gives device memory back (matched by `address`).
    DeviceFree,
    /// Takes pinned host memory.
    HostAlloc,
    /// Gives pinned host memory back.
    HostFree,
    /// Maps or unmaps an existing allocation; no physical memory changes.
    Mapping,
    /// Loads or unloads device code.
    Module,
    /// Creates or retains a CUDA context.
    Context,
    /// An entry point this reader does not know.
    Unknown,
}

const API_TABLE: &[(MemApi, u16, &str, MemEffect)] = &[
    (MemApi::MemAlloc, 1, "cuMemAlloc", MemEffect::DeviceAlloc),
    (
        MemApi::MemAllocPitch,
        2,
        "cuMemAllocPitch",
        MemEffect::DeviceAlloc,
    ),
    (
        MemApi::MemAllocManaged,
        3,
        "cuMemAllocManaged",
        MemEffect::DeviceAlloc,
    ),
    (
        MemApi::MemAllocAsync,
        4,
        "cuMemAllocAsync",
        MemEffect::DeviceAlloc,
    ),
    (
        MemApi::MemAllocFromPoolAsync,
        5,
        "cuMemAllocFromPoolAsync",
        MemEffect::DeviceAlloc,
    ),
    (MemApi::MemCreate, 6, "cuMemCreate", MemEffect::DeviceAlloc),
    (MemApi::MemRelease, 7, "cuMemRelease", MemEffect::DeviceFree),
    (MemApi::MemMap, 8, "cuMemMap", MemEffect::Mapping),
    (MemApi::MemUnmap, 9, "cuMemUnmap", MemEffect::Mapping),
    (MemApi::MemFree, 10, "cuMemFree", MemEffect::DeviceFree),
    (
        MemApi::MemFreeAsync,
        11,
        "cuMemFreeAsync",
        MemEffect::DeviceFree,
    ),
    (
        MemApi::MemHostAlloc,
        12,
        "cuMemHostAlloc",
        MemEffect::HostAlloc,
    ),
    (
        MemApi::MemAllocHost,
        13,
        "cuMemAllocHost",
        MemEffect::HostAlloc,
    ),
    (
        MemApi::MemHostRegister,
        14,
        "cuMemHostRegister",
        MemEffect::HostAlloc,
    ),
    (
        MemApi::MemFreeHost,
        15,
        "cuMemFreeHost",
        MemEffect::HostFree,
    ),
    (
        MemApi::MemHostUnregister,
        16,
        "cuMemHostUnregister",
        MemEffect::HostFree,
    ),
    (MemApi::ModuleLoad, 17, "cuModuleLoad", MemEffect::Module),
    (
        MemApi::ModuleLoadData,
        18,
        "cuModuleLoadData",
        MemEffect::Module,
    ),
    (
        MemApi::ModuleLoadDataEx,
        19,
        "cuModuleLoadDataEx",
        MemEffect::Module,
    ),
    (
        MemApi::ModuleLoadFatBinary,
        20,
        "cuModuleLoadFatBinary",
        MemEffect::Module,
    ),
    (
        MemApi::LibraryLoadData,
        21,
        "cuLibraryLoadData",
        MemEffect::Module,
    ),
    (
        MemApi::LibraryLoadFromFile,
        22,
        "cuLibraryLoadFromFile",
        MemEffect::Module,
    ),
    (
        MemApi::ModuleUnload,
        23,
        "cuModuleUnload",
        MemEffect::Module,
    ),
    (
        MemApi::LibraryUnload,
        24,
        "cuLibraryUnload",
        MemEffect::Module,
    ),
    (MemApi::CtxCreate, 25, "cuCtxCreate", MemEffect::Context),
    (
        MemApi::PrimaryCtxRetain,
        26,
        "cuDevicePrimaryCtxRetain",
        MemEffect::Context,
    ),
];

impl MemApi {
    /// Every known entry point, for the probe's subscription table and for tests.
    pub fn all() -> impl Iterator<Item = MemApi> {
        API_TABLE.iter().map(|row| row.0)
    }

    /// The stable on-disk code.
    pub fn code(self) -> u16 {
        match self {
            MemApi::Unknown(code) => code,
            known => API_TABLE
                .iter()
                .find(|row| row.0 == known)
                .map_or(0, |row| row.1),
        }
    }

    /// Decodes an on-disk code; codes from newer probes become `Unknown`.
    pub fn from_code(code: u16) -> MemApi {
        API_TABLE
            .iter()
            .find(|row| row.1 == code)
            .map_or(MemApi::Unknown(code), |row| row.0)
    }

    /// The driver API family name, as users know it from CUDA docs and traces.
    pub fn name(self) -> &'static str {
        match self {
            MemApi::Unknown(_) => "unknown-api",
            known => API_TABLE
                .iter()
                .find(|row| row.0 == known)
                .map_or("unknown-api", |row| row.2),
        }
    }

    /// What the call does to memory.
    pub fn effect(self) -> MemEffect {
        match self {
            MemApi::Unknown(_) => MemEffect::Unknown,
            known => API_TABLE
                .iter()
                .find(|row| row.0 == known)
                .map_or(MemEffect::Unknown, |row| row.3),
        }
    }
}

/// Marks "not measured" in the free/total fields of a [`MemCall`].
pub const UNKNOWN_BYTES: u64 = u64::MAX;

/// One tracked driver call, with the device's free memory around it so that the
/// exposure (headroom at that instant) and the call's real device cost are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemCall {
    pub t_start: u64,
    pub t_end: u64,
    pub api: MemApi,
    pub thread: u32,
    /// CUDA device ordinal of the current context, or -1.
    pub device: i32,
    /// Requested bytes (0 for frees, mapping and module calls).
    pub bytes: u64,
    /// Device pointer, host pointer or allocation handle the call produced or consumed.
    pub address: u64,
    /// CUresult returned by the call (0 = success, 2 = out of memory).
    pub result: u32,
    /// Id of the calling library (see [`LibraryName`]); 0 when the caller was not found.
    pub library: u32,
    pub free_before: u64,
    pub free_after: u64,
    pub total: u64,
}

/// Interns a calling library path; written once, before the first record that uses the id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryName {
    pub id: u32,
    pub path: String,
}

/// A CUDA context came up; the device free memory right after says what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextCreated {
    pub t: u64,
    pub device: i32,
    pub context_id: u32,
    pub pci_bus_id: String,
    pub free: u64,
    pub total: u64,
}

/// Module code load details reported by CUPTI's resource callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleLoad {
    pub t: u64,
    pub context_id: u32,
    pub module_id: u32,
    pub cubin_bytes: u64,
}

/// A kernel launch that grew the context's local-memory reservation: the driver
/// allocates this without any API call, so only the kernel record reveals it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalMemoryGrowth {
    pub t_start: u64,
    pub t_end: u64,
    pub device: u32,
    pub context_id: u32,
    pub correlation_id: u32,
    pub kernel: String,
    pub total_before: u64,
    pub total_after: u64,
    pub per_thread: u32,
    pub registers: u16,
    pub grid: [i32; 3],
    pub block: [i32; 3],
}

/// The first launch of a kernel name in this process: lazy module loading happens
/// here, and a first launch after setup is a warmup the user still needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFirstLaunch {
    pub t_start: u64,
    pub t_end: u64,
    pub device: u32,
    pub context_id: u32,
    pub kernel: String,
    pub local_total: u64,
}

/// An NVTX range, used for explicit step markers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub t_start: u64,
    pub t_end: u64,
    pub name: String,
}

/// How serious a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NoticeLevel {
    Info,
    Warning,
    /// Capture stopped; the run continued un-instrumented from here.
    Disabled,
}

/// A sentence from the probe about its own state (CUPTI path, why it stopped, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub t: u64,
    pub level: NoticeLevel,
    pub text: String,
}

/// Cumulative counts of what the probe could not record, so nothing is lost silently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsDropped {
    pub t: u64,
    /// Probe events dropped because the buffer was full or the disk failed.
    pub probe_events: u64,
    /// Activity records CUPTI reported as dropped.
    pub cupti_records: u64,
}

/// Cumulative self-cost of the probe, written periodically and at exit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeCost {
    pub t: u64,
    pub callbacks: u64,
    pub callback_ns: u64,
    pub activity_records: u64,
    pub activity_ns: u64,
    /// Bytes of CUPTI activity buffers currently handed out (host memory).
    pub activity_buffer_bytes: u64,
    pub bytes_written: u64,
    /// Time the probe's writer thread spent on its periodic work (reading
    /// pools, writing the file; the activity buffers it drains are in
    /// `activity_ns`, not here): with `callback_ns` and `activity_ns`, all of
    /// the probe's own time. 0 in older files, whose probes did not measure
    /// it; files before prewarm-probe 0.2.1 also counted here the buffers
    /// drained by the writer's flush.
    pub flush_ns: u64,
    /// Of `callback_ns`, the launch callbacks' (the first-launch watch:
    /// kernel records switched around each function's first launch) and
    /// the module and library load and unload calls' (lazy loading's own
    /// callbacks). 0 in files before probe 0.2.2.
    pub launch_ns: u64,
    pub module_ns: u64,
    /// Time inside the probe's `cuMemGetInfo` readings, on any thread
    /// (nearly all inside callbacks: two around each traced allocation,
    /// free and module load). 0 in files before probe 0.2.2.
    pub reading_ns: u64,
    /// Time inside the probe's caller walks (which library made a traced
    /// call: the stack walk and, for an address seen for the first time,
    /// its loaded-object lookup), inside callbacks. 0 in files before probe
    /// 0.2.3.
    pub walk_ns: u64,
    /// The longest single callback since the previous cost record, and
    /// which: CUPTI's driver API callback id, a resource callback's id
    /// plus [`SLOWEST_RESOURCE`], or the probe's own work counted as
    /// callback time ([`SLOWEST_DETACH_TEARDOWN`], [`SLOWEST_WATCH_PAUSE`],
    /// from probe 0.2.4); both 0 when none ran (and in files before probe
    /// 0.2.3). Pins a rare slow callback that the cumulative counters
    /// spread over a 10 ms tick.
    pub slowest_callback_ns: u64,
    pub slowest_callback_id: u64,
}

/// Added to a resource-domain callback id in
/// [`ProbeCost::slowest_callback_id`], telling it from a driver API id.
pub const SLOWEST_RESOURCE: u64 = 0x8000;

/// [`ProbeCost::slowest_callback_id`] of the detach's teardown
/// (`cuptiFinalize` on the training's thread, inside the driver callback
/// that detached): counted as callback time, so named where it is longest.
pub const SLOWEST_DETACH_TEARDOWN: u64 = 0xC001;

/// [`ProbeCost::slowest_callback_id`] of a pause or resume of the
/// first-launch watch around an autotune benchmark (the shim asks for it on
/// the training's thread): counted as callback time.
pub const SLOWEST_WATCH_PAUSE: u64 = 0xC002;

/// Stream-ordered allocations (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`,
/// `cuMemFreeAsync`: PyTorch's `backend:cudaMallocAsync`, RAPIDS) from one
/// memory pool, summarised. Such calls come once per tensor, so the probe
/// counts them instead of recording each one, and reads the pool's own size
/// from the driver; the pool is attributed as a whole to its owner. Written
/// periodically while the pool is in use (see docs/event-format.md for when).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolUse {
    pub t: u64,
    /// The probe's number for this pool, stable within the file.
    pub pool_id: u32,
    /// CUDA device ordinal of the pool's context, or -1.
    pub device: i32,
    /// The `CUmemoryPool` handle; 0 when the driver did not name it.
    pub handle: u64,
    /// The pool's owner: the library that made its first allocation (see
    /// [`LibraryName`]); 0 when not found.
    pub library: u32,
    /// Successful allocations from the pool, cumulative.
    pub allocs: u64,
    /// Bytes requested by those allocations, cumulative.
    pub alloc_bytes: u64,
    /// `cuMemFreeAsync` calls, cumulative. The free call does not name its
    /// pool: all of a context's stream-ordered frees count on its device pool.
    pub frees: u64,
    /// Failed allocations from the pool, cumulative (each is also a [`MemCall`]).
    pub failed: u64,
    /// Device memory the pool holds (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`)
    /// at `t`, or [`UNKNOWN_BYTES`] when the driver could not tell.
    pub reserved: u64,
    /// The pool's high-water mark (`RESERVED_MEM_HIGH`), or [`UNKNOWN_BYTES`].
    pub reserved_high: u64,
    /// Bytes of the pool in use by allocations (`USED_MEM_CURRENT`), or [`UNKNOWN_BYTES`].
    pub used: u64,
}

/// Kernel activity records are switched on for setup and the first steps only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityState {
    pub t: u64,
    pub kernel_records: bool,
}

/// A stretch in which the probe traced no driver call: CUPTI detached
/// after the first steps and attached again (crates/probe/src/detach.rs).
/// The device's free memory read at both ends is all that is known of what
/// the training allocated or freed in it, so the analysis gives that change
/// (less what the records do show) its own part of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntracedSpan {
    /// When tracing stopped (just before `cuptiFinalize`).
    pub t_start: u64,
    /// When the free memory after the attach was read.
    pub t_end: u64,
    /// CUDA device ordinal of the context the readings are of, or -1.
    pub device: i32,
    /// `cuMemGetInfo` at `t_start` and `t_end`, or [`UNKNOWN_BYTES`].
    pub free_before: u64,
    pub free_after: u64,
    pub total: u64,
}

/// Device-level memory as NVML sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlDeviceSample {
    pub t: u64,
    pub gpu: u32,
    pub used: u64,
    pub total: u64,
}

/// One process's device memory as NVML sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlProcessSample {
    pub t: u64,
    pub gpu: u32,
    pub pid: u32,
    pub used: u64,
}

/// Everything an event file can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Library(LibraryName),
    Mem(MemCall),
    Context(ContextCreated),
    Module(ModuleLoad),
    LocalMemory(LocalMemoryGrowth),
    KernelFirst(KernelFirstLaunch),
    Marker(Marker),
    Notice(Notice),
    Dropped(RecordsDropped),
    Cost(ProbeCost),
    Activity(ActivityState),
    Pool(PoolUse),
    Untraced(UntracedSpan),
    NvmlDevice(NvmlDeviceSample),
    NvmlProcess(NvmlProcessSample),
    /// A record kind from a newer writer; skipped but counted.
    Unknown {
        kind: u8,
    },
}

impl Record {
    /// The timestamp the record is ordered by (CLOCK_MONOTONIC ns); `None` for
    /// records that carry no time.
    pub fn time(&self) -> Option<u64> {
        match self {
            Record::Library(_) | Record::Unknown { .. } => None,
            Record::Mem(r) => Some(r.t_start),
            Record::Context(r) => Some(r.t),
            Record::Module(r) => Some(r.t),
            Record::LocalMemory(r) => Some(r.t_start),
            Record::KernelFirst(r) => Some(r.t_start),
            Record::Marker(r) => Some(r.t_start),
            Record::Notice(r) => Some(r.t),
            Record::Dropped(r) => Some(r.t),
            Record::Cost(r) => Some(r.t),
            Record::Activity(r) => Some(r.t),
            Record::Pool(r) => Some(r.t),
            Record::Untraced(r) => Some(r.t_start),
            Record::NvmlDevice(r) => Some(r.t),
            Record::NvmlProcess(r) => Some(r.t),
        }
    }
}
