use super::*;
use crate::analysis::device::Series;
use crate::analysis::framework_joins::Window;
use crate::analysis::memory::State;
use crate::analysis::phases::Phase;
use crate::analysis::sources::TORCH_POOL;
use crate::load::shim::ShimOwnTime;
use prewarm_events::{ContextCreated, MemCall, ModuleLoad, Notice, ProbeCost, RecordsDropped};
use prewarm_events::{MemApi, UNKNOWN_BYTES};
use std::collections::BTreeMap;
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn step_end(t: u64, step: u32) -> ShimEvent {
    ShimEvent::step_end_at(t, step)
}

fn exception(t: u64) -> ShimEvent {
    ShimEvent::Exception {
        t,
        kind: "OutOfMemoryError".into(),
        message: "CUDA out of memory".into(),
        where_: Vec::new(),
        thread: None,
        pool_reserved: Some(7),
        pool_allocated: Some(5),
    }
}

fn context(t: u64, free: u64, total: u64) -> ContextCreated {
    ContextCreated {
        t,
        device: 0,
        context_id: 1,
        pci_bus_id: "0000:19:00.0".into(),
        free,
        total,
    }
}

fn call(t_start: u64, t_end: u64, api: MemApi) -> MemCall {
    MemCall {
        t_start,
        t_end,
        api,
        thread: 0,
        device: 0,
        bytes: 0,
        address: 0,
        result: 0,
        library: 0,
        free_before: UNKNOWN_BYTES,
        free_after: UNKNOWN_BYTES,
        total: UNKNOWN_BYTES,
    }
}

fn series(points: &[(u64, u64)]) -> Series {
    Series {
        points: points.to_vec(),
    }
}

/// Setup [0, 100), step 1 [100, 200], steady (200, 400], teardown to 500.
fn bounds() -> Boundaries {
    Boundaries {
        start: 0,
        step1_begin: Some(100),
        step_ends: vec![200, 300, 400],
        end: 500,
        rule: "test".into(),
        died: None,
    }
}

fn state(pool: u64, oop: &[(&str, u64)]) -> State {
    State {
        pool,
        oop: oop.iter().map(|(s, b)| (Arc::from(*s), *b)).collect(),
        ..Default::default()
    }
}

fn exposure(phase: Phase, headroom: Option<i64>, used: Option<u64>, bytes: u64) -> Exposure {
    Exposure {
        t_s: 0.0,
        phase,
        step: None,
        kind: "allocation".into(),
        source: "nccl".into(),
        what: format!("{headroom:?}"),
        bytes,
        device_used_before: None,
        process_used_before: used,
        pool_reserved: 0,
        device_free_before: None,
        headroom_after: headroom,
        succeeded: true,
    }
}

fn comm(inferred_bytes: u64) -> CommAccount {
    CommAccount {
        comm: "0x1".into(),
        comm_id: None,
        rank: None,
        nranks: None,
        phase: None,
        step: None,
        start_s: None,
        init_seconds: None,
        bytes: 0,
        inferred_bytes,
        timings: BTreeMap::new(),
        group: None,
    }
}

/// A communicator with this init window (no Init START line).
fn comm_window(window: Option<Window>) -> CommWindow {
    CommWindow {
        comm: crate::load::nccl::NcclComm::seen("", Some(1), "0x1"),
        window,
        started: None,
    }
}

#[test]
fn only_processes_that_used_cuda_stepped_or_were_disabled_get_an_account() {
    let mut r = ProcessRecords::default();
    assert!(!deserves_account(&r), "a launcher");
    r.header.insert("status".into(), "active".into());
    assert!(!deserves_account(&r), "an active probe that saw nothing");
    r.contexts.push(context(1, 0, 0));
    assert!(deserves_account(&r));
    let stepped = ProcessRecords {
        shim: vec![step_end(5, 1)],
        ..Default::default()
    };
    assert!(deserves_account(&stepped));
    let disabled = ProcessRecords {
        notices: vec![Notice {
            t: 1,
            level: NoticeLevel::Disabled,
            text: "stopped".into(),
        }],
        ..Default::default()
    };
    assert!(deserves_account(&disabled));
    let mut off = ProcessRecords::default();
    off.header.insert("status".into(), "no cupti".into());
    assert!(deserves_account(&off));
}

