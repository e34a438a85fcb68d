//! When a change between two variants is real: against the measured spread of
//! repeats, or with one attempt against a documented per-quantity noise model
//! (docs/verdicts.md §3). Pure numbers; the verdict rules build on these.

use super::stats::Stat;
use serde::Serialize;

const MIB: f64 = 1024.0 * 1024.0;

/// What kind of figure a change is about; each has its own noise model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Bytes from allocation records: repeat to the byte between runs.
    Bytes,
    /// Bytes inferred from the device timeline (NCCL init without allocation calls).
    InferredBytes,
    /// Device memory a process holds, from the device's own readings (NVML,
    /// cuMemGetInfo): sampled, so a few device pages either way between runs
    /// holding the same bytes.
    DeviceBytes,
    /// Wall time: cold compile and autotune vary by tens of percent.
    Seconds,
    /// Event counts (communicators, compiles, first launches).
    Events,
}

/// The one-attempt noise model of a quantity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Model {
    /// Changes at or below this are noise whatever the size.
    pub floor: f64,
    /// Noise as a fraction of the larger median.
    pub relative: f64,
    /// Beyond `grey_factor` x the threshold a change counts; between the
    /// threshold and that, the model cannot tell (1.0: no grey zone).
    pub grey_factor: f64,
}

impl Quantity {
    /// The documented model (docs/verdicts.md §3).
    pub fn model(self) -> Model {
        match self {
            Quantity::Bytes => Model {
                floor: MIB,
                relative: 0.02,
                grey_factor: 1.0,
            },
            Quantity::InferredBytes => Model {
                floor: 32.0 * MIB,
                relative: 0.20,
                grey_factor: 1.0,
            },
            Quantity::DeviceBytes => Model {
                floor: 16.0 * MIB,
                relative: 0.02,
                grey_factor: 1.0,
            },
            Quantity::Seconds => Model {
                floor: 0.1,
                relative: 0.30,
                grey_factor: 2.0,
            },
            Quantity::Events => Model {
                floor: 0.5,
                relative: 0.0,
                grey_factor: 1.0,
            },
        }
    }
}

/// Where a noise threshold came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Repeats on both sides: their spread.
    Measured,
    /// One attempt on a side: the quantity's model.
    Model,
}

/// How a change compares with its noise threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The variant has less, beyond noise.
    Down,
    /// The variant has more, beyond noise.
    Up,
    /// Within noise.
    Within,
    /// One attempt, and the change lies in the model's grey zone.
    Unsure,
}

/// Baseline vs variant for one quantity, judged against noise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    pub quantity: Quantity,
    pub baseline: Stat,
    pub variant: Stat,
    /// Variant median minus baseline median.
    pub delta: f64,
    /// The threshold |delta| was compared with.
    pub noise: f64,
    pub basis: Basis,
    pub outcome: Outcome,
}

impl Change {
    /// Whether the variant has less, beyond noise.
    pub fn is_down(&self) -> bool {
        self.outcome == Outcome::Down
    }
    /// Whether the variant has more, beyond noise.
    pub fn is_up(&self) -> bool {
        self.outcome == Outcome::Up
    }
    /// What |delta| had to exceed to count as a change: the threshold, and
    /// with one attempt the top of the model's grey zone above it.
    pub fn beyond(&self) -> f64 {
        match self.basis {
            Basis::Measured => self.noise,
            Basis::Model => self.noise * self.quantity.model().grey_factor,
        }
    }
}

