//! OOM forensics: for each failed request (or OOM exception), what failed, how
//! much was free, which lazy-initialisation memory landed in the same step
//! before it — the part a prewarm would have moved to setup — and, from the
//! account, whether moving it would have saved the run (docs/accounting.md):
//! what is moved but stays held (local memory, communicator buffers, cuBLAS
//! workspaces, module code) still sits under the failing step's peak.

use super::account::{
    CommAccount, ExceptionEvent, FailedCall, FailedRequest, Forensic, OomBudget, PrewarmProjection,
    Remedy,
};
use super::framework_joins::class_of_source;
use super::memory::{Failure, Replay};
use super::phases::Boundaries;
use crate::prewarm::catalog::{CATALOG, EventClass};
use std::collections::BTreeMap;

/// True for exception texts that mean the device ran out of memory.
pub fn is_oom_text(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("out of memory")
        || m.contains("cuda failure 2")
        || m.contains("cuda_error_out_of_memory")
}

/// The pool's unused cache from torch's OOM message ("… and 99.22 MiB is
/// reserved by PyTorch but unallocated").
pub fn torch_pool_cache(message: &str) -> Option<u64> {
    let end = message.find(" is reserved by PyTorch but unallocated")?;
    let mut words = message[..end].split_whitespace().rev();
    let unit = words.next()?;
    let value: f64 = words.next()?.parse().ok()?;
    let scale = match unit {
        "B" | "bytes" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    };
    Some((value * scale as f64) as u64)
}

/// Whether bytes of a class stay held once made: local memory is never given
/// back, communicators keep their buffers and code, cuBLAS its handles and
/// workspaces, modules their code. Autotune scratch is given back.
pub fn persists(class: EventClass) -> bool {
    match class {
        EventClass::TritonAutotune | EventClass::Compile => false,
        EventClass::Cublas
        | EventClass::LocalMemory
        | EventClass::NcclComm
        | EventClass::ModuleLoad => true,
    }
}

/// What failed, as data; with the size and source it tells one failure
/// from the allocator's retries of it.
fn describe(f: &Failure) -> FailedRequest {
    match &f.local_kernel {
        Some(k) => FailedRequest::LocalMemoryGrowth { kernel: k.clone() },
        None => FailedRequest::Allocation { api: f.api.clone() },
    }
}

/// Lazy-init memory that landed before a failure: its class, bytes, and
/// whether it was still held at the failure.
struct Landed {
    class: EventClass,
    bytes: u64,
    held: bool,
}

/// Everything of a lazy-init class that landed in [from, to].
fn landed(replay: &Replay, comms: &[CommAccount], start: u64, from: u64, to: u64) -> Vec<Landed> {
    let at = |s: f64| start + (s * 1e9) as u64;
    let inside = |t: u64| t >= from && t <= to;
    let mut out = Vec::new();
    for a in replay.oop_allocs.iter().filter(|a| inside(a.t)) {
        if let Some(class) = class_of_source(&a.source) {
            out.push(Landed {
                class,
                bytes: a.bytes,
                held: a.freed.is_none_or(|f| f > to),
            });
        }
    }
    for ev in replay
        .local_events
        .iter()
        .filter(|e| !e.failed && inside(at(e.t_s)))
    {
        out.push(Landed {
            class: EventClass::LocalMemory,
            bytes: ev.device_growth,
            held: true,
        });
    }
    for c in comms {
        if c.start_s.is_some_and(|s| inside(at(s))) {
            out.push(Landed {
                class: EventClass::NcclComm,
                bytes: c.inferred_bytes,
                held: true,
            });
        }
    }
    for &(_, bytes) in replay.module_code.iter().filter(|m| inside(m.0)) {
        out.push(Landed {
            class: EventClass::ModuleLoad,
            bytes,
            held: true,
        });
    }
    out
}