#[test]
fn a_process_runs_from_its_earliest_start_to_its_last_record_of_either_kind() {
    let mut r = ProcessRecords {
        shim: vec![
            ShimEvent::Process {
                t: 50,
                versions: BTreeMap::new(),
                argv: Vec::new(),
            },
            ShimEvent::Step1Begin {
                t: 200,
                rule: "first forward".into(),
            },
            step_end(300, 1),
            ShimEvent::Compile {
                kernel: "k".into(),
                t0: 400,
                t1: 900,
                cache_hit: None,
            },
        ],
        last_t: 600,
        ..Default::default()
    };
    r.header.insert("start_ns".into(), "100".into());
    let b = process_boundaries(&r, false);
    assert_eq!((b.start, b.end), (50, 900), "shim start, compile end");
    assert_eq!((b.step1_begin, b.step_ends.clone()), (Some(200), vec![300]));
    r.header.insert("start_ns".into(), "20".into());
    r.last_t = 2_000;
    let b = process_boundaries(&r, false);
    assert_eq!((b.start, b.end), (20, 2_000), "header start, probe end");
    // Explicit markers replace the step rule when asked for.
    r.shim.push(ShimEvent::Marker {
        t0: 1_000,
        t1: 1_100,
        name: "step".into(),
    });
    let b = process_boundaries(&r, true);
    assert_eq!((b.step1_begin, b.step_ends), (Some(1_000), vec![1_100]));
}

#[test]
fn step_end_readings_take_torch_device_use_as_total_minus_free() {
    let r = ProcessRecords {
        shim: vec![
            ShimEvent::StepEnd {
                t: 10,
                step: 1,
                reserved: Some(4),
                allocated: None,
                max_reserved: None,
                device_free: Some(30),
                device_total: Some(100),
            },
            step_end(20, 2),
        ],
        ..Default::default()
    };
    let got = step_end_readings(&r);
    assert_eq!(
        got[0],
        StepEndReading {
            step: 1,
            t: 10,
            reserved: Some(4),
            device_used: Some(70),
        }
    );
    assert_eq!((got[1].step, got[1].device_used), (2, None));
}

#[test]
fn the_query_plan_asks_for_phase_ends_then_communicator_spans_then_step_ends() {
    let r = ProcessRecords {
        shim: vec![step_end(200, 1), step_end(300, 2), step_end(400, 3)],
        ..Default::default()
    };
    let comms = vec![comm_window(Some((120, 150))), comm_window(None)];
    let plan = QueryPlan::new(&r, &bounds(), &comms);
    let phases: Vec<Phase> = plan.phase_windows.iter().map(|p| p.0).collect();
    assert_eq!(phases, Phase::ALL);
    // The span is the window widened (5 ms before, never before 0; 20 ms
    // after); no growth window moves its ends.
    let span = (0, 150 + 20_000_000);
    assert_eq!(plan.read_at, vec![Some(span), None]);
    assert_eq!(
        plan.queries,
        [100, 200, 400, 500, span.0, span.1, 200, 300, 400]
    );
    assert_eq!((plan.first_comm_query(), plan.first_step_query()), (4, 6));
    assert_eq!(plan.comm_exclusions(), [span]);
    // A process that died in step 1 is accounted there at its exception.
    let died = Boundaries {
        died: Some(170),
        ..bounds()
    };
    let plan = QueryPlan::new(&r, &died, &[]);
    assert_eq!(plan.queries[..4], [100, 170, 400, 500]);
    assert_eq!(plan.gap_instant((0, 100)), 100);
    assert_eq!(plan.gap_instant((100, 200)), 170);
}

