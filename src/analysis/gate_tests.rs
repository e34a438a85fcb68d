//! Unit tests of gate parsing and evaluation on synthetic summaries
//! (the real recordings are gated in tests/reports_and_gating.rs).

use super::*;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn summary(name: &str, prewarms: &[&str], peak: Option<f64>, oop: f64) -> VariantSummary {
    let stat = |v: f64| Stat::of(&[v]);
    VariantSummary {
        name: name.into(),
        prewarms: prewarms.iter().map(|p| p.to_string()).collect(),
        attempts: Vec::new(),
        excluded: Vec::new(),
        expected_attempts: 1,
        recorded_attempts: 1,
        failed_attempts: 0,
        step1_device_peak: peak.and_then(stat),
        step1_out_of_pool: stat(oop),
        step1_tightest_headroom: None,
        step1_s: stat(10.0),
        setup_s: stat(4.0),
    }
}

fn runs<'a>(new: &'a [VariantSummary], old: Option<&'a [VariantSummary]>) -> Runs<'a> {
    Runs {
        new,
        new_matrix: None,
        old,
        allow_missing: false,
    }
}

#[test]
fn parses_the_documented_forms() {
    let g = Gate::parse("step1_peak>+5%").unwrap();
    assert_eq!(
        (g.metric, g.op, g.limit.clone()),
        (
            Metric::Step1Peak,
            Op::Gt,
            Limit::Relative { fraction: 0.05 }
        )
    );
    assert!(g.needs_diff());
    let g = Gate::parse("step1_oop>0").unwrap();
    assert_eq!(
        g.limit,
        Limit::Absolute {
            value: 0.0,
            unit: UnitFamily::Plain
        }
    );
    let g = Gate::parse("cublas:verdict!=works").unwrap();
    assert_eq!(g.name.as_deref(), Some("cublas"));
    assert_eq!(g.op, Op::Ne);
    assert_eq!(
        Gate::parse("x:verdict==inconclusive").unwrap().limit,
        Limit::Verdict {
            class: VerdictClass::Inconclusive
        }
    );
    assert_eq!(
        Gate::parse("step1_time >= 1.5s").unwrap().limit,
        Limit::Absolute {
            value: 1.5,
            unit: UnitFamily::Seconds
        }
    );
    assert_eq!(
        Gate::parse("setup_time>+300ms").unwrap().limit,
        Limit::Change {
            value: 0.3,
            unit: UnitFamily::Seconds
        }
    );
    assert_eq!(
        Gate::parse("step1_headroom<-1GiB").unwrap().limit,
        Limit::Absolute {
            value: -GIB,
            unit: UnitFamily::Binary
        }
    );
}

#[test]
fn gb_is_decimal_and_gib_binary() {
    assert_eq!(
        Gate::parse("step1_peak>2GB").unwrap().limit,
        Limit::Absolute {
            value: 2e9,
            unit: UnitFamily::Decimal
        }
    );
    assert_eq!(
        Gate::parse("step1_peak>2GiB").unwrap().limit,
        Limit::Absolute {
            value: 2.0 * GIB,
            unit: UnitFamily::Binary
        }
    );
    assert_eq!(
        Gate::parse("step1_oop>512MB").unwrap().limit,
        Limit::Absolute {
            value: 512e6,
            unit: UnitFamily::Decimal
        }
    );
}

#[test]
fn bad_expressions_say_what_is_wrong() {
    assert!(matches!(Gate::parse("step1_peak"), Err(GateError::Form(_))));
    assert!(matches!(
        Gate::parse(":step1_peak>1"),
        Err(GateError::Form(_))
    ));
    assert!(matches!(
        Gate::parse("peak>1"),
        Err(GateError::Metric { .. })
    ));
    assert!(matches!(
        Gate::parse("step1_oop>lots"),
        Err(GateError::Value { .. })
    ));
    assert!(matches!(
        Gate::parse("verdict>works"),
        Err(GateError::Value { .. })
    ));
    let msg = Gate::parse("peak>1").unwrap_err().to_string();
    assert!(msg.contains("known: step1_peak"));
    // A unit of the wrong kind is not silently read as a number.
    let msg = Gate::parse("step1_peak>1.5s").unwrap_err().to_string();
    assert!(msg.contains("a byte limit takes"), "{msg}");
    assert!(Gate::parse("step1_time>2GiB").is_err());
    assert!(Gate::parse("failed>1s").is_err());
}

