//! `fuzzy`: paper 001 section IV-B, the fuzzy hill-climber of Diao et al. Inputs are the
//! last change in MaxClients and the relative change in response time it caused; each is
//! fuzzified into *neglarge*/*poslarge* (complementary ramps over -scale..+scale), the four
//! Table III rules fire with min as AND, and the next change is the centre-of-gravity of
//! their consequents (-1/+1) times the output gain. A change of at least one client is made
//! in the defuzzified direction so the climber never stalls on a tie.

use crate::defaults::fuzzy as d;
use crate::types::{Controller, Knobs, Measurement, MAX_CLIENTS};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FuzzyParams {
    pub mc_scale: f64,
    pub rt_scale: f64,
    pub output_gain: f64,
    /// Intervals between decisions (RT averaged over them, the first one skipped).
    pub period: usize,
}

impl Default for FuzzyParams {
    fn default() -> Self {
        FuzzyParams {
            mc_scale: d::MC_SCALE,
            rt_scale: d::RT_SCALE,
            output_gain: d::OUTPUT_GAIN,
            period: d::PERIOD,
        }
    }
}

/// Membership in (neglarge, poslarge) of x scaled to -1..1.
fn fuzzify(x: f64, scale: f64) -> (f64, f64) {
    let s = (x / scale).clamp(-1.0, 1.0);
    ((1.0 - s) / 2.0, (1.0 + s) / 2.0)
}

/// Table III inference and defuzzification: the next change in MaxClients in -1..1.
pub fn infer(d_mc: f64, d_rt: f64, mc_scale: f64, rt_scale: f64) -> f64 {
    let (mc_neg, mc_pos) = fuzzify(d_mc, mc_scale);
    let (rt_neg, rt_pos) = fuzzify(d_rt, rt_scale);
    let grade = |sign: i8, neg: f64, pos: f64| if sign < 0 { neg } else { pos };
    let (mut num, mut den) = (0.0, 0.0);
    for (mc, rt, out) in d::RULES {
        let w = grade(mc, mc_neg, mc_pos).min(grade(rt, rt_neg, rt_pos));
        num += w * f64::from(out);
        den += w;
    }
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

pub struct Fuzzy {
    p: FuzzyParams,
    /// RT and MaxClients of the previous decision's interval.
    last: Option<(f64, f64)>,
    acc: (f64, usize),
    ticks: usize,
}

impl Fuzzy {
    pub fn new(p: FuzzyParams) -> Fuzzy {
        Fuzzy {
            p,
            last: None,
            acc: (0.0, 0),
            ticks: 0,
        }
    }
}

impl Controller for Fuzzy {
    fn name(&self) -> &'static str {
        "fuzzy"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let cur = current.get(MAX_CLIENTS).unwrap_or(1) as f64;
        // The first interval after a change is its transient; skip it when periods allow.
        let transient = self.ticks == 0 && self.p.period > 1 && self.last.is_some();
        if m.pages > 0 && !transient {
            self.acc.0 += m.mean_rt_s;
            self.acc.1 += 1;
        }
        self.ticks += 1;
        if self.ticks < self.p.period.max(1) || self.acc.1 == 0 {
            return Knobs::new();
        }
        let rt = self.acc.0 / self.acc.1 as f64;
        self.acc = (0.0, 0);
        self.ticks = 0;
        let change = match self.last {
            // First decision: no history, explore upwards (Apache's defaults are low).
            None => self.p.output_gain,
            Some((prev_rt, prev_mc)) => {
                // What really changed between the two measured intervals (after bounds).
                let d_mc = cur - prev_mc;
                let d_rt = (rt - prev_rt) / prev_rt.max(1e-9);
                let z = infer(d_mc, d_rt, self.p.mc_scale, self.p.rt_scale);
                let step = z * self.p.output_gain;
                if step.abs() >= 1.0 {
                    step
                } else if z < 0.0 || (z == 0.0 && d_mc < 0.0) {
                    -1.0
                } else {
                    1.0
                }
            }
        };
        self.last = Some((rt, cur));
        let next = (cur + change).round().max(1.0);
        Knobs::new().with(MAX_CLIENTS, next as u64)
    }
}
