//! What a worker sends and when, per mode: the closed loop refills each connection as soon as
//! it has room; the open loop hands each scheduled request to a free connection (a request
//! waits when none is free, and its latency still counts from its scheduled time: this is the
//! coordinated-omission correction); WAGON runs sessions of bursts separated by think times.
//! With several origins (see `mix.rs`), free connections are kept per origin.

use super::{Worker, WorkerSpec};
use crate::config::{Config, Mode};
use crate::mix::Requests;
use crate::rng::{for_worker, WorkloadRng};
use crate::sched::Schedule;
use crate::stats::record_ns;
use crate::wagon::Wagon;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

pub(crate) enum ModeState {
    Closed,
    Open {
        sched: Schedule,
        /// Connections with room for another request, by origin.
        idle: Vec<Vec<u32>>,
        /// The request picked for the next due time, waiting for a free connection of its
        /// origin (the ones due after it wait too: requests start in schedule order).
        next: Option<u32>,
    },
    Wagon(Box<WagonState>),
}

pub(crate) struct WagonState {
    model: Wagon,
    /// Arrival times; each session then draws from its own stream, so that a seed gives the
    /// same sessions whatever order the server answers in.
    arrivals: WorkloadRng,
    seed: u64,
    started: u64,
    /// Clicks left, random stream and origin, by session id.
    clicks: Vec<u32>,
    rngs: Vec<WorkloadRng>,
    origin: Vec<u32>,
    free_ids: Vec<u32>,
    live: u64,
    /// Next click of each thinking session.
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    /// Clicks that are due and wait for a free connection.
    pending: BinaryHeap<Reverse<(u64, u32)>>,
    next_arrival: u64,
    sessions_left: Option<u64>,
    /// Connections carrying no burst, by origin.
    free_slots: Vec<Vec<u32>>,
    /// With `hold_connection`: the slot each thinking session keeps, by session id.
    held: Vec<Option<u32>>,
}

impl WagonState {
    /// A new session: its own random stream, its number of clicks, its origin (drawn by
    /// weight when there are several).
    fn alloc(&mut self, worker: usize, reqs: &Requests) -> u32 {
        self.live += 1;
        let mut rng = for_worker(self.seed ^ self.started.wrapping_mul(0x9E37_79B9), worker);
        self.started += 1;
        let clicks = self.model.session_length(&mut rng);
        let origin = if reqs.origins.len() > 1 {
            reqs.origin_of[reqs.pick(&mut rng) as usize]
        } else {
            0
        };
        match self.free_ids.pop() {
            Some(id) => {
                self.clicks[id as usize] = clicks;
                self.rngs[id as usize] = rng;
                self.origin[id as usize] = origin;
                self.held[id as usize] = None;
                id
            }
            None => {
                self.clicks.push(clicks);
                self.rngs.push(rng);
                self.origin.push(origin);
                self.held.push(None);
                (self.clicks.len() - 1) as u32
            }
        }
    }

    fn release(&mut self, id: u32) {
        self.live -= 1;
        self.free_ids.push(id);
    }
}

impl ModeState {
    pub(crate) fn new(
        cfg: &Config,
        spec: &WorkerSpec,
        origins: usize,
        end_ns: u64,
    ) -> Result<ModeState, String> {
        let mut own = for_worker(cfg.seed ^ 0x5EED_5C4E_D01E, spec.index);
        Ok(match &cfg.mode {
            Mode::Closed => ModeState::Closed,
            Mode::Open { poisson, .. } => ModeState::Open {
                sched: Schedule::new(
                    spec.rate,
                    *poisson,
                    spec.offset_ns,
                    spec.requests,
                    end_ns,
                    own,
                ),
                idle: vec![Vec::new(); origins],
                next: None,
            },
            Mode::Wagon(params) => {
                // Each worker runs its own arrival process at 1/workers of the rate.
                let mut p = params.clone();
                p.session_interval *= spec.workers as f64;
                let model = Wagon::new(p)?;
                let first = (model.interarrival(&mut own) * 1e9) as u64;
                ModeState::Wagon(Box::new(WagonState {
                    model,
                    arrivals: own,
                    seed: cfg.seed,
                    started: 0,
                    clicks: Vec::new(),
                    rngs: Vec::new(),
                    origin: Vec::new(),
                    free_ids: Vec::new(),
                    live: 0,
                    timers: BinaryHeap::new(),
                    pending: BinaryHeap::new(),
                    next_arrival: first,
                    sessions_left: spec.sessions,
                    free_slots: vec![Vec::new(); origins],
                    held: Vec::new(),
                }))
            }
        })
    }
}

