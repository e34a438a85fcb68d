//! The driver API calls the probe subscribes to, and how to read each one's
//! parameters. CBIDs are CUPTI's stable `CUPTI_DRIVER_TRACE_CBID_*` numbers.

use prewarm_events::MemApi;
use std::ffi::c_void;

pub use prewarm_events::callback_ids::{
    CBID_POOL_CREATE, CBID_POOL_DESTROY, TRACED_DRIVER_CALLS as TRACKED,
};

/// How a tracked entry point's parameters start.
pub const fn layout(api: MemApi) -> Layout {
    match api {
        MemApi::MemAllocPitch => Layout::Pitch,
        MemApi::MemAlloc
        | MemApi::MemAllocManaged
        | MemApi::MemAllocAsync
        | MemApi::MemAllocFromPoolAsync
        | MemApi::MemCreate
        | MemApi::MemHostAlloc
        | MemApi::MemAllocHost => Layout::OutPtrSize,
        MemApi::MemMap | MemApi::MemUnmap | MemApi::MemHostRegister => Layout::InValueSize,
        MemApi::MemRelease
        | MemApi::MemFree
        | MemApi::MemFreeAsync
        | MemApi::MemFreeHost
        | MemApi::MemHostUnregister
        | MemApi::ModuleUnload
        | MemApi::LibraryUnload => Layout::InValue,
        MemApi::ModuleLoad
        | MemApi::ModuleLoadData
        | MemApi::ModuleLoadDataEx
        | MemApi::ModuleLoadFatBinary
        | MemApi::LibraryLoadData
        | MemApi::LibraryLoadFromFile
        | MemApi::CtxCreate
        | MemApi::PrimaryCtxRetain
        | MemApi::Unknown(_) => Layout::OutPtr,
    }
}

/// Callback ids of the stream-ordered calls (switched off after a while: pools.rs).
pub fn stream_ordered_cbids() -> impl Iterator<Item = u32> {
    TRACKED
        .iter()
        .filter(|(_, api)| handling(*api) != Handling::Full)
        .map(|(cbid, _)| *cbid)
}

/// The shape of the first parameters of a tracked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `(T *out, size_t bytes, ...)`: allocations and cuMemCreate.
    OutPtrSize,
    /// `(T *out, ...)`: module and context creation.
    OutPtr,
    /// `(T value, ...)`: frees, releases, unloads.
    InValue,
    /// `(T value, size_t bytes, ...)`: map, unmap, host register.
    InValueSize,
    /// cuMemAllocPitch: `(dptr*, pitch*, width, height, elemsize)`.
    Pitch,
}

/// Callback ids at or above this are not tracked (CUPTI's driver ids are below 1024).
const MAX_CBID: usize = 1024;

/// Row of [`TRACKED`] plus one, by callback id: one load per callback.
static INDEX: [u8; MAX_CBID] = build_index();

const fn build_index() -> [u8; MAX_CBID] {
    let mut index = [0u8; MAX_CBID];
    let mut i = 0;
    while i < TRACKED.len() {
        index[TRACKED[i].0 as usize] = (i + 1) as u8;
        i += 1;
    }
    index
}

/// The entry for a callback id, if tracked.
pub fn lookup(cbid: u32) -> Option<(MemApi, Layout)> {
    let row = *INDEX.get(cbid as usize)? as usize;
    let (_, api) = TRACKED.get(row.checked_sub(1)?)?;
    Some((*api, layout(*api)))
}

/// How the probe treats a tracked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// One `MemCall` record per call, with free memory around it and the caller.
    Full,
    /// A stream-ordered allocation: counted on its pool (pools.rs); `explicit`
    /// when the call names the pool (`cuMemAllocFromPoolAsync`).
    PoolAlloc { explicit: bool },
    /// A stream-ordered free: counted on the context's device pool.
    PoolFree,
}

/// The handling of a tracked entry point.
pub fn handling(api: MemApi) -> Handling {
    match api {
        MemApi::MemAllocAsync => Handling::PoolAlloc { explicit: false },
        MemApi::MemAllocFromPoolAsync => Handling::PoolAlloc { explicit: true },
        MemApi::MemFreeAsync => Handling::PoolFree,
        _ => Handling::Full,
    }
}

/// The pool handle named by a `cuMemAllocFromPoolAsync` call (its third word).
///
/// # Safety
/// `params` must point at `cuMemAllocFromPoolAsync_params` (or be null).
pub unsafe fn explicit_pool(params: *const c_void) -> u64 {
    if params.is_null() {
        return 0;
    }
    // SAFETY: (dptr*, bytesize, pool, stream), pointer-sized fields.
    unsafe { *(params as *const usize).add(2) as u64 }
}

/// `CU_MEM_LOCATION_TYPE_DEVICE` (cuda.h).
const LOCATION_DEVICE: i32 = 1;

