//! Which library asked for memory: the first stack frame outside libcuda,
//! libcudart, libcupti, libc and the probe itself, resolved by the loaded
//! objects' address ranges (objects.rs; not dladdr, which also searches the
//! symbols) and cached per return address. The walk stops at that frame, so its cost does not grow
//! with the depth of the Python stack above. Only used on allocation-type
//! calls, never per kernel launch.
//!
//! Return addresses already seen are looked up in a fixed-size, lock-free,
//! insert-only table, so threads walking their stacks at once do not
//! serialise; only an address seen for the first time takes the lock of the
//! slow cache, which also holds the library paths and the objects' ranges.
//!
//! The walk itself (libgcc's unwinder: about 140 ns per frame, parsing each
//! frame's DWARF call-frame information) is the bulk of a callback's cost, so
//! on x86-64 a walk first tries cached rules: for each return address the
//! unwinder has walked through before, the distance from the frame's stack
//! pointer to its canonical frame address (CFA, where the caller's frame
//! begins; the return address sits just below it). Such a walk reads one word
//! per frame. It only ever steps past frames it has rules for and stays
//! inside the thread's stack; a return address it meets for the first time is
//! classified by the loaded objects (a caller's first call needs no unwinding
//! into the caller's code); a plumbing frame without a rule falls back to the
//! unwinder, which also learns the rules. A rule seen with two different
//! distances (a frame of variable size) is never used, and one walk in
//! [`VERIFY_EVERY`] is repeated with the unwinder: a disagreement switches
//! the cached walk off for the process.

use crate::guard::lock;
use crate::objects::LoadedObjects;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// `_Unwind_Reason_Code` values of the Itanium unwinding ABI (libgcc_s).
const URC_NO_REASON: i32 = 0;
const URC_NORMAL_STOP: i32 = 4;

type TraceFn = unsafe extern "C" fn(ctx: *mut c_void, arg: *mut c_void) -> i32;

unsafe extern "C" {
    // libgcc_s (the unwinder glibc's backtrace() uses too), linked by std.
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> i32;
    fn _Unwind_GetIP(ctx: *mut c_void) -> usize;
    fn _Unwind_GetCFA(ctx: *mut c_void) -> usize;
}

/// One cached walk in this many is checked against the unwinder.
pub const VERIFY_EVERY: u64 = 64;
/// A frame-size rule seen with two different sizes: never used.
const VARIABLE: u32 = u32::MAX;
/// Largest frame a rule may describe (anything larger: the unwinder).
const MAX_FRAME_BYTES: usize = 1 << 20;

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
    /// Return address → its frame's CFA minus its stack pointer (see the
    /// module docs); [`VARIABLE`] when that was seen to vary.
    rules: FastTable,
    /// Whether cached walks are used (off after a disagreement).
    cached_walks: AtomicBool,
    walks: AtomicU64,
    /// Walks answered by the cached rules alone.
    cached: AtomicU64,
    slow: Mutex<CallerCache>,
}

impl Callers {
    /// `own_path` is the probe's own file, skipped like the CUDA plumbing.
    pub fn new(own_path: &str) -> Callers {
        Callers {
            fast: FastTable::new(),
            rules: FastTable::new(),
            cached_walks: AtomicBool::new(cfg!(target_arch = "x86_64")),
            walks: AtomicU64::new(0),
            cached: AtomicU64::new(0),
            slow: Mutex::new(CallerCache::new(own_path)),
        }
    }

    /// Walks the current stack up to the first frame outside the plumbing and
    /// returns its library id (0 when none was found), plus the library's path
    /// if it is new.
    pub fn caller(&self) -> (u32, Option<NewLibrary>) {
        let mut out = (0, None);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the entry passes both pointers on to `walk_from`, which
        // only uses them for this call.
        unsafe {
            prewarm_probe_walk_entry(
                self as *const Callers as *const c_void,
                &mut out as *mut (u32, Option<NewLibrary>) as *mut c_void,
            )
        };
        #[cfg(not(target_arch = "x86_64"))]
        {
            out = self.unwind(0);
        }
        out
    }

    /// The stack walk from the frame of `walk_from`'s caller, whose return
    /// address is `ip` and whose stack pointer is `sp` (0: unknown).
    fn walk(&self, ip: usize, sp: usize) -> (u32, Option<NewLibrary>) {
        let n = self.walks.fetch_add(1, Ordering::Relaxed);
        if sp == 0 || !self.cached_walks.load(Ordering::Relaxed) {
            return self.unwind(sp);
        }
        let Some((id, new)) = self.cached_walk(ip, sp) else {
            return self.unwind(sp);
        };
        // A walk that met a library first is not checked now: the check's
        // own walk would not say the library is new, and its name record
        // would be lost.
        if new.is_some() || !n.is_multiple_of(VERIFY_EVERY) {
            self.cached.fetch_add(1, Ordering::Relaxed);
            return (id, new);
        }
        let checked = self.unwind(sp);
        if checked.0 != id {
            self.cached_walks.store(false, Ordering::Relaxed);
        }
        checked
    }