/// The budget at a failure the probe saw, if the device's figures are known.
fn budget(
    f: &Failure,
    replay: &Replay,
    bounds: &Boundaries,
    cache: Option<u64>,
) -> Option<OomBudget> {
    let total = f.total?;
    let free = f.free_before?;
    Some(OomBudget {
        device_total: total,
        device_used: total.saturating_sub(free),
        request: f.bytes,
        shortfall: f.bytes as i64 - free as i64,
        pool_reserved: f.pool,
        pool_peak: replay
            .phases
            .get(&bounds.phase_of(f.t))
            .map_or(f.pool, |p| p.pool_peak.max(f.pool)),
        pool_cache: cache,
    })
}

/// What each candidate prewarm would leave at the failure point: the demand
/// there (in use + the request) minus what it would make in setup and give
/// back before (transient), with what it makes in setup and keeps (persistent)
/// still held.
fn projections(
    b: &OomBudget,
    request_class: Option<EventClass>,
    request_in_pool: bool,
    landed: &[Landed],
) -> Vec<PrewarmProjection> {
    let classes: Vec<EventClass> = landed
        .iter()
        .filter(|l| l.bytes > 0)
        .map(|l| l.class)
        .chain(request_class)
        .collect();
    CATALOG
        .iter()
        .filter(|p| p.targets.iter().any(|t| classes.contains(t)))
        .map(|p| {
            let moves_request = request_class.is_some_and(|c| p.targets.contains(&c));
            let moved: u64 = landed
                .iter()
                .filter(|l| p.targets.contains(&l.class))
                .map(|l| l.bytes)
                .sum();
            let targeted = |l: &&Landed| p.targets.contains(&l.class) && l.held;
            let mut persistent: u64 = landed
                .iter()
                .filter(targeted)
                .filter(|l| persists(l.class))
                .map(|l| l.bytes)
                .sum();
            let transient: u64 = landed
                .iter()
                .filter(targeted)
                .filter(|l| !persists(l.class))
                .map(|l| l.bytes)
                .sum();
            let mut demand = b.device_used + b.request - transient;
            if moves_request {
                if request_class.is_some_and(persists) {
                    persistent += b.request;
                } else {
                    demand -= b.request;
                }
            }
            let margin = b.device_total as i64 - demand as i64;
            PrewarmProjection {
                prewarm: p.name.to_string(),
                targets: p.targets.to_vec(),
                moves_request,
                moved_bytes: moved,
                persistent_bytes: persistent,
                transient_bytes: transient,
                projected_demand: demand,
                margin,
                margin_with_pool_cache: b
                    .pool_cache
                    .filter(|_| moves_request && !request_in_pool)
                    .map(|c| margin + c as i64),
            }
        })
        .collect()
}

/// The fix that removes a failed local-memory growth instead of moving it:
/// pruning the autotune candidate being benchmarked when it failed.
fn remedies(f: &Failure, replay: &Replay, b: Option<&OomBudget>, start: u64) -> Vec<Remedy> {
    let Some(kernel) = &f.local_kernel else {
        return Vec::new();
    };
    let at = |s: f64| start + (s * 1e9) as u64;
    replay
        .local_events
        .iter()
        .filter(|e| e.failed && &e.kernel == kernel && at(e.t_s).abs_diff(f.t) < 1_000_000)
        .filter_map(|e| {
            Some(Remedy::PruneAutotuneConfig {
                kernel: kernel.clone(),
                config: e.autotune_config.clone()?,
                local_bytes: e.after.saturating_sub(e.before),
                per_thread: e.per_thread,
                registers: e.registers,
                // Without the candidate the reservation never grows: the
                // demand at this point is what was in use.
                margin: b.map_or(0, |b| b.device_total as i64 - b.device_used as i64),
            })
        })
        .take(1)
        .collect()
}

/// The CUresult of an allocation that failed for lack of device memory.
pub const CUDA_ERROR_OUT_OF_MEMORY: u32 = 2;
/// The CUresult of a call made with no (or a destroyed) context current.
pub const CUDA_ERROR_INVALID_CONTEXT: u32 = 201;

