use super::*;
use crate::analysis::device::Series;
use crate::analysis::phases::Phase;
use crate::analysis::sources::UNKNOWN;
use prewarm_events::{MemApi, MemCall, PoolUse, UNKNOWN_BYTES, UntracedSpan};
use std::collections::{BTreeMap, HashMap, HashSet};

const MS: u64 = 1_000_000;

fn series(points: &[(u64, u64)]) -> Series {
    Series {
        points: points.to_vec(),
    }
}

const MIB: u64 = 1 << 20;
const FREE: u64 = 100_000 * MIB;

/// A tracked driver call with the device's free memory around it.
fn call(t: u64, api: MemApi, bytes: u64, free_before: u64, free_after: u64) -> MemCall {
    MemCall {
        t_start: t,
        t_end: t + MS,
        api,
        thread: 1,
        device: 0,
        bytes,
        address: t,
        result: 0,
        library: 0,
        free_before,
        free_after,
        total: 2 * FREE,
    }
}

/// Synthetic records (not a recording): a module load at 10 ms whose code
/// the device shows by the next reading (a pool allocation at 300 ms).
fn lazy_load() -> ProcessRecords {
    ProcessRecords {
        contexts: vec![prewarm_events::ContextCreated {
            t: 0,
            device: 0,
            context_id: 1,
            pci_bus_id: String::new(),
            free: FREE,
            total: 2 * FREE,
        }],
        mem: vec![
            call(10 * MS, MemApi::LibraryLoadData, 0, FREE, FREE),
            call(
                300 * MS,
                MemApi::MemAlloc,
                64 * MIB,
                FREE - 70 * MIB,
                FREE - 134 * MIB,
            ),
        ],
        ..Default::default()
    }
}

fn probe_view(r: &ProcessRecords) -> DeviceView {
    let mut points: Vec<(u64, u64)> = r
        .mem
        .iter()
        .flat_map(|m| [(m.t_start, m.free_before), (m.t_end, m.free_after)])
        .collect();
    points.sort();
    DeviceView {
        probe_free: Series { points },
        cuda_total: Some(2 * FREE),
        own_device: true,
        ..Default::default()
    }
}

#[test]
fn growth_after_a_module_load_is_module_code_counted_where_the_device_shows_it() {
    let r = lazy_load();
    let known = known_allocations(&r);
    let grown = module_code_growth(&r, &probe_view(&r), &known, &[]);
    // 70 MiB between the load (11 ms) and the allocation's first reading;
    // the allocation's own 64 MiB is not module code.
    assert_eq!(grown, vec![(300 * MS, 70 * MIB)]);
}

#[test]
fn module_code_is_never_counted_twice_or_guessed() {
    let r = lazy_load();
    let known = known_allocations(&r);
    // Inside a communicator's span: NCCL's inferred figure owns it.
    let span = [(200 * MS, 400 * MS)];
    assert!(module_code_growth(&r, &probe_view(&r), &known, &span).is_empty());
    // A local-memory growth in the stretch is measured on its own.
    let mut with_local = lazy_load();
    with_local.local.push(prewarm_events::LocalMemoryGrowth {
        t_start: 150 * MS,
        t_end: 151 * MS,
        device: 0,
        context_id: 1,
        correlation_id: 1,
        kernel: "spills".into(),
        total_before: 10 * MIB,
        total_after: 80 * MIB,
        per_thread: 0,
        registers: 255,
        grid: [1, 1, 1],
        block: [1, 1, 1],
    });
    let known = known_allocations(&with_local);
    assert!(module_code_growth(&with_local, &probe_view(&with_local), &known, &[]).is_empty());
    // Readings more than a second apart hold too much else to name a cause.
    let mut slow = lazy_load();
    slow.mem[1] = call(
        1_500 * MS,
        MemApi::MemAlloc,
        64 * MIB,
        FREE - 70 * MIB,
        FREE - 134 * MIB,
    );
    let known = known_allocations(&slow);
    assert!(module_code_growth(&slow, &probe_view(&slow), &known, &[]).is_empty());
    // Device-wide readings on a shared GPU include other processes: a
    // neighbour whose NVML figure changed within 250 ms of the stretch
    // (here 500 ms after its start, 200 ms after its end) may be what grew.
    let r = lazy_load();
    let known = known_allocations(&r);
    let beside = |points: Vec<(u64, u64)>| DeviceView {
        own_device: false,
        others_listed: Series { points },
        ..probe_view(&r)
    };
    let busy = beside(vec![(0, 5 * MIB), (500 * MS, 75 * MIB)]);
    assert!(module_code_growth(&r, &busy, &known, &[]).is_empty());
    // A neighbour that stayed as it was (or changed long before) leaves
    // the readings this process's own change.
    let quiet = beside(vec![(0, 5 * MIB), (600 * MS, 75 * MIB)]);
    assert_eq!(
        module_code_growth(&r, &quiet, &known, &[]),
        vec![(300 * MS, 70 * MIB)]
    );
    // A stretch the probe traced nothing in is its own part.
    let mut detached = lazy_load();
    detached
        .untraced
        .push(untraced(100 * MS, 130 * MS, FREE, FREE - 70 * MIB));
    let known = known_allocations(&detached);
    assert!(module_code_growth(&detached, &probe_view(&detached), &known, &[]).is_empty());
    // Without a module event in the stretch, growth stays unexplained.
    let mut no_load = lazy_load();
    no_load.mem[0].api = MemApi::MemHostAlloc;
    let known = known_allocations(&no_load);
    assert!(module_code_growth(&no_load, &probe_view(&no_load), &known, &[]).is_empty());
}

