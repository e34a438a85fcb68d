//! The account, exposure, late-warmup list, forensics and verdicts asserted on
//! real recordings from an H200 (tests/fixtures/h200/README.md says how each
//! was made).

use prewarm_doctor::analysis::matrix::{Exclusion, MatrixNote, compare};
use prewarm_doctor::analysis::model::ProcessAccount;
use prewarm_doctor::analysis::phases::Phase;
use prewarm_doctor::analysis::verdict::{Confidence, Reason, Recommendation, VerdictClass};
use prewarm_doctor::analysis::verdict_costs::HeldSource;
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

fn phase(p: &ProcessAccount, ph: Phase) -> &prewarm_doctor::analysis::model::PhaseAccount {
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

#[test]
fn every_phase_end_is_accounted_within_the_target() {
    for name in [
        "examples-cublas-baseline",
        "examples-cublas-prewarm",
        "examples-triton-baseline",
        "examples-triton-prewarm",
        "examples-nccl-baseline",
        "examples-nccl-prewarm",
        "oom-nccl-baseline",
        "oom-nccl-prewarm",
        "oom-triton-baseline",
    ] {
        let (_, p) = rank(name);
        for ph in &p.phases {
            let g = ph
                .gap_end
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: no gap at end of {:?}", ph.phase));
            let limit = (g.out_of_pool as f64 * 0.02).max(64.0 * MIB as f64);
            assert!(
                (g.unexplained.abs() as f64) <= limit,
                "{name} {:?}: unexplained {} of {}",
                ph.phase,
                g.unexplained,
                g.out_of_pool
            );
        }
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
        let tolerance = (theirs * 0.02).max(16.0 * MIB as f64);
        assert!(
            (ours - theirs).abs() <= tolerance,
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
            .any(|w| w.class == EventClass::Cublas)
    );
    let (_, pre) = rank("examples-cublas-prewarm");
    assert_eq!(source_bytes(&pre, Phase::Step1, "cublas"), 0);
    assert!(source_bytes(&pre, Phase::Setup, "cublas") > 128 * MIB);
    assert!(
        !pre.late_warmups
            .iter()
            .any(|w| w.class == EventClass::Cublas)
    );
    assert!(pre.steps.step1_s.unwrap() < base.steps.step1_s.unwrap());
    assert_eq!(base.steps.rule, "first-forward-after-zero-grad");
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
    assert!(
        base.late_warmups
            .iter()
            .any(|w| w.class == EventClass::TritonAutotune && w.what.contains("rowwise_mix"))
    );

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
    assert!(c.bytes >= 388 * MIB && c.bytes <= 392 * MIB, "{}", c.bytes);
    assert!(
        c.inferred_bytes > 100 * MIB,
        "NCCL loads its kernels without allocation calls: {}",
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
    assert!(
        f.prewarms.contains(&"comm_groups".to_string())
            && f.prewarms.contains(&"nccl_comm".to_string())
    );
    assert!(f.message.as_deref().unwrap().contains("CUDA out of memory"));
    // With the communicator prewarmed, the same run survives.
    let (a2, p2) = rank("oom-nccl-prewarm");
    assert_eq!(a2.exit_code, Some(0));
    assert!(p2.forensics.is_empty());
}

#[test]
fn triton_oom_forensics_name_the_failed_local_memory_growth() {
    let (a, p) = rank("oom-triton-baseline");
    assert_eq!(a.exit_code, Some(1));
    let f = &p.forensics[0];
    assert!(
        f.request.contains("local-memory growth") && f.request.contains("rowwise_mix"),
        "{}",
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
    let up = nccl.costs.held_increases();
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].source, HeldSource::Library("nccl".into()));
    assert_eq!(up[0].change.delta, 388.0 * MIB as f64);
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
    assert_eq!(v("all").costs.held_extra, 388.0 * MIB as f64);
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
    let text = prewarm_doctor::report::matrix::render_matrix(&m);
    assert!(
        text.contains("excluded: cublas/2: damaged files:"),
        "{text}"
    );
    // One attempt left on that side: the verdict says its noise is modelled.
    let v = m.verdicts.iter().find(|v| v.variant == "cublas").unwrap();
    assert_eq!(v.confidence, Confidence::Modelled);
    assert_eq!(v.class, VerdictClass::Works);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
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
