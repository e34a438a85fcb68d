//! The account, exposure, late-warmup list, forensics and verdicts asserted on
//! real recordings from an H200 (tests/fixtures/h200/README.md says how each
//! was made).

mod common;

use common::{copy_tree, terminal_text};
use prewarm_doctor::analysis::account::{FailedRequest, PartSource, ProcessAccount, Remedy};
use prewarm_doctor::analysis::framework_joins::class_costs;
use prewarm_doctor::analysis::matrix::{MatrixNote, compare};
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::summary::{Exclusion, HeldSource};
use prewarm_doctor::analysis::verdict::{Confidence, Reason, Recommendation, VerdictClass};
use prewarm_doctor::analysis::{AttemptAccount, analyse_run};
use prewarm_doctor::load::load_run;
use prewarm_doctor::prewarm::catalog::EventClass;
use std::path::{Path, PathBuf};

const MIB: u64 = 1 << 20;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/h200")
        .join(name)
}

fn attempts(path: &Path) -> Vec<AttemptAccount> {
    analyse_run(&load_run(path).unwrap())
}

/// The training rank of a single-attempt fixture.
fn rank(name: &str) -> (AttemptAccount, ProcessAccount) {
    let a = attempts(&fixture(name)).remove(0);
    assert_eq!(
        a.processes.len(),
        1,
        "{name}: launcher processes must not be reported"
    );
    let p = a.processes[0].clone();
    (a, p)
}

fn phase(p: &ProcessAccount, ph: Phase) -> &prewarm_doctor::analysis::account::PhaseAccount {
    p.phases.iter().find(|x| x.phase == ph).unwrap()
}

fn source_bytes(p: &ProcessAccount, ph: Phase, source: &str) -> u64 {
    phase(p, ph)
        .by_source
        .iter()
        .find(|s| s.source == source)
        .map_or(0, |s| s.allocated)
}

/// The script's own `torch.cuda.mem_get_info()` / `memory_reserved()` after step 1.
fn crosscheck_out_of_pool(name: &str) -> u64 {
    let text = std::fs::read_to_string(fixture(name).join("console-stdout.txt")).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("CROSSCHECK") && l.contains("\"step\": 1,"))
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(line.trim_start_matches("CROSSCHECK ")).unwrap();
    v["out_of_pool"].as_u64().unwrap()
}

/// Every phase end of every process of every attempt in a run folder is
/// accounted: the parts never claim more than the device holds (remainder at
/// least -16 MiB, eight device pages), and a remainder above 64 MiB is
/// flagged not understood (docs/accounting.md); returns the largest
/// remainder seen.
fn assert_accounted(path: &Path) -> i64 {
    let mut worst = 0i64;
    for a in attempts(path) {
        for p in &a.processes {
            for ph in &p.phases {
                let g = ph.gap_end.as_ref().unwrap_or_else(|| {
                    panic!("{}: no gap at end of {:?}", path.display(), ph.phase)
                });
                assert!(
                    g.unexplained >= -16 * MIB as i64
                        && (g.unexplained <= 64 * MIB as i64 || g.not_understood),
                    "{} {}/{} pid {} {:?}: unexplained {} of {}",
                    path.display(),
                    a.variant,
                    a.attempt,
                    p.pid,
                    ph.phase,
                    g.unexplained,
                    g.out_of_pool
                );
                if g.unexplained.abs() > worst.abs() {
                    worst = g.unexplained;
                }
                // Parts the device timeline implies are marked as such.
                for part in &g.parts {
                    let timed = matches!(
                        part.source,
                        PartSource::ModuleCode | PartSource::NcclWithoutAllocations
                    );
                    assert_eq!(part.inferred, timed, "{:?}", part.source);
                }
            }
        }
    }
    worst
}

#[test]
fn every_phase_end_is_accounted_within_the_target() {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/h200-matrix"));
    assert!(folders.len() >= 14, "{folders:?}");
    for f in folders {
        assert_accounted(&f);
    }
}