#[test]
fn growth_in_a_window_without_allocations_comes_from_the_device_timeline() {
    let device = DeviceView {
        used: series(&[(0, 500), (100 * MS, 600)]),
        ..Default::default()
    };
    let known = live_only(series(&[(10 * MS, 64)]));
    assert_eq!(
        measured_growth(&device, &known, (80 * MS, 110 * MS, 130 * MS), false),
        Some(100)
    );
}

#[test]
fn growth_next_to_allocations_uses_the_probes_readings_minus_the_allocations() {
    // NVML lags: it still shows the old value after a 64-byte allocation
    // and a 90-byte growth; the probe's readings around the calls do not.
    let device = DeviceView {
        used: series(&[(0, 500)]),
        cuda_total: Some(10_000),
        probe_free: series(&[(90 * MS, 9_500), (120 * MS, 9_346)]),
        ..Default::default()
    };
    let known = live_only(series(&[(0, 0), (95 * MS, 64)]));
    assert_eq!(
        measured_growth(&device, &known, (92 * MS, 110 * MS, 130 * MS), false),
        Some(90)
    );
}

#[test]
fn without_a_reading_after_the_launch_the_device_timeline_minus_allocations_is_used() {
    let device = DeviceView {
        used: series(&[(0, 500), (100 * MS, 654)]),
        probe_free: series(&[(90 * MS, 9_500)]),
        ..Default::default()
    };
    let known = live_only(series(&[(0, 0), (95 * MS, 64)]));
    assert_eq!(
        measured_growth(&device, &known, (92 * MS, 110 * MS, 130 * MS), false),
        Some(90)
    );
    // An allocation the device does not show yet never makes growth negative.
    let lagging = DeviceView {
        used: series(&[(0, 500)]),
        ..Default::default()
    };
    assert_eq!(
        measured_growth(&lagging, &known, (92 * MS, 110 * MS, 130 * MS), false),
        Some(0)
    );
}

#[test]
fn stream_ordered_pools_count_as_a_whole_at_their_reserved_size() {
    const MIB: u64 = 1 << 20;
    const U: u64 = UNKNOWN_BYTES;
    #[allow(clippy::too_many_arguments)]
    fn pool(
        t: u64,
        id: u32,
        library: u32,
        allocs: u64,
        bytes: u64,
        reserved: u64,
        high: u64,
        used: u64,
    ) -> PoolUse {
        PoolUse {
            t: t * MS,
            pool_id: id,
            device: 0,
            handle: 0x1000 * id as u64,
            library,
            allocs,
            alloc_bytes: bytes,
            frees: allocs,
            failed: 0,
            reserved,
            reserved_high: high,
            used,
        }
    }
    let r = ProcessRecords {
        libraries: [
            (1, "/venv/torch/lib/libc10_cuda.so".to_string()),
            (2, "/x/librmm.so".to_string()),
        ]
        .into_iter()
        .collect(),
        pools: vec![
            pool(10, 1, 1, 100, 1000, 32 * MIB, 32 * MIB, 0),
            // Counters only (no driver reading at that instant).
            pool(20, 1, 1, 200, 2000, U, U, U),
            // Step 1: the pool grew; its high-water mark says it peaked higher in between.
            pool(30, 1, 1, 300, 3000, 64 * MIB, 96 * MIB, 500),
            // Another library's pool: outside PyTorch's pool.
            pool(35, 2, 2, 10, 4 * MIB, 8 * MIB, 8 * MIB, 4 * MIB),
            pool(60, 1, 1, 400, 4000, 64 * MIB, 96 * MIB, 0),
            // The probe stopped tracing the pool's calls: sizes only.
            pool(75, 1, 1, U, U, 128 * MIB, 128 * MIB, 100),
        ],
        ..Default::default()
    };
    let bounds = Boundaries {
        start: 0,
        step1_begin: Some(25 * MS),
        step_ends: vec![40 * MS, 70 * MS],
        end: 80 * MS,
        rule: String::new(),
        died: None,
    };
    let rp = replay(
        &r,
        &bounds,
        &DeviceView::default(),
        &[24 * MS, 40 * MS, 70 * MS],
        &[],
    );
    assert_eq!(rp.states[0].pool, 32 * MIB);
    assert_eq!(rp.states[1].pool, 64 * MIB);
    assert_eq!(rp.states[1].oop.get("rmm"), Some(&(8 * MIB)));
    assert_eq!(rp.states[2].pool, 64 * MIB);
    let torch =
        |phase: Phase| rp.phases[&phase].by_source[crate::analysis::sources::TORCH_POOL].clone();
    assert_eq!(
        (torch(Phase::Setup).calls, torch(Phase::Setup).allocated),
        (200, 2000)
    );
    assert_eq!(
        (torch(Phase::Step1).calls, torch(Phase::Step1).allocated),
        (100, 1000)
    );
    // Freed = allocated − growth of the bytes in use (0 → 500, then 500 → 0).
    assert_eq!(torch(Phase::Step1).freed, 500);
    assert_eq!(torch(Phase::Steady).freed, 1500);
    // After the probe stopped counting: no calls or bytes added, the size tracked.
    assert_eq!(
        (torch(Phase::Steady).calls, torch(Phase::Steady).allocated),
        (100, 1000)
    );
    assert_eq!(known_allocations(&r).at(76 * MS), Some(136 * MIB));
    assert_eq!(rp.phases[&Phase::Setup].pool_peak, 32 * MIB);
    assert_eq!(rp.phases[&Phase::Step1].pool_peak, 96 * MIB);
    assert_eq!(rp.phases[&Phase::Step1].oop_alloc, 8 * MIB);
    assert_eq!(rp.oop_allocs.len(), 1);
    assert_eq!(rp.oop_allocs[0].bytes, 8 * MIB);
    // The device-memory series used to explain growth includes both pools.
    let known = known_allocations(&r);
    assert_eq!(known.at(61 * MS), Some(72 * MIB));
}

