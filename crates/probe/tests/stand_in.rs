//! The real probe cdylib inside a process, against stand-in libcuda/libcupti
//! (see tests/support): every scenario runs with and without the probe, the
//! program's stdout/stderr and ending must be identical, and the event file
//! must hold what the program did.

mod support;

use prewarm_events::*;
use support::{all, run_both, run_both_with};

fn mem(records: &[Record]) -> Vec<MemCall> {
    all(records, |r| match r {
        Record::Mem(m) => Some(m.clone()),
        _ => None,
    })
}

fn notices(records: &[Record]) -> Vec<Notice> {
    all(records, |r| match r {
        Record::Notice(n) => Some(n.clone()),
        _ => None,
    })
}

fn library_of(records: &[Record], id: u32) -> String {
    all(records, |r| match r {
        Record::Library(l) if l.id == id => Some(l.path.clone()),
        _ => None,
    })
    .pop()
    .unwrap_or_else(|| panic!("no Library record for id {id}"))
}

fn last_cost(records: &[Record]) -> ProbeCost {
    all(records, |r| match r {
        Record::Cost(c) => Some(c.clone()),
        _ => None,
    })
    .pop()
    .expect("a Cost record")
}

fn last_dropped(records: &[Record]) -> RecordsDropped {
    all(records, |r| match r {
        Record::Dropped(d) => Some(d.clone()),
        _ => None,
    })
    .pop()
    .expect("a Dropped record")
}

/// Capture stayed on and said nothing worse than "info".
fn assert_clean_capture(records: &[Record]) {
    let bad: Vec<_> = notices(records)
        .into_iter()
        .filter(|n| n.level != NoticeLevel::Info)
        .collect();
    assert!(bad.is_empty(), "unexpected notices: {bad:?}");
    // The report tells this notice from the ones it shows by how it begins
    // (src/analysis/process/facts.rs, CAPTURE_ACTIVE).
    assert!(
        notices(records)
            .iter()
            .any(|n| n.level == NoticeLevel::Info && n.text.starts_with("capture active: CUPTI ")),
        "no capture-active notice"
    );
}

