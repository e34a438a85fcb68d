//! The probe's process-wide state and everything CUPTI calls back into.
//! Nothing here can panic by design (see guard.rs); every `extern "C"` entry
//! still catches panics, so a bug drops one event (counted, and the first one
//! explained in a notice) and never reaches the training process.

use crate::activity::{self, BUFFER_ALIGN, BUFFER_BYTES, KernelTracker};
use crate::caller::CallerCache;
use crate::clock::{coarse_now_ns, now_ns, thread_id};
use crate::cupti::{CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_SUCCESS, Cupti, Driver};
use crate::driver_api::{self, Handling};
use crate::guard::{self, lock};
use crate::pools::{PoolKey, Pools};
use crate::signals::ensure_alt_stack;
use crate::sink::Sink;
use cudarc::cupti::sys::{CUpti_CallbackData, CUpti_ModuleResourceData, CUpti_ResourceData};
use prewarm_events::*;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

const DOMAIN_DRIVER_API: u32 = 1;
const DOMAIN_RESOURCE: u32 = 3;
const SITE_ENTER: u32 = 0;
/// CUPTI resource callback: a context came up (its memory is measured then).
pub const CBID_CONTEXT_CREATED: u32 = 1;
/// CUPTI resource callback: a module was loaded (image size).
pub const CBID_MODULE_LOADED: u32 = 6;

/// Everything the callbacks share.
pub struct Probe {
    pub cupti: Cupti,
    pub driver: Option<Driver>,
    pub sink: Sink,
    callers: Mutex<CallerCache>,
    /// Stream-ordered allocations, counted per pool.
    pub pools: Pools,
    /// Held by the writer thread while it calls into CUDA/CUPTI.
    pub writer_calls: Mutex<()>,
    kernels: Mutex<KernelTracker>,
    /// Added to CUPTI activity timestamps to get CLOCK_MONOTONIC.
    pub activity_offset: i64,
    pub use_local_v2: bool,
    pub kernel_records: AtomicBool,
    pub disabled: AtomicBool,
    /// Driver calls between their enter and exit callbacks (see [`InFlight`]).
    in_flight: Mutex<Vec<InFlight>>,
    internal_errors: AtomicU64,
    callbacks: AtomicU64,
    callback_ns: AtomicU64,
    activity_records: AtomicU64,
    activity_ns: AtomicU64,
    buffers_out: AtomicU64,
    cupti_dropped: AtomicU64,
}

static PROBE: OnceLock<Probe> = OnceLock::new();

/// Set in a child created by fork(): it inherits the probe's memory (and the
/// parent's open event file) but not its CUDA state, so it records nothing.
static FORKED: AtomicBool = AtomicBool::new(false);

extern "C" fn in_forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// The live probe, if capture initialised (never in a forked child).
pub fn probe() -> Option<&'static Probe> {
    PROBE
        .get()
        .filter(|p| !p.disabled.load(Ordering::Relaxed) && !FORKED.load(Ordering::Relaxed))
}

/// A tracked driver call between its enter and exit callbacks. Kept in one
/// process-wide table keyed by CUPTI's correlation id (unique per call), not
/// in a thread-local: callbacks also arrive while threads and the process are
/// being torn down, when thread-locals may already be gone.
#[derive(Clone, Copy)]
struct InFlight {
    correlation: u32,
    t_start: u64,
    free_before: u64,
}

/// Most calls tracked between enter and exit at once (the oldest is
/// forgotten beyond this; its exit then carries t_start = t_end).
const MAX_IN_FLIGHT: usize = 4096;

/// Installs the probe state; returns it.
pub fn install(
    cupti: Cupti,
    driver: Option<Driver>,
    sink: Sink,
    own_path: &str,
    activity_offset: i64,
) -> &'static Probe {
    let use_local_v2 = cupti.version >= 130000;
    PROBE.get_or_init(|| Probe {
        cupti,
        driver,
        sink,
        callers: Mutex::new(CallerCache::new(own_path)),
        pools: Pools::new(),
        writer_calls: Mutex::new(()),
        kernels: Mutex::new(KernelTracker::default()),
        activity_offset,
        use_local_v2,
        kernel_records: AtomicBool::new(false),
        disabled: AtomicBool::new(false),
        callbacks: AtomicU64::new(0),
        callback_ns: AtomicU64::new(0),
        activity_records: AtomicU64::new(0),
        activity_ns: AtomicU64::new(0),
        buffers_out: AtomicU64::new(0),
        cupti_dropped: AtomicU64::new(0),
        in_flight: Mutex::new(Vec::with_capacity(64)),
        internal_errors: AtomicU64::new(0),
    })
}