#[test]
fn the_out_of_pool_figure_agrees_with_what_the_script_measured() {
    for name in [
        "examples-cublas-baseline",
        "examples-cublas-prewarm",
        "examples-triton-baseline",
        "examples-triton-prewarm",
        "examples-nccl-baseline",
        "examples-nccl-prewarm",
    ] {
        let (_, p) = rank(name);
        let ours = phase(&p, Phase::Step1)
            .gap_end
            .as_ref()
            .unwrap()
            .out_of_pool as f64;
        let theirs = crosscheck_out_of_pool(name) as f64;
        // The script reads after its step's synchronize, the account at the
        // step's end: eight device pages apart at most.
        assert!(
            (ours - theirs).abs() <= 16.0 * MIB as f64,
            "{name}: doctor {ours} vs script {theirs}"
        );
        // And the doctor's pool tracking equals torch's memory_reserved().
        let c = &p.step_checks[0];
        assert_eq!(c.torch_reserved, Some(c.doctor_pool_reserved), "{name}");
    }
}

#[test]
fn cublas_first_backward_lands_in_step_1_without_the_prewarm_and_in_setup_with_it() {
    let (_, base) = rank("examples-cublas-baseline");
    // 6 calls: cuBLAS/cuBLASLt handles and workspaces (128.3 MiB on this H200).
    assert_eq!(source_bytes(&base, Phase::Step1, "cublas"), 134_481_920);
    assert_eq!(source_bytes(&base, Phase::Setup, "cublas"), 0);
    assert!(
        base.late_warmups
            .iter()
            .any(|w| w.class == EventClass::Cublas && !w.minor && w.steps == [1])
    );
    let (_, pre) = rank("examples-cublas-prewarm");
    assert_eq!(source_bytes(&pre, Phase::Step1, "cublas"), 0);
    assert!(source_bytes(&pre, Phase::Setup, "cublas") > 128 * MIB);
    // With the prewarm what is left of cuBLAS in step 1 (a few module loads,
    // 22 ms, no bytes) is folded into the minor count.
    let left: Vec<_> = pre
        .late_warmups
        .iter()
        .filter(|w| w.class == EventClass::Cublas)
        .collect();
    assert!(left.iter().all(|w| w.minor && w.bytes == 0), "{left:?}");
    let text = terminal_text(&fixture("examples-cublas-prewarm"));
    assert!(
        text.contains("- and 1 more under 50.0 ms / 1.0 MiB each"),
        "{text}"
    );
    assert!(pre.steps.step1_s.unwrap() < base.steps.step1_s.unwrap());
    assert_eq!(base.steps.rule, "first-forward-after-zero-grad");

    // cuBLAS init is time too: handle and workspace creation and its module
    // loads (0.32 s of the baseline's 0.78 s step 1), not 0.00 s.
    let cublas = |p: &ProcessAccount, ph: Phase| {
        class_costs(p, ph)
            .get(&EventClass::Cublas)
            .copied()
            .unwrap_or_default()
    };
    let b1 = cublas(&base, Phase::Step1);
    // cuBLAS's own allocations: 128.3 MiB, what the first-use experiment's
    // script saw its first forward and backward add outside the pool
    // (device growth less the pool's, to a device page).
    assert_eq!(b1.bytes, 134_481_920);
    let fu = |stage: &str| common::first_use("torch plain default LAZY", stage);
    let outside = |stage: &str, before: &str| {
        fu(stage)["delta_mib"].as_f64().unwrap()
            - (fu(stage)["reserved_mib"].as_f64().unwrap()
                - fu(before)["reserved_mib"].as_f64().unwrap())
    };
    let script =
        outside("cublas_forward", "ones_bf16") + outside("cublas_backward", "cublas_forward");
    assert!(
        (b1.bytes as f64 / MIB as f64 - script).abs() <= 2.0,
        "{script}"
    );
    // Its seconds are the stall breakdown's cuBLAS init (bursts of its
    // driver calls); the prewarm moves them to setup.
    assert!(b1.seconds > 0.0);
    assert_eq!(b1.seconds, phase(&base, Phase::Step1).stall.cublas_init_s);
    let p1 = cublas(&pre, Phase::Step1);
    assert_eq!(p1.bytes, 0);
    assert_eq!(p1.seconds, phase(&pre, Phase::Step1).stall.cublas_init_s);
    assert!(p1.seconds < b1.seconds / 5.0, "{p1:?} vs {b1:?}");
    assert!(cublas(&pre, Phase::Setup).seconds > 0.0);
    // Seconds come from the stall breakdown: no instant counts twice, and
    // cuBLAS's module loads are not also module loading.
    for p in [&base, &pre] {
        for ph in &p.phases {
            let costs = class_costs(p, ph.phase);
            let total: f64 = costs.values().map(|c| c.seconds).sum();
            assert!(total <= ph.stall.wall_s - ph.stall.other_s + 1e-9);
            assert_eq!(
                costs
                    .get(&EventClass::ModuleLoad)
                    .map_or(0.0, |c| c.seconds),
                ph.stall.module_load_s
            );
        }
    }
}