fn spill(t: u64, before: u64, after: u64) -> prewarm_events::LocalMemoryGrowth {
    prewarm_events::LocalMemoryGrowth {
        t_start: t,
        t_end: t + MS,
        device: 0,
        context_id: 1,
        correlation_id: 1,
        kernel: "spills".into(),
        total_before: before,
        total_after: after,
        per_thread: 0,
        registers: 255,
        grid: [1, 1, 1],
        block: [1, 1, 1],
    }
}

const GIB: u64 = 1024 * MIB;

/// Synthetic samplings (not a recording): a 1 GiB local-memory growth at
/// a launch whose kernel starts at 500 ms. The driver grows the
/// reservation in the launch call, so the device timeline may show it
/// before CUPTI's kernel start (`lands` 488 ms, sampled at 493 ms) or after (505 ms). The
/// others' memory (`others`: another process on the GPU) is on the
/// device, not this process's. Returns (headroom after, process used
/// before, smallest device).
fn growth_exposure(lands: u64, others: u64) -> (i64, u64, u64) {
    let own_before = 3 * GIB;
    let total = 2 * FREE;
    let r = ProcessRecords {
        contexts: vec![prewarm_events::ContextCreated {
            t: 0,
            device: 0,
            context_id: 1,
            pci_bus_id: String::new(),
            free: total - own_before - others,
            total,
        }],
        local: vec![spill(500 * MS, 10 * MIB, 10 * MIB + GIB)],
        ..Default::default()
    };
    let own = |t: u64| own_before + if t >= lands { GIB } else { 0 };
    let samples: Vec<u64> = (0..100).map(|k| k * 10 * MS + 3 * MS).collect();
    let device = DeviceView {
        used: series(&samples.iter().map(|&t| (t, own(t))).collect::<Vec<_>>()),
        device_used: series(
            &samples
                .iter()
                .map(|&t| (t, own(t) + others))
                .collect::<Vec<_>>(),
        ),
        cuda_total: Some(total),
        probe_free: series(&[(0, total - own_before - others)]),
        own_device: others == 0,
        ..Default::default()
    };
    let bounds = Boundaries {
        start: 0,
        step1_begin: Some(400 * MS),
        step_ends: vec![600 * MS],
        end: 1000 * MS,
        rule: String::new(),
        died: None,
    };
    let rp = replay(&r, &bounds, &device, &[], &[]);
    assert_eq!(rp.local_events.len(), 1);
    assert_eq!(rp.local_events[0].device_growth, GIB);
    let e = &rp.exposures[0];
    let cap = e.process_used_before.unwrap() + e.bytes;
    (
        e.headroom_after.unwrap(),
        e.process_used_before.unwrap(),
        cap,
    )
}

#[test]
fn headroom_is_read_before_the_growth_wherever_the_sampling_puts_it() {
    let free_before = (2 * FREE - 3 * GIB) as i64;
    for lands in [488 * MS, 505 * MS] {
        let (headroom, own, cap) = growth_exposure(lands, 0);
        // Counted once: the device before, less the growth.
        assert_eq!(headroom, free_before - GIB as i64, "lands at {lands}");
        assert_eq!(own, 3 * GIB);
        // Never above what was seen (3 GiB + the 1 GiB that landed).
        assert_eq!(cap, 4 * GIB);
    }
}

#[test]
fn on_a_shared_gpu_the_smallest_device_is_this_process_own_need() {
    let others = 20 * GIB;
    for lands in [488 * MS, 505 * MS] {
        let (headroom, own, cap) = growth_exposure(lands, others);
        // Headroom is the device's: the other process's memory is not free.
        assert_eq!(headroom, (2 * FREE - 3 * GIB - others - GIB) as i64);
        assert_eq!(own, 3 * GIB);
        assert_eq!(cap, 4 * GIB);
    }
}