#[test]
fn the_context_holds_what_the_device_gained_from_the_call_that_created_it() {
    let r = ProcessRecords {
        contexts: vec![context(50, 700 * MIB, 1_000 * MIB)],
        mem: vec![
            call(10, 20, MemApi::MemAlloc),
            call(30, 60, MemApi::PrimaryCtxRetain),
        ],
        ..Default::default()
    };
    let device = DeviceView {
        device_used: series(&[(0, 40 * MIB), (30, 100 * MIB), (55, 400 * MIB)]),
        ..Default::default()
    };
    // 300 MiB in use at creation, 100 MiB of it before the retain call.
    assert_eq!(context_bytes(&r, &device, Some(0)), Some(200 * MIB));
    // Without NVML, what the GPU held before the run.
    let no_nvml = DeviceView::default();
    assert_eq!(context_bytes(&r, &no_nvml, Some(50 * MIB)), Some(250 * MIB));
    assert_eq!(context_bytes(&r, &no_nvml, None), Some(300 * MIB));
    let unread = ProcessRecords {
        contexts: vec![context(50, UNKNOWN_BYTES, 1_000 * MIB)],
        ..Default::default()
    };
    assert_eq!(context_bytes(&unread, &device, None), None);
    assert_eq!(
        context_bytes(&ProcessRecords::default(), &device, None),
        None
    );
}

#[test]
fn a_communicator_holds_the_growth_of_the_unexplained_remainder_across_its_span() {
    let plan = QueryPlan {
        phase_windows: vec![(Phase::Setup, (0, 500))],
        died_at: None,
        spans: vec![Some((100, 200)), None, Some((300, 400))],
        read_at: vec![Some((100, 200)), None, Some((300, 400))],
        alloc_at: vec![Some((100, 200)), None, Some((300, 400))],
        step_ends: Vec::new(),
        queries: Vec::new(),
    };
    let comms = vec![
        comm_window(Some((100, 180))),
        comm_window(None),
        comm_window(Some((300, 390))),
    ];
    let device = DeviceView {
        used: series(&[(100, 50), (200, 130), (300, 130), (400, 100)]),
        ..Default::default()
    };
    let states = vec![
        State::default(),
        state(10, &[]),
        state(10, &[("nccl", 20)]),
        state(10, &[("nccl", 20)]),
        state(10, &[("nccl", 20)]),
    ];
    // 50-10 = 40 before, 130-30 = 100 after: 60 inferred, complete at 180;
    // the third shrank: never negative.
    assert_eq!(
        comm_inferred_bytes(&plan, &comms, &states, &device),
        [(180, 60), (0, 0), (390, 0)]
    );
}

#[test]
fn phase_sources_hold_what_was_live_at_the_phase_end_most_allocated_first() {
    let sb = |source: &str, allocated: u64| SourceBytes {
        source: source.into(),
        allocated,
        ..Default::default()
    };
    let libraries = BTreeMap::from([("nccl".to_string(), vec!["libnccl.so.2".to_string()])]);
    let got = sources_at_end(
        vec![sb(TORCH_POOL, 5), sb("nccl", 9), sb("cublas", 1)],
        &state(70, &[("nccl", 8)]),
        &libraries,
    );
    let rows: Vec<(&str, u64, usize)> = got
        .iter()
        .map(|s| (s.source.as_str(), s.live_end, s.libraries.len()))
        .collect();
    assert_eq!(
        rows,
        [("nccl", 8, 1), (TORCH_POOL, 70, 0), ("cublas", 0, 0)]
    );
}

#[test]
fn nccl_code_counts_only_communicators_complete_by_the_instant() {
    let nccl = vec![comm(5), comm(7), comm(11)];
    let inferred = [(100, 5), (300, 7), (0, 0)];
    assert_eq!(nccl_code_held(&nccl, &inferred, 50), 0);
    assert_eq!(nccl_code_held(&nccl, &inferred, 100), 5);
    assert_eq!(
        nccl_code_held(&nccl, &inferred, 1_000),
        12,
        "never one without a span"
    );
}