#[test]
fn the_spilling_autotune_candidate_is_named_with_its_local_memory_growth() {
    let (_, base) = rank("examples-triton-baseline");
    let big = base
        .local_memory
        .iter()
        .max_by_key(|l| l.device_growth)
        .unwrap();
    assert_eq!(big.kernel, "rowwise_mix");
    assert_eq!(big.phase, Phase::Step1);
    assert!(big.device_growth > 2 * 1024 * MIB, "{}", big.device_growth);
    assert!(
        big.autotune_config
            .as_deref()
            .unwrap()
            .starts_with("BLOCK: 16384, num_warps: 1")
    );
    let tune = base
        .autotune
        .iter()
        .find(|a| a.kernel == "rowwise_mix")
        .unwrap();
    assert_eq!(
        (tune.phase, tune.configs, tune.benchmarked),
        (Phase::Step1, 3, 3)
    );
    assert!(
        tune.spilling_configs
            .iter()
            .any(|c| c.starts_with("BLOCK: 16384"))
    );
    let stall = &phase(&base, Phase::Step1).stall;
    assert!(
        stall.compile_s > 100.0 && stall.autotune_s > 0.5,
        "{stall:?}"
    );
    // The list a user acts on: costliest first, the autotuned kernel with its
    // key in full, the step it first appeared in.
    let first = &base.late_warmups[0];
    assert_eq!(
        (first.class, first.subject.as_str()),
        (EventClass::TritonAutotune, "rowwise_mix")
    );
    assert_eq!(
        first.keys,
        vec!["(4096, 'torch.bfloat16', 'torch.bfloat16')"]
    );
    assert_eq!((first.step, first.steps.clone()), (Some(1), vec![1]));
    assert_eq!(first.compiles, 3);
    assert!(first.seconds > 100.0 && first.bytes > 2 * 1024 * MIB);
    let ranks: Vec<f64> = base
        .late_warmups
        .iter()
        .map(prewarm_doctor::analysis::framework_joins::warmup_rank)
        .collect();
    assert!(ranks.windows(2).all(|p| p[0] >= p[1]), "{ranks:?}");

    let (_, pre) = rank("examples-triton-prewarm");
    assert!(pre.autotune.iter().all(|a| a.phase == Phase::Setup));
    assert_eq!(phase(&pre, Phase::Step1).local_memory_growth, 0);
    assert!(
        !pre.late_warmups
            .iter()
            .any(|w| w.class == EventClass::TritonAutotune)
    );
}

