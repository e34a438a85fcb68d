//! The first-launch watch's data (launches.rs acts on it): which way kernel
//! records are taken, the keys seen so far, and whether CUPTI is to be
//! detached at its end (detach.rs acts on that). Below `state`, which
//! holds it, and `launches` and `detach`, which read and change it.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A hasher for pointer pairs (the Fx multiply-rotate): SipHash would be
/// most of a launch's lookup, and these keys are handles, not attacker input.
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type HandleSet = HashSet<(usize, usize), BuildHasherDefault<HandleHasher>>;

/// How the probe takes kernel records (`PREWARM_DOCTOR_KERNEL_RECORDS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelWatch {
    /// `0`: no kernel records at all (first launches and local-memory growth unseen).
    Off,
    /// The default: records around each function's first launch only.
    FirstLaunches,
    /// `all`: records on every launch while the watch is on (the path before
    /// first-launch tracing; kept to compare the two on one script).
    EveryLaunch,
}

impl KernelWatch {
    /// The watch an environment value asks for: `0` off, `all` every
    /// launch, anything else (unset, `first`) first launches.
    pub fn from_setting(value: Option<&str>) -> KernelWatch {
        match value {
            Some("0") => KernelWatch::Off,
            Some("all") => KernelWatch::EveryLaunch,
            _ => KernelWatch::FirstLaunches,
        }
    }
}

/// The first-launch watch's shared state.
#[derive(Default)]
pub struct FirstLaunches {
    pub(crate) state: Mutex<Watch>,
    /// Read without the lock at every launch's enter.
    pub(crate) watching: AtomicBool,
    /// Bumped whenever the watch ends, so that a window opened before can
    /// never close one opened after.
    pub(crate) generation: AtomicU64,
    /// First launches whose records CUPTI would not switch on (each one
    /// unrecorded; the first says why in a notice).
    pub refused: AtomicU64,
}

/// The watch under its lock.
#[derive(Default)]
pub(crate) struct Watch {
    /// Every (context, function) launched while watching, by any thread.
    pub(crate) seen: HandleSet,
    /// Launches between a first launch's enter and exit, on any thread.
    pub(crate) open: u32,
    pub(crate) on: bool,
    pub(crate) paused: bool,
    /// Whether the launch callbacks are subscribed now.
    pub(crate) subscribed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attach_waits_for_the_detaching_callbacks_last_statement() {
        let d = std::sync::Arc::new(Detach::default());
        let limit = std::time::Duration::from_millis(30);
        // Never marked: given up after the limit, not before.
        let start = std::time::Instant::now();
        assert!(!d.wait_returned(limit));
        assert!(start.elapsed() >= limit);
        // Marked from the training's thread while the attach thread waits.
        let marker = std::sync::Arc::clone(&d);
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            marker.mark_returned();
        });
        assert!(d.wait_returned(std::time::Duration::from_secs(5)));
        t.join().unwrap();
    }

    #[test]
    fn the_setting_names_the_watch() {
        assert_eq!(KernelWatch::from_setting(None), KernelWatch::FirstLaunches);
        assert_eq!(
            KernelWatch::from_setting(Some("first")),
            KernelWatch::FirstLaunches
        );
        assert_eq!(KernelWatch::from_setting(Some("0")), KernelWatch::Off);
        assert_eq!(
            KernelWatch::from_setting(Some("all")),
            KernelWatch::EveryLaunch
        );
    }
}

/// Whether a detach after the watch was asked for, and whether one is due.
#[derive(Default)]
pub struct Detach {
    wanted: AtomicBool,
    pending: AtomicBool,
    /// `bare`: CUPTI is not attached again (a bench setting).
    bare: AtomicBool,
    /// The attach thread is at work: its record and notice are not written
    /// yet (the exit waits for them, a while).
    attaching: AtomicBool,
    /// The callback that detached has run its last statement: the attach
    /// thread subscribes only after it (see [`Detach::wait_returned`]).
    returned: AtomicBool,
}

impl Detach {
    /// The run asked for it and this CUPTI can do it; `bare`, CUPTI stays
    /// detached after it.
    pub fn set_wanted(&self, bare: bool) {
        self.bare.store(bare, Ordering::Relaxed);
        self.wanted.store(true, Ordering::Relaxed);
    }

    /// The detach leaves CUPTI detached (`bare`).
    pub fn bare(&self) -> bool {
        self.bare.load(Ordering::Relaxed)
    }

    /// At the watch's end: a detach becomes due (once).
    pub fn request(&self) {
        if self.wanted.swap(false, Ordering::Relaxed) {
            self.pending.store(true, Ordering::Release);
        }
    }

    /// A detach is due: asked at every callback, one atomic load.
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// The attach thread starts (`true`) or has written what it found.
    pub fn set_attaching(&self, attaching: bool) {
        self.attaching.store(attaching, Ordering::Release);
    }

    /// Waits up to `limit` for an attach under way to finish, so that a
    /// process exiting inside the gap still writes the gap's record and
    /// notice; returns at once when none is.
    pub fn wait_for_attach(&self, limit: std::time::Duration) {
        let start = std::time::Instant::now();
        while self.attaching.load(Ordering::Acquire) && start.elapsed() < limit {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// The detaching callback's last statement: from here only CUPTI's own
    /// return path (microseconds) is left to it.
    pub fn mark_returned(&self) {
        self.returned.store(true, Ordering::Release);
    }

    /// Waits up to `limit` for [`Detach::mark_returned`]; false when it did
    /// not come (the training's thread held up that long), so the attach
    /// thread never subscribes under a callback still running.
    pub fn wait_returned(&self, limit: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while !self.returned.load(Ordering::Acquire) {
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        true
    }

    /// Takes the due detach: true for exactly one caller.
    pub fn take(&self) -> bool {
        self.pending
            .compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}
