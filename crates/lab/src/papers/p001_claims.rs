//! Paper 001's claims B1-B8 (spec section 2) as pure functions of RT-against-MaxClients
//! curves and controller runs, each unit-tested on synthetic data, and the M/M/m/K/N
//! overlay (crates/control's model fed with the measured service time); their application
//! to a run is in `p001_conclude.rs`.

use crate::analysis::stats::spearman;
use crate::analysis::verdict::{all_of, Outcome};
use crate::defaults::p001 as d;
use crate::report::PaperReport;
use crate::run::Run;
use gearshift_control::sim::analytic::{mmmkn, page_service_rate};

/// (MaxClients, RT ms) sorted by MaxClients.
pub type Curve = Vec<(f64, f64)>;

pub fn steps<'a>(rep: &'a PaperReport, server: &str, phase: &str) -> Vec<&'a Run> {
    let mut v = rep.runs_where(|r| r.server == server && r.phase == phase);
    v.sort_by_key(|r| r.conc);
    v
}

/// The client's mean per-request latency (time-outs at 15 s) per step.
pub fn client_curve(rep: &PaperReport, server: &str, phase: &str) -> Curve {
    steps(rep, server, phase)
        .iter()
        .filter(|r| r.requests + r.err_timeout > 0)
        .map(|r| (r.conc as f64, r.mean_to_ms))
        .collect()
}

/// The paper's RT per step: gs-prefork's Eq. 1 (AQT + BL x ST) where the server measured
/// it, else (Apache) the client's latency. Inside one stepped run the client's mean misses
/// the requests still queued when a step ends (they complete or time out in later steps),
/// so at small MaxClients it is biased low; Eq. 1 is not.
pub fn curve(rep: &PaperReport, server: &str, phase: &str) -> Curve {
    let eq1: Curve = steps(rep, server, phase)
        .iter()
        .filter_map(|r| Some((r.conc as f64, r.x("eq1_rt_ms")?)))
        .filter(|p| p.1 > 0.0)
        .collect();
    if eq1.is_empty() {
        client_curve(rep, server, phase)
    } else {
        eq1
    }
}

pub(super) fn argmin(c: &Curve) -> Option<usize> {
    (0..c.len()).min_by(|&a, &b| c[a].1.total_cmp(&c[b].1))
}

/// B1: concave upward: an interior minimum with both ends at least 2x it. A left branch
/// without a right one is "differs" (the spec's expected "left reproduced, right differs").
pub fn b1(c: &Curve) -> (Outcome, String) {
    let Some(i) = argmin(c).filter(|_| c.len() >= 3) else {
        return (Outcome::NotTested, "fewer than 3 steps".into());
    };
    let (min, left, right) = (c[i].1, c[0].1 / c[i].1, c[c.len() - 1].1 / c[i].1);
    let ours = format!(
        "minimum {min:.1} ms at MaxClients {}; left end {left:.2}x, right end {right:.2}x",
        c[i].0
    );
    let interior = i > 0 && i < c.len() - 1;
    let o = if interior && left >= d::B1_ENDS && right >= d::B1_ENDS {
        Outcome::Reproduced
    } else if left >= d::B1_ENDS {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    };
    (o, ours)
}

/// B2: max / min of the curve at least 10 (below 1.2: no effect; between: differs).
pub fn b2(c: &Curve) -> (Outcome, f64) {
    let (lo, hi) = c
        .iter()
        .fold((f64::INFINITY, 0.0f64), |a, p| (a.0.min(p.1), a.1.max(p.1)));
    if c.len() < 2 || lo <= 0.0 {
        return (Outcome::NotTested, f64::NAN);
    }
    let r = hi / lo;
    (
        if r >= d::B2_RATIO {
            Outcome::Reproduced
        } else if r < 1.2 {
            Outcome::NotReproduced
        } else {
            Outcome::Differs
        },
        r,
    )
}

/// The model's page RT (ms) at MaxClients `m` with service time `st_s` per request: crates/
/// control's M/M/m/K/N, think 3 s, BL 7, KeepAliveTimeout `ka_s`, K = N, N by Little's law.
pub fn model_rt_ms(m: u64, st_s: f64, ka_s: f64, session_rate: f64) -> f64 {
    let think = 30.0 * d::THINK_SCALE;
    let (bl, len) = (7.0, 8.0);
    let mu = page_service_rate(bl, st_s, ka_s);
    let n = (session_rate * (len / mu + think * (len - 1.0)))
        .round()
        .max(1.0) as usize;
    mmmkn(1.0 / think, mu, m as usize, n, n).response_s * 1e3
}