/// Stops a forked child from recording (registered once, at start).
pub fn watch_forks() {
    // SAFETY: registers a plain extern "C" function for the child side of fork.
    unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
}

impl Probe {
    /// Records a notice.
    pub fn notice(&self, level: NoticeLevel, text: impl Into<String>) {
        self.sink.push(&Record::Notice(Notice {
            t: now_ns(),
            level,
            text: text.into(),
        }));
    }

    /// Stops capture after an internal failure; the process carries on.
    pub fn disable(&self, why: &str) {
        self.notice(NoticeLevel::Disabled, format!("capture stopped: {why}"));
        self.disabled.store(true, Ordering::Relaxed);
        self.sink.flush();
    }

    /// A panic was caught in `place`: that event is lost (counted as dropped),
    /// the first such failure is explained in a notice, capture goes on. Only a
    /// probe that keeps failing (a real bug on every call) stops itself.
    pub fn internal_error(&self, place: &str) {
        self.sink.count_dropped(1);
        let n = self.internal_errors.fetch_add(1, Ordering::Relaxed) + 1;
        if n == 1 {
            let why = guard::first_panic().unwrap_or_else(|| "unknown panic".into());
            self.notice(
                NoticeLevel::Warning,
                format!("internal error in the {place} (the event was dropped; capture continues): {why}"),
            );
        }
        if n == MAX_INTERNAL_ERRORS {
            self.disable(&format!(
                "{n} internal errors in the probe (the first: {})",
                guard::first_panic().unwrap_or_default()
            ));
        }
    }

