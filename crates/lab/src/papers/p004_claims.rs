//! Paper 004's claims E1-E6 (spec section 5) as pure functions of measured requests/s, each
//! unit-tested on synthetic data, and the step that applies them to a run's rows.

use super::common::{self, needs};
use super::p004::{FILES, FORK, PY_FORK, PY_THREAD, THREADS};
use super::Lab;
use crate::analysis::regress::{self, Fit};
use crate::analysis::stats::{cv, median, min_max};
use crate::analysis::verdict::{all_of, Claim, Outcome};
use crate::defaults::p004 as d;
use crate::report::PaperReport;
use crate::run::Run;

/// Median requests/s per concurrency: (c, median, runs).
pub type Curve = Vec<(u64, f64)>;

pub fn curve(runs: &[&Run]) -> Curve {
    let mut cs: Vec<u64> = runs.iter().map(|r| r.conc).collect();
    cs.sort();
    cs.dedup();
    cs.iter()
        .filter_map(|&c| {
            let v: Vec<f64> = runs.iter().filter(|r| r.conc == c).map(|r| r.rps).collect();
            Some((c, median(&v)?))
        })
        .collect()
}

fn at(c: &Curve, x: u64) -> Option<f64> {
    c.iter().find(|p| p.0 == x).map(|p| p.1)
}

/// E1: threaded above forked at every c >= 5, and the ratio at 20 within +-30% of 2.9.
pub fn e1(threaded: &Curve, forked: &Curve) -> (Outcome, String) {
    let pairs: Vec<(u64, f64, f64)> = threaded
        .iter()
        .filter(|p| p.0 >= 5)
        .filter_map(|&(c, t)| Some((c, t, at(forked, c)?)))
        .collect();
    let Some(ratio) = at(threaded, 20).zip(at(forked, 20)).map(|(t, f)| t / f) else {
        return (Outcome::NotTested, "no c = 20 points".into());
    };
    let above = pairs.iter().filter(|p| p.1 > p.2).count();
    let below = pairs.iter().filter(|p| p.2 > p.1).count();
    let ours = format!(
        "threaded above forked at {above} of {} points with c >= 5; ratio at c = 20: {ratio:.2}",
        pairs.len()
    );
    let band = (ratio / d::E1_RATIO - 1.0).abs() <= d::E1_BAND;
    let outcome = if above == pairs.len() && band {
        Outcome::Reproduced
    } else if above == pairs.len() || 2 * below >= pairs.len().max(1) {
        // The same order at another ratio, or the order reversed.
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    };
    (outcome, ours)
}

fn slope(c: &Curve, lo: u64, hi: u64) -> Option<f64> {
    let pts: Vec<&(u64, f64)> = c.iter().filter(|p| p.0 >= lo && p.0 <= hi).collect();
    let x: Vec<f64> = pts.iter().map(|p| p.0 as f64).collect();
    let y: Vec<f64> = pts.iter().map(|p| p.1).collect();
    if x.len() == 2 {
        return Some((y[1] - y[0]) / (x[1] - x[0]));
    }
    regress::fit(&x, &y).map(|f| f.b)
}

/// Plateaued after 5: the slope over 5..20 is under 25% of the slope over 1..5 (or not
/// positive when there was no rise to begin with).
pub fn plateaus(c: &Curve) -> Option<(bool, f64, f64)> {
    let (s1, s2) = (slope(c, 1, 5)?, slope(c, 5, 20)?);
    let flat = if s1 > 0.0 {
        s2 < d::E2_PLATEAU * s1
    } else {
        s2 <= 0.0
    };
    Some((flat, s1, s2))
}

/// E2: forked plateaus while threaded rises to 20.
pub fn e2(threaded: &Curve, forked: &Curve) -> (Outcome, String) {
    let (Some((ff, f1, f2)), Some((tf, t1, t2))) = (plateaus(forked), plateaus(threaded)) else {
        return (Outcome::NotTested, "too few points for the slopes".into());
    };
    let ours = format!(
        "slopes (req/s per client) 1..5 / 5..20: forked {f1:.0} / {f2:.0} ({}), threaded {t1:.0} / {t2:.0} ({})",
        if ff { "plateau" } else { "rising" },
        if tf { "plateau" } else { "rising" }
    );
    let o = match (ff, tf) {
        (true, false) => Outcome::Reproduced,
        (false, true) => Outcome::Differs,
        _ => Outcome::NotReproduced,
    };
    (o, ours)
}

