//! The report model on real H200 recordings: every variant has a timeline
//! with the events the account found, bounded in size, and the at-scale view
//! (worst ranks + distribution) picks the right ranks.

use prewarm_doctor::analysis::analyse_run;
use prewarm_doctor::analysis::timeline::{MAX_POINTS, MarkerKind};
use prewarm_doctor::load::load_run;
use prewarm_doctor::pipeline::Analysed;
use prewarm_doctor::report::model::{Figure, ReportModel, RunInfo};
use std::path::Path;

fn model(rel: &str) -> ReportModel {
    Analysed::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap()
        .model_named(rel)
}

#[test]
fn the_bundled_matrix_has_a_timeline_per_variant_with_its_events() {
    let m = model("reports/h200-matrix");
    assert_eq!(
        m.variants(),
        ["baseline", "cublas", "triton_autotune", "nccl_comm", "all"]
    );
    assert_eq!(m.headline.len(), 4, "one sentence per prewarm");
    assert!(
        m.headline[0].text.starts_with("cublas ("),
        "{}",
        m.headline[0].text
    );
    for v in m.variants() {
        let (a, r) = m.representative(v).unwrap();
        assert!(!a.interrupted && !a.warmup, "{v}");
        let t = &r.timeline;
        assert!(
            !t.device_used.is_empty() && !t.pool_reserved.is_empty(),
            "{v}"
        );
        assert!(t.device_used.len() <= MAX_POINTS);
        // The stacked layers never exceed what the device shows by much.
        assert!(
            t.phase(prewarm_doctor::analysis::phases::Phase::Step1)
                .is_some()
        );
        // Series are in time order and inside the process's life.
        for s in [&t.device_used, &t.pool_reserved, &t.local_memory] {
            assert!(s.windows(2).all(|w| w[0].0 <= w[1].0), "{v}");
            assert!(s.iter().all(|p| p.0 >= 0.0 && p.0 <= t.end_s + 1e-9), "{v}");
        }
    }
    // The baseline's step 1 holds every lazy-init class the example exercises.
    let (_, base) = m.representative("baseline").unwrap();
    let kinds: Vec<MarkerKind> = base.timeline.markers.iter().map(|m| m.kind).collect();
    for k in [
        MarkerKind::Allocation,
        MarkerKind::LocalMemory,
        MarkerKind::NcclComm,
        MarkerKind::Autotune,
        MarkerKind::Compile,
    ] {
        assert!(kinds.contains(&k), "baseline timeline lacks {k:?}");
    }
    let spill = base
        .timeline
        .markers
        .iter()
        .find(|m| m.kind == MarkerKind::LocalMemory && m.config.is_some())
        .expect("a local-memory growth with its autotune candidate");
    assert!(spill.what.contains("rowwise_mix"));
    let out_of_pool: Vec<&str> = base
        .timeline
        .out_of_pool
        .iter()
        .map(|s| s.source.as_str())
        .collect();
    assert!(out_of_pool.contains(&"nccl") && out_of_pool.contains(&"cublas"));
    // Everything is there, and the JSON account of it still small.
    let json =
        prewarm_doctor::report::renderer::render_to_vec(&prewarm_doctor::report::json::Json, &m)
            .unwrap();
    assert!(json.len() < 4 << 20, "{} bytes", json.len());
}

#[test]
fn a_single_run_gets_a_sentence_per_attempt_and_its_oom() {
    let m = model("tests/fixtures/h200/oom-triton-baseline");
    assert!(m.matrix.is_none());
    assert_eq!(m.headline.len(), 1);
    assert!(
        m.headline[0].text.contains("ran out of memory"),
        "{}",
        m.headline[0].text
    );
    assert!(!m.forensics().is_empty());
    let (_, r) = m.representative(m.variants()[0]).unwrap();
    assert!(r.timeline.markers.iter().any(|m| m.kind == MarkerKind::Oom));
}

#[test]
fn many_ranks_show_the_worst_and_the_distribution() {
    let rel = "tests/fixtures/h200/multinode-fsdp2";
    let run = load_run(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
    let mut attempts = analyse_run(&run);
    attempts.truncate(1);
    let template = attempts[0].processes[0].clone();
    // 300 copies of a real rank; rank i's step-1 peak grows with i, and rank
    // 7 has the slowest step 1.
    attempts[0].processes = (0..300u32)
        .map(|i| {
            let mut p = template.clone();
            p.rank = Some(i);
            for ph in p.phases.iter_mut() {
                if ph.phase == prewarm_doctor::analysis::phases::Phase::Step1 {
                    ph.device_used_peak = Some((1u64 << 30) + i as u64 * (1 << 20));
                }
            }
            p.steps.step1_s = Some(if i == 7 { 99.0 } else { 1.0 + i as f64 * 1e-3 });
            p
        })
        .collect();
    let m = ReportModel::build(RunInfo::from_run(rel, &run), &attempts, None);
    let a = &m.attempts[0];
    assert_eq!(a.ranks.len(), 300, "the model keeps every rank");
    assert!(a.at_scale());
    let peak = a
        .distribution
        .iter()
        .find(|d| d.figure == Figure::Step1Peak)
        .unwrap();
    assert_eq!(peak.n, 300);
    assert_eq!(peak.max, ((1u64 << 30) + 299 * (1 << 20)) as f64);
    assert_eq!(peak.p50, ((1u64 << 30) + 149 * (1 << 20)) as f64);
    assert_eq!(a.ranks[peak.worst[0]].rank, Some(299));
    let shown: Vec<Option<u32>> = a.shown_ranks(16).iter().map(|r| r.rank).collect();
    assert!(shown.len() <= 16);
    assert!(
        shown.contains(&Some(299)) && shown.contains(&Some(7)),
        "{shown:?}"
    );
    assert!(shown.windows(2).all(|w| w[0] < w[1]), "rank order");
    assert_eq!(a.worst_rank().unwrap().rank, Some(299));
}
