//! The switches the doctor passes to every rank through the environment,
//! and how the probe reads them.

use std::time::Duration;

/// Directory for this host's event files; without it the probe does nothing.
pub const DIR: &str = "PREWARM_DOCTOR_DIR";
/// libcupti path found by the doctor (used when no copy is loaded yet).
pub const CUPTI: &str = "PREWARM_DOCTOR_CUPTI";
/// Host tag for multi-node runs.
pub const HOST: &str = "PREWARM_DOCTOR_HOST";
/// Kernel activity records: unset (or `first`) for each function's first
/// launch only, `0` for none at all, `all` for every launch while the
/// first steps are watched (the path before first-launch tracing).
pub const KERNEL_RECORDS: &str = "PREWARM_DOCTOR_KERNEL_RECORDS";
/// `1` turns CUPTI's module-loaded callback on (module image sizes). Off by
/// default: CUPTI then processes every module load, which cost ~20% of
/// step 1 on the H200 overhead benchmark.
pub const MODULE_RECORDS: &str = "PREWARM_DOCTOR_MODULE_RECORDS";
/// Stream-ordered calls in a row on known pools after which the probe
/// stops tracing them (unset: 4096, or a training step on known pools
/// first); `all` traces every one (their counts stay known, at ~1.4 us of
/// CUPTI dispatch per call).
pub const POOL_CALLS: &str = "PREWARM_DOCTOR_POOL_CALLS";
/// Unset (the default) or `1`: once the first-launch watch has ended, CUPTI
/// is detached (`cuptiFinalize`) and attached again with only the callbacks
/// the probe still wants (detach.rs): kernel records switched on while a
/// context runs leave ~0.8 µs on every later launch until CUPTI is
/// detached; driver calls between the detach and the attach (16–35 ms) are
/// not traced (docs/footprint.md). `0`: CUPTI stays attached. `bare`, for
/// the benches: CUPTI is not attached again, so nothing at all is traced
/// after the watch — what a run costs with the probe loaded and CUPTI gone.
pub const DETACH_AFTER_WATCH: &str = "PREWARM_DOCTOR_DETACH_AFTER_WATCH";
/// Milliseconds between the writer thread's ticks while kernel records
/// are on (default 10): for the overhead breakdown.
pub const EARLY_TICK_MS: &str = "PREWARM_DOCTOR_EARLY_TICK_MS";
/// Milliseconds between the writer thread's reads of the pools' sizes
/// once the first steps are over (unset: every tick, 100 ms; `0`: none
/// after them but the watch's end and exit): for the overhead
/// breakdown, where the async allocator's pool is read all run long.
pub const POOL_READ_MS: &str = "PREWARM_DOCTOR_POOL_READ_MS";
/// `probe`: CUPTI calls the probe's clock for activity timestamps instead
/// of keeping its own (converted by an offset): for the overhead breakdown.
pub const CUPTI_CLOCK: &str = "PREWARM_DOCTOR_CUPTI_CLOCK";

/// A variable's value, unset and empty alike read as absent.
pub(crate) fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A number of milliseconds from `name`: `Ok(None)` when unset, `Err` with
/// the value when it is not a number (the caller says so in a notice).
pub(crate) fn millis(name: &str) -> Result<Option<Duration>, String> {
    match var(name) {
        None => Ok(None),
        Some(v) => v
            .parse()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_are_read_or_refused_with_the_value() {
        // SAFETY: tests of this module alone touch these variables.
        unsafe {
            std::env::set_var("PREWARM_DOCTOR_TEST_MS_A", "250");
            std::env::set_var("PREWARM_DOCTOR_TEST_MS_B", "fast");
            std::env::set_var("PREWARM_DOCTOR_TEST_MS_C", "");
        }
        assert_eq!(
            millis("PREWARM_DOCTOR_TEST_MS_A"),
            Ok(Some(Duration::from_millis(250)))
        );
        assert_eq!(millis("PREWARM_DOCTOR_TEST_MS_B"), Err("fast".to_string()));
        assert_eq!(millis("PREWARM_DOCTOR_TEST_MS_C"), Ok(None));
        assert_eq!(millis("PREWARM_DOCTOR_TEST_MS_UNSET"), Ok(None));
    }
}
