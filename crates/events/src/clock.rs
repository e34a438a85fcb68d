//! The one clock every prewarm-doctor event uses: CLOCK_MONOTONIC in
//! nanoseconds (Python's `time.monotonic_ns()` reads the same clock), so that
//! the probe's, the shim's and the NVML sampler's records line up.

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