/// The pool a successful `cuMemPoolCreate` made, and its device when its
/// properties name one.
///
/// # Safety
/// `params` must point at `cuMemPoolCreate_params` (or be null) of a call
/// that succeeded.
pub unsafe fn created_pool(params: *const c_void) -> (u64, Option<i32>) {
    if params.is_null() {
        return (0, None);
    }
    let words = params as *const usize;
    // SAFETY: (CUmemoryPool *pool, const CUmemPoolProps *props): the call wrote
    // *pool; CUmemPoolProps starts with allocType, handleTypes (4 bytes each)
    // and CUmemLocation { type, id } (4 bytes each).
    unsafe {
        let out = *words as *const u64;
        let handle = if out.is_null() { 0 } else { *out };
        let props = *words.add(1) as *const i32;
        let device = (!props.is_null() && *props.add(2) == LOCATION_DEVICE).then(|| *props.add(3));
        (handle, device)
    }
}

/// Requested bytes, readable at API entry or exit.
///
/// # Safety
/// `params` must point at the CUPTI parameter struct of a call with this layout.
pub unsafe fn requested_bytes(layout: Layout, params: *const c_void) -> u64 {
    if params.is_null() {
        return 0;
    }
    let words = params as *const usize;
    // SAFETY: every layout has at least the words read here (see the CUPTI
    // generated_cuda_meta.h structs: pointer-sized fields, naturally aligned).
    unsafe {
        match layout {
            Layout::OutPtrSize | Layout::InValueSize => *words.add(1) as u64,
            Layout::Pitch => (*words.add(2) as u64).saturating_mul(*words.add(3) as u64),
            Layout::OutPtr | Layout::InValue => 0,
        }
    }
}

