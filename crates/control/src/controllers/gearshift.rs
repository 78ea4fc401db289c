//! `gearshift`: our controller, built for what defeats the paper's ones -- noisy response
//! times and a load that drifts.
//!
//! * SPSA on y = ln RT over (ln MaxClients, ln KeepAliveTimeout): every iteration applies
//!   theta + c*Delta, then theta - c*Delta (Delta random +-1 per knob, the "paired
//!   perturbation"), each for `dwell` intervals with the first discarded, and estimates the
//!   gradient from the difference. Log space makes the steps relative and the multiplicative
//!   noise additive; both knobs move at the cost of one difference (paper 001's future
//!   work; `tune_keepalive`, off by default -- see defaults).
//! * Steps are gated by signal to noise: the noise of y is estimated from the spread inside
//!   each half, and a step is taken only when the difference exceeds `snr_gate` standard
//!   errors -- on a flat or noisy stretch it holds still instead of random-walking (what
//!   sinks Newton's method in the paper). Gains are constant, so it keeps tracking drift.
//! * Rest: when paired perturbations keep finding no difference, the curve is flat there and
//!   probing only costs (workers forked and retired, a knob that random-walks); the knob
//!   holds still, watched by a CUSUM on ln RT (controllers/rest.rs) that resumes the search
//!   when RT rises beyond the noise. The fast path and the idle trim still act at rest (the
//!   trim only once many idle workers persisted).
//! * Fast path: when accept-queue wait dominates RT (or connections are dropped), RT is on
//!   the steep left flank of paper 001's curve, so MaxClients grows at once to the busy
//!   workers plus the waiting connections (at least by `fast_growth`) instead of waiting
//!   for a gradient; and the search is kept above the busy workers, so its perturbations
//!   never dip into the accept-queue cliff (whose slow backlog would bias the gradient).
//!   While the engine is still starting the workers MaxClients allows (prefork), the fast
//!   path waits for them instead of growing MaxClients further.
//! * Spare workers (prefork, worker): an accept queue while the engine is still starting
//!   workers is a burst outrunning Apache's spawn rate, not too small a MaxClients; the
//!   MinSpare/MaxSpare floor is raised instead (controllers/spares.rs).
//! * An interval far longer or shorter than usual means the machine stalled (the sampling
//!   master itself ran late); the backlog it leaves is no sign of too few workers, so the
//!   search holds for `dwell` intervals.
//! * With the CPU saturated (paper 001's heuristic: the optimum is where the bottleneck
//!   saturates) more workers only add contention: the floor is off and the fast path is
//!   gentle, which breaks the loop slow service -> more busy workers -> more workers.
//! * For a staged pipeline it also moves one thread per interval from the least to the most
//!   pressed stage (utilisation plus queue per thread) within the total M.

use super::rest::{Cusum, Rest};
use super::spares::{SpareParams, Spares};
use crate::defaults::{gearshift as d, keta};
use crate::types::{
    stage_knob, Controller, Knobs, Measurement, KEEPALIVE_TIMEOUT_MS, MAX_CLIENTS, MIN_SPARE,
};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GearshiftParams {
    /// Perturbation of ln MaxClients and of ln KeepAliveTimeout.
    pub perturbation: [f64; 2],
    /// Largest step per iteration of ln MaxClients and of ln KeepAliveTimeout.
    pub max_log_step: [f64; 2],
    pub gain: f64,
    pub snr_gate: f64,
    pub dwell: usize,
    pub queue_share: f64,
    pub fast_growth: f64,
    /// MaxClients is never proposed below busy workers x (1 + this).
    pub floor_margin: f64,
    /// CPU utilisation taken as saturated: more workers then only add contention, so the
    /// floor is off and the fast path grows by `floor_margin` only.
    pub cpu_saturated: f64,
    /// With no accept-queue wait and more idle than this share of busy workers, the search
    /// centre moves down by `trim_step` (ln) per interval: idle workers cannot shorten RT,
    /// they can only add contention.
    pub idle_share: f64,
    pub trim_step: f64,
    pub tune_keepalive: bool,
    /// An interval longer than this many usual ones (or shorter by as much) is a stall of
    /// the machine: hold for `dwell` intervals.
    pub stall_factor: f64,
    /// Flat iterations in a row before the knob rests (0: never rests).
    pub rest_after: usize,
    /// The CUSUM watching RT at rest: allowance, threshold and clip in noise sd.
    pub cusum_k: f64,
    pub cusum_h: f64,
    pub cusum_clip: f64,
    /// Intervals the trim condition must hold in a row before it acts at rest.
    pub rest_trim_patience: usize,
    /// Spare workers: calm intervals before the floor is lowered, and its largest share
    /// of MaxClients.
    pub spare_calm_intervals: usize,
    pub spare_max_share: f64,
    /// Noise of ln RT assumed until measured.
    pub initial_noise: f64,
    /// Total threads for the staged pipeline.
    pub max_threads: u64,
    /// Seed of the perturbation signs (a controller is deterministic given its inputs).
    pub seed: u64,
}