#[test]
fn the_out_of_pool_account_names_every_holder_and_leaves_the_rest_unexplained() {
    let mut s = state(400, &[("nccl", 30), ("cublas", 0), ("triton", 8)]);
    s.local_growth = 20;
    s.local_released = 4;
    s.module_code = 3;
    let gap = gap_account(1.5, 1_000, &s, 2, Some(500), 9);
    let parts: Vec<(PartSource, i64, bool)> = gap
        .parts
        .iter()
        .map(|p| (p.source.clone(), p.bytes, p.inferred))
        .collect();
    assert_eq!(
        parts,
        [
            (PartSource::Context, 500, false),
            (PartSource::Library("nccl".into()), 30, false),
            (PartSource::Library("triton".into()), 8, false),
            (PartSource::LocalMemoryGrowth, 20, false),
            (PartSource::LocalMemoryDropped, -4, false),
            (PartSource::NcclWithoutAllocations, 9, true),
            (PartSource::ModuleCode, 3, true),
        ]
    );
    assert_eq!(
        gap.parts[0].context,
        Some(ContextDetail {
            initial_local_memory: 2,
        })
    );
    assert_eq!(
        (gap.at_s, gap.out_of_pool, gap.pool_reserved),
        (1.5, 600, 400)
    );
    assert_eq!(gap.unexplained, 600 - (500 + 30 + 8 + 20 - 4 + 9 + 3));
    // What changed while nothing was traced is its own part, signed.
    s.untraced = -2;
    let gap = gap_account(1.5, 1_000, &s, 2, Some(500), 9);
    let last = gap.parts.last().expect("parts");
    assert_eq!((&last.source, last.bytes), (&PartSource::Untraced, -2));
    assert_eq!(gap.unexplained, 600 - (500 + 30 + 8 + 20 - 4 + 9 + 3 - 2));
    // Without a context figure and beyond the device's reading.
    let bare = gap_account(0.0, 100, &state(300, &[]), 0, None, 0);
    assert!(bare.parts.is_empty());
    assert_eq!((bare.out_of_pool, bare.unexplained), (0, 0));
}

#[test]
fn a_phase_account_reads_its_window_its_state_and_its_accounting_instant() {
    let r = ProcessRecords {
        modules: vec![
            ModuleLoad {
                t: 250,
                context_id: 1,
                module_id: 1,
                cubin_bytes: 64,
            },
            ModuleLoad {
                t: 450,
                context_id: 1,
                module_id: 2,
                cubin_bytes: 1,
            },
        ],
        ..Default::default()
    };
    let b = bounds();
    let device = DeviceView {
        used: series(&[(0, 10), (250, 900), (390, 800)]),
        ..Default::default()
    };
    let mut rp = Replay::default();
    rp.phases.entry(Phase::Steady).or_default().oop_alloc = 77;
    rp.phases.entry(Phase::Steady).or_default().pool_peak = 50;
    let inputs = PhaseInputs {
        r: &r,
        bounds: &b,
        device: &device,
        rp: &rp,
        context_bytes: None,
        nccl: &[],
        nccl_outside: &[(150, 2), (250, 3)],
        comm_inferred: &[],
        stall_windows: &StallWindows::default(),
    };
    let s = state(60, &[("nccl", 5)]);
    let p = phase_account(Phase::Steady, (200, 400), 390, &s, &inputs);
    assert_eq!((p.steps, p.start_s, p.end_s), (2, 200e-9, 400e-9));
    assert_eq!((p.device_used_peak, p.module_image_bytes), (Some(900), 64));
    assert_eq!((p.pool_reserved_peak, p.pool_reserved_end), (60, 60));
    assert_eq!((p.out_of_pool_allocated, p.out_of_pool_live_end), (77, 5));
    let gap = p.gap_end.expect("the device was read");
    assert_eq!(
        (gap.at_s, gap.device_used, gap.out_of_pool),
        (390e-9, 800, 740)
    );
    let step1 = phase_account(Phase::Step1, (100, 200), 200, &s, &inputs);
    assert_eq!((step1.steps, step1.out_of_pool_allocated), (1, 0));
    // NCCL's allocations outside every communicator's init, by phase.
    assert_eq!((step1.nccl_outside_comms, p.nccl_outside_comms), (2, 3));
}

