//! Median and spread over repeats: the statistics the matrix, the noise model
//! and the verdicts build on (below all three, so none imports another for it).

use serde::Serialize;

/// Median and spread of one figure over repeats.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: u32,
}

impl Stat {
    /// From values (None when empty).
    pub fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
            n: n as u32,
        })
    }
    /// max − min.
    pub fn spread(&self) -> f64 {
        self.max - self.min
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats() {
        let s = Stat::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Stat::of(&[1.0, 2.0]).unwrap().median, 1.5);
        assert!(Stat::of(&[]).is_none());
    }
}
