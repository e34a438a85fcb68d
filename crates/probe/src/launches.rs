//! Kernel records for first launches only (the default watch). Kernel
//! activity records cost every launch while they are on (1.2 µs a launch on
//! an H100, docs/footprint.md), yet the analysis keeps only a kernel's
//! first launch and the launches that grew the context's local-memory
//! reservation — and since the driver never shrinks that reservation, a
//! launch can only grow it the first time its function runs in a context.
//! So the probe traces the driver's launch calls instead and switches kernel
//! records on from the enter of a (context, function)'s first launch to its
//! exit: the record CUPTI writes for that launch is the one the old path
//! kept, GPU times, local-memory figures and all. Every later launch costs
//! one callback pair that finds its key in its thread's own set — CUPTI's
//! dispatch of it about 0.75 µs on an H100, so the per-launch cost shrinks
//! rather than goes. Nor does it go when the watch ends: with the launch
//! callbacks and records off, a launch still cost 0.7–0.83 µs more on an
//! H100, left by switching records on and off at each first launch — not
//! by the last switch being inside a callback, nor by the number of
//! switches (docs/footprint.md, seventh to ninth sessions); detach.rs is
//! the remedy, on by default.
//!
//! A graph launch counts by its executable graph: its first launch records
//! every kernel node it runs. Launch tracing stops when the watch ends (the
//! shim, after the first steps) and pauses through an autotune benchmark's
//! repetitions, as kernel records did. The watch's data is in
//! `launch_state`, below `state`.

use crate::calls::SITE_ENTER;
use crate::cupti::{CUPTI_ERROR_NOT_INITIALIZED, CUPTI_SUCCESS, CuptiResult};
use crate::guard::lock;
use crate::launch_state::{HandleSet, Watch};
use crate::state::{DOMAIN_DRIVER_API, Probe};
use cudarc::cupti::sys::CUpti_CallbackData;
use prewarm_events::NoticeLevel;
use prewarm_events::callback_ids::LAUNCH_CALLS as LAUNCHES;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;

/// The parameter index of a launch callback id — of the pointer-sized
/// parameter naming what runs: the `CUfunction`, or the `CUgraphExec` of
/// a graph launch; every one's parameter struct starts with pointer-sized
/// fields (generated_cuda_meta.h), and `cuLaunchKernelEx` passes its launch
/// config first — or `None` for any other id (asked at every driver
/// callback: a match, not a search of [`LAUNCHES`]).
pub fn launch_parameter(cbid: u32) -> Option<usize> {
    match cbid {
        115 | 116 | 117 | 307 | 442 | 477 | 478 | 514 | 515 => Some(0),
        652 | 653 => Some(1),
        _ => None,
    }
}

/// Whether this callback is a launch's exit on a thread with no window open:
/// nothing to do, so the caller skips even its clock reads.
///
/// # Safety
/// `data` is null or the `CUpti_CallbackData` CUPTI passes for a driver call.
pub unsafe fn is_plain_exit(data: *const CUpti_CallbackData) -> bool {
    // SAFETY: null-checked; from CUPTI for the driver API domain.
    !data.is_null()
        && unsafe { (*data).callbackSite as u32 } != SITE_ENTER
        && OPEN_HERE.try_with(|o| o.get() == 0).unwrap_or(true)
}

thread_local! {
    /// The keys this thread found already seen: the launch path's lookup
    /// without a lock. Unreachable during thread teardown: the shared set.
    static SEEN_HERE: RefCell<HandleSet> = RefCell::new(HandleSet::default());
    /// The generation (plus one) of the window this thread's launch opened; 0 none.
    static OPEN_HERE: Cell<u64> = const { Cell::new(0) };
}

/// A launch callback (enter or exit) while the first-launch watch is on.
///
/// # Safety
/// `data` is the `CUpti_CallbackData` CUPTI passes for a driver launch call
/// whose parameter `index` is pointer-sized.
pub unsafe fn on_launch(p: &Probe, index: usize, data: *const CUpti_CallbackData) {
    if data.is_null() {
        return;
    }
    // SAFETY: non-null, from CUPTI for the driver API domain.
    let d = unsafe { &*data };
    if d.callbackSite as u32 != SITE_ENTER {
        close_window(p);
        return;
    }
    if !p.launches.watching.load(Ordering::Relaxed) || d.functionParams.is_null() {
        return;
    }
    let params = d.functionParams as *const usize;
    // SAFETY: the launch calls' parameter structs start with pointer-sized
    // fields, `index` within them (LAUNCHES).
    let what = unsafe { params.add(index).read_unaligned() };
    let key = (d.context as usize, what);
    let known_here = SEEN_HERE
        .try_with(|seen| !seen.borrow_mut().insert(key))
        .unwrap_or(false);
    if !known_here {
        open_window(p, key);
    }
}

/// A key new to this thread: if new to the process too, kernel records go
/// on until this launch's exit.
fn open_window(p: &Probe, key: (usize, usize)) {
    let mut w = lock(&p.launches.state);
    if !w.on || !w.seen.insert(key) {
        return;
    }
    if w.open == 0 {
        let rc = switch_kernel_activity(p, true);
        if rc != CUPTI_SUCCESS {
            drop(w);
            refused(p, rc);
            return;
        }
    }
    w.open += 1;
    let generation = p.launches.generation.load(Ordering::Relaxed);
    if OPEN_HERE.try_with(|o| o.set(generation + 1)).is_err() {
        // No way to find this window at the exit: close it now (the launch
        // is not recorded; its key is, so it is not retried).
        w.open -= 1;
        if w.open == 0 {
            switch_kernel_activity(p, false);
        }
    }
}