    /// libgcc's walk, learning each frame's rule on the way (`sp`: the stack
    /// pointer of `walk_from`'s caller, i.e. `walk_from`'s CFA; 0: unknown).
    fn unwind(&self, sp: usize) -> (u32, Option<NewLibrary>) {
        let mut walk = Walk {
            callers: self,
            frames: 0,
            found: None,
            anchor: sp,
            previous: None,
        };
        // SAFETY: `on_frame` only uses `walk`, which outlives the call.
        unsafe { _Unwind_Backtrace(on_frame, &mut walk as *mut Walk as *mut c_void) };
        walk.found.unwrap_or((0, None))
    }

    /// The walk by cached rules; None wherever one is missing or the stack
    /// would be left. A return address seen for the first time is
    /// classified by the loaded objects' ranges alone: where the plumbing's
    /// frames below it are known, a new caller (a library's first call, a
    /// new call site) never sends the unwinder into the caller's own code,
    /// whose call-frame information a large library may have the unwinder
    /// sort first (hf's first call from libcublasLt held 8–18 ms of
    /// callback time on the H100: docs/footprint.md, fifteenth session).
    fn cached_walk(&self, mut ip: usize, mut sp: usize) -> Option<(u32, Option<NewLibrary>)> {
        let (low, high) = stack_bounds()?;
        if sp < low || sp >= high {
            return None;
        }
        for _ in 0..MAX_FRAMES {
            let (id, new) = match self.fast.get(ip) {
                Some(id) => (id, None),
                None => self.id_of(ip),
            };
            if id != SKIP {
                return Some((id, new));
            }
            let size = self.rules.get(ip).filter(|&k| k != VARIABLE)? as usize;
            let cfa = sp.checked_add(size)?;
            if !(8..=MAX_FRAME_BYTES).contains(&size) || cfa > high {
                return None;
            }
            // SAFETY: sp < cfa - 8 + 8 <= high: a word inside this thread's
            // stack, above the current frame (mapped and readable).
            ip = unsafe { ((cfa - 8) as *const usize).read() };
            sp = cfa;
        }
        None
    }

    /// Records the size of the frame at return address `ip`.
    fn learn(&self, ip: usize, size: usize) {
        let Ok(size) = u32::try_from(size) else {
            return;
        };
        match self.rules.get(ip) {
            None => self.rules.put(ip, size),
            Some(known) if known != size => self.rules.put(ip, VARIABLE),
            Some(_) => {}
        }
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
    /// The stack pointer of `walk_from`'s caller (0: unknown, learn nothing).
    anchor: usize,
    /// The previous frame's return address and stack pointer, from the
    /// caller of `walk_from` on.
    previous: Option<(usize, usize)>,
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
    if walk.anchor != 0 {
        // SAFETY: as above. In a backtrace callback this is the frame's
        // stack pointer (the CFA of the frame it called).
        let sp = unsafe { _Unwind_GetCFA(ctx) };
        if let Some((ip, previous_sp)) = walk.previous
            && sp > previous_sp
        {
            walk.callers.learn(ip, sp - previous_sp);
        }
        // From the caller of `walk_from` on (its stack pointer is the anchor).
        if walk.previous.is_some() || sp == walk.anchor {
            walk.previous = Some((addr, sp));
        }
    }
    let (id, new) = walk.callers.id_of(addr);
    if id == SKIP {
        return URC_NO_REASON;
    }
    walk.found = Some((id, new));
    URC_NORMAL_STOP
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    /// Calls `walk_from(callers, out, ip, sp)` with the return address and
    /// stack pointer of the frame that called it (a tail call: `walk_from`
    /// looks called from there directly, so its CFA is that `sp`).
    fn prewarm_probe_walk_entry(callers: *const c_void, out: *mut c_void);
}

#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".globl prewarm_probe_walk_entry",
    ".hidden prewarm_probe_walk_entry",
    ".type prewarm_probe_walk_entry, @function",
    "prewarm_probe_walk_entry:",
    ".cfi_startproc",
    "mov rdx, [rsp]",
    "lea rcx, [rsp + 8]",
    "jmp {walk}",
    ".cfi_endproc",
    ".size prewarm_probe_walk_entry, . - prewarm_probe_walk_entry",
    walk = sym walk_from,
);

/// See [`prewarm_probe_walk_entry`]. Never unwinds (no panic path: tables
/// and atomics only, and the unwinder's own walk).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe extern "C" fn walk_from(callers: *const c_void, out: *mut c_void, ip: usize, sp: usize) {
    // SAFETY: a `Callers` and the result slot from `Callers::caller`, alive
    // for the call.
    unsafe {
        let callers = &*(callers as *const Callers);
        *(out as *mut (u32, Option<NewLibrary>)) = callers.walk(ip, sp);
    }
}

