//! The probe's clock (the events' one: CLOCK_MONOTONIC nanoseconds) and the
//! caller's thread id.

pub use prewarm_events::clock::now_ns;

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