    /// Waits (at most ~100 ms) until the writer thread is out of CUDA/CUPTI;
    /// called at exit after write-through is set, so it makes no new calls.
    pub fn wait_for_writer_calls(&self) {
        for _ in 0..100 {
            if self.writer_calls.try_lock().is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Self-cost and drop counters as records.
    pub fn push_counters(&self) {
        let t = now_ns();
        self.sink.push(&Record::Cost(ProbeCost {
            t,
            callbacks: self.callbacks.load(Ordering::Relaxed),
            callback_ns: self.callback_ns.load(Ordering::Relaxed),
            activity_records: self.activity_records.load(Ordering::Relaxed),
            activity_ns: self.activity_ns.load(Ordering::Relaxed),
            activity_buffer_bytes: self
                .buffers_out
                .load(Ordering::Relaxed)
                .saturating_mul(BUFFER_BYTES as u64),
            bytes_written: self.sink.written(),
        }));
        self.sink.push(&Record::Dropped(RecordsDropped {
            t,
            probe_events: self.sink.dropped(),
            cupti_records: self.cupti_dropped.load(Ordering::Relaxed),
        }));
    }

    /// Turns kernel activity records on or off (they cost time on every launch,
    /// so the shim turns them off once the first steps are over).
    pub fn set_kernel_records(&self, enabled: bool) -> bool {
        let kind = activity::KIND_CONCURRENT_KERNEL;
        // SAFETY: plain CUPTI calls with a valid activity kind.
        let rc = unsafe {
            if enabled {
                (self.cupti.activity_enable)(kind)
            } else {
                (self.cupti.activity_disable)(kind)
            }
        };
        if rc != CUPTI_SUCCESS {
            self.notice(
                NoticeLevel::Warning,
                format!(
                    "could not switch kernel records {}: {}",
                    if enabled { "on" } else { "off" },
                    self.cupti.describe(rc)
                ),
            );
            return false;
        }
        if !enabled {
            // Called by the shim at a step end: a pool summary marks it too.
            summarize_pools(self, true);
            // SAFETY: flushes completed buffers through our completion callback.
            unsafe { (self.cupti.flush_all)(0) };
        }
        self.kernel_records.store(enabled, Ordering::Relaxed);
        self.sink.push(&Record::Activity(ActivityState {
            t: now_ns(),
            kernel_records: enabled,
        }));
        true
    }
}

/// Internal errors after which the probe stops itself.
const MAX_INTERNAL_ERRORS: u64 = 64;

/// The CUPTI callback for every subscribed driver API and resource event.
pub unsafe extern "C" fn on_callback(
    _user: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    let Some(p) = probe() else { return };
    ensure_alt_stack();
    let tracked = if domain == DOMAIN_DRIVER_API {
        driver_api::lookup(cbid)
    } else {
        None
    };
    let data = data as *const CUpti_CallbackData;
    if let Some((api, layout)) = tracked {
        let handling = driver_api::handling(api);
        if handling != Handling::Full {
            // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain.
            unsafe { pool_callback(p, api, layout, handling, data) };
            return;
        }
    }
    let t0 = now_ns();
    let outcome = catch_unwind(AssertUnwindSafe(|| match (domain, tracked) {
        // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain.
        (DOMAIN_DRIVER_API, Some((api, layout))) => unsafe { driver_call(p, api, layout, data) },
        // SAFETY: CUPTI passes CUpti_ResourceData for the resource domain.
        (DOMAIN_RESOURCE, _) => unsafe { resource(p, cbid, data as *const CUpti_ResourceData) },
        _ => {}
    }));
    if outcome.is_err() {
        p.internal_error("allocation callback");
    }
    p.callbacks.fetch_add(1, Ordering::Relaxed);
    p.callback_ns
        .fetch_add(now_ns().saturating_sub(t0), Ordering::Relaxed);
}

/// Pool-path callbacks are timed one in this many (the time is scaled up): a
/// clock read costs about as much as the rest of such a callback.
const POOL_TIMING_SAMPLE: u64 = 16;

/// A stream-ordered call's callback: nothing at entry, counters at exit.
///
/// # Safety
/// `data` is CUPTI's callback data for a call with this `api` and `layout`.
unsafe fn pool_callback(
    p: &Probe,
    api: MemApi,
    layout: driver_api::Layout,
    handling: Handling,
    data: *const CUpti_CallbackData,
) {
    let n = p.callbacks.fetch_add(1, Ordering::Relaxed);
    let timed = n.is_multiple_of(POOL_TIMING_SAMPLE);
    let t0 = if timed { now_ns() } else { 0 };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: non-null pointer from CUPTI, valid for the callback's duration.
        if let Some(d) = unsafe { data.as_ref() }
            && d.callbackSite as u32 != SITE_ENTER
        {
            // SAFETY: as promised by the caller.
            unsafe { pool_call(p, d, api, layout, handling) };
        }
    }));
    if outcome.is_err() {
        p.internal_error("allocation callback");
    }
    if timed {
        let spent = now_ns().saturating_sub(t0);
        p.callback_ns
            .fetch_add(spent.saturating_mul(POOL_TIMING_SAMPLE), Ordering::Relaxed);
    }
}

/// A fully recorded call: entry saves its start, exit writes its `MemCall`.
///
/// # Safety
/// `data` is CUPTI's callback data for a call with this `api` and `layout`.
unsafe fn driver_call(
    p: &Probe,
    api: MemApi,
    layout: driver_api::Layout,
    data: *const CUpti_CallbackData,
) {
    // SAFETY: non-null pointer from CUPTI, valid for the callback's duration.
    let Some(d) = (unsafe { data.as_ref() }) else {
        return;
    };
    if d.callbackSite as u32 == SITE_ENTER {
        enter(p, d, api.effect());
        return;
    }
    let t_end = now_ns();
    let (t_start, free_before) = take_in_flight(p, d.correlationId, t_end);
    // SAFETY: `d` is the exit callback of a call with this api and layout.
    unsafe { record_call(p, d, api, layout, t_start, t_end, Some(free_before)) };
}