/// A scenario under the probe with one switch set, and without it; both
/// runs succeeded.
fn switched_and_not(scenario: &str, switch: (&str, &str)) -> (support::Run, support::Run) {
    let probe = support::probe_library();
    let switched = support::run_with(&[scenario], Some(&probe), &[switch]);
    let not = support::run(&[scenario], Some(&probe));
    for run in [&switched, &not] {
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    (switched, not)
}

/// The sizes of a clean capture's cuMemAlloc calls, as the probe saw them.
fn clean_alloc_sizes(run: &support::Run) -> Vec<u64> {
    let r = &run.events().records;
    assert_clean_capture(r);
    mem(r)
        .iter()
        .filter(|m| m.api == MemApi::MemAlloc)
        .map(|m| m.bytes)
        .collect()
}

fn count(calls: &[MemCall], api: MemApi, bytes: u64, result: u32) -> usize {
    calls
        .iter()
        .filter(|m| m.api == api && m.bytes == bytes && m.result == result)
        .count()
}

#[test]
fn threads_every_call_kind_and_kernel_records_are_captured() {
    // Every stream-ordered call traced, so that their counts can be checked.
    let run = run_both_with(&["basic"], &[("PREWARM_DOCTOR_POOL_CALLS", "all")]);
    let out = run.events();
    assert_eq!(out.tail, Tail::Clean);
    let h = &out.header;
    assert_eq!(h.get("status"), Some("active"));
    assert_eq!(h.get("cupti_found"), Some("already loaded in the process"));
    // CUPTI keeps its own clock (the stand-in's runs 1 s ahead of
    // CLOCK_MONOTONIC); the probe converts with an offset.
    let clock = h.get("activity_clock").unwrap_or_default();
    assert!(clock.starts_with("offset -100"), "{clock}");
    let r = &out.records;
    assert_clean_capture(r);
    let calls = mem(r);

    // 8 threads x 100 pairs of 1-4 MiB, 32 short-lived threads x 1 pair of 4 KiB.
    for mib in 1..=4u64 {
        assert_eq!(count(&calls, MemApi::MemAlloc, mib << 20, 0), 200);
    }
    assert_eq!(count(&calls, MemApi::MemAlloc, 4096, 0), 32);
    assert_eq!(
        calls
            .iter()
            .filter(|m| m.api == MemApi::MemFree && m.result == 0)
            .count(),
        832
    );
    let threads: std::collections::HashSet<u32> = calls
        .iter()
        .filter(|m| m.api == MemApi::MemAlloc)
        .map(|m| m.thread)
        .collect();
    assert!(threads.len() >= 8 + 32, "{} threads seen", threads.len());

    // Every failed request is there, with the free memory around it.
    let failed: Vec<&MemCall> = calls
        .iter()
        .filter(|m| m.api == MemApi::MemAlloc && m.result == 2)
        .collect();
    assert_eq!(failed.len(), 8);
    for m in &failed {
        assert_eq!(m.bytes, 200 << 30);
        assert_eq!(m.total, 80 << 30);
        // Both readings are there; they need not be equal: the other
        // threads allocate and free between the two.
        assert!(m.free_before < 80 << 30 && m.free_after < 80 << 30, "{m:?}");
    }

    // Callers: the program for its own calls, the other library for its own.
    let program_lib = library_of(r, failed[0].library);
    assert!(program_lib.ends_with("/program"), "{program_lib}");
    let create: Vec<&MemCall> = calls
        .iter()
        .filter(|m| m.api == MemApi::MemCreate)
        .collect();
    assert_eq!(create.len(), 1);
    assert_eq!(create[0].bytes, 256 << 20);
    assert!(library_of(r, create[0].library).ends_with("/libothercaller.so"));
    // Every one of the 832 frees of 8 + 32 threads (most found by the
    // probe's cached stack walks, some checked against the unwinder) names
    // the program.
    assert!(
        calls
            .iter()
            .filter(|m| m.api == MemApi::MemFree && m.result == 0)
            .all(|m| library_of(r, m.library) == program_lib)
    );
    let release: Vec<&MemCall> = calls
        .iter()
        .filter(|m| m.api == MemApi::MemRelease)
        .collect();
    assert_eq!(release.len(), 1);
    assert_eq!(release[0].address, create[0].address);
    assert_eq!(count(&calls, MemApi::LibraryLoadData, 0, 0), 1);
    assert_eq!(count(&calls, MemApi::LibraryUnload, 0, 0), 1);
    assert_eq!(count(&calls, MemApi::PrimaryCtxRetain, 0, 0), 1);

    // The context, measured when it came up.
    let contexts = all(r, |x| match x {
        Record::Context(c) => Some(c.clone()),
        _ => None,
    });
    assert_eq!(contexts.len(), 1);
    assert_eq!(contexts[0].pci_bus_id, "00000000:19:00.0");
    assert_eq!(contexts[0].total - contexts[0].free, 512 << 20);

    // Kernel records: first launches and local-memory growth, the failed one with zero times.
    let firsts: Vec<String> = all(r, |x| match x {
        Record::KernelFirst(k) => Some(k.kernel.clone()),
        _ => None,
    });
    assert_eq!(firsts, ["gemm", "spill", "late"]);
    let growth = all(r, |x| match x {
        Record::LocalMemory(l) => Some(l.clone()),
        _ => None,
    });
    assert_eq!(growth.len(), 2);
    assert_eq!(
        (growth[0].total_before, growth[0].total_after),
        (0, 3 << 30)
    );
    // On CLOCK_MONOTONIC: between the probe's start and its last record, not 1 s ahead.
    let started: u64 = h.get("start_ns").and_then(|v| v.parse().ok()).unwrap();
    let last = r
        .iter()
        .filter(|x| !matches!(x, Record::LocalMemory(_) | Record::KernelFirst(_)))
        .filter_map(Record::time)
        .max()
        .unwrap();
    for t in growth.iter().map(|g| g.t_start).filter(|&t| t != 0) {
        assert!(t >= started && t <= last, "{started} <= {t} <= {last}");
    }
    assert_eq!(
        (growth[1].total_before, growth[1].total_after),
        (3 << 30, 8 << 30)
    );
    // The activity buffers came zeroed, promised so, and CUPTI cleared none
    // (clearing one is an 8 MiB memset on the launching thread).
    let buffers = &run.number_rows("cupti-report-buffers")[0];
    let (requested, promised, cleared, not_zero) = (buffers[0], buffers[1], buffers[2], buffers[3]);
    assert!(requested >= 1, "{buffers:?}");
    assert_eq!((promised, cleared, not_zero), (1, 0, 0), "{buffers:?}");
    assert_eq!((growth[1].t_start, growth[1].t_end), (0, 0));

    // Stream-ordered calls: counted per pool, not recorded one by one; only
    // the failed one is a MemCall (with the free memory read after it).
    for api in [MemApi::MemAllocAsync, MemApi::MemAllocFromPoolAsync] {
        assert!(calls.iter().all(|m| m.api != api || m.result == 2));
    }
    assert!(calls.iter().all(|m| m.api != MemApi::MemFreeAsync));
    let failed_async: Vec<&MemCall> = calls
        .iter()
        .filter(|m| m.api == MemApi::MemAllocAsync)
        .collect();
    assert_eq!(failed_async.len(), 1);
    assert_eq!(failed_async[0].bytes, 100 << 30);
    assert_eq!(failed_async[0].free_before, failed_async[0].free_after);
    assert_ne!(failed_async[0].free_after, UNKNOWN_BYTES);
    assert_eq!(library_of(r, failed_async[0].library), program_lib);
    let pools = all(r, |x| match x {
        Record::Pool(p) => Some(p.clone()),
        _ => None,
    });
    // The latest by time: summaries of different threads reach the file in
    // flush order (the loader sorts them too).
    let last = |id: u32| {
        pools
            .iter()
            .filter(|p| p.pool_id == id)
            .max_by_key(|p| p.t)
            .unwrap_or_else(|| panic!("no PoolUse for pool {id}"))
    };
    let device_pool = last(1);
    let program_async_bytes: u64 = 4 * (0..1000u64).map(|i| (i % 8 + 1) * 65536).sum::<u64>();
    assert_eq!(device_pool.allocs, 4000 + 2048);
    assert_eq!(device_pool.alloc_bytes, program_async_bytes + 2048 * 4096);
    assert_eq!(
        device_pool.frees,
        4000 + 2048 + 100,
        "frees count on the device pool"
    );
    assert_eq!(device_pool.failed, 1);
    assert_eq!(device_pool.device, 0);
    assert_ne!(device_pool.handle, 0);
    assert_eq!(
        library_of(r, device_pool.library),
        program_lib,
        "owner: first user"
    );
    let explicit = last(2);
    assert_eq!((explicit.allocs, explicit.alloc_bytes), (100, 100 << 20));
    assert_eq!((explicit.frees, explicit.failed), (0, 0));
    assert_ne!(explicit.handle, device_pool.handle);
    assert_eq!(pools.iter().map(|p| p.pool_id).max(), Some(2));
    // The pools' sizes, read from the driver: 32 MiB chunks, all freed before the failure.
    for id in [1, 2] {
        let measured = pools
            .iter()
            .filter(|p| p.pool_id == id && p.reserved != UNKNOWN_BYTES)
            .max_by_key(|p| p.t)
            .unwrap_or_else(|| panic!("pool {id} was never measured"));
        assert_eq!(
            (measured.reserved, measured.reserved_high, measured.used),
            (32 << 20, 32 << 20, 0)
        );
    }
    // The other library sharing the program's pool is noticed (on a sampled check).
    let shared: Vec<Notice> = notices(r)
        .into_iter()
        .filter(|n| n.text.contains("is also used by"))
        .collect();
    assert_eq!(shared.len(), 1, "{shared:?}");
    assert!(
        shared[0].text.contains("libothercaller.so") && shared[0].text.contains("/program"),
        "{}",
        shared[0].text
    );

    // Counters: every callback counted, nothing dropped by the probe, CUPTI's drops passed on.
    let cost = last_cost(r);
    // Six kernel launches among them (their launch calls traced while the
    // first steps are watched).
    let traced_calls = 1 + 2 + 8 * 201 + 32 * 2 + 4 * 1000 * 2 + 2048 * 2 + 1 + 100 * 2 + 1 + 2 + 6;
    assert_eq!(cost.callbacks, 2 * traced_calls + 1);
    // A record for each function's first launch only: gemm, spill, huge
    // (failed) and late, not gemm's second and third.
    assert_eq!(cost.activity_records, 4);
    // Where the callbacks' time went: the launch callbacks and the library
    // loads are parts of it, each counted; the free-memory readings too.
    assert!(cost.launch_ns > 0 && cost.module_ns > 0, "{cost:?}");
    assert!(
        cost.launch_ns + cost.module_ns <= cost.callback_ns,
        "{cost:?}"
    );
    assert!(cost.reading_ns > 0, "{cost:?}");
    // The caller walks too (one at each traced call's exit), inside them.
    assert!(
        cost.walk_ns > 0 && cost.walk_ns <= cost.callback_ns,
        "{cost:?}"
    );
    let dropped = last_dropped(r);
    assert_eq!(dropped.probe_events, 0);
    assert_eq!(dropped.cupti_records, 3);
}

#[test]
fn asked_for_its_own_clock_the_probe_registers_it_with_cupti() {
    let run = run_both_with(&["basic"], &[("PREWARM_DOCTOR_CUPTI_CLOCK", "probe")]);
    let out = run.events();
    assert_eq!(
        out.header.get("activity_clock"),
        Some("cupti-timestamp-callback")
    );
    let started: u64 = out
        .header
        .get("start_ns")
        .and_then(|v| v.parse().ok())
        .unwrap();
    let growth_times: Vec<u64> = out
        .records
        .iter()
        .filter_map(|x| match x {
            Record::LocalMemory(l) if l.t_start != 0 => Some(l.t_start),
            _ => None,
        })
        .collect();
    assert!(!growth_times.is_empty());
    // Taken from the probe's clock: no offset, and not the stand-in's own clock 1 s ahead.
    let ended = prewarm_events::clock::now_ns();
    assert!(
        growth_times.iter().all(|&t| t >= started && t <= ended),
        "{growth_times:?}"
    );
}

#[test]
fn callbacks_during_exit_and_after_thread_local_destruction_are_recorded() {
    // The H200 failure: cuLibraryUnload from an exit handler, after the main
    // thread's thread-locals were destroyed, panicked inside the probe.
    let run = run_both(&["teardown"]);
    let out = run.events();
    assert_eq!(out.tail, Tail::Clean);
    let r = &out.records;
    assert_clean_capture(r);
    let calls = mem(r);
    let freed = |mib: u64| {
        let alloc = calls
            .iter()
            .find(|m| m.api == MemApi::MemAlloc && m.bytes == mib << 20)
            .unwrap_or_else(|| panic!("the {mib} MiB allocation"));
        calls
            .iter()
            .any(|m| m.api == MemApi::MemFree && m.address == alloc.address && m.result == 0)
    };
    assert!(
        freed(3),
        "free from an exit handler after thread-local destruction"
    );
    assert!(
        freed(5),
        "free from an exit handler after the probe's exit flush"
    );
    assert!(freed(7), "free from a library destructor (_dl_fini)");
    assert!(freed(9), "free from a thread-exit key destructor");
    assert_eq!(count(&calls, MemApi::LibraryUnload, 0, 0), 1);
}

#[test]
fn a_forked_child_never_writes_into_the_parents_event_file() {
    let run = run_both(&["fork"]);
    let out = run.events();
    assert_eq!(out.tail, Tail::Clean);
    let calls = mem(&out.records);
    assert_eq!(count(&calls, MemApi::MemAlloc, 12345, 0), 0);
    assert_eq!(count(&calls, MemApi::MemAlloc, 54321, 0), 1);
    assert_eq!(count(&calls, MemApi::MemAlloc, 1 << 20, 0), 1);
    assert_clean_capture(&out.records);
}

fn assert_flushed_before_death(args: &[&str], bytes: u64, signal: i32) {
    let run = run_both(args);
    assert_eq!(run.ending(), (None, Some(signal)));
    let out = run.events();
    let calls = mem(&out.records);
    assert_eq!(
        count(&calls, MemApi::MemAlloc, bytes, 0),
        3,
        "the allocations made just before the crash were written by the signal handler"
    );
}

#[test]
fn a_segfault_reaches_the_programs_own_handler_with_its_original_siginfo() {
    // The program's handler prints si_code and si_addr: they must be the
    // fault's (code 1, address 0x10), not those of a re-raise.
    assert_flushed_before_death(&["segv"], 777, libc::SIGSEGV);
}

#[test]
fn abort_reaches_the_programs_own_handler_and_still_kills_the_process() {
    assert_flushed_before_death(&["abort"], 888, libc::SIGABRT);
}

#[test]
fn a_queued_signal_reaches_the_programs_handler_with_its_code_and_value() {
    // The handler prints si_code (SI_QUEUE) and the queued value, then exits 3.
    let run = run_both(&["queued"]);
    assert_eq!(run.ending(), (Some(3), None));
    let calls = mem(&run.events().records);
    assert_eq!(count(&calls, MemApi::MemAlloc, 999, 0), 3);
}

#[test]
fn a_stack_overflow_on_the_main_thread_is_flushed_from_the_alternate_stack() {
    assert_flushed_before_death(&["overflow"], 4242, libc::SIGSEGV);
}

#[test]
fn a_stack_overflow_on_a_thread_the_probe_has_seen_is_flushed_too() {
    assert_flushed_before_death(&["overflow-thread"], 4242, libc::SIGSEGV);
}

#[test]
fn a_panic_inside_the_probe_prints_nothing_and_capture_continues() {
    let run = run_both(&["panic"]);
    let out = run.events();
    let r = &out.records;
    let warnings: Vec<Notice> = notices(r)
        .into_iter()
        .filter(|n| n.level != NoticeLevel::Info)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].level, NoticeLevel::Warning);
    assert!(
        warnings[0].text.contains("internal error in the self-test")
            && warnings[0].text.contains("deliberate panic"),
        "{}",
        warnings[0].text
    );
    let calls = mem(r);
    assert_eq!(count(&calls, MemApi::MemAlloc, 111, 0), 1);
    assert_eq!(
        count(&calls, MemApi::MemAlloc, 222, 0),
        1,
        "capture continued"
    );
    assert_eq!(last_dropped(r).probe_events, 1, "the lost event is counted");
}