#[test]
fn exceptions_are_placed_in_their_phase() {
    let r = ProcessRecords {
        shim: vec![step_end(200, 1), exception(150)],
        ..Default::default()
    };
    let got = exceptions(&r, &bounds());
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].phase, got[0].t_s), (Phase::Step1, 150e-9));
    assert_eq!(
        (got[0].pool_reserved, got[0].pool_allocated),
        (Some(7), Some(5))
    );
}

#[test]
fn the_tightest_exposure_is_the_least_headroom_of_each_phase() {
    let es = vec![
        exposure(Phase::Step1, Some(50), Some(100), 10),
        exposure(Phase::Setup, Some(30), None, 10),
        exposure(Phase::Step1, Some(-5), Some(400), 20),
        exposure(Phase::Step1, Some(-5), Some(10), 1),
        exposure(Phase::Step1, None, Some(900), 5),
    ];
    let got: Vec<(Phase, Option<i64>, Option<u64>)> = tightest(&es)
        .iter()
        .map(|e| (e.phase, e.headroom_after, e.process_used_before))
        .collect();
    assert_eq!(
        got,
        [
            (Phase::Setup, Some(30), None),
            (Phase::Step1, Some(-5), Some(400)),
        ]
    );
    assert_eq!(min_capacity(&es), Some(905));
    assert_eq!(min_capacity(&es[1..2]), None);
}

#[test]
fn capture_status_says_why_the_probe_did_not_capture() {
    let mut r = ProcessRecords::default();
    let bounds = Boundaries::two_steps();
    let none = capture_status(&r, false, &bounds);
    assert!(!none.active);
    assert!(none.detail.starts_with("no probe file"), "{}", none.detail);
    assert_eq!(capture_status(&r, true, &bounds).detail, "unknown");
    r.header.insert("status".into(), "active".into());
    r.header
        .insert("cupti_path".into(), "/x/libcupti.so".into());
    r.header.insert("cupti_version".into(), "24".into());
    r.notices.push(Notice {
        t: 1,
        level: NoticeLevel::Info,
        text: "hello".into(),
    });
    r.notices.push(Notice {
        t: 1,
        level: NoticeLevel::Info,
        text: "capture active: CUPTI 24 from /x/libcupti.so".into(),
    });
    let on = capture_status(&r, true, &bounds);
    assert!(on.active);
    // "hello" is a note; that capture is active is the cupti field.
    let texts = |notes: &[ProbeNote]| notes.iter().map(|n| n.text.clone()).collect::<Vec<_>>();
    assert_eq!(texts(&on.notes), ["hello"]);
    assert_eq!((on.notes[0].phase, on.notes[0].step), (Phase::Setup, None));
    assert_eq!(on.cupti.as_deref(), Some("/x/libcupti.so (API 24)"));
    assert_eq!(
        on.notices,
        ["hello", "capture active: CUPTI 24 from /x/libcupti.so"]
    );
    assert!(on.warnings.is_empty());
    r.notices.push(Notice {
        t: 3_000_000_000,
        level: NoticeLevel::Warning,
        text: "an event was dropped".into(),
    });
    let warned = capture_status(&r, true, &bounds);
    assert_eq!(warned.notices.len(), 3);
    assert_eq!(texts(&warned.warnings), ["an event was dropped"]);
    // Placed in the run: 3 s is in step 2.
    let w = &warned.warnings[0];
    assert_eq!((w.t_s, w.phase, w.step), (3.0, Phase::Steady, Some(2)));
    r.notices.push(Notice {
        t: 2,
        level: NoticeLevel::Disabled,
        text: "too many records".into(),
    });
    let off = capture_status(&r, true, &bounds);
    assert!(!off.active);
    assert_eq!(
        (off.detail.as_str(), off.notices.len()),
        ("too many records", 3)
    );
}

