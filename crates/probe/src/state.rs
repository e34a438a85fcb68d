//! The probe's process-wide state and CUPTI's activity-buffer callbacks (the
//! driver and resource callbacks are in callbacks.rs, above this file).
//! Nothing here can panic by design (see guard.rs); every `extern "C"` entry
//! still catches panics, so a bug drops one event (counted, and the first one
//! explained in a notice) and never reaches the training process.

use crate::activity::{self, BUFFER_BYTES, KernelTracker};
use crate::caller::Callers;
use crate::clock::now_ns;
use crate::cupti::{CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_SUCCESS, Cupti, Driver};
use crate::guard::{self, lock};
use crate::inflight::InFlightTable;
use crate::launch_state::{Detach, FirstLaunches, KernelWatch};
use crate::pools::Pools;
use crate::sink::Sink;
use prewarm_events::*;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// CUPTI callback domain of driver API calls.
pub(crate) const DOMAIN_DRIVER_API: u32 = 1;
/// CUPTI callback domain of resource events (contexts, modules).
pub(crate) const DOMAIN_RESOURCE: u32 = 3;
pub use prewarm_events::callback_ids::{CBID_CONTEXT_CREATED, CBID_MODULE_LOADED};
/// Bits of the id in [`Probe`]'s packed slowest-callback figure (driver
/// API ids are below 1,000; resource ids carry [`SLOWEST_RESOURCE`]).
const SLOWEST_ID_BITS: u32 = 16;

/// Everything the callbacks share.
pub struct Probe {
    pub cupti: Cupti,
    pub driver: Option<Driver>,
    pub sink: Sink,
    /// The CUPTI subscriber, once subscribed (to switch callbacks off later).
    pub subscriber: AtomicPtr<c_void>,
    pub(crate) callers: Callers,
    /// Stream-ordered allocations, counted per pool.
    pub pools: Pools,
    /// Held by the writer thread while it calls into CUDA/CUPTI.
    pub writer_calls: Mutex<()>,
    kernels: Mutex<KernelTracker>,
    /// CUPTI calls the probe's clock: its timestamps need no offset (else
    /// the offset is measured again at each buffer, so that the two clocks
    /// cannot drift apart).
    activity_clock_is_ours: bool,
    pub use_local_v2: bool,
    /// How kernel records are taken (`PREWARM_DOCTOR_KERNEL_RECORDS`).
    pub kernel_watch: KernelWatch,
    /// The first-launch watch (launches.rs), under [`KernelWatch::FirstLaunches`].
    pub launches: FirstLaunches,
    /// CUPTI detached and attached again after the watch (detach.rs, on by default).
    pub detach: Detach,
    /// The kernel watch is on (setup and the first steps), whichever way
    /// records are taken.
    pub kernel_records: AtomicBool,
    pub disabled: AtomicBool,
    /// Driver calls between their enter and exit callbacks.
    pub(crate) in_flight: InFlightTable,
    internal_errors: AtomicU64,
    pub(crate) callbacks: AtomicU64,
    pub(crate) callback_ns: AtomicU64,
    /// The writer thread's own time per tick (see [`ProbeCost::flush_ns`]).
    pub(crate) flush_ns: AtomicU64,
    /// Of `callback_ns`, the launch callbacks' (the first-launch watch) and
    /// the module and library load and unload calls' (see
    /// [`ProbeCost::launch_ns`]).
    pub(crate) launch_ns: AtomicU64,
    pub(crate) module_ns: AtomicU64,
    /// Time in caller walks (see [`ProbeCost::walk_ns`]).
    pub(crate) walk_ns: AtomicU64,
    /// The longest callback since the last cost record: its time in the
    /// high bits, its id in the low [`SLOWEST_ID_BITS`] (one atomic, so a
    /// time and its id are never torn apart).
    slowest: AtomicU64,
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

/// Installs the probe state; returns it.
pub fn install(
    cupti: Cupti,
    driver: Option<Driver>,
    sink: Sink,
    own_path: &str,
    activity_clock_is_ours: bool,
    pool_quiet_calls: u64,
    kernel_watch: KernelWatch,
) -> &'static Probe {
    let use_local_v2 = cupti.version >= 130000;
    PROBE.get_or_init(|| Probe {
        cupti,
        driver,
        sink,
        subscriber: AtomicPtr::new(std::ptr::null_mut()),
        callers: Callers::new(own_path),
        pools: Pools::new(pool_quiet_calls),
        writer_calls: Mutex::new(()),
        kernels: Mutex::new(KernelTracker::default()),
        activity_clock_is_ours,
        use_local_v2,
        kernel_watch,
        launches: FirstLaunches::default(),
        detach: Default::default(),
        kernel_records: AtomicBool::new(false),
        disabled: AtomicBool::new(false),
        callbacks: AtomicU64::new(0),
        callback_ns: AtomicU64::new(0),
        flush_ns: AtomicU64::new(0),
        launch_ns: AtomicU64::new(0),
        module_ns: AtomicU64::new(0),
        walk_ns: AtomicU64::new(0),
        slowest: AtomicU64::new(0),
        activity_records: AtomicU64::new(0),
        activity_ns: AtomicU64::new(0),
        buffers_out: AtomicU64::new(0),
        cupti_dropped: AtomicU64::new(0),
        in_flight: InFlightTable::default(),
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

    /// Activity buffers CUPTI holds now (records not yet handed back).
    pub fn activity_buffers_out(&self) -> u64 {
        self.buffers_out.load(Ordering::Relaxed)
    }

    /// Notes one callback's time: the longest since the last cost record
    /// is kept with its id (see [`ProbeCost::slowest_callback_id`]).
    pub(crate) fn note_callback(&self, spent_ns: u64, id: u64) {
        let packed = (spent_ns.min(u64::MAX >> SLOWEST_ID_BITS) << SLOWEST_ID_BITS)
            | (id & ((1 << SLOWEST_ID_BITS) - 1));
        // A plain load first: most callbacks are not the longest, and a
        // read-modify-write on every launch callback would bounce this line
        // between the training's threads.
        if packed > self.slowest.load(Ordering::Relaxed) {
            self.slowest.fetch_max(packed, Ordering::Relaxed);
        }
    }

    /// Self-cost and drop counters as records.
    pub fn push_counters(&self) {
        let t = now_ns();
        let slowest = self.slowest.swap(0, Ordering::Relaxed);
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
            flush_ns: self.flush_ns.load(Ordering::Relaxed),
            launch_ns: self.launch_ns.load(Ordering::Relaxed),
            module_ns: self.module_ns.load(Ordering::Relaxed),
            reading_ns: self
                .driver
                .as_ref()
                .map_or(0, |d| d.reading_ns.load(Ordering::Relaxed)),
            walk_ns: self.walk_ns.load(Ordering::Relaxed),
            slowest_callback_ns: slowest >> SLOWEST_ID_BITS,
            slowest_callback_id: slowest & ((1 << SLOWEST_ID_BITS) - 1),
        }));
        self.sink.push(&Record::Dropped(RecordsDropped {
            t,
            probe_events: self.sink.dropped(),
            cupti_records: self.cupti_dropped.load(Ordering::Relaxed),
        }));
    }
}

