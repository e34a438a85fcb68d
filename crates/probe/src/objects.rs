//! Which loaded object holds an address: the loaded segments of every object
//! the dynamic loader knows (`dl_iterate_phdr`), sorted and searched in
//! O(log n), read again when the loader's list changed (a library loaded or
//! unloaded since).
//!
//! `dladdr` answers the same question but also looks for the nearest symbol,
//! a walk over the object's whole dynamic symbol table: about 40 µs for a
//! library of 20,000 symbols on the build machine, several times that for
//! libtorch_cuda, once per return address seen for the first time — inside
//! the training's driver call, and most of what the probe's callbacks cost
//! per recorded call on the H200 (a module load or allocation: 50–85 µs).

use std::ffi::{CStr, c_int, c_void};

/// One loaded segment: `[start, end)` of object `object`.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: usize,
    end: usize,
    object: usize,
}

/// A loaded object: its file and its lowest mapped address (what `dladdr`
/// calls `dli_fbase`; it tells objects apart).
#[derive(Debug, Clone)]
struct Object {
    path: String,
    base: usize,
}

/// The loader's objects as last read, and the loader's add/remove counters
/// then, so an unchanged list is not read again.
#[derive(Default)]
pub struct LoadedObjects {
    segments: Vec<Segment>,
    objects: Vec<Object>,
    counters: Option<(u64, u64)>,
}

impl LoadedObjects {
    /// An empty map: read on the first lookup.
    pub fn new() -> LoadedObjects {
        LoadedObjects::default()
    }

    /// The file and base address of the object holding `addr`; None for an
    /// address in no loaded object (anonymous memory: JIT code, the heap).
    pub fn find(&mut self, addr: usize) -> Option<(&str, usize)> {
        let i = match self.search(addr) {
            Some(i) => i,
            None => {
                if !self.read_if_changed() {
                    return None;
                }
                self.search(addr)?
            }
        };
        let o = &self.objects[i];
        Some((o.path.as_str(), o.base))
    }

    fn search(&self, addr: usize) -> Option<usize> {
        // The last segment starting at or below `addr`.
        let n = self.segments.partition_point(|s| s.start <= addr);
        let s = self.segments.get(n.checked_sub(1)?)?;
        (addr < s.end).then_some(s.object)
    }

    /// Reads the loader's list again unless its counters say it is the one
    /// already read; true when it was read.
    fn read_if_changed(&mut self) -> bool {
        let mut read = Reading {
            known: self.counters,
            counters: None,
            unchanged: false,
            segments: Vec::new(),
            objects: Vec::new(),
        };
        // SAFETY: `collect` only touches `read`, which outlives the call.
        unsafe { libc::dl_iterate_phdr(Some(collect), &mut read as *mut Reading as *mut c_void) };
        if read.unchanged {
            return false;
        }
        read.segments.sort_unstable_by_key(|s| s.start);
        self.segments = read.segments;
        self.objects = read.objects;
        self.counters = read.counters;
        true
    }
}

/// What one `dl_iterate_phdr` pass collects.
struct Reading {
    known: Option<(u64, u64)>,
    counters: Option<(u64, u64)>,
    unchanged: bool,
    segments: Vec<Segment>,
    objects: Vec<Object>,
}

/// `dl_iterate_phdr`'s per-object callback: stops at once when the loader's
/// counters match the last reading, else adds the object and its segments.
unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: `data` is the `Reading` that `read_if_changed` passed.
    let read = unsafe { &mut *(data as *mut Reading) };
    // SAFETY: the loader passes a valid `info` of `size` bytes.
    let info = unsafe { &*info };
    if read.counters.is_none() {
        let has_counters = size >= std::mem::offset_of!(libc::dl_phdr_info, dlpi_subs) + 8;
        let now = has_counters.then_some((info.dlpi_adds, info.dlpi_subs));
        if now.is_some() && now == read.known {
            read.unchanged = true;
            return 1;
        }
        // Without counters, (0, 0) stands for "unknown": never matched above.
        read.counters = Some(now.unwrap_or((0, 0)));
    }
    let object = read.objects.len();
    let mut base = usize::MAX;
    for k in 0..info.dlpi_phnum as usize {
        // SAFETY: `dlpi_phdr` holds `dlpi_phnum` program headers.
        let ph = unsafe { &*info.dlpi_phdr.add(k) };
        if ph.p_type != libc::PT_LOAD || ph.p_memsz == 0 {
            continue;
        }
        let start = (info.dlpi_addr as usize).wrapping_add(ph.p_vaddr as usize);
        let end = start.saturating_add(ph.p_memsz as usize);
        base = base.min(start & !0xfff);
        read.segments.push(Segment { start, end, object });
    }
    if base == usize::MAX {
        return 0;
    }
    read.objects.push(Object {
        path: path_of(info.dlpi_name),
        base,
    });
    0
}

/// The object's file: the loader's name, or for the program itself (which
/// the loader names "") the executable's path.
fn path_of(name: *const libc::c_char) -> String {
    // SAFETY: the loader's names are NUL-terminated (or null).
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) });
    match name {
        Some(n) if !n.is_empty() => n.to_string_lossy().into_owned(),
        _ => std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynlib::path_of_address;

    #[inline(never)]
    fn here() -> usize {
        let f: fn() -> usize = here;
        f as usize
    }

    fn malloc() -> usize {
        let f: unsafe extern "C" fn(usize) -> *mut c_void = libc::malloc;
        f as usize
    }

    #[test]
    fn finds_what_dladdr_finds_for_a_library_and_the_program() {
        let mut objects = LoadedObjects::new();
        for addr in [malloc(), here() + 1] {
            let (path, base) = objects.find(addr).map(|(p, b)| (p.to_string(), b)).unwrap();
            let (dl_path, dl_base) = path_of_address(addr).unwrap();
            assert_eq!(base, dl_base, "{path} vs {dl_path}");
            let name = |p: &str| p.rsplit('/').next().unwrap().to_string();
            assert_eq!(name(&path), name(&dl_path));
        }
        assert!(objects.find(malloc()).unwrap().0.contains("libc.so"));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(objects.find(here()).unwrap().0, exe.to_string_lossy());
    }

    #[test]
    fn an_address_in_no_object_is_none() {
        let mut objects = LoadedObjects::new();
        let heap = Box::new(0u64);
        assert!(objects.find(&*heap as *const u64 as usize).is_none());
        assert!(objects.find(0).is_none());
        // Nothing changed in the loader: the second miss did not read again.
        let counters = objects.counters;
        assert!(objects.find(&*heap as *const u64 as usize).is_none());
        assert_eq!(objects.counters, counters);
    }

    #[test]
    fn a_library_loaded_after_the_first_reading_is_found() {
        let mut objects = LoadedObjects::new();
        assert!(objects.find(malloc()).is_some());
        // A library this test binary does not load by itself (glibc's, with
        // symbols of its own).
        let lib =
            crate::dynlib::DynLib::load("libBrokenLocale.so.1").expect("libBrokenLocale.so.1");
        let addr = lib.symbol(c"__ctype_get_mb_cur_max").expect("its symbol") as usize;
        let (path, _) = objects
            .find(addr)
            .expect("found after reading the loader's list again");
        assert!(path.contains("libBrokenLocale"), "{path}");
    }
}