#[test]
fn the_nccl_communicator_is_accounted_where_it_was_created() {
    let (_, base) = rank("examples-nccl-baseline");
    assert_eq!(base.nccl.len(), 1);
    let c = &base.nccl[0];
    assert_eq!(c.phase, Some(Phase::Step1));
    // The first-use experiment (a script's own cuMemGetInfo readings, same
    // NCCL, one rank): its first collective grew the device by 558 MiB, and
    // destroying the group gave 388 MiB back — the communicator's buffers;
    // the rest is NCCL's kernel code, which no allocation call shows (read
    // to a device page).
    let mib = |section: &str, stage: &str| {
        common::first_use(section, stage)["delta_mib"]
            .as_f64()
            .unwrap()
    };
    let buffers = -mib("torch plain default LAZY", "end");
    let code = mib("torch plain default LAZY", "nccl_first_collective") - buffers;
    assert_eq!(c.bytes as f64, buffers * MIB as f64);
    assert!(
        (c.inferred_bytes as f64 / MIB as f64 - code).abs() <= 2.0,
        "NCCL loads its kernels without allocation calls: {} vs the experiment's {code} MiB",
        c.inferred_bytes
    );
    assert!(c.init_seconds.unwrap() > 0.3);
    assert!(phase(&base, Phase::Step1).stall.nccl_init_s > 0.3);
    assert!(
        base.late_warmups
            .iter()
            .any(|w| w.class == EventClass::NcclComm)
    );
    let (_, pre) = rank("examples-nccl-prewarm");
    assert!(pre.nccl.iter().all(|c| c.phase == Some(Phase::Setup)));
    assert_eq!(source_bytes(&pre, Phase::Step1, "nccl"), 0);
}

#[test]
fn exposure_names_the_tightest_moment_and_the_smallest_device() {
    let (_, p) = rank("oom-nccl-baseline");
    let t = p.tightest.iter().find(|t| t.phase == Phase::Step1).unwrap();
    assert_eq!(t.source, "nccl");
    assert!(t.headroom_after.unwrap() < 512 * MIB as i64, "{t:?}");
    for e in &p.exposures {
        assert!(e.device_free_before.is_some());
    }
    assert!(p.min_capacity_bytes.unwrap() > 139 * 1024 * MIB);
}

#[test]
fn nccl_oom_forensics_blame_the_step_1_communicator() {
    let (a, p) = rank("oom-nccl-baseline");
    assert_eq!(a.exit_code, Some(1));
    assert_eq!(p.forensics.len(), 1, "allocator retries are one failure");
    let f = &p.forensics[0];
    assert_eq!(f.step, Some(2));
    assert_eq!(
        (f.source.as_str(), f.bytes, f.result),
        ("torch pool", 128 * MIB, 2)
    );
    assert!(f.device_free_before.unwrap() < 128 * MIB);
    assert_eq!(f.preceded_by[0].0, EventClass::NcclComm);
    assert!(f.preceded_by[0].1 >= 390 * MIB);
    // The class's 558 MiB: the communicator's 556 MiB (as its late warmup
    // says) and NCCL's 2 MiB before its init, said beside the class.
    let comm = &p.nccl[0];
    assert_eq!(comm.bytes + comm.inferred_bytes, 556 * MIB);
    assert_eq!(f.preceded_nccl_outside_comms, 2 * MIB);
    assert_eq!(f.preceded_by[0].1, 558 * MIB);
    assert_eq!(
        prewarm_doctor::report::verdict_text::preceded_by_texts(f),
        ["NCCL communicator init 558.0 MiB (2.0 MiB of it outside any communicator's init)"]
    );
    assert!(
        f.prewarms.contains(&"comm_groups".to_string())
            && f.prewarms.contains(&"nccl_comm".to_string())
    );
    assert!(f.message.as_deref().unwrap().contains("CUDA out of memory"));
    // The projection: NCCL's buffers and code, created in setup instead,
    // still sit under step 2's pool: with the same step-2 demand the
    // prewarm leaves the failure point as short as it was.
    let b = f.budget.as_ref().unwrap();
    assert!(b.shortfall > 0 && b.shortfall < 16 * MIB as i64, "{b:?}");
    // torch said 99.22 MiB of its pool was cached but unallocated.
    assert_eq!(b.pool_cache, Some((99.22 * MIB as f64) as u64));
    let n = f
        .projections
        .iter()
        .find(|x| x.prewarm == "nccl_comm")
        .unwrap();
    assert!(!n.moves_request);
    assert!(n.persistent_bytes >= 550 * MIB);
    assert_eq!(n.margin, -b.shortfall);
    assert!(f.remedies.is_empty());
    // The recorded prewarm run survives nonetheless: this example sizes its
    // step memory from what setup left free (`--occupy-gib=-0.85`), so with
    // the communicator made in setup it simply holds 556 MiB less. A model
    // whose step needs fixed memory would not; the projection says so.
    let (a2, p2) = rank("oom-nccl-prewarm");
    assert_eq!(a2.exit_code, Some(0));
    assert!(p2.forensics.is_empty());
}

