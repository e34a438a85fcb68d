//! The fatal-signal flush: when the process is about to die by SIGSEGV,
//! SIGBUS, SIGILL, SIGFPE or SIGABRT, write what the probe has buffered, then
//! hand the signal on exactly as if the probe were not there.
//!
//! - The previous action is read and stored *before* ours is installed, so a
//!   signal arriving at any moment finds it.
//! - The handler runs on an alternate signal stack (`SA_ONSTACK`), so a stack
//!   overflow can still be flushed. Alternate stacks are per thread: the probe
//!   gives one to the thread that initialised CUDA and to every thread on its
//!   first CUDA call the probe sees, unless the thread has one already (a Rust
//!   or Go runtime sets its own). Limit: a thread the probe never saw (one that
//!   only launches kernels, say) has no alternate stack from the probe, so a
//!   stack overflow there dies unflushed, as it would without the probe.
//! - Re-delivery keeps the original siginfo. The previous action is restored
//!   first; then a synchronous fault (raised by the faulting instruction,
//!   `si_code > 0`) is re-delivered by returning, so the instruction faults
//!   again and the previous handler or the default action sees the real fault;
//!   an asynchronous signal (`abort()`, `kill`) is queued again to this thread
//!   with `rt_tgsigqueueinfo` and the original siginfo, falling back to
//!   `raise`. The signal is blocked while the handler runs, so it is delivered
//!   the moment the handler returns.
//!
//! SIGTERM and SIGKILL are left alone: the training program owns SIGTERM, and
//! at most the last 100 ms of events are lost there.

use std::cell::{OnceCell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

/// Signals that end the process abnormally.
const FATAL_SIGNALS: [c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// The action that was installed before the probe's, per fatal signal.
struct Previous {
    saved: AtomicBool,
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
}

// SAFETY: `action` is written once, before `saved` is set with Release
// ordering, and read only after `saved` was read true with Acquire ordering.
unsafe impl Sync for Previous {}

static PREVIOUS: [Previous; 5] = [const {
    Previous {
        saved: AtomicBool::new(false),
        action: UnsafeCell::new(MaybeUninit::uninit()),
    }
}; 5];

/// What a fatal signal handler flushes (set by the probe at start).
pub type FlushFn = fn();
static FLUSH: std::sync::OnceLock<FlushFn> = std::sync::OnceLock::new();

/// Installs the handlers (once per process) and an alternate stack for the
/// calling thread.
pub fn install(flush: FlushFn) {
    if FLUSH.set(flush).is_err() {
        return;
    }
    ensure_alt_stack();
    for (slot, &sig) in PREVIOUS.iter().zip(FATAL_SIGNALS.iter()) {
        // SAFETY: plain sigaction calls on zeroed structs; `slot.action` is
        // written before `saved` publishes it and before our handler exists.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            (*slot.action.get()).write(old);
            slot.saved.store(true, Ordering::Release);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction =
                on_fatal_signal as extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(sig, &new, std::ptr::null_mut());
        }
    }
}

extern "C" fn on_fatal_signal(sig: c_int, info: *mut libc::siginfo_t, _context: *mut c_void) {
    // SAFETY: errno is thread-local and always addressable.
    let errno = unsafe { *libc::__errno_location() };
    if let Some(flush) = FLUSH.get() {
        // A panic cannot unwind out of an extern "C" handler; it is caught here.
        let _ = std::panic::catch_unwind(*flush);
    }
    if let Some(i) = FATAL_SIGNALS.iter().position(|s| *s == sig) {
        restore_previous(i, sig);
        // SAFETY: `info` comes from the kernel for an SA_SIGINFO handler.
        let synchronous = !info.is_null() && unsafe { (*info).si_code } > 0 && sig != libc::SIGABRT;
        if !synchronous {
            redeliver(sig, info);
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

fn restore_previous(i: usize, sig: c_int) {
    let Some(slot) = PREVIOUS.get(i) else { return };
    // SAFETY: the action was fully written before `saved` was set (Release/Acquire).
    unsafe {
        if slot.saved.load(Ordering::Acquire) {
            libc::sigaction(sig, (*slot.action.get()).as_ptr(), std::ptr::null_mut());
        } else {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// Queues the signal again to this thread with its original siginfo.
fn redeliver(sig: c_int, info: *mut libc::siginfo_t) {
    // SAFETY: async-signal-safe system calls; `info` is the kernel's siginfo.
    unsafe {
        if !info.is_null() {
            let rc = libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                libc::syscall(libc::SYS_gettid),
                sig,
                info,
            );
            if rc == 0 {
                return;
            }
        }
        libc::raise(sig);
    }
}

/// Blocks every signal a thread can refuse on the calling (probe-owned)
/// thread, so signals meant for the process (kill, sigqueue, SIGINT, SIGTERM)
/// go to the program's threads, as they would without the probe. Faults
/// raised by the thread itself cannot be blocked and are left alone.
pub fn leave_signals_to_the_program() {
    // SAFETY: plain signal-mask calls on a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE] {
            libc::sigdelset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Bytes of each alternate signal stack the probe maps (plus one guard page).
const ALT_STACK_BYTES: usize = 64 << 10;

/// An alternate signal stack the probe gave a thread; taken back when the
/// thread ends (the main thread keeps it for exit handlers).
struct AltStack {
    mapping: *mut c_void,
    len: usize,
    stack: *mut c_void,
}

impl AltStack {
    /// Gives the calling thread an alternate stack unless it has one.
    fn install_if_missing() -> Option<AltStack> {
        // SAFETY: sigaltstack/mmap/mprotect with values we own.
        unsafe {
            let mut current: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(std::ptr::null(), &mut current) != 0
                || current.ss_flags & libc::SS_DISABLE == 0
            {
                return None;
            }
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE))
                .ok()
                .filter(|p| *p > 0)
                .unwrap_or(4096);
            let len = ALT_STACK_BYTES + page;
            let mapping = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            );
            if mapping == libc::MAP_FAILED {
                return None;
            }
            // The lowest page is a guard: an overflow of the handler faults cleanly.
            libc::mprotect(mapping, page, libc::PROT_NONE);
            let stack = (mapping as *mut u8).add(page) as *mut c_void;
            let new = libc::stack_t {
                ss_sp: stack,
                ss_flags: 0,
                ss_size: ALT_STACK_BYTES,
            };
            if libc::sigaltstack(&new, std::ptr::null_mut()) != 0 {
                libc::munmap(mapping, len);
                return None;
            }
            Some(AltStack {
                mapping,
                len,
                stack,
            })
        }
    }
}

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: only our own stack is disabled and unmapped, and only when
        // the thread is not running on it.
        unsafe {
            if libc::syscall(libc::SYS_gettid) == libc::getpid() as libc::c_long {
                return; // the main thread: keep it for exit handlers
            }
            let mut current: libc::stack_t = std::mem::zeroed();
            if libc::sigaltstack(std::ptr::null(), &mut current) != 0
                || current.ss_sp != self.stack
                || current.ss_flags & libc::SS_ONSTACK != 0
            {
                return;
            }
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            if libc::sigaltstack(&off, std::ptr::null_mut()) == 0 {
                libc::munmap(self.mapping, self.len);
            }
        }
    }
}

thread_local! {
    static ALT_STACK: OnceCell<Option<AltStack>> = const { OnceCell::new() };
}

/// Gives the calling thread an alternate signal stack once (cheap after the
/// first call; nothing once the thread's locals are being destroyed).
pub fn ensure_alt_stack() {
    let _ = ALT_STACK.try_with(|cell| {
        cell.get_or_init(AltStack::install_if_missing);
    });
}