impl Default for GearshiftParams {
    fn default() -> Self {
        GearshiftParams {
            perturbation: [d::PERTURBATION, d::PERTURBATION_KEEPALIVE],
            max_log_step: [d::MAX_LOG_STEP, d::MAX_LOG_STEP_KEEPALIVE],
            gain: d::GAIN,
            snr_gate: d::SNR_GATE,
            dwell: d::DWELL,
            queue_share: d::QUEUE_SHARE,
            fast_growth: d::FAST_GROWTH,
            floor_margin: d::FLOOR_MARGIN,
            cpu_saturated: d::CPU_SATURATED,
            idle_share: d::IDLE_SHARE,
            trim_step: d::TRIM_STEP,
            tune_keepalive: d::TUNE_KEEPALIVE,
            stall_factor: d::STALL_FACTOR,
            rest_after: d::REST_AFTER,
            cusum_k: d::CUSUM_K,
            cusum_h: d::CUSUM_H,
            cusum_clip: d::CUSUM_CLIP,
            rest_trim_patience: d::REST_TRIM_PATIENCE,
            spare_calm_intervals: d::SPARE_CALM_INTERVALS,
            spare_max_share: d::SPARE_MAX_SHARE,
            initial_noise: 0.15,
            max_threads: keta::MAX_THREADS,
            seed: 0x6765_6172,
        }
    }
}

pub struct Gearshift {
    p: GearshiftParams,
    rng: Xoshiro256PlusPlus,
    /// ln of (MaxClients, KeepAliveTimeout ms); None until the first step.
    theta: Option<[f64; 2]>,
    delta: [f64; 2],
    plus: bool,
    seen: usize,
    half: Vec<f64>,
    y_plus: f64,
    n_plus: usize,
    var: Option<f64>,
    /// MaxClients last proposed, to notice when bounds applied something else.
    proposed: Option<u64>,
    burst: Option<f64>,
    /// The last interval lengths (seconds; their median is the usual one) and the intervals
    /// left to hold after a stall.
    recent_dt: std::collections::VecDeque<f64>,
    hold: usize,
    /// Paired perturbations in a row that found no difference above the gate.
    flat: usize,
    /// Set while the knob rests.
    rest: Option<Rest>,
    /// Intervals in a row the idle-trim condition held.
    trim_run: usize,
    spares: Spares,
}

impl Gearshift {
    pub fn new(p: GearshiftParams) -> Gearshift {
        let rng = Xoshiro256PlusPlus::seed_from_u64(p.seed);
        Gearshift {
            p,
            rng,
            theta: None,
            delta: [1.0, 1.0],
            plus: true,
            seen: 0,
            half: Vec::new(),
            y_plus: 0.0,
            n_plus: 0,
            var: None,
            proposed: None,
            burst: None,
            recent_dt: std::collections::VecDeque::new(),
            hold: 0,
            flat: 0,
            rest: None,
            trim_run: 0,
            spares: Spares::default(),
        }
    }