/// Judges `variant` against `baseline` (docs/verdicts.md §3).
pub fn assess(quantity: Quantity, baseline: Stat, variant: Stat) -> Change {
    let delta = variant.median - baseline.median;
    let model = quantity.model();
    let measured = baseline.n >= 2 && variant.n >= 2;
    let (noise, grey) = if measured {
        (
            measured_threshold(baseline, variant, delta).max(model.floor),
            1.0,
        )
    } else {
        let larger = baseline.median.abs().max(variant.median.abs());
        (model.floor.max(model.relative * larger), model.grey_factor)
    };
    let size = delta.abs();
    let outcome = if size <= noise {
        Outcome::Within
    } else if size <= noise * grey {
        Outcome::Unsure
    } else if delta < 0.0 {
        Outcome::Down
    } else {
        Outcome::Up
    };
    Change {
        quantity,
        baseline,
        variant,
        delta,
        noise,
        basis: if measured {
            Basis::Measured
        } else {
            Basis::Model
        },
        outcome,
    }
}

/// Attempts on each side from which the facing half-spreads are trusted.
pub const FACING_SPREADS_FROM: u32 = 3;

/// The measured threshold (docs/verdicts.md §3): with two attempts on a side,
/// both whole spreads; with three or more on both, the half-spreads that face
/// each other (the medians must separate by more than that for the ranges of
/// the repeats not to overlap).
fn measured_threshold(baseline: Stat, variant: Stat, delta: f64) -> f64 {
    if baseline.n < FACING_SPREADS_FROM || variant.n < FACING_SPREADS_FROM {
        return baseline.spread() + variant.spread();
    }
    if delta < 0.0 {
        (baseline.median - baseline.min) + (variant.max - variant.median)
    } else {
        (baseline.max - baseline.median) + (variant.median - variant.min)
    }
}

/// A figure of zero on as many attempts as `like` (the "nothing" side).
pub fn zero_like(like: Stat) -> Stat {
    Stat {
        median: 0.0,
        min: 0.0,
        max: 0.0,
        n: like.n,
    }
}

