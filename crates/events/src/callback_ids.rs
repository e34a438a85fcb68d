//! The CUPTI callbacks the probe subscribes to, by CUPTI's stable callback
//! ids (`CUPTI_DRIVER_TRACE_CBID_*`, `CUPTI_CBID_RESOURCE_*`): defined once
//! here, below both the probe (which subscribes to them) and the analysis
//! (which names the slowest one a cost record holds). The probe's tests
//! check them against CUPTI's header.

use crate::record::{MemApi, SLOWEST_DETACH_TEARDOWN, SLOWEST_RESOURCE, SLOWEST_WATCH_PAUSE};

/// (driver callback id, entry point) of every driver call the probe traces:
/// allocations, frees, module and library loads, context creation.
pub const TRACED_DRIVER_CALLS: &[(u32, MemApi)] = &[
    (243, MemApi::MemAlloc),
    (244, MemApi::MemAllocPitch),
    (371, MemApi::MemAllocManaged),
    (598, MemApi::MemAllocAsync),
    (599, MemApi::MemAllocAsync),
    (611, MemApi::MemAllocFromPoolAsync),
    (612, MemApi::MemAllocFromPoolAsync),
    (549, MemApi::MemCreate),
    (550, MemApi::MemRelease),
    (551, MemApi::MemMap),
    (552, MemApi::MemUnmap),
    (245, MemApi::MemFree),
    (600, MemApi::MemFreeAsync),
    (601, MemApi::MemFreeAsync),
    (39, MemApi::MemHostAlloc),
    (271, MemApi::MemHostAlloc),
    (294, MemApi::MemAllocHost),
    (301, MemApi::MemHostRegister),
    (379, MemApi::MemHostRegister),
    (38, MemApi::MemFreeHost),
    (302, MemApi::MemHostUnregister),
    (18, MemApi::ModuleLoad),
    (19, MemApi::ModuleLoadData),
    (20, MemApi::ModuleLoadDataEx),
    (21, MemApi::ModuleLoadFatBinary),
    (678, MemApi::LibraryLoadData),
    (679, MemApi::LibraryLoadFromFile),
    (22, MemApi::ModuleUnload),
    (680, MemApi::LibraryUnload),
    (10, MemApi::CtxCreate),
    (235, MemApi::CtxCreate),
    (645, MemApi::CtxCreate),
    (757, MemApi::CtxCreate),
    (386, MemApi::PrimaryCtxRetain),
];

/// (driver callback id, entry point) of the kernel launches the
/// first-launch watch subscribes to (a kernel, a cooperative kernel, a
/// graph).
pub const LAUNCH_CALLS: &[(u32, &str)] = &[
    (115, "cuLaunch"),
    (116, "cuLaunchGrid"),
    (117, "cuLaunchGridAsync"),
    (307, "cuLaunchKernel"),
    (442, "cuLaunchKernel_ptsz"),
    (477, "cuLaunchCooperativeKernel"),
    (478, "cuLaunchCooperativeKernel_ptsz"),
    (514, "cuGraphLaunch"),
    (515, "cuGraphLaunch_ptsz"),
    (652, "cuLaunchKernelEx"),
    (653, "cuLaunchKernelEx_ptsz"),
];

/// `cuMemPoolCreate`: traced always (rare), so a pool has its owner.
pub const CBID_POOL_CREATE: u32 = 607;
/// `cuMemPoolDestroy`: traced always, so a destroyed pool is never read.
pub const CBID_POOL_DESTROY: u32 = 608;

/// CUPTI resource callback: a context came up (its memory is measured then).
pub const CBID_CONTEXT_CREATED: u32 = 1;
/// CUPTI resource callback: a module was loaded (image size).
pub const CBID_MODULE_LOADED: u32 = 6;

/// Resource callbacks (CUPTI's resource domain) by id: the probe subscribes
/// to a context's creation and, with module records on, a module's load;
/// the others are named for a newer probe's records.
const RESOURCE_CALLBACKS: &[(u32, &str)] = &[
    (CBID_CONTEXT_CREATED, "context created"),
    (2, "context destroy"),
    (3, "stream created"),
    (4, "stream destroy"),
    (5, "cuInit finished"),
    (CBID_MODULE_LOADED, "module loaded"),
    (7, "module unload"),
    (8, "module profiled"),
];

/// What a cost record's `slowest_callback_id` names, in words: a driver
/// call's entry point, a resource callback, or the probe's own work
/// counted as callback time; a generic phrase for an id outside these
/// tables (a newer probe's).
pub fn callback_name(id: u64) -> &'static str {
    match id {
        SLOWEST_DETACH_TEARDOWN => "the detach's teardown (cuptiFinalize)",
        SLOWEST_WATCH_PAUSE => "a pause of the first-launch watch",
        _ if id >= SLOWEST_RESOURCE => RESOURCE_CALLBACKS
            .iter()
            .find(|(cbid, _)| u64::from(*cbid) + SLOWEST_RESOURCE == id)
            .map_or("a resource callback", |(_, name)| name),
        _ => driver_callback_name(id),
    }
}

/// The entry point of a driver callback id the probe subscribes to.
fn driver_callback_name(id: u64) -> &'static str {
    let is = |cbid: u32| u64::from(cbid) == id;
    if let Some((_, api)) = TRACED_DRIVER_CALLS.iter().find(|(cbid, _)| is(*cbid)) {
        return api.name();
    }
    if let Some((_, name)) = LAUNCH_CALLS.iter().find(|(cbid, _)| is(*cbid)) {
        return name;
    }
    match id {
        _ if is(CBID_POOL_CREATE) => "cuMemPoolCreate",
        _ if is(CBID_POOL_DESTROY) => "cuMemPoolDestroy",
        _ => "a driver callback",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_id_the_probe_subscribes_to_has_one_name() {
        let mut ids: Vec<u32> = TRACED_DRIVER_CALLS
            .iter()
            .map(|r| r.0)
            .chain(LAUNCH_CALLS.iter().map(|r| r.0))
            .chain([CBID_POOL_CREATE, CBID_POOL_DESTROY])
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id listed twice");
        for id in ids {
            assert!(
                !callback_name(u64::from(id)).starts_with("a "),
                "{id}: {}",
                callback_name(u64::from(id))
            );
        }
    }

    #[test]
    fn the_slowest_callbacks_ids_read_as_what_ran() {
        assert_eq!(callback_name(678), "cuLibraryLoadData");
        assert_eq!(callback_name(386), "cuDevicePrimaryCtxRetain");
        assert_eq!(callback_name(307), "cuLaunchKernel");
        assert_eq!(callback_name(SLOWEST_RESOURCE + 6), "module loaded");
        assert_eq!(callback_name(SLOWEST_RESOURCE + 99), "a resource callback");
        assert_eq!(callback_name(999), "a driver callback");
        assert_eq!(
            callback_name(SLOWEST_DETACH_TEARDOWN),
            "the detach's teardown (cuptiFinalize)"
        );
    }
}