/// Entry of a fully recorded call: its start and the free memory before it.
fn enter(p: &Probe, d: &CUpti_CallbackData, effect: MemEffect) {
    let free = if measures_device(effect) && effect != MemEffect::Context {
        p.driver
            .as_ref()
            .and_then(|dr| dr.free_total())
            .map_or(UNKNOWN_BYTES, |f| f.0)
    } else {
        UNKNOWN_BYTES
    };
    let mut calls = lock(&p.in_flight);
    if calls.len() >= MAX_IN_FLIGHT {
        calls.remove(0);
    }
    calls.push(InFlight {
        correlation: d.correlationId,
        t_start: now_ns(),
        free_before: free,
    });
}

/// (t_start, free_before) saved at the call's entry, if it was seen.
fn take_in_flight(p: &Probe, correlation: u32, t_end: u64) -> (u64, u64) {
    let mut calls = lock(&p.in_flight);
    match calls.iter().rposition(|e| e.correlation == correlation) {
        Some(i) => {
            let e = calls.swap_remove(i);
            (e.t_start, e.free_before)
        }
        None => (t_end, UNKNOWN_BYTES),
    }
}

fn measures_device(effect: MemEffect) -> bool {
    matches!(
        effect,
        MemEffect::DeviceAlloc | MemEffect::DeviceFree | MemEffect::Module | MemEffect::Context
    )
}

/// The CUresult the call returned (u32::MAX when CUPTI gave none).
fn result_of(d: &CUpti_CallbackData) -> u32 {
    if d.functionReturnValue.is_null() {
        u32::MAX
    } else {
        // SAFETY: driver API callbacks return a CUresult (u32-sized enum).
        unsafe { *(d.functionReturnValue as *const u32) }
    }
}

fn device_of(p: &Probe, context: *mut c_void) -> i32 {
    let mut dev = 0u32;
    // SAFETY: context handle from CUPTI.
    if !context.is_null() && unsafe { (p.cupti.device_id)(context, &mut dev) } == CUPTI_SUCCESS {
        dev as i32
    } else {
        -1
    }
}

/// The calling library (walking the stack), interning a newly seen one.
fn caller(p: &Probe) -> u32 {
    let (library, new_library) = lock(&p.callers).caller();
    if let Some(lib) = new_library {
        p.sink.push(&Record::Library(LibraryName {
            id: lib.id,
            path: lib.path,
        }));
    }
    library
}

/// Writes one `MemCall` for the exit of a call. `free_before` None means
/// "read after the call" (a failed pool allocation, which changed nothing).
///
/// # Safety
/// `d` must be the exit callback data of a call with this `api` and `layout`.
unsafe fn record_call(
    p: &Probe,
    d: &CUpti_CallbackData,
    api: MemApi,
    layout: driver_api::Layout,
    t_start: u64,
    t_end: u64,
    free_before: Option<u64>,
) {
    let effect = api.effect();
    let result = result_of(d);
    // SAFETY: layout matches the call's parameter struct (driver_api table).
    let bytes = unsafe { driver_api::requested_bytes(layout, d.functionParams) };
    // SAFETY: as above; outputs are read only when the call succeeded.
    let address = unsafe { driver_api::address(layout, d.functionParams, result == 0) };
    let (free_after, total) = if measures_device(effect) {
        p.driver
            .as_ref()
            .and_then(|dr| dr.free_total())
            .unwrap_or((UNKNOWN_BYTES, UNKNOWN_BYTES))
    } else {
        (UNKNOWN_BYTES, UNKNOWN_BYTES)
    };
    let library = caller(p);
    p.sink.push(&Record::Mem(MemCall {
        t_start,
        t_end,
        api,
        thread: thread_id(),
        device: device_of(p, d.context as *mut c_void),
        bytes,
        address,
        result,
        library,
        free_before: free_before.unwrap_or(free_after),
        free_after,
        total,
    }));
    if result != 0 && effect == MemEffect::DeviceAlloc {
        // A failed allocation may be the last thing this process does: write now.
        p.sink.flush();
    }
}

