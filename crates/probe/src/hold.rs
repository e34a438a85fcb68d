//! Holding every callback the probe has switched on, and releasing them, for
//! a bench that times a training's steady steps with and without them in
//! one process (benches/gpu_steady_toggles.py): whole processes of one
//! script differ by far more than the few milliseconds a steady step could
//! lose to the probe, blocks of steps within one process do not.
//!
//! CUPTI says which of its callback ids are on (`cuptiGetCallbackState`);
//! those are switched off and kept. Releasing switches them on again, except
//! those the probe switched off for good meanwhile: the launch callbacks
//! once the first-launch watch ended, the stream-ordered calls once their
//! tracing stopped. Never used by a training's capture.

use crate::cupti::{CUPTI_SUCCESS, CuptiResult};
use crate::driver_api;
use crate::guard::lock;
use crate::launches;
use crate::state::{DOMAIN_DRIVER_API, DOMAIN_RESOURCE, Probe};
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

/// Callback ids looked at in each domain (CUPTI's are below this).
const MAX_CBID: u32 = 1024;

/// The (domain, callback id) pairs held off now.
static HELD: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());

/// Holds (`held`) or releases the probe's callbacks: how many it switched,
/// or -1 when this CUPTI cannot say which are on, or there is no subscriber.
pub fn hold(p: &Probe, held: bool) -> i32 {
    let subscriber = p.subscriber.load(Ordering::Acquire);
    let Some(state) = p.cupti.callback_state.filter(|_| !subscriber.is_null()) else {
        return -1;
    };
    let mut kept = lock(&HELD);
    if !held {
        let mut switched = 0;
        for (domain, cbid) in kept.drain(..) {
            if still_wanted(p, domain, cbid)
                // SAFETY: the probe's subscriber, a domain and id CUPTI reported on.
                && unsafe { (p.cupti.enable_callback)(1, subscriber, domain, cbid) } == CUPTI_SUCCESS
            {
                switched += 1;
            }
        }
        return switched;
    }
    for (domain, cbid) in enabled_ids(subscriber, state) {
        // SAFETY: the probe's subscriber, a domain and id CUPTI reported on.
        if unsafe { (p.cupti.enable_callback)(0, subscriber, domain, cbid) } == CUPTI_SUCCESS {
            kept.push((domain, cbid));
        }
    }
    kept.len() as i32
}

/// `cuptiGetCallbackState`'s signature.
pub(crate) type CallbackState =
    unsafe extern "C" fn(*mut u32, *mut c_void, u32, u32) -> CuptiResult;

/// The (domain, callback id) pairs CUPTI says are on for `subscriber`, in
/// the two domains the probe subscribes (also what detach.rs re-enables).
pub(crate) fn enabled_ids(subscriber: *mut c_void, state: CallbackState) -> Vec<(u32, u32)> {
    let mut on_ids = Vec::new();
    for domain in [DOMAIN_DRIVER_API, DOMAIN_RESOURCE] {
        for cbid in 0..MAX_CBID {
            let mut on = 0u32;
            // SAFETY: writes one u32; the probe's subscriber.
            if unsafe { state(&mut on, subscriber, domain, cbid) } == CUPTI_SUCCESS && on != 0 {
                on_ids.push((domain, cbid));
            }
        }
    }
    on_ids
}

/// Whether the probe still wants a callback on (a held one at release, a
/// kept one when CUPTI is attached again).
pub(crate) fn still_wanted(p: &Probe, domain: u32, cbid: u32) -> bool {
    if domain != DOMAIN_DRIVER_API {
        return true;
    }
    if launches::launch_parameter(cbid).is_some() {
        return lock(&p.launches.state).subscribed;
    }
    if driver_api::stream_ordered_cbids().any(|c| c == cbid) {
        return p.pools.counting();
    }
    true
}
