//! Finding and binding libcupti. Order: a copy already loaded in the process
//! (RTLD_NOLOAD), the path the doctor found (`PREWARM_DOCTOR_CUPTI`), then bare
//! names. Every entry point is checked before use; a missing one disables capture.

use crate::dynlib::{DynLib, function};
use prewarm_events::UNKNOWN_BYTES;
use std::ffi::{c_char, c_void};

pub type CuptiResult = u32;
pub const CUPTI_SUCCESS: CuptiResult = 0;
pub const CUPTI_ERROR_MAX_LIMIT_REACHED: CuptiResult = 12;
/// CUPTI_ERROR_NOT_INITIALIZED: used when there is no subscriber to switch.
pub const CUPTI_ERROR_NOT_INITIALIZED: CuptiResult = 15;

pub type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
pub type BufferRequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
pub type BufferCompleteFn = unsafe extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
pub type TimestampFn = unsafe extern "C" fn() -> u64;

/// The CUPTI entry points the probe uses.
pub struct Cupti {
    pub path: String,
    pub version: u32,
    pub subscribe: unsafe extern "C" fn(*mut *mut c_void, CallbackFn, *mut c_void) -> CuptiResult,
    pub enable_callback: unsafe extern "C" fn(u32, *mut c_void, u32, u32) -> CuptiResult,
    /// `cuptiGetCallbackState(&enabled, subscriber, domain, cbid)`: only the
    /// bench's hold (hold.rs) asks, so a CUPTI without it still captures.
    pub callback_state:
        Option<unsafe extern "C" fn(*mut u32, *mut c_void, u32, u32) -> CuptiResult>,
    /// `cuptiFinalize()`: only the detach after the watch (the default)
    /// (detach.rs) calls it, so a CUPTI without it still captures.
    pub finalize: Option<unsafe extern "C" fn() -> CuptiResult>,
    pub register_buffers: unsafe extern "C" fn(BufferRequestFn, BufferCompleteFn) -> CuptiResult,
    /// `cuptiActivitySetAttribute(attribute, &value_size, &value)`.
    pub set_attribute: Option<unsafe extern "C" fn(u32, *mut usize, *mut c_void) -> CuptiResult>,
    pub activity_enable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub activity_disable: unsafe extern "C" fn(u32) -> CuptiResult,
    pub next_record: unsafe extern "C" fn(*mut u8, usize, *mut *mut c_void) -> CuptiResult,
    pub flush_all: unsafe extern "C" fn(u32) -> CuptiResult,
    pub dropped_records: unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    pub get_timestamp: unsafe extern "C" fn(*mut u64) -> CuptiResult,
    pub register_timestamp: Option<unsafe extern "C" fn(TimestampFn) -> CuptiResult>,
    pub context_id: unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult,
    pub device_id: unsafe extern "C" fn(*mut c_void, *mut u32) -> CuptiResult,
    pub result_string: unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult,
}

/// Oldest CUPTI API version the probe accepts (CUDA 12.0's CUPTI reports 18).
pub const MIN_CUPTI_VERSION: u32 = 18;

const BARE_NAMES: &[&str] = &["libcupti.so.13", "libcupti.so.12", "libcupti.so"];

fn find_library(explicit: Option<&str>) -> Result<(DynLib, &'static str), String> {
    for name in BARE_NAMES {
        if let Some(lib) = DynLib::already_loaded(name) {
            return Ok((lib, "already loaded in the process"));
        }
    }
    if let Some(path) = explicit.filter(|p| !p.is_empty())
        && let Some(lib) = DynLib::load(path)
    {
        return Ok((lib, "path given by prewarm-doctor"));
    }
    for name in BARE_NAMES {
        if let Some(lib) = DynLib::load(name) {
            return Ok((lib, "found by the dynamic loader"));
        }
    }
    Err(format!(
        "libcupti was not found (tried the process, {}, and {}); install the CUDA toolkit's CUPTI or the nvidia-cuda-cupti wheel, or point PREWARM_DOCTOR_CUPTI at libcupti.so",
        explicit.unwrap_or("no explicit path"),
        BARE_NAMES.join(", ")
    ))
}

macro_rules! need {
    ($lib:expr, $name:literal) => {
        // SAFETY: the signature in the struct field matches the CUPTI header.
        unsafe { function(&$lib, $name) }
            .ok_or_else(|| format!("libcupti lacks {}", $name.to_string_lossy()))?
    };
}

