//! A seeded discrete-event simulation of paper 001's system: N closed-loop sessions think,
//! then fetch a page of `burst` objects over one keep-alive connection; a new connection
//! waits in an accept queue of size K for one of m workers (MaxClients); after the burst
//! the worker stays held by the idle connection until the next page or the keep-alive
//! timeout. Service slows down with CPU sharing (active requests beyond the cores) and with
//! the number of worker processes (paper 001: "once a physical resource saturates, further
//! increases in the logical resource ... add overhead"), which with the accept-queue wait
//! makes RT concave upward in MaxClients. With burst 1, no keep-alive and no contention it
//! is exactly the M/M/m/K/N model of `analytic`.

use super::calendar::Calendar;
use super::dist::{burst_length, Shape, SimRng};
use crate::defaults::plant as d;
use crate::types::Measurement;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The simulated server and workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerModel {
    pub sessions: usize,
    pub think_mean_s: f64,
    pub think: Shape,
    pub burst_mean: f64,
    /// 0 = every page has exactly `burst_mean` objects.
    pub burst_sd: f64,
    pub service_mean_s: f64,
    pub service: Shape,
    /// Extra work for the first request on a new connection (handshake, accept).
    pub connect_cost_s: f64,
    /// Cores shared by active requests; 0 = no CPU sharing.
    pub cores: f64,
    /// Slowdown per worker process: service x (1 + this x MaxClients).
    pub contention_per_worker: f64,
    pub accept_queue: usize,
    pub mem_per_worker_bytes: u64,
    pub mem_total_bytes: u64,
    pub interval_s: f64,
}

impl Default for ServerModel {
    fn default() -> ServerModel {
        ServerModel {
            sessions: d::SESSIONS,
            think_mean_s: d::THINK_MEAN_S,
            think: Shape::Lognormal { cv: 1.0 },
            burst_mean: crate::defaults::wagon::BURST_LENGTH_MEAN,
            burst_sd: crate::defaults::wagon::BURST_LENGTH_SD,
            service_mean_s: d::SERVICE_MEAN_S,
            service: Shape::Exponential,
            connect_cost_s: d::CONNECT_COST_S,
            cores: d::CORES,
            contention_per_worker: d::CONTENTION_PER_WORKER,
            accept_queue: d::ACCEPT_QUEUE,
            mem_per_worker_bytes: d::MEM_PER_WORKER_BYTES,
            mem_total_bytes: d::MEM_TOTAL_BYTES,
            interval_s: d::INTERVAL_S,
        }
    }
}