impl Worker<'_> {
    pub(crate) fn start(&mut self) {
        let n = self.conns.len() as u32;
        match &mut self.mode {
            ModeState::Closed => self.todo.extend(0..n),
            ModeState::Open { idle, .. } => {
                // The schedule carries the request count.
                self.budget = None;
                for ci in (0..n).rev() {
                    idle[self.conns[ci as usize].origin as usize].push(ci);
                }
                for c in &mut self.conns {
                    c.queued = true;
                }
            }
            ModeState::Wagon(w) => {
                for ci in (0..n).rev() {
                    w.free_slots[self.conns[ci as usize].origin as usize].push(ci);
                }
            }
        }
    }

    fn take_budget(&mut self) -> bool {
        match &mut self.budget {
            None => true,
            Some(0) => false,
            Some(b) => {
                *b -= 1;
                true
            }
        }
    }

    /// Starts what is due: open-loop requests, WAGON arrivals, clicks and bursts.
    pub(crate) fn generate(&mut self) {
        match self.mode {
            ModeState::Closed => {}
            ModeState::Open { .. } => self.dispatch(),
            ModeState::Wagon(_) => self.wagon(),
        }
    }

    fn push_idle(&mut self, ci: usize) {
        let depth = self.depth;
        let c = &mut self.conns[ci];
        if let ModeState::Open { idle, .. } = &mut self.mode {
            if !c.queued && c.flights.len() < depth {
                c.queued = true;
                idle[c.origin as usize].push(ci as u32);
            }
        }
    }

    fn dispatch(&mut self) {
        let now = self.now;
        let reqs = self.reqs;
        loop {
            let ModeState::Open { sched, idle, next } = &mut self.mode else {
                return;
            };
            let from_retry = !self.retry.is_empty();
            let intended = match self.retry.front() {
                Some(&t) => t,
                None => match sched.peek() {
                    Some(t) if t <= now => t,
                    _ => return,
                },
            };
            let req = *next.get_or_insert_with(|| reqs.pick(&mut self.rng));
            let Some(ci) = idle[reqs.origin_of[req as usize] as usize].pop() else {
                return;
            };
            *next = None;
            if from_retry {
                self.retry.pop_front();
            } else {
                sched.pop();
            }
            let ci = ci as usize;
            self.conns[ci].queued = false;
            if self.submit(ci, intended, req, true) {
                self.push_idle(ci);
            }
        }
    }

    /// Connection `ci` is open and has read what there was: give it more work.
    pub(crate) fn refill(&mut self, ci: usize) {
        match self.mode {
            ModeState::Closed => {
                while self.conns[ci].flights.len() < self.depth {
                    let intended = match self.retry.pop_front() {
                        Some(t) => t,
                        None if self.take_budget() => self.now,
                        None => break,
                    };
                    let req = self.reqs.pick_in(self.conns[ci].origin, &mut self.rng);
                    if !self.submit(ci, intended, req, false) {
                        break;
                    }
                }
            }
            ModeState::Open { .. } => self.push_idle(ci),
            ModeState::Wagon(_) => self.continue_burst(ci),
        }
    }

    /// The connection of `ci` was closed (it may still have work to reconnect for).
    pub(crate) fn closed(&mut self, ci: usize) {
        match self.mode {
            ModeState::Closed => self.todo.push(ci as u32),
            ModeState::Open { .. } => self.push_idle(ci),
            ModeState::Wagon(_) => {
                let c = &self.conns[ci];
                if !c.queued {
                } else if c.failed {
                    self.end_burst(ci, true);
                } else if c.burst_left > 0 {
                    self.todo.push(ci as u32);
                } else if c.flights.is_empty() {
                    self.end_burst(ci, false);
                }
            }
        }
    }

    pub(crate) fn mark_failed(&mut self, ci: usize) {
        if matches!(self.mode, ModeState::Wagon(_)) {
            self.conns[ci].failed = true;
        }
    }

    pub(crate) fn run_todo(&mut self) {
        if self.todo.is_empty() {
            return;
        }
        let mut list = std::mem::take(&mut self.todo);
        for &ci in &list {
            self.refill(ci as usize);
        }
        list.clear();
        if self.todo.is_empty() {
            self.todo = list;
        }
    }

    fn wagon(&mut self) {
        let now = self.now;
        let ModeState::Wagon(w) = &mut self.mode else {
            return;
        };
        while w.next_arrival <= now && w.sessions_left != Some(0) && self.budget != Some(0) {
            let id = w.alloc(self.spec.index, self.reqs);
            w.pending.push(Reverse((w.next_arrival, id)));
            self.stats.sessions_started += 1;
            w.next_arrival += (w.model.interarrival(&mut w.arrivals) * 1e9) as u64;
            if let Some(left) = &mut w.sessions_left {
                *left -= 1;
            }
        }
        while let Some(&Reverse((t, id))) = w.timers.peek() {
            if t > now {
                break;
            }
            w.timers.pop();
            w.pending.push(Reverse((t, id)));
        }
        // Clicks of sessions without a connection wait while no slot is free; a session that
        // holds its connection goes ahead of them.
        let mut waiting = Vec::new();
        loop {
            let ModeState::Wagon(w) = &mut self.mode else {
                return;
            };
            if w.pending.is_empty() || self.budget == Some(0) {
                w.pending.extend(waiting);
                return;
            }
            let Reverse((t, id)) = w.pending.pop().unwrap();
            let ci = match w.held[id as usize].take() {
                Some(ci) => ci as usize,
                None => match w.free_slots[w.origin[id as usize] as usize].pop() {
                    Some(ci) => ci as usize,
                    None => {
                        waiting.push(Reverse((t, id)));
                        continue;
                    }
                },
            };
            let len = w.model.burst_length(&mut w.rngs[id as usize]);
            let c = &mut self.conns[ci];
            c.queued = true;
            c.failed = false;
            c.session = id;
            c.burst_left = len;
            c.burst_sent = 0;
            c.burst_intended = t;
            c.slot_bytes = 0;
            c.rate_since = Some(t);
            self.continue_burst(ci);
        }
    }

    /// Sends the next requests of the burst on `ci`, or ends the burst when it is done.
    fn continue_burst(&mut self, ci: usize) {
        loop {
            let c = &self.conns[ci];
            if !c.queued || c.flights.len() >= self.depth || c.burst_left == 0 {
                break;
            }
            if !self.take_budget() {
                self.conns[ci].burst_left = 0;
                break;
            }
            let c = &mut self.conns[ci];
            let first = c.burst_sent == 0;
            let intended = if first { c.burst_intended } else { self.now };
            c.burst_left -= 1;
            c.burst_sent += 1;
            let id = c.session as usize;
            let origin = c.origin;
            let req = match &mut self.mode {
                ModeState::Wagon(w) => self.reqs.pick_in(origin, &mut w.rngs[id]),
                _ => self.reqs.pick_in(origin, &mut self.rng),
            };
            if !self.submit(ci, intended, req, first) {
                return;
            }
        }
        let c = &self.conns[ci];
        if c.queued && c.burst_left == 0 && c.flights.is_empty() {
            self.end_burst(ci, false);
        }
    }

    fn end_burst(&mut self, ci: usize, failed: bool) {
        self.record_rate(ci);
        let now = self.now;
        let c = &mut self.conns[ci];
        c.queued = false;
        c.failed = false;
        c.burst_left = 0;
        c.burst_sent = 0;
        let (id, t0) = (c.session, c.burst_intended);
        let ModeState::Wagon(w) = &mut self.mode else {
            return;
        };
        // A session that goes on thinking keeps its connection open when asked to (the server
        // may close it meanwhile; the next burst then reconnects).
        let hold = !failed && w.model.params.hold_connection && w.clicks[id as usize] > 1;
        if hold {
            w.held[id as usize] = Some(ci as u32);
        } else {
            w.free_slots[c.origin as usize].push(ci as u32);
        }
        if !hold {
            self.close(ci);
        }
        let ModeState::Wagon(w) = &mut self.mode else {
            return;
        };
        if failed {
            self.stats.pages_failed += 1;
            self.stats.sessions_failed += 1;
            w.release(id);
            return;
        }
        self.stats.pages += 1;
        record_ns(&mut self.stats.page_latency, now.saturating_sub(t0));
        w.clicks[id as usize] -= 1;
        if w.clicks[id as usize] == 0 {
            self.stats.sessions_completed += 1;
            w.release(id);
        } else {
            let think = (w.model.think_time(&mut w.rngs[id as usize]) * 1e9) as u64;
            w.timers.push(Reverse((now + think, id)));
        }
    }

    /// Nothing is left to do before the end.
    pub(crate) fn finished(&self) -> bool {
        if self.inflight > 0 || !self.retry.is_empty() {
            return false;
        }
        match &self.mode {
            ModeState::Closed => self.budget == Some(0),
            ModeState::Open { sched, .. } => sched.peek().is_none(),
            ModeState::Wagon(w) => {
                w.live == 0
                    && (w.sessions_left == Some(0)
                        || self.budget == Some(0)
                        || w.next_arrival >= self.end_ns)
            }
        }
    }

    /// When the mode next needs the loop awake (a scheduled request or click).
    pub(crate) fn next_event(&self) -> Option<u64> {
        match &self.mode {
            ModeState::Closed => None,
            ModeState::Open { sched, idle, next } => {
                let waiting = match next {
                    Some(req) => idle[self.reqs.origin_of[*req as usize] as usize].is_empty(),
                    None => idle.iter().all(Vec::is_empty),
                };
                if waiting {
                    None
                } else if let Some(&t) = self.retry.front() {
                    Some(t)
                } else {
                    sched.peek()
                }
            }
            ModeState::Wagon(w) => {
                let arrival = (w.sessions_left != Some(0) && self.budget != Some(0))
                    .then_some(w.next_arrival);
                let click = w.timers.peek().map(|r| r.0 .0);
                match (arrival, click) {
                    (Some(a), Some(c)) => Some(a.min(c)),
                    (a, c) => a.or(c),
                }
            }
        }
    }

    /// End of run: what is still in flight or due, and the bit rates of open connections.
    pub(crate) fn finish(&mut self) {
        for ci in 0..self.conns.len() {
            self.stats.incomplete += self.conns[ci].flights.len() as u64;
            let active = match self.mode {
                ModeState::Wagon(_) => self.conns[ci].queued,
                _ => true,
            };
            if active {
                self.record_rate(ci);
            }
        }
        self.stats.unsent += self.retry.len() as u64;
        let now = self.now;
        if let ModeState::Open { sched, .. } = &mut self.mode {
            self.stats.unsent += sched.drain_until(now);
        }
    }
}
