//! Detaching CUPTI once the first-launch watch has ended, and attaching it
//! again with only the callbacks the probe still wants — the default
//! (`PREWARM_DOCTOR_DETACH_AFTER_WATCH=0` keeps CUPTI attached).
//!
//! Why: kernel records switched on while a context runs leave a cost inside
//! CUPTI on every later launch, however and however often they are switched
//! (CUPTI alone: +0.75 µs a launch on an H200, +0.46 on an H100; records
//! switched on for one context only, +0.57), and only `cuptiFinalize` takes
//! it away (the same processes finalized: no slower than without CUPTI;
//! docs/footprint.md, eleventh and twelfth sessions). With the probe, a
//! launch after the watch cost 0.7–0.83 µs more attached and nothing that
//! resolves detached (lazy parts, 5,000 launches, 17 and 14 rounds). A
//! steady step of 700 launches pays it all run long; the detach pays
//! 2–3 ms once at the watch's end and opens a 16–35 ms gap in which the
//! training's driver calls are not traced (a notice gives its length and
//! the device memory in use that changed across it). CUPTI's documented
//! way to take its instrumentation away is to detach with `cuptiFinalize`
//! from a driver call's exit (where every thread's submitted work is
//! done); a later `cuptiSubscribe` attaches it anew.
//!
//! The watch's end asks for the detach; the launch callbacks stay on until
//! then, so the next launch's exit (or any traced call's) does it. Which
//! callbacks are on is asked of CUPTI first (`cuptiGetCallbackState`);
//! after `cuptiFinalize` a thread of the probe's subscribes again and
//! switches those back on, less the launch callbacks and whatever the
//! probe switched off meanwhile — only once the detaching callback has
//! returned: attached again under it, CUPTI crashed the training. Driver
//! calls in the gap are not traced, and a notice in the event file says
//! how long it was.

use crate::clock::now_ns;
use crate::cupti::{CUPTI_SUCCESS, CallbackFn};
use crate::guard::lock;
use crate::hold;
use crate::launches;
use crate::state::{DOMAIN_DRIVER_API, Probe};
use cudarc::cupti::sys::CUpti_CallbackData;
use prewarm_events::{NoticeLevel, Record, SLOWEST_DETACH_TEARDOWN, UNKNOWN_BYTES, UntracedSpan};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::Duration;

