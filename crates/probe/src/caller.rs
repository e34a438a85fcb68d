//! Which library asked for memory: the first stack frame outside libcuda,
//! libcudart, libcupti, libc and the probe itself, resolved with dladdr and cached
//! per return address. Only used on allocation-type calls, never per kernel launch.

use crate::dynlib::path_of_address;
use std::collections::HashMap;
use std::ffi::c_void;

unsafe extern "C" {
    // glibc <execinfo.h>
    fn backtrace(buffer: *mut *mut c_void, size: i32) -> i32;
}

const MAX_FRAMES: usize = 48;
const SKIP: u32 = u32::MAX;

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

/// Caches return address → library id and library base → id.
pub struct CallerCache {
    by_address: HashMap<usize, u32>,
    by_base: HashMap<usize, u32>,
    own_base: String,
    next_id: u32,
}

/// A library seen for the first time, to be written as a `LibraryName` record.
pub struct NewLibrary {
    pub id: u32,
    pub path: String,
}

impl CallerCache {
    /// `own_path` is the probe's own file, skipped like the CUDA plumbing.
    pub fn new(own_path: &str) -> CallerCache {
        CallerCache {
            by_address: HashMap::new(),
            by_base: HashMap::new(),
            own_base: own_path.rsplit('/').next().unwrap_or("").to_string(),
            next_id: 1,
        }
    }

    /// Captures the current stack and returns the caller's library id (0 when
    /// none was found), plus the library's path if it is new.
    pub fn caller(&mut self) -> (u32, Option<NewLibrary>) {
        let mut frames = [std::ptr::null_mut::<c_void>(); MAX_FRAMES];
        // SAFETY: backtrace writes at most MAX_FRAMES pointers into our array.
        let n = unsafe { backtrace(frames.as_mut_ptr(), MAX_FRAMES as i32) }.max(0) as usize;
        for &frame in &frames[..n] {
            let addr = frame as usize;
            let id = match self.by_address.get(&addr) {
                Some(&id) => id,
                None => {
                    let (id, new) = self.classify(addr);
                    self.by_address.insert(addr, id);
                    if new.is_some() {
                        return (id, new);
                    }
                    id
                }
            };
            if id != SKIP {
                return (id, None);
            }
        }
        (0, None)
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
        (id, Some(NewLibrary { id, path }))
    }
}

/// Calls backtrace once so glibc loads its unwinder now, at init, rather than
/// inside the first allocation callback.
pub fn warm_up() {
    let mut frames = [std::ptr::null_mut::<c_void>(); 4];
    // SAFETY: writes at most 4 pointers.
    unsafe { backtrace(frames.as_mut_ptr(), 4) };
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
        let mut cache = CallerCache::new("");
        warm_up();
        let (id, new) = cache.caller();
        // The first non-plumbing frame is this test executable itself.
        assert_eq!(id, 1);
        let path = new.expect("first sight of the library").path;
        assert!(!path.is_empty());
        let (again, new_again) = cache.caller();
        assert_eq!(again, 1);
        assert!(new_again.is_none());
    }
}
