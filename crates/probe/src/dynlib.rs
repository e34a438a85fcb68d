//! Minimal dlopen/dlsym helpers. The probe resolves every CUDA and CUPTI entry
//! point itself so that it can prefer the copy already loaded in the process and
//! never abort when a symbol is missing.

use std::ffi::{CStr, CString, c_void};

/// An open shared library handle (never closed: the probe lives as long as the process).
#[derive(Clone, Copy)]
pub struct DynLib {
    handle: *mut c_void,
}

// SAFETY: dlopen handles are process-global and usable from any thread.
unsafe impl Send for DynLib {}
unsafe impl Sync for DynLib {}

impl DynLib {
    /// The library if it is already loaded in this process (RTLD_NOLOAD).
    pub fn already_loaded(name: &str) -> Option<DynLib> {
        Self::open(name, libc::RTLD_NOW | libc::RTLD_NOLOAD)
    }

    /// Loads the library by name or path.
    pub fn load(name: &str) -> Option<DynLib> {
        Self::open(name, libc::RTLD_NOW | libc::RTLD_LOCAL)
    }

    fn open(name: &str, flags: i32) -> Option<DynLib> {
        let c = CString::new(name).ok()?;
        // SAFETY: valid C string; dlopen has no other preconditions.
        let handle = unsafe { libc::dlopen(c.as_ptr(), flags) };
        (!handle.is_null()).then_some(DynLib { handle })
    }

    /// The raw address of a symbol, if present.
    pub fn symbol(&self, name: &CStr) -> Option<*mut c_void> {
        // SAFETY: handle came from dlopen; name is a valid C string.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }

    /// The file this handle was loaded from (resolved through a known symbol).
    pub fn path_of_symbol(&self, name: &CStr) -> Option<String> {
        let sym = self.symbol(name)?;
        path_of_address(sym as usize).map(|(path, _)| path)
    }
}

/// The shared object containing `addr` and its load base, via dladdr.
pub fn path_of_address(addr: usize) -> Option<(String, usize)> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    let ok = unsafe { libc::dladdr(addr as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let path = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    Some((path, info.dli_fbase as usize))
}

/// Reads a typed function pointer out of a library.
///
/// # Safety
/// `F` must be the exact `extern "C"` signature of the symbol.
pub unsafe fn function<F: Copy>(lib: &DynLib, name: &CStr) -> Option<F> {
    let p = lib.symbol(name)?;
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: caller guarantees the signature; sizes of fn pointers and data pointers match.
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}
