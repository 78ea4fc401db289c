//! A seeded discrete-event simulation of paper 002's pipeline: N conforming connections
//! send a request, wait for the response and think; each request passes accept (skipped on
//! a kept-alive connection), receive, data process and send, each stage a FIFO task list
//! served by its own pool of threads. Per interval it reports what KETA's load monitor
//! reads: per-stage queue length, wait and utilisation, bytes (W) and requests (R).

use super::dist::{Shape, SimRng};
use crate::defaults::keta;
use crate::types::{stage_knob, Knobs, Measurement, StageMeasurement};
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// The simulated pipeline and its load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineModel {
    pub connections: usize,
    pub think_mean_s: f64,
    /// Mean service time of each stage, accept..send (send is per mean object).
    pub stage_mean_s: [f64; 4],
    /// Probability a request arrives on a kept-alive connection (skips accept).
    pub keepalive_share: f64,
    pub object_mean_bytes: f64,
    pub interval_s: f64,
}

impl Default for PipelineModel {
    fn default() -> Self {
        // Ours: a funnel, send heaviest (paper 002 section 4.2, "Burden Analysis").
        PipelineModel {
            connections: 300,
            think_mean_s: 0.5,
            stage_mean_s: [0.0005, 0.002, 0.004, 0.012],
            keepalive_share: 0.7,
            object_mean_bytes: 15_000.0,
            interval_s: 1.0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    Done(usize, usize),
}

#[derive(Default, Clone)]
struct StageAcc {
    queue_int: f64,
    busy_int: f64,
    waits: f64,
    dequeued: u64,
}

/// The simulation state.
pub struct PipelineSim {
    pub model: PipelineModel,
    rng: SimRng,
    now: f64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    threads: [u64; 4],
    busy: [u64; 4],
    queues: [VecDeque<(usize, f64)>; 4],
    bytes: Vec<u64>,
    acc: [StageAcc; 4],
    last_t: f64,
    requests: u64,
    bytes_sent: u64,
    rt_sum: f64,
    started: Vec<f64>,
}

/// Event times are kept in integer nanoseconds so the heap orders them exactly.
fn ns(t: f64) -> u64 {
    (t * 1e9) as u64
}

impl PipelineSim {
    pub fn new(model: PipelineModel, seed: u64, threads: [u64; 4]) -> Self {
        let n = model.connections;
        let mut s = PipelineSim {
            model,
            rng: SimRng::seed_from_u64(seed),
            now: 0.0,
            seq: 0,
            events: BinaryHeap::new(),
            threads,
            busy: [0; 4],
            queues: Default::default(),
            bytes: vec![0; n],
            acc: Default::default(),
            last_t: 0.0,
            requests: 0,
            bytes_sent: 0,
            rt_sum: 0.0,
            started: vec![0.0; n],
        };
        for c in 0..n {
            let t = Shape::Exponential.sample(s.model.think_mean_s, &mut s.rng);
            s.push(t, Ev::Arrive(c));
        }
        s
    }

    pub fn threads(&self) -> [u64; 4] {
        self.threads
    }

    /// Apply `threads_<stage>` knobs (missing ones keep their value).
    pub fn apply(&mut self, k: &Knobs) {
        for (i, name) in keta::STAGES.iter().enumerate() {
            if let Some(v) = k.get(&stage_knob(name)) {
                self.threads[i] = v.max(1);
            }
        }
        for st in 0..4 {
            self.dispatch(st);
        }
    }

    pub fn knobs(&self) -> Knobs {
        let mut k = Knobs::new();
        for (i, name) in keta::STAGES.iter().enumerate() {
            k.set(&stage_knob(name), self.threads[i]);
        }
        k
    }

    fn push(&mut self, t: f64, e: Ev) {
        self.seq += 1;
        self.events.push(Reverse((ns(t), self.seq, e)));
    }

    fn enqueue(&mut self, st: usize, c: usize) {
        self.queues[st].push_back((c, self.now));
        self.dispatch(st);
    }

    fn dispatch(&mut self, st: usize) {
        while self.busy[st] < self.threads[st] {
            let Some((c, since)) = self.queues[st].pop_front() else {
                break;
            };
            self.acc[st].waits += self.now - since;
            self.acc[st].dequeued += 1;
            self.busy[st] += 1;
            let mut mean = self.model.stage_mean_s[st];
            if st == 3 {
                mean *= self.bytes[c] as f64 / self.model.object_mean_bytes;
            }
            let t = self.now + Shape::Exponential.sample(mean, &mut self.rng);
            self.push(t, Ev::Done(st, c));
        }
    }

    fn advance_to(&mut self, t: f64) {
        let dt = t - self.last_t;
        if dt > 0.0 {
            for st in 0..4 {
                self.acc[st].queue_int += self.queues[st].len() as f64 * dt;
                self.acc[st].busy_int += self.busy[st] as f64 * dt;
            }
            self.last_t = t;
        }
        self.now = t;
    }

    fn handle(&mut self, e: Ev) {
        match e {
            Ev::Arrive(c) => {
                self.started[c] = self.now;
                let size = Shape::Exponential.sample(self.model.object_mean_bytes, &mut self.rng);
                self.bytes[c] = size.max(1.0) as u64;
                let kept = self.rng.random::<f64>() < self.model.keepalive_share;
                self.enqueue(if kept { 1 } else { 0 }, c);
            }
            Ev::Done(st, c) => {
                self.busy[st] -= 1;
                if st < 3 {
                    self.enqueue(st + 1, c);
                } else {
                    self.requests += 1;
                    self.bytes_sent += self.bytes[c];
                    self.rt_sum += self.now - self.started[c];
                    let t = self.now
                        + Shape::Exponential.sample(self.model.think_mean_s, &mut self.rng);
                    self.push(t, Ev::Arrive(c));
                }
                self.dispatch(st);
            }
        }
    }

    /// Simulate one interval and report it.
    pub fn run_interval(&mut self) -> Measurement {
        let end = self.now + self.model.interval_s;
        while let Some(Reverse((t, _, _))) = self.events.peek() {
            if *t > ns(end) {
                break;
            }
            let Some(Reverse((t, _, e))) = self.events.pop() else {
                break;
            };
            self.advance_to(t as f64 / 1e9);
            self.handle(e);
        }
        self.advance_to(end);
        let dt = self.model.interval_s;
        let acc = std::mem::take(&mut self.acc);
        let stages = (0..4)
            .map(|st| StageMeasurement {
                name: keta::STAGES[st].to_string(),
                threads: self.threads[st],
                queue_len: acc[st].queue_int / dt,
                wait_s: if acc[st].dequeued > 0 {
                    acc[st].waits / acc[st].dequeued as f64
                } else {
                    0.0
                },
                utilisation: (acc[st].busy_int / dt / self.threads[st].max(1) as f64).min(1.0),
            })
            .collect();
        let reqs = std::mem::take(&mut self.requests);
        let rt = std::mem::take(&mut self.rt_sum);
        Measurement {
            interval_s: dt,
            completions: reqs,
            pages: reqs,
            mean_rt_s: if reqs > 0 { rt / reqs as f64 } else { 0.0 },
            bytes_sent: std::mem::take(&mut self.bytes_sent),
            stages,
            ..Measurement::default()
        }
    }
}