thread_local! {
    /// This thread's stack (low, high), once read; (0, 0): unknown.
    static STACK: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

/// The calling thread's stack bounds (read once per thread).
fn stack_bounds() -> Option<(usize, usize)> {
    STACK
        .try_with(|b| {
            if b.get().1 == 0 {
                b.set(read_stack_bounds());
            }
            b.get()
        })
        .ok()
        .filter(|b| b.1 > b.0)
}

fn read_stack_bounds() -> (usize, usize) {
    // SAFETY: a zeroed attr filled by pthread_getattr_np, destroyed after use.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return (0, 0);
        }
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut size = 0usize;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            return (0, 0);
        }
        (addr as usize, (addr as usize).saturating_add(size))
    }
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
    objects: LoadedObjects,
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
            objects: LoadedObjects::new(),
        }
    }

    fn classify(&mut self, addr: usize) -> (u32, Option<NewLibrary>) {
        // A return address points just past the call; look up addr-1.
        let Some((path, base)) = self.objects.find(addr.saturating_sub(1)) else {
            return (SKIP, None);
        };
        if is_plumbing(path, &self.own_base) {
            return (SKIP, None);
        }
        if let Some(&id) = self.by_base.get(&base) {
            return (id, None);
        }
        let path = path.to_string();
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

    #[inline(never)]
    fn one_level_deeper(cache: &Callers) -> u32 {
        std::hint::black_box(cache.caller().0)
    }

    #[test]
    fn walks_from_every_depth_agree() {
        let cache = Callers::new("");
        for i in 0..(3 * VERIFY_EVERY) {
            // Two call sites at two depths, interleaved; checked walks included.
            let id = if i % 2 == 0 {
                cache.caller().0
            } else {
                one_level_deeper(&cache)
            };
            assert_eq!(id, 1);
        }
        assert_eq!(
            cache.cached_walks.load(Ordering::Relaxed),
            cfg!(target_arch = "x86_64")
        );
    }

    #[test]
    fn a_cached_walk_follows_learned_frame_sizes_and_never_a_variable_one() {
        let cache = Callers::new("");
        // A made-up stack on this thread's real stack: the frame at return
        // address A is 32 bytes (its caller's return address B in its last
        // word), B's is 48 (return address C), C is a library's code.
        let (a, b, c) = (0x1000_0010usize, 0x1000_0020usize, 0x2000_0030usize);
        let mut stack = [0usize; 16];
        stack[3] = b;
        stack[9] = c;
        let sp = stack.as_ptr() as usize;
        cache.fast.put(a, SKIP);
        cache.fast.put(b, SKIP);
        cache.fast.put(c, 7);
        let id = |walk: Option<(u32, Option<NewLibrary>)>| walk.map(|w| w.0);
        assert_eq!(id(cache.cached_walk(a, sp)), None, "no rules yet");
        cache.learn(a, 32);
        cache.learn(b, 48);
        assert_eq!(std::hint::black_box(&stack)[0], 0);
        assert_eq!(id(cache.cached_walk(a, sp)), Some(7));
        // The same size again changes nothing; another one retires the rule.
        cache.learn(b, 48);
        assert_eq!(id(cache.cached_walk(a, sp)), Some(7));
        cache.learn(b, 56);
        assert_eq!(id(cache.cached_walk(a, sp)), None);
        // Outside this thread's stack: never read.
        assert_eq!(id(cache.cached_walk(a, 8)), None);
    }

    /// A return address never seen, past frames whose sizes are known: the
    /// walk classifies it by the loaded objects (a caller's code: its
    /// library, said new the first time) without the unwinder; an address
    /// in no loaded object, or in the plumbing, needs a rule it lacks.
    #[test]
    fn a_new_caller_past_known_frames_is_classified_without_the_unwinder() {
        let cache = Callers::new("");
        // A frame of 32 bytes at return address `a` (known plumbing), whose
        // caller's return address is in this test binary's code.
        let a = 0x1000_0010usize;
        let caller_code =
            a_new_caller_past_known_frames_is_classified_without_the_unwinder as fn() as usize + 1;
        let mut stack = [0usize; 8];
        stack[3] = caller_code;
        let sp = stack.as_ptr() as usize;
        cache.fast.put(a, SKIP);
        cache.learn(a, 32);
        let (id, new) = cache.cached_walk(a, sp).expect("classified");
        assert_eq!(id, 1);
        assert!(new.is_some_and(|n| n.id == 1 && !n.path.is_empty()));
        // The second time it is known: no name record again.
        let (again, new) = cache.cached_walk(a, sp).expect("known");
        assert_eq!((again, new.is_none()), (1, true));
        // An address in no loaded object: plumbing without a rule, the unwinder.
        stack[3] = 0x10;
        assert!(cache.cached_walk(a, sp).is_none());
        // Code of the C library (plumbing) without a rule: the unwinder too.
        stack[3] = libc::malloc as *const () as usize + 1;
        assert!(cache.cached_walk(a, sp).is_none());
        assert_eq!(std::hint::black_box(&stack)[0], 0);
    }
}
