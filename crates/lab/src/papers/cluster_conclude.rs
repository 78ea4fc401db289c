//! `lab cluster`'s claims applied to the rows the bench left: per workload and balancer,
//! the speedups, losses and times C1-C6 judge (`cluster_claims.rs` holds the rules), the
//! CPU ceiling a shared machine puts on scaling, and why a claim was not tested. Apart from
//! the rules so those read, and are tested, on their own; tested here on synthetic rows.

use super::cluster::{label, BALANCERS};
use super::cluster_claims::{c1, c2, c3, c4, c5, c6};
use super::Lab;
use crate::analysis::stats::median;
use crate::analysis::verdict::{all_of, Claim, Outcome};
use crate::defaults::cluster as d;
use crate::report::PaperReport;
use crate::run::{Run, CLIENT_BOUND};

fn nodes(r: &Run) -> usize {
    r.x("nodes").unwrap_or(0.0) as usize
}

/// Scaling rows of one workload and balancer, by node count.
fn scaling<'a>(rep: &'a PaperReport, workload: &str, balancer: &str) -> Vec<&'a Run> {
    let mut v =
        rep.runs_where(|r| r.phase == "scaling" && r.size == workload && r.server == balancer);
    v.sort_by_key(|r| nodes(r));
    v
}

/// (largest N, its req/s over one node's, both req/s as text, the rows used).
type Speedup = (usize, f64, String, Vec<String>);

/// The speedup of the largest cluster of `workload` behind `balancer`, or why not.
fn speedup(rep: &PaperReport, workload: &str, balancer: &str) -> Result<Speedup, String> {
    let rows = scaling(rep, workload, balancer);
    let one = rows.iter().find(|r| nodes(r) == 1);
    let top = rows.last().filter(|r| nodes(r) >= 2);
    let (Some(one), Some(top)) = (one, top) else {
        return Err(format!("no 1-node and multi-node {workload} runs"));
    };
    if one.flagged(CLIENT_BOUND) || top.flagged(CLIENT_BOUND) {
        return Err("the load generator was CPU-bound".into());
    }
    if one.rps <= 0.0 {
        return Err("one node served nothing".into());
    }
    Ok((
        nodes(top),
        top.rps / one.rps,
        format!("{:.1} / {:.1} req/s", top.rps, one.rps),
        vec![one.id.clone(), top.id.clone()],
    ))
}

/// Why a claim has no data: the bench did not run (the caveat says why), or was cut short.
fn why(rep: &PaperReport, what: &str) -> String {
    if let Some(c) = rep
        .caveats
        .iter()
        .find(|c| c.starts_with("cluster bench not run"))
    {
        return c.clone();
    }
    if rep.interrupted {
        return "the run was interrupted before these runs".into();
    }
    format!("no {what} runs in the bench's output")
}

/// A claim over the balancers that were measured (each its own outcome, all must hold).
fn per_balancer(
    rep: &PaperReport,
    c: Claim,
    what: &str,
    f: impl Fn(&str) -> Option<(Outcome, String, Vec<String>)>,
) -> Claim {
    let mut outs = Vec::new();
    let mut ours = Vec::new();
    let mut ids = Vec::new();
    for b in BALANCERS {
        if let Some((o, s, r)) = f(b) {
            outs.push(o);
            ours.push(format!("{}: {s}", label(b)));
            ids.extend(r);
        }
    }
    if outs.is_empty() {
        return c.untested(why(rep, what));
    }
    let o = all_of(&outs);
    let c = c.set(o, ours.join("; ")).runs(ids);
    if o == Outcome::NotTested {
        let reason = c.ours.clone();
        c.untested(reason)
    } else {
        c
    }
}

fn scale_claim(rep: &PaperReport, c: Claim, workload: &str, f: fn(usize, f64) -> Outcome) -> Claim {
    per_balancer(rep, c, workload, |b| {
        if scaling(rep, workload, b).is_empty() {
            return None;
        }
        Some(match speedup(rep, workload, b) {
            Ok((n, s, rps, ids)) => (
                f(n, s),
                format!("{n} nodes = {s:.2}x one node ({rps})"),
                ids,
            ),
            Err(e) => (Outcome::NotTested, e, Vec::new()),
        })
    })
}