/// Internal errors after which the probe stops itself.
const MAX_INTERNAL_ERRORS: u64 = 64;

/// CUPTI asks for an activity buffer: fresh anonymous pages, which the kernel
/// hands out zeroed and maps only as CUPTI writes into them, so a buffer
/// costs the pages its records fill, not 8 MiB of clearing (see
/// [`activity::ATTR_ZEROED_OUT_ACTIVITY_BUFFER`]).
pub unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_records: *mut usize,
) {
    let _ = catch_unwind(|| {
        let p = map_buffer();
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

fn map_buffer() -> *mut u8 {
    // SAFETY: a private anonymous mapping; no file, no fixed address.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            BUFFER_BYTES,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        std::ptr::null_mut()
    } else {
        p.cast()
    }
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
                let spent = now_ns().saturating_sub(t0);
                p.activity_ns.fetch_add(spent, Ordering::Relaxed);
                note_activity_on_this_thread(spent);
            }
            p.buffers_out.fetch_sub(1, Ordering::Relaxed);
        }
        if !buffer.is_null() {
            // SAFETY: mapped in buffer_requested with this size.
            unsafe { libc::munmap(buffer.cast(), BUFFER_BYTES) };
        }
    }));
}

unsafe fn drain(p: &Probe, buffer: *mut u8, valid: usize) -> u64 {
    if buffer.is_null() || valid == 0 {
        return 0;
    }
    let mut out = Vec::new();
    let mut count = 0u64;
    let offset = p.current_activity_offset();
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
            kernels.observe(&facts, offset, &mut out);
        }
    }
    drop(kernels);
    // Not a training thread's allocation callback: may write a full shard.
    for r in &out {
        p.sink.push_or_write(r);
    }
    count
}

/// CUPTI's activity clock minus CLOCK_MONOTONIC, read now (the middle of our
/// two clock reads around CUPTI's).
pub fn activity_clock_offset(cupti: &Cupti) -> i64 {
    let mut cupti_t = 0u64;
    let before = now_ns();
    // SAFETY: writes one u64.
    unsafe { (cupti.get_timestamp)(&mut cupti_t) };
    let after = now_ns();
    (before / 2 + after / 2) as i64 - cupti_t as i64
}

impl Probe {
    /// The offset to add to activity timestamps now: measured again unless
    /// CUPTI calls the probe's clock.
    fn current_activity_offset(&self) -> i64 {
        if self.activity_clock_is_ours {
            0
        } else {
            activity_clock_offset(&self.cupti)
        }
    }
}

/// CLOCK_MONOTONIC for CUPTI's activity timestamps.
pub unsafe extern "C" fn monotonic_timestamp() -> u64 {
    now_ns()
}

thread_local! {
    /// Activity-buffer time spent on this thread and not yet taken by
    /// [`take_activity_on_this_thread`] (no destructor: always accessible).
    static ACTIVITY_ON_THIS_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts buffer-draining time against the calling thread too, so that the
/// writer thread, which drains buffers inside its own tick when it flushes,
/// can leave that time out of `flush_ns` (it is already in `activity_ns`).
fn note_activity_on_this_thread(ns: u64) {
    let _ = ACTIVITY_ON_THIS_THREAD.try_with(|c| c.set(c.get().saturating_add(ns)));
}

/// The buffer-draining time of the calling thread since the last call.
pub(crate) fn take_activity_on_this_thread() -> u64 {
    ACTIVITY_ON_THIS_THREAD
        .try_with(|c| c.replace(0))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_time_is_taken_once_and_only_by_its_own_thread() {
        note_activity_on_this_thread(5);
        note_activity_on_this_thread(7);
        std::thread::spawn(|| {
            note_activity_on_this_thread(100);
            assert_eq!(take_activity_on_this_thread(), 100);
        })
        .join()
        .unwrap();
        assert_eq!(take_activity_on_this_thread(), 12);
        assert_eq!(take_activity_on_this_thread(), 0);
    }
}