    fn sign(&self) -> f64 {
        if self.rest.is_some() {
            0.0
        } else if self.plus {
            1.0
        } else {
            -1.0
        }
    }

    fn new_iteration(&mut self) {
        for dlt in self.delta.iter_mut() {
            *dlt = if self.rng.random::<bool>() { 1.0 } else { -1.0 };
        }
        self.plus = true;
        self.seen = 0;
        self.half.clear();
    }

    /// Fold a finished half's samples into the noise estimate; return their median (one
    /// interval's spike -- a burst of slow pages -- must not steer a step).
    fn close_half(&mut self) -> Option<(f64, usize)> {
        let n = self.half.len();
        if n == 0 {
            return None;
        }
        let mean = self.half.iter().sum::<f64>() / n as f64;
        let mut sorted = self.half.clone();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        if n >= 2 {
            let v = self.half.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            self.var = Some(match self.var {
                Some(old) => 0.8 * old + 0.2 * v,
                None => v,
            });
        }
        self.half.clear();
        Some((median, n))
    }

    /// The cost of one interval: ln RT from paper 001's Eq. (1), AQT + BL x ST, with the
    /// burst length smoothed over many intervals -- service time is averaged over every
    /// request, not every page, so this is far less noisy than the mean page RT.
    fn cost(&mut self, m: &Measurement) -> Option<f64> {
        if m.pages == 0 || m.completions == 0 {
            return None;
        }
        let bl = m.completions as f64 / m.pages as f64;
        let bl = match self.burst {
            Some(b) => 0.95 * b + 0.05 * bl,
            None => bl,
        };
        self.burst = Some(bl);
        let rt = m.accept_queue_wait_s + bl * m.service_time_s;
        (rt > 0.0).then(|| rt.ln())
    }

    #[allow(clippy::needless_range_loop)] // four arrays indexed by knob
    fn spsa(&mut self, m: &Measurement, theta: &mut [f64; 2], dims: usize) {
        let y = self.cost(m);
        if let (true, Some(y)) = (self.seen > 0, y) {
            self.half.push(y);
        }
        self.seen += 1;
        if self.seen < self.p.dwell.max(2) {
            return;
        }
        self.seen = 0;
        let Some((mean, n)) = self.close_half() else {
            return; // no pages: measure this half again
        };
        if self.plus {
            self.y_plus = mean;
            self.n_plus = n;
            self.plus = false;
            return;
        }
        let diff = self.y_plus - mean;
        let sd = self.var.unwrap_or(self.p.initial_noise.powi(2)).sqrt();
        let se = sd * (1.0 / self.n_plus as f64 + 1.0 / n as f64).sqrt();
        if diff.abs() > self.p.snr_gate * se {
            for i in 0..dims {
                let g = diff / (2.0 * self.p.perturbation[i] * self.delta[i]);
                let lim = self.p.max_log_step[i];
                theta[i] -= (self.p.gain * g).clamp(-lim, lim);
            }
            self.flat = 0;
        } else {
            self.flat += 1;
            if self.p.rest_after > 0 && self.flat >= self.p.rest_after {
                // Skip the interval in which the knob returns from its last probe.
                self.rest = Some(Rest::new(1));
            }
        }
        self.new_iteration();
    }

    /// One interval at rest: watch RT; resume the search when it has risen.
    fn watch(&mut self, m: &Measurement) {
        let Some(y) = self.cost(m) else {
            return;
        };
        let sd = self.var.unwrap_or(self.p.initial_noise.powi(2)).sqrt();
        let c = Cusum {
            reference: d::REST_REFERENCE.max(self.p.dwell),
            k: self.p.cusum_k,
            h: self.p.cusum_h,
            clip: self.p.cusum_clip,
        };
        if self.rest.as_mut().is_some_and(|r| r.drifted(y, sd, c)) {
            self.wake();
        }
    }