/// Allocation calls that failed for another reason than lack of memory.
pub fn failed_calls(replay: &Replay, bounds: &Boundaries) -> Vec<FailedCall> {
    replay
        .failures
        .iter()
        .filter(|f| f.result != CUDA_ERROR_OUT_OF_MEMORY)
        .map(|f| FailedCall {
            t_s: bounds.seconds_in(f.t),
            phase: bounds.phase_of(f.t),
            step: bounds.step_of(f.t),
            api: f.api.clone(),
            source: f.source.clone(),
            bytes: f.bytes,
            result: f.result,
            no_current_context: f.result == CUDA_ERROR_INVALID_CONTEXT && f.no_context,
        })
        .collect()
}

/// Builds the forensics of one process.
/// `nccl_outside` are NCCL's allocations outside every communicator's init
/// (time, bytes): in the NCCL class that preceded a failure, said apart.
pub fn forensics(
    replay: &Replay,
    comms: &[CommAccount],
    nccl_outside: &[(u64, u64)],
    exceptions: &[ExceptionEvent],
    bounds: &Boundaries,
) -> Vec<Forensic> {
    let oom_exception = exceptions.iter().find(|e| is_oom_text(&e.message));
    let pool_cache = oom_exception.and_then(|e| {
        torch_pool_cache(&e.message).or(e
            .pool_reserved
            .zip(e.pool_allocated)
            .map(|(r, a)| r.saturating_sub(a)))
    });
    let seen = FailureContext {
        replay,
        comms,
        nccl_outside,
        bounds,
        message: oom_exception.map(|e| e.message.clone()),
        pool_cache,
    };
    let out: Vec<Forensic> = distinct_oom_failures(replay)
        .into_iter()
        .map(|f| seen.forensic(f))
        .collect();
    match oom_exception {
        Some(e) if out.is_empty() => vec![seen_only_as_exception(e, bounds)],
        _ => out,
    }
}

/// What every failure's forensic is read against.
struct FailureContext<'a> {
    replay: &'a Replay,
    comms: &'a [CommAccount],
    nccl_outside: &'a [(u64, u64)],
    bounds: &'a Boundaries,
    /// The out-of-memory exception's text, if the process raised one.
    message: Option<String>,
    /// What PyTorch's pool held cached when it raised (its own figure).
    pool_cache: Option<u64>,
}

/// The out-of-memory failures, one per failed request: allocators retry
/// after freeing caches, so the same request failing again within 50 ms is
/// the same failure.
fn distinct_oom_failures(replay: &Replay) -> Vec<&Failure> {
    let mut last: Option<(u64, (FailedRequest, u64, &str))> = None;
    let mut out = Vec::new();
    for f in replay
        .failures
        .iter()
        .filter(|f| f.result == CUDA_ERROR_OUT_OF_MEMORY)
    {
        let key = (describe(f), f.bytes, f.source.as_str());
        if let Some((t, k)) = &last
            && *k == key
            && f.t.saturating_sub(*t) < 50_000_000
        {
            continue;
        }
        last = Some((f.t, key));
        out.push(f);
    }
    out
}