impl Cupti {
    /// Loads CUPTI and binds every entry point; an error explains what is missing.
    pub fn load(explicit: Option<&str>) -> Result<(Cupti, &'static str), String> {
        let (lib, how) = find_library(explicit)?;
        let get_version: unsafe extern "C" fn(*mut u32) -> CuptiResult =
            need!(lib, c"cuptiGetVersion");
        let mut version = 0u32;
        // SAFETY: writes one u32.
        let rc = unsafe { get_version(&mut version) };
        if rc != CUPTI_SUCCESS || version < MIN_CUPTI_VERSION {
            return Err(format!(
                "libcupti reports API version {version} (result {rc}); prewarm-doctor needs {MIN_CUPTI_VERSION} or newer (CUDA 12+)"
            ));
        }
        let path = lib
            .path_of_symbol(c"cuptiGetVersion")
            .unwrap_or_else(|| "unknown path".to_string());
        let cupti = Cupti {
            path,
            version,
            subscribe: need!(lib, c"cuptiSubscribe"),
            enable_callback: need!(lib, c"cuptiEnableCallback"),
            // SAFETY: signature from cupti_callbacks.h.
            callback_state: unsafe { function(&lib, c"cuptiGetCallbackState") },
            // SAFETY: signature from cupti.h (`CUptiResult cuptiFinalize(void)`).
            finalize: unsafe { function(&lib, c"cuptiFinalize") },
            register_buffers: need!(lib, c"cuptiActivityRegisterCallbacks"),
            // SAFETY: signature from cupti_activity.h.
            set_attribute: unsafe { function(&lib, c"cuptiActivitySetAttribute") },
            activity_enable: need!(lib, c"cuptiActivityEnable"),
            activity_disable: need!(lib, c"cuptiActivityDisable"),
            next_record: need!(lib, c"cuptiActivityGetNextRecord"),
            flush_all: need!(lib, c"cuptiActivityFlushAll"),
            dropped_records: need!(lib, c"cuptiActivityGetNumDroppedRecords"),
            get_timestamp: need!(lib, c"cuptiGetTimestamp"),
            // SAFETY: signature from cupti_activity.h.
            register_timestamp: unsafe {
                function(&lib, c"cuptiActivityRegisterTimestampCallback")
            },
            context_id: need!(lib, c"cuptiGetContextId"),
            device_id: need!(lib, c"cuptiGetDeviceId"),
            result_string: need!(lib, c"cuptiGetResultString"),
        };
        Ok((cupti, how))
    }

    /// Tells CUPTI that the buffers the probe hands out are zeroed already
    /// (they are fresh anonymous pages), so that CUPTI does not clear each
    /// one on the training's thread; before the buffer callbacks are
    /// registered, as CUPTI asks. The error text when it refused.
    pub fn promise_zeroed_buffers(&self) -> Result<(), String> {
        let Some(set) = self.set_attribute else {
            return Err("this CUPTI has no cuptiActivitySetAttribute".into());
        };
        let mut value: u8 = 1;
        let mut size = std::mem::size_of::<u8>();
        // SAFETY: a uint8_t attribute, value and size pointers valid for the call.
        let rc = unsafe {
            set(
                crate::activity::ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
                &mut size,
                (&mut value as *mut u8).cast(),
            )
        };
        if rc == CUPTI_SUCCESS {
            Ok(())
        } else {
            Err(self.describe(rc))
        }
    }

    /// CUPTI's text for a result code.
    pub fn describe(&self, rc: CuptiResult) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: CUPTI writes a pointer to a static string.
        let ok = unsafe { (self.result_string)(rc, &mut p) };
        if ok == CUPTI_SUCCESS && !p.is_null() {
            // SAFETY: static NUL-terminated string from CUPTI.
            let s = unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned();
            format!("{s} ({rc})")
        } else {
            format!("CUPTI error {rc}")
        }
    }
}

/// The libcuda entry points the probe calls from callbacks.
pub struct Driver {
    pub mem_get_info: unsafe extern "C" fn(*mut usize, *mut usize) -> u32,
    pub device_pci_bus_id: unsafe extern "C" fn(*mut c_char, i32, i32) -> u32,
    pub ctx_push: unsafe extern "C" fn(*mut c_void) -> u32,
    pub ctx_pop: unsafe extern "C" fn(*mut *mut c_void) -> u32,
    /// `cuDeviceGetMemPool` (CUDA 11.2+; absent on older drivers).
    pub device_get_mem_pool: Option<unsafe extern "C" fn(*mut *mut c_void, i32) -> u32>,
    /// `cuMemPoolGetAttribute` (CUDA 11.2+).
    pub mem_pool_get_attribute: Option<unsafe extern "C" fn(*mut c_void, i32, *mut c_void) -> u32>,
    /// Nanoseconds spent in [`Driver::free_total`] (cumulative, every
    /// thread): the free-memory readings are most of a traced call's
    /// callback, so the probe's cost records say how much.
    pub reading_ns: std::sync::atomic::AtomicU64,
}