/// The pointer/handle the call produced (read at exit) or consumed.
///
/// # Safety
/// As for [`requested_bytes`]; for output layouts the call must have returned.
pub unsafe fn address(layout: Layout, params: *const c_void, succeeded: bool) -> u64 {
    if params.is_null() {
        return 0;
    }
    let words = params as *const usize;
    // SAFETY: see requested_bytes; output pointers are valid when the call succeeded.
    unsafe {
        match layout {
            Layout::OutPtrSize | Layout::OutPtr | Layout::Pitch => {
                let out = *words as *const u64;
                if succeeded && !out.is_null() { *out } else { 0 }
            }
            Layout::InValue | Layout::InValueSize => *words as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// benches/gpu_nvml_contention.py subscribes CUPTI to the callbacks the
    /// probe keeps after its watched steps, to time what they cost a
    /// training step; its list must be this one.
    #[test]
    fn the_contention_bench_subscribes_what_the_probe_keeps() {
        let script = include_str!("../../../benches/gpu_nvml_contention.py");
        // The numbers of the bench's list `name = [...]`.
        let listed = |name: &str| -> Vec<u32> {
            script
                .split(&format!("{name} = ["))
                .nth(1)
                .and_then(|rest| rest.split(']').next())
                .unwrap_or_else(|| panic!("the bench names {name}"))
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| n.parse().unwrap())
                .collect()
        };
        let named = listed("PROBE_STEADY_CBIDS");
        let stream_ordered: Vec<u32> = stream_ordered_cbids().collect();
        // The calls switched off after a quiet step, which the bench's
        // async modes switch off the same way (in any order).
        let mut named_stream_ordered = listed("PROBE_STREAM_ORDERED_CBIDS");
        named_stream_ordered.sort();
        let mut sorted = stream_ordered.clone();
        sorted.sort();
        assert_eq!(named_stream_ordered, sorted);
        let mut kept: Vec<u32> = TRACKED
            .iter()
            .map(|(cbid, _)| *cbid)
            .filter(|cbid| !stream_ordered.contains(cbid))
            .collect();
        kept.extend([CBID_POOL_CREATE, CBID_POOL_DESTROY]);
        assert_eq!(
            named, kept,
            "stream-ordered, switched off after a quiet step: {stream_ordered:?}"
        );
    }

    #[test]
    fn the_index_finds_every_tracked_id_and_nothing_else() {
        for (cbid, api) in TRACKED {
            assert_eq!(lookup(*cbid), Some((*api, layout(*api))));
        }
        assert_eq!(lookup(0), None);
        assert_eq!(lookup(1023), None);
        assert_eq!(lookup(5000), None);
        assert!(TRACKED.iter().all(|row| (row.0 as usize) < MAX_CBID));
    }

    #[test]
    fn stream_ordered_calls_are_the_pool_path() {
        use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as C;
        let h = |c: C| handling(lookup(c as u32).unwrap().0);
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync),
            Handling::PoolAlloc { explicit: false }
        );
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz),
            Handling::PoolAlloc { explicit: false }
        );
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync),
            Handling::PoolAlloc { explicit: true }
        );
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz),
            Handling::PoolAlloc { explicit: true }
        );
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync),
            Handling::PoolFree
        );
        assert_eq!(
            h(C::CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz),
            Handling::PoolFree
        );
        assert_eq!(h(C::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2), Handling::Full);
        assert_eq!(h(C::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2), Handling::Full);
        use cudarc::cupti::sys as s;
        assert_eq!(
            std::mem::offset_of!(s::cuMemAllocFromPoolAsync_params_st, pool),
            16
        );
    }

    #[test]
    fn pool_lifecycle_and_stream_ordered_ids_match_the_header() {
        use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as C;
        assert_eq!(
            CBID_POOL_CREATE,
            C::CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate as u32
        );
        assert_eq!(
            CBID_POOL_DESTROY,
            C::CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy as u32
        );
        let mut ids: Vec<u32> = stream_ordered_cbids().collect();
        ids.sort();
        assert_eq!(ids, [598, 599, 600, 601, 611, 612]);
        assert!(lookup(CBID_POOL_CREATE).is_none() && lookup(CBID_POOL_DESTROY).is_none());
        let props: [i32; 4] = [1, 0, LOCATION_DEVICE, 3];
        let mut pool: u64 = 0xfeed;
        let params: [usize; 2] = [&mut pool as *mut u64 as usize, props.as_ptr() as usize];
        assert_eq!(
            unsafe { created_pool(params.as_ptr() as *const c_void) },
            (0xfeed, Some(3))
        );
    }

    #[test]
    fn every_cbid_is_listed_once() {
        let mut ids: Vec<u32> = TRACKED.iter().map(|r| r.0).collect();
        ids.sort();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }

    #[test]
    fn cbids_match_the_cupti_header() {
        use cudarc::cupti::sys::CUpti_driver_api_trace_cbid_enum as C;
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2 as u32)
                .unwrap()
                .0,
            MemApi::MemAlloc
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemCreate as u32)
                .unwrap()
                .0,
            MemApi::MemCreate
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemRelease as u32)
                .unwrap()
                .0,
            MemApi::MemRelease
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 as u32)
                .unwrap()
                .0,
            MemApi::MemFree
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz as u32)
                .unwrap()
                .0,
            MemApi::MemAllocAsync
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData as u32)
                .unwrap()
                .0,
            MemApi::LibraryLoadData
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxRetain as u32)
                .unwrap()
                .0,
            MemApi::PrimaryCtxRetain
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuCtxCreate_v4 as u32)
                .unwrap()
                .0,
            MemApi::CtxCreate
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc as u32)
                .unwrap()
                .0,
            MemApi::MemHostAlloc
        );
        assert_eq!(
            lookup(C::CUPTI_DRIVER_TRACE_CBID_cuMemMap as u32)
                .unwrap()
                .0,
            MemApi::MemMap
        );
    }

    #[test]
    fn parameter_layouts_match_the_generated_structs() {
        use cudarc::cupti::sys as s;
        use std::mem::offset_of;
        assert_eq!(offset_of!(s::cuMemAlloc_v2_params_st, bytesize), 8);
        assert_eq!(offset_of!(s::cuMemCreate_params_st, size), 8);
        assert_eq!(offset_of!(s::cuMemAllocAsync_params_st, bytesize), 8);
        assert_eq!(
            offset_of!(s::cuMemAllocFromPoolAsync_params_st, bytesize),
            8
        );
        assert_eq!(offset_of!(s::cuMemHostAlloc_params_st, bytesize), 8);
        assert_eq!(offset_of!(s::cuMemHostRegister_v2_params_st, bytesize), 8);
        assert_eq!(offset_of!(s::cuMemMap_params_st, size), 8);
        assert_eq!(
            offset_of!(s::cuMemAllocPitch_v2_params_st, WidthInBytes),
            16
        );
        assert_eq!(offset_of!(s::cuMemAllocPitch_v2_params_st, Height), 24);
    }

    #[test]
    fn reads_sizes_and_outputs() {
        let mut out: u64 = 0xabc;
        let params: [usize; 3] = [&mut out as *mut u64 as usize, 4096, 0];
        let p = params.as_ptr() as *const c_void;
        unsafe {
            assert_eq!(requested_bytes(Layout::OutPtrSize, p), 4096);
            assert_eq!(address(Layout::OutPtrSize, p, true), 0xabc);
            assert_eq!(address(Layout::OutPtrSize, p, false), 0);
        }
        let pitch: [usize; 5] = [&mut out as *mut u64 as usize, 0, 100, 7, 4];
        unsafe {
            assert_eq!(
                requested_bytes(Layout::Pitch, pitch.as_ptr() as *const c_void),
                700
            )
        };
        let free: [usize; 1] = [0x1234];
        unsafe {
            assert_eq!(
                address(Layout::InValue, free.as_ptr() as *const c_void, true),
                0x1234
            )
        };
    }
}