pub fn conclude(lab: &Lab, rep: &mut PaperReport) {
    let mut claims = Vec::new();
    let c = Claim::new(
        "C1",
        "Bandwidth-bound throughput scales near N x one node",
        &format!("large files on rate-limited node links: the largest cluster's req/s >= {:.0}% of N x one node's (4 nodes: >= {:.1}x), per balancer; <= {:.1}x is no scaling (not reproduced)", d::C1_EFFICIENCY * 100.0, d::C1_EFFICIENCY * 4.0, 1.0 + d::C1_FLAT),
        "issue 16: bandwidth-limited links, large files \"should scale near N x one node\"",
    );
    claims.push(scale_claim(rep, c, "bandwidth", c1));
    let c = Claim::new(
        "C2",
        "CPU-bound work does not scale on 2 CPUs",
        &format!("/_work?cpu_us on unlimited links: the largest cluster's req/s <= {:.1}x one node's, per balancer (written for a {}-CPU machine)", d::C2_MAX_SPEEDUP, d::C2_CPUS),
        "issue 16: CPU-bound work \"cannot scale on 2 CPUs: say so, and show it\"",
    );
    claims.push(if lab.machine.cpus > d::C2_CPUS {
        c.untested(format!(
            "this machine has {} CPUs; the criterion is written for {}",
            lab.machine.cpus,
            d::C2_CPUS
        ))
    } else {
        let c = scale_claim(rep, c, "cpu", c2);
        match ceiling(rep, lab.machine.cpus) {
            Some(n) => c.note(n),
            None => c,
        }
    });
    let c = Claim::new(
        "C3",
        "gearshift's own balancer keeps up with HAProxy at no more CPU per request",
        &format!("every scaling point (both workloads, every N): gearshift's req/s >= {:.0}% of HAProxy's, and the median over the points of gearshift's balancer CPU per request / HAProxy's <= {:.2}", d::C3_MIN_RPS_RATIO * 100.0, d::C3_MAX_CPU_RATIO),
        "issue 16: \"HAProxy vs gearshift's own balancer in front, side by side, CPU per request of the balancer\"",
    );
    claims.push(c3_claim(rep, c));
    let c = Claim::new(
        "C4",
        "A node killed under load loses only the requests it had in flight",
        "3 nodes, bandwidth load, one node frozen and killed: requests failed <= the victim's connections with bytes queued at the kill, per balancer",
        "issue 16: \"only in-flight requests on it may fail\"",
    );
    claims.push(per_balancer(rep, c, "kill", |b| {
        let r = *rep
            .runs_where(|r| r.phase == "kill" && r.server == b)
            .first()?;
        let inflight = r.x("in_flight_at_kill").map(|v| v as u64);
        Some((
            c4(r.failed(), inflight),
            format!(
                "{} of {} lost, {} in flight on the victim",
                r.failed(),
                r.issued,
                inflight.map_or("?".into(), |v| v.to_string())
            ),
            vec![r.id.clone()],
        ))
    }));
    let c = Claim::new(
        "C5",
        "A rolling restart of every node under load loses no request",
        "3 nodes, each drained, restarted and put back in turn under load (large and small files): 0 failed requests, per balancer and workload",
        "issue 16: \"a rolling upgrade of all nodes under load loses no request\"",
    );
    claims.push(per_balancer(rep, c, "reload", |b| {
        let rows = rep.runs_where(|r| r.phase == "reload" && r.server == b);
        if rows.is_empty() {
            return None;
        }
        let outs: Vec<Outcome> = rows.iter().map(|r| c5(r.failed())).collect();
        let s: Vec<String> = rows
            .iter()
            .map(|r| format!("{} of {} lost ({})", r.failed(), r.issued, r.size))
            .collect();
        Some((
            all_of(&outs),
            s.join(", "),
            rows.iter().map(|r| r.id.clone()).collect(),
        ))
    }));
    let c = Claim::new(
        "C6",
        "A killed node is ejected, and once restarted serves again, within seconds",
        &format!("kill to ejection <= {} ms where the balancer reports it (HAProxy's status), and restart to the node's first answer through the balancer <= {} ms", d::C6_EJECT_MS, d::C6_RECOVER_MS),
        "issue 16: \"a node killed under load (requests lost, time to eject, time to recover)\"",
    );
    claims.push(per_balancer(rep, c, "kill", |b| {
        let r = *rep
            .runs_where(|r| r.phase == "kill" && r.server == b)
            .first()?;
        let eject = r.x("eject_ms").map(|v| v as u64);
        let recover = r.x("recover_ms").map(|v| v as u64);
        Some((
            c6(eject, recover),
            format!(
                "ejected after {}, serving again {} after the restart began",
                eject.map_or("(not reported: passive health)".into(), |v| format!(
                    "{v} ms"
                )),
                recover.map_or("never (10 s bound)".into(), |v| format!("{v} ms"))
            ),
            vec![r.id.clone()],
        ))
    }));
    rep.claims = claims;
    super::cluster_figures::figures(rep, lab.machine.cpus);
}