#[test]
fn the_async_allocators_pool_is_measured_after_its_last_burst() {
    // A stand-in libc10_cuda makes 1,040 stream-ordered allocations in a
    // burst (40 MiB left live) just before the program exits: the last Pool
    // record still has the pool's final size (writer thread or exit).
    let run = run_both(&["torch-async"]);
    let out = run.events();
    let r = &out.records;
    assert_clean_capture(r);
    let pools = all(r, |x| match x {
        Record::Pool(p) => Some(p.clone()),
        _ => None,
    });
    let last = pools.last().expect("a Pool record");
    assert!(pools.iter().all(|p| p.pool_id == 1));
    assert!(library_of(r, last.library).ends_with("/libc10_cuda.so"));
    assert_eq!((last.allocs, last.frees), (1040, 1000));
    assert_eq!(last.alloc_bytes, 1000 * 65536 + 40 * (1 << 20));
    assert_eq!(
        (last.reserved, last.reserved_high, last.used),
        (64 << 20, 64 << 20, 40 << 20)
    );
    // The stream-ordered calls left no per-call records.
    let calls = mem(r);
    assert!(
        calls
            .iter()
            .all(|m| m.api != MemApi::MemAllocAsync && m.api != MemApi::MemFreeAsync)
    );
    assert_eq!(count(&calls, MemApi::MemAlloc, 16 << 20, 0), 1);
}