/// The Triton OOM recording predates the shim's zero_grad/first_forward
/// records, so its step 1 cannot be placed: one phase, never "setup".
#[test]
fn a_run_whose_step_one_cannot_be_placed_is_not_called_setup() {
    let (_, p) = rank("oom-triton-baseline");
    assert_eq!(p.steps.step1_s, None);
    let text = terminal_text(&fixture("oom-triton-baseline"));
    assert!(text.contains("   before any step "), "{text}");
    assert!(!text.contains("   setup "), "{text}");
    assert!(text.contains("lazy initialisation before the failure (step 1's start unknown)"));
}

/// The same recording with the two lines a current shim writes before the
/// step-1 forward (SYNTHETIC lines, added here, not recorded: a zero_grad
/// and the first forward, placed between the script's `randn` input and its
/// first cuBLAS call): step 1 is placed although no optimizer step finished,
/// and the failure is in step 1, with step 1's cuBLAS init before it.
#[test]
fn a_process_that_died_in_step_one_gets_step_one_from_the_shims_records() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("oom-triton-baseline"), dir.path());
    let shim = dir.path().join("default/1/vm/proc.pid-908.shim.jsonl");
    let mut text = std::fs::read_to_string(&shim).unwrap();
    text.push_str("{\"ev\": \"zero_grad\", \"t\": 370756000000, \"opt\": 0}\n");
    text.push_str(
        "{\"ev\": \"first_forward\", \"t\": 370757000000, \"opt\": 0, \"after_zero_grad\": true}\n",
    );
    std::fs::write(&shim, text).unwrap();
    let a = attempts(dir.path()).remove(0);
    let p = &a.processes[0];
    assert!(
        p.steps
            .rule
            .starts_with("first-forward-after-zero-grad (no optimizer step finished")
    );
    assert_eq!(p.steps.count, 0);
    let setup = p.steps.setup_s.unwrap();
    assert!(setup > 5.0 && setup < 6.0, "{setup}");
    assert!(p.steps.step1_s.unwrap() > 100.0);
    let f = &p.forensics[0];
    assert_eq!((f.phase, f.step), (Phase::Step1, Some(1)));
    assert!(
        f.preceded_by.contains(&(EventClass::Cublas, 67_240_960)),
        "{:?}",
        f.preceded_by
    );
    assert_eq!(source_bytes(p, Phase::Step1, "cublas"), 67_240_960);
    let text = terminal_text(dir.path());
    assert!(
        text.contains("OUT OF MEMORY in step 1 at 123.13s"),
        "{text}"
    );
    assert!(
        text.contains("lazy initialisation in step 1 (before the failure)"),
        "{text}"
    );
    assert!(
        text.contains("no optimizer step finished: step 1 ran"),
        "{text}"
    );
}

#[test]
fn a_failed_launch_drops_no_more_local_memory_than_was_held() {
    // The device fell 502 MiB across the failed launch; the account held
    // 148.5 MiB of initial reservation and 90 MiB of growth as local
    // memory: that is the most the dropped reservation can be, the rest is
    // said to be released from a part no record names.
    let (_, p) = rank("oom-triton-baseline");
    let end = p.phases.last().unwrap().gap_end.as_ref().unwrap();
    let part = |source: PartSource| {
        end.parts
            .iter()
            .find(|x| x.source == source)
            .map(|x| x.bytes as f64 / MIB as f64)
    };
    let dropped = part(PartSource::LocalMemoryDropped).unwrap();
    let other = part(PartSource::ReleasedAtFailure).unwrap();
    let held = part(PartSource::LocalMemoryGrowth).unwrap() + 148.5;
    assert!(
        (dropped + held).abs() < 0.1,
        "dropped {dropped} MiB, held {held} MiB"
    );
    assert!((dropped + other + 502.0).abs() < 0.1, "{dropped} + {other}");
}

