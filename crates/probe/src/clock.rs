//! The one clock every prewarm-doctor event uses: CLOCK_MONOTONIC in nanoseconds
//! (Python's `time.monotonic_ns()` reads the same clock).

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

thread_local! {
    /// This thread's kernel id, once read (no destructor: always accessible).
    static THREAD_ID: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// The kernel thread id of the caller (a system call the first time per thread).
pub fn thread_id() -> u32 {
    THREAD_ID
        .try_with(|id| {
            if id.get() == 0 {
                id.set(gettid());
            }
            id.get()
        })
        .unwrap_or_else(|_| gettid())
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}
