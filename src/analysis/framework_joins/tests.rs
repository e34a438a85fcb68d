use super::*;
use crate::analysis::account::{AutotuneAccount, CompileEvent};
use crate::analysis::memory::OopAlloc;
use crate::analysis::phases::{Boundaries, Phase};
use crate::load::nccl::NcclComm;
use crate::prewarm::catalog::EventClass;

#[test]
fn breakdown_counts_each_instant_once_by_priority() {
    let w = StallWindows {
        compile: vec![(10, 20)],
        autotune: vec![(5, 30)],
        nccl: vec![(40, 50)],
        cublas: vec![(58, 70)],
        module: vec![(45, 60), (65, 68)],
    };
    let b = w.breakdown(0, 100);
    assert_eq!(b.compile_s, 10e-9);
    assert_eq!(b.autotune_s, 15e-9);
    assert_eq!(b.nccl_init_s, 10e-9);
    // cuBLAS's own module loads (65-68) are cuBLAS init.
    assert_eq!(b.cublas_init_s, 12e-9);
    assert_eq!(b.module_load_s, 8e-9);
    assert_eq!(b.other_s, 45e-9);
    assert!((b.wall_s - 100e-9).abs() < 1e-15);
}

#[test]
fn communicator_spans_never_overlap() {
    const MS: u64 = 1_000_000;
    // The second window starts (by NCCL's total) before the first completed.
    let w = [Some((100 * MS, 400 * MS)), Some((395 * MS, 430 * MS)), None];
    let s = comm_spans(&w);
    assert_eq!(s[0], Some((95 * MS, 400 * MS)));
    assert_eq!(s[1], Some((400 * MS, 450 * MS)));
    assert_eq!(s[2], None);
    // Far apart: each widened by the full margins.
    let far = [Some((100 * MS, 200 * MS)), (Some((900 * MS, 950 * MS)))];
    let s = comm_spans(&far);
    assert_eq!(s[0], Some((95 * MS, 220 * MS)));
    assert_eq!(s[1], Some((895 * MS, 970 * MS)));
}

/// The shape of h200-matrix nccl_comm/2 (synthetic numbers): the second
/// communicator's window, by NCCL's total printed to 10 ms, starts 1 ms
/// before the first one completed, among its last allocations; NCCL's
/// own allocation comes before the first one's Init START line (before
/// its window here, inside it where the rounding falls the other way).
#[test]
fn each_allocation_counts_for_one_communicator_from_its_init_start() {
    const MS: u64 = 1_000_000;
    let comm = |w: Window, started: u64| CommWindow {
        comm: NcclComm::seen("", Some(1), "0x1"),
        window: Some(w),
        started: Some(started),
    };
    let comms = [
        comm((100 * MS, 400 * MS), 377 * MS),
        comm((399 * MS, 440 * MS), 404 * MS),
    ];
    let spans = comm_spans(&[comms[0].window, comms[1].window]);
    let at = comm_alloc_windows(&comms, &spans);
    assert_eq!(at, [Some((377 * MS, 400 * MS)), Some((404 * MS, 460 * MS))]);
    let alloc = |t: u64| OopAlloc {
        t,
        source: "nccl".into(),
        bytes: 2 << 20,
        freed: None,
    };
    let oop = [
        alloc(98 * MS),
        alloc(390 * MS),
        alloc(399 * MS + 500_000),
        alloc(420 * MS),
    ];
    let owners: Vec<Option<usize>> = oop.iter().map(|x| nccl_owner(x, &at)).collect();
    assert_eq!(owners, [None, Some(0), Some(0), Some(1)]);
    let bounds = Boundaries {
        start: 0,
        step1_begin: None,
        step_ends: Vec::new(),
        end: 500 * MS,
        rule: String::new(),
        died: None,
    };
    let accounts = comm_accounts(&comms, &at, &oop, &bounds, &[]);
    let bytes: Vec<u64> = accounts.iter().map(|c| c.bytes).collect();
    assert_eq!(bytes, [4 << 20, 2 << 20]);
    assert_eq!(nccl_outside_comms(&oop, &at), [(98 * MS, 2 << 20)]);
    // Without an Init START line: from the window's start, inside the span.
    let unprinted = [CommWindow {
        started: None,
        ..comms[1].clone()
    }];
    assert_eq!(
        comm_alloc_windows(&unprinted, &spans[1..]),
        [Some((400 * MS, 460 * MS))]
    );
}