#[test]
fn triton_oom_forensics_name_the_failed_local_memory_growth() {
    let (a, p) = rank("oom-triton-baseline");
    assert_eq!(a.exit_code, Some(1));
    let f = &p.forensics[0];
    assert!(
        matches!(&f.request, FailedRequest::LocalMemoryGrowth { kernel } if kernel.contains("rowwise_mix")),
        "{:?}",
        f.request
    );
    assert!(f.device_free_before.unwrap() < f.bytes);
    assert!(f.prewarms.contains(&"triton_autotune".to_string()));
    assert!(
        f.message
            .as_deref()
            .unwrap()
            .contains("Triton Error [CUDA]: out of memory")
    );
    let failed = p.local_memory.iter().find(|l| l.failed).unwrap();
    assert!(
        failed
            .autotune_config
            .as_deref()
            .unwrap()
            .starts_with("BLOCK: 16384")
    );

    // Would a prewarm have saved it? Local memory is never given back: the
    // autotune prewarm moves the 2.5 GiB growth to setup, where it still sits
    // under the step's peak, so the failure point stays 1.6 GiB short.
    let b = f.budget.as_ref().unwrap();
    assert_eq!(b.request, f.bytes);
    assert_eq!(
        b.shortfall,
        f.bytes as i64 - f.device_free_before.unwrap() as i64
    );
    assert!(b.shortfall > 1536 * MIB as i64);
    assert_eq!(
        b.device_used + f.device_free_before.unwrap(),
        b.device_total
    );
    let t = f
        .projections
        .iter()
        .find(|x| x.prewarm == "triton_autotune")
        .unwrap();
    assert!(t.moves_request);
    assert!(t.persistent_bytes >= f.bytes);
    assert_eq!(t.margin, -b.shortfall);
    // The fix that removes the demand: prune the spilling candidate.
    match &f.remedies[..] {
        [
            Remedy::PruneAutotuneConfig {
                kernel,
                config,
                local_bytes,
                registers,
                margin,
                ..
            },
        ] => {
            assert_eq!(kernel, "rowwise_mix");
            assert!(config.starts_with("BLOCK: 16384, num_warps: 1"));
            assert_eq!(*local_bytes, failed.after - failed.before);
            assert_eq!(*registers, 168);
            assert_eq!(*margin, f.device_free_before.unwrap() as i64);
        }
        other => panic!("{other:?}"),
    }
    let text = terminal_text(&fixture("oom-triton-baseline"));
    assert!(
        text.contains("triton_autotune: still short by 1.6 GiB"),
        "{text}"
    );
    assert!(text.contains("local memory is never given back"), "{text}");
    assert!(text.contains("the fix that removes the demand: prune the candidate BLOCK: 16384"));
}