/// The shapes of two H200 recordings, synthetic here: the context's first
/// launch together with a 90.75 MiB reservation growth, 92 MiB measured
/// (hf-llama: the growth explains it, no first module is claimed); the
/// first launch alone with 92 MiB measured (2-GPU FSDP2: the first module's
/// code).
#[test]
fn the_first_modules_code_is_what_no_growing_record_explains() {
    let growing = 95_158_272;
    let r = ProcessRecords {
        local: vec![
            spill(100 * MS, 0, 155_713_536),
            spill(101 * MS, 155_713_536, 155_713_536 + growing),
        ],
        ..Default::default()
    };
    let initial: HashSet<usize> = [0].into_iter().collect();
    let shares = split_growth(&r, &[0, 1], 92 * MIB, &initial, true);
    let share = |i: usize| shares.iter().find(|s| s.0 == i).unwrap().1;
    assert_eq!(share(1), growing);
    assert_eq!(share(0), 92 * MIB - growing);
    assert!(share(0) < FIRST_MODULE_MIN);
    let alone = split_growth(&r, &[0], 92 * MIB, &initial, true);
    assert_eq!(alone, vec![(0, 92 * MIB)]);
    // Never more than the reservation: beyond it is someone else's.
    let capped = split_growth(&r, &[1], 200 * MIB, &initial, true);
    assert_eq!(capped, vec![(1, growing)]);
}

/// The shape of an H200 recording with `backend:cudaMallocAsync`
/// (synthetic here): the context's first launch lands while the
/// stream-ordered pool makes its first growths, and the device grew 72 MiB
/// beyond what the pool's records say. That cannot be told from the pool's
/// own growth, so no first module is claimed; without a pool it is.
#[test]
fn no_first_module_is_claimed_where_a_pool_grew() {
    let r = ProcessRecords {
        local: vec![spill(100 * MS, 0, 155_713_536)],
        ..Default::default()
    };
    let initial: HashSet<usize> = [0].into_iter().collect();
    assert_eq!(
        split_growth(&r, &[0], 72 * MIB, &initial, false),
        vec![(0, 0)]
    );
    assert_eq!(
        split_growth(&r, &[0], 72 * MIB, &initial, true),
        vec![(0, 72 * MIB)]
    );
    let grown = KnownAllocations {
        live: Series::default(),
        pool_growths: pool_growth_intervals(&[pool_at(95 * MS, 64 * MIB)]),
    };
    assert!(grown.pool_may_grow_in(80 * MS, 130 * MS));
    assert!(!grown.pool_may_grow_in(100 * MS, 130 * MS));
}

fn pool_at(t: u64, reserved: u64) -> PoolUse {
    PoolUse {
        t,
        pool_id: 1,
        device: 0,
        handle: 0x1000,
        library: 1,
        allocs: 1,
        alloc_bytes: reserved,
        frees: 0,
        failed: 0,
        reserved,
        reserved_high: reserved,
        used: reserved,
    }
}

/// Synthetic records (not a recording): lazy_load's 70 MiB between the
/// module load and the next reading, with a stream-ordered pool that grew
/// 32 MiB (recorded at 150 ms) and 70 MiB more (recorded 6 ms after the
/// reading at 300 ms, so it may have happened before it). The pool's
/// growth is never module code; a growth recorded too late to fall in the
/// pair (one writer tick and slack) does not hide the module's code.
#[test]
fn a_pool_growth_the_writer_read_after_a_pair_of_readings_is_not_module_code() {
    let mut r = lazy_load();
    r.pools = vec![pool_at(150 * MS, 32 * MIB), pool_at(306 * MS, 102 * MIB)];
    let known = known_allocations(&r);
    assert_eq!(module_code_growth(&r, &probe_view(&r), &known, &[]), vec![]);
    r.pools[1].t = 900 * MS;
    let known = known_allocations(&r);
    let grown = module_code_growth(&r, &probe_view(&r), &known, &[]);
    assert_eq!(grown, vec![(300 * MS, 38 * MIB)]);
}

/// A pool's growth can have happened from its previous reading, at most
/// one writer tick (with slack) before its record; a shrink is no growth.
#[test]
fn a_pool_growth_is_placed_between_its_previous_reading_and_its_record() {
    let later = 150 * MS + 2 * POOL_READING_EVERY_MAX_NS;
    let pools = [
        pool_at(150 * MS, 32 * MIB),
        pool_at(160 * MS, 96 * MIB),
        pool_at(later, 128 * MIB),
        pool_at(later + MS, 64 * MIB),
    ];
    assert_eq!(
        pool_growth_intervals(&pools),
        vec![
            (0, 150 * MS, 32 * MIB),
            (150 * MS, 160 * MS, 64 * MIB),
            (later - POOL_READING_EVERY_MAX_NS, later, 32 * MIB),
        ]
    );
}

fn live_only(live: Series) -> KnownAllocations {
    KnownAllocations {
        live,
        pool_growths: Vec::new(),
    }
}