/// Where the CPU-bound points stand against the machine's ceiling: CPUs / the nodes' CPU
/// per request (median over the CPU-bound runs).
fn ceiling(rep: &PaperReport, cpus: usize) -> Option<String> {
    let rows = rep.runs_where(|r| r.phase == "scaling" && r.size == "cpu");
    let us = median(
        &rows
            .iter()
            .filter_map(|r| r.x("nodes_cpu_us_per_req"))
            .filter(|v| *v > 0.0)
            .collect::<Vec<_>>(),
    )?;
    let top = rows.iter().map(|r| r.rps).fold(0.0, f64::max);
    let cap = cpus as f64 * 1e6 / us;
    (cpus > 0).then(|| format!("The nodes spend {us:.0} us of CPU per request, so {cpus} CPUs cap any cluster here near {cap:.0} req/s; the best CPU-bound point reached {top:.0} req/s ({:.0}% of it), the rest going to the balancer, the load generator and the other jobs on the box.", top / cap * 100.0))
}

fn c3_claim(rep: &PaperReport, c: Claim) -> Claim {
    let [gs, ha] = ["gearshift", "haproxy"];
    let mut pairs = Vec::new();
    let mut ids = Vec::new();
    for g in rep.runs_where(|r| r.phase == "scaling" && r.server == gs) {
        let Some(h) = rep
            .runs_where(|r| {
                r.phase == "scaling" && r.server == ha && r.size == g.size && nodes(r) == nodes(g)
            })
            .first()
            .copied()
        else {
            continue;
        };
        if g.flagged(CLIENT_BOUND) || h.flagged(CLIENT_BOUND) {
            continue;
        }
        let cpu = |r: &Run| r.x("balancer_cpu_us_per_req").unwrap_or(0.0);
        pairs.push((g.rps, h.rps, cpu(g), cpu(h)));
        ids.extend([g.id.clone(), h.id.clone()]);
    }
    let mut ns: Vec<usize> = rep
        .runs_where(|r| ids.contains(&r.id))
        .iter()
        .map(|r| nodes(r))
        .collect();
    ns.sort();
    ns.dedup();
    if !pairs.is_empty() && ns.len() < 2 {
        return c.untested(format!(
            "both balancers measured at {} node count(s) only; the criterion is over every N",
            ns.len()
        ));
    }
    if pairs.is_empty() {
        let missing = if rep.runs.iter().any(|r| r.server == ha) {
            why(rep, "scaling")
        } else if rep
            .caveats
            .iter()
            .any(|c| c.starts_with("HAProxy not tested"))
        {
            rep.caveats
                .iter()
                .find(|c| c.starts_with("HAProxy not tested"))
                .cloned()
                .unwrap_or_default()
        } else {
            why(rep, "HAProxy scaling")
        };
        return c.untested(missing);
    }
    let (o, low, mid) = c3(&pairs);
    c.set(
        o,
        format!(
            "{} points: lowest req/s ratio gearshift/HAProxy {low:.2}; median balancer CPU per request ratio {mid:.2}",
            pairs.len()
        ),
    )
    .runs(ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Outcome::*;

    fn run(id: &str, phase: &str, size: &str, server: &str, n: usize, rps: f64) -> Run {
        let mut r = Run {
            id: id.into(),
            phase: phase.into(),
            size: size.into(),
            server: server.into(),
            rps,
            ..Run::default()
        };
        r.extra.insert("nodes".into(), n as f64);
        r.extra.insert("balancer_cpu_us_per_req".into(), 50.0);
        r.extra.insert("nodes_cpu_us_per_req".into(), 2000.0);
        r
    }

    fn claim(rep: &PaperReport, id: &str) -> Claim {
        rep.claims.iter().find(|c| c.id == id).unwrap().clone()
    }

    #[test]
    fn conclude_from_rows() {
        let mut rep = PaperReport::default();
        for (i, (size, b, n, rps)) in [
            ("bandwidth", "haproxy", 1, 10.0),
            ("bandwidth", "haproxy", 4, 44.0),
            ("bandwidth", "gearshift", 1, 10.0),
            ("bandwidth", "gearshift", 4, 30.0),
            ("cpu", "haproxy", 1, 640.0),
            ("cpu", "haproxy", 4, 680.0),
            ("cpu", "gearshift", 1, 600.0),
            ("cpu", "gearshift", 4, 730.0),
        ]
        .into_iter()
        .enumerate()
        {
            rep.runs
                .push(run(&format!("cluster-{i}"), "scaling", size, b, n, rps));
        }
        let mut k = run("cluster-9", "kill", "bandwidth", "haproxy", 3, 28.0);
        k.err_reset = 2;
        k.extra.insert("in_flight_at_kill".into(), 1.0);
        k.extra.insert("recover_ms".into(), 1200.0);
        rep.runs.push(k);
        rep.runs
            .push(run("cluster-10", "reload", "small", "gearshift", 3, 9000.0));
        let mut lab = crate::papers::tests::lab_for_tests();
        lab.machine.cpus = 2;
        conclude(&lab, &mut rep);
        let v = |id: &str| claim(&rep, id);
        assert_eq!(v("C1").verdict.outcome, Differs, "{}", v("C1").ours);
        assert!(
            v("C1")
                .ours
                .contains("HAProxy: 4 nodes = 4.40x one node (44.0 / 10.0 req/s)"),
            "{}",
            v("C1").ours
        );
        assert_eq!(v("C2").verdict.outcome, Reproduced, "{}", v("C2").ours);
        assert!(
            v("C2").notes.contains("near 1000 req/s") && v("C2").notes.contains("730 req/s (73%"),
            "{}",
            v("C2").notes
        );
        assert_eq!(v("C3").verdict.outcome, Differs, "30/44 req/s at 4 nodes");
        assert_eq!(v("C4").verdict.outcome, Differs, "2 lost, 1 in flight");
        assert_eq!(v("C5").verdict.outcome, Reproduced);
        assert_eq!(v("C6").verdict.outcome, Reproduced);
        assert_eq!(v("C4").runs, vec!["cluster-9".to_string()]);
        assert!(!rep.figures.is_empty());
        // Interrupted after the 1-node runs: C3 has one node count, C1 no speedup.
        rep.runs.retain(|r| nodes(r) == 1);
        conclude(&lab, &mut rep);
        let v = |id: &str| claim(&rep, id);
        assert_eq!(
            v("C3").verdict.outcome,
            NotTested,
            "{}",
            v("C3").verdict.reason
        );
        assert_eq!(
            v("C1").verdict.reason,
            "HAProxy: no 1-node and multi-node bandwidth runs; gearshift: no 1-node and multi-node bandwidth runs"
        );
    }

    #[test]
    fn nothing_measured_is_not_tested_with_the_reason() {
        let mut rep = PaperReport::default();
        rep.caveat("cluster bench not run: network namespaces need root");
        let lab = crate::papers::tests::lab_for_tests();
        conclude(&lab, &mut rep);
        assert_eq!(rep.claims.len(), 6);
        for c in &rep.claims {
            assert_eq!(c.verdict.outcome, NotTested, "{}", c.id);
            assert!(
                c.verdict.reason.contains("need root"),
                "{}: {}",
                c.id,
                c.verdict.reason
            );
        }
    }
}