/// The exit of a stream-ordered allocation or free: counted on its pool
/// (pools.rs has the rule); only a failed allocation is recorded in full.
///
/// # Safety
/// As for [`record_call`].
unsafe fn pool_call(
    p: &Probe,
    d: &CUpti_CallbackData,
    api: MemApi,
    layout: driver_api::Layout,
    handling: Handling,
) {
    let context = d.context as *mut c_void;
    let device = || device_of(p, context);
    let device_pool = PoolKey::Device {
        context: context as u64,
    };
    match handling {
        Handling::PoolAlloc { explicit } => {
            let key = if explicit {
                // SAFETY: cuMemAllocFromPoolAsync parameters.
                PoolKey::Explicit {
                    handle: unsafe { driver_api::explicit_pool(d.functionParams) },
                }
            } else {
                device_pool
            };
            let (_, slot) = p.pools.slot(key, device);
            if result_of(d) != 0 {
                slot.failed.fetch_add(1, Ordering::Relaxed);
                summarize_pools(p, true);
                let t = now_ns();
                // SAFETY: forwarded from the caller.
                unsafe { record_call(p, d, api, layout, t, t, None) };
                return;
            }
            // SAFETY: as above.
            let bytes = unsafe { driver_api::requested_bytes(layout, d.functionParams) };
            slot.alloc_bytes.fetch_add(bytes, Ordering::Relaxed);
            let n = slot.allocs.fetch_add(1, Ordering::Relaxed) + 1;
            if slot.owner_check_due(n)
                && let Some((owner, other)) = slot.saw_caller(caller(p))
            {
                let (owner, other) = {
                    let callers = lock(&p.callers);
                    (callers.path_of(owner), callers.path_of(other))
                };
                p.notice(
                    NoticeLevel::Info,
                    format!(
                        "a memory pool of device {} is also used by {other}; its memory stays attributed to its first user, {owner}",
                        slot.device()
                    ),
                );
            }
        }
        _ => {
            let (_, slot) = p.pools.slot(device_pool, device);
            slot.frees.fetch_add(1, Ordering::Relaxed);
        }
    }
    // Between the writer thread's records (every 100 ms): while kernel
    // records are on (setup, first steps), every 10 ms from the pool calls.
    if p.kernel_records.load(Ordering::Relaxed) && p.pools.summary_due(coarse_now_ns()) {
        summarize_pools(p, true);
    }
}

/// Writes a `Pool` record, measured by the driver when `read_driver`, for
/// every pool used since its last one.
pub fn summarize_pools(p: &Probe, read_driver: bool) {
    let driver = p.driver.as_ref().filter(|_| read_driver);
    for record in p.pools.summarize(now_ns, driver) {
        p.sink.push(&record);
    }
}

unsafe fn resource(p: &Probe, cbid: u32, data: *const CUpti_ResourceData) {
    if data.is_null() {
        return;
    }
    // SAFETY: non-null pointer from CUPTI.
    let d = unsafe { &*data };
    let ctx = d.context as *mut c_void;
    let mut context_id = 0u32;
    // SAFETY: context handle from CUPTI.
    unsafe { (p.cupti.context_id)(ctx, &mut context_id) };
    match cbid {
        CBID_CONTEXT_CREATED => {
            let mut dev = 0u32;
            // SAFETY: as above.
            let device = if unsafe { (p.cupti.device_id)(ctx, &mut dev) } == CUPTI_SUCCESS {
                dev as i32
            } else {
                -1
            };
            let mut pci = String::new();
            let (mut free, mut total) = (UNKNOWN_BYTES, UNKNOWN_BYTES);
            if let Some(dr) = &p.driver {
                if device >= 0 {
                    let mut buf = [0 as std::ffi::c_char; 32];
                    // SAFETY: buffer of the length we pass.
                    if unsafe { (dr.device_pci_bus_id)(buf.as_mut_ptr(), buf.len() as i32, device) }
                        == 0
                    {
                        // SAFETY: NUL-terminated by the driver.
                        pci = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                            .to_string_lossy()
                            .into_owned();
                    }
                }
                // SAFETY: push/pop the new context around one cuMemGetInfo.
                if unsafe { (dr.ctx_push)(ctx) } == 0 {
                    if let Some((f, t)) = dr.free_total() {
                        (free, total) = (f, t);
                    }
                    let mut popped = std::ptr::null_mut();
                    unsafe { (dr.ctx_pop)(&mut popped) };
                }
            }
            p.sink.push(&Record::Context(ContextCreated {
                t: now_ns(),
                device,
                context_id,
                pci_bus_id: pci,
                free,
                total,
            }));
        }
        CBID_MODULE_LOADED => {
            let m = d.resourceDescriptor as *const CUpti_ModuleResourceData;
            if m.is_null() {
                return;
            }
            // SAFETY: CUPTI passes CUpti_ModuleResourceData for module events.
            let m = unsafe { &*m };
            p.sink.push(&Record::Module(ModuleLoad {
                t: now_ns(),
                context_id,
                module_id: m.moduleId,
                cubin_bytes: m.cubinSize as u64,
            }));
        }
        _ => {}
    }
}