#[test]
fn an_unknown_variant_or_prewarm_is_an_error_listing_the_names() {
    let new = [
        summary("baseline", &[], Some(GIB), 0.0),
        summary("cublas", &["cublas"], Some(GIB), 0.0),
    ];
    let g = Gate::parse("cublsa:step1_peak>1GiB").unwrap();
    let err = evaluate(&[g], &runs(&new, None)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("no variant or prewarm named 'cublsa' in this run (variants: baseline, cublas; prewarms: cublas)"),
        "{msg}"
    );
    // A prewarm name selects the variants that enable it.
    let g = Gate::parse("cublas:step1_peak>2GiB").unwrap();
    let r = evaluate(&[g], &runs(&new, None)).unwrap();
    assert_eq!(r.len(), 1);
    assert!(!r[0].failed);
}

#[test]
fn verdict_gates_need_verdicts() {
    let new = [summary("baseline", &[], Some(GIB), 0.0)];
    let g = Gate::parse("verdict==regression").unwrap();
    assert!(matches!(
        evaluate(&[g], &runs(&new, None)),
        Err(GateError::NoVerdicts(_))
    ));
}

#[test]
fn absolute_limits_compare_medians() {
    let new = [summary("v", &[], Some(2.0 * GIB), 0.0)];
    let r = evaluate(
        &[Gate::parse("step1_peak>1.9GiB").unwrap()],
        &runs(&new, None),
    )
    .unwrap();
    assert!(r[0].failed);
    assert_eq!(r[0].observed, Observed::Value { value: 2.0 * GIB });
    let r = evaluate(
        &[Gate::parse("step1_peak>2.2GB").unwrap()],
        &runs(&new, None),
    )
    .unwrap();
    assert!(!r[0].failed, "2 GiB = 2.147 GB");
    let r = evaluate(
        &[Gate::parse("step1_peak>2.1GB").unwrap()],
        &runs(&new, None),
    )
    .unwrap();
    assert!(r[0].failed);
}

#[test]
fn an_unmeasured_metric_fails_instead_of_passing() {
    let new = [summary("v", &[], None, 0.0)];
    let r = evaluate(
        &[Gate::parse("step1_peak>1GiB").unwrap()],
        &runs(&new, None),
    )
    .unwrap();
    assert!(r[0].failed);
    assert_eq!(r[0].observed, Observed::NotMeasured { side: RunSide::New });
    // No out-of-pool request in step 1: the headroom is the whole device, not missing.
    let r = evaluate(
        &[Gate::parse("step1_headroom<1GiB").unwrap()],
        &runs(&new, None),
    )
    .unwrap();
    assert!(!r[0].failed);
}

#[test]
fn a_variant_on_one_side_of_a_diff_fails_unless_allowed() {
    let old = [summary("baseline", &[], Some(GIB), 0.0)];
    let new = [
        summary("baseline", &[], Some(GIB), 0.0),
        summary("cublas", &["cublas"], Some(GIB), 0.0),
    ];
    let g = [Gate::parse("step1_peak>+5%").unwrap()];
    let r = evaluate(&g, &runs(&new, Some(&old))).unwrap();
    assert_eq!(r.len(), 2);
    assert!(!r[0].failed);
    assert!(r[1].failed);
    assert_eq!(
        r[1].observed,
        Observed::OnlyIn {
            side: RunSide::New,
            allowed: false
        }
    );
    let mut allowed = runs(&new, Some(&old));
    allowed.allow_missing = true;
    let r = evaluate(&g, &allowed).unwrap();
    assert!(!r[1].failed);
    // Present in the old run only: reported the same way.
    let r = evaluate(&g, &runs(&old, Some(&new))).unwrap();
    assert_eq!(
        r[1].observed,
        Observed::OnlyIn {
            side: RunSide::Old,
            allowed: false
        }
    );
    assert!(r[1].failed);
}

