//! The closed loop on the simulated cluster: every node has its own `Supervisor` (its own
//! controller, as every `gearshift serve` of `gearshift cluster` runs `--controller`), sees
//! only its own measurement with the plant's noise, and sets only its own MaxClients. The
//! run's summary is taken over its second half: throughput, page and request response
//! times, drops, the worst node, and how many nodes' controllers settled.

use super::cluster::{Balancer, ClusterModel, ClusterSim};
use super::dist::SimRng;
use super::plant::add_noise;
use crate::defaults::cluster as dc;
use crate::types::{Knobs, Supervisor, MAX_CLIENTS};
use hdrhistogram::Histogram;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;

/// One closed-loop experiment on the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterRun {
    pub model: ClusterModel,
    pub balancer: Balancer,
    pub seed: u64,
    /// Sigma of the lognormal noise on every measured time a controller sees.
    pub noise: f64,
    pub duration_s: f64,
    pub start_max_clients: u64,
}

impl Default for ClusterRun {
    fn default() -> Self {
        ClusterRun {
            model: ClusterModel::default(),
            balancer: Balancer::LeastConn,
            seed: 1,
            noise: 0.1,
            duration_s: 120.0,
            start_max_clients: 20,
        }
    }
}

/// One interval of the cluster.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterPoint {
    pub t: f64,
    pub throughput: f64,
    pub mean_page_rt_s: f64,
    pub p99_rt_s: f64,
    pub dropped: u64,
    pub redispatched: u64,
    pub max_clients_min: u64,
    pub max_clients_median: u64,
    pub max_clients_max: u64,
}

