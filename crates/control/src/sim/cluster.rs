//! A seeded discrete-event simulation of N gearshift nodes behind one load balancer, for
//! cluster sizes this machine cannot host (issue 16: 8, 32, 128 nodes). Closed-loop
//! sessions (paper 001's shape: think, then a page of `burst` requests in sequence) send
//! every request through the balancer, which picks a node per request as HAProxy does in
//! HTTP mode: round robin, least connections, or the power of two random choices. Each node
//! is paper 001's server without keep-alive holding (the balancer multiplexes its own
//! connections): `max_clients` workers, an accept queue of `accept_queue` places, service
//! slowed by CPU sharing and by contention per worker, and a speed of its own (slow nodes
//! make the cluster heterogeneous). A request refused by a full queue is redispatched once
//! to another node (HAProxy's `option redispatch`), then dropped. `host_cores` > 0 makes
//! all nodes share one host's CPUs, as the namespaces of `gearshift cluster` share this
//! machine's two: then CPU-bound work cannot scale with N. Every node reports its own
//! `Measurement` per interval, so each can run its own controller (`cluster_run`).

pub use super::balance::Balancer;
use super::balance::Picker;
use super::calendar::Calendar;
use super::dist::{burst_length, Shape, SimRng};
use crate::defaults::{cluster as dc, plant as dp, wagon};
use crate::types::Measurement;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The simulated cluster and its workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterModel {
    pub nodes: usize,
    /// Client sessions per node: the offered load grows with the cluster.
    pub sessions_per_node: usize,
    pub think_mean_s: f64,
    pub think: Shape,
    pub burst_mean: f64,
    pub burst_sd: f64,
    /// Mean service time of a request on a node of speed 1.
    pub service_mean_s: f64,
    pub service: Shape,
    /// Cores of each node shared by its active requests; 0 = no CPU sharing.
    pub cores_per_node: f64,
    /// > 0: every node's active requests share this many cores of one host.
    pub host_cores: f64,
    /// Slowdown per worker: service x (1 + this x max_clients).
    pub contention_per_worker: f64,
    pub accept_queue: usize,
    /// Share of the nodes that are slow, and their speed relative to the others.
    pub slow_fraction: f64,
    pub slow_speed: f64,
    pub interval_s: f64,
}

impl Default for ClusterModel {
    fn default() -> Self {
        ClusterModel {
            nodes: dc::NODES,
            sessions_per_node: dp::SESSIONS,
            think_mean_s: dc::THINK_MEAN_S,
            think: Shape::Lognormal { cv: 1.0 },
            burst_mean: wagon::BURST_LENGTH_MEAN,
            burst_sd: wagon::BURST_LENGTH_SD,
            service_mean_s: dp::SERVICE_MEAN_S,
            service: Shape::Exponential,
            cores_per_node: dp::CORES,
            host_cores: 0.0,
            contention_per_worker: dp::CONTENTION_PER_WORKER,
            accept_queue: dp::ACCEPT_QUEUE,
            slow_fraction: 0.0,
            slow_speed: dc::SLOW_SPEED,
            interval_s: dp::INTERVAL_S,
        }
    }
}

impl ClusterModel {
    pub fn validate(&self) -> Result<(), String> {
        self.think.validate()?;
        self.service.validate()?;
        let pos = [
            ("think_mean_s", self.think_mean_s),
            ("service_mean_s", self.service_mean_s),
            ("interval_s", self.interval_s),
            ("burst_mean", self.burst_mean),
            ("slow_speed", self.slow_speed),
        ];
        for (n, v) in pos {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{n} must be positive, got {v}"));
            }
        }
        if self.nodes == 0 || self.nodes > dc::MAX_NODES {
            return Err(format!(
                "nodes must be 1..={}, got {}",
                dc::MAX_NODES,
                self.nodes
            ));
        }
        if self.sessions_per_node == 0 {
            return Err("sessions_per_node must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.slow_fraction) {
            return Err(format!(
                "slow_fraction must be in 0..=1, got {}",
                self.slow_fraction
            ));
        }
        if self.cores_per_node < 0.0 || self.host_cores < 0.0 {
            return Err("cores_per_node and host_cores must be >= 0".into());
        }
        Ok(())
    }

