//! Paper 003's claims D1-D7 (spec section 4) as pure functions of sweep points, knees and
//! steady-rate figures, each unit-tested on synthetic data, and their application to a run.

use super::common::needs;
use super::p003::{APACHE, GS_EVENT, GS_PREFORK, NGINX, NGINX_BIG, NODE};
use super::Lab;
use crate::analysis::knee::{knee, SweepPoint};
use crate::analysis::verdict::{all_of, expect_above, ratio_in_band, Claim, Outcome};
use crate::defaults::p003 as d;
use crate::report::PaperReport;
use crate::run::Run;

pub fn points(rep: &PaperReport, server: &str) -> Vec<SweepPoint> {
    let mut v: Vec<SweepPoint> = rep
        .runs_where(|r| r.server == server && r.phase == "sweep")
        .iter()
        .map(|r| SweepPoint {
            c: r.conc,
            issued: r.issued.max(r.requests + r.errors()),
            failed: r.failed() + r.incomplete,
            throughput: r.rps,
        })
        .collect();
    v.sort_by_key(|p| p.c);
    v
}

pub fn peak(p: &[SweepPoint]) -> f64 {
    p.iter().map(|x| x.throughput).fold(0.0, f64::max)
}

/// A knee as a number: no stable point at all counts as 0.
pub fn knee_or_zero(p: &[SweepPoint]) -> f64 {
    knee(p).unwrap_or(0) as f64
}

/// D1: knees ordered Apache < Node < nginx (a reversed pair differs; a tie is no effect).
pub fn d1(apache: f64, node: f64, nginx: f64) -> Outcome {
    let pairs = [(apache, node), (node, nginx)];
    if pairs.iter().all(|(a, b)| a < b) {
        Outcome::Reproduced
    } else if pairs.iter().any(|(a, b)| a > b) {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    }
}

/// D2: both knee ratios within +-30% of the paper's 1.43 and 2.86.
pub fn d2(apache: f64, node: f64, nginx: f64) -> (Outcome, String) {
    let r1 = if node > 0.0 {
        nginx / node
    } else {
        f64::INFINITY
    };
    let r2 = if apache > 0.0 {
        nginx / apache
    } else {
        f64::INFINITY
    };
    let o = all_of(&[
        ratio_in_band(r1, d::KNEE_NGINX / d::KNEE_NODE, d::D2_BAND, 0.05),
        ratio_in_band(r2, d::KNEE_NGINX / d::KNEE_APACHE, d::D2_BAND, 0.05),
    ]);
    // An infinite ratio (a knee at 0) is a large difference, not a missing test.
    let o = if o == Outcome::NotTested {
        Outcome::Differs
    } else {
        o
    };
    (o, format!("nginx/Node {r1:.2}, nginx/Apache {r2:.2}"))
}

/// D3: peak throughput nginx > Node (by 5%) and Node at least 0.9 x Apache.
pub fn d3(apache: f64, node: f64, nginx: f64) -> Outcome {
    let first = expect_above(nginx, node, 0.05);
    let second = if node >= 0.9 * apache {
        Outcome::Reproduced
    } else if apache > node * 1.1 {
        Outcome::Differs
    } else {
        Outcome::NotReproduced
    };
    all_of(&[first, second])
}

/// D4: at Apache's knee the time-outs step up at least 10x to the next point.
pub fn d4(timeouts_by_c: &[(u64, u64)], knee_c: Option<u64>) -> (Outcome, String) {
    let Some(k) = knee_c else {
        return (
            Outcome::NotReproduced,
            "unstable from the smallest C: no step to find".into(),
        );
    };
    let Some(i) = timeouts_by_c.iter().position(|p| p.0 == k) else {
        return (Outcome::NotTested, "knee not on the grid".into());
    };
    let Some(next) = timeouts_by_c.get(i + 1) else {
        return (
            Outcome::NotReproduced,
            format!("stable up to the largest C ({k}): no collapse within the grid"),
        );
    };
    let before = timeouts_by_c[i].1;
    let ratio = next.1 as f64 / before.max(1) as f64;
    let ours = format!("time-outs {before} at C={k}, {} at C={}", next.1, next.0);
    (
        if ratio >= d::D4_STEP {
            Outcome::Reproduced
        } else {
            Outcome::NotReproduced
        },
        ours,
    )
}

