//! Paper 001's claims applied to a run: reads the sweeps' RT curves and the controller
//! runs from the report, judges B1-B8 with the rules of `p001_claims.rs` (says why a claim
//! was not tested), and adds the figures. Apart from the rules so those read, and are
//! tested, on their own.

use super::common::why_missing;
use super::p001::{APACHE, GS};
use super::p001_claims::{
    argmin, b1, b2, b3, b4, b5, b6, b7, b8, client_curve, curve, model_rt_ms, steps, Curve,
};
use super::Lab;
use crate::analysis::verdict::{Claim, Outcome};
use crate::defaults::p001 as d;
use crate::report::PaperReport;
use crate::run::Run;

fn ids(v: &[&Run]) -> Vec<String> {
    v.iter().map(|r| r.id.clone()).collect()
}

/// A controller run's steady RT: Eq. 1 over the last third (gs-prefork's sensors).
const STEADY: &str = "steady_eq1_ms";

fn control(rep: &PaperReport, tag: &str) -> Option<Run> {
    rep.runs
        .iter()
        .find(|r| r.phase == format!("control-{tag}"))
        .cloned()
}

pub fn conclude(lab: &Lab, rep: &mut PaperReport) {
    let mut claims = Vec::new();
    let (l1, l2, a1) = (
        curve(rep, GS, "L1-sweep"),
        curve(rep, GS, "L2-sweep"),
        curve(rep, APACHE, "L1-sweep"),
    );
    let best = |c: &Curve| argmin(c).map(|i| c[i].0);
    let quick_l1 = if lab.quick {
        "quick mode runs L2 only"
    } else {
        "no L1 sweep"
    };
    let client = |c: &Curve| {
        c.iter()
            .map(|p| format!("{:.0}: {:.1}", p.0, p.1))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let c = Claim::new("B1", "RT is concave upward in MaxClients", "on L2, gs-prefork's RT = AQT + BL x ST (Eq. 1): the minimum is interior and both ends are >= 2x the minimum (a left branch alone: differs, \"left reproduced, right differs\")", "Fig. 4: \"pronounced concave upward\"");
    claims.push(match b1(&l2) {
        (Outcome::NotTested, why) => c.untested(why),
        (o, s) => c
            .set(o, s)
            .note(format!(
                "Client-side mean latency (ms) by MaxClients: {}.",
                client(&client_curve(rep, GS, "L2-sweep"))
            ))
            .runs(ids(&steps(rep, GS, "L2-sweep"))),
    });
    for (id, cv, server) in [("B2", &l1, GS), ("B2·apache", &a1, APACHE)] {
        let how = if server == GS {
            "gs-prefork's Eq. 1 RT (AQT + BL x ST)"
        } else {
            "the client's mean latency (Apache has no AQT sensor)"
        };
        let c = Claim::new(id, "MaxClients has more than a ten-fold effect on RT", &format!("on L1, {how}: max RT / min RT over the MaxClients steps >= 10 (below 1.2: no effect; between: differs)"), "Fig. 4: in excess of a ten-fold effect");
        claims.push(match b2(cv) {
            (Outcome::NotTested, _) => c.untested(
                if server == APACHE && rep.runs.iter().all(|r| r.server != APACHE) {
                    why_missing(lab, rep, APACHE)
                } else {
                    quick_l1.into()
                },
            ),
            (o, r) => c
                .set(
                    o,
                    format!(
                        "max/min {r:.1} over MaxClients {}",
                        cv.iter()
                            .map(|p| format!("{:.0}: {:.1} ms", p.0, p.1))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .runs(ids(&steps(rep, server, "L1-sweep"))),
        });
    }
    let c = Claim::new("B3", "The M/M/m/K/N model overestimates RT but tracks its shape", "on L1: model above gs-prefork's measured page RT (AQT + BL x ST) at >= 80% of the steps, Spearman >= 0.8 (Eq. 1 RT)", "Fig. 6: the model consistently overestimates, sometimes by a large amount, but tracks");
    let st: Vec<(f64, f64, f64)> = steps(rep, GS, "L1-sweep")
        .iter()
        .filter_map(|r| Some((r.conc as f64, r.x("st_ms")?, r.x("eq1_rt_ms")?)))
        .collect();
    let model: Vec<f64> = st
        .iter()
        .map(|p| {
            model_rt_ms(
                p.0 as u64,
                p.1 / 1e3,
                d::L1_KEEPALIVE_MS as f64 / 1e3,
                1.0 / d::L1_SESSION_INTERVAL_S,
            )
        })
        .collect();
    claims.push(
        match b3(&model, &st.iter().map(|p| p.2).collect::<Vec<_>>()) {
            (Outcome::NotTested, why) => c.untested(if l1.is_empty() {
                quick_l1.to_string()
            } else {
                why
            }),
            (o, s) => c.set(o, s).runs(ids(&steps(rep, GS, "L1-sweep"))),
        },
    );
    let c = Claim::new("B4", "RT is lowest where the CPU saturates, and the dynamic knee is below the static one", "on L2 the RT minimum within one grid step of the first MaxClients with server CPU >= 90% of its core, and L2's best MaxClients below L1's", "Fig. 10 (dynamic): RT falls from 200 to 400 where CPU is about 100%; Fig. 11 (static): knee at about 800");
    let l2cpu: Vec<(f64, f64, f64)> = steps(rep, GS, "L2-sweep")
        .iter()
        .filter_map(|r| {
            Some((
                r.conc as f64,
                r.x("eq1_rt_ms")?,
                r.x("cpu_share").unwrap_or(0.0),
            ))
        })
        .collect();
    claims.push(match b4(&l2cpu, best(&l1)) {
        (Outcome::NotTested, why) => c.untested(if l2cpu.is_empty() {
            why
        } else {
            format!("{why}: {quick_l1}")
        }),
        (o, s) => c.set(o, s).runs(ids(&steps(rep, GS, "L2-sweep"))),
    });
    let c = Claim::new("B5", "The heuristic converges faster than fuzzy control; fuzzy's steady RT is as low or lower", "static (L1): saturation converges in fewer intervals than fuzzy and their steady RTs within 10%; the dynamic half (fuzzy <= heuristic on L2) needs --extended", "Fig. 14: heuristic about 2 min, fuzzy about 14 min (x7), fuzzy lower RT (dynamic); Fig. 15: heuristic faster, RT about equal (static)");
    claims.push(match (control(rep, "saturation"), control(rep, "fuzzy")) {
        (Some(s), Some(f)) if s.x("converged_interval").is_some() && f.x("converged_interval").is_some() => {
            let (cs, cf) = (s.x("converged_interval").unwrap(), f.x("converged_interval").unwrap());
            let (rs, rf) = (s.x(STEADY).unwrap_or(f64::NAN), f.x(STEADY).unwrap_or(f64::NAN));
            let dynamic = match (control(rep, "L2-saturation"), control(rep, "L2-fuzzy")) {
                (Some(a), Some(b)) => format!("; L2 (dynamic): fuzzy {:.1} ms vs saturation {:.1} ms", b.x(STEADY).unwrap_or(f64::NAN), a.x(STEADY).unwrap_or(f64::NAN)),
                _ => "; the dynamic half is not tested (run with --extended)".into(),
            };
            c.set(b5(cs, cf, rs, rf), format!("converged after {cs:.0} (saturation) and {cf:.0} (fuzzy) intervals of 250 ms (ratio {:.1}); steady RT {rs:.1} vs {rf:.1} ms{dynamic}", cf / cs.max(1.0))).runs([s.id, f.id])
        }
        _ => c.untested(if lab.quick { "quick mode runs the saturation controller only".to_string() } else { "no saturation and fuzzy runs".to_string() }),
    });
    let c = Claim::new("B6", "Newton's method is inconsistent between runs", "two Newton runs (two load seeds) end > 25% apart in MaxClients or > 1.5x apart in steady RT", "Fig. 13: run 1 and run 2 differ");
    claims.push(match (control(rep, "newton-1"), control(rep, "newton-2")) {
        (Some(a), Some(b)) => {
            let (m1, m2, r1, r2) = (
                a.x("final_mc").unwrap_or(0.0),
                b.x("final_mc").unwrap_or(0.0),
                a.x(STEADY).unwrap_or(0.0),
                b.x(STEADY).unwrap_or(0.0),
            );
            c.set(
                b6(m1, m2, r1, r2),
                format!("final MaxClients {m1:.0} and {m2:.0}; steady RT {r1:.1} and {r2:.1} ms"),
            )
            .runs([a.id, b.id])
        }
        _ => c.untested(if lab.quick {
            "quick mode has no Newton runs"
        } else {
            "fewer than two Newton runs"
        }),
    });
    let c = Claim::new("B7", "Online optimisation beats the static default by 10x or more", "steady RT of the default scheme (apache controller at MaxClients 150) over each of newton (better seed), fuzzy and saturation: all >= 10", "abstract: a factor of 10 or more in all cases");
    claims.push(match control(rep, "apache") {
        Some(def) => {
            let ctrl: Vec<(String, f64)> =
                ["newton-1", "newton-2", "fuzzy", "saturation", "gearshift"]
                    .iter()
                    .filter_map(|t| Some((t.to_string(), control(rep, t)?.x(STEADY)?)))
                    .collect();
            let newton = ctrl
                .iter()
                .filter(|c| c.0.starts_with("newton"))
                .map(|c| c.1)
                .fold(f64::INFINITY, f64::min);
            let papers: Vec<f64> = ctrl
                .iter()
                .filter(|c| c.0 == "fuzzy" || c.0 == "saturation")
                .map(|c| c.1)
                .chain(newton.is_finite().then_some(newton))
                .collect();
            let drt = def.x(STEADY).unwrap_or(f64::NAN);
            let (o, worst) = b7(drt, &papers);
            let detail = ctrl
                .iter()
                .map(|c| format!("{} {:.1}x", c.0, drt / c.1))
                .collect::<Vec<_>>()
                .join(", ");
            let sweep = match (
                l1.iter().find(|p| p.0 == 150.0),
                l1.iter().map(|p| p.1).reduce(f64::min),
            ) {
                (Some(p), Some(m)) => format!(" Sweep: RT at 150 / best = {:.1}.", p.1 / m),
                _ => String::new(),
            };
            c.set(
                o,
                format!(
                    "default {drt:.1} ms; ratios {detail} (worst of the paper's three {worst:.1})"
                ),
            )
            .note(sweep)
        }
        None => c.untested(if lab.quick {
            "quick mode has no default-scheme run"
        } else {
            "no apache (default scheme) run"
        }),
    });
    let c = Claim::new(
        "B8",
        "The best MaxClients depends on the workload",
        "best MaxClients on L1 and on L2 at least 1.5x apart",
        "Table I: best 650 (dynamic), 900 (dynamic + static)",
    );
    claims.push(match (best(&l1), best(&l2)) {
        (Some(a), Some(b)) => c.set(b8(a, b), format!("best MaxClients L1 {a:.0}, L2 {b:.0}")),
        _ => c.untested(quick_l1),
    });
    rep.claims = claims;
    super::p001_figures::figures(lab, rep);
}