#[test]
fn versions_come_from_the_shim_and_the_probe_header() {
    let mut r = ProcessRecords {
        shim: vec![
            ShimEvent::Process {
                t: 0,
                versions: BTreeMap::from([
                    ("torch".to_string(), Some("2.8".to_string())),
                    ("triton".to_string(), None),
                ]),
                argv: Vec::new(),
            },
            ShimEvent::ProcessGroup {
                backend: "nccl".into(),
                world: 2,
                rank: 0,
                nccl: "2.27.3".into(),
            },
        ],
        ..Default::default()
    };
    r.header.insert("cupti_version".into(), "24".into());
    let v = versions(&r);
    let got: Vec<(&str, &str)> = v.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(got, [("cupti", "24"), ("nccl", "2.27.3"), ("torch", "2.8")]);
}

#[test]
fn probe_health_is_what_the_probe_counted_and_zero_without() {
    assert_eq!(
        probe_health(&ProcessRecords::default()),
        ProbeHealth::default()
    );
    let r = ProcessRecords {
        cost: Some(ProbeCost {
            t: 0,
            callbacks: 3,
            callback_ns: 2_000_000_000,
            activity_records: 4,
            activity_ns: 500_000_000,
            activity_buffer_bytes: 8,
            bytes_written: 9,
            flush_ns: 1,
            ..ProbeCost::default()
        }),
        dropped: Some(RecordsDropped {
            t: 0,
            probe_events: 1,
            cupti_records: 2,
        }),
        ..Default::default()
    };
    let h = probe_health(&r);
    assert_eq!(
        (h.callbacks, h.callback_seconds, h.activity_seconds),
        (3, 2.0, 0.5)
    );
    assert_eq!((h.host_buffer_bytes, h.bytes_written), (8, 9));
    assert_eq!((h.dropped_probe_events, h.dropped_cupti_records), (1, 2));
}

#[test]
fn step_checks_put_torch_figures_beside_the_doctors_pool() {
    let readings = vec![
        StepEndReading {
            step: 1,
            t: 10,
            reserved: Some(100),
            device_used: Some(300),
        },
        StepEndReading {
            step: 2,
            t: 20,
            reserved: None,
            device_used: None,
        },
    ];
    let got = step_checks(&readings, &[state(90, &[]), state(95, &[])]);
    assert_eq!(
        got,
        [
            StepCheck {
                step: 1,
                torch_reserved: Some(100),
                doctor_pool_reserved: 90,
                torch_device_used: Some(300),
            },
            StepCheck {
                step: 2,
                torch_reserved: None,
                doctor_pool_reserved: 95,
                torch_device_used: None,
            },
        ]
    );
}

#[test]
fn step_info_counts_steps_and_times_the_phases() {
    let b = Boundaries {
        start: 0,
        step1_begin: Some(1_000_000_000),
        step_ends: vec![3_000_000_000, 3_500_000_000, 4_000_000_000],
        end: 5_000_000_000,
        rule: "first forward".into(),
        died: None,
    };
    let s = step_info(&b, &StallWindows::default(), &[], &[], &[]);
    assert_eq!((s.count, s.rule.as_str()), (3, "first forward"));
    assert_eq!(
        (s.setup_s, s.step1_s, s.steady_step_s),
        (Some(1.0), Some(2.0), Some(0.5))
    );
    assert_eq!(
        (s.steady_steps, s.steady_basis, s.died_in_step),
        (2, Some(SteadyBasis::EveryStep), None)
    );
}

