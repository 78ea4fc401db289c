//! `newton`: paper 001 section IV-A. Response time is modelled locally as
//! f(x) ~ a (x - x*)^2 + b in x = MaxClients; each step measures f at x - h, x and x + h
//! (the paper's "three samples to compute the second derivative, at each step") and moves
//! to x - f'(x) / f''(x) from central differences. When noise makes the curvature
//! non-positive, the step falls back to moving h downhill. The paper's own verdict -- fast
//! in principle, inconsistent on noisy RT -- is what the simulator reproduces.

use crate::defaults::newton as d;
use crate::types::{Controller, Knobs, Measurement, MAX_CLIENTS};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NewtonParams {
    pub probe_fraction: f64,
    pub min_probe: f64,
    /// Intervals per probe point; the first is discarded as the transient of the change.
    pub dwell: usize,
    /// Ours: a Newton step moves at most this fraction of x (bounds apply after).
    pub max_move_fraction: f64,
}

impl Default for NewtonParams {
    fn default() -> Self {
        NewtonParams {
            probe_fraction: d::PROBE_FRACTION,
            min_probe: d::MIN_PROBE,
            dwell: d::DWELL,
            max_move_fraction: 1.0,
        }
    }
}

pub struct Newton {
    p: NewtonParams,
    /// Centre of the current step.
    x: f64,
    h: f64,
    /// Which of the three probes (0: x, 1: x + h, 2: x - h) is being measured.
    probe: usize,
    seen: usize,
    sum: f64,
    n: usize,
    y: [f64; d::SAMPLES_PER_STEP],
}

impl Newton {
    pub fn new(p: NewtonParams) -> Newton {
        Newton {
            p,
            x: 0.0,
            h: 0.0,
            probe: 0,
            seen: 0,
            sum: 0.0,
            n: 0,
            y: [0.0; d::SAMPLES_PER_STEP],
        }
    }

    fn probe_x(&self) -> f64 {
        match self.probe {
            1 => self.x + self.h,
            2 => (self.x - self.h).max(1.0),
            _ => self.x,
        }
    }

    fn centre_on(&mut self, x: f64) {
        self.x = x.max(1.0);
        self.h = (self.x * self.p.probe_fraction).max(self.p.min_probe);
        self.probe = 0;
    }

    /// The Newton step from the three probes.
    fn next_centre(&self) -> f64 {
        let [y0, yp, ym] = self.y;
        let h = self.h;
        let h_minus = self.x - (self.x - h).max(1.0);
        let g = (yp - ym) / (h + h_minus);
        let curv =
            2.0 * (yp * h_minus + ym * h - y0 * (h + h_minus)) / (h * h_minus * (h + h_minus));
        let mv = if curv > 0.0 && curv.is_finite() {
            -g / curv
        } else if yp < ym {
            h
        } else {
            -h
        };
        let lim = self.x * self.p.max_move_fraction;
        self.x + mv.clamp(-lim, lim)
    }
}

impl Controller for Newton {
    fn name(&self) -> &'static str {
        "newton"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let cur = current.get(MAX_CLIENTS).unwrap_or(1) as f64;
        if self.x == 0.0 {
            self.centre_on(cur);
            return Knobs::new().with(MAX_CLIENTS, self.probe_x().round() as u64);
        }
        if self.probe == 0 && self.seen == 0 && (cur - self.x).abs() > 0.5 {
            // Bounds changed what was applied: measure where the plant really is.
            self.centre_on(cur);
        }
        self.seen += 1;
        if (self.seen > 1 || self.p.dwell <= 1) && m.pages > 0 {
            self.sum += m.mean_rt_s;
            self.n += 1;
        }
        if self.seen >= self.p.dwell.max(1) && (self.n > 0 || self.seen > 4 * self.p.dwell) {
            self.y[self.probe] = if self.n > 0 {
                self.sum / self.n as f64
            } else {
                f64::MAX
            };
            self.seen = 0;
            self.sum = 0.0;
            self.n = 0;
            if self.probe + 1 < d::SAMPLES_PER_STEP {
                self.probe += 1;
            } else {
                let next = self.next_centre();
                self.centre_on(next);
            }
        }
        Knobs::new().with(MAX_CLIENTS, self.probe_x().round() as u64)
    }
}