/// E3: threaded varies more than forked above c = 10 (CV over repetitions); a difference
/// under a quarter of the smaller CV is inside the noise.
pub fn e3(cv_threaded: f64, cv_forked: f64) -> Outcome {
    crate::analysis::verdict::expect_above(cv_threaded, cv_forked, 0.25)
}

/// E4: the line fits forked better (higher R² and smaller residual SD) and the fit of the
/// threaded server overestimates what was measured at 60.
pub fn e4(
    forked: &Fit,
    threaded: &Fit,
    threaded_pred60: f64,
    threaded_at60: Option<f64>,
) -> Outcome {
    let better = forked.r2 > threaded.r2 && forked.resid_sd < threaded.resid_sd;
    let worse = forked.r2 < threaded.r2 && forked.resid_sd > threaded.resid_sd;
    let over = threaded_at60.map(|m| threaded_pred60 > m);
    match (better, worse, over) {
        (_, _, None) => Outcome::NotTested,
        (true, _, Some(true)) => Outcome::Reproduced,
        (_, true, _) => Outcome::Differs,
        _ => Outcome::NotReproduced,
    }
}

/// E5: the large file costs about 10% of the requests/s (5-15%); a cost inside the
/// repetitions' spread, or under 5%, is no effect; above 15% it differs.
pub fn e5(cost: f64, spread: f64) -> Outcome {
    if cost.abs() <= spread || cost < d::E5_COST - d::E5_BAND {
        Outcome::NotReproduced
    } else if cost <= d::E5_COST + d::E5_BAND {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    }
}

/// E6: the four rows of the tables in the paper's order (threaded small > threaded large >
/// forked small > forked large).
pub fn e6(ts: f64, tb: f64, fs: f64, fb: f64) -> Outcome {
    if ts > tb && tb > fs && fs > fb {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    }
}

fn sel<'a>(rep: &'a PaperReport, server: &str, size: &str, phases: &[&str]) -> Vec<&'a Run> {
    rep.runs_where(|r| {
        r.server == server && r.size == size && phases.contains(&r.phase.as_str()) && r.tool != "ab"
    })
}

fn ids(runs: &[&Run]) -> Vec<String> {
    runs.iter().map(|r| r.id.clone()).collect()
}

pub fn fit_of(c: &Curve, hi: u64) -> Option<Fit> {
    let pts: Vec<&(u64, f64)> = c.iter().filter(|p| p.0 <= hi).collect();
    regress::fit(
        &pts.iter().map(|p| p.0 as f64).collect::<Vec<_>>(),
        &pts.iter().map(|p| p.1).collect::<Vec<_>>(),
    )
}