/// D5: Node degrades (its knee is inside the grid) without collapsing: every point beyond
/// the knee keeps at least 10% of its peak.
pub fn d5(p: &[SweepPoint]) -> (Outcome, String) {
    let pk = peak(p);
    let k = knee(p);
    let last = p.last().map_or(0, |x| x.c);
    if k == Some(last) {
        return (
            Outcome::NotReproduced,
            format!("stable up to the largest C ({last})"),
        );
    }
    let beyond: Vec<&SweepPoint> = p.iter().filter(|x| Some(x.c) > k).collect();
    let worst = beyond
        .iter()
        .map(|x| x.throughput)
        .fold(f64::INFINITY, f64::min);
    let ours = format!(
        "knee {}, lowest throughput beyond it {:.0} req/s of a {pk:.0} peak",
        k.map_or("none".into(), |k| k.to_string()),
        worst
    );
    (
        if worst >= 0.1 * pk {
            Outcome::Reproduced
        } else {
            Outcome::Differs
        },
        ours,
    )
}

/// D6: at a steady rate nginx answers faster than Apache (by more than 10%) with at least
/// its throughput.
pub fn d6(nginx_rt: f64, apache_rt: f64, nginx_tput: f64, apache_tput: f64) -> Outcome {
    let rt = expect_above(apache_rt, nginx_rt, 0.10);
    let tput = if nginx_tput >= 0.99 * apache_tput {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    };
    all_of(&[rt, tput])
}

/// D7: prefork's RSS grows with its processes (at least 2x over the sweep) while each event
/// server grows less than prefork does.
pub fn d7(prefork_growth: f64, event_growth: &[f64]) -> Outcome {
    if prefork_growth < 2.0 {
        Outcome::NotReproduced
    } else if event_growth.iter().all(|g| *g < prefork_growth) {
        Outcome::Reproduced
    } else {
        Outcome::Differs
    }
}

/// A server's RSS growth over its sweep: the largest per-second RSS over the smallest (the
/// first seconds of the first point, before prefork has forked up to its cap).
fn growth(rep: &PaperReport, server: &str) -> Option<f64> {
    let ids: Vec<&str> = rep
        .runs_where(|r| r.server == server && r.phase == "sweep")
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    let rss: Vec<f64> = rep
        .series
        .iter()
        .filter(|s| ids.contains(&s.run.as_str()))
        .filter_map(|s| s.server_rss_mb)
        .filter(|m| *m > 0.0)
        .collect();
    let (lo, hi) = crate::analysis::stats::min_max(&rss)?;
    Some(hi / lo)
}

fn ids(rep: &PaperReport, servers: &[&str], phase: &str) -> Vec<String> {
    rep.runs_where(|r| servers.contains(&r.server.as_str()) && r.phase == phase)
        .iter()
        .map(|r| r.id.clone())
        .collect()
}

fn steady(rep: &PaperReport, server: &str) -> Option<Run> {
    rep.runs
        .iter()
        .find(|r| r.server == server && r.phase == "steady")
        .cloned()
}

fn knees_claims(lab: &Lab, rep: &PaperReport, nginx_label: &str, suffix: &str) -> Vec<Claim> {
    let mut out = Vec::new();
    let servers = [APACHE, NODE, nginx_label];
    let (a, n, x) = (
        points(rep, APACHE),
        points(rep, NODE),
        points(rep, nginx_label),
    );
    let (ka, kn, kx) = (knee_or_zero(&a), knee_or_zero(&n), knee_or_zero(&x));
    let knees = format!("knees Apache {ka:.0}, Node {kn:.0}, {nginx_label} {kx:.0}");
    let c = Claim::new(&format!("D1{suffix}"), "Stable concurrency orders Apache < Node < nginx", "knee = the largest C that is stable (time-outs + errors <= 1% of issued, throughput >= 80% of the server's peak); knees strictly ordered", "Apache 2800, Node 5600, nginx 8000");
    out.push(match needs(lab, rep, c, &servers) {
        Err(c) => *c,
        Ok(c) => c
            .set(d1(ka, kn, kx), knees.clone())
            .runs(ids(rep, &servers, "sweep")),
    });
    let c = Claim::new(&format!("D2{suffix}"), "nginx reaches 42% more concurrency than Node and 200% more than Apache", "knee ratios nginx/Node and nginx/Apache within +-30% of 1.43 and 2.86 (same order outside the band: differs)", "8000/5600 = 1.43; 8000/2800 = 2.86 (the paper says +200%, really +186%)");
    out.push(match needs(lab, rep, c, &servers) {
        Err(c) => *c,
        Ok(c) => {
            let (o, s) = d2(ka, kn, kx);
            c.set(o, format!("{s} ({knees})"))
                .runs(ids(rep, &servers, "sweep"))
        }
    });
    out
}

