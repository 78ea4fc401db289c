//! The vocabulary shared by sensors, controllers and the simulator: what is measured per
//! sampling interval (`Measurement`), what a controller sets (`Knobs`), the limits every
//! output goes through (`Bounds`) and the `Controller` trait itself. `Supervisor` wraps any
//! controller with bounds and a freeze switch, which is what the live server will hold.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Knob names shared with the server's live knobs.
pub const MAX_CLIENTS: &str = "max_clients";
pub const KEEPALIVE_TIMEOUT_MS: &str = "keepalive_timeout_ms";
/// Apache's MinSpare/MaxSpare (servers in prefork, threads in worker): idle workers the
/// engine keeps started ahead of demand.
pub const MIN_SPARE: &str = "min_spare";
pub const MAX_SPARE: &str = "max_spare";
/// Per-stage thread knobs of the staged pipeline are `threads_<stage>`.
pub fn stage_knob(stage: &str) -> String {
    format!("threads_{stage}")
}

/// One pipeline stage over one interval (paper 002's load monitor).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageMeasurement {
    pub name: String,
    pub threads: u64,
    /// Mean number of tasks waiting in the stage's queue.
    pub queue_len: f64,
    /// Mean wait in the queue, seconds.
    pub wait_s: f64,
    /// Busy share of the stage's threads, 0..1.
    pub utilisation: f64,
}

/// Everything the sensors report for one sampling interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub interval_s: f64,
    /// Requests that arrived / completed in the interval.
    pub arrivals: u64,
    pub completions: u64,
    /// Pages (bursts) completed; `mean_rt_s` and `p95_rt_s` are per page (paper 001 Eq. 1).
    pub pages: u64,
    pub mean_rt_s: f64,
    pub p95_rt_s: f64,
    /// Mean service time of one request, seconds.
    pub service_time_s: f64,
    /// Mean accept-queue length and wait of connections accepted in the interval.
    pub accept_queue_len: f64,
    pub accept_queue_wait_s: f64,
    /// Connections that found the accept queue full.
    pub dropped: u64,
    /// Mean busy and idle workers over the interval.
    pub busy_workers: f64,
    pub idle_workers: f64,
    pub bytes_sent: u64,
    pub stages: Vec<StageMeasurement>,
    /// CPU utilisation of the server, 0..1 of the machine.
    pub cpu_util: f64,
    pub rss_bytes: u64,
    pub mem_free_bytes: u64,
}

impl Measurement {
    /// Memory utilisation as paper 001's heuristic uses it: what the server holds of what it
    /// could hold.
    pub fn mem_util(&self) -> f64 {
        let total = self.rss_bytes + self.mem_free_bytes;
        if total == 0 {
            0.0
        } else {
            self.rss_bytes as f64 / total as f64
        }
    }

    /// Completed requests per second.
    pub fn throughput(&self) -> f64 {
        if self.interval_s > 0.0 {
            self.completions as f64 / self.interval_s
        } else {
            0.0
        }
    }
}

/// Named integer knobs (a map so engines with different knobs share one type).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Knobs(pub BTreeMap<String, u64>);

impl Knobs {
    pub fn new() -> Knobs {
        Knobs::default()
    }
    pub fn with(mut self, name: &str, v: u64) -> Knobs {
        self.set(name, v);
        self
    }
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.get(name).copied()
    }
    pub fn set(&mut self, name: &str, v: u64) {
        self.0.insert(name.to_string(), v);
    }
}

impl From<BTreeMap<String, u64>> for Knobs {
    fn from(m: BTreeMap<String, u64>) -> Knobs {
        Knobs(m)
    }
}

/// Limits applied to one knob's every output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bounds {
    pub min: u64,
    pub max: u64,
    /// Largest change per step (0 = unlimited).
    #[serde(default)]
    pub max_step: u64,
}

impl Bounds {
    pub fn new(min: u64, max: u64, max_step: u64) -> Bounds {
        Bounds { min, max, max_step }
    }

    /// `proposed` limited to one step from `current` and to min..=max.
    pub fn apply(&self, current: u64, proposed: u64) -> u64 {
        let mut v = proposed;
        if self.max_step > 0 {
            v = v.clamp(
                current.saturating_sub(self.max_step),
                current + self.max_step,
            );
        }
        v.clamp(self.min, self.max.max(self.min))
    }
}

/// A pure state machine: measurements and time in, knob values out.
pub trait Controller {
    fn name(&self) -> &'static str;
    /// Called once per sampling interval with that interval's measurement and the knobs in
    /// force during it; returns the knobs to apply next (unchanged knobs may be omitted).
    fn step(&mut self, now: Duration, m: &Measurement, current: &Knobs) -> Knobs;
}

/// A controller with its bounds and a freeze switch: the object the server (or the plant)
/// calls. Knobs without bounds pass through unchanged; outputs for unknown knobs are kept.
pub struct Supervisor {
    inner: Box<dyn Controller>,
    bounds: BTreeMap<String, Bounds>,
    frozen: bool,
}

impl Supervisor {
    pub fn new(inner: Box<dyn Controller>, bounds: BTreeMap<String, Bounds>) -> Supervisor {
        Supervisor {
            inner,
            bounds,
            frozen: false,
        }
    }
    pub fn name(&self) -> &'static str {
        self.inner.name()
    }
    pub fn freeze(&mut self, frozen: bool) {
        self.frozen = frozen;
    }
    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// The knobs to apply after this interval: `current` with the controller's proposals,
    /// bounded. A frozen supervisor returns `current` and does not step its controller.
    pub fn step(&mut self, now: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        if self.frozen {
            return current.clone();
        }
        let proposed = self.inner.step(now, m, current);
        let mut out = current.clone();
        for (name, v) in proposed.0 {
            let cur = current.get(&name).unwrap_or(v);
            let bounded = match self.bounds.get(&name) {
                Some(b) => b.apply(cur, v),
                None => v,
            };
            out.set(&name, bounded);
        }
        out
    }
}