#[test]
fn the_shims_steady_time_is_its_median_over_the_steady_steps() {
    // Steps 2..4 end at 3.5, 4.0 and 4.5 s; the shim spends 600 us in
    // step 2 (its snapshots) and 20 us in each of steps 3 and 4.
    let b = Boundaries {
        start: 0,
        step1_begin: Some(1_000_000_000),
        step_ends: vec![3_000_000_000, 3_500_000_000, 4_000_000_000, 4_500_000_000],
        end: 5_000_000_000,
        rule: "first forward".into(),
        died: None,
    };
    let line = |t: u64, own_ns: u64| ShimOwnTime { t, own_ns };
    let shim = [
        line(3_000_000_000, 10_000_000),
        line(3_500_000_000, 10_600_000),
        line(4_000_000_000, 10_620_000),
        line(4_500_000_000, 10_640_000),
    ];
    let s = step_info(&b, &StallWindows::default(), &[], &shim, &[3_500_000_000]);
    let m = s.steady_shim_s.unwrap();
    assert!((m - 20e-6).abs() < 1e-12, "{m}");
    // Step 2 alone read memory statistics: one of three steps.
    assert_eq!(s.steady_shim_first_steps, 1);
    // Every steady step among the shim's detailed first steps: counted.
    let all = [3_500_000_000, 4_000_000_000, 4_500_000_000];
    let s = step_info(&b, &StallWindows::default(), &[], &shim, &all);
    assert_eq!(s.steady_shim_first_steps, 3);
    assert_eq!(s.steady_steps, 3);
    // Without the shim's time past the last step, nothing is claimed.
    let s = step_info(&b, &StallWindows::default(), &[], &shim[..3], &[]);
    assert_eq!(s.steady_shim_s, None);
    assert_eq!(
        step_info(&b, &StallWindows::default(), &[], &[], &[]).steady_shim_s,
        None
    );
}

#[test]
fn a_process_is_accounted_end_to_end_from_hand_built_records() {
    let host = HostData {
        dir: std::path::PathBuf::new(),
        meta: None,
        processes: Vec::new(),
        nvml: Default::default(),
        nccl: Vec::new(),
        problems: Vec::new(),
    };
    let files = ProcessFiles {
        pid: 42,
        rank: None,
        events: Some("events.bin".into()),
        shim: None,
    };
    assert!(analyse_process(&host, &files, ProcessRecords::default(), "h").is_none());
    let mut alloc = call(150, 160, MemApi::MemAlloc);
    (alloc.bytes, alloc.address, alloc.free_before, alloc.total) =
        (64 * MIB, 0x10, 600 * MIB, 1_000 * MIB);
    alloc.free_after = 536 * MIB;
    let mut r = ProcessRecords {
        contexts: vec![context(10, 700 * MIB, 1_000 * MIB)],
        libraries: std::collections::HashMap::from([(0, "/x/libnccl.so.2".to_string())]),
        mem: vec![alloc],
        shim: vec![
            ShimEvent::Step1Begin {
                t: 100,
                rule: "first forward".into(),
            },
            step_end(200, 1),
        ],
        last_t: 250,
        problems: vec![crate::load::Problem::whole_file(
            "x".into(),
            "damaged".into(),
            true,
        )],
        ..Default::default()
    };
    r.header.insert("status".into(), "active".into());
    r.header.insert("RANK".into(), "3".into());
    let p = analyse_process(&host, &files, r, "h").expect("a CUDA process");
    assert_eq!((p.host.as_str(), p.pid, p.rank), ("h", 42, Some(3)));
    assert_eq!(p.gpu.as_deref(), Some("0000:19:00.0"));
    assert_eq!((p.context_bytes, p.problems.len()), (Some(300 * MIB), 1));
    assert!(p.capture.active);
    let step1 = p.phases.iter().find(|x| x.phase == Phase::Step1).unwrap();
    assert_eq!(step1.out_of_pool_allocated, 64 * MIB);
    assert_eq!(step1.by_source[0].source, "nccl");
    assert_eq!(p.exposures.len(), 1);
    assert_eq!(p.exposures[0].headroom_after, Some(536 * MIB as i64));
}