/// CUPTI refused to switch records on at a first launch: that launch is not
/// recorded (its first launch and any growth unseen); the first refusal is a
/// warning in the event file, so every report says so.
fn refused(p: &Probe, rc: CuptiResult) {
    if p.launches.refused.fetch_add(1, Ordering::Relaxed) == 0 {
        p.notice(
            NoticeLevel::Warning,
            format!(
                "kernel records could not be switched on at a kernel's first launch ({}): that launch and any like it are not recorded (PREWARM_DOCTOR_KERNEL_RECORDS=all records every launch instead)",
                p.cupti.describe(rc)
            ),
        );
    }
}

fn close_window(p: &Probe) {
    let opened = OPEN_HERE.try_with(|o| o.replace(0)).unwrap_or(0);
    if opened == 0 {
        return;
    }
    let mut w = lock(&p.launches.state);
    if opened - 1 != p.launches.generation.load(Ordering::Relaxed) || w.open == 0 {
        return;
    }
    w.open -= 1;
    if w.open == 0 {
        switch_kernel_activity(p, false);
    }
}

/// Starts (`on`) or ends the watch: launch callbacks subscribed while on and
/// not paused. Ending it closes any open window. CUPTI's first failure.
pub fn watch(p: &Probe, on: bool) -> CuptiResult {
    let mut w = lock(&p.launches.state);
    w.on = on;
    if !on {
        p.launches.generation.fetch_add(1, Ordering::Relaxed);
        if w.open > 0 {
            w.open = 0;
            switch_kernel_activity(p, false);
        }
    }
    p.launches
        .watching
        .store(on && !w.paused, Ordering::Relaxed);
    subscribe(p, &mut w)
}

/// Pauses launch tracing through an autotune benchmark's repetitions, or
/// resumes it; false when the watch is off (nothing to pause).
pub fn pause(p: &Probe, paused: bool) -> bool {
    let mut w = lock(&p.launches.state);
    if !w.on {
        return false;
    }
    w.paused = paused;
    p.launches.watching.store(!paused, Ordering::Relaxed);
    subscribe(p, &mut w) == CUPTI_SUCCESS
}

/// Subscribes the launch callbacks when the watch is on and not paused,
/// else unsubscribes them (CUPTI's dispatch stops; some cost stays, see the
/// module's note) — unless a detach
/// is due (detach.rs): the next launch's exit does it.
fn subscribe(p: &Probe, w: &mut Watch) -> CuptiResult {
    let want = (w.on && !w.paused) || p.detach.pending();
    if want == w.subscribed {
        return CUPTI_SUCCESS;
    }
    let subscriber = p.subscriber.load(Ordering::Acquire);
    if subscriber.is_null() {
        return CUPTI_ERROR_NOT_INITIALIZED;
    }
    let mut first_error = CUPTI_SUCCESS;
    for (cbid, _) in LAUNCHES {
        // SAFETY: valid subscriber, domain and callback id.
        let rc =
            unsafe { (p.cupti.enable_callback)(want as u32, subscriber, DOMAIN_DRIVER_API, *cbid) };
        if rc != CUPTI_SUCCESS && first_error == CUPTI_SUCCESS {
            first_error = rc;
        }
    }
    w.subscribed = want;
    first_error
}

/// The launch callbacks off as the watch's state says (a detach that was
/// due and did not happen leaves them to this).
pub fn end_subscription(p: &Probe) {
    let mut w = lock(&p.launches.state);
    subscribe(p, &mut w);
}

/// CUPTI was detached: no launch callback is subscribed any more.
pub fn forget_subscription(p: &Probe) {
    lock(&p.launches.state).subscribed = false;
}

/// CUPTI's own switch for kernel activity records; its result code.
pub fn switch_kernel_activity(p: &Probe, enabled: bool) -> CuptiResult {
    let kind = crate::activity::KIND_CONCURRENT_KERNEL;
    // SAFETY: plain CUPTI calls with a valid activity kind.
    unsafe {
        if enabled {
            (p.cupti.activity_enable)(kind)
        } else {
            (p.cupti.activity_disable)(kind)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_ids_and_names_are_cuptis() {
        use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as C;
        let header = [
            (C::CUPTI_DRIVER_TRACE_CBID_cuLaunch, "cuLaunch"),
            (C::CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, "cuLaunchGrid"),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
                "cuLaunchGridAsync",
            ),
            (C::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                "cuLaunchKernel_ptsz",
            ),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
                "cuLaunchCooperativeKernel",
            ),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
                "cuLaunchCooperativeKernel_ptsz",
            ),
            (C::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
                "cuGraphLaunch_ptsz",
            ),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
                "cuLaunchKernelEx",
            ),
            (
                C::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                "cuLaunchKernelEx_ptsz",
            ),
        ];
        let from_header: Vec<(u32, &str)> = header.iter().map(|(c, n)| (*c as u32, *n)).collect();
        assert_eq!(from_header, LAUNCHES);
    }

    #[test]
    fn every_launch_id_is_known_once_and_graphs_and_ex_read_their_own_parameter() {
        let mut ids: Vec<u32> = LAUNCHES.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), LAUNCHES.len());
        assert_eq!(launch_parameter(307), Some(0));
        assert_eq!(launch_parameter(652), Some(1));
        assert_eq!(launch_parameter(514), Some(0));
        assert_eq!(launch_parameter(243), None);
        for (id, name) in LAUNCHES {
            // `cuLaunchKernelEx` passes its launch config first.
            let index = usize::from(name.starts_with("cuLaunchKernelEx"));
            assert_eq!(launch_parameter(*id), Some(index), "{name}");
        }
        assert_eq!(
            (0..1024).filter_map(launch_parameter).count(),
            LAUNCHES.len()
        );
    }
}