/// The stand-in's callback ids of the stream-ordered calls.
const STREAM_ORDERED: [u32; 6] = [598, 599, 600, 601, 611, 612];

/// Stream-ordered callbacks CUPTI delivered to the probe (enter and exit each).
fn stream_ordered_deliveries(run: &support::Run) -> u64 {
    let delivered = run.cupti_deliveries();
    STREAM_ORDERED
        .iter()
        .filter_map(|c| delivered.get(c))
        .map(|d| d.0)
        .sum()
}

fn switch_notices(records: &[Record]) -> Vec<Notice> {
    notices(records)
        .into_iter()
        .filter(|n| n.text.contains("no longer traced"))
        .collect()
}

#[test]
fn a_paused_benchmark_records_no_kernels_and_resuming_never_undoes_an_off() {
    let run = support::run(&["bench-pause"], Some(&support::probe_library()));
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    // Without the probe the symbols are absent (-1); with it the pause and
    // the resume switch (1), and neither does once records are off (0).
    assert_eq!(
        stdout.trim(),
        "paused=1 resumed=1 paused_off=0 resumed_off=0"
    );
    let r = &run.events().records;
    assert_clean_capture(r);
    let first: Vec<&str> = r
        .iter()
        .filter_map(|x| match x {
            Record::KernelFirst(k) => Some(k.kernel.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(first, ["first", "after_resume"]);
    let switches: Vec<bool> = r
        .iter()
        .filter_map(|x| match x {
            Record::Activity(a) => Some(a.kernel_records),
            _ => None,
        })
        .collect();
    // On at start, paused, resumed, off: nothing from the no-op pair.
    assert_eq!(switches, [true, false, true, false]);
}

fn first_launch_names(records: &[Record]) -> Vec<&str> {
    records
        .iter()
        .filter_map(|x| match x {
            Record::KernelFirst(k) => Some(k.kernel.as_str()),
            _ => None,
        })
        .collect()
}

/// The launch callback ids the stand-in plays (cuLaunchKernel, cuLaunchKernelEx, cuGraphLaunch).
const LAUNCH_CBIDS: [u32; 3] = [307, 652, 514];

#[test]
fn first_launch_tracing_records_what_every_launch_records_from_first_launches_alone() {
    let (every, first) =
        switched_and_not("first-launches", ("PREWARM_DOCTOR_KERNEL_RECORDS", "all"));
    for run in [&first, &every] {
        assert_eq!(
            String::from_utf8_lossy(&run.stdout).trim(),
            "paused=1 resumed=1"
        );
        assert_clean_capture(&run.events().records);
    }
    let (a, b) = (&first.events().records, &every.events().records);
    // Each function's first launch, whichever thread or launch call (the
    // Ex call names its function second, a graph launch runs its nodes);
    // a kernel only launched inside the pause or after the watch never.
    let expected = [
        "gemm",
        "triton_ex",
        "node_a",
        "worker_only",
        "cand",
        "after_resume",
        "spill",
    ];
    assert_eq!(first_launch_names(a), expected);
    assert_eq!(first_launch_names(b), expected);
    let growth = |r: &[Record]| -> Vec<(String, u64, u64)> {
        r.iter()
            .filter_map(|x| match x {
                Record::LocalMemory(g) => Some((g.kernel.clone(), g.total_before, g.total_after)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(growth(a), [("spill".to_string(), 0, 3 << 30)]);
    assert_eq!(growth(a), growth(b));
    // Activity records: one per first launch (the graph's first launch
    // records both its nodes), against one per launch outside the pause.
    assert_eq!(last_cost(a).activity_records, 8);
    assert_eq!(last_cost(b).activity_records, 15);
    // Launch callbacks cost time only where they are on.
    assert!(last_cost(a).launch_ns > 0);
    assert_eq!(last_cost(b).launch_ns, 0);
    // Launch callbacks: enter and exit of each launch outside the pause and
    // before the watch ended (3 gemm, 2 Ex, 2 graph, 2 on the thread, cand,
    // after_resume, 2 spill), and of the first launch after it, whose exit
    // detaches CUPTI (the default); never under `all`.
    let delivered = first.cupti_deliveries();
    let launches: u64 = LAUNCH_CBIDS
        .iter()
        .filter_map(|c| delivered.get(c))
        .map(|d| d.0)
        .sum();
    assert_eq!(launches, 2 * 13 + 2);
    assert!(
        LAUNCH_CBIDS
            .iter()
            .all(|c| !delivered.get(c).is_some_and(|d| d.1))
    );
    let delivered = every.cupti_deliveries();
    assert!(LAUNCH_CBIDS.iter().all(|c| !delivered.contains_key(c)));
}

#[test]
fn records_cupti_will_not_switch_on_at_a_first_launch_are_said_once_and_the_run_goes_on() {
    let run = support::run_with(
        &["first-launches"],
        Some(&support::probe_library()),
        &[("STANDIN_CUPTI_REFUSE_KERNELS", "1")],
    );
    assert!(run.status.success());
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        "paused=1 resumed=1"
    );
    let r = &run.events().records;
    assert!(first_launch_names(r).is_empty());
    let warnings: Vec<Notice> = notices(r)
        .into_iter()
        .filter(|n| n.level == NoticeLevel::Warning)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .text
            .contains("could not be switched on at a kernel's first launch"),
        "{}",
        warnings[0].text
    );
}

#[test]
fn a_step_on_known_pools_stops_stream_ordered_tracing() {
    let run = run_both(&["async-steps"]);
    let r = &run.events().records;
    assert_clean_capture(r);
    let switched = switch_notices(r);
    assert_eq!(switched.len(), 1, "{switched:?}");
    // Step 2 found a new pool, so step 3 was the first on known pools.
    assert!(
        switched[0].text.contains("step 3 used only known pools"),
        "{}",
        switched[0].text
    );
    // Every call of steps 1..3 traced (100 pairs each, step 2's own pool's
    // pair), none of the 1,000 pairs after step 3's end.
    assert_eq!(stream_ordered_deliveries(&run), 2 * (3 * 200 + 2));
}

/// A pool created but never allocated from with stream-ordered calls (NCCL's
/// under the default allocator) still lets a step on it switch tracing off,
/// but there is nothing counted to report: no notice, which a user of the
/// default allocator would read as noise about calls their job never made.
#[test]
fn a_switch_with_nothing_counted_says_nothing() {
    let run = run_both(&["unused-pool-steps"]);
    let r = &run.events().records;
    assert_clean_capture(r);
    assert!(switch_notices(r).is_empty(), "{:?}", switch_notices(r));
    // Switched off all the same: none of the 10 pairs after it delivered.
    assert_eq!(stream_ordered_deliveries(&run), 0);
}

#[test]
fn with_a_call_count_set_steps_stop_nothing() {
    let run = run_both_with(&["async-steps"], &[("PREWARM_DOCTOR_POOL_CALLS", "100000")]);
    let r = &run.events().records;
    assert_clean_capture(r);
    assert!(switch_notices(r).is_empty());
    assert_eq!(
        stream_ordered_deliveries(&run),
        2 * (3 * 200 + 2 + 2 * 1000)
    );
}

/// The writer reads a live pool every 100 ms tick after the watched steps
/// unless `PREWARM_DOCTOR_POOL_READ_MS` says less often; `0` stops the
/// reads there (the overhead breakdown's switch). 450 ms hold four ticks.
#[test]
fn pool_reads_after_the_watch_follow_their_switch() {
    // (reads after the watch, the run's notices)
    let reads = |env: &[(&str, &str)]| -> (u64, Vec<String>) {
        let run = support::run_with(&["pool-reads"], Some(&support::probe_library()), env);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        let out = String::from_utf8_lossy(&run.stdout).to_string();
        assert!(out.contains("pairs=10 "), "{out}");
        let n = out
            .split("reads_after_watch=")
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{out}"));
        let notices = all(&run.events().records, |r| match r {
            Record::Notice(n) if n.level == NoticeLevel::Warning => Some(n.text.clone()),
            _ => None,
        });
        (n, notices)
    };
    let (unset, notices) = reads(&[]);
    assert!(unset >= 2 && notices.is_empty(), "{unset} {notices:?}");
    assert_eq!(reads(&[("PREWARM_DOCTOR_POOL_READ_MS", "0")]).0, 0);
    assert_eq!(reads(&[("PREWARM_DOCTOR_POOL_READ_MS", "60000")]).0, 0);
    // A value that is no number: said, and the default kept.
    let (bad, notices) = reads(&[("PREWARM_DOCTOR_POOL_READ_MS", "sometimes")]);
    assert!(bad >= 2, "{bad}");
    assert_eq!(
        notices,
        [
            "PREWARM_DOCTOR_POOL_READ_MS=\"sometimes\" is not a number of milliseconds; the default is used"
        ]
    );
}

fn pools_of(records: &[Record], id: u32) -> Vec<PoolUse> {
    all(records, |r| match r {
        Record::Pool(p) if p.pool_id == id => Some(p.clone()),
        _ => None,
    })
}

const MIB: u64 = 1 << 20;

#[test]
fn stream_ordered_tracing_stops_after_a_quiet_stretch_and_pools_stay_measured() {
    let run = run_both(&["async-switch"]);
    let out = run.events();
    let r = &out.records;
    assert_eq!(out.tail, Tail::Clean);
    assert_clean_capture(r);

    // The probe switched every stream-ordered callback off, and got none after.
    let delivered = run.cupti_deliveries();
    for cbid in STREAM_ORDERED {
        assert!(
            !delivered.get(&cbid).is_some_and(|d| d.1),
            "callback {cbid} still enabled: {delivered:?}"
        );
    }
    let seen = stream_ordered_deliveries(&run);
    // 8,010 stream-ordered calls, 6,000 of them before the program waits for
    // the switch: tracing stops after 4,096 calls on known pools (plus those
    // made before the writer thread's next 10 ms tick), and no callback of
    // the 2,010 calls after it reached the probe.
    let made = 2 * 3000 + 3 + 2 * 1000 + 2 + 2 + 3;
    assert!(
        (2 * 4096..=2 * 6000).contains(&seen),
        "{seen} stream-ordered callbacks delivered of {} calls",
        made
    );
    // Callbacks the probe counted = exactly those delivered: retain + one
    // cuMemAlloc, 2 pool creations + 1 destruction (2 each), the context.
    let lifecycle = [607u32, 608].iter().map(|c| delivered[c].0).sum::<u64>();
    assert_eq!(lifecycle, 2 * 3);
    assert!(delivered[&607].1 && delivered[&608].1 && delivered[&243].1);
    assert_eq!(last_cost(r).callbacks, 2 * 2 + lifecycle + 1 + seen);
    let switched = switch_notices(r);
    assert_eq!(switched.len(), 1, "{switched:?}");
    assert!(
        switched[0].text.contains("4096 calls in a row"),
        "{}",
        switched[0].text
    );

    // The device pool: counted up to the switch, measured to the end.
    let program_lib = {
        let calls = mem(r);
        let plain = calls
            .iter()
            .find(|m| m.api == MemApi::MemAlloc && m.bytes == 16 * MIB)
            .expect("cuMemAlloc after the switch is still recorded");
        library_of(r, plain.library)
    };
    assert!(program_lib.ends_with("/program"), "{program_lib}");
    let device = pools_of(r, 1);
    let counted: Vec<&PoolUse> = device
        .iter()
        .filter(|p| p.allocs != UNKNOWN_BYTES)
        .collect();
    let last_counted = counted.last().expect("a counted record before the switch");
    assert!(
        (2048..=3000).contains(&last_counted.allocs),
        "{} allocations counted",
        last_counted.allocs
    );
    let uncounted: Vec<&PoolUse> = device
        .iter()
        .filter(|p| p.allocs == UNKNOWN_BYTES)
        .collect();
    assert!(!uncounted.is_empty());
    assert!(uncounted.iter().all(
        |p| (p.alloc_bytes, p.frees, p.failed) == (UNKNOWN_BYTES, UNKNOWN_BYTES, UNKNOWN_BYTES)
    ));
    let t_switch = uncounted[0].t;
    assert!(
        device
            .iter()
            .all(|p| p.t < t_switch || p.allocs == UNKNOWN_BYTES)
    );
    assert!(
        device
            .iter()
            .all(|p| library_of(r, p.library) == program_lib)
    );
    assert!(
        uncounted
            .iter()
            .any(|p| (p.reserved, p.used) == (128 * MIB, 96 * MIB)),
        "the writer thread read the pool while 96 MiB were live: {uncounted:?}"
    );
    let last = device.last().expect("device pool records");
    assert_eq!(
        (last.reserved, last.reserved_high, last.used),
        (128 * MIB, 128 * MIB, 0)
    );

    // The other library's pool, created after the switch: its own, measured.
    let other = pools_of(r, 2);
    let last = other.last().expect("the other library's pool");
    assert!(library_of(r, last.library).ends_with("/libothercaller.so"));
    assert_eq!((last.device, last.allocs), (0, UNKNOWN_BYTES));
    assert_eq!((last.reserved, last.used), (96 * MIB, 96 * MIB));

    // The program's scratch pool: measured, then destroyed (never read after).
    let scratch = pools_of(r, 3);
    assert!(
        scratch
            .iter()
            .any(|p| (p.reserved, p.used) == (32 * MIB, 0)),
        "{scratch:?}"
    );
    let last = scratch.last().expect("the scratch pool");
    assert_eq!(library_of(r, last.library), program_lib);
    assert_eq!((last.reserved, last.used), (0, 0));
    assert_eq!(pools_of(r, 4).len(), 0);
}

/// Each thread's heap allocations (warm-up, steady) from the stand-in
/// program's allocation counter (`alloc_count.c`).
fn thread_allocations(run: &support::Run) -> Vec<(u64, u64)> {
    run.number_rows("alloc-report")
        .into_iter()
        .map(|f| (f[1], f[2]))
        .collect()
}

#[test]
fn a_callback_allocates_nothing_once_its_thread_has_written_a_record() {
    // 8 threads each make 64 warm-up rounds, then 2,000 more from the same
    // call sites (a cuMemAlloc/cuMemFree pair, a stream-ordered pair and a
    // library load/unload, every call traced): every malloc of the process
    // is counted per thread, so the steady rounds' count is what the probe's
    // callbacks allocated on the training's threads.
    let env = [
        ("STANDIN_ALLOC_REPORT", "alloc-report"),
        ("PREWARM_DOCTOR_POOL_CALLS", "all"),
    ];
    let probed = support::run_both_with(&["steady"], &env);
    let plain = support::run_with(&["steady"], None, &env);
    let out = probed.events();
    assert_clean_capture(&out.records);
    let calls = mem(&out.records);
    assert_eq!(
        calls.iter().filter(|m| m.api == MemApi::MemAlloc).count(),
        8 * 2064,
        "every cuMemAlloc recorded"
    );
    assert_eq!(
        calls
            .iter()
            .filter(|m| m.api == MemApi::LibraryLoadData)
            .count(),
        8 * 2064,
        "every library load recorded"
    );
    let plain = thread_allocations(&plain);
    let probed = thread_allocations(&probed);
    assert_eq!(plain.len(), 8);
    assert_eq!(probed.len(), 8);
    // The stand-in libraries allocate nothing per call (once, at the first
    // stream-ordered call), so under the probe the steady count is the
    // probe's allocations alone; and the counter sees them: each thread's
    // first records set up its scratch buffer.
    assert!(plain.iter().all(|&(_, steady)| steady == 0), "{plain:?}");
    assert!(
        probed.iter().zip(&plain).all(|(p, q)| p.0 > q.0),
        "warm-up, probed {probed:?} against plain {plain:?}"
    );
    assert!(
        probed.iter().all(|&(_, steady)| steady == 0),
        "the probe allocated in steady callbacks (warm-up, steady per thread): {probed:?}"
    );
}

/// A bench's hold (benches/gpu_steady_toggles.py): every callback the probe
/// has on goes off and comes back, so an allocation while held is unseen
/// and one after it is seen; the launch callbacks, off once the watch
/// ended, are not switched on by the release.
#[test]
fn held_callbacks_see_nothing_and_come_back() {
    // CUPTI kept attached after the watch, as the bench runs it.
    let run = support::run_with(
        &["hold"],
        Some(&support::probe_library()),
        &[("PREWARM_DOCTOR_DETACH_AFTER_WATCH", "0")],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    let field = |name: &str| -> i64 {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {stdout}"))
    };
    assert!(field("held") > 0, "{stdout}");
    assert_eq!(field("released"), field("held"), "{stdout}");
    // cuMemAlloc's callbacks: on at exit, and handed over for two of the
    // three allocations (enter and exit each); cuLaunchKernel's not on.
    let deliveries = run.cupti_deliveries();
    assert_eq!(deliveries.get(&243), Some(&(4, true)), "{deliveries:?}");
    assert!(deliveries.get(&307).is_none_or(|d| !d.1), "{deliveries:?}");
    let sizes = clean_alloc_sizes(&run);
    assert!(
        sizes.contains(&(3 << 20)) && sizes.contains(&(7 << 20)),
        "{sizes:?}"
    );
    assert!(!sizes.contains(&(5 << 20)), "{sizes:?}");
}

/// The default (PREWARM_DOCTOR_DETACH_AFTER_WATCH unset, or `1`): the watch's end makes a detach due,
/// the next launch's exit detaches CUPTI once, the probe subscribes again
/// with the callbacks it still wants — an allocation after that is traced,
/// the launch callbacks stay off — and a notice says so. The subscription
/// comes only after the detaching callback has returned: the stand-in
/// CUPTI aborts, as CUPTI 13 crashed on an H100, when one comes while a
/// callback from before the detach still runs (the probe that waited
/// inside it for the attach failed so), and the launch that detached
/// returns before the attach (the stand-in's takes 50 ms). The 7 MiB
/// allocated in that gap is not traced, but the notice gives the device
/// memory in use that grew across it. `1` does the same; with `0` nothing
/// is detached.
#[test]
fn after_the_watch_cupti_is_detached_once_and_allocations_are_traced_again() {
    let gap = [
        ("STANDIN_ATTACH_DELAY_MS", "50"),
        ("STANDIN_ALLOC_IN_GAP_MIB", "7"),
    ];
    let detached = detach_scenario(&gap, "finalized=1 subscribed=1 on_return=0");
    let asked = detach_scenario(
        &[gap[0], gap[1], ("PREWARM_DOCTOR_DETACH_AFTER_WATCH", "1")],
        "finalized=1 subscribed=1 on_return=0",
    );
    let kept = detach_scenario(
        &[("PREWARM_DOCTOR_DETACH_AFTER_WATCH", "0")],
        "finalized=0 subscribed=1 on_return=1",
    );
    for run in [&detached, &asked, &kept] {
        let deliveries = run.cupti_deliveries();
        // cuMemAlloc on at exit and handed over (enter and exit);
        // cuLaunchKernel off at exit.
        assert!(
            deliveries.get(&243).is_some_and(|d| d.0 >= 2 && d.1),
            "{deliveries:?}"
        );
        assert!(deliveries.get(&307).is_some_and(|d| !d.1), "{deliveries:?}");
        let sizes = clean_alloc_sizes(run);
        assert!(sizes.contains(&(3 << 20)), "{sizes:?}");
    }
    let said = |run: &support::Run| {
        notices(&run.events().records)
            .into_iter()
            .filter(|n| n.text.starts_with("CUPTI detached after the first steps"))
            .map(|n| n.text)
            .collect::<Vec<_>>()
    };
    for run in [&detached, &asked] {
        let told = said(run);
        assert_eq!(told.len(), 1);
        assert!(
            told[0].contains(
                "driver calls in between were not traced; device memory in use changed by +7.0 MiB across it"
            ),
            "{told:?}"
        );
        assert!(!clean_alloc_sizes(run).contains(&(7 << 20)));
        // The gap's own record: the stand-in device lost 7 MiB across it.
        let spans = untraced(&run.events().records);
        assert_eq!(spans.len(), 1, "{spans:?}");
        let s = &spans[0];
        assert_eq!(s.free_before - s.free_after, 7 << 20, "{s:?}");
        // It spans the stand-in's attach delay (50 ms), on device 0.
        assert!(s.t_end - s.t_start >= 50_000_000, "{s:?}");
        assert_eq!(s.device, 0);
    }
    assert!(said(&kept).is_empty());
    assert!(untraced(&kept.events().records).is_empty());
    // The attach's reading is slow (200 ms): the program allocates 3 MiB,
    // traced again, and exits while the attach is under way. The exit waits
    // for the gap's record and notice; the record's span holds the traced
    // allocation too (10 MiB across it), which the replay takes out.
    let slow = detach_scenario(
        &[gap[0], gap[1], ("STANDIN_CTX_PUSH_DELAY_MS", "200")],
        "finalized=1 subscribed=1 on_return=0",
    );
    let records = &slow.events().records;
    assert_eq!(said(&slow).len(), 1);
    let spans = untraced(records);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let s = &spans[0];
    assert_eq!(s.free_before - s.free_after, 10 << 20, "{s:?}");
    let traced_inside = mem(records)
        .into_iter()
        .filter(|m| m.bytes == 3 << 20 && s.t_start < m.t_end && m.t_end <= s.t_end)
        .count();
    assert_eq!(traced_inside, 1);
}

/// The untraced stretches a run's event file holds.
fn untraced(records: &[Record]) -> Vec<prewarm_events::UntracedSpan> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Untraced(u) => Some(u.clone()),
            _ => None,
        })
        .collect()
}

/// The detach scenario run with these settings: it succeeded and printed
/// `said` (detaches, attached at the end, attached when the detaching
/// launch returned). The run.
fn detach_scenario(settings: &[(&str, &str)], said: &str) -> support::Run {
    let run = support::run_with(&["detach"], Some(&support::probe_library()), settings);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), said);
    run
}

/// The detach's teardown runs on the training's thread inside the driver
/// callback that detached, and counts as callback time: where it is the
/// longest, its cost record names it (probe 0.2.3 left it unnamed, so a
/// cost record's callback time could exceed its slowest callback times its
/// count). The stand-in's teardown takes 30 ms.
#[test]
fn a_slow_detach_teardown_is_named_as_the_slowest_callback() {
    let run = detach_scenario(
        &[("STANDIN_FINALIZE_DELAY_MS", "30")],
        "finalized=1 subscribed=1 on_return=0",
    );
    let costs: Vec<ProbeCost> = all(&run.events().records, |rec| match rec {
        Record::Cost(c) => Some(c.clone()),
        _ => None,
    });
    let named: Vec<&ProbeCost> = costs
        .iter()
        .filter(|c| c.slowest_callback_id == prewarm_events::SLOWEST_DETACH_TEARDOWN)
        .collect();
    assert_eq!(named.len(), 1, "{costs:#?}");
    assert!(named[0].slowest_callback_ns >= 30_000_000, "{:?}", named[0]);
    for pair in costs.windows(2) {
        let (count, time) = (
            pair[1].callbacks - pair[0].callbacks,
            pair[1].callback_ns - pair[0].callback_ns,
        );
        assert!(pair[1].slowest_callback_ns * count >= time, "{pair:#?}");
    }
}

/// PREWARM_DOCTOR_DETACH_AFTER_WATCH=bare (a bench setting): CUPTI is
/// detached once and not attached again, so the allocation after it is
/// not seen, and a warning says nothing was traced from there.
#[test]
fn a_bare_detach_leaves_cupti_detached_and_says_nothing_is_traced_after_it() {
    let run = detach_scenario(
        &[("PREWARM_DOCTOR_DETACH_AFTER_WATCH", "bare")],
        "finalized=1 subscribed=0 on_return=0",
    );
    let sizes: Vec<u64> = mem(&run.events().records).iter().map(|m| m.bytes).collect();
    assert!(!sizes.contains(&(3 << 20)), "{sizes:?}");
    let warned: Vec<_> = notices(&run.events().records)
        .into_iter()
        .filter(|n| {
            n.text
                .starts_with("CUPTI detached after the first steps and not attached again")
        })
        .collect();
    assert_eq!(warned.len(), 1);
    assert_eq!(warned[0].level, NoticeLevel::Warning);
}

/// One slow callback among thousands (its free-memory reading held up 40
/// ms) is pinned: exactly one cost record names a callback that long (the
/// longest is kept per record and starts again after it), a traced driver
/// call's, and no other record's longest comes near it.
#[test]
fn the_slowest_callback_of_each_tick_is_named() {
    let run = run_both_with(&["basic"], &[("STANDIN_SLOW_READING", "12:40")]);
    let r = &run.events().records;
    assert_clean_capture(r);
    let costs: Vec<ProbeCost> = all(r, |rec| match rec {
        Record::Cost(c) => Some(c.clone()),
        _ => None,
    });
    let slow: Vec<&ProbeCost> = costs
        .iter()
        .filter(|c| c.slowest_callback_ns >= 40_000_000)
        .collect();
    assert_eq!(slow.len(), 1, "{costs:#?}");
    let id = slow[0].slowest_callback_id;
    assert!(
        id > 0 && id < prewarm_events::SLOWEST_RESOURCE,
        "{:?}",
        slow[0]
    );
    assert!(
        costs
            .iter()
            .filter(|c| c.slowest_callback_ns < 40_000_000)
            .all(|c| c.slowest_callback_ns < 20_000_000),
        "{costs:#?}"
    );
    assert!(slow[0].reading_ns >= 40_000_000, "{:?}", slow[0]);
}