#[test]
fn the_bundled_matrix_gives_the_verdicts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/h200-matrix");
    let run = load_run(&root).unwrap();
    let all = analyse_run(&run);
    let m = compare(run.meta.as_ref(), &all).unwrap();
    assert!(m.isolated);
    let v = |n: &str| m.verdicts.iter().find(|v| v.variant == n).unwrap();
    for name in ["cublas", "triton_autotune", "nccl_comm", "all"] {
        assert_eq!(v(name).class, VerdictClass::Works, "{name}");
        assert_eq!(v(name).confidence, Confidence::Measured, "{name}");
    }
    assert!(v("cublas").moved.bytes >= 128.0 * MIB as f64);
    assert_eq!(v("cublas").costs.held_extra, 0.0);
    assert!(v("triton_autotune").moved.seconds > 5.0);
    assert!(v("triton_autotune").costs.setup_s.unwrap().delta > 5.0);
    // The example's communicator prewarm also warms the default group, which
    // training never uses: it moves the training communicator's 558 MiB out
    // of step 1 and keeps one more communicator (+388 MiB of NCCL buffers)
    // at step-1 end. Kept < moved, so no net loss: it works, and the extra
    // communicator is its cost, by source.
    let nccl = v("nccl_comm");
    assert!(nccl.moved.bytes >= 550.0 * MIB as f64);
    // The charge is the total held at step-1 end (+390 MiB); the split names
    // the extra communicator's 388 MiB of NCCL buffers as the bulk of it.
    assert_eq!(nccl.costs.held_extra, 390.0 * MIB as f64);
    let split = nccl.costs.held_explained();
    assert_eq!(split[0].source, HeldSource::Library("nccl".into()));
    assert_eq!(split[0].delta, 388.0 * MIB as f64);
    let comms = nccl.costs.nccl_communicators.unwrap();
    assert_eq!((comms.baseline.median, comms.variant.median), (1.0, 2.0));
    assert_eq!(
        nccl.costs.step1_device_peak.unwrap().delta,
        390.0 * MIB as f64
    );
    assert!(
        !nccl
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::NetMemoryLoss { .. }))
    );
    assert_eq!(v("all").costs.held_extra, 390.0 * MIB as f64);
    // The interrupted attempt is excluded, and said so.
    let base = m.variants.iter().find(|x| x.name == "baseline").unwrap();
    assert_eq!((base.attempts.len(), base.expected_attempts), (2, 3));
    assert_eq!(base.excluded.len(), 1);
    assert_eq!(base.excluded[0].attempt, "3");
    assert_eq!(base.excluded[0].reasons, vec![Exclusion::Interrupted]);
    assert!(m.notes.contains(&MatrixNote::AttemptsMissing {
        variant: "cublas".into(),
        recorded: 2,
        expected: 3
    }));
    assert!(!m.notes.iter().any(
        |n| matches!(n, MatrixNote::AttemptsMissing { variant, .. } if variant == "baseline")
    ));
}

/// A damaged rank file excludes its attempt from the medians and verdicts,
/// and the matrix says which file and why.
#[test]
fn a_damaged_attempt_is_excluded_and_named() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/h200-matrix"),
        dir.path(),
    );
    let host = dir.path().join("cublas/2");
    let host = std::fs::read_dir(&host)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let events = std::fs::read_dir(&host)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.ends_with(".events") && n != "nvml.events"
        })
        .unwrap();
    let mut bytes = std::fs::read(&events).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&events, bytes).unwrap();
    let run = load_run(dir.path()).unwrap();
    let m = compare(run.meta.as_ref(), &analyse_run(&run)).unwrap();
    let cublas = m.variants.iter().find(|x| x.name == "cublas").unwrap();
    assert_eq!(cublas.attempts.len(), 1);
    assert_eq!(cublas.excluded.len(), 1);
    assert_eq!(cublas.excluded[0].attempt, "2");
    let Exclusion::Damaged { problems } = &cublas.excluded[0].reasons[0] else {
        panic!("{:?}", cublas.excluded)
    };
    assert!(problems.iter().all(|p| p.damaged));
    let text = terminal_text(dir.path());
    assert!(
        text.contains("excluded: cublas/2: damaged files:"),
        "{text}"
    );
    // One attempt left on that side: the verdict says its noise is modelled.
    let v = m.verdicts.iter().find(|v| v.variant == "cublas").unwrap();
    assert_eq!(v.confidence, Confidence::Modelled);
    assert_eq!(v.class, VerdictClass::Works);
}