/// The shape of prescribe-all-matrix prescribed/1 (synthetic numbers): the
/// context's first launch (kernel start 244 ms, window 231..264 ms: the
/// context came up at 231 ms) inside which a communicator's span starts
/// (243.9 ms); the device showed the 92 MiB at 243 ms, before the span.
#[test]
fn a_communicator_is_read_outside_every_local_memory_window() {
    const MS: u64 = 1_000_000;
    let growth = [(231 * MS, 264 * MS), (600 * MS, 641 * MS)];
    let spans = [Some((243 * MS + 900_000, 639 * MS)), None];
    let read = comm_measure_spans(&spans, &growth);
    // The start moves back to the window's start, the end on to the next window's end.
    assert_eq!(read, vec![Some((231 * MS, 641 * MS)), None]);
    // Windows that chain are all left behind; none touching the span: unchanged.
    let chained = [(200 * MS, 235 * MS), (231 * MS, 264 * MS)];
    assert_eq!(
        comm_measure_spans(&spans[..1], &chained),
        vec![Some((200 * MS, 639 * MS))]
    );
    assert_eq!(comm_measure_spans(&spans[..1], &[]), spans[..1].to_vec());
    // Never into a neighbour's span: a window across two is left as it is.
    let two = [Some((100 * MS, 240 * MS)), Some((243 * MS, 300 * MS))];
    assert_eq!(comm_measure_spans(&two, &growth), two.to_vec());
}

#[test]
fn cublas_calls_close_together_are_one_initialisation() {
    const MS: u64 = 1_000_000;
    let calls = [
        (0, MS),
        (15 * MS, 16 * MS),
        (30 * MS, 34 * MS),
        (200 * MS, 201 * MS),
    ];
    assert_eq!(
        cublas_windows(&calls),
        vec![(0, 34 * MS), (200 * MS, 201 * MS)]
    );
}

const S: u64 = 1_000_000_000;

/// Synthetic boundaries: step 1 begins at 10 s, steps end at 20, 21, 22, 23 s.
fn four_steps() -> Boundaries {
    Boundaries {
        start: 0,
        step1_begin: Some(10 * S),
        step_ends: vec![20 * S, 21 * S, 22 * S, 23 * S],
        end: 30 * S,
        rule: "first-forward-after-zero-grad".into(),
        died: None,
    }
}

fn autotune(kernel: &str, key: &str, start_s: f64, seconds: f64, growth: u64) -> AutotuneAccount {
    let b = four_steps();
    let t = (start_s * 1e9) as u64;
    AutotuneAccount {
        kernel: kernel.into(),
        key: key.into(),
        phase: b.phase_of(t),
        step: b.step_of(t),
        start_s,
        seconds,
        configs: 4,
        benchmarked: 4,
        chosen: "BLOCK: 64".into(),
        source: "benchmark".into(),
        local_memory_growth: growth,
        out_of_pool_bytes: 0,
        spilling_configs: Vec::new(),
    }
}

fn compile(kernel: &str, start_s: f64, seconds: f64) -> CompileEvent {
    let b = four_steps();
    let t = (start_s * 1e9) as u64;
    CompileEvent {
        kernel: kernel.into(),
        phase: b.phase_of(t),
        step: b.step_of(t),
        start_s,
        seconds,
        cache_hit: Some(false),
        unfinished: false,
    }
}