/// The second half of a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClusterSummary {
    pub nodes: usize,
    pub balancer: &'static str,
    pub controller: &'static str,
    pub seconds: f64,
    /// Completed requests per second, in all and per node.
    pub throughput: f64,
    pub per_node_throughput: f64,
    pub mean_page_rt_s: f64,
    pub mean_rt_s: f64,
    pub p50_rt_s: f64,
    pub p99_rt_s: f64,
    pub dropped: u64,
    /// Mean request RT of the node with the worst one.
    pub worst_node_rt_s: f64,
    /// Lowest and highest mean CPU utilisation among the nodes.
    pub node_cpu_min: f64,
    pub node_cpu_max: f64,
    /// MaxClients over the nodes at the end.
    pub max_clients_min: u64,
    pub max_clients_median: u64,
    pub max_clients_max: u64,
    /// Share of nodes whose MaxClients settled (defaults::cluster::SETTLED_*).
    pub settled_share: f64,
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The p-quantile of unsorted `v` (0 when empty).
fn quantile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let k = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// Run the cluster with one supervisor per node (`controllers.len()` must equal the
/// model's node count).
pub fn run_cluster(
    cfg: &ClusterRun,
    controllers: &mut [Supervisor],
) -> Result<(Vec<ClusterPoint>, ClusterSummary), String> {
    cfg.model.validate()?;
    let n = cfg.model.nodes;
    if controllers.len() != n {
        return Err(format!("{} controllers for {n} nodes", controllers.len()));
    }
    let mut sim = ClusterSim::new(
        cfg.model.clone(),
        cfg.balancer,
        cfg.seed,
        cfg.start_max_clients.max(1),
    );
    let mut noise_rng = SimRng::seed_from_u64(cfg.seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut knobs: Vec<Knobs> = (0..n)
        .map(|_| Knobs::new().with(MAX_CLIENTS, cfg.start_max_clients.max(1)))
        .collect();
    let dt = cfg.model.interval_s;
    let steps = ((cfg.duration_s / dt).round() as usize).max(2);
    let warm = steps / 2;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| format!("histogram: {e}"))?;
    let mut recent: Vec<VecDeque<u64>> = vec![VecDeque::new(); n];
    let (mut done, mut pages, mut page_rt, mut rt_sum, mut dropped) = (0u64, 0u64, 0.0, 0.0, 0);
    let mut node_rt = vec![(0.0f64, 0u64); n];
    let mut node_cpu = vec![0.0f64; n];
    let mut points = Vec::with_capacity(steps);
    for step in 0..steps {
        let (mut c, per_node) = sim.run_interval();
        let now = sim.now();
        let mut mcs: Vec<u64> = (0..n).map(|i| sim.max_clients(i)).collect();
        let (lo, hi) = (
            mcs.iter().copied().min().unwrap_or(0),
            mcs.iter().copied().max().unwrap_or(0),
        );
        if step >= warm {
            done += c.completions;
            pages += c.pages;
            page_rt += c.page_rt_sum_s;
            dropped += c.dropped;
            for &rt in &c.request_rts {
                rt_sum += rt;
                let _ = hist.record(((rt * 1e6).round() as u64).max(1));
            }
            for (i, m) in per_node.iter().enumerate() {
                node_rt[i].0 += m.mean_rt_s * m.completions as f64;
                node_rt[i].1 += m.completions;
                node_cpu[i] += m.cpu_util;
            }
        }
        points.push(ClusterPoint {
            t: now,
            throughput: c.completions as f64 / dt,
            mean_page_rt_s: if c.pages > 0 {
                c.page_rt_sum_s / c.pages as f64
            } else {
                0.0
            },
            p99_rt_s: quantile(&mut c.request_rts, 0.99),
            dropped: c.dropped,
            redispatched: c.redispatched,
            max_clients_min: lo,
            max_clients_median: median(&mut mcs),
            max_clients_max: hi,
        });
        for (i, m) in per_node.iter().enumerate() {
            let seen = add_noise(m, cfg.noise, &mut noise_rng);
            knobs[i] = controllers[i].step(Duration::from_secs_f64(now), &seen, &knobs[i]);
            if let Some(v) = knobs[i].get(MAX_CLIENTS) {
                sim.set_max_clients(i, v.max(1));
            }
            let r = &mut recent[i];
            r.push_back(sim.max_clients(i));
            if r.len() > dc::SETTLED_WINDOW {
                r.pop_front();
            }
        }
    }
    let secs = (steps - warm) as f64 * dt;
    let mut finals: Vec<u64> = (0..n).map(|i| sim.max_clients(i)).collect();
    let settled = recent
        .iter()
        .filter(|r| {
            let mut v: Vec<u64> = r.iter().copied().collect();
            let med = median(&mut v) as f64;
            let spread = v.last().zip(v.first()).map_or(0, |(hi, lo)| hi - lo);
            // One worker either way is settled too (1 <-> 2 is no oscillation).
            !v.is_empty() && spread as f64 <= (dc::SETTLED_SPREAD * med).max(1.0)
        })
        .count();
    let cpu_mean: Vec<f64> = node_cpu.iter().map(|c| c / (steps - warm) as f64).collect();
    let q = |p: f64| hist.value_at_quantile(p) as f64 / 1e6;
    let summary = ClusterSummary {
        nodes: n,
        balancer: cfg.balancer.name(),
        controller: controllers.first().map_or("none", |c| c.name()),
        seconds: secs,
        throughput: done as f64 / secs,
        per_node_throughput: done as f64 / secs / n as f64,
        mean_page_rt_s: if pages > 0 {
            page_rt / pages as f64
        } else {
            0.0
        },
        mean_rt_s: if done > 0 { rt_sum / done as f64 } else { 0.0 },
        p50_rt_s: q(0.5),
        p99_rt_s: q(0.99),
        dropped,
        worst_node_rt_s: node_rt
            .iter()
            .map(|(s, c)| if *c > 0 { s / *c as f64 } else { 0.0 })
            .fold(0.0, f64::max),
        node_cpu_min: cpu_mean.iter().copied().fold(f64::INFINITY, f64::min),
        node_cpu_max: cpu_mean.iter().copied().fold(0.0, f64::max),
        max_clients_min: finals.iter().copied().min().unwrap_or(0),
        max_clients_max: finals.iter().copied().max().unwrap_or(0),
        max_clients_median: median(&mut finals),
        settled_share: settled as f64 / n as f64,
    };
    Ok((points, summary))
}