/// Synthetic samplings (not a recording): the context comes up at 0 ms
/// holding 500 MiB, and NVML shows it only from its 30 ms sample. The
/// context's first launch at 10 ms (CUPTI: 148 MiB reserved) is measured on
/// the probe's own readings (the context's, and one after the launch), so
/// the lag is never read as growth. A real gain below the reservation is
/// the reservation growing at that launch (what the context came up with
/// is the rest); one as large as it holds module code the reservation
/// cannot, and counts as module code (the measurement caps it at the
/// reservation), the whole reservation the context's.
#[test]
fn the_first_launchs_gain_is_measured_on_the_probe_readings() {
    let first_module_of = |drop: u64| {
        let total = 2 * FREE;
        let after = total - 500 * MIB - drop;
        let r = ProcessRecords {
            contexts: vec![prewarm_events::ContextCreated {
                t: 0,
                device: 0,
                context_id: 1,
                pci_bus_id: String::new(),
                free: total - 500 * MIB,
                total,
            }],
            mem: vec![call(12 * MS, MemApi::ModuleLoadData, 0, after, after)],
            local: vec![spill(10 * MS, 0, 148 * MIB)],
            ..Default::default()
        };
        let mut device = probe_view(&r);
        device.probe_free.points.insert(0, (0, total - 500 * MIB));
        device.used = series(&[(0, 0), (30 * MS, 500 * MIB + drop)]);
        device.device_used = device.used.clone();
        let bounds = Boundaries {
            start: 0,
            step1_begin: Some(400 * MS),
            step_ends: vec![600 * MS],
            end: 1000 * MS,
            rule: String::new(),
            died: None,
        };
        let out = replay(&r, &bounds, &device, &[], &[]);
        let code = out.phases.values().map(|p| p.module_code).sum::<u64>();
        let grown = out.phases.values().map(|p| p.local_growth).sum::<u64>();
        (code, grown, out.initial_local)
    };
    assert_eq!(first_module_of(0), (0, 0, 148 * MIB));
    assert_eq!(first_module_of(92 * MIB), (0, 92 * MIB, 56 * MIB));
    assert_eq!(first_module_of(200 * MIB), (148 * MIB, 0, 148 * MIB));
}

// ---- The replay's stages, each on its own.

/// Setup [0, 100 ms), step 1 [100, 200 ms], steady to 300 ms.
fn stage_bounds() -> Boundaries {
    Boundaries {
        start: 0,
        step1_begin: Some(100 * MS),
        step_ends: vec![200 * MS, 300 * MS],
        end: 400 * MS,
        rule: "test".into(),
        died: None,
    }
}

/// Library 1 is PyTorch's pool, library 2 NCCL.
fn stage_records() -> ProcessRecords {
    ProcessRecords {
        libraries: HashMap::from([
            (1, "/venv/torch/lib/libc10_cuda.so".to_string()),
            (2, "/usr/lib/libnccl.so.2".to_string()),
        ]),
        ..Default::default()
    }
}

fn from(mut m: MemCall, library: u32, address: u64) -> MemCall {
    m.library = library;
    m.address = address;
    m
}

fn item_label(item: &Item) -> String {
    match item {
        Item::Mem(m) => format!("mem@{}", m.t_end),
        Item::Pool(p) => format!("pool@{}", p.t),
        Item::Local(i) => format!("local{i}"),
        Item::First => "first".into(),
        Item::ModuleCode(b) => format!("code{b}"),
        Item::Untraced(u) => format!("untraced@{}", u.t_end),
        Item::Query(i) => format!("query{i}"),
    }
}

#[test]
fn items_come_in_time_order_with_queries_after_the_records_of_their_instant() {
    let mut r = ProcessRecords {
        mem: vec![call(9, MemApi::MemAlloc, 1, FREE, FREE)],
        pools: vec![PoolUse {
            t: 10,
            pool_id: 1,
            device: 0,
            handle: 0,
            library: 0,
            allocs: 0,
            alloc_bytes: 0,
            frees: 0,
            failed: 0,
            reserved: 0,
            reserved_high: 0,
            used: 0,
        }],
        local: vec![spill(5, 0, 1), spill(0, 1, 2)],
        first_launches: vec![prewarm_events::KernelFirstLaunch {
            t_start: 10,
            t_end: 11,
            device: 0,
            context_id: 1,
            kernel: "k".into(),
            local_total: 0,
        }],
        last_t: 50,
        ..Default::default()
    };
    r.mem[0].t_end = 10;
    let labels = |r: &ProcessRecords| -> Vec<String> {
        replay_items(r, &[10, 0], &[(10, 7)])
            .iter()
            .map(|(_, _, i)| item_label(i))
            .collect()
    };
    // The failed launch (no timestamps) goes to the last event.
    assert_eq!(
        labels(&r),
        [
            "query1", "local0", "mem@10", "pool@10", "first", "code7", "query0", "local1"
        ]
    );
    // ...or to the exception the process died with.
    r.shim.push(crate::load::shim::ShimEvent::Exception {
        t: 1,
        kind: String::new(),
        message: String::new(),
        where_: Vec::new(),
        thread: None,
        pool_reserved: None,
        pool_allocated: None,
    });
    assert_eq!(labels(&r)[..2], ["query1", "local1"]);
}

#[test]
fn each_library_is_named_once_and_an_unnamed_one_is_an_unknown_caller() {
    let r = stage_records();
    let mut libs = Libraries::of(&r);
    let mut by_source = BTreeMap::new();
    let (source, in_pool, file) = libs.caller(2, &mut by_source);
    assert_eq!((&*source, in_pool, &*file), ("nccl", false, "libnccl.so.2"));
    libs.caller(2, &mut by_source);
    let (pool, in_pool, _) = libs.caller(1, &mut by_source);
    assert_eq!(
        (&*pool, in_pool),
        (crate::analysis::sources::TORCH_POOL, true)
    );
    let (unknown, in_pool, file) = libs.caller(99, &mut by_source);
    assert_eq!((&*unknown, in_pool, &*file), (UNKNOWN, false, ""));
    assert_eq!(by_source["nccl"], ["libnccl.so.2"], "noted once");
    assert!(!by_source.contains_key(UNKNOWN), "no file to note");
}