#[test]
fn relative_and_change_limits() {
    let old = [summary("v", &[], Some(GIB), 0.0)];
    let new = [summary("v", &[], Some(1.06 * GIB), 64.0 * 1048576.0)];
    let r = evaluate(
        &[Gate::parse("step1_peak>+5%").unwrap()],
        &runs(&new, Some(&old)),
    )
    .unwrap();
    assert!(r[0].failed);
    let r = evaluate(
        &[Gate::parse("step1_peak>+7%").unwrap()],
        &runs(&new, Some(&old)),
    )
    .unwrap();
    assert!(!r[0].failed);
    let r = evaluate(
        &[Gate::parse("step1_oop>+63MiB").unwrap()],
        &runs(&new, Some(&old)),
    )
    .unwrap();
    assert!(r[0].failed);
    let r = evaluate(
        &[Gate::parse("step1_oop>+5%").unwrap()],
        &runs(&new, Some(&old)),
    )
    .unwrap();
    assert!(
        r[0].failed,
        "from nothing to something is an infinite increase"
    );
    assert_eq!(relative_change(0.0, 0.0), 0.0);
}

#[test]
fn a_unitless_change_of_bytes_or_seconds_is_refused_with_the_fix() {
    let e = Gate::parse("step1_peak>+5").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, GateError::UnitlessChange { .. }), "{e:?}");
    assert!(msg.contains("'+5%'") && msg.contains("'+5MiB'"), "{msg}");
    let msg = Gate::parse("setup_time>+2").unwrap_err().to_string();
    assert!(msg.contains("'+2s'"), "{msg}");
    // A plain absolute figure, a zero change and a count stay accepted.
    assert!(Gate::parse("step1_oop>0").is_ok());
    assert!(Gate::parse("step1_oop>+0").is_ok());
    assert!(Gate::parse("failed>+1").is_ok());
    assert!(Gate::parse("step1_headroom<-5").is_ok());
}

#[test]
fn beyond_noise_qualifies_changes_only() {
    let g = Gate::parse("step1_time>+10% beyond noise").unwrap();
    assert!(g.beyond_noise);
    assert_eq!(g.limit, Limit::Relative { fraction: 0.1 });
    assert!(
        Gate::parse("setup_time > +0.5s Beyond Noise")
            .unwrap()
            .beyond_noise
    );
    assert!(!Gate::parse("step1_time>+10%").unwrap().beyond_noise);
    assert!(matches!(
        Gate::parse("step1_time>2s beyond noise"),
        Err(GateError::NoiseNeedsChange(_))
    ));
    assert!(Gate::parse("step1_time>beyond noise").is_err());
}

#[test]
fn a_beyond_noise_gate_passes_a_change_within_the_noise_of_both_runs() {
    let with_times = |name: &str, times: &[f64]| VariantSummary {
        step1_s: Stat::of(times),
        ..summary(name, &[], Some(GIB), 0.0)
    };
    let old = [with_times("v", &[8.0, 10.0, 12.0])];
    let new = [with_times("v", &[11.0, 13.0, 16.0])];
    let gates = [
        Gate::parse("step1_time>+10%").unwrap(),
        Gate::parse("step1_time>+10% beyond noise").unwrap(),
    ];
    let r = evaluate(&gates, &runs(&new, Some(&old))).unwrap();
    assert!(r[0].failed && r[0].holds);
    assert!(!r[1].failed && r[1].holds);
    assert!(r[1].noise.is_some_and(|n| n.within), "{:?}", r[1].noise);
}
