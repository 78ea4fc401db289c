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
