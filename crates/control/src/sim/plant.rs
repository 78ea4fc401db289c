//! The closed loop on the simulator: a `Supervisor` (any controller with bounds) steps once
//! per simulated interval against `ServerSim` or `PipelineSim`, sees measurements with
//! multiplicative noise, and the load can step part-way through. The trajectory records the
//! true (noise-free) and the measured response time so runs can be scored fairly.

use super::dist::{std_normal, SimRng};
use super::pipeline::{PipelineModel, PipelineSim};
use super::server::{ServerModel, ServerSim};
use crate::types::{Knobs, Measurement, Supervisor, KEEPALIVE_TIMEOUT_MS, MAX_CLIENTS};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One closed-loop experiment on paper 001's system.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlantConfig {
    pub model: ServerModel,
    pub seed: u64,
    /// Sigma of the lognormal multiplicative noise on every measured time.
    pub noise: f64,
    pub duration_s: f64,
    /// When the load changes, and the load multiplier after it (1 = no change).
    pub step_at_s: Option<f64>,
    pub step_load: f64,
    pub start_max_clients: u64,
    pub start_keepalive_ms: u64,
}

impl Default for PlantConfig {
    fn default() -> Self {
        PlantConfig {
            model: ServerModel::default(),
            seed: 1,
            noise: 0.1,
            duration_s: 300.0,
            step_at_s: None,
            step_load: 1.4,
            start_max_clients: 20,
            start_keepalive_ms: crate::defaults::plant::KEEPALIVE_MS,
        }
    }
}

impl PlantConfig {
    /// Load multiplier in force at time `t`.
    pub fn load_at(&self, t: f64) -> f64 {
        match self.step_at_s {
            Some(s) if t >= s => self.step_load,
            _ => 1.0,
        }
    }
}

/// One interval of a trajectory.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// End of the interval, seconds.
    pub t: f64,
    pub load: f64,
    pub max_clients: u64,
    pub keepalive_ms: u64,
    /// Noise-free mean page response time of the interval.
    pub rt_s: f64,
    /// What the controller was shown.
    pub measured_rt_s: f64,
    pub accept_wait_s: f64,
    pub service_s: f64,
    pub throughput: f64,
    pub cpu: f64,
}

fn noisy(x: f64, sigma: f64, rng: &mut SimRng) -> f64 {
    if sigma <= 0.0 {
        x
    } else {
        x * (sigma * std_normal(rng) - sigma * sigma / 2.0).exp()
    }
}

/// Corrupt every measured time of `m` with the plant's noise.
pub fn add_noise(m: &Measurement, sigma: f64, rng: &mut SimRng) -> Measurement {
    let mut o = m.clone();
    o.mean_rt_s = noisy(m.mean_rt_s, sigma, rng);
    o.p95_rt_s = noisy(m.p95_rt_s, sigma, rng);
    o.service_time_s = noisy(m.service_time_s, sigma, rng);
    o.accept_queue_wait_s = noisy(m.accept_queue_wait_s, sigma, rng);
    o.cpu_util = noisy(m.cpu_util, sigma / 2.0, rng).min(1.0);
    o
}