/// `CUmemPool_attribute` values the probe reads (cuda.h).
const POOL_RESERVED_MEM_CURRENT: i32 = 5;
const POOL_RESERVED_MEM_HIGH: i32 = 6;
const POOL_USED_MEM_CURRENT: i32 = 7;

/// A pool's size as the driver reports it; `UNKNOWN_BYTES` where not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSizes {
    pub reserved: u64,
    pub reserved_high: u64,
    pub used: u64,
}

impl Driver {
    /// Binds libcuda, which is loaded already since it is the one calling the probe.
    pub fn load() -> Result<Driver, String> {
        let lib = DynLib::already_loaded("libcuda.so.1")
            .or_else(|| DynLib::load("libcuda.so.1"))
            .ok_or("libcuda.so.1 is not loaded in this process")?;
        Ok(Driver {
            mem_get_info: need!(lib, c"cuMemGetInfo_v2"),
            device_pci_bus_id: need!(lib, c"cuDeviceGetPCIBusId"),
            ctx_push: need!(lib, c"cuCtxPushCurrent_v2"),
            ctx_pop: need!(lib, c"cuCtxPopCurrent_v2"),
            // SAFETY: signatures from cuda.h.
            device_get_mem_pool: unsafe { function(&lib, c"cuDeviceGetMemPool") },
            // SAFETY: as above.
            mem_pool_get_attribute: unsafe { function(&lib, c"cuMemPoolGetAttribute") },
            reading_ns: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The current memory pool of a device (what `cuMemAllocAsync` allocates from).
    pub fn pool_of_device(&self, device: i32) -> Option<u64> {
        let get = self.device_get_mem_pool?;
        let mut pool: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one handle.
        let rc = unsafe { get(&mut pool, device) };
        (rc == 0 && !pool.is_null()).then_some(pool as u64)
    }

    /// The pool's reserved, high-water and used bytes.
    pub fn pool_sizes(&self, pool: u64) -> PoolSizes {
        let read = |attribute: i32| {
            let Some(get) = self.mem_pool_get_attribute else {
                return UNKNOWN_BYTES;
            };
            let mut value = 0u64;
            // SAFETY: these attributes are cuuint64_t values.
            let rc = unsafe {
                get(
                    pool as *mut c_void,
                    attribute,
                    &mut value as *mut u64 as *mut c_void,
                )
            };
            if rc == 0 { value } else { UNKNOWN_BYTES }
        };
        if pool == 0 {
            return PoolSizes {
                reserved: UNKNOWN_BYTES,
                reserved_high: UNKNOWN_BYTES,
                used: UNKNOWN_BYTES,
            };
        }
        PoolSizes {
            reserved: read(POOL_RESERVED_MEM_CURRENT),
            reserved_high: read(POOL_RESERVED_MEM_HIGH),
            used: read(POOL_USED_MEM_CURRENT),
        }
    }

    /// (free, total) device bytes for the current context, if there is one.
    pub fn free_total(&self) -> Option<(u64, u64)> {
        let (mut free, mut total) = (0usize, 0usize);
        let t0 = crate::clock::now_ns();
        // SAFETY: writes two usize values.
        let rc = unsafe { (self.mem_get_info)(&mut free, &mut total) };
        self.reading_ns.fetch_add(
            crate::clock::now_ns().saturating_sub(t0),
            std::sync::atomic::Ordering::Relaxed,
        );
        (rc == 0).then_some((free as u64, total as u64))
    }

    /// (free, total) device bytes with `ctx` made current for the reading
    /// only: for a thread that has no context of its own, or another one.
    ///
    /// # Safety
    /// `ctx` is a live context.
    pub unsafe fn free_total_in(&self, ctx: *mut c_void) -> Option<(u64, u64)> {
        // SAFETY: the caller's live context, popped again below.
        if unsafe { (self.ctx_push)(ctx) } != 0 {
            return None;
        }
        let read = self.free_total();
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context pushed above.
        unsafe { (self.ctx_pop)(&mut popped) };
        read
    }
}