/// CUPTI asks for an activity buffer.
pub unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let _ = catch_unwind(|| {
        let p = match buffer_layout() {
            // SAFETY: non-zero size layout.
            Some(layout) => unsafe { std::alloc::alloc(layout) },
            None => std::ptr::null_mut(),
        };
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = p;
            *size = if p.is_null() { 0 } else { BUFFER_BYTES };
            *max_records = 0;
        }
        if !p.is_null()
            && let Some(probe) = PROBE.get()
        {
            probe.buffers_out.fetch_add(1, Ordering::Relaxed);
        }
    });
}

/// CUPTI hands back a filled activity buffer.
pub unsafe extern "C" fn buffer_completed(
    ctx: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if let Some(p) = PROBE.get() {
            if !p.disabled.load(Ordering::Relaxed) {
                let t0 = now_ns();
                // SAFETY: buffer and valid size come from CUPTI.
                let n = unsafe { drain(p, buffer, valid) };
                p.activity_records.fetch_add(n, Ordering::Relaxed);
                let mut dropped = 0usize;
                // SAFETY: plain CUPTI query.
                if unsafe { (p.cupti.dropped_records)(ctx, stream, &mut dropped) } == CUPTI_SUCCESS
                {
                    p.cupti_dropped.fetch_add(dropped as u64, Ordering::Relaxed);
                }
                p.activity_ns
                    .fetch_add(now_ns().saturating_sub(t0), Ordering::Relaxed);
            }
            p.buffers_out.fetch_sub(1, Ordering::Relaxed);
        }
        if !buffer.is_null()
            && let Some(layout) = buffer_layout()
        {
            // SAFETY: allocated in buffer_requested with this layout.
            unsafe { std::alloc::dealloc(buffer, layout) };
        }
    }));
}

fn buffer_layout() -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).ok()
}

unsafe fn drain(p: &Probe, buffer: *mut u8, valid: usize) -> u64 {
    if buffer.is_null() || valid == 0 {
        return 0;
    }
    let mut out = Vec::new();
    let mut count = 0u64;
    let mut kernels = lock(&p.kernels);
    let mut record: *mut c_void = std::ptr::null_mut();
    loop {
        // SAFETY: iterating the buffer CUPTI filled, as documented.
        let rc = unsafe { (p.cupti.next_record)(buffer, valid, &mut record) };
        if rc == CUPTI_ERROR_MAX_LIMIT_REACHED || rc != CUPTI_SUCCESS || record.is_null() {
            break;
        }
        count += 1;
        // SAFETY: every activity record starts with its u32 kind.
        let kind = unsafe { *(record as *const u32) };
        if kind == activity::KIND_CONCURRENT_KERNEL || kind == activity::KIND_KERNEL {
            // SAFETY: kernel records have the Kernel9+ prefix on CUPTI >= 12.
            let facts = unsafe { activity::read_kernel(record as *const u8, p.use_local_v2) };
            kernels.observe(&facts, p.activity_offset, &mut out);
        }
    }
    drop(kernels);
    for r in &out {
        p.sink.push(r);
    }
    count
}

/// CLOCK_MONOTONIC for CUPTI's activity timestamps.
pub unsafe extern "C" fn monotonic_timestamp() -> u64 {
    now_ns()
}