/// B3: the model above the measurement at >= 80% of the steps, rank-correlated >= 0.8.
pub fn b3(model: &[f64], measured: &[f64]) -> (Outcome, String) {
    if model.len() < 3 || model.len() != measured.len() {
        return (
            Outcome::NotTested,
            "fewer than 3 steps with server sensors".into(),
        );
    }
    let above = model.iter().zip(measured).filter(|(m, x)| m > x).count();
    let rho = spearman(model, measured).unwrap_or(0.0);
    let share = above as f64 / model.len() as f64;
    let o = if share >= d::B3_SHARE && rho >= d::B3_SPEARMAN {
        Outcome::Reproduced
    } else if share < 1.0 - d::B3_SHARE {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    };
    (
        o,
        format!(
            "model above at {above} of {} steps, Spearman {rho:.2}",
            model.len()
        ),
    )
}

/// B4: on the saturating load RT is lowest within one grid step of the first MaxClients
/// whose CPU share reaches saturation, and the dynamic best MaxClients is below the static.
pub fn b4(l2: &[(f64, f64, f64)], best_l1: Option<f64>) -> (Outcome, String) {
    let Some(best) = (0..l2.len()).min_by(|&a, &b| l2[a].1.total_cmp(&l2[b].1)) else {
        return (Outcome::NotTested, "no L2 steps".into());
    };
    let sat = l2.iter().position(|p| p.2 >= d::SATURATED_CPU);
    let part1 = match sat {
        None => Outcome::NotReproduced,
        Some(s) if best.abs_diff(s) <= 1 => Outcome::Reproduced,
        Some(_) => Outcome::Differs,
    };
    let part2 = match best_l1 {
        None => Outcome::NotTested,
        Some(b) if l2[best].0 < b => Outcome::Reproduced,
        Some(_) => Outcome::Differs,
    };
    let ours = format!(
        "L2: lowest RT at MaxClients {}, CPU first >= {:.0}% at {}; static best {}",
        l2[best].0,
        d::SATURATED_CPU * 100.0,
        sat.map_or("none".into(), |s| l2[s].0.to_string()),
        best_l1.map_or("not measured".into(), |b| b.to_string())
    );
    (all_of(&[part1, part2]), ours)
}

/// B5 (static half): the heuristic converges in fewer intervals than fuzzy and their
/// steady RTs are within 10%.
pub fn b5(conv_sat: f64, conv_fuzzy: f64, rt_sat: f64, rt_fuzzy: f64) -> Outcome {
    if conv_sat > conv_fuzzy {
        Outcome::Differs
    } else if conv_sat < conv_fuzzy && (rt_fuzzy / rt_sat - 1.0).abs() <= d::B5_STATIC_EQUAL {
        Outcome::Reproduced
    } else {
        Outcome::NotReproduced
    }
}

/// B6: two Newton runs end more than 25% apart in MaxClients or 1.5x apart in RT.
pub fn b6(mc1: f64, mc2: f64, rt1: f64, rt2: f64) -> Outcome {
    let mc_apart = (mc1 - mc2).abs() > d::B6_MC_APART * mc1.min(mc2);
    let rt_apart = rt1.max(rt2) > d::B6_RT_APART * rt1.min(rt2);
    if mc_apart || rt_apart {
        Outcome::Reproduced
    } else {
        Outcome::NotReproduced
    }
}

/// B7: the default scheme's steady RT over each controller's at least 10 (equal within 10%:
/// not reproduced; a smaller gain, or a controller slower than the default: differs).
pub fn b7(default_rt: f64, controller_rts: &[f64]) -> (Outcome, f64) {
    let worst = controller_rts
        .iter()
        .map(|rt| default_rt / rt)
        .fold(f64::INFINITY, f64::min);
    if controller_rts.is_empty() || !worst.is_finite() {
        (Outcome::NotTested, f64::NAN)
    } else if worst >= d::B7_RATIO {
        (Outcome::Reproduced, worst)
    } else if (1.0 / 1.1..=1.1).contains(&worst) {
        (Outcome::NotReproduced, worst)
    } else {
        // A gain under 10x, or a controller slower than the default (reversed).
        (Outcome::Differs, worst)
    }
}