#[test]
fn a_shared_cache_is_flagged_and_distorts_step_times() {
    let shared_run = load_run(&fixture("shared-cache")).unwrap();
    let shared = compare(shared_run.meta.as_ref(), &analyse_run(&shared_run)).unwrap();
    assert!(!shared.isolated);
    assert!(shared.notes.contains(&MatrixNote::CachesNotIsolated {
        cache: "shared".into()
    }));
    // Classes a cache changes are not judged on shared caches; cuBLAS and NCCL are.
    let class = |n: &str| {
        let v = shared.verdicts.iter().find(|v| v.variant == n).unwrap();
        (v.class, v.recommendation)
    };
    assert_eq!(
        class("triton_autotune"),
        (
            VerdictClass::Inconclusive,
            Some(Recommendation::IsolateCaches)
        )
    );
    assert_eq!(
        class("all"),
        (
            VerdictClass::Inconclusive,
            Some(Recommendation::IsolateCaches)
        )
    );
    assert_eq!(class("cublas"), (VerdictClass::Works, None));
    assert_eq!(class("nccl_comm"), (VerdictClass::Works, None));
    let cold_run =
        load_run(&Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/h200-matrix")).unwrap();
    let cold = compare(cold_run.meta.as_ref(), &analyse_run(&cold_run)).unwrap();
    let s1 = |m: &prewarm_doctor::analysis::matrix::MatrixAccount, n: &str| {
        m.variants
            .iter()
            .find(|v| v.name == n)
            .unwrap()
            .step1_s
            .unwrap()
            .median
    };
    // On the shared cache the baseline compiled rowwise_mix first, so the cuBLAS
    // variant's step 1 looks many seconds faster than it is in isolation.
    assert!(s1(&shared, "cublas") < 2.0 && s1(&cold, "cublas") > 5.0);
    let setup = |m: &prewarm_doctor::analysis::matrix::MatrixAccount| {
        m.verdicts
            .iter()
            .find(|v| v.variant == "triton_autotune")
            .unwrap()
            .costs
            .setup_s
            .unwrap()
            .delta
    };
    assert!(setup(&shared) < 1.0 && setup(&cold) > 5.0);
}

/// examples/shape_buckets.py on the H200: a Triton kernel autotuned per batch
/// bucket (1024 at step 1, 2048 at step 3, 4096 at step 5). The hand-written
/// prewarm that warms only the first bucket moves step 1's autotune exactly as
/// the complete one does, but leaves 2 keys tuned at steps 3 and 5 that the
/// baseline tunes there too: partial (R8 after step 1), never works.
#[test]
fn a_prewarm_that_warms_only_the_first_shape_bucket_is_partial() {
    let root = fixture("prescribe-shape-matrix");
    let run = load_run(&root).unwrap();
    let all = analyse_run(&run);
    let m = compare(run.meta.as_ref(), &all).unwrap();
    let v = |n: &str| m.verdicts.iter().find(|v| v.variant == n).unwrap();
    let first = v("first_bucket");
    assert_eq!(first.class, VerdictClass::Partial, "{first:#?}");
    let left: Vec<&Reason> = first
        .reasons
        .iter()
        .filter(|r| matches!(r, Reason::StillAfterStep1 { .. }))
        .collect();
    match left[..] {
        [
            Reason::StillAfterStep1 {
                class: EventClass::TritonAutotune,
                events,
                steps,
                ..
            },
        ] => {
            assert_eq!(events.variant.median, 2.0);
            assert_eq!(steps, &vec![3, 5]);
        }
        _ => panic!("{left:#?}"),
    }
    for name in ["all_buckets", "prescribed"] {
        assert_eq!(v(name).class, VerdictClass::Works, "{name}");
        assert!(
            !v(name)
                .reasons
                .iter()
                .any(|r| matches!(r, Reason::StillAfterStep1 { .. }))
        );
    }
    // The prescribed prewarm targets NCCL init too; this run creates no
    // communicator, so it is not named among what moved.
    let p = v("prescribed");
    assert!(p.targets.contains(&EventClass::NcclComm));
    assert!(!p.moved.classes.contains(&EventClass::NcclComm));
    assert!(p.moved.classes.contains(&EventClass::Cublas));
    assert!(p.moved.classes.contains(&EventClass::TritonAutotune));
    let text = terminal_text(&root);
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("PARTIAL: moved 90.0 MiB and 1.77 s of Triton autotune, local-memory growth, compile out of step 1, at a cost of setup")
            && flat.contains("(+0 B, within noise 16.0 MiB); 2 Triton autotune keys still first tuned at steps 3 and 5."),
        "{text}"
    );
    assert!(
        !flat.contains("NCCL communicator init out of step 1"),
        "{text}"
    );
}
