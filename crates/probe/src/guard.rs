//! Keeping the probe's own failures out of the training process.
//!
//! The rule is that no panic can happen: thread-locals are reached with
//! `try_with`, locks survive poisoning, nothing is indexed or unwrapped on data
//! the probe does not control. As a second line, every entry point CUDA, CUPTI,
//! the shim or libc can call (callbacks, buffer hand-offs, exit and signal
//! handlers, the flush thread) runs its body under `catch_unwind`, so a bug
//! still cannot unwind into C frames or abort the process.
//!
//! A caught panic must not print either. Rust's default panic hook writes the
//! message (and with `RUST_BACKTRACE`, a backtrace) to stderr, which is the
//! training's stderr. The probe therefore installs a quiet hook that keeps the
//! first message for a notice in the run folder and writes nothing.
//!
//! Why a hook is safe here although hooks are process-global: the probe is a
//! cdylib, so it carries its own private copy of Rust's standard library; only
//! its C entry points are exported. The hook it sets is the hook of that copy
//! and governs panics raised in the probe's own code only. A training program
//! written in Rust, or other Rust libraries in the process, keep their own
//! std, their own hook and their own panic output, untouched; so there is no
//! previous hook of theirs to chain to (the previous hook of the probe's copy is
//! the default one, which is exactly what must stay silent).

use std::panic::PanicHookInfo;
use std::sync::{Mutex, MutexGuard, PoisonError};

static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Installs the quiet hook of the probe's own std (see the module docs).
pub fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(remember_panic));
}

fn remember_panic(info: &PanicHookInfo<'_>) {
    // try_lock: a panic while the message is being stored must not deadlock.
    if let Ok(mut first) = FIRST_PANIC.try_lock()
        && first.is_none()
    {
        *first = Some(info.to_string());
    }
}

/// The first panic message caught so far, for the notice in the event file.
pub fn first_panic() -> Option<String> {
    FIRST_PANIC.try_lock().ok().and_then(|first| first.clone())
}

/// Locks a mutex even if a caught panic poisoned it: the probe's locked data
/// stays consistent at every point where a panic could have been raised.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
