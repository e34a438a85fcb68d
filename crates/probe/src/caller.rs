//! Which library asked for memory: the first stack frame outside libcuda,
//! libcudart, libcupti, libc and the probe itself, resolved with dladdr and cached
//! per return address. The walk stops at that frame, so its cost does not grow
//! with the depth of the Python stack above. Only used on allocation-type
//! calls, never per kernel launch.
//!
//! Return addresses already seen are looked up in a fixed-size, lock-free,
//! insert-only table, so threads walking their stacks at once do not
//! serialise; only an address seen for the first time (a dladdr) takes the
//! lock of the slow cache, which also holds the library paths.

use crate::dynlib::path_of_address;
use crate::guard::lock;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// `_Unwind_Reason_Code` values of the Itanium unwinding ABI (libgcc_s).
const URC_NO_REASON: i32 = 0;
const URC_NORMAL_STOP: i32 = 4;

type TraceFn = unsafe extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> i32;

unsafe extern "C" {
    // libgcc_s (the unwinder glibc's backtrace() uses too), linked by std.
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> i32;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
}

/// Deepest frame looked at: the caller sits a few frames below the driver.
const MAX_FRAMES: u32 = 48;
const SKIP: u32 = u32::MAX;

/// Slots of the lock-free return-address table (a power of two); return
/// addresses of allocating call sites number in the hundreds.
const FAST_SLOTS: usize = 8192;
/// Slots looked at from an address's home slot.
const FAST_PROBES: usize = 16;

/// Return address → library id, without a lock. A slot's address is set
/// once (0: free) and its id after it (0: not yet known, so a reader takes
/// the slow path); entries are never removed, so a reader that sees both
/// sees a final pair.
struct FastTable {
    addrs: Box<[AtomicUsize]>,
    ids: Box<[AtomicU32]>,
}

impl FastTable {
    fn new() -> FastTable {
        FastTable {
            addrs: (0..FAST_SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            ids: (0..FAST_SLOTS).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn home(addr: usize) -> usize {
        // Fibonacci hashing: return addresses share their low bits' patterns.
        (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % FAST_SLOTS
    }

    fn get(&self, addr: usize) -> Option<u32> {
        let home = Self::home(addr);
        for i in 0..FAST_PROBES {
            let slot = (home + i) % FAST_SLOTS;
            match self.addrs[slot].load(Ordering::Acquire) {
                0 => return None,
                a if a == addr => {
                    let id = self.ids[slot].load(Ordering::Acquire);
                    return (id != 0).then_some(id);
                }
                _ => {}
            }
        }
        None
    }

    /// Adds a pair (nothing when its slots are full: it stays on the slow path).
    fn put(&self, addr: usize, id: u32) {
        let home = Self::home(addr);
        for i in 0..FAST_PROBES {
            let slot = (home + i) % FAST_SLOTS;
            match self.addrs[slot].compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.ids[slot].store(id, Ordering::Release);
                    return;
                }
                Err(a) if a == addr => {
                    self.ids[slot].store(id, Ordering::Release);
                    return;
                }
                Err(_) => {}
            }
        }
    }
}

/// The callers of allocations: the lock-free table in front of the slow cache.
pub struct Callers {
    fast: FastTable,
    slow: Mutex<CallerCache>,
}

impl Callers {
    /// `own_path` is the probe's own file, skipped like the CUDA plumbing.
    pub fn new(own_path: &str) -> Callers {
        Callers {
            fast: FastTable::new(),
            slow: Mutex::new(CallerCache::new(own_path)),
        }
    }

    /// Walks the current stack up to the first frame outside the plumbing and
    /// returns its library id (0 when none was found), plus the library's path
    /// if it is new.
    pub fn caller(&self) -> (u32, Option<NewLibrary>) {
        let mut walk = Walk {
            callers: self,
            frames: 0,
            found: None,
        };
        // SAFETY: `on_frame` only uses `walk`, which outlives the call.
        unsafe { _Unwind_Backtrace(on_frame, &mut walk as *mut Walk as *mut c_void) };
        walk.found.unwrap_or((0, None))
    }

    /// The library id of one return address: the lock-free table, else the
    /// slow cache (classifying the address on first sight).
    fn id_of(&self, addr: usize) -> (u32, Option<NewLibrary>) {
        if let Some(id) = self.fast.get(addr) {
            return (id, None);
        }
        let mut slow = lock(&self.slow);
        let (id, new) = match slow.by_address.get(&addr) {
            Some(&id) => (id, None),
            None => {
                let (id, new) = slow.classify(addr);
                slow.by_address.insert(addr, id);
                (id, new)
            }
        };
        self.fast.put(addr, id);
        (id, new)
    }

    /// The path of a library id handed out before ("an unknown library" for 0).
    pub fn path_of(&self, id: u32) -> String {
        lock(&self.slow).path_of(id)
    }
}

/// State of one stack walk, handed to the unwinder's per-frame callback.
struct Walk<'a> {
    callers: &'a Callers,
    frames: u32,
    found: Option<(u32, Option<NewLibrary>)>,
}

/// Per-frame callback: stops at the first frame outside the plumbing, so the
/// walk never unwinds the (deep) Python and framework stack above the caller.
unsafe extern "C" fn on_frame(ctx: *mut c_void, arg: *mut c_void) -> i32 {
    // SAFETY: `arg` is the `Walk` that `caller` passed, alive for the walk.
    let walk = unsafe { &mut *(arg as *mut Walk) };
    walk.frames += 1;
    if walk.frames > MAX_FRAMES {
        return URC_NORMAL_STOP;
    }
    // SAFETY: `ctx` is the unwinder's context for this frame.
    let addr = unsafe { _Unwind_GetIP(ctx) };
    if addr == 0 {
        return URC_NO_REASON;
    }
    let (id, new) = walk.callers.id_of(addr);
    if id == SKIP {
        return URC_NO_REASON;
    }
    walk.found = Some((id, new));
    URC_NORMAL_STOP
}

/// Library names that are plumbing between the real caller and the driver.
fn is_plumbing(path: &str, own_base: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    base.starts_with("libcuda.so")
        || base.starts_with("libcudart")
        || base.starts_with("libcupti")
        || base.starts_with("libc.so")
        || base.starts_with("libpthread")
        || base.starts_with("ld-linux")
        || base.starts_with("libgcc_s")
        || (!own_base.is_empty() && base == own_base)
}

/// Caches return address → library id and library base → id (the slow path).
struct CallerCache {
    by_address: HashMap<usize, u32>,
    by_base: HashMap<usize, u32>,
    paths: Vec<String>,
    own_base: String,
    next_id: u32,
}

/// A library seen for the first time, to be written as a `LibraryName` record.
pub struct NewLibrary {
    pub id: u32,
    pub path: String,
}

impl CallerCache {
    fn new(own_path: &str) -> CallerCache {
        CallerCache {
            by_address: HashMap::new(),
            by_base: HashMap::new(),
            paths: Vec::new(),
            own_base: own_path.rsplit('/').next().unwrap_or("").to_string(),
            next_id: 1,
        }
    }