impl FailureContext<'_> {
    /// One failed request: what landed before it, which prewarms would have
    /// moved it, and what each would leave free.
    fn forensic(&self, f: &Failure) -> Forensic {
        let (replay, bounds) = (self.replay, self.bounds);
        let step = bounds.step_of(f.t);
        // Lazy-init memory that landed after setup and before the failure is
        // what a prewarm would have moved out of the way.
        let step_start = match step {
            None => bounds.start,
            Some(_) => bounds.step1_begin.unwrap_or(bounds.start),
        };
        let landed = landed(replay, self.comms, bounds.start, step_start, f.t);
        let own = class_of_source(&f.source);
        let classes = preceding_classes(&landed);
        let mut movable: Vec<EventClass> = classes.iter().map(|c| c.0).collect();
        if let Some(own) = own {
            movable.retain(|c| *c != own);
            movable.insert(0, own);
        }
        // The failing request's own class decides; otherwise the biggest preceding one.
        let key_class = own.or(movable.first().copied());
        let prewarms: Vec<String> = CATALOG
            .iter()
            .filter(|p| key_class.is_some_and(|c| p.targets.contains(&c)))
            .map(|p| p.name.to_string())
            .collect();
        let budget = budget(f, replay, bounds, self.pool_cache);
        let in_pool = f.source == super::sources::TORCH_POOL;
        Forensic {
            t_s: bounds.seconds_in(f.t),
            phase: bounds.phase_of(f.t),
            step,
            request: describe(f),
            recovered: bounds.step_ends.iter().any(|&e| e > f.t),
            source: f.source.clone(),
            library: f.library.clone(),
            bytes: f.bytes,
            result: f.result,
            device_free_before: f.free_before,
            device_total: f.total,
            message: self.message.clone(),
            preceded_by: classes.into_iter().filter(|c| c.1 > 0).collect(),
            preceded_nccl_outside_comms: self
                .nccl_outside
                .iter()
                .filter(|(t, _)| *t >= step_start && *t <= f.t)
                .map(|x| x.1)
                .sum(),
            movable,
            prewarms,
            projections: budget
                .as_ref()
                .map(|b| projections(b, own, in_pool, &landed))
                .unwrap_or_default(),
            remedies: remedies(f, replay, budget.as_ref(), bounds.start),
            budget,
        }
    }
}

/// The bytes each class of lazy initialisation landed, largest first.
fn preceding_classes(landed: &[Landed]) -> Vec<(EventClass, u64)> {
    let mut preceded: BTreeMap<EventClass, u64> = BTreeMap::new();
    for l in landed {
        *preceded.entry(l.class).or_default() += l.bytes;
    }
    let mut classes: Vec<(EventClass, u64)> = preceded.into_iter().collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.1));
    classes
}

