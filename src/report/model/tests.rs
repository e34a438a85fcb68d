use super::*;

#[test]
fn quantiles_use_the_nearest_rank() {
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(quantile(&v, 0.5), 50.0);
    assert_eq!(quantile(&v, 0.99), 99.0);
    assert_eq!(quantile(&v, 0.0), 1.0);
    assert_eq!(quantile(&[7.0], 0.9), 7.0);
}

#[test]
fn costs_are_setup_and_held_memory_never_step_one_context() {
    let c = Costs {
        setup_s: Some(7.85),
        setup_within_noise: false,
        held_extra_bytes: 388.0 * 1024.0 * 1024.0,
        held_known: true,
        step1_peak_bytes: Some(390.0 * 1024.0 * 1024.0),
        step1_s: Some(-9.6),
    };
    assert_eq!(
        costs_text(&c),
        "setup +7.85 s, +388.0 MiB held at step-1 end that the baseline does not hold"
    );
    // Never "no extra memory" where the memory held is not known.
    assert_eq!(
        costs_text(&Costs::default()),
        "memory held at step-1 end unknown"
    );
    let known = Costs {
        held_known: true,
        ..Costs::default()
    };
    assert_eq!(costs_text(&known), "no extra memory held at step-1 end");
    // A setup change within the noise is stated as such, never as a cost.
    let noisy = Costs {
        setup_s: Some(-0.5333),
        setup_within_noise: true,
        held_known: true,
        ..Costs::default()
    };
    assert_eq!(
        costs_text(&noisy),
        "setup -533.3 ms (within noise), no extra memory held at step-1 end"
    );
}
