//! The probe's entry points from CUPTI: the callback for every subscribed
//! driver API and resource event, dispatched to `calls` (driver calls, pools)
//! or handled here (contexts, modules), launches (to `launches`), and
//! switching the kernel watch on and off. Above `state`, `calls` and
//! `launches`, which never call back up here.

use crate::calls;
use crate::clock::now_ns;
use crate::cupti::CUPTI_SUCCESS;
use crate::detach;
use crate::driver_api::{self, Handling};
use crate::launch_state::KernelWatch;
use crate::launches;
use crate::signals::ensure_alt_stack;
use crate::state::*;
use cudarc::cupti::sys::{CUpti_CallbackData, CUpti_ModuleResourceData, CUpti_ResourceData};
use prewarm_events::*;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering;

/// Turns the kernel watch on or off: kernel records (on every launch under
/// `all`) or launch tracing (first launches, the default) cost time on
/// launches, so the shim turns the watch off once the first steps are over.
pub fn set_kernel_records(p: &Probe, enabled: bool) -> bool {
    if !enabled && p.kernel_watch != KernelWatch::Off {
        p.detach.request();
    }
    let rc = match p.kernel_watch {
        KernelWatch::EveryLaunch => launches::switch_kernel_activity(p, enabled),
        KernelWatch::FirstLaunches => launches::watch(p, enabled),
        KernelWatch::Off => return false,
    };
    if rc != CUPTI_SUCCESS {
        p.notice(
            NoticeLevel::Warning,
            format!(
                "could not switch kernel records {}: {}",
                if enabled { "on" } else { "off" },
                p.cupti.describe(rc)
            ),
        );
        return false;
    }
    if !enabled {
        // Called by the shim at a step end: a pool summary marks it too.
        calls::summarize_pools(p, true);
        // Forced: the buffer being filled comes back too. Unforced, CUPTI
        // returns full buffers only, and the records of a buffer still
        // being filled when the watch ends never came back (on an H100,
        // 2026-12-05: a transformers decoder's run under `all` delivered
        // 1,422 records and 45 first launches where first-launch tracing
        // found 81).
        // SAFETY: flushes buffers through our completion callback.
        unsafe { (p.cupti.flush_all)(1) };
    }
    p.kernel_records.store(enabled, Ordering::Relaxed);
    p.sink.push(&Record::Activity(ActivityState {
        t: now_ns(),
        kernel_records: enabled,
    }));
    true
}

/// Pauses the kernel watch (`paused`) or resumes it, for the shim around the
/// repeated launches of an autotune benchmark: a candidate's first launches
/// are seen before the pause, and its later launches would only cost a
/// record apiece that [`crate::activity::KernelTracker`] drops (no first launch, no
/// growth), or a launch callback that finds them seen. Unlike
/// [`set_kernel_records`] it neither flushes nor summarises pools (it runs
/// hundreds of times in a step), and resuming never turns on a watch that was
/// switched off. Its time counts as the probe's own on the training's
/// thread; the pause and the resume are both recorded.
pub fn pause_kernel_records(p: &Probe, paused: bool) -> bool {
    if !p.kernel_records.load(Ordering::Relaxed) {
        return false;
    }
    let t0 = now_ns();
    let switched = match p.kernel_watch {
        KernelWatch::EveryLaunch => launches::switch_kernel_activity(p, !paused) == CUPTI_SUCCESS,
        KernelWatch::FirstLaunches => launches::pause(p, paused),
        KernelWatch::Off => false,
    };
    let t1 = now_ns();
    p.callbacks.fetch_add(1, Ordering::Relaxed);
    p.callback_ns
        .fetch_add(t1.saturating_sub(t0), Ordering::Relaxed);
    p.note_callback(t1.saturating_sub(t0), SLOWEST_WATCH_PAUSE);
    if !switched {
        return false;
    }
    p.sink.push(&Record::Activity(ActivityState {
        t: t1,
        kernel_records: !paused,
    }));
    true
}

/// The CUPTI callback for every subscribed driver API and resource event.
pub unsafe extern "C" fn on_callback(
    _user: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    let Some(p) = probe() else { return };
    // SAFETY: as CUPTI passed them.
    unsafe { dispatch(p, domain, cbid, data) };
    if domain == DOMAIN_DRIVER_API && p.detach.pending() {
        // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain.
        let detached = unsafe {
            detach::at_driver_callback(p, data as *const CUpti_CallbackData, on_callback)
        };
        if detached {
            // The last statement of the callback that detached: the attach
            // thread waits for it (detach.rs).
            p.detach.mark_returned();
        }
    }
}

/// One callback's work, by domain and id.
///
/// # Safety
/// `data` is what CUPTI passes for `domain`.
unsafe fn dispatch(p: &'static Probe, domain: u32, cbid: u32, data: *const c_void) {
    if domain == DOMAIN_DRIVER_API
        && let Some(index) = launches::launch_parameter(cbid)
    {
        // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain.
        if unsafe { launches::is_plain_exit(data as *const CUpti_CallbackData) } {
            p.callbacks.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let t0 = now_ns();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: CUPTI passes CUpti_CallbackData for the driver API
            // domain; `index` is this launch call's parameter (LAUNCHES).
            unsafe { launches::on_launch(p, index, data as *const CUpti_CallbackData) }
        }));
        if outcome.is_err() {
            p.internal_error("launch callback");
        }
        let spent = now_ns().saturating_sub(t0);
        p.callbacks.fetch_add(1, Ordering::Relaxed);
        p.callback_ns.fetch_add(spent, Ordering::Relaxed);
        p.launch_ns.fetch_add(spent, Ordering::Relaxed);
        p.note_callback(spent, u64::from(cbid));
        return;
    }
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
            unsafe { calls::pool_callback(p, cbid, api, layout, handling, data) };
            return;
        }
    }
    let t0 = now_ns();
    let outcome = catch_unwind(AssertUnwindSafe(|| match (domain, tracked) {
        // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain.
        (DOMAIN_DRIVER_API, Some((api, layout))) => unsafe {
            calls::driver_call(p, api, layout, data)
        },
        // SAFETY: CUPTI passes CUpti_CallbackData for the driver API domain
        // (only the pool lifecycle ids are subscribed besides the tracked ones).
        (DOMAIN_DRIVER_API, None) => unsafe { calls::pool_lifecycle(p, cbid, data) },
        // SAFETY: CUPTI passes CUpti_ResourceData for the resource domain.
        (DOMAIN_RESOURCE, _) => unsafe { resource(p, cbid, data as *const CUpti_ResourceData) },
        _ => {}
    }));
    if outcome.is_err() {
        p.internal_error("allocation callback");
    }
    let spent = now_ns().saturating_sub(t0);
    p.callbacks.fetch_add(1, Ordering::Relaxed);
    p.callback_ns.fetch_add(spent, Ordering::Relaxed);
    if tracked.is_some_and(|(api, _)| api.effect() == MemEffect::Module) {
        p.module_ns.fetch_add(spent, Ordering::Relaxed);
    }
    let id = if domain == DOMAIN_RESOURCE {
        SLOWEST_RESOURCE + u64::from(cbid)
    } else {
        u64::from(cbid)
    };
    p.note_callback(spent, id);
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
                // SAFETY: the context just created, alive in its callback.
                if let Some((f, t)) = unsafe { dr.free_total_in(ctx) } {
                    (free, total) = (f, t);
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