thread_local! {
    /// The writer thread calls into CUDA holding `writer_calls`, which the
    /// detach takes: it never detaches from there.
    static NOT_HERE: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread (the writer's) as one that never detaches.
pub fn never_from_this_thread() {
    let _ = NOT_HERE.try_with(|n| n.set(true));
}

/// The detach `PREWARM_DOCTOR_DETACH_AFTER_WATCH` asks for: `None` for `0` (CUPTI
/// stays attached), `Some(true)` for `bare` (detached, not attached again: a
/// bench setting), `Some(false)` — detached and attached again — for
/// anything else, unset included (the default).
pub fn detach_from_setting(value: Option<&str>) -> Option<bool> {
    match value {
        Some("0") => None,
        Some("bare") => Some(true),
        _ => Some(false),
    }
}

/// A detach after the watch is wanted (the default): if this CUPTI can do
/// it, else a notice says it stays attached.
pub fn want(p: &Probe, bare: bool) {
    if p.cupti.finalize.is_none() || p.cupti.callback_state.is_none() {
        p.notice(
            NoticeLevel::Info,
            "CUPTI stays attached after the first steps: this CUPTI lacks cuptiFinalize or cuptiGetCallbackState, so a launch after them may cost about 0.8 µs more than without the doctor (docs/footprint.md)",
        );
        return;
    }
    p.detach.set_wanted(bare);
}

/// At a driver call's callback while a detach is due: at its exit, CUPTI
/// is detached and a thread attaches it again with `callback` (the
/// probe's). Only one callback does it. True when that thread started: the
/// caller then marks its own last statement (`Detach::mark_returned`),
/// which the thread waits for before it subscribes.
///
/// # Safety
/// `data` is null or the `CUpti_CallbackData` CUPTI passes for a driver call.
pub unsafe fn at_driver_callback(
    p: &'static Probe,
    data: *const CUpti_CallbackData,
    callback: CallbackFn,
) -> bool {
    // SAFETY: null-checked; from CUPTI for the driver API domain.
    if data.is_null()
        || unsafe { (*data).callbackSite as u32 } == crate::calls::SITE_ENTER
        || NOT_HERE.try_with(Cell::get).unwrap_or(true)
    {
        return false;
    }
    if !p.detach.take() {
        return false;
    }
    let subscriber = p.subscriber.load(Ordering::Acquire);
    let (Some(finalize), Some(state)) = (p.cupti.finalize, p.cupti.callback_state) else {
        // Not reached (`want` checked both); the launch callbacks go off.
        launches::end_subscription(p);
        return false;
    };
    let keep: Vec<(u32, u32)> = hold::enabled_ids(subscriber, state)
        .into_iter()
        .filter(|&(domain, cbid)| {
            domain != DOMAIN_DRIVER_API || launches::launch_parameter(cbid).is_none()
        })
        .collect();
    // The device's free memory as CUPTI goes: the attach reads it again,
    // so that what the untraced gap changed is a number the account holds.
    // SAFETY: `data` was checked non-null above.
    let context = unsafe { (*data).context } as usize;
    let device = crate::calls::device_of(p, context as *mut std::ffi::c_void);
    let before = device_free(p, None);
    let t0 = now_ns();
    let rc = {
        // The writer thread calls into CUPTI (flushes, pool reads) under this.
        let _writer = lock(&p.writer_calls);
        p.subscriber.store(std::ptr::null_mut(), Ordering::Release);
        // SAFETY: at a driver call's exit, as CUPTI asks; records were
        // flushed when the watch ended.
        unsafe { finalize() }
    };
    if rc != CUPTI_SUCCESS {
        p.subscriber.store(subscriber, Ordering::Release);
        launches::end_subscription(p);
        p.notice(
            NoticeLevel::Warning,
            format!(
                "CUPTI refused to detach after the first steps ({}): it stays attached, launch callbacks off",
                p.cupti.describe(rc)
            ),
        );
        return false;
    }
    // The training's thread waited for the teardown: the probe's own time.
    let on_thread_ns = now_ns().saturating_sub(t0);
    p.callback_ns.fetch_add(on_thread_ns, Ordering::Relaxed);
    p.note_callback(on_thread_ns, SLOWEST_DETACH_TEARDOWN);
    launches::forget_subscription(p);
    if p.detach.bare() {
        stay_detached_after(
            p,
            on_thread_ns,
            "PREWARM_DOCTOR_DETACH_AFTER_WATCH=bare, a bench setting",
        );
        return false;
    }
    // The attach thread starts last and lets this callback return first:
    // CUPTI subscribed again while a callback from before its detach still
    // runs crashes the process (on an H100, CUPTI 13, 2026-12-06, call 29,
    // every run whose training's thread waited in here for the attach died
    // with SIGSEGV as it returned). It waits for the callback's last
    // statement (the caller's `mark_returned`), then a margin for CUPTI's
    // own return: a training's thread preempted between the two (a busy
    // host) is waited for, not raced. The training's calls in the gap go
    // untraced; the notice says how long it was.
    let attach_again = move || {
        if !p.detach.wait_returned(RETURN_LIMIT) {
            stay_detached_after(
                p,
                on_thread_ns,
                "the training's thread had not left the detaching callback after 2 s, and attaching under it could crash the process",
            );
            p.detach.set_attaching(false);
            return;
        }
        std::thread::sleep(AFTER_RETURN);
        let attached = attach(p, keep, callback, t0, on_thread_ns);
        let after = device_free(p, Some(context));
        let span = untraced_span((t0, now_ns()), device, before, after);
        let growth = gap_growth(&span);
        p.sink.push(&Record::Untraced(span));
        attached.tell(p, growth);
        p.detach.set_attaching(false);
    };
    p.detach.set_attaching(true);
    if let Err(e) = std::thread::Builder::new()
        .name("prewarm-attach".into())
        .spawn(attach_again)
    {
        p.detach.set_attaching(false);
        // Never attached from this callback (above): CUPTI stays detached.
        stay_detached_after(
            p,
            on_thread_ns,
            &format!("the probe could not start its attach thread ({e})"),
        );
        return false;
    }
    true
}

/// How long the attach thread lets the detaching callback return after its
/// last statement, through CUPTI's own code, before subscribing: no hook
/// marks that return, which takes microseconds.
const AFTER_RETURN: Duration = Duration::from_millis(5);

/// The longest the attach thread waits for the detaching callback's last
/// statement before it gives up attaching (CUPTI stays detached, said).
const RETURN_LIMIT: Duration = Duration::from_secs(2);

/// The device's free and total bytes (`cuMemGetInfo`) with the calling
/// thread's context, or with `context` made current for the reading (the
/// attach thread has none of its own); None when the driver could not say.
fn device_free(p: &Probe, context: Option<usize>) -> Option<(u64, u64)> {
    let driver = p.driver.as_ref()?;
    match context {
        // SAFETY: the training's context, alive while it makes driver calls.
        Some(ctx) => unsafe { driver.free_total_in(ctx as *mut std::ffi::c_void) },
        None => driver.free_total(),
    }
}

/// The record of the gap, `(start, end)`, with the readings at both ends
/// (free, total), unknown where the driver could not say.
fn untraced_span(
    (t_start, t_end): (u64, u64),
    device: i32,
    before: Option<(u64, u64)>,
    after: Option<(u64, u64)>,
) -> UntracedSpan {
    let free = |r: Option<(u64, u64)>| r.map_or(UNKNOWN_BYTES, |(f, _)| f);
    UntracedSpan {
        t_start,
        t_end,
        device,
        free_before: free(before),
        free_after: free(after),
        total: after.or(before).map_or(UNKNOWN_BYTES, |(_, t)| t),
    }
}

/// The change in device memory in use across the gap, in bytes (None when
/// either side could not be read).
fn gap_growth(span: &UntracedSpan) -> Option<i64> {
    (span.free_before != UNKNOWN_BYTES && span.free_after != UNKNOWN_BYTES)
        .then(|| span.free_before as i64 - span.free_after as i64)
}

/// The gap's change in device memory in use, as the notice says it.
fn gap_memory_text(growth: Option<i64>) -> String {
    match growth {
        Some(bytes) => format!(
            "; device memory in use changed by {:+.1} MiB across it (cuMemGetInfo at the detach and after the attach: the account holds what no traced call explains as its own part)",
            bytes as f64 / (1u64 << 20) as f64
        ),
        None => "; device memory in use could not be read across it".to_string(),
    }
}

/// What the attach did, for its notice.
enum Attached {
    /// Subscribed again: the callbacks back on, the gap since the detach,
    /// the finalize's time on the training's thread, those CUPTI refused.
    Again {
        on: usize,
        gap_ns: u64,
        finalize_ns: u64,
        refused: Vec<String>,
    },
    /// CUPTI refused the subscription (capture stopped, said why).
    Refused,
}

impl Attached {
    /// The notice: attached again after a gap in which no driver call was
    /// traced (and how device memory in use changed across it), and any
    /// callbacks CUPTI refused.
    fn tell(self, p: &Probe, growth: Option<i64>) {
        let Attached::Again {
            on,
            gap_ns,
            finalize_ns,
            refused,
        } = self
        else {
            return;
        };
        let gap_ms = gap_ns as f64 / 1e6;
        let finalize_ms = finalize_ns as f64 / 1e6;
        p.notice(
            NoticeLevel::Info,
            format!(
                "CUPTI detached after the first steps and attached again with {on} callbacks in {gap_ms:.1} ms, {finalize_ms:.1} ms of it cuptiFinalize on the training's thread, so that later launches do not pay CUPTI's cost (PREWARM_DOCTOR_DETACH_AFTER_WATCH=0 keeps it attached): driver calls in between were not traced{}",
                gap_memory_text(growth)
            ),
        );
        if !refused.is_empty() {
            p.notice(
                NoticeLevel::Warning,
                format!(
                    "after attaching again CUPTI refused these callbacks (not traced from here): {}",
                    refused.join(", ")
                ),
            );
        }
    }
}

/// CUPTI stays detached (`why`: `bare` asked it, or the attach could not
/// happen): nothing is traced from here, and the report says so.
fn stay_detached_after(p: &Probe, finalize_ns: u64, why: &str) {
    p.notice(
        NoticeLevel::Warning,
        format!(
            "CUPTI detached after the first steps and not attached again, {:.1} ms of cuptiFinalize on the training's thread: {why}; no driver call was traced after it",
            finalize_ns as f64 / 1e6
        ),
    );
}

/// Subscribes again and switches the kept callbacks back on (those the
/// probe still wants); capture stops, said why, if CUPTI refuses.
fn attach(
    p: &'static Probe,
    keep: Vec<(u32, u32)>,
    callback: CallbackFn,
    detached_at: u64,
    finalize_ns: u64,
) -> Attached {
    let mut subscriber = std::ptr::null_mut();
    // SAFETY: writes the new subscriber handle; `callback` is the probe's.
    let rc = unsafe { (p.cupti.subscribe)(&mut subscriber, callback, std::ptr::null_mut()) };
    if rc != CUPTI_SUCCESS {
        p.disable(&format!(
            "CUPTI was detached after the first steps and refused the probe's subscription again ({})",
            p.cupti.describe(rc)
        ));
        return Attached::Refused;
    }
    p.subscriber.store(subscriber, Ordering::Release);
    let mut on = 0;
    let mut refused = Vec::new();
    for (domain, cbid) in keep {
        if !hold::still_wanted(p, domain, cbid) {
            continue;
        }
        // SAFETY: the new subscriber, a domain and id CUPTI had on before.
        let rc = unsafe { (p.cupti.enable_callback)(1, subscriber, domain, cbid) };
        if rc == CUPTI_SUCCESS {
            on += 1;
        } else {
            refused.push(format!("{domain}/{cbid}: {}", p.cupti.describe(rc)));
        }
    }
    Attached::Again {
        on,
        gap_ns: now_ns().saturating_sub(detached_at),
        finalize_ns,
        refused,
    }
}