    /// Speed of node `i`: the slow ones are spread evenly (node i is slow when the running
    /// count of slow nodes, i x slow_fraction, crosses an integer at i).
    pub fn speed(&self, i: usize) -> f64 {
        let f = self.slow_fraction;
        let before = (i as f64 * f + 1e-9).floor();
        let after = ((i + 1) as f64 * f + 1e-9).floor();
        if after > before {
            self.slow_speed
        } else {
            1.0
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    ThinkEnd(usize),
    /// Request of session .1 done on node .0.
    ReqDone(usize, usize),
}

#[derive(Clone, Debug, Default)]
struct Session {
    left: u32,
    page_start: f64,
    /// When the current request reached its node.
    req_start: f64,
}

/// A node's accumulators over one interval.
#[derive(Default)]
struct NodeAcc {
    arrivals: u64,
    completions: u64,
    rt_sum: f64,
    rts: Vec<f64>,
    service_sum: f64,
    started: u64,
    waits: f64,
    accepted: u64,
    dropped: u64,
    busy_int: f64,
    /// Cores used, integrated over time (what /proc would show for the node's processes).
    cpu_int: f64,
    queue_int: f64,
}

struct Node {
    speed: f64,
    max_clients: u64,
    /// Workers serving a request (no keep-alive holding behind a balancer).
    busy: u64,
    queue: VecDeque<(usize, f64)>,
    acc: NodeAcc,
}

impl Node {
    fn outstanding(&self) -> usize {
        self.busy as usize + self.queue.len()
    }
}

/// What the cluster as a whole did in one interval (besides each node's `Measurement`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClusterInterval {
    pub completions: u64,
    pub pages: u64,
    pub page_rt_sum_s: f64,
    /// Request response times (dispatch to completion) of the interval, unsorted.
    #[serde(skip)]
    pub request_rts: Vec<f64>,
    /// Requests dropped after the redispatch found a full queue too.
    pub dropped: u64,
    pub redispatched: u64,
}

/// The simulation state.
pub struct ClusterSim {
    pub model: ClusterModel,
    picker: Picker,
    rng: SimRng,
    now: f64,
    events: Calendar<Ev>,
    sessions: Vec<Session>,
    nodes: Vec<Node>,
    /// Active requests on the host (all nodes), for `host_cores`.
    host_active: u64,
    last_t: f64,
    acc: ClusterInterval,
}

impl ClusterSim {
    pub fn new(model: ClusterModel, balancer: Balancer, seed: u64, max_clients: u64) -> Self {
        let nodes = (0..model.nodes)
            .map(|i| Node {
                speed: model.speed(i),
                max_clients,
                busy: 0,
                queue: VecDeque::new(),
                acc: NodeAcc::default(),
            })
            .collect();
        let mut s = ClusterSim {
            rng: SimRng::seed_from_u64(seed),
            sessions: vec![Session::default(); model.nodes * model.sessions_per_node],
            nodes,
            model,
            picker: Picker::new(balancer),
            now: 0.0,
            events: Calendar::default(),
            host_active: 0,
            last_t: 0.0,
            acc: ClusterInterval::default(),
        };
        for i in 0..s.sessions.len() {
            let t = s.think_time();
            s.push(t, Ev::ThinkEnd(i));
        }
        s
    }

    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }
    pub fn max_clients(&self, node: usize) -> u64 {
        self.nodes[node].max_clients
    }
    pub fn speed(&self, node: usize) -> f64 {
        self.nodes[node].speed
    }
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Set one node's MaxClients; a raise admits queued requests at once.
    pub fn set_max_clients(&mut self, node: usize, m: u64) {
        self.nodes[node].max_clients = m.max(1);
        self.admit(node);
    }

    fn push(&mut self, t: f64, e: Ev) {
        self.events.push(t, e);
    }

    fn think_time(&mut self) -> f64 {
        self.model
            .think
            .sample(self.model.think_mean_s, &mut self.rng)
    }

    fn advance_to(&mut self, t: f64) {
        let dt = t - self.last_t;
        if dt > 0.0 {
            let m = &self.model;
            let host_share = if m.host_cores > 0.0 && self.host_active > 0 {
                (m.host_cores / self.host_active as f64).min(1.0)
            } else {
                1.0
            };
            for n in &mut self.nodes {
                let mut cores = n.busy as f64 * host_share;
                if m.cores_per_node > 0.0 {
                    cores = cores.min(m.cores_per_node);
                }
                n.acc.busy_int += n.busy as f64 * dt;
                n.acc.cpu_int += cores * dt;
                n.acc.queue_int += n.queue.len() as f64 * dt;
            }
            self.last_t = t;
        }
        self.now = t;
    }

    /// The balancer's choice among all nodes, or among all but `not`.
    fn pick(&mut self, not: Option<usize>) -> usize {
        let nodes = &self.nodes;
        self.picker
            .pick(nodes.len(), not, |i| nodes[i].outstanding(), &mut self.rng)
    }

    /// Send session `s`'s next request through the balancer.
    fn dispatch(&mut self, s: usize) {
        self.sessions[s].req_start = self.now;
        let first = self.pick(None);
        if self.offer(first, s) {
            return;
        }
        self.acc.redispatched += 1;
        let second = self.pick(Some(first));
        if second != first && self.offer(second, s) {
            return;
        }
        // Refused twice: the page fails and the session thinks again.
        self.acc.dropped += 1;
        let t = self.now + self.think_time();
        self.push(t, Ev::ThinkEnd(s));
    }