#[test]
fn allocations_and_frees_move_the_pool_and_the_out_of_pool_sources() {
    let r = stage_records();
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let mut w = Replayer::new(&r, &b, &device, &known, &[], 1);
    let pool_alloc = from(call(10 * MS, MemApi::MemAlloc, 100, 900, 800), 1, 0xa);
    let nccl_alloc = from(call(110 * MS, MemApi::MemAlloc, 30, 800, 770), 2, 0xb);
    w.mem_call(pool_alloc.t_end, &pool_alloc);
    w.mem_call(nccl_alloc.t_end, &nccl_alloc);
    w.apply(150 * MS, &Item::Query(0));
    let nccl_free = from(call(210 * MS, MemApi::MemFree, 0, 770, 800), 2, 0xb);
    let stray_free = from(call(220 * MS, MemApi::MemFree, 0, 800, 800), 2, 0xdead);
    w.mem_call(nccl_free.t_end, &nccl_free);
    w.mem_call(stray_free.t_end, &stray_free);
    let held = &w.out.states[0];
    assert_eq!((held.pool, held.oop_total()), (100, 30));
    assert_eq!((w.state.pool, w.state.oop_total()), (100, 0));
    let step1 = &w.out.phases[&Phase::Step1];
    assert_eq!((step1.oop_alloc, step1.by_source["nccl"].calls), (30, 1));
    assert_eq!(w.out.phases[&Phase::Steady].oop_freed, 30);
    assert_eq!(w.out.phases[&Phase::Steady].by_source["nccl"].freed, 30);
    assert_eq!(w.out.phases[&Phase::Setup].pool_peak, 100);
    // Only the out-of-pool request is exposed, and kept for joins.
    assert_eq!(w.out.exposures.len(), 1);
    let e = &w.out.exposures[0];
    assert_eq!(
        (e.source.as_str(), e.bytes, e.headroom_after),
        ("nccl", 30, Some(770))
    );
    assert_eq!(e.device_used_before, Some(2 * FREE - 800));
    assert_eq!(w.out.oop_allocs.len(), 1);
    assert_eq!(w.out.oop_allocs[0].freed, Some(nccl_free.t_end));
}

#[test]
fn a_failed_allocation_is_a_failure_and_an_exposure_but_holds_nothing() {
    let r = stage_records();
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
    let mut oom = from(call(120 * MS, MemApi::MemAlloc, 500, 200, 200), 2, 0xc);
    oom.result = 2;
    w.mem_call(oom.t_end, &oom);
    let mut in_pool = from(call(130 * MS, MemApi::MemAlloc, 500, 200, 200), 1, 0xd);
    in_pool.result = 2;
    w.mem_call(in_pool.t_end, &in_pool);
    assert_eq!(w.state, State::default());
    assert_eq!(w.out.phases[&Phase::Step1].failed, 2);
    let f = &w.out.failures[0];
    assert_eq!(
        (f.source.as_str(), f.library.as_str(), f.result),
        ("nccl", "libnccl.so.2", 2)
    );
    assert_eq!((f.free_before, f.bytes), (Some(200), 500));
    assert_eq!(
        w.out.exposures.len(),
        1,
        "the pool's own request is torch's to report"
    );
    assert_eq!(w.out.exposures[0].headroom_after, Some(-300));
    assert!(!w.out.exposures[0].succeeded);
}

#[test]
fn pinned_host_memory_and_module_loads_count_with_the_time_in_their_calls() {
    let r = stage_records();
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
    let host = from(call(10 * MS, MemApi::MemHostAlloc, 64, FREE, FREE), 2, 0x1);
    let load = from(call(20 * MS, MemApi::ModuleLoadData, 0, FREE, FREE), 2, 0x2);
    let unload = from(call(30 * MS, MemApi::ModuleUnload, 0, FREE, FREE), 2, 0x3);
    for m in [&host, &load, &unload] {
        w.mem_call(m.t_end, m);
    }
    let setup = &w.out.phases[&Phase::Setup];
    assert_eq!((setup.pinned, setup.module_loads), (64, 1));
    let nccl = &setup.by_source["nccl"];
    assert_eq!(nccl.module_loads, 1);
    assert!(
        (nccl.load_seconds - 0.002).abs() < 1e-12,
        "{}",
        nccl.load_seconds
    );
    assert_eq!(nccl.alloc_seconds, 0.0);
    assert_eq!(w.state, State::default());
}