/// An out-of-memory exception whose failed request the probe never saw
/// (raised by a library's own check, or the capture was off).
fn seen_only_as_exception(e: &ExceptionEvent, bounds: &Boundaries) -> Forensic {
    let t = bounds.start + (e.t_s * 1e9) as u64;
    Forensic {
        t_s: e.t_s,
        phase: e.phase,
        step: bounds.step_of(t),
        request: FailedRequest::NotSeen,
        recovered: false,
        source: String::new(),
        library: String::new(),
        bytes: 0,
        result: 0,
        device_free_before: None,
        device_total: None,
        message: Some(e.message.clone()),
        preceded_by: Vec::new(),
        preceded_nccl_outside_comms: 0,
        movable: Vec::new(),
        prewarms: Vec::new(),
        budget: None,
        projections: Vec::new(),
        remedies: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_texts() {
        assert!(is_oom_text("Triton Error [CUDA]: out of memory"));
        assert!(is_oom_text(
            "NCCL error: unhandled cuda error, NCCL version 2.21.5 ... Cuda failure 2 'out of memory'"
        ));
        assert!(is_oom_text(
            "CUDA out of memory. Tried to allocate 128.00 MiB"
        ));
        assert!(!is_oom_text("ValueError: bad shape"));
    }

    #[test]
    fn the_pool_cache_is_read_from_torchs_message() {
        let m = "CUDA out of memory. Tried to allocate 128.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 119.12 MiB is free. Of the allocated memory 138.11 GiB is allocated by PyTorch, and 99.22 MiB is reserved by PyTorch but unallocated. If reserved";
        assert_eq!(
            torch_pool_cache(m),
            Some((99.22 * (1u64 << 20) as f64) as u64)
        );
        assert_eq!(torch_pool_cache("Triton Error [CUDA]: out of memory"), None);
    }

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    /// Synthetic failures (not a recording): an async allocation failing with
    /// a non-memory CUresult, and an OOM the allocator recovered from.
    #[test]
    fn only_out_of_memory_results_are_forensics_and_recovery_is_said() {
        let fail = |t: u64, result: u32| Failure {
            t,
            api: "cuMemAllocAsync".into(),
            bytes: 256 << 10,
            source: crate::analysis::sources::TORCH_POOL.into(),
            library: "libc10_cuda.so".into(),
            result,
            free_before: Some(100 * GIB),
            total: Some(140 * GIB),
            local_kernel: None,
            pool: GIB,
            no_context: true,
        };
        let replay = Replay {
            failures: vec![fail(2_000_000_000, 801), fail(3_000_000_000, 2)],
            ..Replay::default()
        };
        let bounds = Boundaries::two_steps();
        let f = forensics(&replay, &[], &[], &[], &bounds);
        assert_eq!(f.len(), 1, "the CUresult 801 failure is not an OOM");
        assert_eq!(f[0].result, 2);
        assert!(f[0].recovered, "step 2 ended after it");
        let calls = failed_calls(&replay, &bounds);
        assert_eq!(calls.len(), 1);
        assert_eq!((calls[0].result, calls[0].step), (801, Some(1)));
        // Only CUDA_ERROR_INVALID_CONTEXT is read as "no context was current".
        assert!(!calls[0].no_current_context);
        // The same OOM as the last thing before the end is not recovered.
        let last = Boundaries {
            step_ends: vec![2_500_000_000],
            ..bounds
        };
        assert!(!forensics(&replay, &[], &[], &[], &last)[0].recovered);
    }

    /// Synthetic budget (not a recording), shaped like the run: a
    /// 140 GiB device with 4.8 GiB free when a 6 GiB local-memory growth failed.
    fn spill_budget() -> OomBudget {
        OomBudget {
            device_total: 140 * GIB,
            device_used: 140 * GIB - 4915 * MIB,
            request: 6 * GIB,
            shortfall: (6 * GIB) as i64 - (4915 * MIB) as i64,
            pool_reserved: 120 * GIB,
            pool_peak: 120 * GIB,
            pool_cache: None,
        }
    }

    #[test]
    fn moving_memory_that_stays_held_saves_nothing() {
        let b = spill_budget();
        let landed = [
            Landed {
                class: EventClass::Cublas,
                bytes: 128 * MIB,
                held: true,
            },
            Landed {
                class: EventClass::TritonAutotune,
                bytes: 512 * MIB,
                held: true,
            },
        ];
        let p = projections(&b, Some(EventClass::LocalMemory), false, &landed);
        let by = |n: &str| p.iter().find(|x| x.prewarm == n).unwrap();
        // The autotune prewarm moves the failing growth to setup, where it
        // stays: still short by the same 1.2 GiB, less the scratch it frees.
        let t = by("triton_autotune");
        assert!(t.moves_request);
        assert_eq!(t.persistent_bytes, 6 * GIB);
        assert_eq!(t.transient_bytes, 512 * MIB);
        assert_eq!(t.margin, -b.shortfall + (512 * MIB) as i64);
        assert!(t.margin < 0);
        // cuBLAS workspaces made in setup are still held: nothing changes.
        let c = by("cublas");
        assert!(!c.moves_request);
        assert_eq!(c.margin, -b.shortfall);
        // A transient request moved to setup is not needed at the failure.
        let scratch = projections(&b, Some(EventClass::TritonAutotune), false, &[]);
        let s = scratch
            .iter()
            .find(|x| x.prewarm == "triton_autotune")
            .unwrap();
        assert_eq!(s.margin, (4915 * MIB) as i64);
        // With the pool's unused cache known, an out-of-pool request moved to
        // setup could also have had that.
        let cached = OomBudget {
            pool_cache: Some(2 * GIB),
            ..spill_budget()
        };
        let p = projections(&cached, Some(EventClass::LocalMemory), false, &[]);
        let t = p.iter().find(|x| x.prewarm == "triton_autotune").unwrap();
        assert_eq!(t.margin_with_pool_cache, Some(t.margin + (2 * GIB) as i64));
        // Prewarms that target nothing that happened are not candidates.
        assert!(p.iter().all(|x| x.prewarm != "nccl_comm"));
    }
}