#[test]
fn late_warmups_are_grouped_by_kernel_ranked_by_cost_and_say_every_step() {
    // Synthetic events, not a recording.
    let b = four_steps();
    let autotunes = [
        autotune("chunk_bwd", "(64, 'bf16')", 12.0, 30.0, 0),
        // A new shape in step 3 is the same problem.
        autotune("chunk_bwd", "(128, 'bf16')", 21.5, 8.0, 6 << 30),
        autotune("setup_kernel", "(1,)", 2.0, 5.0, 0),
    ];
    let compiles = [
        compile("chunk_bwd", 12.5, 3.0), // inside its autotune: counted there
        compile("rms_norm", 11.0, 2.0),
        compile("tiny", 21.2, 0.0013),     // a cached compile: minor
        compile("eval_kernel", 25.0, 1.0), // after the last step: no step
    ];
    let first_launches = [11 * S, 21 * S + 1];
    let w = late_warmups(&LateInputs {
        bounds: &b,
        autotune: &autotunes,
        compiles: &compiles,
        comms: &[],
        local: &[],
        phases: &[],
        first_launches: &first_launches,
        cublas: &[],
        oop_allocs: &[],
    });
    let chunk = &w[0];
    assert_eq!(chunk.class, EventClass::TritonAutotune);
    assert_eq!(chunk.subject, "chunk_bwd");
    assert_eq!(chunk.keys, vec!["(64, 'bf16')", "(128, 'bf16')"]);
    assert_eq!((chunk.events, chunk.compiles), (3, 1));
    assert_eq!(chunk.seconds, 38.0);
    assert_eq!(chunk.bytes, 6 << 30);
    assert_eq!((chunk.step, chunk.steps.clone()), (Some(1), vec![1, 3]));
    assert!(!chunk.minor);
    // Setup's autotune is not a late warmup.
    assert!(w.iter().all(|x| x.subject != "setup_kernel"));
    let norm = w.iter().find(|x| x.subject == "rms_norm").unwrap();
    assert_eq!(
        (norm.class, norm.seconds, norm.minor),
        (EventClass::Compile, 2.0, false)
    );
    let tiny = w.iter().find(|x| x.subject == "tiny").unwrap();
    assert!(tiny.minor);
    assert_eq!(tiny.steps, vec![3]);
    let eval = w.iter().find(|x| x.subject == "eval_kernel").unwrap();
    assert_eq!((eval.phase, eval.step), (Phase::Teardown, None));
    assert!(eval.steps.is_empty());
    let lazy = w
        .iter()
        .find(|x| x.class == EventClass::ModuleLoad)
        .unwrap();
    assert_eq!((lazy.events, lazy.steps.clone()), (2, vec![1, 3]));
    // Costliest first (1 GiB ranks like 1 s).
    let ranks: Vec<f64> = w.iter().map(warmup_rank).collect();
    assert!(ranks.windows(2).all(|p| p[0] >= p[1]), "{ranks:?}");
}

#[test]
fn wall_clock_maps_onto_the_monotonic_clock() {
    // started at unix 1000 s == mono 50 s
    assert_eq!(
        unix_to_mono(1001.5, 1_000_000_000_000, 50_000_000_000),
        51_500_000_000
    );
}

/// A process killed inside a compile: the shim wrote the compile's start
/// and no end. It is a compile of the account, unfinished, running to the
/// process's end (30 s here), and its window holds step 1's time from its
/// start (12 s) on; the finished compile beside it is as it was.
#[test]
fn a_compile_the_process_ended_inside_runs_to_the_process_end() {
    use crate::load::records::ProcessRecords;
    use crate::load::shim::ShimEvent;
    let begin = |kernel: &str, t0: u64| ShimEvent::CompileBegin {
        kernel: kernel.into(),
        t0,
    };
    let r = ProcessRecords {
        shim: vec![
            begin("done", 11 * S),
            ShimEvent::Compile {
                kernel: "done".into(),
                t0: 11 * S,
                t1: 11 * S + S / 2,
                cache_hit: Some(true),
            },
            begin("rowwise_mix", 12 * S),
        ],
        ..Default::default()
    };
    let b = four_steps();
    let compiles = compile_events(&r, &b);
    assert_eq!(compiles.len(), 2, "{compiles:?}");
    assert!(!compiles[0].unfinished);
    assert_eq!(compiles[0].seconds, 0.5);
    let killed = &compiles[1];
    assert_eq!(killed.kernel, "rowwise_mix");
    assert!(killed.unfinished);
    assert_eq!((killed.seconds, killed.cache_hit), (18.0, None));
    assert_eq!((killed.phase, killed.step), (Phase::Step1, Some(1)));
    let windows = StallWindows::collect(&r, &[], |_| false, b.end);
    assert_eq!(
        windows.compile,
        vec![(11 * S, 11 * S + S / 2), (12 * S, 30 * S)]
    );
    // Step 1 (10 s to 20 s): 0.5 s of the finished compile, 8 s of the other.
    let step1 = windows.breakdown(10 * S, 20 * S);
    assert!((step1.compile_s - 8.5).abs() < 1e-9, "{step1:?}");
}
