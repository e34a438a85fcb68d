//! prewarm-probe: the library CUDA loads into every training process through
//! `CUDA_INJECTION64_PATH`. It subscribes to CUPTI callbacks for every device
//! allocation path, module load and context creation, takes a kernel activity
//! record for each function's first launch during setup and the first steps
//! (launches.rs), and streams compact events to
//! `$PREWARM_DOCTOR_DIR/<rank>.pid-<pid>.events`.
//!
//! Rules it lives by: at most one set lookup per kernel launch, and only
//! while the first steps are watched (none after); no
//! panics or aborts in the host process and nothing written to its
//! stdout/stderr (guard.rs); any failure leaves a notice in the event file and
//! lets the run continue un-instrumented.

#[cfg(panic = "abort")]
compile_error!(
    "prewarm-probe must be built with panic = \"unwind\": it catches every panic at its C entry points so that a probe bug never takes the training process down; with panic = \"abort\" any bug would abort the training"
);

mod activity;
mod callbacks;
mod caller;
mod calls;
mod clock;
mod cupti;
mod detach;
mod driver_api;
mod dynlib;
pub mod env;
mod guard;
mod hold;
mod inflight;
mod launch_state;
mod launches;
pub mod objects;
mod pools;
mod signals;
mod sink;
mod startup;
mod state;
mod writer;

use state::probe;
use std::panic::catch_unwind;

/// CUDA calls this once per process, during cuInit, when the library is named
/// by `CUDA_INJECTION64_PATH`. Always returns 1 so CUDA initialisation proceeds.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    guard::install_quiet_panic_hook();
    let _ = catch_unwind(startup::initialise);
    1
}

/// For the shim: switch kernel activity records on (1) or off (0). Returns 1 on success.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_set_kernel_records(enabled: i32) -> i32 {
    catch_unwind(|| {
        probe()
            .map(|p| callbacks::set_kernel_records(p, enabled != 0) as i32)
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// For the shim: pause kernel records (1) around an autotune benchmark's
/// repeated launches, or resume them (0); resuming never turns on records
/// that are off. Returns 1 when it switched.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_pause_kernel_records(paused: i32) -> i32 {
    catch_unwind(|| {
        probe()
            .map(|p| callbacks::pause_kernel_records(p, paused != 0) as i32)
            .unwrap_or(0)
    })
    .unwrap_or(0)
}

/// For the shim: training step `step` ended (it says so for the first
/// steps): a step that used only known pools stops the tracing of
/// stream-ordered calls (pools.rs has the rule).
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_step_ended(step: u32) {
    let _ = catch_unwind(|| {
        if let Some(p) = probe() {
            p.pools.step_ended(step);
        }
    });
}

/// For the shim: write everything buffered now (e.g. at a step boundary or exit).
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_flush() {
    let _ = catch_unwind(writer::flush_all);
}

/// For benches/gpu_steady_toggles.py: hold every callback the probe has on
/// (1) or release them (0), to time steady steps with and without them in
/// one process. Returns how many it switched, -1 when it could not.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_hold_callbacks(held: i32) -> i32 {
    catch_unwind(|| probe().map(|p| hold::hold(p, held != 0)).unwrap_or(-1)).unwrap_or(-1)
}

/// For `prewarm-doctor check`: 1 when capture is live in this process.
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_active() -> i32 {
    catch_unwind(|| probe().is_some() as i32).unwrap_or(0)
}

/// For the CPU harness: raises a panic inside the probe, through the same
/// catch-and-count path a callback uses, to prove that nothing reaches the
/// process's stderr and that capture continues. Returns 1 when it was caught.
#[doc(hidden)]
#[unsafe(no_mangle)]
pub extern "C" fn prewarm_probe_test_internal_error() -> i32 {
    let Some(p) = probe() else { return 0 };
    let caught = catch_unwind(|| panic!("deliberate panic from the probe's self-test"));
    if caught.is_err() {
        p.internal_error("self-test");
    }
    caught.is_err() as i32
}
