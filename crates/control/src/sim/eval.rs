//! How a trajectory is scored: against the best static MaxClients of each load phase (found
//! by sweeping the simulator), a run's *penalty* is its mean noise-free page RT in excess
//! of that optimum, relative to it (0.25 = a quarter slower on average over the run), and
//! its *settling time* is when the RT's moving median enters and stays within a band above
//! the optimum for the rest of the phase.

use super::plant::{steady, PlantConfig, Point};
use serde::Serialize;

/// The best static setting for one load level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Optimum {
    pub load: f64,
    pub max_clients: u64,
    pub rt_s: f64,
}

/// Sweep `grid` at the plant's start keep-alive for `load` and return the best point and the
/// whole curve. Seeded apart from the runs it will score.
pub fn optimum(
    cfg: &PlantConfig,
    load: f64,
    grid: &[u64],
    secs: f64,
) -> (Optimum, Vec<(u64, f64)>) {
    let curve: Vec<(u64, f64)> = grid
        .iter()
        .map(|&m| {
            let rt = steady(
                &cfg.model,
                cfg.seed.wrapping_add(7919),
                m,
                cfg.start_keepalive_ms,
                load,
                secs,
            )
            .rt_s;
            (m, rt)
        })
        .collect();
    let best = curve
        .iter()
        .copied()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((0, f64::INFINITY));
    (
        Optimum {
            load,
            max_clients: best.0,
            rt_s: best.1,
        },
        curve,
    )
}

/// A scored run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Score {
    /// Mean of (RT(t) - RT*) / RT* over the run.
    pub penalty: f64,
    /// The same per load phase (after a step change, the last entry).
    pub phase_penalty: Vec<f64>,
    /// Seconds from the start of each phase to settling (None: never settled).
    pub settling_s: Vec<Option<f64>>,
    pub final_max_clients: u64,
    pub final_keepalive_ms: u64,
}

/// Moving-median window (intervals) and band above the optimum used for settling.
pub const SETTLE_WINDOW: usize = 15;
pub const SETTLE_BAND: f64 = 0.25;

/// Score `points` against one optimum per load phase (`optima` in phase order).
pub fn score(points: &[Point], optima: &[Optimum]) -> Score {
    let phase_of = |load: f64| {
        optima
            .iter()
            .position(|o| (o.load - load).abs() < 1e-9)
            .unwrap_or(0)
    };
    let mut penalty = 0.0;
    for p in points {
        let o = optima[phase_of(p.load)];
        penalty += (p.rt_s - o.rt_s) / o.rt_s;
    }
    penalty /= points.len().max(1) as f64;
    let mut settling_s = Vec::new();
    let mut phase_penalty = Vec::new();
    let mut start = 0;
    while start < points.len() {
        let load = points[start].load;
        let end = points[start..]
            .iter()
            .position(|p| p.load != load)
            .map_or(points.len(), |k| start + k);
        let phase = &points[start..end];
        let best = optima[phase_of(load)].rt_s;
        phase_penalty
            .push(phase.iter().map(|p| (p.rt_s - best) / best).sum::<f64>() / phase.len() as f64);
        let limit = best * (1.0 + SETTLE_BAND);
        let t0 = if start == 0 { 0.0 } else { points[start - 1].t };
        // The last window whose median is out of the band; settled after it. Medians, as
        // single intervals of a loaded server spike even at the optimum.
        let averages: Vec<f64> = phase
            .windows(SETTLE_WINDOW.min(phase.len()).max(1))
            .map(|w| {
                let mut v: Vec<f64> = w.iter().map(|p| p.rt_s).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect();
        let settled = match averages.iter().rposition(|a| *a > limit) {
            None => Some(phase[SETTLE_WINDOW.min(phase.len()) - 1].t - t0),
            Some(i) if i + 1 < averages.len() => {
                Some(phase[i + SETTLE_WINDOW.min(phase.len())].t - t0)
            }
            Some(_) => None,
        };
        settling_s.push(settled);
        start = end;
    }
    let last = points.last();
    Score {
        penalty,
        phase_penalty,
        settling_s,
        final_max_clients: last.map_or(0, |p| p.max_clients),
        final_keepalive_ms: last.map_or(0, |p| p.keepalive_ms),
    }
}