    /// Leave rest: the search starts a fresh iteration from where the knob is.
    fn wake(&mut self) {
        self.rest = None;
        self.flat = 0;
        self.new_iteration();
    }

    /// Whether this interval's length says the machine stalled (the sampling master was not
    /// scheduled on time), judged against the median of the last intervals, which a run
    /// of stalls (a mean would follow them) does not move.
    fn stalled(&mut self, dt: f64) -> bool {
        if dt.is_nan() || dt <= 0.0 {
            return false;
        }
        let mut sorted: Vec<f64> = self.recent_dt.iter().copied().collect();
        if self.recent_dt.len() == 15 {
            self.recent_dt.pop_front();
        }
        self.recent_dt.push_back(dt);
        if sorted.is_empty() {
            return false;
        }
        sorted.sort_by(f64::total_cmp);
        let usual = sorted[sorted.len() / 2];
        let f = self.p.stall_factor.max(1.0);
        dt > f * usual || dt < usual / f
    }

    /// Move one thread towards the most pressed stage (pipeline only).
    fn stages(&self, m: &Measurement, current: &Knobs, out: &mut Knobs) {
        let mut p = Vec::new();
        for s in &m.stages {
            let Some(t) = current.get(&stage_knob(&s.name)) else {
                continue;
            };
            p.push((
                s.name.as_str(),
                t,
                s.utilisation + s.queue_len / t.max(1) as f64,
                s.queue_len,
            ));
        }
        let Some(hi) = p.iter().max_by(|a, b| a.2.total_cmp(&b.2)) else {
            return;
        };
        if hi.3 < 0.5 {
            return;
        }
        let total: u64 = p.iter().map(|x| x.1).sum();
        if total < self.p.max_threads {
            out.set(&stage_knob(hi.0), hi.1 + 1);
            return;
        }
        let lo = p
            .iter()
            .filter(|x| x.1 > 1 && x.0 != hi.0)
            .min_by(|a, b| a.2.total_cmp(&b.2));
        if let Some(lo) = lo {
            // Moving a thread must leave the donor less pressed than the receiver.
            let lo_after = lo.2 * lo.1 as f64 / (lo.1 - 1) as f64;
            if lo_after < hi.2 {
                out.set(&stage_knob(lo.0), lo.1 - 1);
                out.set(&stage_knob(hi.0), hi.1 + 1);
            }
        }
    }
}

