//! What the probe does with each tracked driver call: the full treatment
//! (entry time and free memory, exit with caller, free memory and a `MemCall`
//! record) or, for stream-ordered calls, the pool path (counters until the
//! switch, then nothing: pools.rs), plus the pools' lifecycle.

use crate::clock::{now_ns, thread_id};
use crate::cupti::CUPTI_SUCCESS;
use crate::driver_api::{self, Handling, Layout};
use crate::pools::PoolKey;
use crate::state::{DOMAIN_DRIVER_API, Probe};
use cudarc::cupti::sys::CUpti_CallbackData;
use prewarm_events::*;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

pub(crate) const SITE_ENTER: u32 = 0;

/// Pool-path callbacks are timed one in this many (the time is scaled up): a
/// clock read costs about as much as the rest of such a callback.
const POOL_TIMING_SAMPLE: u64 = 16;

/// A stream-ordered call's callback: nothing at entry, counters at exit.
///
/// # Safety
/// `data` is CUPTI's callback data for a call with this `api` and `layout`
/// (CUPTI's id for it: `cbid`).
pub(crate) unsafe fn pool_callback(
    p: &Probe,
    cbid: u32,
    api: MemApi,
    layout: driver_api::Layout,
    handling: Handling,
    data: *const CUpti_CallbackData,
) {
    let n = p.callbacks.fetch_add(1, Ordering::Relaxed);
    if !p.pools.counting() {
        // Switched off (a callback already under way, or one whose
        // cuptiEnableCallback(0) failed): nothing to do.
        return;
    }
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
        p.note_callback(spent, u64::from(cbid));
    }
}

/// A fully recorded call: entry saves its start, exit writes its `MemCall`.
///
/// # Safety
/// `data` is CUPTI's callback data for a call with this `api` and `layout`.
pub(crate) unsafe fn driver_call(
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
    p.in_flight.insert(d.correlationId, now_ns(), free);
}

/// (t_start, free_before) saved at the call's entry, if it was seen.
fn take_in_flight(p: &Probe, correlation: u32, t_end: u64) -> (u64, u64) {
    p.in_flight
        .take(correlation)
        .unwrap_or((t_end, UNKNOWN_BYTES))
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

/// The CUDA device ordinal of `context` (CUPTI's), or -1.
pub(crate) fn device_of(p: &Probe, context: *mut c_void) -> i32 {
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
    let t0 = now_ns();
    let (library, new_library) = p.callers.caller();
    p.walk_ns
        .fetch_add(now_ns().saturating_sub(t0), Ordering::Relaxed);
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
                let (owner, other) = (p.callers.path_of(owner), p.callers.path_of(other));
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
    p.pools.count_call();
}

/// The writer thread's switch (pools.rs has the rule): the last counted
/// summary, then the stream-ordered callbacks off; a notice says when, if
/// any call was counted (a pool created and never allocated from with
/// stream-ordered calls — NCCL's under the default allocator — has nothing
/// to report, and the notice would only puzzle that allocator's users).
pub fn stop_pool_tracing(p: &Probe) {
    summarize_pools(p, true);
    let (allocs, frees) = p.pools.totals();
    p.pools.stop_counting();
    let subscriber = p.subscriber.load(Ordering::Acquire);
    let mut kept = Vec::new();
    // No subscriber: CUPTI is being attached again (detach.rs), which
    // leaves these off now that counting stopped.
    for cbid in driver_api::stream_ordered_cbids().filter(|_| !subscriber.is_null()) {
        // SAFETY: the subscriber of this probe, a driver API callback id.
        let rc = unsafe { (p.cupti.enable_callback)(0, subscriber, DOMAIN_DRIVER_API, cbid) };
        if rc != CUPTI_SUCCESS {
            kept.push(format!("#{cbid}: {}", p.cupti.describe(rc)));
        }
    }
    if allocs + frees > 0 {
        p.notice(
            NoticeLevel::Info,
            format!(
                "stream-ordered allocations traced until now ({allocs} allocations, {frees} frees; {}): no longer traced, pools' sizes are read every tick and their call counts are unknown from here",
                match p.pools.quiet_step() {
                    Some(step) => format!("step {step} used only known pools"),
                    None => format!("{} calls in a row used only known pools", p.pools.quiet_limit()),
                }
            ),
        );
    }
    if !kept.is_empty() {
        p.notice(
            NoticeLevel::Warning,
            format!(
                "CUPTI kept delivering some stream-ordered callbacks (each still costs CUPTI's dispatch): {}",
                kept.join(", ")
            ),
        );
    }
}

/// `cuMemPoolCreate` (exit): the pool is tracked from now on, owned by its
/// creator; `cuMemPoolDestroy`: no longer read from its entry on, and a last
/// record with zero sizes once it is gone.
///
/// # Safety
/// `data` is CUPTI's callback data for a call with this `cbid`.
pub(crate) unsafe fn pool_lifecycle(p: &Probe, cbid: u32, data: *const CUpti_CallbackData) {
    // SAFETY: non-null pointer from CUPTI, valid for the callback's duration.
    let Some(d) = (unsafe { data.as_ref() }) else {
        return;
    };
    let enter = d.callbackSite as u32 == SITE_ENTER;
    let ok = !enter && result_of(d) == 0;
    match cbid {
        driver_api::CBID_POOL_CREATE if ok => {
            // SAFETY: cuMemPoolCreate parameters; the call succeeded.
            let (handle, device) = unsafe { driver_api::created_pool(d.functionParams) };
            if handle != 0 {
                let context = d.context as *mut c_void;
                let device = || device.unwrap_or_else(|| device_of(p, context));
                p.pools.created(handle, device, caller(p));
            }
        }
        driver_api::CBID_POOL_DESTROY => {
            // SAFETY: cuMemPoolDestroy parameters (the handle, read as a value).
            let handle = unsafe { driver_api::address(Layout::InValue, d.functionParams, true) };
            if enter {
                p.pools.retire(handle);
            } else if !ok {
                p.pools.unretire(handle);
            } else if let Some(r) = p.pools.destroyed(handle, now_ns()) {
                p.sink.push(&r);
            }
        }
        _ => {}
    }
}

/// Writes a `Pool` record, measured by the driver when `read_driver`, for
/// every pool used since its last one (none while another thread writes
/// such records).
pub fn summarize_pools(p: &Probe, read_driver: bool) {
    let driver = p.driver.as_ref().filter(|_| read_driver);
    for record in p.pools.summarize(now_ns, driver) {
        p.sink.push(&record);
    }
}

/// The last `Pool` records, at exit, measured by the driver: waits for a
/// summary another thread is writing, so the final counts are never skipped.
pub fn summarize_pools_at_exit(p: &Probe) {
    for record in p.pools.summarize_final(now_ns, p.driver.as_ref()) {
        p.sink.push(&record);
    }
}