pub fn conclude(lab: &Lab, rep: &mut PaperReport) {
    let mut claims = knees_claims(lab, rep, NGINX, "");
    if !lab.quick {
        claims.extend(knees_claims(lab, rep, NGINX_BIG, "·wc20000"));
    }
    let (a, n, x) = (points(rep, APACHE), points(rep, NODE), points(rep, NGINX));
    let c = Claim::new(
        "D3",
        "Peak throughput: nginx > Node >= Apache",
        "peak req/s of the sweep: nginx above Node by more than 5%, Node at least 0.9 x Apache",
        "nginx > 7000 (average), Node about 4300, Apache about 4100 req/s",
    );
    claims.push(match needs(lab, rep, c, &[APACHE, NODE, NGINX]) {
        Err(c) => *c,
        Ok(c) => c
            .set(
                d3(peak(&a), peak(&n), peak(&x)),
                format!(
                    "peaks Apache {:.0}, Node {:.0}, nginx {:.0} req/s",
                    peak(&a),
                    peak(&n),
                    peak(&x)
                ),
            )
            .runs(ids(rep, &[APACHE, NODE, NGINX], "sweep")),
    });
    let c = Claim::new(
        "D4",
        "Apache stops responding at its knee: time-outs burst",
        "time-outs step up at least 10x between Apache's knee and the next grid point",
        "at 2800 Apache does not respond; RT and errors burst",
    );
    claims.push(match needs(lab, rep, c, &[APACHE]) {
        Err(c) => *c,
        Ok(c) => {
            let t: Vec<(u64, u64)> = rep
                .runs_where(|r| r.server == APACHE && r.phase == "sweep")
                .iter()
                .map(|r| (r.conc, r.err_timeout))
                .collect();
            let (o, s) = d4(&t, knee(&a));
            c.set(o, s).runs(ids(rep, &[APACHE], "sweep"))
        }
    });
    let c = Claim::new(
        "D5",
        "Node degrades above its knee without collapsing",
        "Node's knee inside the grid and every point beyond it at >= 10% of its peak throughput",
        "unstable above 5600, does not shut down",
    );
    claims.push(match needs(lab, rep, c, &[NODE]) {
        Err(c) => *c,
        Ok(c) => {
            let (o, s) = d5(&n);
            c.set(o, s).runs(ids(rep, &[NODE], "sweep"))
        }
    });
    let c = Claim::new("D6", "At a steady rate nginx answers faster than Apache with at least its throughput", "mean RT nginx below Apache's by more than 10%, throughput >= 0.99 x Apache's (Poisson, half the lowest peak)", "nginx 0.44 ms vs Apache about 1 ms (2.3x); 4400 vs 3800 req/s");
    claims.push(match (steady(rep, NGINX), steady(rep, APACHE)) {
        (Some(xn), Some(ap)) => c
            .set(
                d6(xn.mean_ms, ap.mean_ms, xn.rps, ap.rps),
                format!(
                    "nginx {:.3} ms at {:.0} req/s, Apache {:.3} ms at {:.0} req/s (ratio {:.2})",
                    xn.mean_ms,
                    xn.rps,
                    ap.mean_ms,
                    ap.rps,
                    ap.mean_ms / xn.mean_ms.max(1e-9)
                ),
            )
            .runs([xn.id, ap.id]),
        _ if lab.quick => c.untested("quick mode has no steady-rate phase"),
        _ => c.untested("no steady-rate runs of nginx and Apache"),
    });
    let c = Claim::new(
        "D6·node",
        "Node: about 40 ms at about 160 req/s under the steady load (expected not to reproduce)",
        "Node's mean RT at least 10x nginx's and its throughput at most 0.1x nginx's",
        "Node 40 ms, 160 req/s (6M requests at 160 req/s would take 10.4 h: suspect)",
    );
    claims.push(match (steady(rep, NGINX), steady(rep, NODE)) {
        (Some(xn), Some(nd)) => {
            let slow = nd.mean_ms >= 10.0 * xn.mean_ms && nd.rps <= 0.1 * xn.rps;
            c.set(
                if slow {
                    Outcome::Reproduced
                } else {
                    Outcome::NotReproduced
                },
                format!(
                    "Node {:.3} ms at {:.0} req/s; nginx {:.3} ms at {:.0} req/s",
                    nd.mean_ms, nd.rps, xn.mean_ms, xn.rps
                ),
            )
            .runs([xn.id, nd.id])
        }
        _ if lab.quick => c.untested("quick mode has no steady-rate phase"),
        _ => c.untested("no steady-rate runs of nginx and Node"),
    });
    for (id, prefork, events) in [
        ("D7", APACHE, vec![NGINX, NODE]),
        ("D7·gs", GS_PREFORK, vec![GS_EVENT]),
    ] {
        let c = Claim::new(id, "Memory grows with processes for prefork and stays flat for the event servers", "peak RSS at the largest C over the smallest: prefork >= 2x, and every event server below prefork's growth", "Apache forks processes until memory runs out; the event servers do not");
        let mut all = vec![prefork];
        all.extend(events.iter().copied());
        claims.push(match needs(lab, rep, c, &all) {
            Err(c) => *c,
            Ok(c) => {
                let pg = growth(rep, prefork).unwrap_or(0.0);
                let eg: Vec<f64> = events.iter().filter_map(|e| growth(rep, e)).collect();
                let text = format!("RSS growth {prefork} {pg:.1}x; {}", events.iter().zip(&eg).map(|(e, g)| format!("{e} {g:.1}x")).collect::<Vec<_>>().join(", "));
                c.set(d7(pg, &eg), text).note("150 processes cannot exhaust 23 GiB: the paper's memory explanation does not hold here.").runs(ids(rep, &all, "sweep"))
            }
        });
    }
    rep.claims = claims;
    super::p003_figures::figures(rep);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: u64, failed: u64, tput: f64) -> SweepPoint {
        SweepPoint {
            c,
            issued: 10_000,
            failed,
            throughput: tput,
        }
    }

    #[test]
    fn d1_orderings() {
        assert_eq!(d1(2800.0, 5600.0, 8000.0), Outcome::Reproduced);
        assert_eq!(d1(19000.0, 19000.0, 19000.0), Outcome::NotReproduced);
        assert_eq!(d1(2800.0, 2000.0, 8000.0), Outcome::Differs);
        assert_eq!(d1(2800.0, 5600.0, 5600.0), Outcome::NotReproduced);
    }

    #[test]
    fn d2_ratio_bands() {
        assert_eq!(d2(2800.0, 5600.0, 8000.0).0, Outcome::Reproduced);
        assert_eq!(
            d2(1000.0, 5600.0, 8000.0).0,
            Outcome::Differs,
            "nginx/Apache 8 outside the band"
        );
        assert_eq!(d2(8000.0, 8000.0, 8000.0).0, Outcome::NotReproduced);
        assert_eq!(d2(0.0, 5600.0, 8000.0).0, Outcome::Differs);
    }

    #[test]
    fn d3_peaks() {
        assert_eq!(d3(4100.0, 4300.0, 7000.0), Outcome::Reproduced);
        assert_eq!(
            d3(4100.0, 3800.0, 7000.0),
            Outcome::Reproduced,
            "Node within 10% of Apache"
        );
        assert_eq!(d3(4100.0, 4300.0, 4350.0), Outcome::NotReproduced);
        assert_eq!(d3(8000.0, 4300.0, 7000.0), Outcome::Differs);
    }

    #[test]
    fn d4_step_at_the_knee() {
        let t = [(1000, 0), (2000, 2), (2800, 500), (4000, 900)];
        assert_eq!(d4(&t, Some(2000)).0, Outcome::Reproduced);
        assert_eq!(
            d4(&[(1000, 10), (2000, 50)], Some(1000)).0,
            Outcome::NotReproduced,
            "5x is gradual"
        );
        assert_eq!(
            d4(&t, Some(4000)).0,
            Outcome::NotReproduced,
            "no point beyond"
        );
        assert_eq!(d4(&t, None).0, Outcome::NotReproduced);
        assert_eq!(d4(&t, Some(3000)).0, Outcome::NotTested);
    }

    #[test]
    fn d5_degrade_without_collapse() {
        let degrading = [
            p(1000, 0, 4000.0),
            p(5600, 0, 4300.0),
            p(8000, 900, 2000.0),
            p(12000, 2000, 1500.0),
        ];
        assert_eq!(d5(&degrading).0, Outcome::Reproduced);
        let collapsing = [p(1000, 0, 4000.0), p(5600, 0, 4300.0), p(8000, 9000, 100.0)];
        assert_eq!(d5(&collapsing).0, Outcome::Differs);
        let fine = [p(1000, 0, 4000.0), p(19000, 0, 4000.0)];
        assert_eq!(d5(&fine).0, Outcome::NotReproduced);
    }

    #[test]
    fn d6_d7_rules() {
        assert_eq!(d6(0.44, 1.0, 4400.0, 3800.0), Outcome::Reproduced);
        assert_eq!(d6(0.98, 1.0, 4400.0, 3800.0), Outcome::NotReproduced);
        assert_eq!(d6(2.0, 1.0, 4400.0, 3800.0), Outcome::Differs);
        assert_eq!(d6(0.44, 1.0, 3000.0, 3800.0), Outcome::Differs);
        assert_eq!(d7(12.0, &[1.2, 3.0]), Outcome::Reproduced);
        assert_eq!(d7(1.5, &[1.2]), Outcome::NotReproduced);
        assert_eq!(d7(3.0, &[4.0]), Outcome::Differs);
    }
}