impl Controller for Gearshift {
    fn name(&self) -> &'static str {
        "gearshift"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let mut out = Knobs::new();
        if !m.stages.is_empty() {
            self.stages(m, current, &mut out);
        }
        let Some(mc) = current.get(MAX_CLIENTS) else {
            return out;
        };
        let ka = current.get(KEEPALIVE_TIMEOUT_MS);
        let dims = if self.p.tune_keepalive && ka.is_some() {
            2
        } else {
            1
        };
        let mut theta = match self.theta {
            Some(t) => t,
            None => {
                self.new_iteration();
                [
                    (mc.max(1) as f64).ln(),
                    (ka.unwrap_or(1).max(1) as f64).ln(),
                ]
            }
        };
        if self.proposed.is_some_and(|p| p != mc) {
            // Bounds clipped the last proposal: search from where the plant really is.
            theta[0] =
                (mc.max(1) as f64).ln() - self.p.perturbation[0] * self.sign() * self.delta[0];
        }
        let queued = m.pages > 0 && m.accept_queue_wait_s > self.p.queue_share * m.mean_rt_s;
        // Workers the engine has yet to start (prefork forks at most 32 a second, as Apache
        // does): until they exist a larger MaxClients cannot shorten the queue, and growing
        // on the queue they leave would run MaxClients up to its bound (seen on the real
        // server under WAGON load). Engines that report workers as MaxClients minus busy
        // (threads, the simulator) are never short.
        let live = m.busy_workers + m.idle_workers;
        let starting = live > 0.0 && live < (1.0 - self.p.floor_margin) * mc as f64;
        if self.stalled(m.interval_s) {
            self.hold = self.p.dwell.max(2);
        }
        let holding = self.hold > 0;
        if !holding {
            let short = starting && queued && m.accept_queue_len >= 1.0 && m.idle_workers < 1.0;
            let sp = SpareParams {
                calm_intervals: self.p.spare_calm_intervals,
                max_share: self.p.spare_max_share,
            };
            self.spares.step(m, short, mc, current, sp, &mut out);
        }
        if holding {
            // A stalled machine (seen on the shared bench box: the master late by seconds)
            // piles up connections whatever MaxClients is; growing on that backlog would
            // ratchet MaxClients up at every stall. Hold while it drains.
            self.hold -= 1;
            self.new_iteration();
        } else if starting && (queued || m.dropped > 0) {
            // Hold the search where it is; its samples are the queue's, not MaxClients'.
            self.new_iteration();
        } else if (queued && m.accept_queue_len >= 1.0) || m.dropped > 0 {
            // Left flank: a worker for every waiting connection, at least fast_growth times
            // more, at most twice; then resume the search from there. A queue of a few
            // connections (a burst a little larger than the idle workers; seen on the real
            // server at rest: 9 ms of wait, MaxClients 243) grows it by floor_margin only:
            // fast_growth is for the cliff, not for a blip beside the optimum.
            let cur = mc.max(1) as f64;
            let blip = m.accept_queue_len <= self.p.floor_margin * cur;
            let want = (m.busy_workers + m.accept_queue_len).min(2.0 * cur);
            let gentle = cur * (1.0 + self.p.floor_margin);
            theta[0] = if blip {
                gentle.max(want)
            } else if m.cpu_util >= self.p.cpu_saturated {
                gentle
            } else {
                (cur * self.p.fast_growth).max(want)
            }
            .ln();
            if blip && self.rest.is_some() {
                // Resting beside the optimum: step up and rest there (a new reference
                // level), rather than restart the probing for a queue of a few.
                self.rest = Some(Rest::new(1));
            } else {
                self.wake();
            }
        } else if self.rest.is_some() {
            self.watch(m);
        } else {
            self.spsa(m, &mut theta, dims);
        }
        // Below the workers in use, RT is on the cliff of the accept queue: keep the search
        // (and its minus perturbation) above them.
        let floor = (m.busy_workers * (1.0 + self.p.floor_margin)).max(1.0).ln();
        let resting = self.rest.is_some();
        let low = theta[0] - if resting { 0.0 } else { self.p.perturbation[0] };
        // Idle workers MaxClients keeps alive are trimmed; those of an engine that starts
        // workers on demand, far below MaxClients (`starting`), or that it keeps as spares
        // (MinSpare), are the spare floor's, which a lower MaxClients would not remove -- it
        // would only cap the next burst.
        let spare = current.get(MIN_SPARE).unwrap_or(0) as f64;
        let trim = !starting
            && m.accept_queue_wait_s <= 0.0
            && m.idle_workers - spare > self.p.idle_share * m.busy_workers;
        self.trim_run = if trim { self.trim_run + 1 } else { 0 };
        if holding {
        } else if low < floor && m.cpu_util < self.p.cpu_saturated {
            theta[0] += floor - low;
            if resting {
                self.rest = Some(Rest::new(1)); // the busy workers grew to the knob: the load changed
            }
        } else if trim && (!resting || self.trim_run >= self.p.rest_trim_patience) {
            theta[0] -= self.p.trim_step;
            if resting {
                self.wake();
            }
        }
        self.theta = Some(theta);
        let c = self.p.perturbation.map(|c| c * self.sign());
        let next = (theta[0] + c[0] * self.delta[0]).exp().round().max(1.0) as u64;
        self.proposed = Some(next);
        out.set(MAX_CLIENTS, next);
        if dims == 2 {
            let v = (theta[1] + c[1] * self.delta[1]).exp().round().max(1.0) as u64;
            out.set(KEEPALIVE_TIMEOUT_MS, v);
        }
        out
    }
}
