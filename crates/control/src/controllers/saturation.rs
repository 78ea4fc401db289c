//! `saturation`: paper 001 section IV-C. Measure CPU and memory utilisation at the current
//! MaxClients MC0, extrapolate linearly through the origin to where each saturates and set
//! MaxClients = min(MC0/CPU0, MC0/MEM0) (times the target utilisation); then keep watching
//! and start over when a utilisation moves "significantly" from what it was after the jump.

use crate::defaults::saturation as d;
use crate::types::{Controller, Knobs, Measurement, MAX_CLIENTS};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SaturationParams {
    pub target_utilisation: f64,
    pub significant_change: f64,
    pub average_over: usize,
}

impl Default for SaturationParams {
    fn default() -> Self {
        SaturationParams {
            target_utilisation: d::TARGET_UTILISATION,
            significant_change: d::SIGNIFICANT_CHANGE,
            average_over: d::AVERAGE_OVER,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Averaging utilisations at the current MaxClients (step 1).
    Measure,
    /// Letting the jump take effect before recording the reference (step 3).
    Settle,
    /// Watching for significant changes (step 4), against reference (cpu, mem).
    Watch(f64, f64),
}

pub struct Saturation {
    p: SaturationParams,
    phase: Phase,
    acc: (f64, f64, usize),
    /// Consecutive averaged windows that differed significantly from the reference.
    strikes: usize,
}

impl Saturation {
    pub fn new(p: SaturationParams) -> Saturation {
        Saturation {
            p,
            phase: Phase::Measure,
            acc: (0.0, 0.0, 0),
            strikes: 0,
        }
    }
}

fn moved(now: f64, reference: f64, by: f64) -> bool {
    (now - reference).abs() > by * reference.max(1e-3)
}

impl Controller for Saturation {
    fn name(&self) -> &'static str {
        "saturation"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let cur = current.get(MAX_CLIENTS).unwrap_or(1) as f64;
        self.acc.0 += m.cpu_util;
        self.acc.1 += m.mem_util();
        self.acc.2 += 1;
        if self.acc.2 < self.p.average_over.max(1) {
            return Knobs::new();
        }
        let n = self.acc.2 as f64;
        let (cpu, mem) = (self.acc.0 / n, self.acc.1 / n);
        self.acc = (0.0, 0.0, 0);
        match self.phase {
            Phase::Measure => {
                let target = self.p.target_utilisation;
                let by_cpu = if cpu > 0.0 {
                    cur * target / cpu
                } else {
                    f64::MAX
                };
                let by_mem = if mem > 0.0 {
                    cur * target / mem
                } else {
                    f64::MAX
                };
                let next = by_cpu.min(by_mem);
                self.phase = Phase::Settle;
                if next.is_finite() && next < u64::MAX as f64 {
                    return Knobs::new().with(MAX_CLIENTS, next.round().max(1.0) as u64);
                }
            }
            Phase::Settle => self.phase = Phase::Watch(cpu, mem),
            Phase::Watch(c0, m0) => {
                let by = self.p.significant_change;
                if moved(cpu, c0, by) || moved(mem, m0, by) {
                    self.strikes += 1;
                    if self.strikes >= 2 {
                        self.strikes = 0;
                        self.phase = Phase::Measure;
                    }
                } else {
                    self.strikes = 0;
                }
            }
        }
        Knobs::new()
    }
}
