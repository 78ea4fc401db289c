//! The WAGON session model of paper 001 (Table II): sessions arrive with exponential
//! inter-arrival times, a session is a number of clicks (lognormal), each click is a burst of
//! requests on one keep-alive connection (gaussian burst length), and clicks are separated by
//! think times (lognormal). This module only samples; the worker turns samples into traffic.

use crate::rng::{lognormal, WorkloadRng};
use rand_distr::{Distribution, Exp, LogNormal, Normal};

/// Parameters of the session workload. Times are in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct WagonParams {
    /// Mean of the exponential time between session arrivals (Table II: 0.1 s).
    pub session_interval: f64,
    /// Clicks per session, lognormal (mean, sd) (Table II: 8, 3).
    pub session_length: (f64, f64),
    /// Requests per click, gaussian (mean, sd) truncated to >= 1 and rounded (7, 3).
    pub burst_length: (f64, f64),
    /// Seconds between the end of a burst and the next click, lognormal (30, 30).
    pub think_time: (f64, f64),
    /// Multiplies every think time, so that lab and test runs can be short (1 = as specified).
    pub think_scale: f64,
    /// Keep each session's connection open through its think times (as httperf's sessions
    /// do), so the server holds it until its keep-alive timeout: paper 001's Eq. (2), where a
    /// worker waits min(think time, KeepAliveTimeout) after each burst. Off: each burst
    /// opens and closes its own connection.
    pub hold_connection: bool,
}

impl Default for WagonParams {
    fn default() -> Self {
        WagonParams {
            session_interval: 0.1,
            session_length: (8.0, 3.0),
            burst_length: (7.0, 3.0),
            think_time: (30.0, 30.0),
            think_scale: 1.0,
            hold_connection: false,
        }
    }
}

impl WagonParams {
    pub fn validate(&self) -> Result<(), String> {
        let pos = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("WAGON {name} must be positive, not {v}"))
            }
        };
        let nonneg = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(format!("WAGON {name} must not be negative, not {v}"))
            }
        };
        pos("session interval", self.session_interval)?;
        pos("session length mean", self.session_length.0)?;
        nonneg("session length sd", self.session_length.1)?;
        pos("burst length mean", self.burst_length.0)?;
        nonneg("burst length sd", self.burst_length.1)?;
        pos("think time mean", self.think_time.0)?;
        nonneg("think time sd", self.think_time.1)?;
        nonneg("think scale", self.think_scale)
    }
}

/// Draws the four WAGON quantities from a [`WorkloadRng`], with rand_distr's distributions.
#[derive(Clone, Debug)]
pub struct Wagon {
    pub params: WagonParams,
    interarrival: Exp<f64>,
    length: LogNormal<f64>,
    burst: Normal<f64>,
    think: LogNormal<f64>,
}

impl Wagon {
    pub fn new(params: WagonParams) -> Result<Wagon, String> {
        let (mean, sd) = params.burst_length;
        Ok(Wagon {
            interarrival: Exp::new(1.0 / params.session_interval)
                .map_err(|e| format!("WAGON session interval: {e}"))?,
            length: lognormal(params.session_length.0, params.session_length.1)?,
            burst: Normal::new(mean, sd).map_err(|e| format!("WAGON burst length: {e}"))?,
            think: lognormal(params.think_time.0, params.think_time.1)?,
            params,
        })
    }

    /// Seconds until the next session arrives.
    pub fn interarrival(&self, rng: &mut WorkloadRng) -> f64 {
        self.interarrival.sample(rng)
    }

    /// Clicks in a session: a lognormal sample rounded to the nearest integer, at least 1.
    pub fn session_length(&self, rng: &mut WorkloadRng) -> u32 {
        (self.length.sample(rng).round() as u32).max(1)
    }

    /// Requests in a burst: a gaussian sample rounded, resampled until it is at least 1
    /// (a truncated distribution, not a clamp; after 64 misses, 1).
    pub fn burst_length(&self, rng: &mut WorkloadRng) -> u32 {
        for _ in 0..64 {
            let x = self.burst.sample(rng).round();
            if x >= 1.0 {
                return x.min(u32::MAX as f64) as u32;
            }
        }
        1
    }

    /// Think time in seconds, already multiplied by `think_scale`.
    pub fn think_time(&self, rng: &mut WorkloadRng) -> f64 {
        self.think.sample(rng) * self.params.think_scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{mean_sd, seeded};

    #[test]
    fn defaults_are_table_ii() {
        let p = WagonParams::default();
        assert_eq!(p.session_interval, 0.1);
        assert_eq!(p.session_length, (8.0, 3.0));
        assert_eq!(p.burst_length, (7.0, 3.0));
        assert_eq!(p.think_time, (30.0, 30.0));
        assert!(p.validate().is_ok());
        let bad = WagonParams {
            session_interval: 0.0,
            ..p
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn think_scale_scales() {
        let w1 = Wagon::new(WagonParams::default()).unwrap();
        let w2 = Wagon::new(WagonParams {
            think_scale: 0.01,
            ..WagonParams::default()
        })
        .unwrap();
        let (mut a, mut b) = (seeded(5), seeded(5));
        for _ in 0..100 {
            let (x, y) = (w1.think_time(&mut a), w2.think_time(&mut b));
            assert!((x * 0.01 - y).abs() < 1e-9);
        }
    }

    #[test]
    fn burst_length_never_below_one() {
        let w = Wagon::new(WagonParams {
            burst_length: (0.0, 1.0),
            ..WagonParams::default()
        })
        .unwrap();
        let mut r = seeded(1);
        let xs: Vec<f64> = (0..10_000).map(|_| w.burst_length(&mut r) as f64).collect();
        assert!(xs.iter().all(|&x| x >= 1.0));
        let (m, _) = mean_sd(&xs);
        assert!(m > 1.0);
    }
}

#[cfg(test)]
mod pinned {
    use super::*;
    use crate::rng::for_worker;

    /// `--workload wagon --seed 2024`'s first session on worker 0 (see `modes.rs`: sessions
    /// draw from `for_worker(seed ^ n * 0x9E37_79B9, worker)`), as clicks and burst lengths.
    /// Integers, so exact on every platform; a change of generator or algorithm shows here.
    #[test]
    fn a_seed_gives_the_same_session() {
        let w = Wagon::new(WagonParams::default()).unwrap();
        let mut rng = for_worker(2024, 0);
        let clicks = w.session_length(&mut rng);
        let bursts: Vec<u32> = (0..clicks).map(|_| w.burst_length(&mut rng)).collect();
        assert_eq!((clicks, bursts), (8, vec![6, 4, 6, 9, 10, 13, 10, 4]));
    }
}