#[test]
fn a_stream_ordered_pool_out_of_pool_that_grew_is_an_allocation_for_joins() {
    let r = stage_records();
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let mut w = Replayer::new(&r, &b, &device, &known, &[], 0);
    let summary = |t: u64, library: u32, reserved: u64| PoolUse {
        pool_id: library,
        handle: 0,
        library,
        ..pool_at(t, reserved)
    };
    w.pool_summary(110 * MS, &summary(110 * MS, 2, 40));
    w.pool_summary(120 * MS, &summary(120 * MS, 2, 10));
    w.pool_summary(130 * MS, &summary(130 * MS, 1, 70));
    assert_eq!((w.state.pool, w.state.oop_total()), (70, 10));
    let joins: Vec<(u64, &str, u64)> = w
        .out
        .oop_allocs
        .iter()
        .map(|a| (a.t, &*a.source, a.bytes))
        .collect();
    assert_eq!(joins, [(110 * MS, "nccl", 40)], "a shrink is no allocation");
    assert_eq!(w.out.libraries_by_source["nccl"], ["libnccl.so.2"]);
}

#[test]
fn a_contexts_first_reservation_is_the_context_and_its_first_module_counts_from_a_few_pages() {
    let r = ProcessRecords {
        local: vec![spill(10 * MS, 0, 3 * MIB), spill(20 * MS, 0, MIB)],
        ..Default::default()
    };
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let measured = [Some(6 * MIB), Some(9 * MIB)];
    let mut w = Replayer::new(&r, &b, &device, &known, &measured, 0);
    w.local_memory(10 * MS, 0);
    assert_eq!(w.out.initial_local, 3 * MIB);
    assert_eq!(w.state.module_code, 6 * MIB);
    // The same context again from 0: no second initial reservation, and
    // nothing grew beyond the largest so far.
    w.local_memory(20 * MS, 1);
    assert_eq!(w.out.initial_local, 3 * MIB);
    assert!(w.out.local_events.is_empty() && w.out.exposures.is_empty());
    // Below FIRST_MODULE_MIN the device's gain is sampling noise.
    let small = [Some(FIRST_MODULE_MIN - 1)];
    let mut w = Replayer::new(&r, &b, &device, &known, &small, 0);
    w.local_memory(10 * MS, 0);
    assert_eq!((w.out.initial_local, w.state.module_code), (3 * MIB, 0));
}

#[test]
fn a_growth_counts_what_the_device_gained_and_is_exposed_before_its_window() {
    let r = ProcessRecords {
        local: vec![
            spill(10 * MS, 0, 2 * MIB),
            spill(150 * MS, 2 * MIB, 10 * MIB),
        ],
        ..Default::default()
    };
    let b = stage_bounds();
    let device = DeviceView {
        probe_free: series(&[(0, 1_000 * MIB), (140 * MS, 900 * MIB)]),
        cuda_total: Some(2_000 * MIB),
        own_device: true,
        ..Default::default()
    };
    // 5 MiB allocated between the reading before the window and the launch.
    let known = live_only(series(&[(0, 0), (131 * MS, 5 * MIB)]));
    let measured = [None, Some(12 * MIB)];
    let mut w = Replayer::new(&r, &b, &device, &known, &measured, 0);
    w.local_memory(10 * MS, 0);
    w.local_memory(150 * MS, 1);
    let ev = &w.out.local_events[0];
    assert_eq!(
        (ev.before, ev.after, ev.device_growth),
        (2 * MIB, 10 * MIB, 12 * MIB)
    );
    assert_eq!(
        (ev.phase, ev.step, ev.failed),
        (Phase::Step1, Some(1), false)
    );
    assert_eq!(w.state.local_growth, 12 * MIB);
    assert_eq!(w.out.phases[&Phase::Step1].local_growth, 12 * MIB);
    // Read at the window's start (130 ms): 1000 MiB free, less 5 MiB since.
    let e = &w.out.exposures[0];
    assert_eq!(e.device_free_before, Some(995 * MIB));
    assert_eq!(e.headroom_after, Some((995 - 12) as i64 * MIB as i64));
    assert_eq!(e.device_used_before, Some(1_005 * MIB));
    assert!(w.out.failures.is_empty());
}

#[test]
fn a_launch_that_could_not_grow_the_reservation_is_an_oom_and_drops_the_old_one() {
    let mut failed = spill(0, 2 * MIB, 50 * MIB);
    failed.t_end = 0;
    let r = ProcessRecords {
        local: vec![spill(10 * MS, 0, 2 * MIB), failed],
        mem: vec![call(100 * MS, MemApi::MemAlloc, 0, FREE, FREE)],
        ..Default::default()
    };
    let b = stage_bounds();
    // The device held 300 MiB of this process's own until the failure at
    // 150 ms, then 200 MiB: 100 MiB gone, of which the old reservation
    // can be 2 MiB (all the local memory held); the other 98 MiB came
    // out of something no record names.
    let device = DeviceView {
        used: series(&[(0, 300 * MIB), (150 * MS, 200 * MIB)]),
        probe_free: series(&[(0, 40 * MIB)]),
        cuda_total: Some(2_000 * MIB),
        ..Default::default()
    };
    let known = live_only(Series::default());
    let mut w = Replayer::new(&r, &b, &device, &known, &[None, None], 0);
    w.local_memory(10 * MS, 0);
    w.local_memory(150 * MS, 1);
    assert_eq!(w.state.local_growth, 0, "a failed growth never landed");
    assert_eq!(
        (w.state.local_released, w.out.local_released),
        (2 * MIB, 2 * MIB)
    );
    assert_eq!(w.state.released_other, 98 * MIB);
    let f = &w.out.failures[0];
    assert_eq!(
        (f.bytes, f.result, f.free_before),
        (48 * MIB, 2, Some(40 * MIB))
    );
    assert_eq!(f.local_kernel.as_deref(), Some("spills"));
    assert_eq!(w.out.phases[&Phase::Step1].failed, 1);
    assert!(w.out.local_events[0].failed && !w.out.exposures[0].succeeded);
}