/// Run `ctl` against the simulated server.
pub fn run(cfg: &PlantConfig, ctl: &mut Supervisor) -> Vec<Point> {
    let mut sim = ServerSim::new(
        cfg.model.clone(),
        cfg.seed,
        cfg.start_max_clients,
        cfg.start_keepalive_ms,
    );
    let mut noise_rng = SimRng::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut knobs = Knobs::new()
        .with(MAX_CLIENTS, cfg.start_max_clients)
        .with(KEEPALIVE_TIMEOUT_MS, cfg.start_keepalive_ms);
    let dt = cfg.model.interval_s;
    let steps = (cfg.duration_s / dt).round() as usize;
    let mut out = Vec::with_capacity(steps);
    for _ in 0..steps {
        let load = cfg.load_at(sim.now());
        sim.set_load(load);
        let m = sim.run_interval();
        let seen = add_noise(&m, cfg.noise, &mut noise_rng);
        let now = sim.now();
        out.push(Point {
            t: now,
            load,
            max_clients: knobs.get(MAX_CLIENTS).unwrap_or(0),
            keepalive_ms: knobs.get(KEEPALIVE_TIMEOUT_MS).unwrap_or(0),
            rt_s: m.mean_rt_s,
            measured_rt_s: seen.mean_rt_s,
            accept_wait_s: m.accept_queue_wait_s,
            service_s: m.service_time_s,
            throughput: m.throughput(),
            cpu: m.cpu_util,
        });
        knobs = ctl.step(Duration::from_secs_f64(now), &seen, &knobs);
        if let Some(v) = knobs.get(MAX_CLIENTS) {
            sim.set_max_clients(v.max(1));
        }
        if let Some(v) = knobs.get(KEEPALIVE_TIMEOUT_MS) {
            sim.set_keepalive_ms(v);
        }
    }
    out
}

/// Steady-state averages of a static setting (one point of the RT-vs-MaxClients curve).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Steady {
    pub rt_s: f64,
    pub service_s: f64,
    pub accept_wait_s: f64,
    pub throughput: f64,
    pub cpu: f64,
    pub busy_workers: f64,
}

/// Run a static setting for `secs`, discard the first fifth as warm-up, average the rest
/// (RT weighted by pages, service time by requests).
pub fn steady(model: &ServerModel, seed: u64, m: u64, ka_ms: u64, load: f64, secs: f64) -> Steady {
    let mut sim = ServerSim::new(model.clone(), seed, m, ka_ms);
    sim.set_load(load);
    let n = ((secs / model.interval_s).round() as usize).max(2);
    let warm = n / 5;
    let (mut rt, mut pages, mut st, mut reqs, mut aq, mut cpu, mut busy) =
        (0.0, 0u64, 0.0, 0u64, 0.0, 0.0, 0.0);
    for i in 0..n {
        let r = sim.run_interval();
        if i >= warm {
            rt += r.mean_rt_s * r.pages as f64;
            pages += r.pages;
            st += r.service_time_s * r.completions as f64;
            reqs += r.completions;
            aq += r.accept_queue_wait_s;
            cpu += r.cpu_util;
            busy += r.busy_workers;
        }
    }
    let k = (n - warm) as f64;
    let per = |s: f64, c: u64| if c > 0 { s / c as f64 } else { f64::INFINITY };
    Steady {
        rt_s: per(rt, pages),
        service_s: per(st, reqs),
        accept_wait_s: aq / k,
        throughput: reqs as f64 / (k * model.interval_s),
        cpu: cpu / k,
        busy_workers: busy / k,
    }
}

/// One interval of a pipeline run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PipelinePoint {
    pub t: f64,
    pub threads: [u64; 4],
    pub queue_len: [f64; 4],
    pub rt_s: f64,
    pub throughput: f64,
}

/// Run `ctl` (normally `keta`) against the simulated pipeline.
pub fn run_pipeline(
    model: &PipelineModel,
    seed: u64,
    start: [u64; 4],
    intervals: usize,
    ctl: &mut Supervisor,
) -> Vec<PipelinePoint> {
    let mut sim = PipelineSim::new(model.clone(), seed, start);
    let mut out = Vec::with_capacity(intervals);
    for i in 0..intervals {
        let m = sim.run_interval();
        let mut q = [0.0; 4];
        for (k, s) in m.stages.iter().enumerate().take(4) {
            q[k] = s.queue_len;
        }
        out.push(PipelinePoint {
            t: (i + 1) as f64 * model.interval_s,
            threads: sim.threads(),
            queue_len: q,
            rt_s: m.mean_rt_s,
            throughput: m.throughput(),
        });
        let k = ctl.step(Duration::from_secs_f64(sim_now(i, model)), &m, &sim.knobs());
        sim.apply(&k);
    }
    out
}

fn sim_now(i: usize, model: &PipelineModel) -> f64 {
    (i + 1) as f64 * model.interval_s
}