/// Whether a side has something of this quantity, beyond noise from zero.
pub fn present(quantity: Quantity, side: Stat) -> bool {
    assess(quantity, zero_like(side), side).is_up()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: f64) -> Stat {
        Stat::of(&[v]).unwrap()
    }

    fn many(v: &[f64]) -> Stat {
        Stat::of(v).unwrap()
    }

    /// Synthetic repeats (the H200 NCCL example's shape: 115-405 ms of
    /// communicator init in the baseline's step 1, none with the prewarm).
    #[test]
    fn three_repeats_judge_by_the_facing_half_spreads_two_by_whole_spreads() {
        let base = many(&[0.115, 0.260, 0.405]);
        let none = many(&[0.0, 0.0, 0.0]);
        let c = assess(Quantity::Seconds, base, none);
        assert_eq!(c.outcome, Outcome::Down);
        assert!((c.noise - 0.145).abs() < 1e-9);
        // Ranges that touch are within noise.
        let c = assess(Quantity::Seconds, base, many(&[0.115, 0.115, 0.120]));
        assert_eq!(c.outcome, Outcome::Within);
        // With two attempts a side, the whole spreads still add up.
        let c = assess(Quantity::Seconds, many(&[0.115, 0.405]), many(&[0.0, 0.0]));
        assert_eq!(c.outcome, Outcome::Within);
        assert!((c.noise - 0.290).abs() < 1e-9);
    }

    #[test]
    fn bytes_with_one_attempt_use_the_model_at_its_edge() {
        // Floor: 1 MiB.
        let c = assess(Quantity::Bytes, one(10.0 * MIB), one(11.0 * MIB));
        assert_eq!((c.outcome, c.basis), (Outcome::Within, Basis::Model));
        let c = assess(Quantity::Bytes, one(10.0 * MIB), one(11.0 * MIB + 1.0));
        assert_eq!(c.outcome, Outcome::Up);
        // 2 % of the larger median: 2 GiB vs 2 GiB + 40 MiB is within, + 41 MiB is not.
        let g = 2048.0 * MIB;
        let t = 0.02 * (g + 41.0 * MIB);
        assert!(t > 41.0 * MIB);
        assert_eq!(
            assess(Quantity::Bytes, one(g), one(g + 41.0 * MIB)).outcome,
            Outcome::Within
        );
        assert_eq!(
            assess(Quantity::Bytes, one(g), one(g + 42.0 * MIB)).outcome,
            Outcome::Up
        );
        assert_eq!(
            assess(Quantity::Bytes, one(128.3 * MIB), one(0.0)).outcome,
            Outcome::Down
        );
    }

    #[test]
    fn seconds_with_one_attempt_have_a_grey_zone() {
        // T = 30 % of 10 s = 3 s; beyond 6 s counts, 3..6 s is unsure.
        let c = assess(Quantity::Seconds, one(10.0), one(7.0));
        assert_eq!(c.outcome, Outcome::Within);
        assert!((c.noise - 3.0).abs() < 1e-9);
        // What a change must exceed is the grey zone's top, as reports say.
        assert!((c.beyond() - 6.0).abs() < 1e-9);
        assert_eq!(
            assess(Quantity::Seconds, one(10.0), one(6.9)).outcome,
            Outcome::Unsure
        );
        assert_eq!(
            assess(Quantity::Seconds, one(10.0), one(4.0)).outcome,
            Outcome::Unsure
        );
        assert_eq!(
            assess(Quantity::Seconds, one(10.0), one(3.9)).outcome,
            Outcome::Down
        );
        // The 100 ms floor: 0.15 s vs 0 is unsure, 0.21 s counts.
        assert_eq!(
            assess(Quantity::Seconds, one(0.0), one(0.1)).outcome,
            Outcome::Within
        );
        assert_eq!(
            assess(Quantity::Seconds, one(0.0), one(0.15)).outcome,
            Outcome::Unsure
        );
        assert_eq!(
            assess(Quantity::Seconds, one(0.0), one(0.21)).outcome,
            Outcome::Up
        );
    }

    #[test]
    fn repeats_use_their_spread_and_no_grey_zone() {
        let b = many(&[117.0, 125.0, 138.0]);
        let v = many(&[120.0, 128.0, 150.0]);
        let c = assess(Quantity::Seconds, b, v);
        assert_eq!(c.basis, Basis::Measured);
        // Three a side: the facing half-spreads, (138 - 125) + (128 - 120).
        assert!((c.noise - 21.0).abs() < 1e-9);
        assert_eq!(c.beyond(), c.noise);
        assert_eq!(c.outcome, Outcome::Within);
        let c = assess(Quantity::Seconds, many(&[10.0, 10.2]), many(&[4.0, 4.1]));
        assert_eq!(c.outcome, Outcome::Down);
        // Exactly at the threshold is within.
        let c = assess(Quantity::Seconds, many(&[1.0, 2.0]), many(&[3.0, 4.0]));
        assert_eq!((c.noise, c.delta, c.outcome), (2.0, 2.0, Outcome::Within));
        // Identical repeats still respect the floor.
        let c = assess(
            Quantity::Bytes,
            many(&[5.0, 5.0]),
            many(&[5.0 + MIB, 5.0 + MIB]),
        );
        assert_eq!(c.outcome, Outcome::Within);
    }

    #[test]
    fn inferred_bytes_and_events() {
        let c = assess(Quantity::InferredBytes, one(168.0 * MIB), one(173.9 * MIB));
        assert_eq!(c.outcome, Outcome::Within);
        assert_eq!(
            assess(Quantity::Events, one(1.0), one(0.0)).outcome,
            Outcome::Down
        );
        assert_eq!(
            assess(Quantity::Events, one(3.0), one(3.0)).outcome,
            Outcome::Within
        );
    }

    #[test]
    fn presence_is_judged_against_zero() {
        assert!(present(Quantity::Bytes, one(2.0 * MIB)));
        assert!(!present(Quantity::Bytes, one(MIB)));
        assert!(present(Quantity::Seconds, one(0.25)));
        assert!(!present(Quantity::Seconds, one(0.15)));
        assert!(!present(Quantity::Seconds, many(&[0.0, 0.5])));
        assert!(present(Quantity::Seconds, many(&[0.3, 0.5])));
    }
}