    fn classify(&mut self, addr: usize) -> (u32, Option<NewLibrary>) {
        // A return address points just past the call; look up addr-1.
        let Some((path, base)) = path_of_address(addr.saturating_sub(1)) else {
            return (SKIP, None);
        };
        if is_plumbing(&path, &self.own_base) {
            return (SKIP, None);
        }
        if let Some(&id) = self.by_base.get(&base) {
            return (id, None);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.by_base.insert(base, id);
        self.paths.push(path.clone());
        (id, Some(NewLibrary { id, path }))
    }

    fn path_of(&self, id: u32) -> String {
        (id as usize)
            .checked_sub(1)
            .and_then(|i| self.paths.get(i))
            .cloned()
            .unwrap_or_else(|| "an unknown library".into())
    }
}

/// Walks a few frames once so the unwinder sets itself up now, at init,
/// rather than inside the first allocation callback.
pub fn warm_up() {
    unsafe extern "C" fn stop_soon(_ctx: *mut c_void, arg: *mut c_void) -> i32 {
        // SAFETY: `arg` is the counter `warm_up` passed.
        let n = unsafe { &mut *(arg as *mut u32) };
        *n += 1;
        if *n >= 4 {
            URC_NORMAL_STOP
        } else {
            URC_NO_REASON
        }
    }
    let mut n = 0u32;
    // SAFETY: `stop_soon` only touches `n`, which outlives the call.
    unsafe { _Unwind_Backtrace(stop_soon, &mut n as *mut u32 as *mut c_void) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plumbing_is_recognised() {
        assert!(is_plumbing(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "libprewarm_probe.so"
        ));
        assert!(is_plumbing("/x/nvidia/cu13/lib/libcudart.so.13", ""));
        assert!(is_plumbing("/x/libprewarm_probe.so", "libprewarm_probe.so"));
        assert!(!is_plumbing(
            "/x/torch/lib/libc10_cuda.so",
            "libprewarm_probe.so"
        ));
        assert!(!is_plumbing("/x/nvidia/nccl/lib/libnccl.so.2", ""));
        assert!(!is_plumbing("/x/libcublasLt.so.13", ""));
    }

    #[test]
    fn a_stack_in_this_test_binary_resolves_to_it() {
        let cache = Callers::new("");
        warm_up();
        let (id, new) = cache.caller();
        // The first non-plumbing frame is this test executable itself.
        assert_eq!(id, 1);
        let path = new.expect("first sight of the library").path;
        assert!(!path.is_empty());
        let (again, new_again) = cache.caller();
        assert_eq!(again, 1);
        assert!(new_again.is_none());
        assert_eq!(cache.path_of(1), path);
        assert_eq!(cache.path_of(0), "an unknown library");
    }
}