    /// Node `i` takes the request at once, queues it, or refuses it (queue full).
    fn offer(&mut self, i: usize, s: usize) -> bool {
        let now = self.now;
        let node = &mut self.nodes[i];
        node.acc.arrivals += 1;
        if node.busy < node.max_clients && node.queue.is_empty() {
            node.acc.accepted += 1;
            self.start(i, s);
            true
        } else if node.queue.len() < self.model.accept_queue {
            node.queue.push_back((s, now));
            true
        } else {
            node.acc.dropped += 1;
            false
        }
    }

    fn start(&mut self, i: usize, s: usize) {
        let m = &self.model;
        let node = &mut self.nodes[i];
        node.busy += 1;
        self.host_active += 1;
        let work = m
            .service
            .sample(m.service_mean_s / node.speed, &mut self.rng);
        let mut cpu: f64 = 1.0;
        if m.cores_per_node > 0.0 {
            cpu = cpu.max(node.busy as f64 / m.cores_per_node);
        }
        if m.host_cores > 0.0 {
            cpu = cpu.max(self.host_active as f64 / m.host_cores);
        }
        let dur = work * cpu * (1.0 + m.contention_per_worker * node.max_clients as f64);
        node.acc.service_sum += dur;
        node.acc.started += 1;
        let t = self.now + dur;
        self.push(t, Ev::ReqDone(i, s));
    }

    fn admit(&mut self, i: usize) {
        while self.nodes[i].busy < self.nodes[i].max_clients {
            let Some((s, since)) = self.nodes[i].queue.pop_front() else {
                break;
            };
            let acc = &mut self.nodes[i].acc;
            acc.waits += self.now - since;
            acc.accepted += 1;
            self.start(i, s);
        }
    }

    fn handle(&mut self, e: Ev) {
        match e {
            Ev::ThinkEnd(s) => {
                let b = burst_length(self.model.burst_mean, self.model.burst_sd, &mut self.rng);
                self.sessions[s].left = b;
                self.sessions[s].page_start = self.now;
                self.dispatch(s);
            }
            Ev::ReqDone(i, s) => {
                self.nodes[i].busy -= 1;
                self.host_active -= 1;
                let rt = self.now - self.sessions[s].req_start;
                let acc = &mut self.nodes[i].acc;
                acc.completions += 1;
                acc.rt_sum += rt;
                acc.rts.push(rt);
                self.acc.completions += 1;
                self.acc.request_rts.push(rt);
                self.admit(i);
                self.sessions[s].left -= 1;
                if self.sessions[s].left > 0 {
                    self.dispatch(s);
                    return;
                }
                self.acc.pages += 1;
                self.acc.page_rt_sum_s += self.now - self.sessions[s].page_start;
                let t = self.now + self.think_time();
                self.push(t, Ev::ThinkEnd(s));
            }
        }
    }

    /// Simulate one sampling interval: the cluster's figures and one measurement per node.
    pub fn run_interval(&mut self) -> (ClusterInterval, Vec<Measurement>) {
        let end = self.now + self.model.interval_s;
        while let Some((t, e)) = self.events.pop_until(end) {
            self.advance_to(t);
            self.handle(e);
        }
        self.advance_to(end);
        let per_node = (0..self.nodes.len()).map(|i| self.measure(i)).collect();
        (std::mem::take(&mut self.acc), per_node)
    }

    /// Node `i`'s interval as its own sensors would report it: request response time
    /// (the node sees requests, not the client's pages), accept queue, workers, CPU.
    fn measure(&mut self, i: usize) -> Measurement {
        let m = &self.model;
        let dt = m.interval_s;
        let node = &mut self.nodes[i];
        let acc = std::mem::take(&mut node.acc);
        let mut rts = acc.rts;
        rts.sort_by(f64::total_cmp);
        let mean = |s: f64, n: u64| if n > 0 { s / n as f64 } else { 0.0 };
        let busy = acc.busy_int / dt;
        // CPU as a share of the machine the node runs on: its own cores, or the shared host.
        let cores = if m.host_cores > 0.0 {
            m.host_cores
        } else {
            m.cores_per_node
        };
        let cpu = if cores > 0.0 {
            (acc.cpu_int / dt / cores).min(1.0)
        } else {
            busy / node.max_clients.max(1) as f64
        };
        let rss = node.max_clients * dp::MEM_PER_WORKER_BYTES;
        Measurement {
            interval_s: dt,
            arrivals: acc.arrivals,
            completions: acc.completions,
            pages: acc.completions,
            mean_rt_s: mean(acc.rt_sum, acc.completions),
            p95_rt_s: rts
                .get(((rts.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0),
            service_time_s: mean(acc.service_sum, acc.started),
            accept_queue_len: acc.queue_int / dt,
            accept_queue_wait_s: mean(acc.waits, acc.accepted),
            dropped: acc.dropped,
            busy_workers: busy,
            idle_workers: (node.max_clients as f64 - busy).max(0.0),
            bytes_sent: 0,
            stages: Vec::new(),
            cpu_util: cpu,
            rss_bytes: rss,
            mem_free_bytes: dp::MEM_TOTAL_BYTES.saturating_sub(rss),
        }
    }
}
