//! Distribution shapes the simulator accepts for think and service times (paper 001 uses
//! exponential in its model and lognormal in WAGON; "given" service times are replayed from
//! measured samples), sampled with rand_distr from one seeded generator.

use rand::rngs::Xoshiro256PlusPlus;
use rand::RngExt;
use rand_distr::{Distribution, Exp, LogNormal, Normal};
use serde::{Deserialize, Serialize};

/// The simulator's generator: small, fast and reproducible from a u64 seed.
pub type SimRng = Xoshiro256PlusPlus;

/// A positive random duration (seconds) around a mean the caller supplies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Shape {
    Exponential,
    /// Lognormal with this coefficient of variation (WAGON's think time: cv 1).
    Lognormal {
        cv: f64,
    },
    Deterministic,
    /// Samples replayed uniformly at random, rescaled to the requested mean.
    Empirical {
        samples: Vec<f64>,
    },
}

impl Shape {
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Shape::Lognormal { cv } if cv.is_nan() || *cv <= 0.0 => {
                Err(format!("lognormal cv {cv} <= 0"))
            }
            Shape::Empirical { samples }
                if samples.is_empty() || samples.iter().any(|s| *s < 0.0) =>
            {
                Err("empirical samples must be non-empty and non-negative".into())
            }
            _ => Ok(()),
        }
    }

    /// One sample with the given mean.
    pub fn sample(&self, mean: f64, rng: &mut SimRng) -> f64 {
        if mean <= 0.0 {
            return 0.0;
        }
        match self {
            Shape::Exponential => Exp::new(1.0 / mean).map(|d| d.sample(rng)).unwrap_or(mean),
            Shape::Lognormal { cv } => LogNormal::from_mean_cv(mean, *cv)
                .map(|d| d.sample(rng))
                .unwrap_or(mean),
            Shape::Deterministic => mean,
            Shape::Empirical { samples } => {
                let avg = samples.iter().sum::<f64>() / samples.len() as f64;
                let s = samples[rng.random_range(0..samples.len())];
                if avg > 0.0 {
                    s * mean / avg
                } else {
                    0.0
                }
            }
        }
    }
}

/// Burst length (objects per page): Gaussian rounded, at least 1 (paper 001 Table II).
pub fn burst_length(mean: f64, sd: f64, rng: &mut SimRng) -> u32 {
    let x = if sd > 0.0 {
        Normal::new(mean, sd).map(|d| d.sample(rng)).unwrap_or(mean)
    } else {
        mean
    };
    x.round().max(1.0) as u32
}

/// A standard normal draw (measurement noise).
pub fn std_normal(rng: &mut SimRng) -> f64 {
    rand_distr::StandardNormal.sample(rng)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng as _, SeedableRng};

    /// The simulator's runs repeat only if a seed gives the same draws on every machine and
    /// build: pinned here, so that an upgrade of rand or rand_distr that changes them fails.
    /// Integers exactly; real numbers to 12 digits (`exp`/`ln` come from the C library).
    #[test]
    fn a_seed_pins_the_sequence() {
        let mut r = SimRng::seed_from_u64(42);
        let raw: Vec<u64> = (0..2).map(|_| r.next_u64()).collect();
        // SplitMix64-seeded xoshiro256++, as crates/load's generator for the same seed.
        assert_eq!(raw, [15021278609987233951, 5881210131331364753]);
        let mut r = SimRng::seed_from_u64(7);
        let got = [
            Shape::Exponential.sample(0.5, &mut r),
            Shape::Lognormal { cv: 1.0 }.sample(30.0, &mut r),
            std_normal(&mut r),
            Shape::Empirical {
                samples: vec![1.0, 2.0, 3.0],
            }
            .sample(2.0, &mut r),
        ];
        // rand 0.10.4 / rand_distr 0.6.0.
        let want = [
            0.07625621098775046,
            5.0996069846333665,
            0.7099959263519217,
            2.0,
        ];
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs(),
                "got {got:?}, want {want:?}"
            );
        }
        let bursts: Vec<u32> = (0..8).map(|_| burst_length(7.0, 3.0, &mut r)).collect();
        assert_eq!(bursts, [11, 7, 9, 5, 9, 5, 2, 4]);
    }
}