#[test]
fn queries_first_launches_and_module_code_apply_at_their_instant() {
    let r = ProcessRecords::default();
    let b = stage_bounds();
    let (device, known) = (DeviceView::default(), live_only(Series::default()));
    let mut w = Replayer::new(&r, &b, &device, &known, &[], 2);
    w.apply(10 * MS, &Item::First);
    w.apply(120 * MS, &Item::ModuleCode(8));
    w.apply(130 * MS, &Item::Query(1));
    w.apply(140 * MS, &Item::ModuleCode(1));
    assert_eq!(w.out.phases[&Phase::Setup].first_launches, 1);
    assert_eq!(w.out.phases[&Phase::Step1].module_code, 9);
    assert_eq!(
        (w.out.states[0].module_code, w.out.states[1].module_code),
        (0, 8)
    );
}

/// A stretch the probe traced nothing in, with its two readings.
fn untraced(t_start: u64, t_end: u64, free_before: u64, free_after: u64) -> UntracedSpan {
    UntracedSpan {
        t_start,
        t_end,
        device: 0,
        free_before,
        free_after,
        total: 2 * FREE,
    }
}

#[test]
fn an_untraced_stretch_holds_the_devices_change_less_what_the_records_show() {
    // Across 210..240 ms the device lost 10 MiB of free memory; a
    // stream-ordered pool's reading inside it shows 4 MiB of that, and a
    // neighbour on the GPU grew 1 MiB: 5 MiB are the stretch's own.
    let stretch = || {
        let mut r = stage_records();
        r.pools.push(PoolUse {
            library: 2,
            ..pool_at(225 * MS, 4 * MIB)
        });
        r.untraced.push(untraced(
            210 * MS,
            240 * MS,
            FREE - 64 * MIB,
            FREE - 74 * MIB,
        ));
        r
    };
    let r = stretch();
    let b = stage_bounds();
    let device = DeviceView {
        others_listed: series(&[(0, 3 * MIB), (230 * MS, 4 * MIB)]),
        ..probe_view(&r)
    };
    let rp = replay(&r, &b, &device, &[220 * MS, 250 * MS], &[]);
    assert_eq!(
        (rp.states[0].untraced, rp.states[1].untraced),
        (0, 5 * MIB as i64),
        "counted where its end reading shows it"
    );
    // The training freed more than it took while untraced: negative.
    let mut freed = stage_records();
    freed.untraced.push(untraced(
        210 * MS,
        240 * MS,
        FREE - 64 * MIB,
        FREE - 60 * MIB,
    ));
    let rp = replay(&freed, &b, &probe_view(&freed), &[250 * MS], &[]);
    assert_eq!(rp.states[0].untraced, -4 * MIB as i64);
    // A later free of an address the replay never saw allocated gives back
    // what the device shows it freed, at most what the stretch holds: the
    // first 3 of its 5 MiB, then the other 2 of a 4 MiB free.
    let mut later = stretch();
    let unseen_free = |t: u64, freed: u64| MemCall {
        address: 0xdead_0000 + t,
        ..call(
            t,
            MemApi::MemFree,
            0,
            FREE - 74 * MIB,
            FREE - 74 * MIB + freed,
        )
    };
    later.mem = vec![
        unseen_free(260 * MS, 3 * MIB),
        unseen_free(280 * MS, 4 * MIB),
    ];
    let rp = replay(&later, &b, &device, &[270 * MS, 290 * MS], &[]);
    assert_eq!(
        (rp.states[0].untraced, rp.states[1].untraced),
        (2 * MIB as i64, 0)
    );
    // A handle released a second time (NCCL at teardown: the device gives
    // its memory back at one of the two) was allocated where the probe saw
    // it: the stretch keeps its bytes.
    let mut twice = stretch();
    let mut create = call(
        250 * MS,
        MemApi::MemCreate,
        2 * MIB,
        FREE - 74 * MIB,
        FREE - 76 * MIB,
    );
    create.address = 0xbeef;
    let release = |t: u64, freed: u64| MemCall {
        address: 0xbeef,
        ..call(
            t,
            MemApi::MemRelease,
            0,
            FREE - 76 * MIB,
            FREE - 76 * MIB + freed,
        )
    };
    twice.mem = vec![create, release(260 * MS, 0), release(270 * MS, 2 * MIB)];
    let rp = replay(&twice, &b, &device, &[290 * MS], &[]);
    assert_eq!(rp.states[0].untraced, 5 * MIB as i64);
    // A reading the probe could not take leaves the change in the remainder.
    let mut unread = stage_records();
    unread
        .untraced
        .push(untraced(210 * MS, 240 * MS, FREE, UNKNOWN_BYTES));
    let rp = replay(&unread, &b, &probe_view(&unread), &[250 * MS], &[]);
    assert_eq!(rp.states[0].untraced, 0);
}
