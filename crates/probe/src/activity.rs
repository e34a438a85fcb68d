//! CUPTI kernel activity records: only the facts the analysis needs are kept —
//! a kernel's first launch (lazy module loading, late warmups) and every launch
//! that grew the context's local-memory reservation. Processing happens on
//! CUPTI's buffer-completion thread, never on the launching thread.

use cudarc::cupti::sys::CUpti_ActivityKernel10;
use prewarm_events::{KernelFirstLaunch, LocalMemoryGrowth, Record};
use std::collections::{HashMap, HashSet};
use std::ffi::CStr;
use std::ptr::addr_of;

/// CUPTI_ACTIVITY_KIND_KERNEL and _CONCURRENT_KERNEL.
pub const KIND_KERNEL: u32 = 3;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;

/// Size of each activity buffer handed to CUPTI.
pub const BUFFER_BYTES: usize = 8 << 20;

/// CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (cupti_activity.h): set to 1,
/// the client promises zeroed buffers and CUPTI does not clear them itself.
/// Cleared by CUPTI, each buffer is written whole on the thread that needs
/// it: with per-thread buffers (CUPTI's default) an 8 MiB memset on every
/// thread's first kernel launch, about 3 ms each on the H200 (a training's
/// main thread at its first launch, autograd's at the first backward,
/// `benches/gpu_first_backward.sh`).
pub const ATTR_ZEROED_OUT_ACTIVITY_BUFFER: u32 = 5;

/// The fields of a kernel record the probe reads (common prefix of Kernel9+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFacts {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub correlation: u32,
    pub name_ptr: usize,
    pub local_total: u64,
    pub local_per_thread: u32,
    pub registers: u16,
    pub grid: [i32; 3],
    pub block: [i32; 3],
}

/// Reads a kernel record.
///
/// # Safety
/// `record` must point at a CUPTI kernel activity record of at least the size
/// of `CUpti_ActivityKernel10`'s prefix up to `localMemoryTotal_v2` (CUPTI 12+).
pub unsafe fn read_kernel(record: *const u8, use_v2: bool) -> KernelFacts {
    let k = record as *const CUpti_ActivityKernel10;
    // SAFETY: packed struct; every field is read unaligned through a raw pointer.
    unsafe {
        let v1 = addr_of!((*k).localMemoryTotal).read_unaligned() as u64;
        let v2 = if use_v2 {
            addr_of!((*k).localMemoryTotal_v2).read_unaligned()
        } else {
            0
        };
        KernelFacts {
            start: addr_of!((*k).start).read_unaligned(),
            end: addr_of!((*k).end).read_unaligned(),
            device: addr_of!((*k).deviceId).read_unaligned(),
            context: addr_of!((*k).contextId).read_unaligned(),
            correlation: addr_of!((*k).correlationId).read_unaligned(),
            name_ptr: addr_of!((*k).name).read_unaligned() as usize,
            local_total: if v2 >= v1 && v2 != 0 { v2 } else { v1 },
            local_per_thread: addr_of!((*k).localMemoryPerThread).read_unaligned(),
            registers: addr_of!((*k).registersPerThread).read_unaligned(),
            grid: [
                addr_of!((*k).gridX).read_unaligned(),
                addr_of!((*k).gridY).read_unaligned(),
                addr_of!((*k).gridZ).read_unaligned(),
            ],
            block: [
                addr_of!((*k).blockX).read_unaligned(),
                addr_of!((*k).blockY).read_unaligned(),
                addr_of!((*k).blockZ).read_unaligned(),
            ],
        }
    }
}

/// The record for a launch that grew (or failed to grow, with zero times) the reservation.
fn growth(k: &KernelFacts, t_start: u64, t_end: u64, before: u64, kernel: String) -> Record {
    Record::LocalMemory(LocalMemoryGrowth {
        t_start,
        t_end,
        device: k.device,
        context_id: k.context,
        correlation_id: k.correlation,
        kernel,
        total_before: before,
        total_after: k.local_total,
        per_thread: k.local_per_thread,
        registers: k.registers,
        grid: k.grid,
        block: k.block,
    })
}

/// Turns kernel facts into the few records worth keeping.
#[derive(Default)]
pub struct KernelTracker {
    max_local: HashMap<u32, u64>,
    seen: HashSet<(u32, usize)>,
    names: HashMap<usize, String>,
    pub kernels_seen: u64,
}