/// B8: the best MaxClients differs between the loads by at least 1.5x.
pub fn b8(best_l1: f64, best_l2: f64) -> Outcome {
    if best_l1.max(best_l2) >= 1.5 * best_l1.min(best_l2) {
        Outcome::Reproduced
    } else {
        Outcome::NotReproduced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: &[(f64, f64)]) -> Curve {
        v.to_vec()
    }

    #[test]
    fn b1_shapes() {
        assert_eq!(
            b1(&c(&[(16.0, 900.0), (64.0, 100.0), (384.0, 250.0)])).0,
            Outcome::Reproduced
        );
        assert_eq!(
            b1(&c(&[(16.0, 900.0), (64.0, 100.0), (384.0, 130.0)])).0,
            Outcome::Differs,
            "left only"
        );
        assert_eq!(
            b1(&c(&[(16.0, 100.0), (64.0, 100.0), (384.0, 101.0)])).0,
            Outcome::NotReproduced,
            "flat"
        );
        assert_eq!(b1(&c(&[(16.0, 1.0)])).0, Outcome::NotTested);
    }

    #[test]
    fn b2_ratio() {
        assert_eq!(
            b2(&c(&[(50.0, 5000.0), (650.0, 100.0)])).0,
            Outcome::Reproduced
        );
        assert_eq!(b2(&c(&[(50.0, 500.0), (650.0, 100.0)])).0, Outcome::Differs);
        assert_eq!(
            b2(&c(&[(50.0, 105.0), (650.0, 100.0)])).0,
            Outcome::NotReproduced
        );
    }

    #[test]
    fn model_overestimates_and_b3() {
        // The model holds a worker for the keep-alive time: with 1.5 s of it, page RT > 1.5 s.
        let m = model_rt_ms(1200, 0.001, 1.5, 100.0);
        assert!(m > 1500.0, "{m}");
        // Fewer workers than the held sessions need: queueing, a much longer RT.
        assert!(model_rt_ms(150, 0.001, 1.5, 100.0) > 10.0 * m);
        assert_eq!(
            b3(&[9.0, 5.0, 3.0], &[3.0, 2.0, 1.0]).0,
            Outcome::Reproduced
        );
        assert_eq!(
            b3(&[9.0, 5.0, 3.0], &[1.0, 2.0, 3.0]).0,
            Outcome::NotReproduced,
            "above but not tracking"
        );
        assert_eq!(
            b3(&[1.0, 1.0, 1.0], &[3.0, 2.0, 4.0]).0,
            Outcome::Differs,
            "below"
        );
    }

    #[test]
    fn b4_saturation_knee() {
        let l2 = [
            (16.0, 900.0, 0.5),
            (32.0, 300.0, 0.8),
            (64.0, 100.0, 0.95),
            (128.0, 120.0, 0.99),
        ];
        assert_eq!(b4(&l2, Some(650.0)).0, Outcome::Reproduced);
        assert_eq!(
            b4(&l2, Some(32.0)).0,
            Outcome::Differs,
            "dynamic knee above the static one"
        );
        let unsat = [(16.0, 900.0, 0.2), (64.0, 100.0, 0.3)];
        assert_eq!(b4(&unsat, Some(650.0)).0, Outcome::NotReproduced);
        let far = [
            (16.0, 900.0, 0.95),
            (32.0, 300.0, 0.95),
            (64.0, 200.0, 0.95),
            (128.0, 100.0, 0.99),
        ];
        assert_eq!(b4(&far, Some(650.0)).0, Outcome::Differs);
    }

    #[test]
    fn b5_b6_b7_b8_rules() {
        assert_eq!(b5(8.0, 56.0, 100.0, 95.0), Outcome::Reproduced);
        assert_eq!(b5(8.0, 56.0, 100.0, 150.0), Outcome::NotReproduced);
        assert_eq!(b5(60.0, 56.0, 100.0, 95.0), Outcome::Differs);
        assert_eq!(b6(300.0, 600.0, 10.0, 11.0), Outcome::Reproduced);
        assert_eq!(b6(300.0, 320.0, 10.0, 20.0), Outcome::Reproduced);
        assert_eq!(b6(300.0, 320.0, 10.0, 11.0), Outcome::NotReproduced);
        assert_eq!(b7(1000.0, &[50.0, 80.0]).0, Outcome::Reproduced);
        assert_eq!(b7(1000.0, &[50.0, 400.0]).0, Outcome::Differs);
        assert_eq!(b7(100.0, &[100.0, 95.0]).0, Outcome::NotReproduced);
        assert_eq!(
            b7(100.0, &[100.0, 1000.0]).0,
            Outcome::Differs,
            "a controller 10x slower"
        );
        assert_eq!(b7(100.0, &[]).0, Outcome::NotTested);
        assert_eq!(b8(650.0, 128.0), Outcome::Reproduced);
        assert_eq!(b8(650.0, 500.0), Outcome::NotReproduced);
    }
}