pub fn conclude(lab: &Lab, rep: &mut PaperReport) {
    let mut claims = Vec::new();
    let sweep = ["sweep"];
    let curves =
        |rep: &PaperReport, server: &str, size: &str| curve(&sel(rep, server, size, &sweep));
    // E1 for gearshift's pair, the Python pair and the pinned control.
    for (id, t, f, phase) in [
        ("E1", THREADS, FORK, "sweep"),
        ("E1·py", PY_THREAD, PY_FORK, "peer"),
        ("E1·pinned", THREADS, FORK, "pinned"),
    ] {
        let c = Claim::new(id, "The threaded server serves more requests/s than the forked one at every c >= 5, about 2.9x at c = 20", "threaded > forked at every c >= 5 and the c = 20 ratio within +-30% of 2.9 (same order, other ratio: differs)", "2.89x (1000 B), 2.93x (10000 B) at c = 20");
        let c = match needs(lab, rep, c, &[t, f]) {
            Ok(c) => c,
            Err(c) => {
                claims.push(*c);
                continue;
            }
        };
        let files: &[(&str, &str, usize)] = if phase == "pinned" {
            &FILES[..1]
        } else {
            &FILES
        };
        let mut outs = Vec::new();
        let mut ours = Vec::new();
        let mut used = Vec::new();
        for f_ in files {
            let (tr, fr) = (sel(rep, t, f_.1, &[phase]), sel(rep, f, f_.1, &[phase]));
            if tr.is_empty() || fr.is_empty() {
                outs.push(Outcome::NotTested);
                ours.push(format!(
                    "{}: no {phase} runs{}",
                    f_.1,
                    if phase == "sweep" {
                        ""
                    } else {
                        " (full mode only)"
                    }
                ));
                continue;
            }
            if common::client_bound(&tr) || common::client_bound(&fr) {
                outs.push(Outcome::NotTested);
                ours.push(format!("{}: client-bound", f_.1));
                continue;
            }
            let (o, s) = e1(&curve(&tr), &curve(&fr));
            outs.push(o);
            ours.push(format!("{}: {s}", f_.1));
            used.extend(ids(&tr));
            used.extend(ids(&fr));
        }
        let o = all_of(&outs);
        let mut c = c.set(o, ours.join("; ")).runs(used);
        if o == Outcome::NotTested {
            c = c.untested(ours.join("; "));
        }
        claims.push(c);
    }
    // E2 on the sweep.
    let c = Claim::new(
        "E2",
        "Forked plateaus after c = 5 while threaded keeps rising to 20",
        "forked: slope over 5..20 < 25% of its slope over 1..5; threaded: not so",
        "forked flat after about 5; threaded rises sharply",
    );
    claims.push(match needs(lab, rep, c, &[THREADS, FORK]) {
        Err(c) => *c,
        Ok(c) => {
            let mut outs = Vec::new();
            let mut ours = Vec::new();
            for f in FILES {
                let (o, s) = e2(&curves(rep, THREADS, f.1), &curves(rep, FORK, f.1));
                outs.push(o);
                ours.push(format!("{}: {s}", f.1));
            }
            c.set(all_of(&outs), ours.join("; ")).note("On 2 vCPUs shared with the generator a plateau at c = 2-3 may be the box, not the architecture (see the server and client CPU columns).")
        }
    });
    // E3: CV over the three repetitions at c = 20.
    let c = Claim::new("E3", "The threaded server varies more above c = 10", "CV over 3 repetitions at c = 20 (the repeated c above 10): threaded > forked by more than a quarter", "threaded fluctuates beyond c = 10; forked steady");
    claims.push(match needs(lab, rep, c, &[THREADS, FORK]) {
        Err(c) => *c,
        Ok(c) if lab.quick => c.untested("quick mode has no repetitions"),
        Ok(c) => {
            let cv_at = |s: &str| -> Option<f64> {
                let v: Vec<f64> = FILES
                    .iter()
                    .filter_map(|f| {
                        cv(&sel(rep, s, f.1, &sweep)
                            .iter()
                            .filter(|r| r.conc == 20)
                            .map(|r| r.rps)
                            .collect::<Vec<_>>())
                    })
                    .collect();
                crate::analysis::stats::mean(&v)
            };
            match (cv_at(THREADS), cv_at(FORK)) {
                (Some(t), Some(f)) => c.set(
                    e3(t, f),
                    format!(
                        "CV at c = 20 (mean of both files): threaded {:.1}%, forked {:.1}%",
                        t * 100.0,
                        f * 100.0
                    ),
                ),
                _ => c.untested("fewer than 2 repetitions at c = 20"),
            }
        }
    });
    // E4: fits over 1..20, extrapolated to 60.
    let c = Claim::new("E4", "A linear fit suits the forked server better, and extrapolating the threaded fit to 60 overestimates", "forked R² higher and residual SD smaller than threaded's (1000 B, c = 1..20), and the threaded fit's prediction at 60 above the measured value", "regression over 1..20 extrapolated to 60; forked aligned, threaded oversimplified");
    claims.push(match needs(lab, rep, c, &[THREADS, FORK]) {
        Err(c) => *c,
        Ok(c) => {
            let (t, f) = (curves(rep, THREADS, "1000B"), curves(rep, FORK, "1000B"));
            let t60 = median(&sel(rep, THREADS, "1000B", &["extrapolation"]).iter().filter(|r| r.conc == 60).map(|r| r.rps).collect::<Vec<_>>());
            match (fit_of(&f, 20), fit_of(&t, 20)) {
                (Some(ff), Some(tf)) if t60.is_some() => c.set(
                    e4(&ff, &tf, tf.predict(60.0), t60),
                    format!(
                        "forked R² {:.2}, residual SD {:.0}; threaded R² {:.2}, residual SD {:.0}; threaded fit at 60: {:.0} req/s, measured {:.0}",
                        ff.r2, ff.resid_sd, tf.r2, tf.resid_sd, tf.predict(60.0), t60.unwrap_or(0.0)
                    ),
                ),
                _ => c.untested(if lab.quick { "quick mode has no c = 30/40/60 points" } else { "no fit or no c = 60 point" }),
            }
        }
    });
    // E5: the large file's cost at c = 20.
    let c = Claim::new("E5", "The 10000-byte file costs about 10% of the requests/s", "1 - RPS(10000 B)/RPS(1000 B) at c = 20 within 5-15% for both servers (inside the repetitions' spread or under 5%: not reproduced)", "0.894 (forked), 0.905 (threaded): 10.6% and 9.5%");
    claims.push(match needs(lab, rep, c, &[THREADS, FORK]) {
        Err(c) => *c,
        Ok(c) => {
            let mut outs = Vec::new();
            let mut ours = Vec::new();
            for s in [FORK, THREADS] {
                let v = |size: &str| {
                    sel(rep, s, size, &sweep)
                        .iter()
                        .filter(|r| r.conc == 20)
                        .map(|r| r.rps)
                        .collect::<Vec<_>>()
                };
                let (small, big) = (v("1000B"), v("10000B"));
                if let (Some(ms), Some(mb)) = (median(&small), median(&big)) {
                    let spread = match (min_max(&small), min_max(&big)) {
                        (Some((a, b)), Some((x, y))) if small.len() > 1 => {
                            ((b - a) / ms).max((y - x) / mb) / 2.0
                        }
                        _ => 0.0,
                    };
                    let cost = 1.0 - mb / ms;
                    outs.push(e5(cost, spread));
                    ours.push(format!(
                        "{s}: cost {:.1}% (spread +-{:.1}%)",
                        cost * 100.0,
                        spread * 100.0
                    ));
                } else {
                    outs.push(Outcome::NotTested);
                }
            }
            c.set(all_of(&outs), ours.join("; "))
        }
    });
    // E6: the tables' order at c = 20.
    let c = Claim::new(
        "E6",
        "Tables I-II at c = 20: threaded small > threaded large > forked small > forked large",
        "the same order of our four medians at c = 20",
        "5874 > 5317 > 2031 > 1815 req/s",
    );
    claims.push(match needs(lab, rep, c, &[THREADS, FORK]) {
        Err(c) => *c,
        Ok(c) => {
            let m = |s: &str, size: &str| {
                median(
                    &sel(rep, s, size, &sweep)
                        .iter()
                        .filter(|r| r.conc == 20)
                        .map(|r| r.rps)
                        .collect::<Vec<_>>(),
                )
                .unwrap_or(f64::NAN)
            };
            let (ts, tb, fs, fb) = (
                m(THREADS, "1000B"),
                m(THREADS, "10000B"),
                m(FORK, "1000B"),
                m(FORK, "10000B"),
            );
            c.set(
                e6(ts, tb, fs, fb),
                format!("threaded {ts:.0} / {tb:.0}, forked {fs:.0} / {fb:.0} req/s"),
            )
        }
    });
    rep.claims = claims;
    super::p004_figures::figures(rep);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lin(a: f64, b: f64, cs: &[u64]) -> Curve {
        cs.iter().map(|&c| (c, a + b * c as f64)).collect()
    }

    fn plateau(top: f64) -> Curve {
        (1..=20)
            .map(|c| (c, top * (c.min(5) as f64) / 5.0))
            .collect()
    }

    #[test]
    fn e1_order_and_ratio() {
        let cs: Vec<u64> = (1..=20).collect();
        let f = lin(1000.0, 10.0, &cs);
        let t: Curve = f.iter().map(|&(c, v)| (c, v * 2.9)).collect();
        assert_eq!(e1(&t, &f).0, Outcome::Reproduced);
        let t15: Curve = f.iter().map(|&(c, v)| (c, v * 1.5)).collect();
        assert_eq!(e1(&t15, &f).0, Outcome::Differs, "same order, other ratio");
        assert_eq!(e1(&f, &t).0, Outcome::Differs, "reversed");
        let mixed: Curve = f
            .iter()
            .map(|&(c, v)| (c, if c % 3 == 0 { v * 0.99 } else { v * 1.01 }))
            .collect();
        assert_eq!(
            e1(&mixed, &f).0,
            Outcome::NotReproduced,
            "equal within noise"
        );
        assert_eq!(
            e1(&lin(1.0, 1.0, &[1, 2]), &lin(1.0, 1.0, &[1, 2])).0,
            Outcome::NotTested
        );
    }

    #[test]
    fn e2_plateau_against_rise() {
        let cs: Vec<u64> = (1..=20).collect();
        let rising = lin(500.0, 300.0, &cs);
        assert_eq!(e2(&rising, &plateau(2000.0)).0, Outcome::Reproduced);
        assert_eq!(
            e2(&plateau(6000.0), &plateau(2000.0)).0,
            Outcome::NotReproduced,
            "both plateau"
        );
        assert_eq!(e2(&plateau(6000.0), &rising).0, Outcome::Differs);
        let (flat, s1, s2) = plateaus(&plateau(1000.0)).unwrap();
        assert!(flat && s1 > 0.0 && s2.abs() < 1e-9);
    }

    #[test]
    fn e3_e5_e6_thresholds() {
        assert_eq!(e3(0.10, 0.02), Outcome::Reproduced);
        assert_eq!(e3(0.021, 0.02), Outcome::NotReproduced);
        assert_eq!(e3(0.01, 0.05), Outcome::Differs);
        assert_eq!(e5(0.10, 0.01), Outcome::Reproduced);
        assert_eq!(e5(0.02, 0.01), Outcome::NotReproduced, "under 5%");
        assert_eq!(e5(0.08, 0.09), Outcome::NotReproduced, "inside the spread");
        assert_eq!(e5(0.40, 0.01), Outcome::Differs);
        assert_eq!(e6(5874.0, 5317.0, 2030.0, 1814.0), Outcome::Reproduced);
        assert_eq!(e6(5874.0, 1000.0, 2030.0, 1814.0), Outcome::Differs);
    }

    #[test]
    fn e4_fit_quality_and_extrapolation() {
        let x: Vec<f64> = (1..=20).map(f64::from).collect();
        // Forked: a clean line; threaded: a line with big wiggles.
        let fy: Vec<f64> = x.iter().map(|c| 2000.0 + 5.0 * c).collect();
        let ty: Vec<f64> = x
            .iter()
            .enumerate()
            .map(|(i, c)| 2000.0 + 200.0 * c + if i % 2 == 0 { 400.0 } else { -400.0 })
            .collect();
        let (ff, tf) = (
            regress::fit(&x, &fy).unwrap(),
            regress::fit(&x, &ty).unwrap(),
        );
        let p60 = tf.predict(60.0);
        assert_eq!(e4(&ff, &tf, p60, Some(p60 * 0.6)), Outcome::Reproduced);
        assert_eq!(
            e4(&ff, &tf, p60, Some(p60 * 1.2)),
            Outcome::NotReproduced,
            "no overestimate"
        );
        assert_eq!(
            e4(&tf, &ff, p60, Some(p60 * 0.6)),
            Outcome::Differs,
            "threaded fits better"
        );
        assert_eq!(e4(&ff, &tf, p60, None), Outcome::NotTested);
    }

    #[test]
    fn curves_take_medians_of_repetitions() {
        let r = |c: u64, rps: f64| Run {
            conc: c,
            rps,
            ..Run::default()
        };
        let runs = [r(5, 10.0), r(5, 30.0), r(5, 20.0), r(1, 5.0)];
        let refs: Vec<&Run> = runs.iter().collect();
        assert_eq!(curve(&refs), vec![(1, 5.0), (5, 20.0)]);
    }
}
