//! `keta`: paper 002 section 4.2, the thread allocator of the staged pipeline. The load
//! monitor turns each interval into U = c1 W + c2 R (W bytes/s, R requests/s; Eq. 2) and
//! reads each stage's task-list length T_k. Stages are visited in funnel order (send, data
//! process, receive, accept); a stage with waiting tasks grows to
//! ceil(P_k + a_k T_k + b_k dW) within the total M, and when M is used up threads are
//! transferred from an earlier stage (n < k). When U is low the allocation returns to its
//! initial values. The paper's Eq. (3)-(6) are lost in its text; this is the rule its prose
//! states. `fit_c1_c2` is the offline regression of c1, c2 from recorded samples.

use crate::defaults::keta as d;
use crate::types::{stage_knob, Controller, Knobs, Measurement};
use serde::Deserialize;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KetaParams {
    pub initial: [u64; 4],
    pub max_threads: u64,
    pub a: [f64; 4],
    pub b: [f64; 4],
    pub transfer: u64,
    pub idle_utilisation: f64,
    pub c1: f64,
    pub c2: f64,
    /// A stage "has waiting tasks" when its mean queue length exceeds this.
    pub queue_threshold: f64,
}

impl Default for KetaParams {
    fn default() -> Self {
        KetaParams {
            initial: d::INITIAL_THREADS,
            max_threads: d::MAX_THREADS,
            a: [d::A_K; 4],
            b: [d::B_K; 4],
            transfer: d::TRANSFER,
            idle_utilisation: d::IDLE_UTILISATION,
            c1: d::C1,
            c2: d::C2,
            queue_threshold: 0.5,
        }
    }
}

pub struct Keta {
    p: KetaParams,
    last_w: Option<f64>,
}

impl Keta {
    pub fn new(p: KetaParams) -> Keta {
        Keta { p, last_w: None }
    }

    fn knobs(threads: &[u64; 4]) -> Knobs {
        let mut k = Knobs::new();
        for (i, name) in d::STAGES.iter().enumerate() {
            k.set(&stage_knob(name), threads[i]);
        }
        k
    }
}

impl Controller for Keta {
    fn name(&self) -> &'static str {
        "keta"
    }
    fn step(&mut self, _: Duration, m: &Measurement, current: &Knobs) -> Knobs {
        let dt = m.interval_s.max(1e-9);
        let w = m.bytes_sent as f64 / dt;
        let r = m.completions as f64 / dt;
        let u = self.p.c1 * w + self.p.c2 * r;
        let dw = w - self.last_w.unwrap_or(w);
        self.last_w = Some(w);
        if u < self.p.idle_utilisation {
            return Keta::knobs(&self.p.initial);
        }
        let mut p = [0u64; 4];
        let mut queue = [0.0; 4];
        for (i, name) in d::STAGES.iter().enumerate() {
            p[i] = current.get(&stage_knob(name)).unwrap_or(self.p.initial[i]);
            queue[i] = m
                .stages
                .iter()
                .find(|s| s.name == *name)
                .map_or(0.0, |s| s.queue_len);
        }
        for k in d::FUNNEL_ORDER {
            if queue[k] <= self.p.queue_threshold {
                continue;
            }
            let want = (p[k] as f64 + self.p.a[k] * queue[k] + self.p.b[k] * dw).ceil();
            let want = (want.max(p[k] as f64) as u64).max(p[k] + 1);
            let others: u64 = p.iter().sum::<u64>() - p[k];
            let room = self.p.max_threads.saturating_sub(others);
            if room > p[k] {
                p[k] = want.min(room);
            } else {
                // M is used up: move threads from the least loaded earlier stage.
                let donor = (0..k)
                    .filter(|&n| p[n] > 1)
                    .min_by(|&x, &y| queue[x].total_cmp(&queue[y]));
                if let Some(n) = donor {
                    let moved = self.p.transfer.min(p[n] - 1);
                    p[n] -= moved;
                    p[k] += moved;
                }
            }
        }
        Keta::knobs(&p)
    }
}

/// One recorded sample for the regression: load W (bytes/s), R (requests/s) and the
/// utilisation U observed (1.0 for the paper's "fully utilised" runs).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FitSample {
    pub w: f64,
    pub r: f64,
    #[serde(default = "one")]
    pub u: f64,
}

fn one() -> f64 {
    1.0
}

/// Least-squares c1, c2 of U = c1 W + c2 R (no intercept, as Eq. 2), from the normal
/// equations. Errors when the samples cannot separate W from R.
pub fn fit_c1_c2(samples: &[FitSample]) -> Result<(f64, f64), String> {
    if samples.len() < 2 {
        return Err(format!("need at least 2 samples, got {}", samples.len()));
    }
    let (mut ww, mut wr, mut rr, mut wu, mut ru) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for s in samples {
        ww += s.w * s.w;
        wr += s.w * s.r;
        rr += s.r * s.r;
        wu += s.w * s.u;
        ru += s.r * s.u;
    }
    let det = ww * rr - wr * wr;
    if det.abs() <= 1e-12 * ww * rr || det.is_nan() {
        return Err("samples are collinear in (W, R): vary object sizes and load".into());
    }
    Ok(((wu * rr - ru * wr) / det, (ru * ww - wu * wr) / det))
}