impl ServerModel {
    /// Paper 001's M/M/m/K/N assumptions: exponential think and service, one object per
    /// page, no keep-alive hold (set by the caller), no contention.
    pub fn mmmkn(sessions: usize, think_mean_s: f64, service_mean_s: f64, k: usize) -> Self {
        ServerModel {
            sessions,
            think_mean_s,
            think: Shape::Exponential,
            burst_mean: 1.0,
            burst_sd: 0.0,
            service_mean_s,
            service: Shape::Exponential,
            connect_cost_s: 0.0,
            cores: 0.0,
            contention_per_worker: 0.0,
            accept_queue: k,
            ..ServerModel::default()
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        self.think.validate()?;
        self.service.validate()?;
        let pos = [
            ("think_mean_s", self.think_mean_s),
            ("service_mean_s", self.service_mean_s),
            ("interval_s", self.interval_s),
            ("burst_mean", self.burst_mean),
        ];
        for (n, v) in pos {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{n} must be positive, got {v}"));
            }
        }
        if self.sessions == 0 {
            return Err("sessions must be at least 1".into());
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    ThinkEnd(usize),
    ReqDone(usize),
    /// Keep-alive expiry for a session's connection, valid if the generation matches.
    KaExpire(usize, u64),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Conn {
    #[default]
    None,
    Queued,
    Active,
    /// Idle keep-alive connection holding a worker.
    Held,
}

#[derive(Clone, Debug, Default)]
struct Session {
    conn: Conn,
    gen: u64,
    left: u32,
    page_start: f64,
    new_conn: bool,
}

/// Per-interval accumulators.
#[derive(Default)]
struct Acc {
    arrivals: u64,
    completions: u64,
    rts: Vec<f64>,
    started: u64,
    service_sum: f64,
    waits: f64,
    accepted: u64,
    dropped: u64,
    busy_int: f64,
    active_int: f64,
    queue_int: f64,
}

/// The simulation state.
pub struct ServerSim {
    pub model: ServerModel,
    rng: SimRng,
    now: f64,
    events: Calendar<Ev>,
    sessions: Vec<Session>,
    queue: VecDeque<(usize, f64)>,
    max_clients: u64,
    keepalive_s: f64,
    load: f64,
    occupied: u64,
    active: u64,
    last_t: f64,
    acc: Acc,
}

impl ServerSim {
    pub fn new(model: ServerModel, seed: u64, max_clients: u64, keepalive_ms: u64) -> Self {
        let mut s = ServerSim {
            rng: SimRng::seed_from_u64(seed),
            sessions: vec![Session::default(); model.sessions],
            model,
            now: 0.0,
            events: Calendar::default(),
            queue: VecDeque::new(),
            max_clients,
            keepalive_s: keepalive_ms as f64 / 1000.0,
            load: 1.0,
            occupied: 0,
            active: 0,
            last_t: 0.0,
            acc: Acc::default(),
        };
        for i in 0..s.sessions.len() {
            let t = s.think_time();
            s.push(t, Ev::ThinkEnd(i));
        }
        s
    }

    pub fn set_max_clients(&mut self, m: u64) {
        self.max_clients = m;
        self.admit();
    }
    pub fn set_keepalive_ms(&mut self, ms: u64) {
        self.keepalive_s = ms as f64 / 1000.0;
    }
    /// Load multiplier: think times are divided by it from now on.
    pub fn set_load(&mut self, f: f64) {
        self.load = f.max(1e-6);
    }
    pub fn now(&self) -> f64 {
        self.now
    }

    fn push(&mut self, t: f64, e: Ev) {
        self.events.push(t, e);
    }

    fn think_time(&mut self) -> f64 {
        let mean = self.model.think_mean_s / self.load;
        self.model.think.sample(mean, &mut self.rng)
    }

    fn advance_to(&mut self, t: f64) {
        let dt = t - self.last_t;
        if dt > 0.0 {
            self.acc.busy_int += self.occupied as f64 * dt;
            self.acc.active_int += self.active as f64 * dt;
            self.acc.queue_int += self.queue.len() as f64 * dt;
            self.last_t = t;
        }
        self.now = t;
    }

    /// Start one request of session `i` on its worker.
    fn start_request(&mut self, i: usize) {
        self.active += 1;
        let m = &self.model;
        let mut work = m.service.sample(m.service_mean_s, &mut self.rng);
        if self.sessions[i].new_conn {
            work += m.connect_cost_s;
            self.sessions[i].new_conn = false;
        }
        let cpu = if m.cores > 0.0 {
            (self.active as f64 / m.cores).max(1.0)
        } else {
            1.0
        };
        let dur = work * cpu * (1.0 + m.contention_per_worker * self.max_clients as f64);
        self.acc.service_sum += dur;
        self.acc.started += 1;
        self.sessions[i].conn = Conn::Active;
        let t = self.now + dur;
        self.push(t, Ev::ReqDone(i));
    }

    /// Give free workers to queued connections.
    fn admit(&mut self) {
        while self.occupied < self.max_clients {
            let Some((i, since)) = self.queue.pop_front() else {
                break;
            };
            self.acc.waits += self.now - since;
            self.acc.accepted += 1;
            self.occupied += 1;
            self.start_request(i);
        }
    }

    fn release(&mut self, i: usize) {
        self.sessions[i].conn = Conn::None;
        self.occupied -= 1;
        self.admit();
    }

    fn handle(&mut self, e: Ev) {
        match e {
            Ev::ThinkEnd(i) => {
                let b = burst_length(self.model.burst_mean, self.model.burst_sd, &mut self.rng);
                self.acc.arrivals += u64::from(b);
                let s = &mut self.sessions[i];
                s.left = b;
                s.page_start = self.now;
                s.gen += 1;
                if s.conn == Conn::Held {
                    self.start_request(i);
                } else if self.occupied < self.max_clients && self.queue.is_empty() {
                    s.new_conn = true;
                    self.acc.accepted += 1;
                    self.occupied += 1;
                    self.start_request(i);
                } else if self.queue.len() < self.model.accept_queue {
                    s.new_conn = true;
                    s.conn = Conn::Queued;
                    self.queue.push_back((i, self.now));
                } else {
                    self.acc.dropped += 1;
                    let t = self.now + self.think_time();
                    self.push(t, Ev::ThinkEnd(i));
                }
            }
            Ev::ReqDone(i) => {
                self.active -= 1;
                self.acc.completions += 1;
                self.sessions[i].left -= 1;
                if self.sessions[i].left > 0 {
                    self.start_request(i);
                    return;
                }
                self.acc.rts.push(self.now - self.sessions[i].page_start);
                let t = self.now + self.think_time();
                self.push(t, Ev::ThinkEnd(i));
                // A worker beyond a lowered MaxClients retires instead of holding.
                if self.keepalive_s > 0.0 && self.occupied <= self.max_clients {
                    self.sessions[i].conn = Conn::Held;
                    let g = self.sessions[i].gen;
                    let t = self.now + self.keepalive_s;
                    self.push(t, Ev::KaExpire(i, g));
                } else {
                    self.release(i);
                }
            }
            Ev::KaExpire(i, g) => {
                if self.sessions[i].gen == g && self.sessions[i].conn == Conn::Held {
                    self.release(i);
                }
            }
        }
    }

    /// Simulate one sampling interval and report it.
    pub fn run_interval(&mut self) -> Measurement {
        let end = self.now + self.model.interval_s;
        while let Some((t, e)) = self.events.pop_until(end) {
            self.advance_to(t);
            self.handle(e);
        }
        self.advance_to(end);
        self.measure()
    }

    fn measure(&mut self) -> Measurement {
        let acc = std::mem::take(&mut self.acc);
        let dt = self.model.interval_s;
        let m = &self.model;
        let mut rts = acc.rts;
        rts.sort_by(f64::total_cmp);
        let mean = |s: f64, n: u64| if n > 0 { s / n as f64 } else { 0.0 };
        let busy = acc.busy_int / dt;
        let cpu = if m.cores > 0.0 {
            (acc.active_int / dt / m.cores).min(1.0)
        } else {
            acc.active_int / dt / (self.max_clients.max(1) as f64)
        };
        let rss = self.max_clients * m.mem_per_worker_bytes;
        Measurement {
            interval_s: dt,
            arrivals: acc.arrivals,
            completions: acc.completions,
            pages: rts.len() as u64,
            mean_rt_s: mean(rts.iter().sum(), rts.len() as u64),
            p95_rt_s: rts
                .get(((rts.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0.0),
            service_time_s: mean(acc.service_sum, acc.started),
            accept_queue_len: acc.queue_int / dt,
            accept_queue_wait_s: mean(acc.waits, acc.accepted),
            dropped: acc.dropped,
            busy_workers: busy,
            idle_workers: (self.max_clients as f64 - busy).max(0.0),
            bytes_sent: 0,
            stages: Vec::new(),
            cpu_util: cpu,
            rss_bytes: rss,
            mem_free_bytes: m.mem_total_bytes.saturating_sub(rss),
        }
    }
}