impl KernelTracker {
    /// `offset` converts CUPTI timestamps to CLOCK_MONOTONIC (0 when CUPTI already uses it).
    pub fn observe(&mut self, k: &KernelFacts, offset: i64, out: &mut Vec<Record>) {
        self.kernels_seen += 1;
        // A launch that failed (e.g. the driver could not grow the local-memory
        // reservation) still produces a record, with zero timestamps. It is the
        // failing request: report it, but the reservation did not grow.
        let failed = k.start == 0 && k.end == 0;
        let start = if failed {
            0
        } else {
            k.start.saturating_add_signed(offset)
        };
        let end = if failed {
            0
        } else {
            k.end.saturating_add_signed(offset)
        };
        let first = self.seen.insert((k.context, k.name_ptr));
        let before = self.max_local.get(&k.context).copied().unwrap_or(0);
        let grew = k.local_total > before;
        if failed {
            if grew {
                let name = self.name(k.name_ptr);
                out.push(growth(k, 0, 0, before, name));
            }
            return;
        }
        if !first && !grew {
            return;
        }
        let name = self.name(k.name_ptr);
        if first {
            out.push(Record::KernelFirst(KernelFirstLaunch {
                t_start: start,
                t_end: end,
                device: k.device,
                context_id: k.context,
                kernel: name.clone(),
                local_total: k.local_total,
            }));
        }
        if grew {
            self.max_local.insert(k.context, k.local_total);
            out.push(growth(k, start, end, before, name));
        }
    }

    fn name(&mut self, ptr: usize) -> String {
        self.names
            .entry(ptr)
            .or_insert_with(|| {
                if ptr == 0 {
                    return "<unnamed kernel>".to_string();
                }
                // SAFETY: CUPTI keeps kernel name strings alive for the process.
                unsafe { CStr::from_ptr(ptr as *const std::ffi::c_char) }
                    .to_string_lossy()
                    .into_owned()
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(ctx: u32, name: &'static CStr, local: u64) -> KernelFacts {
        KernelFacts {
            start: 100,
            end: 200,
            device: 0,
            context: ctx,
            correlation: 1,
            name_ptr: name.as_ptr() as usize,
            local_total: local,
            local_per_thread: 0,
            registers: 32,
            grid: [1, 1, 1],
            block: [1, 1, 1],
        }
    }

    #[test]
    fn first_launch_and_growth_only() {
        let mut t = KernelTracker::default();
        let mut out = Vec::new();
        t.observe(&facts(1, c"gemm", 0), 0, &mut out);
        t.observe(&facts(1, c"gemm", 0), 0, &mut out);
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0], Record::KernelFirst(k) if k.kernel == "gemm"));
        out.clear();
        t.observe(&facts(1, c"spill", 3 << 30), 5, &mut out);
        assert_eq!(out.len(), 2);
        match &out[1] {
            Record::LocalMemory(g) => {
                assert_eq!(g.total_before, 0);
                assert_eq!(g.total_after, 3 << 30);
                assert_eq!(g.t_start, 105);
            }
            other => panic!("{other:?}"),
        }
        out.clear();
        // Same reservation again: nothing; smaller: nothing (never given back).
        t.observe(&facts(1, c"spill", 3 << 30), 0, &mut out);
        t.observe(&facts(1, c"gemm", 1 << 20), 0, &mut out);
        assert!(out.is_empty());
        // Another context tracks its own reservation.
        t.observe(&facts(2, c"gemm", 1 << 20), 0, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(t.kernels_seen, 6);
        out.clear();
        // A failed launch (zero timestamps) is reported with t=0 and does not grow the reservation.
        let mut failed = facts(2, c"huge", 8 << 30);
        failed.start = 0;
        failed.end = 0;
        t.observe(&failed, 5, &mut out);
        assert_eq!(out.len(), 1);
        assert!(
            matches!(&out[0], Record::LocalMemory(g) if g.t_start == 0 && g.total_after == 8 << 30 && g.total_before == 1 << 20)
        );
        out.clear();
        t.observe(&facts(2, c"gemm", 2 << 20), 0, &mut out);
        assert!(matches!(&out[0], Record::LocalMemory(g) if g.total_before == 1 << 20));
    }

    #[test]
    fn record_layout_prefix_is_as_expected() {
        use std::mem::offset_of;
        assert_eq!(offset_of!(CUpti_ActivityKernel10, start), 16);
        assert_eq!(offset_of!(CUpti_ActivityKernel10, localMemoryTotal), 88);
        assert_eq!(offset_of!(CUpti_ActivityKernel10, name), 104);
        assert_eq!(offset_of!(CUpti_ActivityKernel10, localMemoryTotal_v2), 192);
    }
}
